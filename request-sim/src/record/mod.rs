//! The per-request record and the records JSONL file: its writer, its reader and the merge
//! of several shards' files.
//!
//! Every scheduled request ends as exactly one [`Record`]. Fields are documented in
//! `docs/records.md`.
//!
//! - [`writer`]: the writer thread of a run ([`RecordWriter`]) and [`write_records`].
//! - [`reader`]: [`RecordReader`], streaming with `file:line` errors, and [`read_records`].
//! - [`merge`]: several shards' files as the records of one run, with the union check.

pub mod merge;
pub mod reader;
pub mod writer;

pub use reader::{read_records, read_records_from, ReadStats, RecordReader};
pub use writer::{write_records, Annotate, Finished, RecordWriter, SentBlocks, WriterStats};

// How a request ended and which instance served it are what the sending path tells the
// record: defined in `backend`, named here too.
pub use crate::backend::{ServedBy, Status};

use serde::{Deserialize, Serialize};

/// Where `output_tokens` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// `usage.completion_tokens` (or TGI `details.generated_tokens`).
    Usage,
    /// The server gave no usage: counted token-bearing chunks instead.
    Chunks,
}

/// One line of the `--output-path` JSONL file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Replay order (0-based).
    pub index: usize,
    /// Line of the request in the trace file (1-based).
    pub line: usize,
    /// Trace timestamp in ms (rebased to the first request).
    pub timestamp: f64,
    /// Scheduled send time, ms since the run's start (`timestamp / scale_factor`).
    pub scheduled_ms: f64,
    /// Actual send time, ms since the run's start: when its first byte went into the socket
    /// (plain HTTP), else taken just before it is written; `None` when it was never sent.
    pub sent_ms: Option<f64>,
    /// `sent_ms - scheduled_ms`.
    pub drift_ms: Option<f64>,
    /// Receive lateness: the latest any token-carrying read of the answer came after the
    /// kernel received its bytes, ms (plain-HTTP endpoints; docs/metrics.md, "Receive
    /// lateness"). The token times above are the kernel's arrivals, not these reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_late_ms: Option<f64>,
    pub status: Status,
    /// HTTP status code when a response head arrived.
    pub http_status: Option<u16>,
    /// Error text (server message truncated to 512 bytes); never contains credentials.
    pub error: Option<String>,
    /// First SSE message with a non-empty `choices` list (or first token event) - sent.
    pub ttft_ms: Option<f64>,
    /// First token event carrying non-empty text - sent (differs from TTFT when the first tokens carry no text).
    pub ttfc_ms: Option<f64>,
    /// Second token-bearing chunk - sent (absent for an output of fewer than two chunks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttst_ms: Option<f64>,
    /// Last token-bearing chunk - sent.
    pub e2e_ms: Option<f64>,
    /// A sent request the run cut (`cancelled`): how long after its send the cut came (ms).
    /// With its `ttft_ms` this says whether it had already broken a goodput SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_ms: Option<f64>,
    /// End of stream ([DONE] / body end) - sent.
    pub done_ms: Option<f64>,
    /// (e2e - ttft) / (output_tokens - 1), only when output_tokens > 1 and the output came in
    /// more than one chunk (an output in one piece has no TPOT: `None`, never 0).
    pub tpot_ms: Option<f64>,
    /// Gaps between consecutive token-bearing chunks (only with `--record-itl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<Vec<f64>>,
    /// Intended prompt length from the trace.
    pub input_length: u32,
    /// Server-reported `usage.prompt_tokens`.
    pub prompt_tokens: Option<u32>,
    /// Server-reported `usage.prompt_tokens_details.cached_tokens`.
    pub cached_tokens: Option<u32>,
    /// Images the request carried (`docs/images.md`); absent on a text request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<u32>,
    /// The image tokens the request's images were made to cost (Σ N over its images, the
    /// vision markers not included: what vLLM reports), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tokens_intended: Option<u32>,
    /// Server-reported `usage.prompt_tokens_details.multimodal_tokens.image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tokens: Option<u32>,
    /// Requested output tokens (trace `output_length`).
    pub output_length: u32,
    /// Output tokens received (see `output_tokens_source`).
    pub output_tokens: Option<u32>,
    pub output_tokens_source: Option<TokenSource>,
    /// Number of token events received (docs/metrics.md: the role preamble is none; a chunk
    /// merged from several tokens is one).
    pub chunks: u32,
    /// Thinking, answer and tool calls apart (docs/metrics.md, "Reasoning and tool calls"),
    /// only in records of answers that carried thinking or a tool call.
    /// Time to the first answer token (text after any thinking) - sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfa_ms: Option<f64>,
    /// Time to the first tool-call token (its name or arguments) - sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttf_tool_ms: Option<f64>,
    /// The trace row's recorded thinking length (tokens of its `output_length`; `docs/traces.md`,
    /// "Reasoning"), what `reasoning_tokens` is compared with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_length: Option<u32>,
    /// Token events that carried thinking, counted from the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
    /// The server's `completion_tokens_details.reasoning_tokens` when it reported a count
    /// above 0 (vLLM 0.32 reports 0 for an answer that was all thinking: no count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens_usage: Option<u32>,
    /// Token events that carried answer text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_tokens: Option<u32>,
    /// Tool calls made, and the bytes of their streamed arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_arg_bytes: Option<u64>,
    /// Bailian session ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_chat_id: Option<i64>,
    /// Turn within the session (1-based), any format with sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// 1 when the request was sent again on a fresh connection because the server closed the
    /// reused one before answering (docs/reliability.md); absent when 0. Times stay relative
    /// to the first send.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// Session id (Bailian: the root `chat_id`; messages/generic: `session_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Replay index of the previous turn of the session (when it was replayed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_index: Option<usize>,
    /// `--timing closed`: how long the turn waited past its trace time for its parent's
    /// answer plus the think time (ms); `scheduled_ms` is then the release time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_wait_ms: Option<f64>,
    /// `--timing closed`: the think time applied after the parent's completion (ms; the fixed
    /// `--think-time`, or the trace's gap scaled by `--scale-factor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_ms: Option<f64>,
    /// Agent corpora: the conversation (`<id>`, `<id>#<pass>` for a repeat of the corpus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<String>,
    /// Agent corpora: the agent (`main` or the subagent's id); `session_id` is then
    /// `<conversation>::sa:<agent>` for a subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Agent corpora: the rule that gave the client gap (`think_ms`) before the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_rule: Option<crate::trace::model::GapRule>,
    /// Agent corpora: how the trace's call ended when it did not succeed (Copilot `result`,
    /// e.g. `UserCancel`); absent for a success. The request was sent in full all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_result: Option<String>,
    /// Agent corpora: the subagents this request joined (waited for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joins: Option<u32>,
    /// Agent corpora: how long past its parent's completion it waited for the subagents it
    /// joins (ms; 0 when they ended first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join_wait_ms: Option<f64>,
    /// Agent corpora, on the main agent's first request: the conversation's own wall time in
    /// the trace (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_trace_ms: Option<f64>,
    /// Agent corpora, on the main agent's first request: the conversation's requests (all
    /// agents); fewer records of it mean the run cut it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_requests: Option<u32>,
    /// The server's state at the scrape nearest the send (only when server metrics were
    /// scraped and the request was sent; docs/server-metrics.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerAtSend>,
    /// The instance that answered, when the response said (`x-inference-pod` /
    /// `x-inference-port` headers of routers and llm-sim clusters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<ServedBy>,
    /// The instance the instances' own KV cache events place the request on (`--kv-events`:
    /// the one that stored most of its prompt's blocks while it ran), with the votes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_placement: Option<KvPlacement>,
    /// The model the trace names for the request (Weka, Copilot, TraceLab `model`, BurstGPT
    /// `Model`), when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_model: Option<String>,
    /// The served model the request named, with `--model-map` (without it every request names
    /// the run's one model: the summary's `run.model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `warmup` for a warm-up request of a warm trajectory start (`--trajectory-start`,
    /// `--scenario agentx`): sent and recorded, left out of the statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Agent corpora with `--users`: the user (lane, from 0) the request's conversation is
    /// one of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<u32>,
}

/// The phase of a run a request belongs to, when it is not the measured one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Primes the server's cache; not measured.
    Warmup,
}

impl Record {
    /// The record of trace request `index` (trace line `line`) ending with `status`, with no
    /// timing or token counts yet: the caller fills in what happened.
    pub fn new(index: usize, line: usize, status: Status) -> Record {
        Record {
            index,
            line,
            timestamp: 0.0,
            scheduled_ms: 0.0,
            sent_ms: None,
            drift_ms: None,
            rx_late_ms: None,
            status,
            http_status: None,
            error: None,
            ttft_ms: None,
            ttfc_ms: None,
            ttst_ms: None,
            e2e_ms: None,
            cut_ms: None,
            done_ms: None,
            tpot_ms: None,
            itl_ms: None,
            input_length: 0,
            prompt_tokens: None,
            cached_tokens: None,
            images: None,
            image_tokens_intended: None,
            image_tokens: None,
            output_length: 0,
            output_tokens: None,
            output_tokens_source: None,
            chunks: 0,
            ttfa_ms: None,
            ttf_tool_ms: None,
            reasoning_length: None,
            reasoning_tokens: None,
            reasoning_tokens_usage: None,
            answer_tokens: None,
            tool_calls: None,
            tool_arg_bytes: None,
            chat_id: None,
            parent_chat_id: None,
            turn: None,
            session_id: None,
            parent_index: None,
            session_wait_ms: None,
            think_ms: None,
            conversation: None,
            agent: None,
            gap_rule: None,
            trace_result: None,
            joins: None,
            join_wait_ms: None,
            conversation_trace_ms: None,
            conversation_requests: None,
            server: None,
            retries: 0,
            served_by: None,
            kv_placement: None,
            trace_model: None,
            model: None,
            phase: None,
            user: None,
        }
    }

    /// True for a warm-up request (recorded, not measured).
    pub fn is_warmup(&self) -> bool {
        self.phase == Some(Phase::Warmup)
    }
}

/// The server's queue and KV usage when a request was sent: of the instance that served it
/// (the one scraped instance, or the one [`Record::served_by`] names), else of the cluster
/// (waiting and running summed, KV usage averaged over the instances).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ServerAtSend {
    /// Requests waiting in the queue(s).
    pub waiting: Option<f64>,
    /// Requests running.
    pub running: Option<f64>,
    /// KV-cache usage, fraction of 1.
    pub kv_usage: Option<f64>,
    /// Sample time minus send time, ms (the farthest of the instances' samples): the nearest
    /// sample taken by the time the record was written.
    pub dt_ms: f64,
    /// Instances the state covers (1: that instance).
    pub instances: usize,
    /// The scraped instance (index in `--server-metrics` order) the state is of, when the
    /// response named the instance that served it and it matched one scraped URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<usize>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Where a request was placed, with the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvPlacement {
    /// Index in the `--kv-events` list (the instance order of the summary).
    pub instance: usize,
    /// The instance's URL.
    pub url: String,
    /// Prompt windows this instance stored while the request was in flight.
    pub votes: u32,
    /// Prompt windows any instance stored meanwhile (`votes / of`: the agreement).
    pub of: u32,
}
