//! The JSONL agentic formats: TraceLab rounds (`tracelab.rs`), Dynamo request traces
//! (`dynamo.rs`) and AIPerf `dag_jsonl` (`dag.rs`), each read whole into a [`Corpus`], and the
//! line reading they share.
//!
//! These formats cannot be read line by line into independent rows: a TraceLab round's hash
//! ids depend on the previous round of its session, a Dynamo subagent names its parent
//! trajectory anywhere in the file, a `dag_jsonl` conversation names children declared on
//! later lines. Each reader therefore takes every non-blank line (plain or gzip, capped like
//! the other formats), checks it, and builds the conversations from the collected rows; every
//! bad input is one `path:line` error, and every conversation passes
//! [`Conversation::check`](super::Conversation::check).

use std::io::Read;

use super::agent_fields::{for_each_line, row_error};
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::{Conversation, Corpus};
use crate::trace::options::{LoadOptions, DEFAULT_MAX_LINE_BYTES};

/// How a JSONL agentic format builds its corpus from every non-blank line.
pub(crate) type Build = fn(&str, &[(usize, String)], &LoadOptions) -> Result<Corpus, TraceError>;

/// Reads a JSONL agentic trace with its format's `build`: every non-blank line (capped), then
/// the conversations, each checked.
pub(crate) fn read_with(
    name: &str,
    input: impl Read + Send,
    opts: &LoadOptions,
    build: Build,
) -> Result<Corpus, TraceError> {
    let rows = lines(name, input, opts)?;
    if rows.is_empty() {
        return Err(TraceError::Empty {
            path: name.to_owned(),
        });
    }
    let corpus = build(name, &rows, opts)?;
    for c in &corpus.conversations {
        check(name, c)?;
    }
    Ok(corpus)
}

/// [`Conversation::check`] as a `path:line` error (the line where the conversation starts).
/// The readers build valid trees, so this is a guard, not a message users should see.
fn check(name: &str, c: &Conversation) -> Result<(), TraceError> {
    c.check().map_err(|what| {
        let line = c
            .agents
            .first()
            .and_then(|a| a.requests.first())
            .map_or(0, |r| r.origin.line);
        row_error(
            name,
            line,
            RowError::Json(format!("conversation {}: {what}", c.id)),
        )
    })
}

/// The non-blank lines of `input` with their 1-based numbers.
pub(crate) fn lines(
    name: &str,
    input: impl Read + Send,
    opts: &LoadOptions,
) -> Result<Vec<(usize, String)>, TraceError> {
    let cap = opts.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES);
    let mut rows = Vec::new();
    for_each_line(name, input, cap, |line, text| {
        rows.push((line, text.to_owned()));
        Ok(())
    })?;
    Ok(rows)
}
