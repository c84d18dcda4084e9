//! One request of a trace ([`TraceRequest`], its Bailian [`SessionInfo`]), the counts of rows
//! that needed a rule ([`TraceStats`]) and a whole parsed [`Trace`].

use super::blocks::BlockIds;
use super::chat::ChatPayload;
use super::format::TraceFormat;
use super::session::Sessions;

/// Session information (Bailian traces).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SessionInfo {
    pub chat_id: i64,
    /// -1 for a root turn.
    pub parent_chat_id: i64,
    pub turn: u32,
    /// text / search / image / file
    pub kind: Option<String>,
}

/// One request of a trace, in replay order.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    /// Position in replay order (0-based); the record's `index`.
    pub index: usize,
    /// 1-based line (row) in the source file.
    pub line: usize,
    /// Trace time in milliseconds, rebased so the first request is at 0.
    pub timestamp_ms: f64,
    /// Intended prompt length in tokens.
    pub input_length: u32,
    /// Intended output length in tokens.
    pub output_length: u32,
    /// One id per `block_size` prompt tokens (already normalised, see `docs/traces.md`): a
    /// list as read, or a laid-out corpus request's ids kept as the corpus stores them
    /// ([`BlockIds`]: a prefix shared with its predecessor, renamed into its conversation's
    /// namespace), so a population of many users does not hold a list per request.
    pub hash_ids: BlockIds,
    pub session: Option<SessionInfo>,
    /// The thinking the row recorded or asked for (`docs/traces.md`, "Reasoning").
    pub reasoning: Reasoning,
    /// The model the trace names for it (Weka, Copilot, TraceLab `model`, BurstGPT `Model`),
    /// if any: what `--model-map` maps onto a served model.
    pub model: Option<std::sync::Arc<str>>,
    /// The images the request carries (`docs/images.md`), shared by its copies. `None`: a
    /// text request.
    pub images: Option<Images>,
}

/// One image of a request: its pixels are a pure function of (seed, `id`, size), so a repeated
/// id (at the same size) is the same image bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    pub id: u64,
    /// The prompt tokens the trace gives the image (markers included; ServeGen), 0 when it
    /// does not say (then `--image-tokens`).
    pub tokens: u32,
}

/// The images of a request.
pub type Images = std::sync::Arc<[Image]>;

impl TraceRequest {
    /// How many images the request carries.
    pub fn image_count(&self) -> usize {
        self.images.as_ref().map_or(0, |i| i.len())
    }
}

/// The reasoning a trace row carries (`docs/traces.md`, "Reasoning"); both `None` on most
/// rows. Two `Option<u32>`: the row stays small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reasoning {
    /// Tokens of the recorded output that were thinking (at most `output_length`, which stays
    /// the whole output: thinking + answer).
    pub tokens: Option<u32>,
    /// A thinking budget the row asked for.
    pub budget: Option<u32>,
}

impl Reasoning {
    /// The thinking budget a request sends: the recorded length, else the row's budget.
    pub fn budget_to_send(self) -> Option<u32> {
        self.tokens.or(self.budget)
    }

    /// The same with the recorded length cut to an output capped at `output` tokens.
    pub fn capped(self, output: u32) -> Reasoning {
        Reasoning {
            tokens: self.tokens.map(|t| t.min(output)),
            budget: self.budget,
        }
    }
}

/// A request for unit tests: trace time 0, line `index + 1`, one output token, no session.
#[cfg(test)]
pub(crate) fn test_request(index: usize, hash_ids: Vec<u64>, input_length: u32) -> TraceRequest {
    TraceRequest {
        index,
        line: index + 1,
        timestamp_ms: 0.0,
        input_length,
        output_length: 1,
        hash_ids: hash_ids.into(),
        session: None,
        reasoning: Reasoning::default(),
        model: None,
        images: None,
    }
}

/// Counts of rows that needed a rule (see `docs/traces.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TraceStats {
    /// Data rows read (excluding blank lines and headers).
    pub rows: usize,
    /// Rows skipped as invalid (only with `--skip-invalid`).
    pub skipped_invalid: usize,
    /// input_length > len(hash_ids) * block_size: the tail beyond the hashed blocks is unique.
    pub input_beyond_blocks: usize,
    /// input_length <= (len(hash_ids) - 1) * block_size: surplus hash ids dropped.
    pub surplus_hash_ids: usize,
    /// Timestamp equal to the previous row's.
    pub repeated_timestamps: usize,
    /// Timestamp smaller than the previous row's (rows are stably sorted by time).
    pub decreasing_timestamps: usize,
    /// Requests with output_length 0 (kept; the replayer asks for at least one token).
    #[serde(default)]
    pub zero_output_length: usize,
    /// Valid requests dropped because they fall outside `start_ms..end_ms`.
    #[serde(default)]
    pub outside_time_window: usize,
    /// Valid requests dropped by `max_requests`.
    #[serde(default)]
    pub over_max_requests: usize,
    /// Timestamp smaller than some earlier row's in the file (put in time order: by the whole
    /// sort, or within the reorder window of a streamed replay).
    #[serde(default)]
    pub reordered: usize,
    /// A streamed replay stopped reading before the end of the file (its slice ended, or the
    /// run stopped): `rows` and the counts of dropped requests cover only the rows read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// BurstGPT rows with 0 response tokens (requests that failed): kept with output length 0,
    /// or dropped with `--drop-failed` (then also counted in `dropped_failed`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_requests: usize,
    /// Failed requests dropped by `--drop-failed`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_failed: usize,
    /// Rows dropped by `--sample-sessions` (or by the sampled last copy of `--amplify`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sampled_out: usize,
    /// Rows added by `--amplify` (copies beyond the first).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub amplified: usize,
    /// Prompts cut to `--max-input-length`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub capped_inputs: usize,
    /// `--infer-sessions`: sessions inferred, and those with more than one turn.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inferred_sessions: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inferred_multi_turn: usize,
    /// `--infer-sessions`: requests that joined a session as a branch (a new conversation on a
    /// prefix shared with it; `trace::pipeline::session::BlockSessions`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub inferred_branches: usize,
    /// `--infer-sessions`: rows that had a session already (left as they were).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub infer_had_session: usize,
    /// `--infer-sessions`: rows without hash ids (nothing to infer from; each stays alone).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub infer_without_ids: usize,
    /// Think times cut to `--max-idle-gap`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub capped_gaps: usize,
    /// The first few invalid-row messages (`path:line: what`), only with `--skip-invalid`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_examples: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A whole parsed trace.
#[derive(Debug, Clone)]
pub struct Trace {
    pub format: TraceFormat,
    pub block_size: usize,
    pub requests: Vec<TraceRequest>,
    pub stats: TraceStats,
    /// Session of every request (empty when the trace has no sessions), see [`Sessions`].
    pub sessions: Sessions,
    /// The chat payload of every request of a `messages` trace (empty for other formats).
    pub chats: Vec<Option<std::sync::Arc<ChatPayload>>>,
}

impl Trace {
    /// The chat payload of request `index` (`messages` traces only).
    pub fn chat(&self, index: usize) -> Option<&ChatPayload> {
        self.chats.get(index).and_then(|c| c.as_deref())
    }

    /// The requests whose prompt request-sim builds from the trace's lengths and hash ids:
    /// every row but `messages`, `text_input` and `prompt_token_ids` rows, which are sent as
    /// written. Only these have prompts a check can verify.
    pub fn synthetic_requests(&self) -> Vec<TraceRequest> {
        self.requests
            .iter()
            .filter(|r| self.chat(r.index).is_none())
            .cloned()
            .collect()
    }
}
