//! Trace formats: every supported format is parsed into one [`Trace`] of [`TraceRequest`]s.
//!
//! - One file per format (`mooncake.rs`, `bailian.rs`, `azure.rs`, `burstgpt.rs`, `generic.rs`,
//!   `messages.rs`) turns one line into one row (`row::RawRow`) and does nothing else: it
//!   imports only `row.rs` (the leaf: the row, the load options, the per-row rules),
//!   `fields.rs` (shared field checks) and `error.rs`. `detect.rs` picks a format from the
//!   first data line; `rows.rs` reads capped lines (plain, gzip, zstd, bzip2) and calls the format's
//!   parser. A new format is a new file like these plus its arm in `rows.rs::parse`, in
//!   [`TraceFormat`] and (to be detected) in `detect.rs`.
//! - `pipeline.rs` is the one implementation of the trace rules of `docs/traces.md`, as
//!   stages a row goes through: in file order (`delay`s resolved, timestamps flagged, hash ids
//!   normalised), then a reorder window into time order, then in time order (rebase, Bailian
//!   turns filled in, slice, `session_id` turns linked). Its two forms:
//!   - [`TraceStream`] (`stream.rs`): a bounded window, rows released as the replay reads
//!     them, memory independent of the trace's length;
//!   - [`load`] / [`parse_reader`] (`load.rs`): the whole trace, the pipeline collected with
//!     an unbounded window, plus the passes that need the whole file (Bailian parent chains,
//!     the turns the slice cut from sessions).
//! - `session/` holds every session rule: the pipeline's session stages (`delay`s, Bailian
//!   turns, `session_id` links), the whole-file passes, `--live-history` ([`history`]), and
//!   the session types ([`Sessions`], [`SessionTurn`]).
//! - **Where a new transform goes** (amplify N copies, re-time arrivals, cap idle gaps, sample
//!   sessions): one stage struct in `pipeline.rs`, called in `Pipeline::read` when it works in
//!   file order or in `Pipeline::release` when it works in time order (after the rebase, and
//!   before the slice when the slice should see its result). A stage that makes several rows
//!   of one (amplify) pushes them into the window in `Pipeline::read`, and the window puts
//!   them in time order; one that drops rows (sample sessions) counts them in [`TraceStats`].
//!   Both forms then have it, and the whole trace stays the collected stream.
//! - `log/` reads request logs (OpenAI-format, LiteLLM, OpenTelemetry GenAI spans, `messages`
//!   traces) into requests with their text, the source `request-sim convert` makes traces from.
//! - `reshape.rs` holds the transforms of `request-sim transform` (amplify, sample, cap, re-time,
//!   cap idle gaps, scale prompts): the per-row ones are the pipeline's `Copies` stage, the
//!   ones that move rows by more than a window run once over the whole trace at the end of the
//!   file; `synth.rs` fits a trace and generates a new one from the fit; `write.rs` writes a
//!   trace as JSONL.
//! - [`Planned`] is one request as the replay pipeline takes it, from either form.
//! - `agent/` holds agentic corpora: the session tree ([`agent::Conversation`]: a main agent
//!   and its subagents) every agentic format is read into, its readers (Weka), and
//!   [`agent::plan`], which lays a corpus out as the whole trace a replay takes (a population
//!   of users, the session links and joins the release gate waits on).
//! - [`analyze()`](analyze::analyze) summarises a loaded trace (rates, lengths, prefix-cache hit ratios).

pub mod agent;
pub mod analyze;
mod azure;
mod bailian;
mod burstgpt;
mod detect;
mod error;
mod fields;
mod generic;
pub mod ideal;
mod lines;
mod load;
pub mod log;
mod messages;
mod mooncake;
mod pipeline;
pub mod reshape;
mod row;
mod rows;
pub mod session;
pub mod shard;
pub mod stream;
pub mod synth;
pub mod write;

pub use analyze::{
    analyze, ideal_prefix_hits, Analysis, AnalyzeOptions, RoutingAnalysis, RoutingOptions,
    RoutingPoint,
};
pub use detect::detect_format;
pub use error::{RowError, TraceError};
pub use ideal::IdealCache;
pub use load::{load, parse_reader};
pub use reshape::{Arrivals, RateSeries, Reshape};
pub use row::{LoadOptions, DEFAULT_MAX_LINE_BYTES, MAX_LENGTH_TOKENS};
pub use session::{history, SessionStats, SessionTurn, Sessions};
pub use stream::{Planned, ReorderWindow, TraceStream};

/// Which trace format a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Mooncake FAST'25: timestamp (ms), input_length, output_length, hash_ids; block 512.
    Mooncake,
    /// Alibaba Bailian: chat_id, parent_chat_id, timestamp (s), ..., hash_ids; block 16.
    Bailian,
    /// Azure LLM inference trace (CSV): TIMESTAMP, ContextTokens, GeneratedTokens; no hash ids.
    Azure,
    /// Generic JSONL: timestamp (ms), input_length, output_length, optional hash_ids.
    Generic,
    /// AIPerf-style JSONL: a whole OpenAI chat request per row (`messages`, `tools`, ...).
    Messages,
    /// BurstGPT (CSV): Timestamp (s), Model, Request tokens, Response tokens, ...; no hash ids.
    #[serde(rename = "burstgpt")]
    BurstGpt,
    /// TraceLab round JSONL: coding-agent sessions of rounds; hash ids minted from
    /// `prefix_tokens` (an agentic corpus, `agent/tracelab.rs`).
    Tracelab,
    /// Dynamo request trace (`dynamo.request.trace.v1`): `request_end` events, subagents through
    /// `parent_trajectory_id` (an agentic corpus, `agent/dynamo.rs`).
    Dynamo,
    /// AIPerf `dag_jsonl`: conversations with `forks`/`spawns`/`join_at` and real messages (an
    /// agentic corpus, `agent/dag.rs`).
    #[serde(rename = "dag_jsonl")]
    Dag,
    /// Weka / kv-cache-tester agentic JSON: one conversation (with subagents) per file, a
    /// directory of files is a corpus; read whole by [`agent::weka`], never row by row.
    Weka,
}

impl TraceFormat {
    /// Every format, in `--dataset` order.
    pub const ALL: [TraceFormat; 10] = [
        TraceFormat::Mooncake,
        TraceFormat::Bailian,
        TraceFormat::Azure,
        TraceFormat::Generic,
        TraceFormat::Messages,
        TraceFormat::BurstGpt,
        TraceFormat::Tracelab,
        TraceFormat::Dynamo,
        TraceFormat::Dag,
        TraceFormat::Weka,
    ];

    /// The `--dataset` name (`mooncake`, `bailian`, `azure`, `generic`, `messages`, `burstgpt`,
    /// `tracelab`, `dynamo`, `dag_jsonl`, `weka`).
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Bailian => "bailian",
            TraceFormat::Azure => "azure",
            TraceFormat::Generic => "generic",
            TraceFormat::Messages => "messages",
            TraceFormat::BurstGpt => "burstgpt",
            TraceFormat::Tracelab => "tracelab",
            TraceFormat::Dynamo => "dynamo",
            TraceFormat::Dag => "dag_jsonl",
            TraceFormat::Weka => "weka",
        }
    }

    /// Parses a `--dataset` name (case-insensitive).
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("dag") {
            return Some(TraceFormat::Dag);
        }
        TraceFormat::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// A corpus of agent conversations, read whole by `trace::agent` (never row by row).
    pub fn is_agentic(self) -> bool {
        matches!(
            self,
            TraceFormat::Tracelab | TraceFormat::Dynamo | TraceFormat::Dag | TraceFormat::Weka
        )
    }

    /// Default hash block size (tokens per hash id) of the format.
    pub fn default_block_size(self) -> usize {
        match self {
            TraceFormat::Mooncake => mooncake::BLOCK_SIZE,
            TraceFormat::Bailian => bailian::BLOCK_SIZE,
            TraceFormat::Azure
            | TraceFormat::Generic
            | TraceFormat::Messages
            | TraceFormat::BurstGpt => generic::DEFAULT_BLOCK_SIZE,
            TraceFormat::Tracelab => agent::tracelab::BLOCK_SIZE,
            // The file says (`trace_block_size`); 64 is what Dynamo writes by default.
            TraceFormat::Dynamo => 64,
            TraceFormat::Dag => 64,
            // The block size of each conversation is in its file; 64 when it is not.
            TraceFormat::Weka => 64,
        }
    }
}

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
    /// One id per `block_size` prompt tokens (already normalised, see `docs/traces.md`).
    pub hash_ids: Vec<u64>,
    pub session: Option<SessionInfo>,
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
        hash_ids,
        session: None,
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
    /// prefix shared with it; `trace::session::BlockSessions`).
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

/// The OpenAI chat request of a `messages` row, kept verbatim for the request body.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatPayload {
    /// The `messages` array as given (validated: roles, contents, tool calls).
    pub messages: serde_json::Value,
    /// The `tools` array as given.
    pub tools: Option<serde_json::Value>,
    /// `extra`: merged into the request body.
    pub extra: Option<serde_json::Map<String, serde_json::Value>>,
    /// `output_length` when the row gives one (else the server decides).
    pub max_tokens: Option<u32>,
    /// A `text_input` row (AIPerf's literal prompt): this text is the prompt, sent like a
    /// synthetic one (chat content or completions prompt); `messages` is then `null`.
    pub text_input: Option<String>,
    /// A `prompt_token_ids` row (what `--save-prompts` writes with `--token-ids`): these token
    /// ids are the completions prompt; `messages` is then `null`.
    pub prompt_token_ids: Option<Vec<u32>>,
}

impl ChatPayload {
    /// A literal prompt (`text_input` or `prompt_token_ids`) rather than a chat request.
    pub fn is_literal(&self) -> bool {
        self.text_input.is_some() || self.prompt_token_ids.is_some()
    }
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
