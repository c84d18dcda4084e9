//! The headline metrics that repeats give intervals for and `compare` tests: throughput,
//! goodput, TTFT/TPOT/ITL/E2EL mean, median and the configured percentiles of 90 and above,
//! and the server-reported cache hit ratio. Each has its summary JSON key (`p99_ttft_ms`,
//! the name `--fail-if-worse` takes), its console label and which direction is better.

use serde::{Deserialize, Serialize};

use super::inference::{Cluster, Statistic};
use super::latency::{p_word, Metric, Take};
use super::summary::Summary;
use crate::record::{Record, Status};
use crate::schedule::Timing;

/// Which direction of a metric is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

/// What a headline metric is computed from, for the bootstrap over records.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source {
    /// Completed requests per second, output tokens per second, goodput: one value per run,
    /// no per-request resampling.
    PerRun,
    /// A statistic of a latency metric's per-request values.
    Latency(Metric, Statistic),
    /// Σ cached tokens / Σ prompt tokens.
    HitRatio,
}

/// One headline metric of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// The summary JSON key (`request_throughput`, `p99_ttft_ms`, `cache_hit_ratio`).
    pub key: String,
    /// The console label (`P99 TTFT (ms)`).
    pub label: String,
    pub better: Better,
    pub source: Source,
    /// The run's value; `None` when the run could not measure it.
    pub value: Option<f64>,
    /// Request or output throughput of an open-loop run: the schedule sets it (every request
    /// is sent at its trace time whatever the server does), so it is shown, not ranked.
    pub schedule_set: bool,
}

/// Whether the run sent its requests open loop, each at its scheduled time whatever the answers
/// (a plain trace, or sessions with `--timing open`); `false` for closed-loop sessions and agent
/// corpora (a turn waits for its parent); `None` when the summary does not say (records
/// re-summarised without their run's settings).
pub fn open_loop(s: &Summary) -> Option<bool> {
    let r = &s.run;
    if r.agents.is_some() {
        return Some(false);
    }
    if let Some(x) = &r.sessions {
        return Some(x.timing == Timing::Open);
    }
    if let Some(t) = s.sessions.as_ref().and_then(|x| x.timing) {
        return Some(t == Timing::Open);
    }
    (r.trace_path.is_some() || r.started_at.is_some()).then_some(true)
}

/// The headline metrics of `s`, in the console table's order.
pub fn headlines(s: &Summary) -> Vec<Headline> {
    let open = open_loop(s) == Some(true);
    let mut v = Vec::new();
    let mut push = |key: String, label: String, better, source, value| {
        let schedule_set = open && (key == "request_throughput" || key == "output_throughput");
        v.push(Headline {
            key,
            label,
            better,
            source,
            value,
            schedule_set,
        })
    };
    push(
        "request_throughput".into(),
        "Request throughput (req/s)".into(),
        Better::Higher,
        Source::PerRun,
        Some(s.request_throughput),
    );
    push(
        "output_throughput".into(),
        "Output token throughput (tok/s)".into(),
        Better::Higher,
        Source::PerRun,
        Some(s.output_throughput),
    );
    if let Some(g) = s.request_goodput {
        push(
            "request_goodput".into(),
            "Request goodput (req/s)".into(),
            Better::Higher,
            Source::PerRun,
            Some(g),
        );
    }
    // TTFA only for runs whose answers carried thinking or tool calls.
    let ttfa = (s.latency[Metric::Ttfa].count > 0).then_some(Metric::Ttfa);
    for metric in Metric::vllm().chain(ttfa) {
        let (k, label, m) = (metric.key(), metric.label(), s.latency.get(metric));
        let known = |x: f64| m.known().then_some(x);
        push(
            format!("mean_{k}_ms"),
            format!("Mean {label} (ms)"),
            Better::Lower,
            Source::Latency(metric, Statistic::Mean),
            known(m.mean),
        );
        push(
            format!("median_{k}_ms"),
            format!("Median {label} (ms)"),
            Better::Lower,
            Source::Latency(metric, Statistic::Percentile(50.0)),
            known(m.median),
        );
        for (p, val) in &m.percentiles {
            if *p >= 90.0 {
                push(
                    format!("p{}_{k}_ms", p_word(*p)),
                    format!("P{} {label} (ms)", p_word(*p)),
                    Better::Lower,
                    Source::Latency(metric, Statistic::Percentile(*p)),
                    known(*val),
                );
            }
        }
    }
    push(
        "cache_hit_ratio".into(),
        "Server cache hit ratio (%)".into(),
        Better::Higher,
        Source::HitRatio,
        s.cache.hit_ratio.map(|r| r * 100.0),
    );
    v
}

/// The per-request values of `metric` over the completed records, one cluster per request
/// (ITL: all of a request's gaps, from its `itl_ms`; none when the records do not keep them).
pub fn clusters(records: &[Record], metric: Metric) -> Vec<Cluster> {
    records
        .iter()
        .filter(|r| r.status == Status::Ok)
        .filter_map(|r| match metric.spec().take {
            Take::Request(f) => f(r).map(|x| vec![x]),
            Take::Gaps => r.itl_ms.clone().filter(|v| !v.is_empty()),
        })
        .collect()
}

/// `(cached, prompt)` tokens of every record whose usage reported both (the hit ratio's terms,
/// in percent of prompt tokens like the headline).
pub fn hit_pairs(records: &[Record]) -> Vec<(f64, f64)> {
    records
        .iter()
        .filter_map(|r| {
            Some((
                f64::from(r.cached_tokens?) * 100.0,
                f64::from(r.prompt_tokens?),
            ))
        })
        .collect()
}
