//! What a trace format is ([`Format`]): its facts (`trace::model::FormatInfo`), how its
//! content is recognised (a function of a [`Probe`]: the head of an opened input, or a
//! directory) and how it is read ([`Reader`]). Each format file declares one; `registry.rs`
//! lists them. A leaf of `formats/`: it imports only the model, the row, the errors and the
//! options.

use std::io::BufRead;
use std::path::Path;

use serde_json::{Map, Value};

use crate::trace::error::{RowError, TraceError};
use crate::trace::model::{Corpus, FormatInfo, TraceFormat};
use crate::trace::options::LoadOptions;
use crate::trace::row::RawRow;

/// Rows a reader makes from a whole input rather than line by line (a generated workload, a
/// columnar file), in order.
pub(crate) type RowIter = Box<dyn Iterator<Item = Result<RawRow, TraceError>> + Send>;

/// The rows of a CSV format once its header is read: one data line → one row.
pub(crate) type CsvRows = Box<dyn Fn(&str) -> Result<RawRow, RowError> + Send>;

/// A decompressed input an agent corpus is read from.
pub(crate) type Input<'a> = Box<dyn BufRead + Send + 'a>;

/// A columnar file's reader: its rows and the hash block size the file names, if any.
pub(crate) type FileReader =
    fn(&str, std::fs::File, &LoadOptions) -> Result<(RowIter, Option<usize>), TraceError>;

/// A reader of a directory of corpus files.
pub(crate) type CorpusDir = fn(&Path, &LoadOptions) -> Result<Corpus, TraceError>;

/// How a format is read.
pub(crate) enum Reader {
    /// One non-blank line → one row (the JSONL row formats).
    Lines(fn(&str) -> Result<RawRow, RowError>),
    /// A header line, then one line → one row (the CSV formats).
    Csv(fn(&str) -> Result<CsvRows, RowError>),
    /// Rows read from an opened, seekable file (a columnar format: its index is at its end).
    File(FileReader),
    /// Rows made from a directory (a generated workload).
    Dir(fn(&Path, &LoadOptions) -> Result<RowIter, TraceError>),
    /// An agent corpus, read whole: from one file's content and, where the format has one,
    /// from a directory of such files.
    Corpus {
        file: fn(&str, Input<'_>, &LoadOptions) -> Result<Corpus, TraceError>,
        dir: Option<CorpusDir>,
    },
}

/// What recognition looks at: a directory, or the head of one opened file.
pub(crate) struct Probe<'a> {
    /// The path, when it is a directory.
    pub(crate) dir: Option<&'a Path>,
    /// The input's first bytes before decompression (magic numbers).
    pub(crate) magic: &'a [u8],
    /// The first bytes after decompression: at least the first non-blank line.
    pub(crate) head: &'a [u8],
    /// The first non-blank line (byte-order mark removed, trimmed).
    pub(crate) line: Option<&'a str>,
    /// That line as a JSON object, when it is one.
    pub(crate) json: Option<&'a Map<String, Value>>,
}

impl Probe<'_> {
    /// True when the first line is a JSON object with key `k`.
    pub(crate) fn has(&self, k: &str) -> bool {
        self.json.is_some_and(|o| o.contains_key(k))
    }

    /// The first line when it is not JSON (a CSV header).
    pub(crate) fn text_line(&self) -> Option<&str> {
        self.line
            .filter(|l| !l.starts_with('{') && !l.starts_with('['))
    }
}

/// One trace format: what it says of itself, how it is recognised, how it is read.
pub(crate) struct Format {
    pub(crate) info: FormatInfo,
    /// True when a probe is this format (asked in the order of [`ALL`]).
    pub(crate) recognise: fn(&Probe<'_>) -> bool,
    pub(crate) read: Reader,
}

impl Format {
    /// The handle the rest of the engine carries.
    pub(crate) fn handle(&'static self) -> TraceFormat {
        TraceFormat::of(&self.info)
    }
}

/// A format a probe cannot be read in: its reader wants another kind of input.
pub(crate) fn wrong_input(f: &Format, what: &str) -> String {
    format!("a {} trace {what}", f.info.name)
}
