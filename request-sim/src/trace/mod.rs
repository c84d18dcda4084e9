//! Trace formats: every supported format is parsed into one [`Trace`] of [`TraceRequest`]s.

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
}

impl TraceFormat {
    /// Default hash block size (tokens per hash id) of the format.
    pub fn default_block_size(self) -> usize {
        match self {
            TraceFormat::Mooncake => 512,
            TraceFormat::Bailian => 16,
            TraceFormat::Azure | TraceFormat::Generic => 512,
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
}

/// A whole parsed trace.
#[derive(Debug, Clone)]
pub struct Trace {
    pub format: TraceFormat,
    pub block_size: usize,
    pub requests: Vec<TraceRequest>,
    pub stats: TraceStats,
}
