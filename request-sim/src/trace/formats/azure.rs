//! Azure LLM inference trace (CSV):
//!
//! ```text
//! TIMESTAMP,ContextTokens,GeneratedTokens
//! 2023-11-16 18:15:46.6805900,374,44
//! ```
//!
//! The header line is required; column names are matched case-insensitively, in any order,
//! extra columns are ignored, fields may be double-quoted (a quoted field may hold commas; rows are
//! split by the `csv` crate). `TIMESTAMP` is a calendar date-time
//! `YYYY-MM-DD HH:MM:SS[.fraction]` (also `T` instead of the space, and an optional `Z` or
//! `+HH:MM`/`-HH:MM` offset; without one it is taken as UTC), parsed by `jiff`. There are no hash
//! ids: every prompt is unique.
//!
//! The LMM inference trace 2025 (a multimodal cluster) has a `NumImages` column too:
//! `ContextTokens` then counts text and image tokens, and the row is a request with that many
//! images (`docs/images.md`). An optional `ImageIds` column (request-sim's, not Azure's) names
//! each image (ids separated by spaces or `;`): a repeated id is the same image; without it
//! every image is unique to its row.

use super::fields::{check_timestamp, csv_header, csv_length as length, csv_row, quote_short};
use super::images;
use super::unit::{Format, Reader};
use crate::trace::error::RowError;
use crate::trace::model::{FormatInfo, Timestamps};
use crate::trace::row::RawRow;

/// The required columns, as the published trace spells them.
pub const COLUMNS: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

/// Column positions found in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    timestamp: usize,
    context: usize,
    generated: usize,
    /// `NumImages` (the LMM trace) and `ImageIds`, when the header has them.
    images: Option<usize>,
    image_ids: Option<usize>,
}

/// The LMM trace's image count column, and request-sim's image id column.
pub const IMAGE_COLUMNS: [&str; 2] = ["NumImages", "ImageIds"];

impl Header {
    fn needed_columns(&self) -> usize {
        let img = self.images.max(self.image_ids).unwrap_or(0);
        self.timestamp
            .max(self.context)
            .max(self.generated)
            .max(img)
            + 1
    }
}

/// The position of column `name` in a header line (case-insensitive), if there.
fn optional_column(text: &str, name: &str) -> Option<usize> {
    let record = csv_row(text, 1).ok()?;
    record
        .iter()
        .position(|c| c.trim().eq_ignore_ascii_case(name))
}

/// Parses the header line.
pub(crate) fn parse_header(text: &str) -> Result<Header, RowError> {
    let hint = format!("the first line must be the header `{}`", COLUMNS.join(","));
    let pos = csv_header(text, COLUMNS, &hint)?;
    Ok(Header {
        timestamp: pos[0],
        context: pos[1],
        generated: pos[2],
        images: optional_column(text, IMAGE_COLUMNS[0]),
        image_ids: optional_column(text, IMAGE_COLUMNS[1]),
    })
}

/// Parses one non-blank data row.
pub(crate) fn parse_row(header: &Header, text: &str) -> Result<RawRow, RowError> {
    let record = csv_row(text, header.needed_columns())?;
    let fields: Vec<&str> = record.iter().collect();
    let timestamp_ms =
        parse_datetime_ms(fields[header.timestamp]).map_err(|what| RowError::Field {
            field: COLUMNS[0].into(),
            what,
        })?;
    let input_length = length(COLUMNS[1], fields[header.context], 1)?;
    let output_length = length(COLUMNS[2], fields[header.generated], 0)?;
    let mut row = RawRow::lengths(timestamp_ms, input_length, output_length);
    if let Some(col) = header.images {
        let n = length(IMAGE_COLUMNS[0], fields[col].trim(), 0)?;
        images::check_fits(IMAGE_COLUMNS[0], u64::from(n), input_length)?;
        row.images = match header.image_ids.map(|c| fields[c].trim()) {
            Some(ids) if !ids.is_empty() => images::parse_ids(IMAGE_COLUMNS[1], ids, n)?,
            _ => images::fresh(n),
        };
    }
    Ok(row)
}

/// Parses `YYYY-MM-DD HH:MM:SS[.fffffff][Z|+HH:MM|-HH:MM]` into milliseconds since the Unix
/// epoch (UTC when no offset is given).
pub(crate) fn parse_datetime_ms(text: &str) -> Result<f64, String> {
    // With `Z` or an offset it is an instant; without, a civil date-time taken as UTC. The
    // time of day is required (a bare date is not a request's arrival time).
    let parsed = match text.parse::<jiff::Timestamp>() {
        Ok(t) => Ok(t),
        Err(_) => text
            .parse::<jiff::civil::DateTime>()
            .and_then(|dt| dt.to_zoned(jiff::tz::TimeZone::UTC))
            .map(|z| z.timestamp()),
    };
    let has_time = text.len() > 10
        && text
            .as_bytes()
            .get(10)
            .is_some_and(|b| *b == b' ' || *b == b'T');
    match parsed {
        Ok(t) if has_time => {
            let ms = t.as_second() as f64 * 1000.0 + f64::from(t.subsec_nanosecond()) / 1e6;
            check_timestamp(ms, "ms", 1.0)
        }
        Ok(_) => Err(format!(
            "expected a date-time like `2023-11-16 18:15:46.6805900`, found {}",
            quote_short(text)
        )),
        Err(e) => Err(format!(
            "{} is not a valid date-time ({e})",
            quote_short(text)
        )),
    }
}

/// Azure: any CSV header (the last format asked).
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo::rows(
        "azure",
        512,
        Timestamps::DateTime,
        "Azure LLM inference trace CSV (2023, 2024, LMM 2025): TIMESTAMP, ContextTokens, GeneratedTokens; no hash ids",
    ),
    recognise: |p| {
        p.text_line()
            .is_some_and(|t| t.contains(',') || t.to_ascii_uppercase().contains("TIMESTAMP"))
    },
    read: Reader::Csv(|text| {
        let header = parse_header(text)?;
        Ok(Box::new(move |row| parse_row(&header, row)))
    }),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetime() {
        assert_eq!(parse_datetime_ms("1970-01-01 00:00:00").unwrap(), 0.0);
        assert_eq!(
            parse_datetime_ms("1970-01-02T00:00:01.5Z").unwrap(),
            86_401_500.0
        );
        // 2023-11-16 18:15:46 UTC = 1700158546 s.
        let ms = parse_datetime_ms("2023-11-16 18:15:46.6805900").unwrap();
        assert!((ms - 1_700_158_546_680.59).abs() < 1e-3, "{ms}");
        let with_tz = parse_datetime_ms("2023-11-16 19:15:46.6805900+01:00").unwrap();
        assert!((with_tz - ms).abs() < 1e-3);
        assert_eq!(
            parse_datetime_ms("2024-02-29 00:00:00").unwrap()
                - parse_datetime_ms("2024-02-28 00:00:00").unwrap(),
            86_400_000.0
        );
        for bad in [
            "",
            "2023-11-16",
            "2023-13-01 00:00:00",
            "2023-02-29 00:00:00",
            "2023-11-16 24:00:00",
            "2023-11-16 18:15:46.",
            "2023-11-16 18:15:46 junk",
            "２０２３-11-16 18:15:46",
            "abcd-ef-gh ij:kl:mn",
        ] {
            assert!(parse_datetime_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn header_and_rows() {
        let h = parse_header("\"GeneratedTokens\", timestamp ,ContextTokens,extra").unwrap();
        let r = parse_row(&h, "44,2023-11-16 18:15:46.6805900,374,x").unwrap();
        assert_eq!((r.input_length, r.output_length), (374, 44));
        assert_eq!(
            parse_header("time,ContextTokens,GeneratedTokens").unwrap_err().to_string(),
            "bad CSV header: no column `TIMESTAMP` (found \"time\", \"ContextTokens\", \"GeneratedTokens\"); the first line must be the header `TIMESTAMP,ContextTokens,GeneratedTokens`"
        );
        let h = parse_header("TIMESTAMP,ContextTokens,GeneratedTokens").unwrap();
        assert_eq!(
            parse_row(&h, "2023-11-16 18:15:46,-3,4")
                .unwrap_err()
                .to_string(),
            "field `ContextTokens`: must not be negative, found -3"
        );
        assert_eq!(
            parse_row(&h, "2023-11-16 18:15:46,3")
                .unwrap_err()
                .to_string(),
            "expected at least 3 CSV columns, found 2"
        );
        assert_eq!(
            parse_row(&h, "2023-11-16 18:15:46,3,4.5")
                .unwrap_err()
                .to_string(),
            "field `GeneratedTokens`: expected a non-negative integer, found \"4.5\""
        );
    }
}
