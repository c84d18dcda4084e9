//! The charts of a run (`--result-dir`): latency over time, latency CDFs, throughput and
//! in-flight requests, send drift.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axes::upper;
use super::server::{ServerOverTime, MAX_INTERVALS};
use super::{
    bars, err, legend, line, register_font, save, stairs, Chart, DrawResult, Frame, BLUE_,
    CDF_POINTS, FAMILY, GREEN_, ORANGE, PURPLE, RED_, RUN_CLOCK,
};
use crate::observe::samples::{self, Sample};
use crate::record::{Record, Status};
use crate::stats::latency::Metric;
use crate::stats::per_record::{end_ms, output_tokens_of, record_mean_itl};
use crate::stats::samples::percentile_sorted;
use crate::stats::Summary;

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

/// Latency of each successful request against its send time on the run's clock.
struct OverTime {
    title: String,
    y_desc: String,
    /// (send time s, latency ms), sorted by time.
    points: Vec<(f64, f64)>,
    /// Send times (s) of failed requests.
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
        let mut chart = Frame::figure(&caption, RUN_CLOCK, &self.y_desc)
            .x(0.0..self.x_max)
            .y(0.0..y_max)
            .build(root)?;
        let dot = BLUE_.mix(0.45).filled();
        chart
            .draw_series(shown.iter().map(|(x, y)| Circle::new((*x, *y), 2, dot)))
            .map_err(err)?
            .label("request")
            .legend(|(x, y)| Circle::new((x, y), 3, BLUE_.filled()));
        let median = self.median_line();
        if !median.is_empty() {
            line(&mut chart, median, ORANGE, "median per interval")?;
        }
        if !self.failed.is_empty() {
            let red = RED_.mix(0.5).filled();
            let mark = y_max * 0.01;
            chart
                .draw_series(
                    thin(&self.failed, MAX_POINTS)
                        .into_iter()
                        .map(|x| TriangleMarker::new((x, mark), 4, red)),
                )
                .map_err(err)?
                .label(format!("failed ({})", self.failed.len()))
                .legend(|(x, y)| TriangleMarker::new((x, y), 5, RED_.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}

/// CDFs of the four latency metrics, one panel each.
struct Cdfs {
    panels: Vec<CdfPanel>,
}

/// One panel of [`Cdfs`].
struct CdfPanel {
    metric: Metric,
    /// Sorted values, ms.
    sorted: Vec<f64>,
    /// The caption when the values are not the metric's own (the ITL panel drawn from each
    /// request's mean gap); else it is made from the values.
    caption: Option<String>,
}

impl Chart for Cdfs {
    fn size(&self) -> (u32, u32) {
        (1200, 800)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let root = root.titled("Latency CDFs", (FAMILY, 24)).map_err(err)?;
        let areas = root.split_evenly((2, 2));
        for (area, panel) in areas.iter().zip(&self.panels) {
            let (metric, sorted) = (panel.metric, &panel.sorted);
            let name = metric.label();
            let n = sorted.len();
            let x_max = upper(sorted.last().copied().unwrap_or(0.0));
            let caption = if let Some(c) = &panel.caption {
                c.clone()
            } else if n == 0 && matches!(metric, Metric::Tpot | Metric::Itl) {
                format!("{name}: no values (outputs of one token, or in one piece)")
            } else if n == 0 {
                format!("{name}: no values")
            } else {
                let p = |q| percentile_sorted(sorted, q);
                format!("{name}  (n={n}, p50={:.1}, p99={:.1} ms)", p(50.0), p(99.0))
            };
            let x_desc = format!("{name} (ms)");
            let mut chart = Frame::panel(&caption, &x_desc, "fraction of values")
                .x(0.0..x_max)
                .build(area)?;
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
                .draw_series(LineSeries::new(pts, BLUE_.stroke_width(2)))
                .map_err(err)?;
            let p99 = percentile_sorted(sorted, 99.0);
            chart
                .draw_series(LineSeries::new(
                    vec![(p99, 0.0), (p99, 1.0)],
                    RED_.mix(0.6).stroke_width(1),
                ))
                .map_err(err)?;
        }
        Ok(())
    }
}

/// Throughput and concurrency over the run, on the run's clock (the x axis of the server
/// metrics' charts too).
struct Throughput {
    bucket_s: f64,
    /// Per bucket: output tokens/s, sent/s, completed/s, peak in flight.
    tokens: Vec<f64>,
    sent: Vec<f64>,
    completed: Vec<f64>,
    inflight: Vec<f64>,
}

impl Throughput {
    /// End of the time axis (s).
    fn x_max(&self) -> f64 {
        upper(self.tokens.len() as f64 * self.bucket_s)
    }
}

impl Chart for Throughput {
    fn size(&self) -> (u32, u32) {
        (1100, 950)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let title = format!(
            "Throughput and in-flight requests ({} s buckets)",
            self.bucket_s
        );
        let root = root.titled(&title, (FAMILY, 24)).map_err(err)?;
        let panels = root.split_evenly((3, 1));
        let x_max = self.x_max();
        let xs = |v: &[f64]| -> Vec<(f64, f64)> {
            stairs(
                v.iter()
                    .enumerate()
                    .map(|(i, y)| (i as f64 * self.bucket_s, (i + 1) as f64 * self.bucket_s, *y)),
            )
        };
        type Series<'a> = Vec<(&'a str, &'a [f64], RGBColor)>;
        let specs: [(&str, &str, Series); 3] = [
            (
                "Output tokens/s",
                "tokens/s",
                vec![("output tokens/s", &self.tokens, BLUE_)],
            ),
            (
                "Requests/s",
                "requests/s",
                vec![
                    ("sent/s", &self.sent, GREEN_),
                    ("completed/s", &self.completed, ORANGE),
                ],
            ),
            (
                "Requests in flight (peak per bucket)",
                "in flight",
                vec![("in flight", &self.inflight, PURPLE)],
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
            let mut chart = Frame::panel(title, RUN_CLOCK, y_desc)
                .x(0.0..x_max)
                .y(0.0..y_max)
                .build(area)?;
            for (label, values, color) in series {
                line(&mut chart, xs(values), *color, label)?;
            }
            if series.len() > 1 {
                legend(&mut chart, SeriesLabelPosition::UpperRight)?;
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
        let mut chart = Frame::figure(
            &caption,
            "send drift: actual - scheduled send time (ms)",
            "requests",
        )
        .x(lo..lo + w * bins as f64)
        .y(0.0..y_max)
        .x_fmt(|v| format!("{v:.2}"))
        .build(root)?;
        chart
            .draw_series(bars(&counts, lo, w, BLUE_.mix(0.8).filled()))
            .map_err(err)?;
        Ok(())
    }
}

/// Per-bucket series for [`Throughput`] from the records, from the run clock's zero (or the
/// first send, if earlier) to the last event or `at_least_ms`, whichever is later.
fn throughput(records: &[Record], at_least_ms: f64) -> Throughput {
    let start = records.iter().filter_map(|r| r.sent_ms).fold(0.0, f64::min);
    let end = records
        .iter()
        .filter_map(end_ms)
        .chain(records.iter().filter_map(|r| r.sent_ms))
        .fold(at_least_ms.max(start), f64::max);
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

/// When a request was sent on the run's clock (s); when it was due if it never went out.
fn send_s(r: &Record) -> f64 {
    r.sent_ms.unwrap_or(r.scheduled_ms) / 1000.0
}

/// `ttft_over_time` and `e2el_over_time`, by send time up to `x_max` (s).
fn write_over_time(dir: &Path, records: &[Record], x_max: f64) -> crate::Result<Vec<PathBuf>> {
    let mut ok: Vec<&Record> = records.iter().filter(|r| r.status == Status::Ok).collect();
    ok.sort_by(|a, b| send_s(a).total_cmp(&send_s(b)));
    let failed: Vec<f64> = records
        .iter()
        .filter(|r| !matches!(r.status, Status::Ok | Status::DryRun))
        .map(send_s)
        .collect();
    let mut files = Vec::new();
    for (name, title, y_desc, get) in [
        (
            "ttft_over_time",
            "Time to first token by send time",
            "TTFT (ms)",
            (|r: &Record| r.ttft_ms) as fn(&Record) -> Option<f64>,
        ),
        (
            "e2el_over_time",
            "End-to-end latency by send time",
            "E2EL (ms)",
            |r: &Record| r.e2e_ms,
        ),
    ] {
        let chart = OverTime {
            title: title.to_string(),
            y_desc: y_desc.to_string(),
            points: ok
                .iter()
                .filter_map(|r| get(r).map(|v| (send_s(r), v)))
                .collect(),
            failed: failed.clone(),
            x_max,
        };
        files.extend(save(dir, name, &chart)?);
    }
    Ok(files)
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    v
}

/// The latency CDFs of the successful requests.
fn cdfs(records: &[Record], s: &Summary) -> Cdfs {
    let ok: Vec<&Record> = records.iter().filter(|r| r.status == Status::Ok).collect();
    let panel = |metric: Metric| CdfPanel {
        metric,
        sorted: sorted(ok.iter().filter_map(|r| metric.of(r)).collect()),
        caption: None,
    };
    Cdfs {
        panels: vec![
            panel(Metric::Ttft),
            panel(Metric::Tpot),
            itl_panel(&ok, s),
            panel(Metric::E2el),
        ],
    }
}

/// The ITL panel: every gap when the records keep them (`--record-itl`); else each request's
/// mean gap, labelled so, with the summary's own ITL figures (all gaps, as the console prints
/// them) or the word that they were not recorded.
fn itl_panel(ok: &[&Record], s: &Summary) -> CdfPanel {
    let every = itl_sample(ok);
    if !every.is_empty() {
        return CdfPanel {
            metric: Metric::Itl,
            sorted: sorted(every),
            caption: None,
        };
    }
    let means = sorted(ok.iter().filter_map(|r| record_mean_itl(r)).collect());
    let itl = &s.latency[Metric::Itl];
    let caption = if means.is_empty() {
        "ITL: no values (outputs of one token, or in one piece)".to_string()
    } else if itl.known() {
        format!(
            "ITL: mean gap per request, n={} (all {} gaps: mean {:.2} ms, as the summary)",
            means.len(),
            itl.count,
            itl.mean
        )
    } else {
        format!(
            "ITL: mean gap per request, n={} (per-chunk values not recorded: --record-itl)",
            means.len()
        )
    };
    CdfPanel {
        metric: Metric::Itl,
        sorted: means,
        caption: Some(caption),
    }
}

/// Write all plots into `dir` (PNG and SVG of each); returns the files written. With the
/// samples of `server_metrics.jsonl`, `server_over_time` too. Every chart over time shares the
/// throughput chart's axis: seconds on the run's clock.
pub fn write_plots(
    dir: &Path,
    records: &[Record],
    s: &Summary,
    samples: &[Sample],
) -> crate::Result<Vec<PathBuf>> {
    register_font()?;
    let last_sample_ms = samples.iter().map(|s| s.t_ms).fold(0.0, f64::max);
    let tput = throughput(records, last_sample_ms);
    let mut files = write_over_time(dir, records, tput.x_max())?;
    files.extend(save(dir, "latency_cdf", &cdfs(records, s))?);
    files.extend(save(dir, "throughput_inflight", &tput)?);
    // Gauges at up to ~MAX_INTERVALS points, rates over the throughput chart's buckets.
    let series = samples::series(samples, tput.x_max() / MAX_INTERVALS, tput.bucket_s);
    if !series.is_empty() {
        let chart = ServerOverTime {
            series,
            x_max: tput.x_max(),
            step_s: tput.bucket_s,
        };
        files.extend(save(dir, "server_over_time", &chart)?);
    }
    let drift = DriftHistogram {
        values: records.iter().filter_map(|r| r.drift_ms).collect(),
    };
    files.extend(save(dir, "drift_histogram", &drift)?);
    if let Some(lanes) = super::lanes::Lanes::of(records) {
        files.extend(save(dir, "lanes", &lanes)?);
    }
    Ok(files)
}
