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
use std::path::Path;

use super::agent_fields::{for_each_line, row_error};
use super::detect::detect_format;
use super::lines::{read_line_capped, LineRead};
use super::rows::buffered;
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::{Conversation, Corpus, TraceFormat};
use crate::trace::options::{LoadOptions, DEFAULT_MAX_LINE_BYTES};

/// The JSONL agentic format of the file at `path`: `forced` when it is one of them, else the
/// format detected from its first non-blank line when that is TraceLab, Dynamo or `dag_jsonl`;
/// `None` for any other trace (read row by row).
pub fn detect_file(
    path: &Path,
    forced: Option<TraceFormat>,
) -> Result<Option<TraceFormat>, TraceError> {
    let jsonl = |f: TraceFormat| {
        matches!(
            f,
            TraceFormat::Tracelab | TraceFormat::Dynamo | TraceFormat::Dag | TraceFormat::Copilot
        )
    };
    if let Some(f) = forced {
        return Ok(jsonl(f).then_some(f));
    }
    if path.is_dir() {
        return Ok(None);
    }
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|error| TraceError::Open {
        path: name.clone(),
        error,
    })?;
    let (mut input, compression) = buffered(&name, file)?;
    let mut buf = Vec::new();
    let mut line = 0;
    loop {
        let kind =
            read_line_capped(&mut input, &mut buf, DEFAULT_MAX_LINE_BYTES).map_err(|error| {
                TraceError::Read {
                    path: name.clone(),
                    line,
                    compression,
                    error,
                }
            })?;
        line += 1;
        match kind {
            LineRead::Eof | LineRead::TooLong => return Ok(None),
            LineRead::Line => {}
        }
        let Ok(text) = std::str::from_utf8(&buf) else {
            return Ok(None);
        };
        if text.trim().is_empty() {
            continue;
        }
        return Ok(detect_format(text).ok().filter(|f| jsonl(*f)));
    }
}

/// Opens `path` and reads it with [`read`]; errors are named after the path.
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Corpus, TraceError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|error| TraceError::Open {
        path: name.clone(),
        error,
    })?;
    read(&name, file, opts)
}

/// Reads a whole JSONL agentic trace from `input` (plain or gzip): in `opts.format` when
/// given, else in the format detected from the first non-blank line (which must be TraceLab,
/// Dynamo or `dag_jsonl`).
pub fn read(name: &str, input: impl Read + Send, opts: &LoadOptions) -> Result<Corpus, TraceError> {
    opts.check(name)?;
    let rows = lines(name, input, opts)?;
    let Some((first_line, first)) = rows.first() else {
        return Err(TraceError::Empty {
            path: name.to_owned(),
        });
    };
    let format = match opts.format {
        Some(f) => f,
        None => detect_format(first).map_err(|e| row_error(name, *first_line, e))?,
    };
    let corpus = match format {
        TraceFormat::Tracelab => super::tracelab::build(name, &rows, opts)?,
        TraceFormat::Dynamo => super::dynamo::build(name, &rows, opts)?,
        TraceFormat::Dag => super::dag::build(name, &rows, opts)?,
        TraceFormat::Copilot => {
            let mut reader = super::copilot::Reader::new(opts);
            for (line, text) in &rows {
                reader.add_line(name, *line, text)?;
            }
            let (mut corpus, counts) = reader.finish(name)?;
            corpus.notes.push(counts.note());
            corpus
        }
        other => {
            return Err(row_error(
                name,
                *first_line,
                RowError::Undetectable(format!(
                    "the first data line is a {} row, not TraceLab, Dynamo or dag_jsonl",
                    other.name()
                )),
            ))
        }
    };
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
