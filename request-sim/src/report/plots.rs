//! Charts of a run, each written as PNG and SVG:
//! - `ttft_over_time`, `e2el_over_time`: per-request latency against trace time, with a
//!   per-interval median line and failed requests marked on the time axis;
//! - `latency_cdf`: cumulative distributions of TTFT, TPOT, ITL and E2EL;
//! - `throughput_inflight`: output tokens/s, requests sent/completed per second and requests
//!   in flight over the run;
//! - `drift_histogram`: send drift distribution.
//!
//! and of a trace analysis (`request-sim analyze --plot-dir`, [`write_analysis_plots`]):
//! - `trace_cache_capacity`: LRU prefix-cache hit ratio against capacity (log axis) with the
//!   infinite-cache ratio;
//! - `trace_request_rate`: request rate over trace time;
//! - `trace_lengths`: input and output length histograms with CDFs.
//!
//! PNG text uses a bundled DejaVu Sans (no system fonts needed).

use std::path::{Path, PathBuf};

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::accumulator::{end_ms, output_tokens_of, record_tpot};
use super::format::thousands;
use super::stats::percentile_sorted;
use super::Summary;
use crate::record::{Record, Status};

const FONT: &[u8] = include_bytes!("fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
/// Most points drawn in one scatter series (larger runs are thinned evenly).
const MAX_POINTS: usize = 20_000;
/// Most points of one CDF curve.
const CDF_POINTS: usize = 1_000;

type DrawResult = Result<(), String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A chart that can be drawn on any backend.
trait Chart {
    fn size(&self) -> (u32, u32) {
        (1000, 600)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult;
}

fn save<C: Chart>(dir: &Path, name: &str, chart: &C) -> anyhow::Result<Vec<PathBuf>> {
    let png = dir.join(format!("{name}.png"));
    let svg = dir.join(format!("{name}.svg"));
    {
        let root = BitMapBackend::new(&png, chart.size()).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        chart
            .draw(&root)
            .map_err(|e| anyhow::anyhow!("{name}.png: {e}"))?;
        root.present()
            .map_err(|e| anyhow::anyhow!("{name}.png: {e}"))?;
    }
    {
        let root = SVGBackend::new(&svg, chart.size()).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        chart
            .draw(&root)
            .map_err(|e| anyhow::anyhow!("{name}.svg: {e}"))?;
        root.present()
            .map_err(|e| anyhow::anyhow!("{name}.svg: {e}"))?;
    }
    Ok(vec![png, svg])
}

/// Upper axis bound: a little above the maximum, never zero.
fn upper(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.05
    } else {
        1.0
    }
}

fn fmt_num(v: &f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{}k", fmt_num(&(v / 1000.0)))
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Evenly thin `v` to at most `max` items.
fn thin<T: Copy>(v: &[T], max: usize) -> Vec<T> {
    if v.len() <= max {
        return v.to_vec();
    }
    let step = v.len() as f64 / max as f64;
    (0..max).map(|i| v[(i as f64 * step) as usize]).collect()
}

/// Latency of each successful request against its trace time.
struct OverTime {
    title: String,
    y_desc: String,
    /// (trace time s, latency ms), sorted by time.
    points: Vec<(f64, f64)>,
    /// Trace times (s) of failed requests.
    failed: Vec<f64>,
    x_max: f64,
}

impl OverTime {
    fn median_line(&self) -> Vec<(f64, f64)> {
        if self.points.len() < 20 {
            return Vec::new();
        }
        let bins = 60usize.min(self.points.len() / 10).max(1);
        let w = self.x_max / bins as f64;
        let mut buckets: Vec<Vec<f64>> = vec![Vec::new(); bins];
        for (x, y) in &self.points {
            let i = ((x / w) as usize).min(bins - 1);
            buckets[i].push(*y);
        }
        buckets
            .into_iter()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(i, mut b)| {
                b.sort_by(f64::total_cmp);
                ((i as f64 + 0.5) * w, percentile_sorted(&b, 50.0))
            })
            .collect()
    }
}

impl Chart for OverTime {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let y_max = upper(self.points.iter().map(|p| p.1).fold(0.0, f64::max));
        let shown = thin(&self.points, MAX_POINTS);
        let caption = if shown.len() < self.points.len() {
            format!(
                "{} ({} of {} requests drawn)",
                self.title,
                shown.len(),
                self.points.len()
            )
        } else {
            format!("{} ({} requests)", self.title, self.points.len())
        };
        let mut chart = ChartBuilder::on(root)
            .caption(caption, (FAMILY, 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..upper(self.x_max), 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("trace time (s)")
            .y_desc(self.y_desc.as_str())
            .x_label_formatter(&fmt_num)
            .y_label_formatter(&fmt_num)
            .label_style((FAMILY, 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let dot = RGBColor(31, 119, 180).mix(0.45).filled();
        chart
            .draw_series(shown.iter().map(|(x, y)| Circle::new((*x, *y), 2, dot)))
            .map_err(err)?
            .label("request")
            .legend(|(x, y)| Circle::new((x, y), 3, RGBColor(31, 119, 180).filled()));
        let median = self.median_line();
        if !median.is_empty() {
            chart
                .draw_series(LineSeries::new(
                    median,
                    RGBColor(255, 127, 14).stroke_width(3),
                ))
                .map_err(err)?
                .label("median per interval")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x - 8, y), (x + 8, y)], RGBColor(255, 127, 14))
                });
        }
        if !self.failed.is_empty() {
            let red = RED.mix(0.5).filled();
            let mark = y_max * 0.01;
            chart
                .draw_series(
                    thin(&self.failed, MAX_POINTS)
                        .into_iter()
                        .map(|x| TriangleMarker::new((x, mark), 4, red)),
                )
                .map_err(err)?
                .label(format!("failed ({})", self.failed.len()))
                .legend(|(x, y)| TriangleMarker::new((x, y), 5, RED.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FAMILY, 14))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(err)?;
        Ok(())
    }
}

/// CDFs of the four latency metrics, one panel each.
struct Cdfs {
    /// (name, sorted values ms)
    panels: Vec<(String, Vec<f64>)>,
}

impl Chart for Cdfs {
    fn size(&self) -> (u32, u32) {
        (1200, 800)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let root = root.titled("Latency CDFs", (FAMILY, 24)).map_err(err)?;
        let areas = root.split_evenly((2, 2));
        for (area, (name, sorted)) in areas.iter().zip(&self.panels) {
            let n = sorted.len();
            let x_max = upper(sorted.last().copied().unwrap_or(0.0));
            let caption = if n == 0 && name == "ITL" {
                "ITL: no per-chunk values in the records (replay with --record-itl)".to_string()
            } else if n == 0 {
                format!("{name}: no values")
            } else {
                let p = |q| percentile_sorted(sorted, q);
                format!("{name}  (n={n}, p50={:.1}, p99={:.1} ms)", p(50.0), p(99.0))
            };
            let mut chart = ChartBuilder::on(area)
                .caption(caption, (FAMILY, 17))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(50)
                .build_cartesian_2d(0.0..x_max, 0.0..1.0)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc(format!("{name} (ms)"))
                .y_desc("fraction of values")
                .x_label_formatter(&fmt_num)
                .label_style((FAMILY, 13))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(err)?;
            if n == 0 {
                continue;
            }
            // Points at evenly spaced ranks (exact at the ends).
            let k = CDF_POINTS.min(n);
            let mut pts = Vec::with_capacity(k + 1);
            pts.push((sorted[0], 0.0));
            for i in 0..k {
                let r = if k == 1 { n - 1 } else { i * (n - 1) / (k - 1) };
                pts.push((sorted[r], (r + 1) as f64 / n as f64));
            }
            chart
                .draw_series(LineSeries::new(pts, RGBColor(31, 119, 180).stroke_width(2)))
                .map_err(err)?;
            let p99 = percentile_sorted(sorted, 99.0);
            chart
                .draw_series(LineSeries::new(
                    vec![(p99, 0.0), (p99, 1.0)],
                    RED.mix(0.6).stroke_width(1),
                ))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// Throughput and concurrency over the run (wall time since the first send).
struct Throughput {
    bucket_s: f64,
    /// Per bucket: output tokens/s, sent/s, completed/s, peak in flight.
    tokens: Vec<f64>,
    sent: Vec<f64>,
    completed: Vec<f64>,
    inflight: Vec<f64>,
}

impl Chart for Throughput {
    fn size(&self) -> (u32, u32) {
        (1100, 950)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let root = root
            .titled(
                &format!(
                    "Throughput and in-flight requests ({} s buckets)",
                    self.bucket_s
                ),
                (FAMILY, 24),
            )
            .map_err(err)?;
        let panels = root.split_evenly((3, 1));
        let x_max = upper(self.tokens.len() as f64 * self.bucket_s);
        let xs = |v: &[f64]| -> Vec<(f64, f64)> {
            let mut out = Vec::with_capacity(v.len() * 2);
            for (i, y) in v.iter().enumerate() {
                out.push((i as f64 * self.bucket_s, *y));
                out.push(((i + 1) as f64 * self.bucket_s, *y));
            }
            out
        };
        type Series<'a> = Vec<(&'a str, &'a [f64], RGBColor)>;
        let specs: [(&str, &str, Series); 3] = [
            (
                "Output tokens/s",
                "tokens/s",
                vec![("output tokens/s", &self.tokens, RGBColor(31, 119, 180))],
            ),
            (
                "Requests/s",
                "requests/s",
                vec![
                    ("sent/s", &self.sent, RGBColor(44, 160, 44)),
                    ("completed/s", &self.completed, RGBColor(255, 127, 14)),
                ],
            ),
            (
                "Requests in flight (peak per bucket)",
                "in flight",
                vec![("in flight", &self.inflight, RGBColor(148, 103, 189))],
            ),
        ];
        for (area, (title, y_desc, series)) in panels.iter().zip(specs.iter()) {
            let y_max = upper(
                series
                    .iter()
                    .flat_map(|s| s.1.iter())
                    .copied()
                    .fold(0.0, f64::max),
            );
            let mut chart = ChartBuilder::on(area)
                .caption(*title, (FAMILY, 17))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(65)
                .build_cartesian_2d(0.0..x_max, 0.0..y_max)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("time since first send (s)")
                .y_desc(*y_desc)
                .x_label_formatter(&fmt_num)
                .y_label_formatter(&fmt_num)
                .label_style((FAMILY, 13))
                .light_line_style(RGBColor(235, 235, 235))
                .draw()
                .map_err(err)?;
            for (label, values, color) in series {
                let c = *color;
                chart
                    .draw_series(LineSeries::new(xs(values), c.stroke_width(2)))
                    .map_err(err)?
                    .label(*label)
                    .legend(move |(x, y)| PathElement::new(vec![(x - 8, y), (x + 8, y)], c));
            }
            if series.len() > 1 {
                chart
                    .configure_series_labels()
                    .position(SeriesLabelPosition::UpperRight)
                    .label_font((FAMILY, 13))
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .draw()
                    .map_err(err)?;
            }
        }
        Ok(())
    }
}

/// Histogram of send drift.
struct DriftHistogram {
    values: Vec<f64>,
}

impl Chart for DriftHistogram {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let mut sorted = self.values.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let (lo, hi) = if n == 0 {
            (0.0, 1.0)
        } else {
            let lo = sorted[0].min(0.0);
            let hi = sorted[n - 1].max(lo + 0.001);
            (lo, hi)
        };
        let bins = 60usize;
        let w = (hi - lo) / bins as f64;
        let mut counts = vec![0u64; bins];
        for v in &sorted {
            let i = (((v - lo) / w) as usize).min(bins - 1);
            counts[i] += 1;
        }
        let y_max = upper(counts.iter().copied().max().unwrap_or(0) as f64);
        let caption = if n == 0 {
            "Send drift: no request sent".to_string()
        } else {
            format!(
                "Send drift (n={n}, p50={:.3}, p99={:.3}, max={:.3} ms)",
                percentile_sorted(&sorted, 50.0),
                percentile_sorted(&sorted, 99.0),
                sorted[n - 1]
            )
        };
        let mut chart = ChartBuilder::on(root)
            .caption(caption, (FAMILY, 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(lo..lo + w * bins as f64, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("send drift: actual - scheduled send time (ms)")
            .y_desc("requests")
            .y_label_formatter(&fmt_num)
            .x_label_formatter(&|v| format!("{v:.2}"))
            .label_style((FAMILY, 14))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, c)| {
                        let x0 = lo + i as f64 * w;
                        Rectangle::new(
                            [(x0, 0.0), (x0 + w, *c as f64)],
                            RGBColor(31, 119, 180).mix(0.8).filled(),
                        )
                    }),
            )
            .map_err(err)?;
        Ok(())
    }
}

/// Per-bucket series for [`Throughput`] from the records.
fn throughput(records: &[Record]) -> Throughput {
    let start = records
        .iter()
        .filter_map(|r| r.sent_ms)
        .min_by(f64::total_cmp)
        .unwrap_or(0.0);
    let end = records
        .iter()
        .filter_map(end_ms)
        .chain(records.iter().filter_map(|r| r.sent_ms))
        .max_by(f64::total_cmp)
        .unwrap_or(start);
    let span_s = ((end - start) / 1000.0).max(0.001);
    // 1 s buckets, coarser for long runs (at most ~1,000 buckets).
    let bucket_s = if span_s <= 1000.0 {
        1.0
    } else {
        (span_s / 1000.0).ceil()
    };
    let n = (span_s / bucket_s).floor() as usize + 1;
    let idx = |t_ms: f64| ((((t_ms - start) / 1000.0) / bucket_s).max(0.0) as usize).min(n - 1);
    let mut tokens = vec![0.0; n];
    let mut sent = vec![0.0; n];
    let mut completed = vec![0.0; n];
    let mut events: Vec<(f64, i32)> = Vec::new();
    for r in records {
        let Some(s) = r.sent_ms else { continue };
        sent[idx(s)] += 1.0;
        let e = end_ms(r);
        if let Some(e) = e {
            events.push((s, 1));
            events.push((e, -1));
        }
        if r.status != Status::Ok {
            continue;
        }
        if let Some(e) = r.e2e_ms {
            completed[idx(s + e)] += 1.0;
        }
        let Some(ttft) = r.ttft_ms else { continue };
        match &r.itl_ms {
            Some(itl) => {
                let mut t = s + ttft;
                tokens[idx(t)] += 1.0;
                for g in itl {
                    t += g;
                    tokens[idx(t)] += 1.0;
                }
            }
            None => {
                // Spread the output tokens evenly between the first and the last token.
                let out = output_tokens_of(r) as usize;
                let e2e = r.e2e_ms.unwrap_or(ttft);
                for k in 0..out {
                    let f = if out > 1 {
                        k as f64 / (out - 1) as f64
                    } else {
                        0.0
                    };
                    tokens[idx(s + ttft + f * (e2e - ttft))] += 1.0;
                }
            }
        }
    }
    // Peak in flight per bucket: sweep the start/end events in time order.
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut inflight = vec![0.0f64; n];
    let mut cur = 0i64;
    let mut last_bucket = 0usize;
    for (t, d) in events {
        let b = idx(t);
        // Buckets passed without events keep the running level.
        for v in inflight.iter_mut().take(b).skip(last_bucket + 1) {
            *v = v.max(cur as f64);
        }
        cur += d as i64;
        inflight[b] = inflight[b].max(cur as f64);
        last_bucket = last_bucket.max(b);
    }
    for v in tokens
        .iter_mut()
        .chain(sent.iter_mut())
        .chain(completed.iter_mut())
    {
        *v /= bucket_s;
    }
    Throughput {
        bucket_s,
        tokens,
        sent,
        completed,
        inflight,
    }
}

/// ITL values of the records for the CDF; evenly thinned to at most 2 million values.
fn itl_sample(ok: &[&Record]) -> Vec<f64> {
    let total: usize = ok
        .iter()
        .filter_map(|r| r.itl_ms.as_ref())
        .map(Vec::len)
        .sum();
    let stride = total.div_ceil(2_000_000).max(1);
    ok.iter()
        .filter_map(|r| r.itl_ms.as_ref())
        .flatten()
        .step_by(stride)
        .copied()
        .collect()
}

/// Write all plots into `dir` (PNG and SVG of each); returns the files written.
pub fn write_plots(dir: &Path, records: &[Record], _s: &Summary) -> anyhow::Result<Vec<PathBuf>> {
    plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
        .map_err(|_| anyhow::anyhow!("bundled font is invalid"))?;
    let mut files = Vec::new();

    let mut ok: Vec<&Record> = records.iter().filter(|r| r.status == Status::Ok).collect();
    ok.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
    let failed: Vec<f64> = records
        .iter()
        .filter(|r| !matches!(r.status, Status::Ok | Status::DryRun))
        .map(|r| r.timestamp / 1000.0)
        .collect();
    let x_max = records
        .iter()
        .map(|r| r.timestamp / 1000.0)
        .fold(0.0, f64::max);
    for (name, title, y_desc, get) in [
        (
            "ttft_over_time",
            "Time to first token over trace time",
            "TTFT (ms)",
            (|r: &Record| r.ttft_ms) as fn(&Record) -> Option<f64>,
        ),
        (
            "e2el_over_time",
            "End-to-end latency over trace time",
            "E2EL (ms)",
            |r: &Record| r.e2e_ms,
        ),
    ] {
        let chart = OverTime {
            title: title.to_string(),
            y_desc: y_desc.to_string(),
            points: ok
                .iter()
                .filter_map(|r| get(r).map(|v| (r.timestamp / 1000.0, v)))
                .collect(),
            failed: failed.clone(),
            x_max,
        };
        files.extend(save(dir, name, &chart)?);
    }

    let sorted = |mut v: Vec<f64>| {
        v.retain(|x| x.is_finite());
        v.sort_by(f64::total_cmp);
        v
    };
    let cdfs = Cdfs {
        panels: vec![
            (
                "TTFT".to_string(),
                sorted(ok.iter().filter_map(|r| r.ttft_ms).collect()),
            ),
            (
                "TPOT".to_string(),
                sorted(ok.iter().filter_map(|r| record_tpot(r)).collect()),
            ),
            ("ITL".to_string(), sorted(itl_sample(&ok))),
            (
                "E2EL".to_string(),
                sorted(ok.iter().filter_map(|r| r.e2e_ms).collect()),
            ),
        ],
    };
    files.extend(save(dir, "latency_cdf", &cdfs)?);
    files.extend(save(dir, "throughput_inflight", &throughput(records))?);
    let drift = DriftHistogram {
        values: records.iter().filter_map(|r| r.drift_ms).collect(),
    };
    files.extend(save(dir, "drift_histogram", &drift)?);
    Ok(files)
}

// ---------------------------------------------------------------------------------------------
// Trace analysis (`request-sim analyze TRACE --plot-dir DIR`):
// - `trace_cache_capacity`: prefix-cache hit ratio of an LRU cache against its capacity in
//   tokens (log axis), with the infinite-cache ratio as a reference line;
// - `trace_request_rate`: requests per second over trace time;
// - `trace_lengths`: input and output length histograms with their CDFs.

/// "1 request", "12,031 requests".
fn requests(n: usize) -> String {
    match n {
        1 => "1 request".to_string(),
        n => format!("{} requests", thousands(n as u64)),
    }
}

/// Decimal prefix, at most three significant digits: 950, 1k, 2.5k, 93.6M.
fn fmt_si(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// A token count with a binary prefix when it is a small whole multiple of one (16Ki, 128Mi),
/// else with a decimal one (93.6M).
fn fmt_tokens(v: f64) -> String {
    for (unit, suffix) in [(40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")] {
        let q = v / (1u64 << unit) as f64;
        if (1.0..1024.0).contains(&q) && q.fract() == 0.0 {
            return format!("{q}{suffix}");
        }
    }
    fmt_si(v)
}

/// Keep the ascending positions `xs` that are at least `gap` from the previously kept one.
fn spaced(xs: &[f64], gap: f64) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for &x in xs {
        if out.last().is_none_or(|&l| x - l >= gap) {
            out.push(x);
        }
    }
    out
}

/// Round tick positions (1, 2 or 5 × 10^k apart) covering `lo..=hi`, about `n` of them.
fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut out = Vec::new();
    let mut k = (lo / step).ceil();
    while k * step <= hi + step * 1e-9 {
        out.push(k * step);
        k += 1.0;
    }
    out
}

/// log10 positions of 1, 2, 5 × 10^k (bold) and 1..9 × 10^k (light) within `lo..=hi` (log10).
fn log10_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let (mut bold, mut light) = (Vec::new(), Vec::new());
    for e in (lo.floor() as i32)..=(hi.ceil() as i32) {
        for m in 1..10 {
            let x = (f64::from(m) * 10f64.powi(e)).log10();
            if x < lo - 1e-9 || x > hi + 1e-9 {
                continue;
            }
            light.push(x);
            if matches!(m, 1 | 2 | 5) {
                bold.push(x);
            }
        }
    }
    (bold, light)
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    pos: SeriesLabelPosition,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(pos)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// A linear f64 axis with the tick positions given (plotters' `WithKeyPoints` over f64 cannot
/// take a label formatter).
#[derive(Clone)]
struct TickedAxis {
    lo: f64,
    hi: f64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl TickedAxis {
    fn new(lo: f64, hi: f64, bold: Vec<f64>, light: Vec<f64>) -> Self {
        TickedAxis {
            lo,
            hi,
            bold,
            light,
        }
    }
}

impl Ranged for TickedAxis {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        if span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let f = ((v - self.lo) / span).clamp(-10.0, 10.0);
        limit.0 + (f64::from(limit.1 - limit.0) * f + 1e-3).floor() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

const BLUE_: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREEN_: RGBColor = RGBColor(44, 160, 44);
const RED_: RGBColor = RGBColor(214, 39, 40);
const GREY: RGBColor = RGBColor(110, 110, 110);

/// Hit ratio of an LRU cache against its capacity, as in the Mooncake paper's cache-capacity
/// figure; the x axis is log2 of the capacity in tokens.
struct CacheCapacity {
    requests: usize,
    block_size: usize,
    /// (capacity tokens, token hit ratio %), capacity > 0, ascending.
    points: Vec<(f64, f64)>,
    /// Sweep sizes of zero tokens (left out: not on a log axis).
    zero_sizes: usize,
    infinite_pct: f64,
    /// Tokens of all distinct prefix blocks: an LRU cache this large never evicts.
    footprint_tokens: f64,
}

impl Chart for CacheCapacity {
    fn size(&self) -> (u32, u32) {
        (1100, 650)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let xs: Vec<f64> = self.points.iter().map(|p| p.0.log2()).collect();
        let (lo, hi) = match (xs.first(), xs.last()) {
            (Some(&a), Some(&b)) => (a - 0.5, b + 0.5),
            _ => {
                let f = self.footprint_tokens.max(1024.0).log2();
                (f - 1.0, f + 1.0)
            }
        };
        let top = self
            .points
            .iter()
            .map(|p| p.1)
            .fold(self.infinite_pct, f64::max);
        let y_max = ((top * 1.15 / 10.0).ceil() * 10.0).clamp(10.0, 100.0);
        let ticks = spaced(&xs, (hi - lo) / 16.0);
        let mut caption = format!(
            "Prefix-cache hit ratio vs LRU cache capacity ({}, {} tokens per block)",
            requests(self.requests),
            self.block_size
        );
        if self.zero_sizes > 0 {
            caption.push_str(" (size 0 not drawn)");
        }
        let mut chart = ChartBuilder::on(root)
            .caption(caption, (FAMILY, 21))
            .margin(15)
            .margin_right(30)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(
                TickedAxis::new(lo, hi, ticks.clone(), Vec::new()),
                0.0..y_max,
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(format!(
                "LRU cache capacity (tokens, log scale; Ki = 1024, Mi = 1024²; 1 block = {} tokens)",
                self.block_size
            ))
            .y_desc("hit ratio (% of input tokens)")
            .y_max_light_lines(4)
            .x_label_formatter(&|x| fmt_tokens(x.exp2().round()))
            .y_label_formatter(&|y| format!("{y:.0}%"))
            .label_style((FAMILY, 14))
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(RGBColor(242, 242, 242))
            .draw()
            .map_err(err)?;

        let inf = self.infinite_pct;
        chart
            .draw_series(DashedLineSeries::new(
                vec![(lo, inf), (hi, inf)],
                10,
                6,
                RED_.stroke_width(2),
            ))
            .map_err(err)?
            .label(format!("infinite cache: {inf:.2}%"))
            .legend(|(x, y)| {
                PathElement::new(vec![(x - 10, y), (x + 10, y)], RED_.stroke_width(2))
            });
        let f = self.footprint_tokens;
        if f > 0.0 && (lo..=hi).contains(&f.log2()) {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(f.log2(), 0.0), (f.log2(), y_max)],
                    4,
                    4,
                    GREY.stroke_width(1),
                ))
                .map_err(err)?
                .label(format!("all distinct blocks fit: {} tokens", fmt_si(f)))
                .legend(|(x, y)| PathElement::new(vec![(x - 10, y), (x + 10, y)], GREY));
        }
        let pts: Vec<(f64, f64)> = self.points.iter().map(|p| (p.0.log2(), p.1)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), BLUE_.stroke_width(2)))
            .map_err(err)?
            .label("LRU cache")
            .legend(|(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(-10, 0), (10, 0)], BLUE_.stroke_width(2))
                    + Circle::new((0, 0), 4, BLUE_.filled())
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, BLUE_.filled())))
            .map_err(err)?;
        // Value labels on the points that have an axis tick (the others would crowd).
        let style = TextStyle::from((FAMILY, 12).into_font())
            .pos(Pos::new(HPos::Center, VPos::Bottom))
            .color(&BLUE_);
        chart
            .draw_series(pts.iter().filter(|p| ticks.contains(&p.0)).map(|&(x, y)| {
                EmptyElement::at((x, y)) + Text::new(format!("{y:.1}%"), (0, -8), &style)
            }))
            .map_err(err)?;
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    }
}

/// Requests per second over trace time, one bar per rate-series bucket.
struct RateOverTime {
    bucket_s: f64,
    /// (bucket start s, requests/s).
    points: Vec<(f64, f64)>,
    mean: Option<f64>,
    peak: u64,
    peak_at_s: f64,
}

impl Chart for RateOverTime {
    fn size(&self) -> (u32, u32) {
        (1100, 550)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let end_s = self.points.len() as f64 * self.bucket_s;
        let (unit, div) = if end_s <= 900.0 {
            ("s", 1.0)
        } else if end_s <= 48.0 * 3600.0 {
            ("min", 60.0)
        } else {
            ("h", 3600.0)
        };
        let x_max = (end_s / div).max(f64::MIN_POSITIVE);
        let top = self
            .points
            .iter()
            .map(|p| p.1)
            .fold(self.mean.unwrap_or(0.0), f64::max);
        // Headroom above the bars for the legend.
        let y_max = upper(top * 1.3);
        let caption = format!(
            "Request rate over trace time ({} s buckets; peak {} req/s in a 1-s window at {:.0} s)",
            fmt_num(&self.bucket_s),
            self.peak,
            self.peak_at_s
        );
        let mut chart = ChartBuilder::on(root)
            .caption(caption, (FAMILY, 21))
            .margin(15)
            .margin_right(30)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(format!("trace time ({unit})"))
            .y_desc("requests/s")
            .x_label_formatter(&fmt_num)
            .y_label_formatter(&|y| fmt_si(*y))
            .max_light_lines(4)
            .label_style((FAMILY, 14))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(err)?;
        let w = self.bucket_s / div;
        chart
            .draw_series(self.points.iter().map(|&(s, r)| {
                Rectangle::new([(s / div, 0.0), (s / div + w, r)], BLUE_.mix(0.35).filled())
            }))
            .map_err(err)?;
        let mut step = Vec::with_capacity(self.points.len() * 2);
        for &(s, r) in &self.points {
            step.push((s / div, r));
            step.push((s / div + w, r));
        }
        chart
            .draw_series(LineSeries::new(step, BLUE_.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "requests/s per {} s bucket",
                fmt_num(&self.bucket_s)
            ))
            .legend(|(x, y)| {
                Rectangle::new([(x - 10, y - 5), (x + 10, y + 5)], BLUE_.mix(0.5).filled())
            });
        if let Some(m) = self.mean {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, m), (x_max, m)],
                    10,
                    6,
                    ORANGE.stroke_width(2),
                ))
                .map_err(err)?
                .label(format!("mean over the trace: {m:.2} req/s"))
                .legend(|(x, y)| {
                    PathElement::new(vec![(x - 10, y), (x + 10, y)], ORANGE.stroke_width(2))
                });
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

/// One length distribution: histogram (left axis) and CDF (right axis).
struct LengthPanel {
    name: &'static str,
    sorted: Vec<u32>,
    mean: f64,
    /// Bins of equal width on a log10 axis (heavy-tailed prompt lengths), else linear from 0.
    log_x: bool,
}

impl LengthPanel {
    fn pos(&self, v: f64) -> f64 {
        if self.log_x {
            v.max(1.0).log10()
        } else {
            v
        }
    }

    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        const BINS: usize = 50;
        let n = self.sorted.len();
        let (min, max) = match (self.sorted.first(), self.sorted.last()) {
            (Some(&a), Some(&b)) => (f64::from(a), f64::from(b)),
            _ => (0.0, 1.0),
        };
        let (mut lo, mut hi) = if self.log_x {
            (self.pos(min), self.pos(max))
        } else {
            (0.0, max)
        };
        if hi - lo < 1e-9 {
            if self.log_x {
                (lo, hi) = (lo - 0.5, hi + 0.5);
            } else {
                hi = lo + 1.0;
            }
        }
        let w = (hi - lo) / BINS as f64;
        let mut counts = vec![0u64; BINS];
        for &v in &self.sorted {
            let i = ((self.pos(f64::from(v)) - lo) / w).floor().max(0.0) as usize;
            counts[i.min(BINS - 1)] += 1;
        }
        // Headroom above the bars for the legend.
        let y_max = upper((counts.iter().copied().max().unwrap_or(0) as f64 * 1.35).max(4.0));
        let (bold, light) = if self.log_x {
            log10_ticks(lo, hi)
        } else {
            (nice_ticks(lo, hi, 8), Vec::new())
        };
        let pct = |p: f64| {
            let v: Vec<f64> = self.sorted.iter().map(|&x| f64::from(x)).collect();
            percentile_sorted(&v, p)
        };
        let caption = if n == 0 {
            format!("{} length: no requests", self.name)
        } else {
            format!(
                "{} length ({}, max {})",
                self.name,
                requests(n),
                thousands(max as u64)
            )
        };
        let mut chart = ChartBuilder::on(area)
            .caption(caption, (FAMILY, 18))
            .margin(12)
            .margin_right(20)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .right_y_label_area_size(55)
            .build_cartesian_2d(TickedAxis::new(lo, hi, bold, light), 0.0..y_max)
            .map_err(err)?
            .set_secondary_coord(lo..hi, 0.0..1.0);
        let log = self.log_x;
        let lname = self.name.to_lowercase();
        chart
            .configure_mesh()
            .x_desc(if log {
                format!("{lname} length (tokens, log scale)")
            } else {
                format!("{lname} length (tokens)")
            })
            .y_desc("requests per bin")
            .y_max_light_lines(4)
            .x_label_formatter(&|x| {
                if log {
                    fmt_si(10f64.powf(*x).round())
                } else {
                    fmt_si(*x)
                }
            })
            .y_label_formatter(&fmt_num)
            .label_style((FAMILY, 13))
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(RGBColor(243, 243, 243))
            .draw()
            .map_err(err)?;
        chart
            .configure_secondary_axes()
            .y_desc("cumulative fraction of requests")
            .label_style((FAMILY, 13))
            .draw()
            .map_err(err)?;
        if n == 0 {
            return Ok(());
        }
        chart
            .draw_series(
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| **c > 0)
                    .map(|(i, &c)| {
                        let x0 = lo + i as f64 * w;
                        Rectangle::new([(x0, 0.0), (x0 + w, c as f64)], BLUE_.mix(0.55).filled())
                    }),
            )
            .map_err(err)?
            .label(format!("requests per bin ({BINS} bins)"))
            .legend(|(x, y)| {
                Rectangle::new([(x - 10, y - 5), (x + 10, y + 5)], BLUE_.mix(0.55).filled())
            });
        // CDF at evenly spaced ranks (exact at the ends).
        let k = CDF_POINTS.min(n);
        let mut cdf = Vec::with_capacity(k + 1);
        cdf.push((self.pos(min), 0.0));
        for i in 0..k {
            let r = if k == 1 { n - 1 } else { i * (n - 1) / (k - 1) };
            cdf.push((
                self.pos(f64::from(self.sorted[r])),
                (r + 1) as f64 / n as f64,
            ));
        }
        chart
            .draw_secondary_series(LineSeries::new(cdf, BLACK.stroke_width(2)))
            .map_err(err)?
            .label("CDF (right axis)")
            .legend(|(x, y)| {
                PathElement::new(vec![(x - 10, y), (x + 10, y)], BLACK.stroke_width(2))
            });
        for (label, v, color) in [
            (
                format!("mean: {}", thousands(self.mean.round() as u64)),
                self.mean,
                ORANGE,
            ),
            (
                format!("p50: {}", thousands(pct(50.0).round() as u64)),
                pct(50.0),
                GREEN_,
            ),
            (
                format!("p99: {}", thousands(pct(99.0).round() as u64)),
                pct(99.0),
                RED_,
            ),
        ] {
            let x = self.pos(v);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x, 0.0), (x, y_max)],
                    6,
                    4,
                    color.stroke_width(2),
                ))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x - 10, y), (x + 10, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(if log {
                SeriesLabelPosition::UpperLeft
            } else {
                SeriesLabelPosition::MiddleRight
            })
            .label_font((FAMILY, 13))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    }
}

/// Input and output length distributions side by side.
struct Lengths {
    panels: [LengthPanel; 2],
}

impl Chart for Lengths {
    fn size(&self) -> (u32, u32) {
        (1400, 600)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let root = root
            .titled("Request length distributions", (FAMILY, 22))
            .map_err(err)?;
        for (area, panel) in root.split_evenly((1, 2)).iter().zip(&self.panels) {
            panel.draw(area)?;
        }
        Ok(())
    }
}

/// Plots of a trace analysis into `dir` (created if missing), PNG and SVG of each: the
/// cache-capacity curve, the request rate over time and the length distributions. Returns the
/// files written.
pub fn write_analysis_plots(
    dir: &Path,
    a: &crate::trace::analyze::Analysis,
) -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::Context as _;
    plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
        .map_err(|_| anyhow::anyhow!("bundled font is invalid"))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut files = Vec::new();

    let mut points: Vec<(f64, f64)> = a
        .lru_sweep
        .iter()
        .filter(|p| p.capacity_tokens > 0)
        .map(|p| (p.capacity_tokens as f64, p.hit_ratio * 100.0))
        .collect();
    points.sort_by(|x, y| x.0.total_cmp(&y.0));
    points.dedup_by(|x, y| x.0 == y.0);
    let cache = CacheCapacity {
        requests: a.requests,
        block_size: a.block_size,
        points,
        zero_sizes: a
            .lru_sweep
            .iter()
            .filter(|p| p.capacity_tokens == 0)
            .count(),
        infinite_pct: a.prefix_cache.hit_ratio * 100.0,
        footprint_tokens: a.prefix_cache.footprint_tokens as f64,
    };
    files.extend(save(dir, "trace_cache_capacity", &cache)?);

    let rate = RateOverTime {
        bucket_s: a.rate_series.bucket_s,
        points: a
            .rate_series
            .points
            .iter()
            .map(|p| (p.start_s, p.rate_per_s))
            .collect(),
        mean: a.mean_rate_per_s,
        peak: a.peak_rate_per_s,
        peak_at_s: a.peak_rate_at_s,
    };
    files.extend(save(dir, "trace_request_rate", &rate)?);

    let lengths = Lengths {
        panels: [
            LengthPanel {
                name: "Input",
                sorted: a.input_length.sorted.clone(),
                mean: a.input_length.mean,
                log_x: true,
            },
            LengthPanel {
                name: "Output",
                sorted: a.output_length.sorted.clone(),
                mean: a.output_length.mean,
                log_x: false,
            },
        ],
    };
    files.extend(save(dir, "trace_lengths", &lengths)?);
    Ok(files)
}
