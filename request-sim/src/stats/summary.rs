//! [`Summary`]: the result of a run (every vLLM `bench serve` result field plus the
//! replayer's own). It is computed by [`super::accumulator::Accumulator`] from the records and
//! [`RunInfo`].
//!
//! Definitions are in `docs/metrics.md`; they follow vLLM's `calculate_metrics`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::latency::Latencies;
use super::run_info::RunInfo;
use super::slo::Slo;
use crate::record::Status;

/// Send drift (actual send time - scheduled time), ms. With no request sent (`count` 0) the
/// statistics are unknown: held as zeros, `null` in JSON (read back as zeros).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "DriftJson")]
pub struct DriftStats {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Requests sent more than 1 ms / 5 ms late.
    pub over_1ms: u64,
    pub over_5ms: u64,
}

/// [`DriftStats`] as written: the statistics `null` when unknown.
#[derive(Serialize, Deserialize)]
struct DriftJson {
    #[serde(default)]
    count: u64,
    mean_ms: Option<f64>,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    max_ms: Option<f64>,
    #[serde(default)]
    over_1ms: u64,
    #[serde(default)]
    over_5ms: u64,
}

impl From<DriftJson> for DriftStats {
    fn from(j: DriftJson) -> DriftStats {
        DriftStats {
            count: j.count,
            mean_ms: j.mean_ms.unwrap_or(0.0),
            p50_ms: j.p50_ms.unwrap_or(0.0),
            p99_ms: j.p99_ms.unwrap_or(0.0),
            max_ms: j.max_ms.unwrap_or(0.0),
            over_1ms: j.over_1ms,
            over_5ms: j.over_5ms,
        }
    }
}

impl Serialize for DriftStats {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let v = |x: f64| (self.count > 0).then_some(x);
        DriftJson {
            count: self.count,
            mean_ms: v(self.mean_ms),
            p50_ms: v(self.p50_ms),
            p99_ms: v(self.p99_ms),
            max_ms: v(self.max_ms),
            over_1ms: self.over_1ms,
            over_5ms: self.over_5ms,
        }
        .serialize(ser)
    }
}

/// Records by final status. `total` equals the number of records and must equal the number of
/// scheduled requests (see [`Summary::counts_add_up`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounts {
    pub ok: usize,
    pub http_error: usize,
    pub timeout: usize,
    pub connect_error: usize,
    pub protocol_error: usize,
    pub cancelled: usize,
    pub dry_run: usize,
    pub total: usize,
    /// Records without a send time (cancelled before sending, or dry run).
    pub not_sent: usize,
}

impl StatusCounts {
    pub(super) fn add(&mut self, s: Status) {
        self.total += 1;
        match s {
            Status::Ok => self.ok += 1,
            Status::HttpError => self.http_error += 1,
            Status::Timeout => self.timeout += 1,
            Status::ConnectError => self.connect_error += 1,
            Status::ProtocolError => self.protocol_error += 1,
            Status::Cancelled => self.cancelled += 1,
            Status::DryRun => self.dry_run += 1,
        }
    }
    /// The requests that ended in error and the requests that finished: `(errored, ok +
    /// errored)`. Errors are `http_error` (any status, 429 and 503 included), `timeout`,
    /// `connect_error` and `protocol_error`; `cancelled` (the run stopped them) and `dry_run`
    /// are neither (`--max-error-rate`, docs/reliability.md).
    pub fn error_share(&self) -> (usize, usize) {
        let errored = self.http_error + self.timeout + self.connect_error + self.protocol_error;
        (errored, self.ok + errored)
    }

    /// The non-zero statuses in words: `30 connect_error`, `2 ok, 58 http_error`; `no
    /// records` when there are none.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .rows()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{n} {name}"))
            .collect();
        if parts.is_empty() {
            "no records".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// `(name, count)` for every status, in a fixed order.
    pub fn rows(&self) -> [(&'static str, usize); 7] {
        [
            ("ok", self.ok),
            ("http_error", self.http_error),
            ("timeout", self.timeout),
            ("connect_error", self.connect_error),
            ("protocol_error", self.protocol_error),
            ("cancelled", self.cancelled),
            ("dry_run", self.dry_run),
        ]
    }
}

/// Server-reported prefix-cache use: Σ cached_tokens / Σ prompt_tokens over requests whose
/// usage reported both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheStats {
    pub requests_with_cached_tokens: usize,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub hit_ratio: Option<f64>,
    /// Trace-ideal (infinite cache) hit ratio from the run info, when known: over the
    /// requests the server processed (`ideal_requests` of the `ideal_sent` sent).
    pub ideal_hit_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal_requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal_sent: Option<u64>,
    /// The server's KV block size (vLLM's `cache_config_info`) when it differs from the
    /// trace's, and the ideal at it: shared prefixes count in whole server blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_block_size: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal_hit_ratio_server_blocks: Option<f64>,
    /// Requests whose usage reported more cached tokens than prompt tokens (impossible): their
    /// cached tokens are counted as their prompt tokens, and a warning says so.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub impossible_cached: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Server output tokens (`usage.completion_tokens`) vs what each request asked for
/// (`output_length`, sent as `max_tokens`): the output side of token exactness.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OutputExactness {
    /// Completed requests with an output count from the server and a length asked.
    pub with_usage: usize,
    /// Of those, received == asked.
    pub exact: usize,
    /// Received more than asked: impossible for a server that honours `max_tokens`.
    pub over: usize,
    /// Received fewer than asked (an early stop, a server that ignores `min_tokens`).
    pub under: usize,
    /// Largest |received - asked|.
    pub max_abs_diff: u64,
}

/// Server `usage.prompt_tokens` vs the trace's `input_length`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenExactness {
    /// Requests whose response reported prompt_tokens.
    pub with_usage: usize,
    /// Of those, prompt_tokens == input_length.
    pub exact: usize,
    pub over: usize,
    pub under: usize,
    /// Largest |prompt_tokens - input_length|.
    pub max_abs_diff: u64,
    /// exact / with_usage (None without usage).
    pub exact_ratio: Option<f64>,
    /// Requests with prompt_tokens but no intended count (`input_length` 0: messages rows
    /// without `--tokenizer-config`, or whose history `--live-history` rewrote): not compared.
    #[serde(default)]
    pub unknown_intended: usize,
    /// Completed requests whose response reported no prompt tokens at all (e.g. a Messages
    /// stream without its `message_start`): `exact` and the cached-token ratio leave them out.
    #[serde(default)]
    pub without_usage: usize,
}

/// Where completed requests' output token counts came from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputTokenSources {
    /// `usage.completion_tokens` (or TGI details).
    pub usage: usize,
    /// No usage from the server: token-bearing chunks counted instead.
    pub chunks: usize,
    /// Neither recorded: chunk count used.
    pub unknown: usize,
}

/// The result of a run. Field names follow vLLM's result JSON where vLLM has the field
/// (vLLM calls the duration `duration`; here it is `duration_s`, `duration` is accepted on read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// Requests that completed successfully (status ok).
    pub completed: usize,
    /// Requests that were sent and did not complete successfully.
    pub failed: usize,
    /// First send -> last completion, seconds.
    #[serde(alias = "duration")]
    pub duration_s: f64,
    /// Σ trace input_length over completed requests (vLLM: prompt_len).
    pub total_input_tokens: u64,
    /// Σ output tokens over completed requests.
    pub total_output_tokens: u64,
    pub request_throughput: f64,
    /// Requests meeting every SLO per second; only with an SLO.
    pub request_goodput: Option<f64>,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    /// Peak output tokens in any 1-second bucket (vLLM definition: one token per chunk);
    /// unknown (`null`) when some completed request's chunk times are missing (records
    /// re-summarised without `--record-itl`).
    pub max_output_tokens_per_s: Option<f64>,
    /// Peak number of completed requests active within one 1-second bucket (vLLM definition).
    pub max_concurrent_requests: u64,
    /// Peak number of requests in flight at any instant (all sent requests).
    pub max_in_flight: u64,
    #[serde(flatten)]
    pub latency: Latencies,
    /// Configured percentiles.
    pub percentiles: Vec<f64>,
    /// Goodput SLO (empty when none was given).
    pub goodput_slo: Slo,
    /// Completed requests meeting every SLO; only with an SLO.
    pub good_requests: Option<usize>,
    /// Requests the run cut (`cancelled`: the time limit, a stop) before they met or broke an
    /// SLO; only with an SLO. They are left out of [`Summary::good_fraction`].
    #[serde(default)]
    pub slo_undecided: Option<usize>,

    pub drift: DriftStats,
    /// Receive lateness: over the requests that have one (plain HTTP), each request's latest
    /// token-carrying read after its bytes arrived in the kernel (`over_1ms`/`over_5ms`:
    /// requests read more than 1 / 5 ms late). docs/metrics.md, "Receive lateness".
    #[serde(default)]
    pub rx_late: DriftStats,
    /// Records by status; `status.total` must equal `scheduled`.
    pub status: StatusCounts,
    pub scheduled: usize,
    /// True when the records account for every scheduled request.
    pub counts_add_up: bool,
    /// Requests sent a second time on a fresh connection because the server closed the
    /// reused one before answering (records with `retries` > 0).
    pub retried: usize,
    /// Warm-up requests (`--trajectory-start`, `--scenario agentx`): recorded, not in these
    /// statistics (`status` counts the measured ones; with `warmup_requests` and the window's
    /// `outside`, every scheduled request).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup_requests: usize,
    /// Sessions (multi-turn conversations), when the records carry session ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<super::sessions::SessionSummary>,
    /// Thinking, answer and tool calls apart, when some completed answer carried thinking or
    /// a tool call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<super::reasoning::ReasoningSummary>,
    /// Images: the exactness check split into text and images, when requests carried images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<super::images::ImageSummary>,
    /// Agent conversations, when the records carry them (agent corpora).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<super::agents::AgentSummary>,
    /// Per-model rows, when records name models (the trace's or `--model-map`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<super::models::ModelSummary>,
    /// Failed requests by kind (`http_error:503`, `timeout`, ...).
    pub errors: BTreeMap<String, usize>,
    /// First error message seen for each kind.
    pub error_examples: BTreeMap<String, String>,
    pub cache: CacheStats,
    pub token_exactness: TokenExactness,
    /// Output tokens received vs asked.
    #[serde(default)]
    pub output_exactness: OutputExactness,
    pub output_tokens_source: OutputTokenSources,
    /// Things the user must know (no usage from the server, records missing, ...).
    pub warnings: Vec<String>,
    /// Why the run's measurements cannot be trusted (drift p99 above `--max-drift-ms`, server
    /// metrics mostly missing); empty for a valid run. `--strict` exits 4 when not empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
    /// What the servers' `/metrics` said during the run (docs/server-metrics.md), when scraped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::observe::ServerSummary>,
    pub run: RunInfo,
    /// `--measure-window`: the span the statistics cover and the records left out (every
    /// other field is over the requests sent inside it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measure_window: Option<super::window::WindowReport>,
    /// The run as a run file: every setting resolved, the tool's version, the trace's checksum
    /// (`request-sim replay --config SUMMARY` runs it again; docs/config.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rerun: Option<crate::runfile::Rerun>,
    /// `--scenario`: its name, `submission_valid` and the violations (`crate::scenario`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<crate::scenario::Stamp>,
    /// With a scenario: the run in 1 s slices (`stats/slices.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_slices: Vec<super::slices::TimeSlice>,
}

impl Summary {
    /// The share of requests meeting every SLO, over the requests that could be judged: the
    /// scheduled ones less those the run cut before they met or broke an SLO
    /// ([`Summary::slo_undecided`]). `None` without an SLO.
    pub fn good_fraction(&self) -> Option<f64> {
        let good = self.good_requests?;
        let judged = self
            .scheduled
            .saturating_sub(self.slo_undecided.unwrap_or(0));
        Some(good as f64 / judged.max(1) as f64)
    }
}
