//! The registry of trace formats: each format file declares one [`Format`] (its facts, how
//! its content is recognised, its reader), and [`ALL`] lists them in recognition order. Name
//! lookup (`--dataset`), detection and the choice of reader all go through here, so a new
//! format is its own file plus one line of [`ALL`].

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

/// Every format, in recognition order: the first whose recogniser accepts a probe is the
/// format. Binary and directory formats come first, then the JSON formats from the most to the
/// least specific (`generic` takes any JSON object), then the CSV formats (`azure` takes any
/// other CSV header).
pub(crate) static ALL: [&Format; 13] = [
    &super::parquet::FORMAT,
    &super::servegen::FORMAT,
    &super::copilot::FORMAT,
    &super::weka::FORMAT,
    &super::dynamo::FORMAT,
    &super::tracelab::FORMAT,
    &super::dag::FORMAT,
    &super::messages::FORMAT,
    &super::bailian::FORMAT,
    &super::mooncake::FORMAT,
    &super::generic::FORMAT,
    &super::burstgpt::FORMAT,
    &super::azure::FORMAT,
];

/// The format a handle stands for.
pub(crate) fn format_of(f: TraceFormat) -> &'static Format {
    ALL.iter()
        .find(|g| std::ptr::eq(&g.info, f.info()))
        .or_else(|| ALL.iter().find(|g| g.info.name == f.name()))
        .copied()
        .unwrap_or(&super::generic::FORMAT)
}

/// The format of rows whose format was never recognised (an input without rows).
pub(crate) fn fallback() -> TraceFormat {
    super::generic::FORMAT.handle()
}

/// Every format a `--dataset` can name, in recognition order.
pub fn all() -> impl Iterator<Item = TraceFormat> {
    ALL.iter().filter(|f| listed(f)).map(|f| f.handle())
}

/// Whether a format is named on its own (a variant recognised only inside another's file is
/// not).
fn listed(f: &Format) -> bool {
    !f.info.name.is_empty()
}

/// The `--dataset` names, comma-separated (for `--help` and errors).
pub fn names() -> String {
    all().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

impl TraceFormat {
    /// Parses a `--dataset` name or alias (case-insensitive).
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        let name = name.trim();
        ALL.iter()
            .filter(|f| listed(f))
            .find(|f| {
                f.info.name.eq_ignore_ascii_case(name)
                    || f.info.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
            })
            .map(|f| f.handle())
    }
}

impl<'de> serde::Deserialize<'de> for TraceFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TraceFormat, D::Error> {
        let name = String::deserialize(d)?;
        TraceFormat::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown trace format {name:?} (known: {})",
                names()
            ))
        })
    }
}

/// The format of a probe: the first of [`ALL`] that recognises it, or why none does.
pub(crate) fn recognise(probe: &Probe<'_>) -> Result<&'static Format, RowError> {
    if let Some(f) = ALL.iter().find(|f| (f.recognise)(probe)) {
        return Ok(f);
    }
    Err(RowError::Undetectable(match probe.line {
        Some(t) if t.starts_with('{') => {
            let e = super::fields::parse_json::<Map<String, Value>>(t)
                .err()
                .map_or_else(|| "not an object".to_owned(), |e| e.to_string());
            format!("the first data line looks like JSON but does not parse ({e})")
        }
        Some(t) if t.starts_with('[') => {
            "the first data line is a JSON array, not one object per line (JSONL)".into()
        }
        Some(t) => {
            let head: String = t.chars().take(40).collect();
            format!("the first data line ({head:?}) is neither a JSON object nor a CSV header")
        }
        None => "no data line".into(),
    }))
}

/// Detects the format from the first non-blank line of a file (see [`ALL`] for the order).
pub fn detect_format(first_line: &str) -> Result<TraceFormat, RowError> {
    let line = first_line.trim_start_matches('\u{feff}').trim();
    let json = line
        .starts_with('{')
        .then(|| super::fields::parse_json::<Map<String, Value>>(line).ok())
        .flatten();
    let probe = Probe {
        dir: None,
        magic: line.as_bytes(),
        head: line.as_bytes(),
        line: Some(line),
        json: json.as_ref(),
    };
    recognise(&probe).map(|f| f.handle())
}

/// A format a probe cannot be read in: its reader wants another kind of input.
pub(crate) fn wrong_input(f: &Format, what: &str) -> String {
    format!("a {} trace {what}", f.info.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_resolve_to_their_format() {
        for f in all() {
            assert_eq!(TraceFormat::from_name(f.name()), Some(f));
            assert_eq!(
                TraceFormat::from_name(&f.name().to_ascii_uppercase()),
                Some(f)
            );
            for a in f.info().aliases {
                assert_eq!(TraceFormat::from_name(a), Some(f));
            }
        }
        assert_eq!(TraceFormat::from_name("sharegpt"), None);
        assert!(names().contains("servegen"), "{}", names());
        assert!(names().contains("parquet"), "{}", names());
    }

    #[test]
    fn every_format_has_one_entry_and_a_unique_name() {
        let mut seen = std::collections::HashSet::new();
        for f in all() {
            assert!(seen.insert(f.name()), "{} listed twice", f.name());
            assert!(f.default_block_size() >= 1);
            assert!(std::ptr::eq(format_of(f).info.name, f.name()));
        }
    }

    #[test]
    fn detects_each_format_from_its_first_line() {
        let d = |s| detect_format(s).unwrap().name();
        assert_eq!(d(r#"{"chat_id": 1, "hash_ids": [1]}"#), "bailian");
        assert_eq!(d(r#"{"timestamp": 0, "hash_ids": [1]}"#), "mooncake");
        assert_eq!(d(r#"{"timestamp": 0, "input_length": 5}"#), "generic");
        // Session fields matter: such a row is not plain Mooncake.
        assert_eq!(
            d(r#"{"session_id": "s1", "timestamp": 0, "hash_ids": [1]}"#),
            "generic"
        );
        assert_eq!(d(r#"{"timestamp": 0, "messages": []}"#), "messages");
        assert_eq!(d(r#"{"tools": []}"#), "messages");
        assert_eq!(
            d(
                r#"{"session_id": "s", "round_index": 0, "prefix_tokens": 5, "input_tokens_total": 9}"#
            ),
            "tracelab"
        );
        assert_eq!(
            d(r#"{"schema": "dynamo.request.trace.v1", "event_type": "request_end"}"#),
            "dynamo"
        );
        assert_eq!(
            d(r#"{"timestamp": 1, "event": {"schema": "dynamo.request.trace.v1"}}"#),
            "dynamo"
        );
        assert_eq!(
            d(r#"{"session_id": "root", "turns": [{"messages": []}]}"#),
            "dag_jsonl"
        );
        assert_eq!(
            d(r#"{"session_id": "s", "turns": [{"turn_id": "t", "llm_calls": []}]}"#),
            "copilot"
        );
        assert_eq!(d("TIMESTAMP,ContextTokens,GeneratedTokens"), "azure");
        assert_eq!(
            d("\u{feff}TIMESTAMP,ContextTokens,GeneratedTokens"),
            "azure"
        );
        assert_eq!(
            d("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"),
            "burstgpt"
        );
        assert_eq!(d("PAR1\u{15}\u{4}"), "parquet");
        for bad in ["hello", "[1,2]", "{\"a\": "] {
            assert!(detect_format(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serde_round_trip_by_name() {
        for f in all() {
            let j = serde_json::to_string(&f).unwrap();
            assert_eq!(j, format!("\"{}\"", f.name()));
            let back: TraceFormat = serde_json::from_str(&j).unwrap();
            assert_eq!(back, f);
        }
        assert!(serde_json::from_str::<TraceFormat>("\"nope\"").is_err());
    }
}
