//! The charts of a run (`--result-dir`): latency over time, latency CDFs, throughput and
//! in-flight requests, send drift.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axes::upper;
use super::{bars, err, register_font, save, Chart, DrawResult, BLUE_, CDF_POINTS, FAMILY};
use crate::record::{Record, Status};
use crate::report::accumulator::{end_ms, output_tokens_of, record_tpot};
use crate::report::format::fmt_num;
use crate::report::stats::percentile_sorted;
use crate::report::Summary;

/// Most points drawn in one scatter series (larger runs are thinned evenly).
const MAX_POINTS: usize = 20_000;

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
            .draw_series(bars(&counts, lo, w, BLUE_.mix(0.8).filled()))
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
    register_font()?;
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
