//! What `analyze` reports ([`Analysis`] and its parts, serialised as `--json`) and what it is
//! asked for ([`AnalyzeOptions`], [`RoutingOptions`]).

use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::Serialize;

use llm_common::routing::Policy;

use crate::trace::model::{TraceFormat, TraceStats};
use crate::util::percentile_sorted;

/// What to compute.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalyzeOptions {
    /// LRU cache sizes to simulate, in tokens; empty = a default sweep of powers of two from
    /// 16 Ki tokens up to the first size that holds every distinct block of the trace.
    pub cache_sizes_tokens: Vec<u64>,
    /// Percentiles of the length distributions; empty = 50, 90, 99.
    pub percentiles: Vec<f64>,
    /// Width of the request-rate series buckets in seconds (default 60). Widened automatically
    /// so that the series has at most [`MAX_RATE_POINTS`] points.
    pub rate_bucket_s: f64,
    /// The routing what-if, when asked.
    pub routing: Option<RoutingOptions>,
}

/// What the routing what-if simulates.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingOptions {
    /// Instances, each with its own prefix cache (at least 1).
    pub instances: usize,
    /// Policies to compare; empty = all of them.
    pub policies: Vec<Policy>,
    /// Prefix-cache capacity of one instance, tokens (whole blocks of the trace's block size).
    pub capacity_tokens: u64,
}

/// Most points in [`Analysis::rate_series`].
pub const MAX_RATE_POINTS: usize = 10_000;

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions {
            cache_sizes_tokens: Vec::new(),
            percentiles: Vec::new(),
            rate_bucket_s: 60.0,
            routing: None,
        }
    }
}

/// Percentiles as `{"p50": v, "p90": v, ...}` in the requested order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Percentiles(pub Vec<(f64, f64)>);

impl Percentiles {
    /// The value at percentile `p`, if it was computed.
    pub fn get(&self, p: f64) -> Option<f64> {
        self.0.iter().find(|(q, _)| *q == p).map(|&(_, v)| v)
    }
}

impl Serialize for Percentiles {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (p, v) in &self.0 {
            m.serialize_entry(&format!("p{p}"), v)?;
        }
        m.end()
    }
}

/// Distribution of a token count over the requests.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LengthStats {
    pub mean: f64,
    pub min: u64,
    pub max: u64,
    pub total: u64,
    /// Linear interpolation at index `p/100 * (n-1)` of the sorted values.
    pub percentiles: Percentiles,
    /// Every request's value, ascending (for the length plots; not in the JSON output).
    #[serde(skip)]
    pub sorted: Vec<u32>,
}

/// Sessions and turns (Bailian traces).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SessionStats {
    /// Conversations: requests linked through `parent_chat_id` count as one.
    pub sessions: usize,
    /// Sessions with more than one request.
    pub multi_turn_sessions: usize,
    /// Requests per session.
    pub mean_turns_per_session: f64,
    pub max_turns_per_session: usize,
    /// Largest `turn` value in the trace.
    pub max_turn: u32,
    /// Requests with `parent_chat_id` -1.
    pub root_requests: usize,
    /// Requests whose parent is not an earlier request of the trace (cut off by the trace
    /// window or slicing); each starts its own session here.
    pub orphan_requests: usize,
    /// Requests per `type` (text/search/image/file; `unknown` when absent).
    pub types: BTreeMap<String, usize>,
}

/// The think times of a trace's sessions, seconds.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ThinkTimes {
    /// Later turns (with a parent in the trace).
    pub turns: usize,
    pub mean: f64,
    pub percentiles: Percentiles,
}

/// Trace-ideal prefix-cache hit ratio with an infinite cache (see the module docs).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PrefixCacheStats {
    pub hit_tokens: u64,
    pub input_tokens: u64,
    /// `hit_tokens / input_tokens`.
    pub hit_ratio: f64,
    pub hit_blocks: u64,
    /// Hashed blocks over all requests.
    pub blocks: u64,
    /// `hit_blocks / blocks`.
    pub block_hit_ratio: f64,
    /// Token hit ratio over the second half of the requests (replay order) only, with the
    /// cache warmed by the first half: shows how much of the gap to a steady-state figure is
    /// the cold start of the trace window.
    pub warm_hit_ratio: f64,
    /// Tokens an infinite cache ends up holding: distinct prefix blocks × block size.
    pub footprint_tokens: u64,
}

/// One LRU cache size of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LruPoint {
    pub capacity_tokens: u64,
    /// `capacity_tokens / block_size` (whole blocks).
    pub capacity_blocks: u64,
    pub hit_tokens: u64,
    pub hit_ratio: f64,
    pub block_hit_ratio: f64,
}

/// One bucket of the request-rate series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatePoint {
    /// Bucket start, seconds of trace time.
    pub start_s: f64,
    pub requests: u64,
    /// `requests / bucket_s` (the last bucket may be partly past the end of the trace).
    pub rate_per_s: f64,
}

/// Request rate over trace time.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct RateSeries {
    pub bucket_s: f64,
    pub points: Vec<RatePoint>,
}

/// Everything `analyze` reports. Serialises to one JSON object (`--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub format: TraceFormat,
    pub block_size: usize,
    pub requests: usize,
    /// Last request time − first request time.
    pub duration_s: f64,
    /// `requests / duration_s` (`None` when all requests share one timestamp).
    pub mean_rate_per_s: Option<f64>,
    /// Most requests in one 1-s window `[k, k+1)` s of trace time.
    pub peak_rate_per_s: u64,
    /// Start of that window (the first one when several tie).
    pub peak_rate_at_s: f64,
    /// Distinct timestamps (traces with coarse timestamps send requests in bursts).
    pub distinct_timestamps: usize,
    /// Most requests sharing one timestamp (the largest burst sent at once).
    pub max_requests_per_timestamp: usize,
    /// Coefficient of variation of the gaps between consecutive requests (1 for Poisson
    /// arrivals, more for burstier ones); `None` with fewer than three requests.
    pub burstiness: Option<f64>,
    /// The sessions' think times (the gap before each later turn, seconds): mean and
    /// percentiles; `None` without sessions.
    pub think_time_s: Option<ThinkTimes>,
    pub input_length: LengthStats,
    pub output_length: LengthStats,
    /// Requests that carry at least one hash id.
    pub requests_with_hash_ids: usize,
    pub distinct_hash_ids: usize,
    /// Distinct chains `b0..=bi` (= distinct cacheable blocks).
    pub distinct_prefix_blocks: usize,
    pub sessions: Option<SessionStats>,
    pub prefix_cache: PrefixCacheStats,
    pub lru_sweep: Vec<LruPoint>,
    pub rate_series: RateSeries,
    /// The loader's counts (rules applied, skipped rows).
    pub trace_stats: TraceStats,
    /// The routing what-if (`--instances`), when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<RoutingAnalysis>,
}

/// The routing what-if: per-instance prefix caches under each policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoutingAnalysis {
    pub instances: usize,
    /// Per instance.
    pub capacity_tokens: u64,
    /// Per instance, `capacity_tokens / block_size`.
    pub capacity_blocks: u64,
    pub policies: Vec<RoutingPoint>,
    /// One shared LRU cache of `instances × capacity` for all requests: a reference, not a
    /// bound (split caches can keep hits one LRU evicts); the bound of any policy is the
    /// infinite cache, `prefix_cache.hit_ratio`.
    pub single_cache_hit_ratio: f64,
}

/// One policy of the routing what-if.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoutingPoint {
    pub policy: String,
    pub hit_tokens: u64,
    /// `hit_tokens / Σ input_length`.
    pub hit_ratio: f64,
    pub block_hit_ratio: f64,
    /// Requests each instance received.
    pub requests_per_instance: Vec<u64>,
    /// Input tokens each instance received.
    pub input_tokens_per_instance: Vec<u64>,
}

// ---------------------------------------------------------------------------------------------

pub(crate) fn length_stats(values: impl Iterator<Item = u32>, percentiles: &[f64]) -> LengthStats {
    let mut v: Vec<f64> = values.map(f64::from).collect();
    if v.is_empty() {
        return LengthStats::default();
    }
    v.sort_by(f64::total_cmp);
    let total: f64 = v.iter().sum();
    LengthStats {
        mean: total / v.len() as f64,
        min: v[0] as u64,
        max: v[v.len() - 1] as u64,
        total: total as u64,
        percentiles: Percentiles(
            percentiles
                .iter()
                .map(|&p| (p, percentile_sorted(&v, p)))
                .collect(),
        ),
        sorted: v.iter().map(|&x| x as u32).collect(),
    }
}

// Trace ids are not attacker-chosen network input, so SipHash's flooding resistance is not
// worth its cost here (it was half of the analysis time): rustc-hash's fast integer hasher.

pub(super) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
