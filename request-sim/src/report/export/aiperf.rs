//! AIPerf's `profile_export.jsonl`: one line per request in the shape of AIPerf 0.13's
//! `MetricRecordInfo` (`aiperf/common/models/record_models.py`): `metadata`
//! (`MetricRecordMetadata`), `metrics` (tag → `{value, unit}` in its display units) and, for a
//! failed request, `error` (`ErrorDetails`: `code`, `type`, `message`).
//!
//! The metric tags and their meanings, AIPerf's against request-sim's record fields (the
//! latency ones are named in their rows of `stats/latency.rs`, the others in [`TAGS`]):
//!
//! | AIPerf tag | from the record |
//! |---|---|
//! | `time_to_first_token` (ms) | `ttft_ms` |
//! | `time_to_second_token` (ms) | `ttst_ms − ttft_ms` (AIPerf's TTST is the gap after the first token) |
//! | `time_to_first_output_token` (ms) | the time to the first answer token, as the `ttfa` goodput limit judges it (`ttfa_ms`, or `ttft_ms` for an answer without thinking or a tool call) |
//! | `request_latency` (ms) | `e2e_ms` (to the last token, vLLM's E2EL) |
//! | `inter_token_latency` (ms) | request-sim's TPOT: (E2EL − TTFT) / (output tokens − 1) |
//! | `inter_chunk_latency` (ms, list) | `itl_ms` (with `--record-itl`) |
//! | `output_token_throughput_per_user` (tokens/sec/user) | 1000 / TPOT |
//! | `output_sequence_length`, `output_token_count` (tokens) | output tokens |
//! | `input_sequence_length` (tokens) | the trace's `input_length` |
//! | `usage_prompt_tokens`, `usage_completion_tokens`, `usage_prompt_cache_read_tokens` | the server's usage |
//! | `reasoning_token_count` (tokens) | thinking tokens counted from the stream |
//!
//! The latency tags are a completed request's only (AIPerf computes none for a failed one).
//!
//! Times are wall-clock nanoseconds: the run's `started_at` plus the record's times.

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::common::start_unix_ns;
use crate::record::{Record, Status, TokenSource};
use crate::stats::latency::{Metric, Take};
use crate::stats::per_record::{end_ms, output_tokens_of, record_tpot};
use crate::stats::Summary;

/// AIPerf's name of the per-request file.
pub const RECORDS_FILE: &str = "profile_export.jsonl";

/// The worker and record-processor ids written in every record's metadata.
const WORKER_ID: &str = "request-sim";

/// `MetricRecordMetadata`: where and when one request ran.
#[derive(Serialize)]
struct Metadata {
    session_num: usize,
    x_request_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    x_correlation_id: Option<String>,
    conversation_id: String,
    turn_index: u32,
    credit_issued_ns: i128,
    request_start_ns: i128,
    request_end_ns: i128,
    worker_id: &'static str,
    record_processor_id: &'static str,
    benchmark_phase: &'static str,
    phase_index: u32,
    profiling_index: u32,
    phase_name: &'static str,
    phase_kind: &'static str,
    was_cancelled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cancellation_time_ns: Option<i128>,
}

/// `ErrorDetails` of a failed request.
#[derive(Serialize)]
pub(super) struct ErrorDetails {
    pub(super) code: Option<u16>,
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) message: String,
}

impl ErrorDetails {
    /// The error of a record that did not complete (`None` for a completed one).
    pub(super) fn of(rec: &Record) -> Option<ErrorDetails> {
        if matches!(rec.status, Status::Ok | Status::DryRun) {
            return None;
        }
        let message = match (&rec.error, rec.status) {
            (Some(e), _) => e.clone(),
            (None, Status::Cancelled) => "the run ended before the request finished".into(),
            (None, s) => s.as_str().to_string(),
        };
        Some(ErrorDetails {
            code: rec.http_status,
            kind: rec.status.as_str(),
            message,
        })
    }
}

/// Nanoseconds from milliseconds since the run start.
fn ns(start_ns: i128, ms: f64) -> i128 {
    start_ns + (ms * 1e6).round() as i128
}

/// The record's metadata in AIPerf's names.
fn metadata(rec: &Record, start_ns: i128) -> Metadata {
    let sent = rec.sent_ms.unwrap_or(rec.scheduled_ms);
    let end = end_ms(rec)
        .or_else(|| rec.cut_ms.map(|c| sent + c))
        .unwrap_or(sent);
    let cancelled = rec.status == Status::Cancelled;
    // A warm-up request (a warm trajectory start) is in AIPerf's warmup phase.
    let phase = if rec.is_warmup() {
        "warmup"
    } else {
        "profiling"
    };
    Metadata {
        session_num: rec.index,
        x_request_id: format!("request-sim-{}", rec.index),
        x_correlation_id: rec.session_id.clone(),
        conversation_id: rec
            .session_id
            .clone()
            .unwrap_or_else(|| rec.index.to_string()),
        turn_index: rec.turn.map_or(0, |t| t.saturating_sub(1)),
        credit_issued_ns: ns(start_ns, rec.scheduled_ms),
        request_start_ns: ns(start_ns, sent),
        request_end_ns: ns(start_ns, end),
        worker_id: WORKER_ID,
        record_processor_id: WORKER_ID,
        benchmark_phase: phase,
        phase_index: u32::from(!rec.is_warmup()),
        profiling_index: 0,
        phase_name: phase,
        phase_kind: phase,
        was_cancelled: cancelled,
        cancellation_time_ns: cancelled.then(|| ns(start_ns, end)),
    }
}

/// One of AIPerf's per-request metrics that is not a request-sim latency metric (those carry
/// their AIPerf names in their row of `stats/latency.rs`).
struct Tag {
    tag: &'static str,
    header: &'static str,
    unit: &'static str,
    /// Only completed requests have it (else every request that has a value).
    completed_only: bool,
    of: fn(&Record) -> Option<f64>,
}

/// AIPerf's token metrics and the per-user throughput.
const TAGS: [Tag; 8] = [
    Tag {
        tag: "input_sequence_length",
        header: "Input Sequence Length",
        unit: "tokens",
        completed_only: false,
        of: |r| Some(r.input_length.into()),
    },
    Tag {
        tag: "output_sequence_length",
        header: "Output Sequence Length",
        unit: "tokens",
        completed_only: true,
        of: |r| Some(output_tokens_of(r).into()),
    },
    Tag {
        tag: "output_token_count",
        header: "Output Token Count",
        unit: "tokens",
        completed_only: true,
        of: |r| Some(output_tokens_of(r).into()),
    },
    Tag {
        // 1000 / TPOT (ms).
        tag: "output_token_throughput_per_user",
        header: "Output Token Throughput Per User",
        unit: "tokens/sec/user",
        completed_only: true,
        of: |r| record_tpot(r).filter(|t| *t > 0.0).map(|t| 1000.0 / t),
    },
    Tag {
        tag: "reasoning_token_count",
        header: "Reasoning Token Count",
        unit: "tokens",
        completed_only: true,
        of: |r| r.reasoning_tokens.map(f64::from),
    },
    Tag {
        tag: "usage_prompt_tokens",
        header: "Usage Prompt Tokens",
        unit: "tokens",
        completed_only: false,
        of: |r| r.prompt_tokens.map(f64::from),
    },
    Tag {
        tag: "usage_completion_tokens",
        header: "Usage Completion Tokens",
        unit: "tokens",
        completed_only: false,
        of: |r| match (r.output_tokens, r.output_tokens_source) {
            (Some(o), Some(TokenSource::Usage)) => Some(o.into()),
            _ => None,
        },
    },
    Tag {
        tag: "usage_prompt_cache_read_tokens",
        header: "Usage Prompt Cache Read Tokens",
        unit: "tokens",
        completed_only: false,
        of: |r| r.cached_tokens.map(f64::from),
    },
];

/// Every per-request metric of the export: tag, AIPerf's header, unit (the latency metrics
/// of `stats/latency.rs` that AIPerf names, then [`TAGS`]).
pub(super) fn tags() -> Vec<(&'static str, &'static str, &'static str)> {
    let latency = Metric::ALL.into_iter().filter_map(|m| {
        let a = m.spec().aiperf?;
        Some((a.tag, a.header, m.unit()))
    });
    latency
        .chain(TAGS.iter().map(|t| (t.tag, t.header, t.unit)))
        .collect()
}

/// One metric value with its unit.
fn metric(metrics: &mut Map<String, Value>, tag: &str, value: Value, unit: &str) {
    metrics.insert(tag.to_string(), json!({ "value": value, "unit": unit }));
}

/// A whole number as an integer (a token count), else as it is.
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// The record's metrics, tag → `{value, unit}`. The latency metrics are a completed request's
/// only, as AIPerf computes them only for valid records.
pub(super) fn metrics(rec: &Record) -> Map<String, Value> {
    let mut m = Map::new();
    let ok = rec.status == Status::Ok;
    if ok {
        for lat in Metric::ALL {
            let Some(a) = lat.spec().aiperf else {
                continue;
            };
            let value = match a.take {
                Take::Request(f) => f(rec).map(|v| json!(v)),
                Take::Gaps => rec.itl_ms.as_ref().map(|g| json!(g)),
            };
            if let Some(v) = value {
                metric(&mut m, a.tag, v, lat.unit());
            }
        }
    }
    for t in TAGS.iter().filter(|t| ok || !t.completed_only) {
        if let Some(v) = (t.of)(rec) {
            let value = if t.unit == "tokens" {
                number(v)
            } else {
                json!(v)
            };
            metric(&mut m, t.tag, value, t.unit);
        }
    }
    m
}

/// The `MetricRecordInfo` line of one record.
pub fn record_info(rec: &Record, start_ns: i128) -> Value {
    let mut v = json!({
        "metadata": metadata(rec, start_ns),
        "metrics": metrics(rec),
    });
    if let (Some(e), Some(obj)) = (ErrorDetails::of(rec), v.as_object_mut()) {
        obj.insert("error".into(), json!(e));
    }
    v
}

/// Write `profile_export.jsonl`: one line per record (dry-run records have nothing to say and
/// are left out), in replay order.
pub fn write_records(path: &Path, summary: &Summary, records: &[Record]) -> crate::Result<()> {
    let start_ns = start_unix_ns(summary);
    let mut out = crate::util::OutputFile::create(path)?;
    let err = |e: std::io::Error| crate::Error::io(format!("cannot write {}", path.display()), e);
    for rec in records.iter().filter(|r| r.status != Status::DryRun) {
        let line = record_info(rec, start_ns);
        serde_json::to_writer(&mut out, &line)
            .map_err(|e| crate::Error::io(format!("cannot write {}", path.display()), e.into()))?;
        out.write_all(b"\n").map_err(err)?;
    }
    out.commit()
}
