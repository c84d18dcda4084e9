//! The one front door to a trace: [`open`] a path (a file, a directory, `-` for standard
//! input) or [`open_reader`] any reader, and get either its rows, ready for the pipeline, or
//! its agent corpus, read whole. The input is opened once: recognition looks at the head of
//! the opened input, which is then handed to the format's reader, so a pipe or a FIFO reads as
//! a file does.

use std::io::{BufRead, Cursor, Read};
use std::path::Path;

use serde_json::{Map, Value};

use super::lines::{buffered, peek_magic, Compression};
use super::registry;
use super::rows::RowReader;
use super::unit::{wrong_input, Format, Probe, Reader};
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::{Corpus, TraceFormat};
use crate::trace::options::{LoadOptions, DEFAULT_MAX_LINE_BYTES};

/// Bytes read past a first line of `{` alone (a pretty-printed JSON file) to recognise it.
const SNIFF_BYTES: usize = 4096;

/// What a trace input holds.
pub(crate) enum Opened<'a> {
    /// Rows, read one at a time through the trace pipeline (boxed: the reader carries its
    /// buffers and counts, the corpus is a few vectors).
    Rows(Box<RowReader<Box<dyn BufRead + Send + 'a>>>),
    /// An agent corpus, read whole.
    Corpus(Corpus, TraceFormat),
}

/// Opens the trace at `path` (`-` is standard input, named `<stdin>`) in `opts.format` or the
/// format its content is recognised as.
pub(crate) fn open(path: &Path, opts: &LoadOptions) -> Result<Opened<'static>, TraceError> {
    if path.as_os_str() == "-" {
        return open_reader("<stdin>", std::io::stdin(), opts);
    }
    let name = path.display().to_string();
    opts.check(&name)?;
    if path.is_dir() {
        return open_dir(path, &name, opts);
    }
    let file = std::fs::File::open(path).map_err(|error| TraceError::Open {
        path: name.clone(),
        error,
    })?;
    open_input(&name, Input::File(file), opts)
}

/// Opens a trace from any reader (`name` is used in messages): rows, or a corpus of one file.
pub(crate) fn open_reader<'a, R: Read + Send + 'a>(
    name: &str,
    reader: R,
    opts: &LoadOptions,
) -> Result<Opened<'a>, TraceError> {
    opts.check(name)?;
    open_input(name, Input::Stream(Box::new(reader)), opts)
}

/// The format `path`'s content is recognised as, read without consuming anything that cannot
/// be read again: a directory, or a regular file's head; `None` for a pipe, a FIFO or a
/// device (and for what cannot be opened or recognised: opening it says why).
pub(crate) fn recognise_path(path: &Path) -> Option<TraceFormat> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.is_dir() {
        let probe = Probe {
            dir: Some(path),
            magic: &[],
            head: &[],
            line: None,
            json: None,
        };
        return registry::recognise(&probe).ok().map(|f| f.handle());
    }
    if !meta.is_file() {
        return None;
    }
    let mut file = std::fs::File::open(path).ok()?;
    let magic = peek_magic(&mut file).ok()?;
    if Compression::of(&magic) == Compression::None {
        if let Some(f) = columnar(&magic, &LoadOptions::default()) {
            return Some(f.handle());
        }
    }
    let name = path.display().to_string();
    let (mut input, _) = buffered(&name, Cursor::new(magic.clone()).chain(file)).ok()?;
    let head = read_head(&mut input, &LoadOptions::default()).ok()?;
    recognise_head(&name, &magic, &head, &LoadOptions::default())
        .ok()
        .map(|f| f.handle())
}

/// Opens the trace at `path` for its rows: an agent corpus is refused before it is read
/// (`analyze --against`, `verify-prompts`, a streamed read), a directory with what a directory
/// can be.
pub(crate) fn open_rows(
    path: &Path,
    opts: &LoadOptions,
) -> Result<RowReader<Box<dyn BufRead + Send>>, TraceError> {
    let name = path.display().to_string();
    let corpus = match opts.format {
        Some(f) => f.is_agentic().then_some(f),
        None => recognise_path(path).filter(|f| f.is_agentic()),
    };
    if let Some(format) = corpus {
        return Err(not_rows(path, &name, format));
    }
    match open(path, opts)? {
        Opened::Rows(rows) => Ok(*rows),
        Opened::Corpus(_, format) => Err(not_rows(path, &name, format)),
    }
}

/// Why an agent corpus cannot be read where rows are.
pub(crate) fn not_rows(path: &Path, name: &str, format: TraceFormat) -> TraceError {
    if path.is_dir() {
        dir_refusal(path, name)
    } else {
        TraceError::Row {
            path: name.to_owned(),
            line: 1,
            error: RowError::Agentic(format.name()),
        }
    }
}

/// An input as opened: a file keeps its handle for the formats that seek.
enum Input<'a> {
    File(std::fs::File),
    Stream(Box<dyn Read + Send + 'a>),
}

/// A directory: a format of directories (ServeGen, a Copilot partition, a Weka corpus).
fn open_dir(path: &Path, name: &str, opts: &LoadOptions) -> Result<Opened<'static>, TraceError> {
    let format = match opts.format {
        Some(f) => registry::format_of(f),
        None => {
            let probe = Probe {
                dir: Some(path),
                magic: &[],
                head: &[],
                line: None,
                json: None,
            };
            registry::recognise(&probe).map_err(|_| dir_refusal(path, name))?
        }
    };
    match format.read {
        Reader::Dir(rows) => Ok(Opened::Rows(Box::new(RowReader::generated(
            name,
            format.handle(),
            rows(path, opts)?,
            opts,
        )))),
        Reader::Corpus { dir: Some(dir), .. } => {
            Ok(Opened::Corpus(dir(path, opts)?, format.handle()))
        }
        _ => Err(dir_refusal(path, name)),
    }
}

/// Why a directory cannot be read.
fn dir_refusal(path: &Path, name: &str) -> TraceError {
    TraceError::Open {
        path: name.to_owned(),
        error: std::io::Error::other(super::weka::directory_refusal(path)),
    }
}

/// A file or a stream: its head recognised, then handed whole to the format's reader.
fn open_input<'a>(
    name: &str,
    input: Input<'a>,
    opts: &LoadOptions,
) -> Result<Opened<'a>, TraceError> {
    let read_error = |error| TraceError::Read {
        path: name.to_owned(),
        line: 0,
        compression: None,
        error,
    };
    let (mut file, mut stream): (Option<std::fs::File>, Box<dyn Read + Send + 'a>) = match input {
        Input::File(f) => match f.try_clone() {
            Ok(clone) => (Some(clone), Box::new(f)),
            Err(_) => (None, Box::new(f)),
        },
        Input::Stream(s) => (None, s),
    };
    let magic = peek_magic(&mut stream).map_err(read_error)?;
    let stream = Cursor::new(magic.clone()).chain(stream);
    if Compression::of(&magic) == Compression::None {
        if let Some(f) = columnar(&magic, opts) {
            return read_columnar(name, f, file.take(), opts);
        }
    }
    let (mut input, compression) = buffered(name, stream)?;
    let head = read_head(&mut input, opts).map_err(|error| TraceError::Read {
        path: name.to_owned(),
        line: 0,
        compression,
        error,
    })?;
    let recognised = match opts.format {
        Some(f) => Ok(registry::format_of(f)),
        None => recognise_head(name, &magic, &head, opts),
    };
    let input: Box<dyn BufRead + Send + 'a> = Box::new(Cursor::new(head).chain(input));
    let format = match recognised {
        Ok(f) => f,
        // With --skip-invalid a bad first line is one more row to skip: the row reader
        // recognises the format from the first line it can read.
        Err(_) if opts.skip_invalid => {
            return Ok(Opened::Rows(Box::new(RowReader::new(
                name,
                input,
                compression,
                opts,
            ))))
        }
        Err(e) => return Err(e),
    };
    match format.read {
        Reader::Corpus { file, .. } => {
            Ok(Opened::Corpus(file(name, input, opts)?, format.handle()))
        }
        Reader::Lines(_) | Reader::Csv(_) => {
            let opts = LoadOptions {
                format: Some(format.handle()),
                ..opts.clone()
            };
            let rows = RowReader::new(name, input, compression, &opts);
            Ok(Opened::Rows(Box::new(rows)))
        }
        Reader::File(_) => Err(invalid(
            name,
            wrong_input(
                format,
                "is a binary file: give its path (not a pipe), uncompressed",
            ),
        )),
        Reader::Dir(_) => Err(invalid(
            name,
            wrong_input(format, "is a directory (give the directory)"),
        )),
    }
}

/// The columnar format an input's magic bytes say, when forced or recognised.
fn columnar(magic: &[u8], opts: &LoadOptions) -> Option<&'static Format> {
    let probe = Probe {
        dir: None,
        magic,
        head: &[],
        line: None,
        json: None,
    };
    let f = match opts.format {
        Some(f) => registry::format_of(f),
        None => registry::ALL
            .iter()
            .copied()
            .find(|f| matches!(f.read, Reader::File(_)) && (f.recognise)(&probe))?,
    };
    matches!(f.read, Reader::File(_)).then_some(f)
}

/// A columnar file, read by its format from the opened file (it seeks to its index).
fn read_columnar(
    name: &str,
    f: &'static Format,
    file: Option<std::fs::File>,
    opts: &LoadOptions,
) -> Result<Opened<'static>, TraceError> {
    let Reader::File(read) = f.read else {
        return Err(invalid(name, wrong_input(f, "cannot be read here")));
    };
    let Some(file) = file else {
        return Err(invalid(
            name,
            wrong_input(f, "is a binary file whose index is at its end: give its path, not standard input or a pipe"),
        ));
    };
    let (rows, block) = read(name, file, opts)?;
    let mut reader = RowReader::generated(name, f.handle(), rows, opts);
    reader.set_block_hint(block);
    Ok(Opened::Rows(Box::new(reader)))
}

/// The input's first bytes, through its first non-blank line (and, when that line is a lone
/// `{`, a few KiB more: a pretty-printed JSON file), never more than the line cap.
fn read_head(input: &mut dyn BufRead, opts: &LoadOptions) -> std::io::Result<Vec<u8>> {
    let cap = opts.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES);
    let mut head = Vec::new();
    let mut line_start = 0;
    loop {
        let n = input.take((cap + 1) as u64).read_until(b'\n', &mut head)?;
        let line = &head[line_start..];
        if n == 0 || head.len() > cap {
            return Ok(head);
        }
        let text = String::from_utf8_lossy(line);
        let text = text.trim_start_matches('\u{feff}').trim();
        if !text.is_empty() {
            if text == "{" {
                input.take(SNIFF_BYTES as u64).read_to_end(&mut head)?;
            }
            return Ok(head);
        }
        line_start = head.len();
    }
}

/// The format of a file's head: its first non-blank line (which must be UTF-8 and within
/// the line cap) as a probe.
fn recognise_head(
    name: &str,
    magic: &[u8],
    head: &[u8],
    opts: &LoadOptions,
) -> Result<&'static Format, TraceError> {
    let cap = opts.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES);
    let at = |number: usize, error| TraceError::Row {
        path: name.to_owned(),
        line: number,
        error,
    };
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let mut lines = head.split(|b| *b == b'\n').enumerate();
    let Some((i, bytes)) = lines.find(|(_, l)| !l.trim_ascii().is_empty()) else {
        return Err(TraceError::Empty {
            path: name.to_owned(),
        });
    };
    if bytes.len() > cap {
        return Err(at(i + 1, RowError::TooLong { limit: cap }));
    }
    let line = std::str::from_utf8(bytes)
        .map_err(|e| {
            at(
                i + 1,
                RowError::NotUtf8 {
                    column: e.valid_up_to() + 1,
                },
            )
        })?
        .trim();
    let json: Option<Map<String, Value>> = line
        .starts_with('{')
        .then(|| super::fields::parse_json(line).ok())
        .flatten();
    let probe = Probe {
        dir: None,
        magic,
        head,
        line: Some(line),
        json: json.as_ref(),
    };
    registry::recognise(&probe).map_err(|e| at(i + 1, e))
}

/// The input as a whole is not what its format reads.
fn invalid(name: &str, what: String) -> TraceError {
    TraceError::Invalid {
        path: name.to_owned(),
        what,
    }
}
