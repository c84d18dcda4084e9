//! Agent corpora: which agentic format a path holds ([`agent_format`]) and the corpus it
//! loads into ([`load`]), both through the front door (`open.rs`) and the registry.

use std::io::Read;
use std::path::Path;

use super::open::{self, Opened};
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::{Corpus, TraceFormat};
use crate::trace::options::LoadOptions;

/// The agentic format of `path`: `forced` (`--dataset`) when it names one, or, without it, the
/// one its content is recognised as; `None` for a trace read row by row (or a file that cannot
/// be opened: the reader reports that). A pipe or a FIFO is not looked into (reading its head
/// would consume it): `None`, and its content decides when it is opened.
pub fn agent_format(path: &Path, forced: Option<TraceFormat>) -> Option<TraceFormat> {
    match forced {
        Some(f) => f.is_agentic().then_some(f),
        None => open::recognise_path(path).filter(|f| f.is_agentic()),
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
    if !is_agent_corpus(path, opts.format) {
        return Ok(None);
    }
    Ok(match open::open(path, opts)? {
        Opened::Corpus(c, f) => Some((c, f)),
        Opened::Rows(_) => None,
    })
}

/// Opens `path` and reads its agent corpus (any agentic format, recognised or
/// `opts.format`); errors are named after the path.
pub fn load_corpus(path: &Path, opts: &LoadOptions) -> Result<Corpus, TraceError> {
    corpus_of(&path.display().to_string(), open::open(path, opts)?)
}

/// Reads a whole agentic trace from `input` (plain or compressed): in `opts.format` when
/// given, else in the format recognised from its head (which must be an agent corpus).
pub fn read(name: &str, input: impl Read + Send, opts: &LoadOptions) -> Result<Corpus, TraceError> {
    corpus_of(name, open::open_reader(name, input, opts)?)
}

/// The corpus of what was opened, or why a row trace is not one.
fn corpus_of(name: &str, opened: Opened<'_>) -> Result<Corpus, TraceError> {
    match opened {
        Opened::Corpus(c, _) => Ok(c),
        Opened::Rows(r) => Err(super::agent_fields::row_error(
            name,
            1,
            RowError::Undetectable(format!(
                "the first data line is a {} row, not an agent corpus (TraceLab, Dynamo, dag_jsonl, Copilot, Weka)",
                r.format().map_or("request", |f| f.name())
            )),
        )),
    }
}
