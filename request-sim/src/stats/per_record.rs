//! What one record says on its own: its error kind, TPOT, mean ITL, output tokens and end
//! time, as the summary's [`super::accumulator::Accumulator`], the measurement window and the
//! charts compute them. TPOT is defined here only: the engine writes the record's `tpot_ms`
//! with [`tpot_field`].

use crate::record::{Record, Status};

/// Error kind key of a failed record: `http_error:503`, `timeout`, ...
pub fn error_kind(rec: &Record) -> String {
    match (rec.status, rec.http_status) {
        (Status::HttpError, Some(code)) => format!("http_error:{code}"),
        (s, _) => s.as_str().to_string(),
    }
}

/// TPOT of a record per vLLM: (E2EL - TTFT) / (output tokens - 1), for > 1 output token
/// that came in more than one chunk (an output in one piece, such as a non-streaming answer,
/// has no time between its tokens: its TPOT is unknown, not 0).
pub fn record_tpot(rec: &Record) -> Option<f64> {
    let out = output_tokens_of(rec);
    if out <= 1 || in_one_piece(rec) {
        return None;
    }
    match (rec.e2e_ms, rec.ttft_ms) {
        (Some(e), Some(t)) => Some((e - t) / (out as f64 - 1.0)),
        _ => rec.tpot_ms,
    }
}

/// [`record_tpot`] at the record's microsecond resolution: the record's `tpot_ms`.
pub fn tpot_field(rec: &Record) -> Option<f64> {
    record_tpot(rec).map(|t| (t * 1e3).round() / 1e3)
}

/// Whether a record's output came in at most one chunk (a non-streaming answer, or a server
/// that sent it whole): no time between tokens was measured.
pub fn in_one_piece(rec: &Record) -> bool {
    rec.chunks <= 1
}

/// Per-request mean ITL: (E2EL - TTFT) / (chunks - 1), the mean of the request's gaps between
/// token-bearing chunks (E2EL - TTFT = Σ ITL); `None` for an output in one piece.
pub fn record_mean_itl(rec: &Record) -> Option<f64> {
    if in_one_piece(rec) {
        return None;
    }
    Some((rec.e2e_ms? - rec.ttft_ms?) / f64::from(rec.chunks - 1))
}

/// A record's time to its first answer token (TTFA), as the summary's `ttfa` statistics, the
/// `ttfa` SLO and AIPerf's `time_to_first_output_token` all take it. The answer is what
/// follows the thinking: its text or, for a turn that answers with a tool call, the call. So
/// TTFA is the earlier of the first answer-text token (`ttfa_ms`) and the first tool-call token
/// (`ttf_tool_ms`) when the answer carried thinking or a tool call (`None` when neither came,
/// an answer that was all thinking), else the first token, which was the answer's.
pub fn ttfa_of(r: &Record) -> Option<f64> {
    let split = r.reasoning_tokens.is_some() || r.tool_calls.is_some();
    if !split {
        return r.ttft_ms;
    }
    match (r.ttfa_ms, r.ttf_tool_ms) {
        (Some(text), Some(tool)) => Some(text.min(tool)),
        (text, tool) => text.or(tool),
    }
}

/// TTFA over the answers whose first token was not the answer's (they carried thinking or a
/// tool call): the summary's `ttfa` statistics; `None` for every other answer.
pub fn split_ttfa(r: &Record) -> Option<f64> {
    let split = r.reasoning_tokens.is_some() || r.tool_calls.is_some();
    split.then(|| ttfa_of(r)).flatten()
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
