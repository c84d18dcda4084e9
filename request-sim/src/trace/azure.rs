//! Azure LLM inference trace (CSV):
//!
//! ```text
//! TIMESTAMP,ContextTokens,GeneratedTokens
//! 2023-11-16 18:15:46.6805900,374,44
//! ```
//!
//! The header line is required; column names are matched case-insensitively, in any order,
//! extra columns are ignored, fields may be double-quoted. `TIMESTAMP` is a calendar date-time
//! `YYYY-MM-DD HH:MM:SS[.fraction]` (also `T` instead of the space, and an optional `Z` or
//! `+HH:MM`/`-HH:MM` offset; without one it is taken as UTC). There are no hash ids: every prompt
//! is unique.

use super::error::RowError;
use super::fields::{check_length, check_timestamp, quote_short};
use super::load::RawRow;

/// The required columns, as the published trace spells them.
pub const COLUMNS: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

/// Column positions found in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    timestamp: usize,
    context: usize,
    generated: usize,
}

impl Header {
    fn needed_columns(&self) -> usize {
        self.timestamp.max(self.context).max(self.generated) + 1
    }
}

fn unquote(field: &str) -> &str {
    let f = field.trim();
    f.strip_prefix('"')
        .and_then(|f| f.strip_suffix('"'))
        .unwrap_or(f)
        .trim()
}

/// Parses the header line.
pub(crate) fn parse_header(text: &str) -> Result<Header, RowError> {
    let names: Vec<&str> = text.split(',').map(unquote).collect();
    let find = |want: &str| names.iter().position(|n| n.eq_ignore_ascii_case(want));
    let mut pos = [0usize; 3];
    for (slot, want) in pos.iter_mut().zip(COLUMNS) {
        *slot = find(want).ok_or_else(|| {
            let shown: Vec<String> = names.iter().take(8).map(|n| quote_short(n)).collect();
            RowError::Header(format!(
                "no column `{want}` (found {}); the first line must be the header `{}`",
                shown.join(", "),
                COLUMNS.join(",")
            ))
        })?;
    }
    Ok(Header {
        timestamp: pos[0],
        context: pos[1],
        generated: pos[2],
    })
}

/// Parses one non-blank data row.
pub(crate) fn parse_row(header: &Header, text: &str) -> Result<RawRow, RowError> {
    let fields: Vec<&str> = text.split(',').map(unquote).collect();
    if fields.len() < header.needed_columns() {
        return Err(RowError::Columns {
            expected: header.needed_columns(),
            found: fields.len(),
        });
    }
    let timestamp_ms =
        parse_datetime_ms(fields[header.timestamp]).map_err(|what| RowError::Field {
            field: COLUMNS[0].into(),
            what,
        })?;
    let input_length = length(COLUMNS[1], fields[header.context], 1)?;
    let output_length = length(COLUMNS[2], fields[header.generated], 0)?;
    Ok(RawRow {
        timestamp_ms,
        input_length,
        output_length,
        hash_ids: None,
        session: None,
        turn_given: false,
        session_id: None,
        delay_ms: None,
        chat: None,
    })
}

fn length(field: &str, text: &str, min: u64) -> Result<u32, RowError> {
    let bad = |what: String| RowError::Field {
        field: field.into(),
        what,
    };
    if text.is_empty() {
        return Err(bad("is empty; expected a non-negative integer".into()));
    }
    match text.parse::<u64>() {
        Ok(v) => check_length(v, min).map_err(bad),
        Err(_) => {
            if text.starts_with('-')
                && text[1..].bytes().all(|b| b.is_ascii_digit())
                && text.len() > 1
            {
                Err(bad(format!("must not be negative, found {text}")))
            } else {
                Err(bad(format!(
                    "expected a non-negative integer, found {}",
                    quote_short(text)
                )))
            }
        }
    }
}

/// Parses `YYYY-MM-DD HH:MM:SS[.fffffff][Z|+HH:MM|-HH:MM]` into milliseconds since the Unix
/// epoch (UTC).
pub(crate) fn parse_datetime_ms(text: &str) -> Result<f64, String> {
    let bad = || {
        format!(
            "expected a date-time like `2023-11-16 18:15:46.6805900`, found {}",
            quote_short(text)
        )
    };
    let b = text.as_bytes();
    // Fixed part: YYYY-MM-DD?HH:MM:SS (19 bytes).
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b' ' || b[10] == b'T')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        let s = &b[r];
        if !s.iter().all(u8::is_ascii_digit) {
            return Err(bad());
        }
        Ok(s.iter().fold(0i64, |a, &d| a * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(format!("{} is not a valid date-time", quote_short(text)));
    }
    let mut i = 19;
    let mut frac_ns: i64 = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let start = i;
        let mut scale = 100_000_000i64;
        while i < b.len() && b[i].is_ascii_digit() {
            frac_ns += i64::from(b[i] - b'0') * scale;
            scale /= 10;
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
    }
    let offset_min: i64 = match &b[i..] {
        [] | [b'Z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]
            if [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit()) =>
        {
            let h = i64::from(h1 - b'0') * 10 + i64::from(h2 - b'0');
            let m = i64::from(m1 - b'0') * 10 + i64::from(m2 - b'0');
            let v = h * 60 + m;
            if *sign == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return Err(bad()),
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    let ms = secs as f64 * 1000.0 + frac_ns as f64 / 1e6;
    check_timestamp(ms, "ms", 1.0)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

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
