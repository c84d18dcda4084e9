//! Parquet traces: Baseten's export schema (what AIPerf reads as `baseten_trace`) and the
//! Mooncake columns, read row group by row group (memory bounded by one row group, not the
//! file).
//!
//! - Baseten: `timestamp_start_unix_ms` (Unix ms, rebased to the first row), `input_tokens`,
//!   `output_tokens`, `total_hashes` (hash ids, one per `block_size` tokens; may be empty or
//!   null), `block_size` (the hash block; every row must agree; `--block-size` overrides),
//!   `provided_session_id` (a string or an integer: the turns of a session) or, when the file
//!   has no such column, `poor_man_session_id`, `prompt` (the literal prompt: sent as written
//!   only by a row without hash ids, else the prompt is built from the hash ids, exact in
//!   length and sharing), `model_name`. Other columns (`duration_e2e_ms`, `request_canceled`,
//!   `output_text`, ...) are not read.
//! - Mooncake columns: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`, optional
//!   `session_id`: a Mooncake JSONL trace converted to Parquet.
//!
//! A bad value is a `file:N` error where N is the row's number in the file (1-based), as a
//! line number is for JSONL.

use std::sync::Arc;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::reader::RowIter as ParquetRows;
use parquet::record::{Field, Row};
use parquet::schema::types::Type;

use super::fields::{check_length, check_timestamp};
use super::unit::{Format, Reader, RowIter};
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::{ChatPayload, FormatInfo, SessionSource, Timestamps};
use crate::trace::options::LoadOptions;
use crate::trace::row::RawRow;

/// Parquet: the file starts with the magic `PAR1`.
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo {
        aliases: &["baseten", "baseten_trace"],
        sessions: SessionSource::Ids,
        ..FormatInfo::rows(
            "parquet",
            512,
            Timestamps::EpochMillis,
            "Parquet: Baseten's export (timestamp_start_unix_ms, input_tokens, output_tokens, total_hashes, block_size, provided_session_id, prompt) or Mooncake columns (timestamp, input_length, output_length, hash_ids)",
        )
    },
    recognise: |p| p.magic.starts_with(b"PAR1"),
    read: Reader::File(open),
};

/// The column names of one schema.
struct Names {
    time: &'static str,
    /// Milliseconds per unit of `time`.
    input: &'static str,
    output: &'static str,
    hashes: &'static str,
    sessions: &'static [&'static str],
}

const BASETEN: Names = Names {
    time: "timestamp_start_unix_ms",
    input: "input_tokens",
    output: "output_tokens",
    hashes: "total_hashes",
    sessions: &["provided_session_id", "poor_man_session_id"],
};

const MOONCAKE: Names = Names {
    time: "timestamp",
    input: "input_length",
    output: "output_length",
    hashes: "hash_ids",
    sessions: &["session_id"],
};

/// Where the columns a row needs are in the projected rows.
struct Columns {
    names: &'static Names,
    /// The session column this file uses, if it has one.
    session: Option<&'static str>,
}

/// Opens a Parquet file: its schema checked, its rows read lazily.
fn open(
    name: &str,
    file: std::fs::File,
    opts: &LoadOptions,
) -> Result<(RowIter, Option<usize>), TraceError> {
    let block = file.try_clone().ok().and_then(first_block_size);
    let bad = |what: String| TraceError::Invalid {
        path: name.to_owned(),
        what,
    };
    let reader = SerializedFileReader::new(file)
        .map_err(|e| bad(format!("not a readable Parquet file ({e})")))?;
    let schema = reader.metadata().file_metadata().schema();
    let has = |c: &str| schema.get_fields().iter().any(|f| f.name() == c);
    let names = if has(BASETEN.time) {
        &BASETEN
    } else if has(MOONCAKE.time) {
        &MOONCAKE
    } else {
        let found: Vec<&str> = schema.get_fields().iter().map(|f| f.name()).collect();
        return Err(bad(format!(
            "a Parquet trace needs Baseten's columns ({}, {}, {}) or Mooncake's ({}, {}, {}); this file has {}",
            BASETEN.time, BASETEN.input, BASETEN.output, MOONCAKE.time, MOONCAKE.input, MOONCAKE.output,
            found.join(", ")
        )));
    };
    for c in [names.input, names.output] {
        if !has(c) {
            return Err(bad(format!(
                "a Parquet trace with column {} needs column {c}",
                names.time
            )));
        }
    }
    let session = names.sessions.iter().copied().find(|c| has(c));
    let wanted: Vec<Arc<Type>> = schema
        .get_fields()
        .iter()
        .filter(|f| {
            let n = f.name();
            [
                names.time,
                names.input,
                names.output,
                names.hashes,
                "block_size",
                "prompt",
                "model_name",
            ]
            .contains(&n)
                || Some(n) == session
        })
        .cloned()
        .collect();
    let projection = Type::group_type_builder(schema.name())
        .with_fields(wanted)
        .build()
        .map_err(|e| bad(format!("cannot select the trace's columns ({e})")))?;
    let rows = ParquetRows::from_file_into(Box::new(reader))
        .project(Some(projection))
        .map_err(|e| bad(format!("cannot select the trace's columns ({e})")))?;
    let rows: RowIter = Box::new(Rows {
        name: name.to_owned(),
        rows,
        columns: Columns { names, session },
        number: 0,
        block: None,
        forced_block: opts.block_size.is_some(),
    });
    Ok((rows, block))
}

/// The rows of an open file, converted one at a time.
struct Rows {
    name: String,
    rows: ParquetRows<'static>,
    columns: Columns,
    /// The 1-based number of the last row read.
    number: usize,
    /// The first row's `block_size`, which every other row must repeat.
    block: Option<u64>,
    forced_block: bool,
}

impl Iterator for Rows {
    type Item = Result<RawRow, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let row = self.rows.next()?;
        self.number += 1;
        let converted = match row {
            Ok(row) => self.convert(&row),
            Err(e) => Err(RowError::Json(format!("cannot read the row ({e})"))),
        };
        Some(converted.map_err(|error| TraceError::Row {
            path: self.name.clone(),
            line: self.number,
            error,
        }))
    }
}

impl Rows {
    /// One Parquet row as a trace row.
    fn convert(&mut self, row: &Row) -> Result<RawRow, RowError> {
        let names = self.columns.names;
        let mut r = RawRow::lengths(0.0, 0, 0);
        let mut prompt = None;
        for (column, value) in row.get_column_iter() {
            let c = column.as_str();
            let field = |what: String| RowError::Field {
                field: c.to_owned(),
                what,
            };
            if c == names.time {
                let v = number(value).map_err(field)?;
                r.timestamp_ms = check_timestamp(v, "ms", 1.0).map_err(field)?;
            } else if c == names.input {
                r.input_length = check_length(count(value).map_err(field)?, 1).map_err(field)?;
            } else if c == names.output {
                r.output_length = check_length(count(value).map_err(field)?, 0).map_err(field)?;
            } else if c == names.hashes {
                r.hash_ids = hash_ids(value).map_err(field)?;
            } else if c == "block_size" {
                self.check_block(value).map_err(field)?;
            } else if Some(c) == self.columns.session {
                r.session_id = session_id(value).map_err(field)?;
            } else if c == "prompt" {
                prompt = text(value).map_err(field)?;
            } else if c == "model_name" {
                r.model = text(value).map_err(field)?.map(Arc::from);
            }
        }
        if r.hash_ids.is_none() {
            r.chat = prompt.map(|p| {
                Box::new(ChatPayload {
                    messages: serde_json::Value::Null,
                    tools: None,
                    extra: None,
                    max_tokens: Some(r.output_length),
                    text_input: Some(p),
                    prompt_token_ids: None,
                })
            });
        }
        Ok(r)
    }

    /// `block_size`: the first row's, repeated by every row (unless `--block-size` is given).
    fn check_block(&mut self, value: &Field) -> Result<(), String> {
        if matches!(value, Field::Null) || self.forced_block {
            return Ok(());
        }
        let b = count(value)?;
        match self.block {
            None if b == 0 => Err("must be at least 1".into()),
            None => {
                self.block = Some(b);
                Ok(())
            }
            Some(first) if first == b => Ok(()),
            Some(first) => Err(format!(
                "is {b}, but the first row's is {first}: one trace has one hash block size (give --block-size to read every row with one)"
            )),
        }
    }
}

/// The block size a Parquet file's rows name (`block_size` of its first row), if any: read
/// before the pipeline starts, so that hash ids are cut into the blocks they stand for.
fn first_block_size(file: std::fs::File) -> Option<usize> {
    let reader = SerializedFileReader::new(file).ok()?;
    let schema = reader.metadata().file_metadata().schema();
    let field = schema
        .get_fields()
        .iter()
        .find(|f| f.name() == "block_size")?
        .clone();
    let projection = Type::group_type_builder(schema.name())
        .with_fields(vec![field])
        .build()
        .ok()?;
    let mut rows = ParquetRows::from_file_into(Box::new(reader))
        .project(Some(projection))
        .ok()?;
    let row = rows.next()?.ok()?;
    let (_, value) = row.get_column_iter().next()?;
    count(value).ok().filter(|b| *b >= 1).map(|b| b as usize)
}

/// A whole number of tokens (an integer column, or a float with no fraction).
fn count(v: &Field) -> Result<u64, String> {
    let n = match *v {
        Field::Byte(x) => i64::from(x),
        Field::Short(x) => i64::from(x),
        Field::Int(x) => i64::from(x),
        Field::Long(x) => x,
        Field::UByte(x) => i64::from(x),
        Field::UShort(x) => i64::from(x),
        Field::UInt(x) => i64::from(x),
        Field::ULong(x) => return Ok(x),
        Field::Float(x) if f64::from(x).fract() == 0.0 => f64::from(x) as i64,
        Field::Double(x) if x.fract() == 0.0 && x.abs() < 9e15 => x as i64,
        ref other => {
            return Err(format!(
                "expected a whole number, found {}",
                describe(other)
            ))
        }
    };
    u64::try_from(n).map_err(|_| format!("must not be negative, found {n}"))
}

/// A number (a time).
fn number(v: &Field) -> Result<f64, String> {
    match *v {
        Field::Float(x) => Ok(f64::from(x)),
        Field::Double(x) => Ok(x),
        Field::TimestampMillis(x) => Ok(x as f64),
        Field::TimestampMicros(x) => Ok(x as f64 / 1e3),
        _ => count(v).map(|n| n as f64),
    }
}

/// A list of hash ids; `None` when null or empty (the prompt is then unique).
fn hash_ids(v: &Field) -> Result<Option<Vec<u64>>, String> {
    let list = match v {
        Field::Null => return Ok(None),
        Field::ListInternal(l) => l,
        other => {
            return Err(format!(
                "expected a list of hash ids, found {}",
                describe(other)
            ))
        }
    };
    let ids = list
        .elements()
        .iter()
        .enumerate()
        .map(|(i, e)| count(e).map_err(|w| format!("item {i}: {w}")))
        .collect::<Result<Vec<u64>, String>>()?;
    Ok((!ids.is_empty()).then_some(ids))
}

/// A session id: a non-empty string or an integer; null is none.
fn session_id(v: &Field) -> Result<Option<String>, String> {
    match v {
        Field::Null => Ok(None),
        Field::Str(s) if !s.is_empty() => Ok(Some(s.clone())),
        other => count(other).map(|n| Some(n.to_string())).map_err(|_| {
            format!(
                "expected a non-empty string or an integer, found {}",
                describe(other)
            )
        }),
    }
}

/// A text column; null or empty is none.
fn text(v: &Field) -> Result<Option<String>, String> {
    match v {
        Field::Null => Ok(None),
        Field::Str(s) => Ok((!s.is_empty()).then(|| s.clone())),
        other => Err(format!("expected text, found {}", describe(other))),
    }
}

/// A value's kind, for messages.
fn describe(v: &Field) -> String {
    let s = v.to_string();
    let short: String = s.chars().take(40).collect();
    if short.len() < s.len() {
        format!("{short}…")
    } else {
        short
    }
}
