//! Alibaba Bailian (Qwen) JSONL:
//! `{"chat_id": 159, "parent_chat_id": -1, "timestamp": 61.114, "input_length": 521,
//!   "output_length": 132, "type": "text", "turn": 1, "hash_ids": [1089, 1090, ...]}`.
//!
//! `timestamp` is in **seconds** (converted to ms); `hash_ids` has one id per 16-token block.
//! Required: chat_id, timestamp, input_length, output_length, hash_ids. Optional:
//! parent_chat_id (absent = -1, a root turn), type, turn (absent = parent's turn + 1, or 1 when
//! the parent is not in the trace). Unknown fields are ignored.
//!
//! A `type: image` row is a request with one image (`docs/images.md`; the trace says neither
//! how many nor how large): the image's id comes from the row's first hash id, so the turns of
//! a conversation that share their first block share the image (a cache hit, as the text), and
//! its size from `--image-tokens`, shrunk when the row is too short.

use super::fields;
use super::unit::{Format, Reader};
use crate::trace::error::RowError;
use crate::trace::model::SessionInfo;
use crate::trace::model::{FormatInfo, SessionSource, Timestamps};
use crate::trace::row::RawRow;

fn root() -> i64 {
    -1
}

#[derive(serde::Deserialize)]
struct Row {
    #[serde(deserialize_with = "fields::chat_id")]
    chat_id: i64,
    #[serde(default = "root", deserialize_with = "fields::parent_chat_id")]
    parent_chat_id: i64,
    #[serde(deserialize_with = "fields::timestamp_s")]
    timestamp: f64,
    #[serde(deserialize_with = "fields::input_length")]
    input_length: u32,
    #[serde(deserialize_with = "fields::output_length")]
    output_length: u32,
    #[serde(default, rename = "type", deserialize_with = "fields::opt_kind")]
    kind: Option<String>,
    #[serde(default, deserialize_with = "fields::opt_turn")]
    turn: Option<u32>,
    #[serde(deserialize_with = "fields::hash_ids")]
    hash_ids: Vec<u64>,
}

/// Parses one non-blank line.
pub(crate) fn parse_line(text: &str) -> Result<RawRow, RowError> {
    let row: Row = fields::from_json_line(text)?;
    let images = match (row.kind.as_deref(), row.hash_ids.first()) {
        (Some("image"), Some(&first)) => {
            super::images::check_fits("type", 1, row.input_length)?;
            super::images::from_hash(first)
        }
        _ => None,
    };
    Ok(RawRow {
        model: None,
        reasoning: Default::default(),
        images,
        timestamp_ms: row.timestamp,
        input_length: row.input_length,
        output_length: row.output_length,
        hash_ids: Some(row.hash_ids),
        turn_given: row.turn.is_some(),
        session_id: None,
        delay_ms: None,
        chat: None,
        session: Some(SessionInfo {
            chat_id: row.chat_id,
            parent_chat_id: row.parent_chat_id,
            turn: row.turn.unwrap_or(0),
            kind: row.kind,
        }),
    })
}

/// Bailian: a row with `chat_id`.
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo {
        sessions: SessionSource::ParentLinks,
        ..FormatInfo::rows(
            "bailian",
            16,
            Timestamps::Seconds,
            "Alibaba Bailian JSONL: chat_id, parent_chat_id, timestamp (s), input_length, output_length, hash_ids (16-token blocks)",
        )
    },
    recognise: |p| p.has("chat_id"),
    read: Reader::Lines(parse_line),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_real_shaped_line() {
        let r = parse_line(r#"{"chat_id": 159, "parent_chat_id": 55, "timestamp": 61.114, "input_length": 521, "output_length": 132, "type": "text", "turn": 2, "hash_ids": [1089, 1090]}"#).unwrap();
        assert!((r.timestamp_ms - 61114.0).abs() < 1e-6);
        let s = r.session.unwrap();
        assert_eq!((s.chat_id, s.parent_chat_id, s.turn), (159, 55, 2));
        assert_eq!(s.kind.as_deref(), Some("text"));
        assert!(r.turn_given);
    }

    #[test]
    fn optional_fields_default() {
        let r = parse_line(r#"{"chat_id": 1, "timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}"#).unwrap();
        let s = r.session.unwrap();
        assert_eq!((s.parent_chat_id, s.kind), (-1, None));
        assert!(!r.turn_given);
    }

    #[test]
    fn bad_parent_is_named() {
        let e = parse_line(r#"{"chat_id": 1, "parent_chat_id": -7, "timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "field `parent_chat_id`: expected a chat id (>= 0) or -1 for a root turn, found -7"
        );
    }
}
