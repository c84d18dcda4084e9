//! The leaf of the trace modules: what a format file produces ([`RawRow`]), how a trace is
//! loaded ([`LoadOptions`] and its limits), and the per-row rules every reader applies the same
//! way (hash id normalisation, the [`RowFlags`] counted in [`TraceStats`]).
//!
//! It imports no format file and no reader, so the format files (`mooncake.rs`, `bailian.rs`,
//! `azure.rs`, `generic.rs`, `messages.rs`) depend only on it, `fields.rs` and `error.rs`.

use super::error::TraceError;
use super::{ChatPayload, SessionInfo, TraceFormat, TraceStats};

/// Largest accepted input or output length, in tokens.
pub const MAX_LENGTH_TOKENS: u64 = 10_000_000;

/// Longest accepted line (64 MiB) unless [`LoadOptions::max_line_bytes`] says otherwise.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;

/// How to load a trace. `Default` detects the format, uses its block size, stops at the first
/// invalid row and keeps every request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadOptions {
    /// Force a format instead of detecting it from the first data line (`--dataset`).
    pub format: Option<TraceFormat>,
    /// Tokens per hash id; `None` = the format's default (mooncake/generic 512, bailian 16).
    pub block_size: Option<usize>,
    /// Skip malformed rows (counted in `stats.skipped_invalid`) instead of failing.
    pub skip_invalid: bool,
    /// Keep requests at rebased trace time `>= start_ms` (ms).
    pub start_ms: Option<f64>,
    /// Keep requests at rebased trace time `< end_ms` (ms).
    pub end_ms: Option<f64>,
    /// Keep at most this many requests (the first ones in replay order, after slicing).
    pub max_requests: Option<usize>,
    /// Longest accepted line in bytes; `None` = [`DEFAULT_MAX_LINE_BYTES`].
    pub max_line_bytes: Option<usize>,
    /// Drop BurstGPT's failed requests (0 response tokens) instead of keeping them with output
    /// length 0 (`--drop-failed`); counted either way.
    pub drop_failed: bool,
    /// What the trace is reshaped into (`--amplify`, `--retime`, ...; `reshape.rs`).
    pub reshape: super::Reshape,
}

impl LoadOptions {
    /// An error naming `name` when an option is out of range (a block size of 0, a time window
    /// that ends before it starts, ...).
    pub(crate) fn check(&self, name: &str) -> Result<(), TraceError> {
        let bad = |what: String| {
            Err(TraceError::Options {
                path: name.to_owned(),
                what,
            })
        };
        if self.block_size == Some(0) {
            return bad("block size must be at least 1".into());
        }
        if self.max_requests == Some(0) {
            return bad("max requests must be at least 1".into());
        }
        if let Err(what) = self.reshape.check() {
            return bad(what);
        }
        if self.max_line_bytes == Some(0) {
            return bad("max line bytes must be at least 1".into());
        }
        if let Some(s) = self.start_ms {
            if !s.is_finite() || s < 0.0 {
                return bad(format!("start ms must be a finite number >= 0, got {s}"));
            }
        }
        if let Some(e) = self.end_ms {
            if e.is_nan() || e <= 0.0 {
                return bad(format!("end ms must be a number > 0, got {e}"));
            }
        }
        if let (Some(s), Some(e)) = (self.start_ms, self.end_ms) {
            if s >= e {
                return bad(format!("start ms ({s}) must be before end ms ({e})"));
            }
        }
        Ok(())
    }
}

/// One parsed, validated row before the trace-level rules.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawRow {
    /// Milliseconds, not yet rebased (absolute for Azure).
    pub timestamp_ms: f64,
    pub input_length: u32,
    pub output_length: u32,
    /// `None`: the row carries no hash ids (Azure, generic without them).
    pub hash_ids: Option<Vec<u64>>,
    pub session: Option<SessionInfo>,
    /// False when `session.turn` is a placeholder to fill in from the parent chain.
    pub turn_given: bool,
    /// `session_id` of a messages or generic row.
    pub session_id: Option<String>,
    /// `delay` of a messages row (ms after the previous turn of its session).
    pub delay_ms: Option<f64>,
    /// The chat request of a messages row (boxed: every row of every format carries this
    /// field, and a held row of a whole-trace load is that much smaller).
    pub chat: Option<Box<ChatPayload>>,
}

impl RawRow {
    /// A row of lengths only (the CSV formats: no hash ids, no sessions, no text).
    pub(crate) fn lengths(timestamp_ms: f64, input_length: u32, output_length: u32) -> RawRow {
        RawRow {
            timestamp_ms,
            input_length,
            output_length,
            hash_ids: None,
            session: None,
            turn_given: false,
            session_id: None,
            delay_ms: None,
            chat: None,
        }
    }
}

/// What the file-order rules found on one row; counted in [`TraceStats`] when the row is kept.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RowFlags {
    pub(crate) input_beyond_blocks: bool,
    pub(crate) surplus_hash_ids: bool,
    pub(crate) repeated_timestamp: bool,
    pub(crate) decreasing_timestamp: bool,
    /// Earlier than some row before it in the file (not just the previous one).
    pub(crate) reordered: bool,
}

impl RowFlags {
    /// Counts a kept request with these flags and `output_length` in `stats`.
    pub(crate) fn count_kept(self, output_length: u32, stats: &mut TraceStats) {
        stats.input_beyond_blocks += usize::from(self.input_beyond_blocks);
        stats.surplus_hash_ids += usize::from(self.surplus_hash_ids);
        stats.repeated_timestamps += usize::from(self.repeated_timestamp);
        stats.decreasing_timestamps += usize::from(self.decreasing_timestamp);
        stats.reordered += usize::from(self.reordered);
        stats.zero_output_length += usize::from(output_length == 0);
    }
}

/// Rule 1 of `docs/traces.md`: a row needs `ceil(input / block)` hash ids; surplus ids are
/// dropped. Returns (input beyond the hashed blocks, surplus ids dropped).
pub(crate) fn normalise_hash_ids(raw: &mut RawRow, block: usize) -> (bool, bool) {
    let Some(ids) = &mut raw.hash_ids else {
        return (false, false);
    };
    let needed = (raw.input_length as usize).div_ceil(block);
    if ids.len() < needed {
        (true, false)
    } else if ids.len() > needed {
        ids.truncate(needed);
        (false, true)
    } else {
        (false, false)
    }
}
