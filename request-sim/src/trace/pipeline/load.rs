//! The whole trace: the [pipeline](super::pipeline) in its `Whole` mode, collected into one
//! [`Trace`] — every row read before the first is released (so time order is a stable sort of
//! the file), every row judged by the slice — plus the session passes that need the whole file
//! (`session/whole.rs`):
//!
//! - Bailian parent chains: a row's parent may come later in the file (or in time), the
//!   session is named after the root of the chain, a chain may loop (an error), and a parent
//!   that is nowhere in the file makes an orphan. None of this is known before the last row.
//! - The sessions over the kept requests: the turns that the slice cut from sessions that keep
//!   others (`cut_turns`, `cut_sessions`), counted over every row of the file.
//!
//! Missing Bailian turn numbers need only the rows before them in time, so they are filled in
//! by a stage of the pipeline, not here.

use std::io::{BufRead, Read};
use std::path::Path;

use super::session::{self, RowSession};
use super::stages::{Mode, Out, Pipeline, Released, ReorderWindow};
use crate::trace::error::{RowError, TraceError};
use crate::trace::formats::open::{open_reader, open_rows, Opened};
use crate::trace::formats::rows::RowReader;
use crate::trace::model::Trace;
use crate::trace::options::LoadOptions;

/// Loads a trace file (plain, gzip, zstd or bzip2, detected by magic bytes; Parquet; a
/// ServeGen directory). The path `-` reads standard input (named `<stdin>` in messages).
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Trace, TraceError> {
    whole(open_rows(path, opts)?, opts)
}

/// Parses a trace from any reader; `name` is used in error messages (`name:line: ...`).
/// Compressed input is detected by its magic bytes and decompressed.
pub fn parse_reader<R: Read + Send>(
    name: &str,
    reader: R,
    opts: &LoadOptions,
) -> Result<Trace, TraceError> {
    rows_of(name, open_reader(name, reader, opts)?, opts)
}

/// The whole trace of what was opened; an agent corpus is refused (it is laid out as a
/// population by `plan.rs`, not read as rows).
fn rows_of(name: &str, opened: Opened<'_>, opts: &LoadOptions) -> Result<Trace, TraceError> {
    match opened {
        Opened::Rows(rows) => whole(*rows, opts),
        Opened::Corpus(_, format) => Err(TraceError::Row {
            path: name.to_owned(),
            line: 1,
            error: RowError::Agentic(format.name()),
        }),
    }
}

/// Every row read, through the pipeline in its whole mode.
fn whole<B: BufRead>(rows: RowReader<B>, opts: &LoadOptions) -> Result<Trace, TraceError> {
    let mut pipeline = Pipeline::new(rows, opts, ReorderWindow::default(), Mode::Whole);
    pipeline.start(opts.block_size)?;
    collect(pipeline)
}

/// Every row of `pipeline` (in `Whole` mode, started) in time order, then the whole-file
/// passes: the trace.
pub(crate) fn collect<B: BufRead>(mut pipeline: Pipeline<B>) -> Result<Trace, TraceError> {
    let mut rows = Vec::new();
    while let Some(r) = pipeline.next_released()? {
        rows.push(r);
    }
    let sessions = session::whole_trace(pipeline.rows.name(), row_sessions(&mut rows))?;
    if pipeline.kept() == 0 {
        return Err(pipeline.nothing_kept());
    }
    let mut requests = Vec::with_capacity(pipeline.kept());
    let mut chats = Vec::with_capacity(pipeline.kept());
    for r in rows {
        if let Out::Kept(p) = r.out {
            requests.push(p.req);
            chats.push(p.chat);
        }
    }
    // The chat requests of messages rows, by replay index (empty when there are none).
    if chats.iter().all(Option::is_none) {
        chats = Vec::new();
    }
    Ok(Trace {
        format: pipeline.format(),
        block_size: pipeline.block_size(),
        requests,
        stats: pipeline.stats(),
        sessions,
        chats,
    })
}

/// What the session passes need of every released row (the kept rows' turns are taken).
fn row_sessions(rows: &mut [Released]) -> Vec<RowSession<'_>> {
    rows.iter_mut()
        .map(|r| match &mut r.out {
            Out::Kept(p) => RowSession {
                line: r.line,
                rebased_ms: r.rebased_ms,
                kept: true,
                bailian: p.req.session.as_ref(),
                turn: p.turn.take(),
                session_id: None,
            },
            Out::Dropped(raw) => RowSession {
                line: r.line,
                rebased_ms: r.rebased_ms,
                kept: false,
                bailian: raw.session.as_ref(),
                turn: None,
                session_id: raw.session_id.as_deref(),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceStats;

    fn parse(text: &str, opts: &LoadOptions) -> Result<Trace, TraceError> {
        parse_reader("t.jsonl", text.as_bytes(), opts)
    }

    #[test]
    fn rules_and_counts() {
        let text = "\
{\"timestamp\": 100, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [1]}
{\"timestamp\": 100, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": [1, 2, 3]}

{\"timestamp\": 50, \"input_length\": 512, \"output_length\": 5, \"hash_ids\": [4]}
";
        let t = parse(text, &LoadOptions::default()).unwrap();
        assert_eq!(t.format.name(), "mooncake");
        assert_eq!(t.block_size, 512);
        let lines: Vec<usize> = t.requests.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![4, 1, 2]);
        let ts: Vec<f64> = t.requests.iter().map(|r| r.timestamp_ms).collect();
        assert_eq!(ts, vec![0.0, 50.0, 50.0]);
        assert_eq!(t.requests[2].hash_ids, vec![1]);
        assert_eq!(
            t.stats,
            TraceStats {
                rows: 3,
                input_beyond_blocks: 1,
                surplus_hash_ids: 1,
                repeated_timestamps: 1,
                decreasing_timestamps: 1,
                reordered: 1,
                zero_output_length: 1,
                ..Default::default()
            }
        );
    }
}
