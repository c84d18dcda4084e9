//! Agent corpora: which agentic format a path holds ([`agent_format`]) and the reader that
//! loads it into a [`Corpus`] (Weka JSON files or directories; Copilot shards or `date=`
//! directories; TraceLab, Dynamo and `dag_jsonl` JSONL through `agent_jsonl.rs`).

use std::path::Path;

use super::{agent_jsonl as jsonl, weka};
use crate::trace::error::TraceError;
use crate::trace::model::{Corpus, TraceFormat};
use crate::trace::options::LoadOptions;

/// The agentic format of `path`: `forced` (`--dataset`) when it names one, or, without it, the
/// one its content is recognised as (a Weka file or directory, or a TraceLab, Dynamo or
/// `dag_jsonl` first line); `None` for a trace read row by row (or a file that cannot be
/// opened: the row reader reports that).
pub fn agent_format(path: &Path, forced: Option<TraceFormat>) -> Option<TraceFormat> {
    match forced {
        Some(f) => f.is_agentic().then_some(f),
        None if super::detect::is_servegen_dir(path) => None,
        None if super::detect::is_copilot_dir(path) => Some(TraceFormat::Copilot),
        None if weka::is_corpus(path) => Some(TraceFormat::Weka),
        None => jsonl::detect_file(path, None).ok().flatten(),
    }
}

/// True when `path` is an agent corpus (see [`agent_format`]).
pub fn is_agent_corpus(path: &Path, forced: Option<TraceFormat>) -> bool {
    agent_format(path, forced).is_some()
}

/// Loads the agent corpus at `path` (a file or a directory) in `opts.format` or the format
/// recognised; `None` when it is not an agent corpus. `opts.block_size` is TraceLab's minting
/// block size; `opts.max_line_bytes` caps the JSONL formats' lines.
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Option<(Corpus, TraceFormat)>, TraceError> {
    let Some(format) = agent_format(path, opts.format) else {
        return Ok(None);
    };
    let corpus = match format {
        TraceFormat::Weka => weka::load(path)?,
        TraceFormat::Copilot => {
            let (mut corpus, counts) = super::copilot::load(path, opts)?;
            corpus.notes.push(counts.note());
            corpus
        }
        f => jsonl::load(
            path,
            &LoadOptions {
                format: Some(f),
                ..opts.clone()
            },
        )?,
    };
    Ok(Some((corpus, format)))
}
