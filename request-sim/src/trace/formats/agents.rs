//! Agent corpora: which agentic format a path holds ([`agent_format`]) and the corpus it
//! loads into ([`load`]), both through the front door (`open.rs`) and the registry.

use std::path::Path;

use super::open::{self, Opened};
use crate::trace::error::TraceError;
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
