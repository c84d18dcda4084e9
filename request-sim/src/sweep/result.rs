//! What a sweep records (`sweep.json`): each point ([`SweepPoint`], made from its run's
//! summary) and the whole sweep ([`SweepResult`]).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::search::SearchInfo;
use crate::stats::{Metric, Summary};

/// One point of a sweep.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepPoint {
    pub scale_factor: f64,
    /// A `--users` sweep (agent corpora): the point's concurrent users.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<usize>,
    pub seed: u64,
    /// Result directory of the point.
    pub dir: String,
    /// Requests per second the schedule offered (scheduled requests over the replayed span).
    pub offered_rps: f64,
    pub scheduled: usize,
    pub completed: usize,
    pub failed: usize,
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub request_goodput: Option<f64>,
    /// Requests meeting every SLO / requests that could be judged (only with `--goodput`):
    /// requests the time limit cut before they met or broke an SLO are not counted either way.
    pub good_fraction: Option<f64>,
    /// Latency percentiles; `None` when unknown (no values: TPOT of non-streaming answers).
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub drift_p99_ms: f64,
    /// Prefix-cache hit ratio from the server's counters, when scraped.
    pub server_hit_ratio: Option<f64>,
    /// Whether `POST /reset_prefix_cache` succeeded before the point.
    pub cache_reset: bool,
    /// Why the point's measurements are suspect (see the summary's `invalid`).
    pub invalid: Vec<String>,
    pub exit_code: i32,
    /// Ctrl-C cut the point short: kept in `sweep.json`, marked in the table, but neither
    /// judged nor plotted (its numbers cover part of the point).
    pub interrupted: bool,
    /// `--repeat N`: the point is a repeat set (`scale-F/repeats.json`, each repeat in
    /// `scale-F/repeat-K/`); its rates, latencies and good fraction are the means over the
    /// repeats, its counts the sums, its drift the largest. 0: one run.
    #[serde(skip_serializing_if = "is_zero")]
    pub repeats: usize,
    /// InferenceX's axes: interactivity, the median output tokens/s one user sees (1000 /
    /// the median TPOT), and the total output tokens/s per GPU (`--gpus`, else of the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_user_output_tps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_throughput_per_gpu: Option<f64>,
    /// `--scenario`: the point's stamp and the rules it broke.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submission_valid: Option<bool>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The whole sweep (`sweep.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepResult {
    pub points: Vec<SweepPoint>,
    /// `--goodput` in words, when given.
    pub slo: Option<String>,
    pub target: f64,
    /// The highest point carried, when any.
    pub capacity_scale_factor: Option<f64>,
    /// A `--users` sweep: the most concurrent users carried, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_users: Option<usize>,
    pub answer: String,
    /// The sweep was interrupted: the points so far.
    pub interrupted: bool,
    /// The capacity search, when the sweep searched (no `--scale-factors`).
    pub search: Option<SearchInfo>,
}

/// A point from its run's summary: point `f` of the trace slice offered at `rate` requests per
/// second at scale 1, replayed with `seed` into `dir` (`reset`: the prefix caches were reset
/// before it), ending with exit code `code`.
pub(super) fn point_of(
    s: &Summary,
    f: f64,
    rate: f64,
    seed: u64,
    dir: &Path,
    reset: bool,
    code: i32,
) -> SweepPoint {
    let scheduled = s.scheduled;
    SweepPoint {
        scale_factor: f,
        users: None,
        seed,
        dir: dir.display().to_string(),
        offered_rps: rate * f,
        scheduled,
        completed: s.completed,
        failed: s.failed,
        request_throughput: s.request_throughput,
        output_throughput: s.output_throughput,
        request_goodput: s.request_goodput,
        good_fraction: s.good_fraction(),
        ttft_p50_ms: s.latency[Metric::Ttft].known_median(),
        ttft_p99_ms: s.latency[Metric::Ttft].known_percentile(99.0),
        tpot_p50_ms: s.latency[Metric::Tpot].known_median(),
        tpot_p99_ms: s.latency[Metric::Tpot].known_percentile(99.0),
        drift_p99_ms: s.drift.p99_ms,
        server_hit_ratio: s.server.as_ref().and_then(|x| x.cluster.prefix_hit_ratio),
        cache_reset: reset,
        invalid: s.invalid.clone(),
        exit_code: code,
        interrupted: s.run.outcome.stop_reason == Some(crate::schedule::StopReason::Interrupted),
        repeats: 0,
        per_user_output_tps: s.latency[Metric::Tpot]
            .known_median()
            .filter(|t| *t > 0.0)
            .map(|t| 1000.0 / t),
        output_throughput_per_gpu: None,
        submission_valid: s.scenario.as_ref().map(|x| x.submission_valid),
        violations: s.scenario.as_ref().map_or_else(Vec::new, |x| {
            x.violations.iter().map(|v| v.rule.clone()).collect()
        }),
    }
}
