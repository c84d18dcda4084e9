//! BurstGPT (HPMLL/BurstGPT: ChatGPT and GPT-4 usage logs of an Azure OpenAI service, CSV):
//!
//! ```text
//! Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
//! 5,ChatGPT,472,18,490,Conversation log
//! ```
//!
//! The header line is required; columns are matched case-insensitively, in any order; extra
//! columns (newer releases add `Session ID` and `Elapsed time`) are ignored. `Timestamp` is
//! seconds from midnight of the first day of the collection (an integer or a decimal number);
//! `Request tokens` and `Response tokens` are the lengths; `Model`, when the file has it, is the
//! row's trace model (what `--model-map` maps onto a served model; an empty cell names none);
//! `Total tokens` and `Log Type` are not needed. A row with 0 response tokens is a request that failed: it is kept
//! (output length 0) or dropped by `--drop-failed`, and counted either way
//! (`TraceStats::failed_requests`). There are no hash ids: every prompt is unique.

use super::fields::{check_timestamp, csv_header, csv_length, csv_row, quote_short};
use super::unit::{Format, Reader};
use crate::trace::error::RowError;
use crate::trace::model::{FormatInfo, Timestamps};
use crate::trace::row::RawRow;

/// The required columns, as the published trace spells them.
pub const COLUMNS: [&str; 3] = ["Timestamp", "Request tokens", "Response tokens"];

/// Column positions found in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    timestamp: usize,
    request: usize,
    response: usize,
    /// The optional `Model` column.
    model: Option<usize>,
}

impl Header {
    fn needed_columns(&self) -> usize {
        self.timestamp.max(self.request).max(self.response) + 1
    }
}

/// True when a CSV header line names BurstGPT's `Request tokens` column (detection).
pub(crate) fn is_header(text: &str) -> bool {
    text.to_ascii_lowercase().contains("request tokens")
}

/// Parses the header line.
pub(crate) fn parse_header(text: &str) -> Result<Header, RowError> {
    let pos = csv_header(
        text,
        COLUMNS,
        "a BurstGPT file starts with the header \
         `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`",
    )?;
    let model = text
        .split(',')
        .position(|c| c.trim().trim_matches('"').eq_ignore_ascii_case("model"));
    Ok(Header {
        timestamp: pos[0],
        request: pos[1],
        response: pos[2],
        model,
    })
}

/// Parses one non-blank data row. A failed request (0 response tokens) parses to a row with
/// output length 0; the reader keeps or drops it.
pub(crate) fn parse_row(header: &Header, text: &str) -> Result<RawRow, RowError> {
    let record = csv_row(text, header.needed_columns())?;
    let fields: Vec<&str> = record.iter().collect();
    let bad_time = |what: String| RowError::Field {
        field: COLUMNS[0].into(),
        what,
    };
    let t = fields[header.timestamp];
    let seconds: f64 = t.parse().map_err(|_| {
        bad_time(format!(
            "expected seconds from the first day's midnight, found {}",
            quote_short(t)
        ))
    })?;
    if seconds < 0.0 {
        return Err(bad_time(format!("must not be negative, found {t}")));
    }
    let timestamp_ms = check_timestamp(seconds, "s", 1000.0).map_err(bad_time)?;
    let input_length = csv_length(COLUMNS[1], fields[header.request], 1)?;
    let output_length = csv_length(COLUMNS[2], fields[header.response], 0)?;
    let mut row = RawRow::lengths(timestamp_ms, input_length, output_length);
    row.model = header
        .model
        .and_then(|i| fields.get(i))
        .map(|m| m.trim())
        .filter(|m| !m.is_empty())
        .map(std::sync::Arc::from);
    Ok(row)
}

/// BurstGPT: a CSV header naming `Request tokens`.
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo {
        zero_output_is_failure: true,
        ..FormatInfo::rows(
            "burstgpt",
            512,
            Timestamps::Seconds,
            "BurstGPT CSV: Timestamp (s), Model, Request tokens, Response tokens; no hash ids",
        )
    },
    recognise: |p| p.text_line().is_some_and(is_header),
    read: Reader::Csv(|text| {
        let header = parse_header(text)?;
        Ok(Box::new(move |row| parse_row(&header, row)))
    }),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_rows() {
        let h =
            parse_header("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type")
                .unwrap();
        let r = parse_row(&h, "5,ChatGPT,472,18,490,Conversation log").unwrap();
        assert_eq!(
            (r.timestamp_ms, r.input_length, r.output_length),
            (5000.0, 472, 18)
        );
        assert_eq!(r.hash_ids, None);
        assert_eq!(r.model.as_deref(), Some("ChatGPT"));
        let failed = parse_row(&h, "110.5,GPT-4,417,0,417,API log").unwrap();
        assert_eq!((failed.timestamp_ms, failed.output_length), (110_500.0, 0));
        // Any column order, extra columns.
        let h = parse_header("Session ID,response tokens,TIMESTAMP,request tokens").unwrap();
        let r = parse_row(&h, "abc,7,2,9").unwrap();
        assert_eq!(
            (r.timestamp_ms, r.input_length, r.output_length),
            (2000.0, 9, 7)
        );
        assert_eq!(r.model, None);
        assert!(is_header("Timestamp,Model,Request tokens"));
        assert!(!is_header("TIMESTAMP,ContextTokens,GeneratedTokens"));
    }

    #[test]
    fn bad_rows_say_why() {
        let h =
            parse_header("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type")
                .unwrap();
        let e = |row| parse_row(&h, row).unwrap_err().to_string();
        assert_eq!(
            e("x,ChatGPT,1,2,3,Conversation log"),
            "field `Timestamp`: expected seconds from the first day's midnight, found \"x\""
        );
        assert_eq!(
            e("-1,ChatGPT,1,2,3,Conversation log"),
            "field `Timestamp`: must not be negative, found -1"
        );
        assert_eq!(
            e("1,ChatGPT,0,2,2,Conversation log"),
            "field `Request tokens`: must be at least 1 (an empty prompt cannot be sent), found 0"
        );
        assert_eq!(e("1,ChatGPT,4"), "expected at least 4 CSV columns, found 3");
        assert!(parse_header("Timestamp,Model,Response tokens")
            .unwrap_err()
            .to_string()
            .contains("no column `Request tokens`"));
    }
}
