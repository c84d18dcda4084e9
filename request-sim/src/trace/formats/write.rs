//! Writing a trace as JSONL (`request-sim transform`'s output): one row per request in replay
//! order, times in milliseconds from the first request.
//!
//! - A Bailian trace stays Bailian (`chat_id`, `parent_chat_id`, `timestamp` in seconds,
//!   `turn`, `type`, `hash_ids`), so its block size (16) and parent links survive.
//! - Every other trace is written as Mooncake rows (`timestamp`, `input_length`,
//!   `output_length`, `hash_ids`), with a `session_id` when the request belongs to a session
//!   (which makes the file a generic trace). Requests without hash ids (Azure) are written
//!   without them. A recorded thinking length and budget are written as `reasoning_tokens` and
//!   `thinking_token_budget` (a ServeGen workload written out keeps its thinking lengths).
//! - A `messages` trace carries prompt text that this writer does not reproduce: refused.

use std::io::Write;

use serde::Serialize;

use crate::trace::model::{Trace, TraceFormat};

#[derive(Serialize)]
struct Row<'a> {
    timestamp: f64,
    input_length: u32,
    output_length: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    hash_ids: Option<&'a [u64]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    /// A row's recorded thinking length and budget (`docs/traces.md`, "Reasoning").
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_token_budget: Option<u32>,
}

#[derive(Serialize)]
struct BailianRow<'a> {
    chat_id: i64,
    parent_chat_id: i64,
    timestamp: f64,
    input_length: u32,
    output_length: u32,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'a str>,
    turn: u32,
    hash_ids: &'a [u64],
}

/// Writes `trace` to `out`; an error message when the trace cannot be written.
pub fn write_jsonl(trace: &Trace, out: &mut dyn Write) -> Result<(), String> {
    if trace.format.sends_rows_as_written() || !trace.chats.is_empty() {
        return Err("a messages trace carries its prompts as text; transform writes hash-id traces (Mooncake, generic, Bailian, Azure) only".into());
    }
    let io = |e: std::io::Error| e.to_string();
    for r in &trace.requests {
        let ts = round_ms(r.timestamp_ms);
        let ids = r.hash_ids.ids();
        let line = match (&r.session, keeps_parent_links(trace)) {
            (Some(s), true) => serde_json::to_string(&BailianRow {
                chat_id: s.chat_id,
                parent_chat_id: s.parent_chat_id,
                timestamp: ts / 1e3,
                input_length: r.input_length,
                output_length: r.output_length,
                kind: s.kind.as_deref(),
                turn: s.turn,
                hash_ids: &ids,
            }),
            _ => serde_json::to_string(&Row {
                timestamp: ts,
                input_length: r.input_length,
                output_length: r.output_length,
                hash_ids: (!r.hash_ids.is_empty()).then_some(&*ids),
                session_id: trace.sessions.get(r.index).map(|t| &*t.id),
                reasoning_tokens: r.reasoning.tokens,
                thinking_token_budget: r.reasoning.budget,
            }),
        }
        .map_err(|e| e.to_string())?;
        out.write_all(line.as_bytes()).map_err(io)?;
        out.write_all(b"\n").map_err(io)?;
    }
    out.flush().map_err(io)
}

/// A trace whose rows link to parents (Bailian) is written in its own format, so the links
/// and the block size survive.
fn keeps_parent_links(trace: &Trace) -> bool {
    trace.format.needs_whole_file()
}

/// The format rows written here are read back in when forced (`convert` reads its output
/// back with it, rows with and without session ids alike): generic.
pub fn written_format() -> TraceFormat {
    super::generic::FORMAT.handle()
}

/// The block size a trace written by [`write_jsonl`] is read back with by default: its own
/// format's when it keeps its parent links, else Mooncake rows'. `transform` says so when
/// the trace's differs (the reader then needs `--block-size`).
pub fn read_back_block_size(trace: &Trace) -> usize {
    if keeps_parent_links(trace) {
        trace.format.default_block_size()
    } else {
        super::mooncake::FORMAT.info.block_size
    }
}

/// Milliseconds to the microsecond (an integer when it is one, as Mooncake writes them).
pub(crate) fn round_ms(ms: f64) -> f64 {
    (ms * 1e3).round() / 1e3
}
