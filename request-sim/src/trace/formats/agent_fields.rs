//! What the agent corpus readers share: `file:line` errors ([`row_error`], [`field_error`]),
//! one JSON object line into a derived struct with the whole path of a bad field
//! ([`parse_object`]), and the block count of a prompt ([`blocks`]).

use crate::trace::error::{RowError, TraceError};

/// An error on `line` of `name`.
pub(crate) fn row_error(name: &str, line: usize, error: RowError) -> TraceError {
    TraceError::Row {
        path: name.to_owned(),
        line,
        error,
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
