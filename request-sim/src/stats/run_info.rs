//! [`RunInfo`]: what was run, reported beside the metrics (settings, trace facts, start-up
//! times, how the run ended).

use serde::{Deserialize, Serialize};

use crate::trace::{TraceFormat, TraceStats};

/// Result of checking a sample of built prompts with the tokenizer at start-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptVerification {
    /// Prompts re-tokenized.
    pub checked: usize,
    /// Of those, prompts with exactly the intended token count.
    pub exact: usize,
}

/// Where start-up time went, in milliseconds: from the start of the replay command to the
/// first scheduled send (the clock's start).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StartupTimes {
    /// Reading and validating the trace (and its ideal cache ratio).
    pub trace_load_ms: f64,
    /// Async runtime, HTTP client and (without --endpoint) the built-in simulator.
    pub runtime_ms: f64,
    /// Loading `tokenizer.json`.
    pub tokenizer_load_ms: f64,
    /// Collecting the single-token word list from the tokenizer.
    pub vocab_ms: f64,
    /// Re-tokenizing a sample of prompts.
    pub prompt_check_ms: f64,
    /// Model name lookup and chat overhead (template or calibration request).
    pub calibration_ms: f64,
    /// Waiting for producers to build the first bodies (and, at the same time, opening the
    /// first connections).
    pub warmup_ms: f64,
    /// Requests due in the first moments of the schedule, which the clock waited for.
    pub prefill_due: usize,
    /// How many of those were built when the clock started (equal unless pre-fill timed out).
    pub prefill_built: usize,
    /// Warm-up `GET`s answered before the clock started, one per keep-alive connection opened
    /// (twice as many when a `Keep-Alive: timeout=` made the pool change; see
    /// `docs/performance.md`).
    pub connections: usize,
    /// The idle timeout the server announced (`Keep-Alive: timeout=`), seconds, if any.
    pub server_keep_alive_s: Option<f64>,
    /// Everything, start to first scheduled send.
    pub total_ms: f64,
}

/// What was run: settings and facts the summary reports alongside the metrics.
/// Everything that may be unknown (e.g. when re-summarising a JSONL file) is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunInfo {
    /// request-sim version that produced the run.
    pub tool_version: String,
    /// Run start, RFC 3339 UTC.
    pub started_at: Option<String>,
    pub trace_path: Option<String>,
    pub format: Option<TraceFormat>,
    pub block_size: Option<usize>,
    pub trace_stats: Option<TraceStats>,
    pub seed: Option<u64>,
    pub scale_factor: Option<f64>,
    /// The server the run targeted and how it was asked.
    #[serde(flatten)]
    pub server: RunServer,
    pub num_producer: Option<usize>,
    pub threads: Option<usize>,
    /// How prompt token counts were made exact, and the trace-ideal cache hit ratio.
    #[serde(flatten)]
    pub prompts: RunPrompts,
    /// What became of the scheduled requests and how the run ended.
    #[serde(flatten)]
    pub outcome: RunEnd,
    /// The records JSONL the summary was computed from.
    pub records_path: Option<String>,
    /// `--max-output-tokens`: every request's output_length was capped at this.
    pub max_output_tokens: Option<u32>,
    /// How the replay machinery itself did: producers, dispatcher, start-up, real-time
    /// scheduling, common start.
    #[serde(flatten)]
    pub internals: RunInternals,
    /// Session settings (`--timing`, `--think-time`, `--live-history`) and the turns slicing
    /// cut, when the trace has sessions.
    pub sessions: Option<super::sessions::SessionRun>,
    /// An agent corpus: how its population was laid out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agents: Option<crate::trace::pipeline::plan::PlanFacts>,
    /// `--scenario`: the stamp before the run (the summary's `scenario` is judged after it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<crate::scenario::Stamp>,
}

/// The server the run targeted and how it was asked. Part of [`RunInfo`] (its keys are
/// `RunInfo`'s).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunServer {
    /// Target URL with any credentials removed (see [`crate::backend::sanitize_url`]).
    pub endpoint: Option<String>,
    /// `openai-chat`, `openai-completions`, `openai-responses`, `anthropic-messages`, `tgi` or
    /// `aibrix`.
    pub api: Option<crate::backend::Api>,
    pub model: Option<String>,
    pub stream: Option<bool>,
}

/// How prompt token counts were made exact, and the trace-ideal cache hit ratio. Part of
/// [`RunInfo`] (its keys are `RunInfo`'s).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunPrompts {
    /// Tokens the chat template adds around the prompt (subtracted from the content).
    pub chat_overhead: Option<u32>,
    /// What prompt token counts were made exact against: `local tokenizer PATH`, `server
    /// /tokenize (...) at URL`, or `none (built-in word list)`.
    pub prompt_token_source: Option<String>,
    pub prompt_verification: Option<PromptVerification>,
    /// `--prompt-corpus`: the corpus and the share of prompt tokens that are its text.
    pub prompt_corpus: Option<crate::prompt::CorpusReport>,
    /// Prefix-cache hit ratio an infinite cache would reach on the requests the server
    /// processed, in send order (from the trace's hash ids; `crate::stats::ideal`), to compare
    /// with the server-reported one.
    pub ideal_cache_hit_ratio: Option<f64>,
    /// Requests that ratio counts (answered, or with a first token) of those sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_cache_hit_requests: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_cache_hit_sent: Option<u64>,
}

/// What became of the scheduled requests and how the run ended. Part of [`RunInfo`] (its keys
/// are `RunInfo`'s).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunEnd {
    /// Requests scheduled (each must end as exactly one record).
    pub scheduled: usize,
    /// Scheduled requests that were never sent.
    pub never_sent: usize,
    /// Why they were not sent (the run's stop reason).
    pub never_sent_reason: Option<crate::schedule::StopReason>,
    pub dry_run: bool,
    /// Requests in the replayed trace slice (= scheduled + never_sent).
    pub planned: Option<usize>,
    /// How the run ended: completed, time_limit, interrupted, early_stop, producer_failed.
    pub stop_reason: Option<crate::schedule::StopReason>,
    /// Wall time from the first send to the last record, seconds.
    pub wall_time_s: Option<f64>,
}

/// How the replay machinery itself did: producers, dispatcher, start-up, real-time scheduling,
/// common start. Part of [`RunInfo`] (its keys are `RunInfo`'s).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunInternals {
    /// What the producers built and how fast (producer-side capacity; see `docs/performance.md`).
    pub producer: Option<crate::schedule::ProducerStats>,
    /// How precisely the dispatcher handed requests over (before the runtime started them).
    pub dispatch: Option<crate::schedule::DispatchStats>,
    /// Where start-up time went.
    pub startup: Option<StartupTimes>,
    /// Whether the dispatcher and I/O threads ran under real-time scheduling (`--realtime`).
    pub realtime: Option<crate::schedule::RealtimeReport>,
    /// `--start-at`: the common start and how close to it this run started.
    pub start_at: Option<crate::schedule::StartAtReport>,
    /// `--timing closed`: how the release clock sent the waiting turns.
    pub releases: Option<crate::schedule::ReleaseStats>,
    /// The client's own CPU time, over the whole run.
    pub client_cpu: Option<ClientCpu>,
}

/// The client's own CPU time (the process's `getrusage`, start-up included), and per record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientCpu {
    pub user_s: f64,
    pub sys_s: f64,
    /// (user + system) / records, CPU-ms.
    pub ms_per_request: Option<f64>,
    /// The built-in simulator ran in the process: its CPU is in these numbers.
    pub includes_simulator: bool,
    /// On a virtual machine: the CPU seconds the hypervisor took from the machine's vCPUs
    /// while they had work, all vCPUs, over the run (Linux's steal time; `None` where not
    /// reported). Stalls of the whole vCPU show here, not in the client's own numbers.
    pub machine_steal_s: Option<f64>,
}

impl RunInfo {
    /// A RunInfo with only the tool version set.
    pub fn new() -> RunInfo {
        RunInfo {
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            ..RunInfo::default()
        }
    }
}

/// The current time as RFC 3339 UTC with millisecond precision (`2026-11-21T07:52:23.123Z`),
/// for [`RunInfo::started_at`].
pub fn now_rfc3339() -> String {
    rfc3339_ms(jiff::Timestamp::now())
}

/// The current UTC time to the second as `YYYYMMDD-HHMMSS`, for default result file and
/// directory names (`results/replay-<stamp>.jsonl`, `results/sweep-<stamp>`, ...).
pub fn file_stamp() -> String {
    now_rfc3339()
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .map(|c| if c == 'T' { '-' } else { c })
        .collect()
}

/// RFC 3339 UTC with exactly three fractional digits.
fn rfc3339_ms(t: jiff::Timestamp) -> String {
    format!("{t:.3}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        let at = |ms| rfc3339_ms(jiff::Timestamp::from_millisecond(ms).unwrap());
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(1_795_247_543_123), "2026-11-21T07:52:23.123Z");
        assert_eq!(at(951_782_400_000), "2000-02-29T00:00:00.000Z");
        let now = now_rfc3339();
        assert_eq!((now.len(), &now[19..20]), (24, "."), "{now}");
        assert!(now.ends_with('Z'));
    }
}
