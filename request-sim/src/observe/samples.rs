//! The read side of `server_metrics.jsonl` (written by [`super::scrape`]): the samples back in
//! memory, and per instance the time series the charts draw: the gauges as scraped, and rates
//! from the counters' deltas between scrapes (prefix-cache hit ratio, generation tokens/s,
//! requests finished/s).

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;

use super::names::counter_delta;
use crate::error::{Error, Result};

/// One line of `server_metrics.jsonl`, as far as the charts need it (other fields are ignored).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Sample {
    /// Middle of the scrape, ms on the run's clock.
    pub t_ms: f64,
    pub instance: usize,
    pub url: String,
    pub ok: bool,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    pub kv_usage: Option<f64>,
    pub prefix_queries: Option<f64>,
    pub prefix_hits: Option<f64>,
    pub generation_tokens: Option<f64>,
    pub requests_done: Option<f64>,
}

/// Read `server_metrics.jsonl`. A cut-off last line (the run was killed while writing) is
/// skipped; any other unreadable line is an error naming `file:line`.
pub fn read_samples(path: &Path) -> Result<Vec<Sample>> {
    let file = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    let mut out = Vec::new();
    let mut lines = BufReader::new(file).lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line = line.map_err(|e| Error::read(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Sample>(&line) {
            Ok(s) => out.push(s),
            Err(_) if lines.peek().is_none() => break,
            Err(e) => {
                return Err(Error::report(format!(
                    "{}:{}: not a server-metrics sample: {e}",
                    path.display(),
                    i + 1
                )))
            }
        }
    }
    Ok(out)
}

/// A value over an interval of the run's clock, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub from_s: f64,
    pub to_s: f64,
    pub value: f64,
}

/// What the charts draw of one instance. Times are seconds on the run's clock, from 0 (the
/// start-up scrape before the first send is the baseline of the first interval's deltas).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceSeries {
    pub instance: usize,
    pub url: String,
    /// Gauges: `(t, value)`; KV usage as a fraction of 1. When samples were merged into wider
    /// intervals (see [`series`]), each value is the peak of the samples merged.
    pub running: Vec<(f64, f64)>,
    pub waiting: Vec<(f64, f64)>,
    pub kv_usage: Vec<(f64, f64)>,
    /// Prefix-cache hits / queries per interval (intervals without queries are left out).
    pub hit_ratio: Vec<Step>,
    /// Generation tokens per second per interval.
    pub generation_tps: Vec<Step>,
    /// Requests finished per second per interval.
    pub done_ps: Vec<Step>,
}

/// The series of every instance that has a successful sample, in instance order. Gauge
/// samples closer than `gauge_step_s` are merged into their peak, so a long run at a short
/// interval stays readable; rates are taken over intervals of at least `rate_step_s` (a
/// counter read every 100 ms moves in bursts: tokens are counted as steps finish).
pub fn series(samples: &[Sample], gauge_step_s: f64, rate_step_s: f64) -> Vec<InstanceSeries> {
    let n = samples.iter().map(|s| s.instance + 1).max().unwrap_or(0);
    let mut per: Vec<Vec<&Sample>> = vec![Vec::new(); n];
    for s in samples.iter().filter(|s| s.ok) {
        per[s.instance].push(s);
    }
    per.into_iter()
        .filter(|v| !v.is_empty())
        .map(|mut v| {
            v.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
            let mut out = InstanceSeries {
                instance: v[0].instance,
                url: v[0].url.clone(),
                ..InstanceSeries::default()
            };
            gauges(&v, gauge_step_s, &mut out);
            rates(&v, rate_step_s, &mut out);
            out
        })
        .collect()
}

/// The samples that end intervals of at least `step_s`: the first, each one at least `step_s`
/// after the previous one kept, and the last; with the range of samples each one closes.
fn interval_ends(v: &[&Sample], step_s: f64) -> Vec<(usize, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut from = 0;
    for i in 0..v.len() {
        let far = out
            .last()
            .is_none_or(|&(k, _): &(usize, _)| (v[i].t_ms - v[k].t_ms) / 1e3 >= step_s);
        if far || i + 1 == v.len() {
            out.push((i, from..i + 1));
            from = i + 1;
        }
    }
    out
}

/// Gauges at the interval ends from 0 s on, each the peak of the samples it closes.
fn gauges(v: &[&Sample], step_s: f64, out: &mut InstanceSeries) {
    type Get = fn(&Sample) -> Option<f64>;
    let fields: [(Get, &mut Vec<(f64, f64)>); 3] = [
        (|s| s.running, &mut out.running),
        (|s| s.waiting, &mut out.waiting),
        (|s| s.kv_usage, &mut out.kv_usage),
    ];
    let ends = interval_ends(v, step_s);
    for (get, series) in fields {
        for (i, range) in &ends {
            let t = v[*i].t_ms / 1e3;
            let peak = v[range.clone()]
                .iter()
                .filter_map(|s| get(s))
                .reduce(f64::max);
            if let (true, Some(p)) = (t >= 0.0, peak) {
                series.push((t, p));
            }
        }
    }
}

/// Counter deltas between interval ends, as rates (and the hit ratio) from 0 s on.
fn rates(v: &[&Sample], step_s: f64, out: &mut InstanceSeries) {
    let ends = interval_ends(v, step_s);
    for w in ends.windows(2) {
        let (p, s) = (v[w[0].0], v[w[1].0]);
        let (from_s, to_s) = ((p.t_ms / 1e3).max(0.0), s.t_ms / 1e3);
        let dt = (s.t_ms - p.t_ms) / 1e3;
        if to_s <= 0.0 || dt <= 0.0 {
            continue;
        }
        let step = |value| Step {
            from_s,
            to_s,
            value,
        };
        let q = counter_delta(p.prefix_queries, s.prefix_queries);
        if let (Some(q), Some(h)) = (q, counter_delta(p.prefix_hits, s.prefix_hits)) {
            if q > 0.0 {
                out.hit_ratio.push(step((h / q).min(1.0)));
            }
        }
        if let Some(g) = counter_delta(p.generation_tokens, s.generation_tokens) {
            out.generation_tps.push(step(g / dt));
        }
        if let Some(d) = counter_delta(p.requests_done, s.requests_done) {
            out.done_ps.push(step(d / dt));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_ms: f64, running: f64, queries: f64, hits: f64, gen: f64) -> Sample {
        Sample {
            t_ms,
            ok: true,
            running: Some(running),
            waiting: Some(0.0),
            kv_usage: Some(running / 10.0),
            prefix_queries: Some(queries),
            prefix_hits: Some(hits),
            generation_tokens: Some(gen),
            requests_done: Some(gen / 10.0),
            ..Sample::default()
        }
    }

    #[test]
    fn rates_come_from_counter_deltas_per_interval() {
        let v = [
            sample(-50.0, 0.0, 100.0, 0.0, 0.0),
            sample(500.0, 2.0, 300.0, 50.0, 100.0),
            sample(1500.0, 3.0, 300.0, 50.0, 300.0),
            // A restart: the counters start again from zero.
            sample(2500.0, 1.0, 40.0, 30.0, 50.0),
        ];
        let s = &series(&v, 0.0, 0.0)[0];
        assert_eq!(s.running, vec![(0.5, 2.0), (1.5, 3.0), (2.5, 1.0)]);
        // 50 hits of 200 queries over (-0.05 s, 0.5 s], drawn from 0; no queries in the next
        // interval; 30 of 40 after the restart.
        assert_eq!(
            s.hit_ratio,
            vec![
                Step {
                    from_s: 0.0,
                    to_s: 0.5,
                    value: 0.25
                },
                Step {
                    from_s: 1.5,
                    to_s: 2.5,
                    value: 0.75
                }
            ]
        );
        assert!((s.generation_tps[0].value - 100.0 / 0.55).abs() < 1e-9);
        assert_eq!(s.generation_tps[1].value, 200.0);
        assert_eq!(s.generation_tps[2].value, 50.0);
        assert_eq!(s.done_ps[1].value, 20.0);
    }

    #[test]
    fn close_samples_merge_and_gauges_keep_the_peak() {
        let v: Vec<Sample> = (0..10)
            .map(|i| {
                sample(
                    f64::from(i) * 100.0,
                    f64::from(i % 4),
                    0.0,
                    0.0,
                    f64::from(i),
                )
            })
            .collect();
        let s = &series(&v, 0.45, 0.3)[0];
        // Kept: 0, 500, 900 (the last); peaks of (0], (100..500], (600..900].
        assert_eq!(s.running, vec![(0.0, 0.0), (0.5, 3.0), (0.9, 3.0)]);
        // Rates over 0-300, 300-600, 600-900 ms: 3 tokens in 0.3 s each.
        assert_eq!(s.generation_tps.len(), 3);
        assert!((s.generation_tps[0].value - 10.0).abs() < 1e-9);
        assert_eq!(
            (s.generation_tps[2].from_s, s.generation_tps[2].to_s),
            (0.6, 0.9)
        );
        assert!(s.hit_ratio.is_empty(), "no queries, no ratio");
    }

    #[test]
    fn failed_scrapes_are_skipped_and_a_cut_last_line_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("server_metrics.jsonl");
        std::fs::write(
            &p,
            "{\"t_ms\":1.0,\"instance\":1,\"url\":\"u\",\"ok\":true,\"running\":2}\n\
             {\"t_ms\":2.0,\"instance\":0,\"url\":\"v\",\"ok\":false,\"error\":\"x\"}\n\
             {\"t_ms\":3.0,\"inst",
        )
        .unwrap();
        let v = read_samples(&p).unwrap();
        assert_eq!(v.len(), 2);
        let s = series(&v, 0.0, 0.0);
        assert_eq!(s.len(), 1);
        assert_eq!(
            (s[0].instance, s[0].running.clone()),
            (1, vec![(0.001, 2.0)])
        );
        std::fs::write(&p, "{\"t_ms\":1}\nnot json\n{\"t_ms\":2}\n").unwrap();
        let e = read_samples(&p).unwrap_err().to_string();
        assert!(e.contains("server_metrics.jsonl:2:"), "{e}");
    }
}
