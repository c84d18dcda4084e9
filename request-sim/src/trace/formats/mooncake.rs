//! Mooncake (FAST'25, Kimi) JSONL:
//! `{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, ...]}`.
//!
//! `timestamp` is in milliseconds since the start of the trace (integer or float); `hash_ids`
//! (required) has one id per 512-token block of the prompt; `session_id` (optional, as in
//! AIPerf's `mooncake_trace` rows) groups the turns of a session. Unknown fields are ignored.

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
    #[serde(deserialize_with = "fields::hash_ids")]
    hash_ids: Vec<u64>,
    #[serde(default)]
    session_id: Option<serde_json::Value>,
}

/// Parses one non-blank line.
pub(crate) fn parse_line(text: &str) -> Result<RawRow, RowError> {
    let row: Row = fields::from_json_line(text)?;
    let session_id = match &row.session_id {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(fields::session_id(v)?),
    };
    Ok(RawRow {
        model: None,
        reasoning: Default::default(),
        images: None,
        timestamp_ms: row.timestamp,
        input_length: row.input_length,
        output_length: row.output_length,
        hash_ids: Some(row.hash_ids),
        session: None,
        turn_given: false,
        session_id,
        delay_ms: None,
        chat: None,
    })
}

/// Mooncake: `hash_ids` without `session_id` (a row with both is generic, so its sessions
/// are kept).
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo {
        sessions: SessionSource::Ids,
        ..FormatInfo::rows(
            "mooncake",
            512,
            Timestamps::Millis,
            "Mooncake FAST'25 JSONL: timestamp (ms), input_length, output_length, hash_ids (512-token blocks)",
        )
    },
    recognise: |p| p.has("hash_ids") && !p.has("session_id"),
    read: Reader::Lines(parse_line),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_int_and_float_timestamps() {
        let r = parse_line(r#"{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47]}"#).unwrap();
        assert_eq!(r.timestamp_ms, 27482.0);
        assert_eq!((r.input_length, r.output_length), (6955, 52));
        assert_eq!(r.hash_ids, Some(vec![46, 47]));
        let r = parse_line(r#"{"timestamp": 1.25, "input_length": 1, "output_length": 0, "hash_ids": [], "extra": {"a": 1}}"#).unwrap();
        assert_eq!(r.timestamp_ms, 1.25);
    }

    #[test]
    fn session_id_is_kept() {
        let r = parse_line(r#"{"session_id": 7, "timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}"#).unwrap();
        assert_eq!(r.session_id.as_deref(), Some("7"));
    }

    #[test]
    fn hash_ids_are_required() {
        let e =
            parse_line(r#"{"timestamp": 1, "input_length": 1, "output_length": 1}"#).unwrap_err();
        assert_eq!(e.to_string(), "missing field `hash_ids`");
    }
}
