//! Errors of trace loading. Every message names the file, and the line when one line is at fault.

use std::io;

/// Why a trace could not be loaded. `Display` is `path:line: what is wrong` for a bad row and
/// `path: what is wrong` for problems of the whole file.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened.
    #[error("{path}: cannot open: {error}")]
    Open { path: String, error: io::Error },
    /// Reading (or decompressing) failed after `line` complete lines.
    #[error("{path}: read error after line {line}{}: {error}", match .compression { Some(c) => format!(" ({c}: truncated or corrupt file?)"), None => String::new() })]
    Read {
        path: String,
        line: usize,
        /// The input's compression (`gzip`, `zstd`, `bzip2`) when it is compressed (the error is
        /// then most likely a damaged file).
        compression: Option<&'static str>,
        error: io::Error,
    },
    /// The file has no data lines at all (zero bytes, or only blank lines).
    #[error("{path}: the file is empty (no data lines)")]
    Empty { path: String },
    /// One line (row) is malformed; `line` is 1-based.
    #[error("{path}:{line}: {error}")]
    Row {
        path: String,
        line: usize,
        error: RowError,
    },
    /// Parsing succeeded but no request is left (all invalid, or sliced away).
    #[error("{path}: no requests to replay: {reason}")]
    NoRequests { path: String, reason: String },
    /// The file as a whole cannot be read as a trace (a columnar file without the columns a
    /// trace needs, a binary trace given as a pipe).
    #[error("{path}: {what}")]
    Invalid { path: String, what: String },
    /// The [`LoadOptions`](super::LoadOptions) are contradictory.
    #[error("{path}: invalid trace options: {what}")]
    Options { path: String, what: String },
}

impl TraceError {
    /// True when a streamed read met a row too far out of time order (loading the trace whole
    /// would sort it).
    pub fn is_out_of_order(&self) -> bool {
        matches!(
            self,
            TraceError::Row {
                error: RowError::OutOfOrder(_),
                ..
            }
        )
    }

    /// The 1-based line at fault, if one line is at fault.
    pub fn line(&self) -> Option<usize> {
        match self {
            TraceError::Row { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// What is wrong with one line (row) of a trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    /// The line exceeds the line length cap.
    #[error("line is longer than {limit} bytes (is this really a trace file?)")]
    TooLong { limit: usize },
    /// The line is not valid UTF-8.
    #[error("line is not valid UTF-8 (invalid byte at column {column})")]
    NotUtf8 { column: usize },
    /// A JSON trace line is not a JSON object.
    #[error("expected a JSON object, found {found}")]
    NotObject { found: String },
    /// A JSON line failed to parse or a field has the wrong type / value; the message names the
    /// field where one is at fault.
    #[error("{0}")]
    Json(String),
    /// A field (JSON key or CSV column) has a bad value.
    #[error("field `{field}`: {what}")]
    Field { field: String, what: String },
    /// The CSV header is not what the format needs.
    #[error("bad CSV header: {0}")]
    Header(String),
    /// A CSV row could not be split into fields.
    #[error("invalid CSV: {0}")]
    Csv(String),
    /// A CSV row has too few columns.
    #[error("expected at least {expected} CSV columns, found {found}")]
    Columns { expected: usize, found: usize },
    /// An agentic corpus format (TraceLab, Dynamo, `dag_jsonl`) reached the row reader: such a
    /// file is read whole, as conversations of agents.
    #[error("{0} is a corpus of agent conversations, read as a whole by `replay`, `sweep`, `analyze` (without --against) and `transform` (a Weka directory out); `analyze --against` and `verify-prompts` read a request trace row by row")]
    Agentic(&'static str),
    /// The format could not be detected from this line.
    #[error("cannot detect the trace format: {0}; force one with --dataset")]
    Undetectable(String),
    /// The row's time is earlier than a row that already left a streamed read's reorder
    /// window (what to raise is in the message).
    #[error("field `timestamp`: {0}")]
    OutOfOrder(String),
}
