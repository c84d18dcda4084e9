//! What a format file produces ([`RawRow`]) and the per-row rules every reader applies the
//! same way (hash id normalisation, the [`RowFlags`] counted in [`TraceStats`]): the meeting
//! point of `formats/` and `pipeline/`. It imports only `model.rs`.

use crate::trace::model::{ChatPayload, Images, Reasoning, SessionInfo, TraceStats};

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
    /// A recorded thinking length and/or a thinking budget (`messages`, ServeGen `reason`).
    pub reasoning: Reasoning,
    /// The model the row names (BurstGPT `Model`), if any.
    pub model: Option<std::sync::Arc<str>>,
    /// One id per image (Azure LMM `NumImages`, Bailian `type: image`, ServeGen multimodal).
    pub images: Option<Images>,
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
            reasoning: Reasoning::default(),
            model: None,
            images: None,
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
