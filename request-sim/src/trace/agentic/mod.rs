//! Agentic trace formats read as a whole file into a corpus of conversations (a main agent
//! plus subagents with parent links, spawn and join points): TraceLab round JSONL
//! (`tracelab.rs`), Dynamo request traces (`dynamo.rs`) and AIPerf `dag_jsonl` (`dag.rs`).
//!
//! These formats cannot be read line by line into independent rows: a TraceLab round's hash
//! ids depend on the previous round of its session, a Dynamo subagent names its parent
//! trajectory anywhere in the file, a `dag_jsonl` conversation names children declared on later
//! lines. Each reader therefore reads every line (plain or gzip, capped like the other
//! formats), checks it, and builds the [`Corpus`] in one pass over the collected rows; every
//! bad input is one `path:line` error.

pub(crate) mod dag;
pub(crate) mod dynamo;
pub(crate) mod tracelab;

use std::io::Read;

use super::error::{RowError, TraceError};
use super::lines::{read_line_capped, LineRead};
use super::row::{LoadOptions, DEFAULT_MAX_LINE_BYTES};
use super::{ChatPayload, TraceFormat};

/// Which rule made a request's client gap (the client's time between the end of its previous
/// request and this one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GapRule {
    /// The first request of an agent: no gap (it starts at its spawn or at the start).
    First,
    /// TraceLab: this round's submission (its latest input event) minus the previous round's
    /// last model event.
    RoundEvents,
    /// TraceLab without usable timestamps: the longest tool latency of the previous round.
    ToolLatency,
    /// Start-to-start minus the recorded server time (Dynamo: `request_received_ms` of this
    /// request minus the previous request's `request_received_ms + total_time_ms`).
    StartMinusServer,
    /// The trace's own delay before the request (`dag_jsonl` `delay`).
    Delay,
}

/// Whether hash ids are private to a conversation or shared by the whole file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdScope {
    /// Ids are only meaningful inside one conversation (minted per conversation).
    Conversation,
    /// Ids are the same blocks everywhere in the file (content hashes renumbered).
    File,
}

/// One request of an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRequest {
    /// 1-based line of the file it came from.
    pub line: usize,
    pub input_length: u32,
    pub output_length: u32,
    /// One id per `block_size` prompt tokens (ceil), in the corpus's [`IdScope`].
    pub hash_ids: Vec<u64>,
    /// The client gap before this request, in ms (>= 0), and the rule that made it.
    pub gap_ms: f64,
    pub gap_rule: GapRule,
    /// Recorded start, ms from the conversation's first request (0 for the first).
    pub trace_start_ms: f64,
    /// Recorded completion, ms from the conversation's start, when the trace has it.
    pub trace_end_ms: Option<f64>,
    /// The chat request (`dag_jsonl`): the whole message history this request sends.
    pub chat: Option<ChatPayload>,
}

/// Where a subagent starts and whether its parent waits for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Spawn {
    /// The parent agent (index into [`Conversation::agents`]).
    pub parent: usize,
    /// The parent's request (index into its `requests`) the subagent follows: it is released
    /// at that request's completion plus `offset_ms`. `None`: at the parent's start.
    pub after: Option<usize>,
    /// Delay after `after`'s completion (or the parent's start), ms, >= 0.
    pub offset_ms: f64,
    /// The parent's request that waits for this subagent to finish (join); `None`: background.
    pub join: Option<usize>,
}

/// One agent: the main agent (index 0 of its conversation) or a subagent.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub id: String,
    /// 1-based line where the agent is first named.
    pub line: usize,
    /// `None` for the main agent.
    pub spawn: Option<Spawn>,
    /// Never empty.
    pub requests: Vec<AgentRequest>,
}

/// One conversation: a main agent and its subagents (parents before children).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub id: String,
    pub line: usize,
    pub agents: Vec<Agent>,
    /// Tokens at the start of every prompt that the agent's client sends to every
    /// conversation (system prompt and tool definitions), when the format says so.
    pub system_tokens: Option<u32>,
}

impl Conversation {
    /// Depth of agent `i` (0 for the main agent).
    pub fn depth(&self, mut i: usize) -> usize {
        let mut d = 0;
        while let Some(s) = &self.agents[i].spawn {
            i = s.parent;
            d += 1;
        }
        d
    }
}

/// A whole agentic trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Corpus {
    pub format: TraceFormat,
    pub block_size: usize,
    pub scope: IdScope,
    pub conversations: Vec<Conversation>,
    /// The format threads the model's answers into later turns (`dag_jsonl` accumulating
    /// conversations): replay with `--live-history` to send the real answers.
    pub threads_history: bool,
    /// Lines read that carry no request (Dynamo tool events), counted, not errors.
    pub ignored_lines: usize,
}

impl Corpus {
    /// Every request of the corpus.
    pub fn request_count(&self) -> usize {
        self.conversations
            .iter()
            .flat_map(|c| &c.agents)
            .map(|a| a.requests.len())
            .sum()
    }
}

/// True for the formats read here.
pub fn is_agentic(format: TraceFormat) -> bool {
    matches!(
        format,
        TraceFormat::Tracelab | TraceFormat::Dynamo | TraceFormat::Dag
    )
}

/// Reads a whole agentic trace in `format` from `input` (plain or gzip).
pub fn read(
    name: &str,
    input: impl Read + Send,
    format: TraceFormat,
    opts: &LoadOptions,
) -> Result<Corpus, TraceError> {
    opts.check(name)?;
    let lines = Lines::read(name, input, opts)?;
    if lines.rows.is_empty() {
        return Err(TraceError::Empty {
            path: name.to_owned(),
        });
    }
    match format {
        TraceFormat::Tracelab => tracelab::build(name, &lines.rows, opts),
        TraceFormat::Dynamo => dynamo::build(name, &lines.rows, opts),
        TraceFormat::Dag => dag::build(name, &lines.rows, opts),
        other => Err(TraceError::Options {
            path: name.to_owned(),
            what: format!("{} is not an agentic format", other.name()),
        }),
    }
}

/// The non-blank lines of a file with their 1-based numbers.
pub(crate) struct Lines {
    pub(crate) rows: Vec<(usize, String)>,
}

impl Lines {
    fn read(name: &str, input: impl Read + Send, opts: &LoadOptions) -> Result<Lines, TraceError> {
        let (mut input, gzip) = super::rows::buffered(name, input)?;
        let cap = opts.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES);
        let mut buf = Vec::new();
        let mut rows = Vec::new();
        let mut line = 0usize;
        loop {
            let kind =
                read_line_capped(&mut input, &mut buf, cap).map_err(|error| TraceError::Read {
                    path: name.to_owned(),
                    line,
                    gzip,
                    error,
                })?;
            line += 1;
            let row_err = |error| TraceError::Row {
                path: name.to_owned(),
                line,
                error,
            };
            match kind {
                LineRead::Eof => break,
                LineRead::TooLong => return Err(row_err(RowError::TooLong { limit: cap })),
                LineRead::Line => {}
            }
            let text = std::str::from_utf8(&buf).map_err(|e| {
                row_err(RowError::NotUtf8 {
                    column: e.valid_up_to() + 1,
                })
            })?;
            let text = if line == 1 {
                text.strip_prefix('\u{feff}').unwrap_or(text)
            } else {
                text
            };
            if !text.trim().is_empty() {
                rows.push((line, text.to_owned()));
            }
        }
        Ok(Lines { rows })
    }
}

/// An error on `line` of `name`.
pub(crate) fn row_error(name: &str, line: usize, error: RowError) -> TraceError {
    TraceError::Row {
        path: name.to_owned(),
        line,
        error,
    }
}

/// A field error on `line`.
pub(crate) fn field_error(
    name: &str,
    line: usize,
    field: impl Into<String>,
    what: impl Into<String>,
) -> TraceError {
    row_error(
        name,
        line,
        RowError::Field {
            field: field.into(),
            what: what.into(),
        },
    )
}

/// Parses one JSON object line into `T`; the message names the whole path of the field at
/// fault (`request.replay.input_length`), which `fields::parse_json` (top-level key only)
/// does not.
pub(crate) fn parse_object<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, RowError> {
    let t = text.trim_start();
    if !t.starts_with('{') {
        return Err(RowError::NotObject {
            found: t.chars().take(20).collect::<String>(),
        });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = strip_position(&e.inner().to_string());
        if path.is_empty() || path == "." {
            RowError::Json(format!("invalid JSON: {inner}"))
        } else {
            RowError::Field {
                field: path,
                what: inner,
            }
        }
    })?;
    de.end()
        .map_err(|e| RowError::Json(format!("invalid JSON: {e}")))?;
    Ok(value)
}

/// serde_json's messages end in ` at line 1 column N`; the line is ours, keep the column.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line 1 column ") {
        Some(i) => format!("{} (column {})", &msg[..i], &msg[i + 18..]),
        None => msg.to_owned(),
    }
}

/// `ceil(input_length / block)`.
pub(crate) fn blocks(input_length: u32, block: usize) -> usize {
    (input_length as usize).div_ceil(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_position_keeps_the_column() {
        assert_eq!(
            strip_position("invalid type: string \"x\", expected u64 at line 1 column 7"),
            "invalid type: string \"x\", expected u64 (column 7)"
        );
        assert_eq!(strip_position("plain"), "plain");
    }
}
