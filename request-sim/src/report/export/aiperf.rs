//! AIPerf's `profile_export.jsonl`: one line per request in the shape of AIPerf 0.13's
//! `MetricRecordInfo` (`aiperf/common/models/record_models.py`): `metadata`
//! (`MetricRecordMetadata`), `metrics` (tag → `{value, unit}` in its display units) and, for a
//! failed request, `error` (`ErrorDetails`: `code`, `type`, `message`).
//!
//! The metric tags and their meanings, AIPerf's against request-sim's record fields:
//!
//! | AIPerf tag | from the record |
//! |---|---|
//! | `time_to_first_token` (ms) | `ttft_ms` |
//! | `request_latency` (ms) | `e2e_ms` (to the last token, vLLM's E2EL) |
//! | `inter_token_latency` (ms) | request-sim's TPOT: (E2EL − TTFT) / (output tokens − 1) |
//! | `inter_chunk_latency` (ms, list) | `itl_ms` (with `--record-itl`) |
//! | `time_to_second_token` (ms) | the first gap of `itl_ms` |
//! | `output_token_throughput_per_user` (tokens/sec/user) | 1000 / TPOT |
//! | `output_sequence_length`, `output_token_count` (tokens) | output tokens |
//! | `input_sequence_length` (tokens) | the trace's `input_length` |
//! | `usage_prompt_tokens`, `usage_completion_tokens`, `usage_prompt_cache_read_tokens` | the server's usage |
//! | `reasoning_token_count` (tokens) | thinking tokens counted from the stream |
//!
//! Times are wall-clock nanoseconds: the run's `started_at` plus the record's times.

use std::io::Write;
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::common::start_unix_ns;
use crate::record::{Record, Status, TokenSource};
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
        benchmark_phase: "profiling",
        phase_index: 0,
        profiling_index: 0,
        phase_name: "profiling",
        phase_kind: "profiling",
        was_cancelled: cancelled,
        cancellation_time_ns: cancelled.then(|| ns(start_ns, end)),
    }
}

/// One metric value with its unit.
fn metric(metrics: &mut Map<String, Value>, tag: &str, value: Value, unit: &str) {
    metrics.insert(tag.to_string(), json!({ "value": value, "unit": unit }));
}

/// The record's metrics, tag → `{value, unit}`.
pub(super) fn metrics(rec: &Record) -> Map<String, Value> {
    let mut m = Map::new();
    metric(
        &mut m,
        "input_sequence_length",
        json!(rec.input_length),
        "tokens",
    );
    if let Some(t) = rec.ttft_ms {
        metric(&mut m, "time_to_first_token", json!(t), "ms");
    }
    if let Some(e) = rec.e2e_ms.filter(|_| rec.status == Status::Ok) {
        metric(&mut m, "request_latency", json!(e), "ms");
    }
    if let Some(gaps) = &rec.itl_ms {
        if let (Some(t), Some(first)) = (rec.ttft_ms, gaps.first()) {
            metric(&mut m, "time_to_second_token", json!(t + first), "ms");
        }
        metric(&mut m, "inter_chunk_latency", json!(gaps), "ms");
    }
    if rec.status == Status::Ok {
        let out = output_tokens_of(rec);
        metric(&mut m, "output_sequence_length", json!(out), "tokens");
        metric(&mut m, "output_token_count", json!(out), "tokens");
        if let Some(tpot) = record_tpot(rec) {
            metric(&mut m, "inter_token_latency", json!(tpot), "ms");
            if tpot > 0.0 {
                let per_user = 1000.0 / tpot;
                metric(
                    &mut m,
                    "output_token_throughput_per_user",
                    json!(per_user),
                    "tokens/sec/user",
                );
            }
        }
        if let Some(r) = rec.reasoning_tokens {
            metric(&mut m, "reasoning_token_count", json!(r), "tokens");
        }
    }
    if let Some(p) = rec.prompt_tokens {
        metric(&mut m, "usage_prompt_tokens", json!(p), "tokens");
    }
    if let (Some(o), Some(TokenSource::Usage)) = (rec.output_tokens, rec.output_tokens_source) {
        metric(&mut m, "usage_completion_tokens", json!(o), "tokens");
    }
    if let Some(c) = rec.cached_tokens {
        metric(&mut m, "usage_prompt_cache_read_tokens", json!(c), "tokens");
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
