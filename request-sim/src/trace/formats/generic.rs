//! Generic JSONL, what users convert their own logs into:
//! `{"timestamp": 1200.5, "input_length": 900, "output_length": 80, "hash_ids": [1, 2]}`.
//!
//! `timestamp` in milliseconds (integer or float); `hash_ids` optional (absent or `null`: every
//! prompt is unique); block size from `--block-size` (default 512); `session_id` optional (a
//! string or an integer: rows sharing one are the turns of a session); `reasoning_tokens` (or
//! `reasoning_length`) and `thinking_token_budget` optional (`reasoning_fields.rs`). Unknown
//! fields are ignored.

use super::fields;
use super::unit::{Format, Reader};
use crate::trace::error::RowError;
use crate::trace::model::{FormatInfo, SessionSource, Timestamps};
use crate::trace::row::RawRow;

#[derive(serde::Deserialize)]
struct Row {
    #[serde(deserialize_with = "fields::timestamp_ms")]
    timestamp: f64,
    #[serde(deserialize_with = "fields::input_length")]
    input_length: u32,
    #[serde(deserialize_with = "fields::output_length")]
    output_length: u32,
    #[serde(default, deserialize_with = "fields::opt_hash_ids")]
    hash_ids: Option<Vec<u64>>,
    #[serde(default)]
    session_id: Option<serde_json::Value>,
    /// Reasoning (`docs/traces.md`, "Reasoning"), the flat spellings.
    #[serde(default)]
    reasoning_length: Option<u64>,
    #[serde(default)]
    reasoning_tokens: Option<u64>,
    #[serde(default)]
    thinking_token_budget: Option<u64>,
}

/// Parses one non-blank line.
pub(crate) fn parse_line(text: &str) -> Result<RawRow, RowError> {
    let row: Row = fields::from_json_line(text)?;
    let session_id = match &row.session_id {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(fields::session_id(v)?),
    };
    let reasoning = super::reasoning_fields::flat(
        (
            row.reasoning_length,
            row.reasoning_tokens,
            row.thinking_token_budget,
        ),
        row.output_length,
    )?;
    Ok(RawRow {
        model: None,
        reasoning,
        images: None,
        timestamp_ms: row.timestamp,
        input_length: row.input_length,
        output_length: row.output_length,
        hash_ids: row.hash_ids,
        session: None,
        turn_given: false,
        session_id,
        delay_ms: None,
        chat: None,
    })
}

/// Generic: any other JSON object (the last JSON format asked).
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo {
        sessions: SessionSource::Ids,
        ..FormatInfo::rows(
            "generic",
            512,
            Timestamps::Millis,
            "generic JSONL: timestamp (ms), input_length, output_length, optional hash_ids and session_id",
        )
    },
    recognise: |p| p.json.is_some(),
    read: Reader::Lines(parse_line),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_ids_are_optional() {
        let r = parse_line(r#"{"timestamp": 3, "input_length": 10, "output_length": 2}"#).unwrap();
        assert_eq!(r.hash_ids, None);
        let r = parse_line(
            r#"{"timestamp": 3, "input_length": 10, "output_length": 2, "hash_ids": null}"#,
        )
        .unwrap();
        assert_eq!(r.hash_ids, None);
        let r = parse_line(
            r#"{"timestamp": 3, "input_length": 10, "output_length": 2, "hash_ids": [9]}"#,
        )
        .unwrap();
        assert_eq!(r.hash_ids, Some(vec![9]));
    }

    #[test]
    fn reasoning_is_read_and_checked() {
        let r = parse_line(r#"{"timestamp": 3, "input_length": 10, "output_length": 8, "reasoning_tokens": 5, "thinking_token_budget": 6}"#).unwrap();
        assert_eq!((r.reasoning.tokens, r.reasoning.budget), (Some(5), Some(6)));
        let e = parse_line(
            r#"{"timestamp": 3, "input_length": 10, "output_length": 8, "reasoning_length": 9}"#,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "field `reasoning_length`: 9 thinking tokens exceed the row's output_length 8 (the output length counts thinking and answer)");
    }

    #[test]
    fn wrong_hash_ids_type_is_named() {
        let e = parse_line(
            r#"{"timestamp": 3, "input_length": 10, "output_length": 2, "hash_ids": "1,2"}"#,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"field `hash_ids`: expected an array of non-negative integers, found the string "1,2""#
        );
    }
}
