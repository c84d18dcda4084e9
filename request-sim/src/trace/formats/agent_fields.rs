//! What the agent corpus readers share: their JSONL lines read one at a time
//! ([`for_each_line`]), `file:line` errors ([`row_error`], [`field_error`]),
//! one JSON object line (or a part of one kept as a [`Value`]) into a derived struct with the
//! whole path of a bad field ([`parse_object`], [`from_value`]), the block count of a prompt
//! ([`blocks`]), and the pieces a derived struct needs for fields that take only some JSON
//! kinds ([`Accepts`], read with [`via`]; [`some`] for a key whose `null` is an error).

use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::fields::describe_value;
use super::lines::buffered;
use super::lines::{read_line_capped, LineRead};
use crate::trace::error::{RowError, TraceError};

/// An error on `line` of `name`.
pub(crate) fn row_error(name: &str, line: usize, error: RowError) -> TraceError {
    TraceError::Row {
        path: name.to_owned(),
        line,
        error,
    }
}

/// Calls `f(line, text)` for every non-blank line of `input` (plain or compressed) with its
/// 1-based number, one line in memory at a time; a BOM opening the file is dropped. A line
/// over `cap` bytes, one that is not UTF-8, and `f`'s errors stop the read.
pub(crate) fn for_each_line(
    name: &str,
    input: impl std::io::Read + Send,
    cap: usize,
    mut f: impl FnMut(usize, &str) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    let (mut input, compression) = buffered(name, input)?;
    let mut buf = Vec::new();
    let mut line = 0usize;
    loop {
        let kind =
            read_line_capped(&mut input, &mut buf, cap).map_err(|error| TraceError::Read {
                path: name.to_owned(),
                line,
                compression,
                error,
            })?;
        line += 1;
        match kind {
            LineRead::Eof => return Ok(()),
            LineRead::TooLong => {
                return Err(row_error(name, line, RowError::TooLong { limit: cap }))
            }
            LineRead::Line => {}
        }
        let text = std::str::from_utf8(&buf).map_err(|e| {
            let column = e.valid_up_to() + 1;
            row_error(name, line, RowError::NotUtf8 { column })
        })?;
        let text = match line {
            1 => text.strip_prefix('\u{feff}').unwrap_or(text),
            _ => text,
        };
        if !text.trim().is_empty() {
            f(line, text)?;
        }
    }
}

/// A field error on `line`.
pub(crate) fn field_error(
    name: &str,
    line: usize,
    field: impl Into<String>,
    what: impl Into<String>,
) -> TraceError {
    row_error(
        name,
        line,
        RowError::Field {
            field: field.into(),
            what: what.into(),
        },
    )
}

/// Parses one JSON object line into `T`; the message names the whole path of the field at
/// fault (`request.replay.input_length`), where `fields::parse_json` names the top-level key.
pub(crate) fn parse_object<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, RowError> {
    let t = text.trim_start();
    if !t.starts_with('{') {
        let head: String = t.chars().take(20).collect();
        return Err(RowError::NotObject {
            found: format!("{head:?}"),
        });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = strip_position(&e.inner().to_string());
        if path.is_empty() || path == "." {
            match e.inner().classify() {
                serde_json::error::Category::Data => RowError::Json(inner),
                _ => RowError::Json(format!("invalid JSON: {inner}")),
            }
        } else {
            RowError::Field {
                field: path,
                what: inner,
            }
        }
    })?;
    de.end()
        .map_err(|e| RowError::Json(format!("invalid JSON: {e}")))?;
    Ok(value)
}

/// Reads a part of a line kept as a [`Value`] into `T`; the field at fault is named by its
/// path under `prefix` (`request.replay.input_length` for the prefix `request`), or by the
/// path alone with an empty prefix.
pub(crate) fn from_value<T: serde::de::DeserializeOwned>(
    v: Value,
    prefix: &str,
) -> Result<T, RowError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let what = e.inner().to_string();
        let field = match (prefix.is_empty(), path.is_empty() || path == ".") {
            (true, true) => return RowError::Json(what),
            (false, true) => prefix.to_owned(),
            (true, false) => path,
            (false, false) => format!("{prefix}.{path}"),
        };
        RowError::Field { field, what }
    })
}

/// For `deserialize_with` (with `#[serde(default)]`): a key that is there is read as `T` even
/// when it is `null` (which `T` may refuse); only a missing key is `None`.
pub(crate) fn some<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A value that takes only some JSON kinds: a list, an object, an id string. Read with
/// [`via`], every kind it does not take is refused as `expected {WHAT}, found {the value}`,
/// the value worded as [`describe_value`] words it.
pub(crate) trait Accepts<'de>: Sized {
    /// What the value must be, for the message (`an array of turns`).
    const WHAT: &'static str;

    /// From a JSON array, its elements read one by one (their index in the error path).
    fn list<A: SeqAccess<'de>>(_seq: A) -> Result<Self, A::Error> {
        Err(refused::<Self, _>("an array".into()))
    }

    /// From a JSON object, its keys read through `map` (their names in the error path).
    fn object<A: MapAccess<'de>>(_map: A) -> Result<Self, A::Error> {
        Err(refused::<Self, _>("an object".into()))
    }

    /// From a JSON string.
    fn id<E: de::Error>(s: &str) -> Result<Self, E> {
        Err(refused::<Self, _>(describe_value(&Value::from(s))))
    }
}

/// `expected {T::WHAT}, found {found}`.
pub(crate) fn refused<'de, T: Accepts<'de>, E: de::Error>(found: String) -> E {
    E::custom(format_args!("expected {}, found {found}", T::WHAT))
}

/// Reads a `T` of [`Accepts`] (for its `Deserialize`).
pub(crate) fn via<'de, D: Deserializer<'de>, T: Accepts<'de>>(d: D) -> Result<T, D::Error> {
    d.deserialize_any(Via(PhantomData))
}

/// The elements of a JSON array (for [`Accepts::list`]).
pub(crate) fn elements<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(
    mut seq: A,
) -> Result<Vec<T>, A::Error> {
    let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
    while let Some(x) = seq.next_element()? {
        items.push(x);
    }
    Ok(items)
}

/// The visitor behind [`via`]: the kinds `T` takes go to it, the others are refused.
struct Via<T>(PhantomData<T>);

impl<'de, T: Accepts<'de>> Visitor<'de> for Via<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(T::WHAT)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::list(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::object(map)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        T::id(v)
    }

    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Err(refused::<T, _>(describe_value(&Value::Null)))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<T, E> {
        Err(refused::<T, _>(describe_value(&Value::Bool(v))))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        Err(refused::<T, _>(describe_value(&Value::from(v))))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        Err(refused::<T, _>(describe_value(&Value::from(v))))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        Err(refused::<T, _>(describe_value(&Value::from(v))))
    }
}

/// serde_json's messages end in ` at line 1 column N`; the line is ours, keep the column.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line 1 column ") {
        Some(i) => format!("{} (column {})", &msg[..i], &msg[i + 18..]),
        None => msg.to_owned(),
    }
}

/// `ceil(input_length / block)`.
pub(crate) fn blocks(input_length: u32, block: usize) -> usize {
    (input_length as usize).div_ceil(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_position_keeps_the_column() {
        assert_eq!(
            strip_position("invalid type: string \"x\", expected u64 at line 1 column 7"),
            "invalid type: string \"x\", expected u64 (column 7)"
        );
        assert_eq!(strip_position("plain"), "plain");
    }
}
