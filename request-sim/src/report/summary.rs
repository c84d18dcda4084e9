//! The run summary: [`RunInfo`] (what was run), [`Accumulator`] (streaming over records) and
//! [`Summary`] (every vLLM `bench serve` result field plus the replayer's own).
//!
//! Definitions are in `docs/metrics.md`; they follow vLLM's `calculate_metrics`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::stats::{MetricStats, QuantizedSamples, Samples};
use super::{ReportConfig, Slo};
use crate::record::{Record, Status, TokenSource};
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
    /// Target URL with any credentials removed (see [`sanitize_url`]).
    pub endpoint: Option<String>,
    /// `openai-chat`, `openai-completions`, `tgi`, `aibrix` ...
    pub api: Option<String>,
    pub model: Option<String>,
    pub stream: Option<bool>,
    pub num_producer: Option<usize>,
    pub threads: Option<usize>,
    /// Tokens the chat template adds around the prompt (subtracted from the content).
    pub chat_overhead: Option<u32>,
    pub prompt_verification: Option<PromptVerification>,
    /// Prefix-cache hit ratio an infinite cache would reach on the replayed requests
    /// (from the trace's hash ids), to compare with the server-reported one.
    pub ideal_cache_hit_ratio: Option<f64>,
    /// Requests scheduled (each must end as exactly one record).
    pub scheduled: usize,
    /// Scheduled requests that were never sent.
    pub never_sent: usize,
    pub never_sent_reason: Option<String>,
    pub dry_run: bool,
    /// Requests in the replayed trace slice (= scheduled + never_sent).
    pub planned: Option<usize>,
    /// How the run ended: completed, time_limit, interrupted, early_stop, producer_failed.
    pub stop_reason: Option<String>,
    /// Wall time from the first send to the last record, seconds.
    pub wall_time_s: Option<f64>,
    /// The records JSONL the summary was computed from.
    pub records_path: Option<String>,
    /// `--max-output-tokens`: every request's output_length was capped at this.
    pub max_output_tokens: Option<u32>,
    /// What the producers built and how fast (producer-side capacity; see `docs/performance.md`).
    pub producer: Option<crate::schedule::ProducerStats>,
    /// How precisely the dispatcher handed requests over (before the runtime started them).
    pub dispatch: Option<crate::schedule::DispatchStats>,
    /// Where start-up time went.
    pub startup: Option<StartupTimes>,
    /// Whether the dispatcher and I/O threads ran under real-time scheduling (`--realtime`).
    pub realtime: Option<crate::schedule::RealtimeReport>,
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
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339_from_unix_ms(d.as_millis() as i64)
}

/// Milliseconds since the Unix epoch as RFC 3339 UTC.
pub fn rfc3339_from_unix_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// Remove user info (`user:pass@`) and query string from a URL so credentials never reach an
/// output file.
pub fn sanitize_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => (&url[..i + 3], &url[i + 3..]),
        None => ("", url),
    };
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let host = authority.rsplit('@').next().unwrap_or(authority);
    format!("{scheme}{host}{path}")
}

/// Send drift (actual send time - scheduled time), ms.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    fn add(&mut self, s: Status) {
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
    /// Trace-ideal (infinite cache) hit ratio from the run info, when known.
    pub ideal_hit_ratio: Option<f64>,
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

/// Statistics of the latency metrics, serialized flat with vLLM's keys
/// (`mean_ttft_ms`, `median_ttft_ms`, `std_ttft_ms`, `p99_ttft_ms`, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies {
    pub ttft: MetricStats,
    pub tpot: MetricStats,
    pub itl: MetricStats,
    pub e2el: MetricStats,
    /// Time to first content token (differs from TTFT for role-only first chunks).
    pub ttfc: MetricStats,
}

/// Metric names in [`Latencies`], in display order, with vLLM's labels.
pub const METRICS: [(&str, &str, &str); 4] = [
    ("ttft", "TTFT", "Time to First Token"),
    ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
    ("itl", "ITL", "Inter-token Latency"),
    ("e2el", "E2EL", "End-to-end Latency"),
];

impl Latencies {
    pub fn get(&self, name: &str) -> Option<&MetricStats> {
        match name {
            "ttft" => Some(&self.ttft),
            "tpot" => Some(&self.tpot),
            "itl" => Some(&self.itl),
            "e2el" => Some(&self.e2el),
            "ttfc" => Some(&self.ttfc),
            _ => None,
        }
    }
    fn get_mut(&mut self, name: &str) -> Option<&mut MetricStats> {
        match name {
            "ttft" => Some(&mut self.ttft),
            "tpot" => Some(&mut self.tpot),
            "itl" => Some(&mut self.itl),
            "e2el" => Some(&mut self.e2el),
            "ttfc" => Some(&mut self.ttfc),
            _ => None,
        }
    }
}

/// vLLM's spelling of a percentile in keys and labels: `99`, `99.9`.
pub fn p_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

const ALL_METRICS: [&str; 5] = ["ttft", "tpot", "itl", "e2el", "ttfc"];

impl Serialize for Latencies {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = ser.serialize_map(None)?;
        for name in ALL_METRICS {
            let m = self.get(name).expect("known metric");
            map.serialize_entry(&format!("count_{name}"), &m.count)?;
            map.serialize_entry(&format!("mean_{name}_ms"), &finite(m.mean))?;
            map.serialize_entry(&format!("median_{name}_ms"), &finite(m.median))?;
            map.serialize_entry(&format!("std_{name}_ms"), &finite(m.std))?;
            map.serialize_entry(&format!("min_{name}_ms"), &finite(m.min))?;
            map.serialize_entry(&format!("max_{name}_ms"), &finite(m.max))?;
            for (p, v) in &m.percentiles {
                map.serialize_entry(&format!("p{}_{name}_ms", p_word(*p)), &finite(*v))?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Latencies {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Latencies;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("flat latency statistics (mean_ttft_ms, p99_ttft_ms, ...)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Latencies, A::Error> {
                let mut l = Latencies::default();
                while let Some(key) = a.next_key::<String>()? {
                    match parse_metric_key(&key) {
                        Some((stat, name)) => {
                            let v: f64 = a.next_value()?;
                            let m = l.get_mut(name).expect("known metric");
                            match stat {
                                Stat::Count => m.count = v as u64,
                                Stat::Mean => m.mean = v,
                                Stat::Median => m.median = v,
                                Stat::Std => m.std = v,
                                Stat::Min => m.min = v,
                                Stat::Max => m.max = v,
                                Stat::P(p) => m.percentiles.push((p, v)),
                            }
                        }
                        None => {
                            a.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                for name in ALL_METRICS {
                    let m = l.get_mut(name).expect("known metric");
                    m.percentiles.sort_by(|x, y| x.0.total_cmp(&y.0));
                }
                Ok(l)
            }
        }
        de.deserialize_map(V)
    }
}

enum Stat {
    Count,
    Mean,
    Median,
    Std,
    Min,
    Max,
    P(f64),
}

fn parse_metric_key(key: &str) -> Option<(Stat, &'static str)> {
    if let Some(name) = key.strip_prefix("count_") {
        return ALL_METRICS
            .iter()
            .find(|m| **m == name)
            .map(|m| (Stat::Count, *m));
    }
    let body = key.strip_suffix("_ms")?;
    let (stat, name) = body.split_once('_')?;
    let name = *ALL_METRICS.iter().find(|m| **m == name)?;
    let stat = match stat {
        "mean" => Stat::Mean,
        "median" => Stat::Median,
        "std" => Stat::Std,
        "min" => Stat::Min,
        "max" => Stat::Max,
        s => Stat::P(s.strip_prefix('p')?.parse().ok()?),
    };
    Some((stat, name))
}

fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
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
    /// Peak output tokens in any 1-second bucket (vLLM definition: one token per chunk).
    pub max_output_tokens_per_s: f64,
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

    pub drift: DriftStats,
    /// Records by status; `status.total` must equal `scheduled`.
    pub status: StatusCounts,
    pub scheduled: usize,
    /// True when the records account for every scheduled request.
    pub counts_add_up: bool,
    /// Requests sent a second time on a fresh connection because the server closed the
    /// reused one before answering (records with `retries` > 0).
    pub retried: usize,
    /// Sessions (multi-turn conversations), when the records carry session ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<super::sessions::SessionSummary>,
    /// Failed requests by kind (`http_error:503`, `timeout`, ...).
    pub errors: BTreeMap<String, usize>,
    /// First error message seen for each kind.
    pub error_examples: BTreeMap<String, String>,
    pub cache: CacheStats,
    pub token_exactness: TokenExactness,
    pub output_tokens_source: OutputTokenSources,
    /// Things the user must know (no usage from the server, records missing, ...).
    pub warnings: Vec<String>,
    pub run: RunInfo,
}

/// Output tokens per time bucket, with a bucket width that doubles whenever the run gets too
/// long for [`MAX_BINS`] buckets (1 ms buckets up to ~70 minutes; memory stays <= 16 MiB).
#[derive(Debug, Clone)]
struct TokenTimeline {
    res_ms: f64,
    bins: Vec<u32>,
}

const MAX_BINS: usize = 1 << 22;

impl TokenTimeline {
    fn new() -> Self {
        TokenTimeline {
            res_ms: 1.0,
            bins: Vec::new(),
        }
    }
    fn push(&mut self, t_ms: f64) {
        if !t_ms.is_finite() {
            return;
        }
        let t = t_ms.max(0.0);
        let mut idx = (t / self.res_ms) as usize;
        while idx >= MAX_BINS {
            self.coarsen();
            idx = (t / self.res_ms) as usize;
        }
        if idx >= self.bins.len() {
            self.bins.resize(idx + 1, 0);
        }
        self.bins[idx] = self.bins[idx].saturating_add(1);
    }
    fn coarsen(&mut self) {
        let merged: Vec<u32> = self
            .bins
            .chunks(2)
            .map(|c| c.iter().fold(0u32, |a, b| a.saturating_add(*b)))
            .collect();
        self.bins = merged;
        self.res_ms *= 2.0;
    }
    /// Max tokens in 1-second windows `[base + k s, base + (k+1) s)`.
    fn max_per_second(&self, base_ms: f64) -> f64 {
        let mut windows: Vec<u64> = Vec::new();
        for (i, c) in self.bins.iter().enumerate() {
            if *c == 0 {
                continue;
            }
            let t = i as f64 * self.res_ms;
            let rel = t - base_ms;
            if rel < 0.0 {
                continue;
            }
            let k = (rel / 1000.0) as usize;
            if k >= windows.len() {
                windows.resize(k + 1, 0);
            }
            windows[k] += *c as u64;
        }
        windows.into_iter().max().unwrap_or(0) as f64
    }
}

/// Streaming accumulation of records into a [`Summary`].
///
/// Per-request values (TTFT, TPOT, E2EL, drift: one per request) are kept exactly; ITL values
/// are quantised to 1 µs in a counting map, so memory is bounded by the number of distinct
/// microsecond values rather than the number of chunks.
#[derive(Debug, Clone)]
pub struct Accumulator {
    percentiles: Vec<f64>,
    slo: Slo,
    ttft: Samples,
    ttfc: Samples,
    tpot: Samples,
    e2el: Samples,
    itl: QuantizedSamples,
    drift: Samples,
    drift_over_1: u64,
    drift_over_5: u64,
    status: StatusCounts,
    completed: usize,
    failed: usize,
    good: usize,
    total_input: u64,
    total_output: u64,
    first_send: Option<f64>,
    last_end: Option<f64>,
    /// (start, end) of completed requests, ms (for vLLM's per-second concurrency).
    ok_spans: Vec<(f64, f64)>,
    /// (start, end) of every sent request with a known end (instantaneous in-flight).
    all_spans: Vec<(f64, f64)>,
    tokens: TokenTimeline,
    errors: BTreeMap<String, usize>,
    error_examples: BTreeMap<String, String>,
    cache: CacheStats,
    exact: TokenExactness,
    sources: OutputTokenSources,
    retried: usize,
    sessions: super::sessions::SessionAcc,
}

/// Error kind key of a failed record: `http_error:503`, `timeout`, ...
pub fn error_kind(rec: &Record) -> String {
    match (rec.status, rec.http_status) {
        (Status::HttpError, Some(code)) => format!("http_error:{code}"),
        (s, _) => s.as_str().to_string(),
    }
}

/// TPOT of a record per vLLM: (E2EL - TTFT) / (output tokens - 1), for > 1 output token.
pub fn record_tpot(rec: &Record) -> Option<f64> {
    let out = output_tokens_of(rec);
    if out <= 1 {
        return None;
    }
    match (rec.e2e_ms, rec.ttft_ms) {
        (Some(e), Some(t)) => Some((e - t) / (out as f64 - 1.0)),
        _ => rec.tpot_ms,
    }
}

/// Output tokens of a record: the server's count, else the chunk count.
pub fn output_tokens_of(rec: &Record) -> u32 {
    rec.output_tokens.unwrap_or(rec.chunks)
}

/// When a record's request ended, ms since the run start (`sent + done`, else `sent + e2e`).
pub fn end_ms(rec: &Record) -> Option<f64> {
    let sent = rec.sent_ms?;
    rec.done_ms.or(rec.e2e_ms).map(|d| sent + d)
}

impl Accumulator {
    pub fn new(cfg: &ReportConfig) -> Self {
        Accumulator {
            percentiles: cfg.percentiles.clone(),
            slo: cfg.slo,
            ttft: Samples::default(),
            ttfc: Samples::default(),
            tpot: Samples::default(),
            e2el: Samples::default(),
            itl: QuantizedSamples::default(),
            drift: Samples::default(),
            drift_over_1: 0,
            drift_over_5: 0,
            status: StatusCounts::default(),
            completed: 0,
            failed: 0,
            good: 0,
            total_input: 0,
            total_output: 0,
            first_send: None,
            last_end: None,
            ok_spans: Vec::new(),
            all_spans: Vec::new(),
            tokens: TokenTimeline::new(),
            errors: BTreeMap::new(),
            error_examples: BTreeMap::new(),
            cache: CacheStats::default(),
            exact: TokenExactness::default(),
            sources: OutputTokenSources::default(),
            retried: 0,
            sessions: super::sessions::SessionAcc::default(),
        }
    }

    /// Add one record. `itl_ms` are its inter-token latencies (the engine passes them even
    /// when the record does not keep them; when empty, the record's own `itl_ms` is used);
    /// only used for successful requests, as vLLM does.
    pub fn add(&mut self, rec: &Record, itl_ms: &[f64]) {
        self.sessions.add(rec);
        let itl_ms = if itl_ms.is_empty() {
            rec.itl_ms.as_deref().unwrap_or(&[])
        } else {
            itl_ms
        };
        self.status.add(rec.status);
        if rec.retries > 0 {
            self.retried += 1;
        }
        if rec.sent_ms.is_none() {
            self.status.not_sent += 1;
        }
        if let Some(sent) = rec.sent_ms {
            self.first_send = Some(self.first_send.map_or(sent, |f| f.min(sent)));
            if let Some(end) = end_ms(rec) {
                self.last_end = Some(self.last_end.map_or(end, |l| l.max(end)));
                self.all_spans.push((sent, end));
            }
            if let Some(d) = rec.drift_ms {
                self.drift.push(d);
                if d > 1.0 {
                    self.drift_over_1 += 1;
                }
                if d > 5.0 {
                    self.drift_over_5 += 1;
                }
            }
        }

        // Server usage: cache and exactness over every record that has it.
        if let Some(pt) = rec.prompt_tokens {
            self.exact.with_usage += 1;
            let diff = pt as i64 - rec.input_length as i64;
            match diff.cmp(&0) {
                std::cmp::Ordering::Equal => self.exact.exact += 1,
                std::cmp::Ordering::Greater => self.exact.over += 1,
                std::cmp::Ordering::Less => self.exact.under += 1,
            }
            self.exact.max_abs_diff = self.exact.max_abs_diff.max(diff.unsigned_abs());
            if let Some(ct) = rec.cached_tokens {
                self.cache.requests_with_cached_tokens += 1;
                self.cache.prompt_tokens += pt as u64;
                self.cache.cached_tokens += ct as u64;
            }
        }

        match rec.status {
            Status::Ok => self.add_completed(rec, itl_ms),
            Status::DryRun => {}
            _ => {
                if rec.sent_ms.is_some() {
                    self.failed += 1;
                }
                let kind = error_kind(rec);
                *self.errors.entry(kind.clone()).or_insert(0) += 1;
                if let Some(e) = &rec.error {
                    self.error_examples.entry(kind).or_insert_with(|| {
                        let mut s: String = e.chars().take(200).collect();
                        if s.len() < e.len() {
                            s.push('…');
                        }
                        s
                    });
                }
            }
        }
    }

    fn add_completed(&mut self, rec: &Record, itl_ms: &[f64]) {
        self.completed += 1;
        let out = output_tokens_of(rec);
        match (rec.output_tokens, rec.output_tokens_source) {
            (Some(_), Some(TokenSource::Usage)) | (Some(_), None) => self.sources.usage += 1,
            (Some(_), Some(TokenSource::Chunks)) => self.sources.chunks += 1,
            (None, _) => self.sources.unknown += 1,
        }
        self.total_input += rec.input_length as u64;
        self.total_output += out as u64;
        if let Some(t) = rec.ttft_ms {
            self.ttft.push(t);
        }
        if let Some(t) = rec.ttfc_ms {
            self.ttfc.push(t);
        }
        if let Some(e) = rec.e2e_ms {
            self.e2el.push(e);
        }
        let tpot = record_tpot(rec);
        if let Some(t) = tpot {
            self.tpot.push(t);
        }
        for v in itl_ms {
            self.itl.push(*v);
        }
        if !self.slo.is_empty()
            && self
                .slo
                .is_met(rec.ttft_ms, tpot.unwrap_or(0.0), rec.e2e_ms)
        {
            self.good += 1;
        }
        if let (Some(sent), Some(e2e)) = (rec.sent_ms, rec.e2e_ms) {
            self.ok_spans.push((sent, sent + e2e));
            if let Some(ttft) = rec.ttft_ms {
                // vLLM: one token at TTFT, then one per ITL gap.
                let mut t = sent + ttft;
                self.tokens.push(t);
                for v in itl_ms {
                    t += v;
                    self.tokens.push(t);
                }
            }
        }
    }

    /// Number of records added so far.
    pub fn records(&self) -> usize {
        self.status.total
    }

    pub fn finish(self, info: &RunInfo) -> Summary {
        let ps = &self.percentiles;
        let duration_ms = match (self.first_send, self.last_end) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => 0.0,
        };
        let duration_s = duration_ms / 1000.0;
        let per_s = |x: f64| {
            if duration_s > 0.0 {
                x / duration_s
            } else {
                0.0
            }
        };

        // vLLM: per-second buckets from the first successful start.
        let base = self
            .ok_spans
            .iter()
            .map(|s| s.0)
            .min_by(f64::total_cmp)
            .unwrap_or(0.0);
        let max_output_tokens_per_s = if self.ok_spans.is_empty() {
            0.0
        } else {
            self.tokens.max_per_second(base)
        };
        let max_concurrent_requests = per_second_concurrency(&self.ok_spans, base);
        let max_in_flight = peak_overlap(&self.all_spans);

        let drift_stats = self.drift.stats(&[50.0, 99.0]);
        let drift = DriftStats {
            count: drift_stats.count,
            mean_ms: drift_stats.mean,
            p50_ms: drift_stats.percentile(50.0).unwrap_or(0.0),
            p99_ms: drift_stats.percentile(99.0).unwrap_or(0.0),
            max_ms: drift_stats.max,
            over_1ms: self.drift_over_1,
            over_5ms: self.drift_over_5,
        };

        let mut cache = self.cache;
        cache.hit_ratio = (cache.prompt_tokens > 0)
            .then(|| cache.cached_tokens as f64 / cache.prompt_tokens as f64);
        cache.ideal_hit_ratio = info.ideal_cache_hit_ratio;
        let mut exact = self.exact;
        exact.exact_ratio =
            (exact.with_usage > 0).then(|| exact.exact as f64 / exact.with_usage as f64);

        // scheduled = 0 means unknown (e.g. re-summarising a JSONL without run info).
        let scheduled = if info.scheduled == 0 {
            self.status.total
        } else {
            info.scheduled
        };
        let counts_add_up = self.status.total == scheduled;

        let mut warnings = Vec::new();
        if !counts_add_up {
            warnings.push(format!(
                "records ({}) do not account for every scheduled request ({}): {} missing",
                self.status.total,
                scheduled,
                scheduled as i64 - self.status.total as i64
            ));
        }
        if self.completed == 0 && self.status.total > 0 && self.status.dry_run == 0 {
            warnings.push("no request completed successfully".to_string());
        }
        let no_usage = self.sources.chunks + self.sources.unknown;
        if no_usage > 0 {
            warnings.push(format!(
                "SERVER GAVE NO USAGE for {no_usage} of {} completed requests: output tokens \
                 counted from token-bearing chunks instead (TPOT and token throughput may be off \
                 if a chunk carries more than one token)",
                self.completed
            ));
        }
        if self.completed > 0 && exact.with_usage == 0 {
            warnings.push(
                "server reported no prompt_tokens: token exactness cannot be checked".to_string(),
            );
        } else if exact.with_usage > exact.exact {
            warnings.push(format!(
                "server prompt_tokens differ from the trace's input_length for {} of {} requests \
                 (max difference {})",
                exact.with_usage - exact.exact,
                exact.with_usage,
                exact.max_abs_diff
            ));
        }
        if let Some(rt) = info.realtime.as_ref().filter(|rt| rt.policy != "fifo") {
            if drift.p99_ms > 1.0 {
                warnings.push(format!(
                    "send drift p99 {:.2} ms at normal scheduling ({}): other work on the machine \
                     delayed sends; real-time scheduling (--realtime) usually keeps it under 1 ms",
                    drift.p99_ms,
                    rt.reason.as_deref().unwrap_or("not used")
                ));
            }
        }
        if let Some(pv) = info.prompt_verification {
            if pv.exact < pv.checked {
                warnings.push(format!(
                    "prompt verification: only {} of {} sampled prompts had the exact length",
                    pv.exact, pv.checked
                ));
            }
        }

        let good = (!self.slo.is_empty()).then_some(self.good);
        Summary {
            completed: self.completed,
            failed: self.failed,
            duration_s,
            total_input_tokens: self.total_input,
            total_output_tokens: self.total_output,
            request_throughput: per_s(self.completed as f64),
            request_goodput: good.map(|g| per_s(g as f64)),
            output_throughput: per_s(self.total_output as f64),
            total_token_throughput: per_s((self.total_input + self.total_output) as f64),
            max_output_tokens_per_s,
            max_concurrent_requests,
            max_in_flight,
            latency: Latencies {
                ttft: self.ttft.stats(ps),
                tpot: self.tpot.stats(ps),
                itl: self.itl.stats(ps),
                e2el: self.e2el.stats(ps),
                ttfc: self.ttfc.stats(ps),
            },
            percentiles: ps.clone(),
            goodput_slo: self.slo,
            good_requests: good,
            drift,
            status: self.status,
            scheduled,
            counts_add_up,
            retried: self.retried,
            sessions: self.sessions.finish(),
            errors: self.errors,
            error_examples: self.error_examples,
            cache,
            token_exactness: exact,
            output_tokens_source: self.sources,
            warnings,
            run: info.clone(),
        }
    }
}

/// vLLM's peak concurrency: each completed request counts in every 1-second bucket from
/// `int(start - base)` to `int(end - base)` inclusive; the maximum over buckets.
fn per_second_concurrency(spans: &[(f64, f64)], base_ms: f64) -> u64 {
    if spans.is_empty() {
        return 0;
    }
    let sec = |t: f64| (((t - base_ms) / 1000.0).max(0.0)) as usize;
    let n = spans.iter().map(|s| sec(s.1)).max().unwrap_or(0) + 2;
    let mut diff = vec![0i64; n + 1];
    for (s, e) in spans {
        let (a, b) = (sec(*s), sec(*e).max(sec(*s)));
        diff[a] += 1;
        diff[b + 1] -= 1;
    }
    let mut cur = 0i64;
    let mut best = 0i64;
    for d in diff {
        cur += d;
        best = best.max(cur);
    }
    best as u64
}

/// Largest number of overlapping `[start, end)` spans.
fn peak_overlap(spans: &[(f64, f64)]) -> u64 {
    let mut ev: Vec<(f64, i32)> = Vec::with_capacity(spans.len() * 2);
    for (s, e) in spans {
        ev.push((*s, 1));
        ev.push((*e, -1));
    }
    // Ends before starts at the same instant.
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut cur = 0i64;
    let mut best = 0i64;
    for (_, d) in ev {
        cur += d as i64;
        best = best.max(cur);
    }
    best as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_from_unix_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_from_unix_ms(1_795_247_543_123),
            "2026-11-21T07:52:23.123Z"
        );
        assert_eq!(
            rfc3339_from_unix_ms(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
        assert!(now_rfc3339().ends_with('Z'));
    }

    #[test]
    fn sanitize_strips_credentials() {
        assert_eq!(
            sanitize_url("http://user:secret@host:8000/v1/chat/completions?key=abc"),
            "http://host:8000/v1/chat/completions"
        );
        assert_eq!(sanitize_url("http://h:1"), "http://h:1");
    }

    #[test]
    fn concurrency_and_overlap() {
        let spans = [(0.0, 1500.0), (200.0, 300.0), (2500.0, 2600.0)];
        assert_eq!(per_second_concurrency(&spans, 0.0), 2);
        assert_eq!(peak_overlap(&spans), 2);
        assert_eq!(peak_overlap(&[(0.0, 1.0), (1.0, 2.0)]), 1);
    }

    #[test]
    fn timeline_coarsens() {
        let mut t = TokenTimeline::new();
        t.push(10.0);
        t.push(MAX_BINS as f64 * 1.5);
        assert_eq!(t.res_ms, 2.0);
        assert!(t.bins.len() <= MAX_BINS);
        assert_eq!(t.max_per_second(0.0), 1.0);
    }
}
