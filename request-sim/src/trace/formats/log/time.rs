//! Request times of a log, in whatever form the log writes them: epoch seconds, milliseconds,
//! microseconds or nanoseconds (numbers or numeric strings), ISO 8601 date-times with or
//! without an offset (without: taken as UTC), or seconds / milliseconds relative to some start.
//!
//! The form is detected from the first row's value (or forced with `--time-format`) and then
//! applies to every row, so a log whose rows mix forms is caught: a row whose time does not fit
//! the detected form is a bad row, named by its line. Numbers are told apart by magnitude: a
//! time after 1973 is above 10⁸ s = 10¹¹ ms = 10¹⁴ µs = 10¹⁷ ns, and a relative time (an
//! offset from the start of the log) is smaller than 10⁸ s (three years).

use std::fmt;

use serde_json::Value;

/// How a log writes its times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeFormat {
    EpochSeconds,
    EpochMillis,
    EpochMicros,
    EpochNanos,
    /// ISO 8601 / RFC 3339 date-times (`2024-05-10T12:00:00.5Z`, `2024-05-10 12:00:00+02:00`,
    /// or without an offset: UTC).
    Iso8601,
    /// Seconds from some start (small numbers).
    RelativeSeconds,
    /// Milliseconds from some start (the `messages` trace's `timestamp`).
    RelativeMillis,
}

impl TimeFormat {
    /// Every `--time-format` name.
    pub const NAMES: &'static str = "s, ms, us, ns, iso, relative-s, relative-ms";

    /// Parses a `--time-format` value.
    pub fn from_name(name: &str) -> Option<TimeFormat> {
        Some(match name.to_ascii_lowercase().as_str() {
            "s" | "epoch-s" | "seconds" => TimeFormat::EpochSeconds,
            "ms" | "epoch-ms" => TimeFormat::EpochMillis,
            "us" | "µs" | "epoch-us" => TimeFormat::EpochMicros,
            "ns" | "epoch-ns" => TimeFormat::EpochNanos,
            "iso" | "iso8601" | "rfc3339" => TimeFormat::Iso8601,
            "relative-s" => TimeFormat::RelativeSeconds,
            "relative-ms" => TimeFormat::RelativeMillis,
            _ => return None,
        })
    }

    /// Milliseconds per unit of a numeric form.
    fn ms_per_unit(self) -> Option<f64> {
        match self {
            TimeFormat::EpochSeconds | TimeFormat::RelativeSeconds => Some(1e3),
            TimeFormat::EpochMillis | TimeFormat::RelativeMillis => Some(1.0),
            TimeFormat::EpochMicros => Some(1e-3),
            TimeFormat::EpochNanos => Some(1e-6),
            TimeFormat::Iso8601 => None,
        }
    }

    /// The form of a number, by its magnitude (see the module docs); `relative` is the form
    /// of a small number.
    fn of_number(x: f64, relative: TimeFormat) -> TimeFormat {
        let a = x.abs();
        if a >= 1e17 {
            TimeFormat::EpochNanos
        } else if a >= 1e14 {
            TimeFormat::EpochMicros
        } else if a >= 1e11 {
            TimeFormat::EpochMillis
        } else if a >= 1e8 {
            TimeFormat::EpochSeconds
        } else {
            relative
        }
    }
}

impl fmt::Display for TimeFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeFormat::EpochSeconds => "Unix epoch seconds",
            TimeFormat::EpochMillis => "Unix epoch milliseconds",
            TimeFormat::EpochMicros => "Unix epoch microseconds",
            TimeFormat::EpochNanos => "Unix epoch nanoseconds",
            TimeFormat::Iso8601 => "ISO 8601 date-time",
            TimeFormat::RelativeSeconds => "relative seconds",
            TimeFormat::RelativeMillis => "relative milliseconds",
        })
    }
}

/// A time value read from a row: a number, or a string (numeric or a date-time).
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|x| x.is_finite()),
        _ => None,
    }
}

/// Turns the time values of a log into milliseconds, in one form for the whole log.
#[derive(Debug, Clone)]
pub struct TimeParser {
    format: Option<TimeFormat>,
    /// The form of a small number when detecting (relative seconds, or milliseconds for a
    /// `messages` trace).
    relative: TimeFormat,
    /// ISO values with an offset (or `Z`), and without one (taken as UTC).
    pub with_offset: usize,
    pub without_offset: usize,
}

impl TimeParser {
    /// `forced`: `--time-format`; `relative`: what a small number means when detecting.
    pub fn new(forced: Option<TimeFormat>, relative: TimeFormat) -> TimeParser {
        TimeParser {
            format: forced,
            relative,
            with_offset: 0,
            without_offset: 0,
        }
    }

    /// The form in use (forced, or detected from the first value), if known yet.
    pub fn format(&self) -> Option<TimeFormat> {
        self.format
    }

    /// One line describing the form, for the report (`ISO 8601 date-time (with offset)`).
    pub fn describe(&self) -> String {
        match self.format {
            None => "none (no row had a time)".into(),
            Some(TimeFormat::Iso8601) => {
                let which = match (self.with_offset > 0, self.without_offset > 0) {
                    (true, false) => "with offset",
                    (false, true) => "without offset, taken as UTC",
                    _ => "some with offset, some without (taken as UTC)",
                };
                format!("{} ({which})", TimeFormat::Iso8601)
            }
            Some(f) => f.to_string(),
        }
    }

    /// Milliseconds of `v` (since the epoch, or since the relative start).
    pub fn ms(&mut self, v: &Value) -> Result<f64, String> {
        let num = number(v);
        let format = match self.format {
            Some(f) => f,
            None => {
                let f = match (num, v) {
                    (Some(x), _) => TimeFormat::of_number(x, self.relative),
                    (None, Value::String(_)) => TimeFormat::Iso8601,
                    _ => return Err(format!("expected a time, found {}", describe(v))),
                };
                self.format = Some(f);
                f
            }
        };
        let ms = match (format.ms_per_unit(), num, v) {
            (Some(scale), Some(x), _) => {
                if x < 0.0 {
                    return Err(format!("a time must not be negative, found {x}"));
                }
                x * scale
            }
            (Some(_), None, _) => {
                return Err(format!(
                    "expected a number ({format}, the form of the first row's time), found {}",
                    describe(v)
                ))
            }
            (None, _, Value::String(s)) => {
                let ms = crate::trace::formats::azure::parse_datetime_ms(s.trim()).map_err(|e| {
                    format!("{e} (the first row's time is an {})", TimeFormat::Iso8601)
                })?;
                if has_offset(s.trim()) {
                    self.with_offset += 1;
                } else {
                    self.without_offset += 1;
                }
                ms
            }
            (None, _, _) => {
                return Err(format!(
                    "expected an ISO 8601 date-time string (the form of the first row's time), found {}",
                    describe(v)
                ))
            }
        };
        if !ms.is_finite() || ms.abs() > 1e15 {
            return Err(format!("the time {} is out of range", describe(v)));
        }
        Ok(ms)
    }
}

/// Whether a date-time string ends in `Z` or a `±HH:MM` / `±HHMM` offset.
fn has_offset(s: &str) -> bool {
    if s.ends_with(['Z', 'z']) {
        return true;
    }
    // The time part starts after the date (10 characters) and its separator.
    let time = s.get(11..).unwrap_or("");
    time.contains(['+', '-'])
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::String(s) if s.chars().count() <= 40 => format!("the string {s:?}"),
        Value::String(s) => format!("the string {:?}...", s.chars().take(40).collect::<String>()),
        Value::Number(n) => format!("the number {n}"),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn detect(v: Value) -> (TimeFormat, f64) {
        let mut p = TimeParser::new(None, TimeFormat::RelativeSeconds);
        let ms = p.ms(&v).unwrap();
        (p.format().unwrap(), ms)
    }

    #[test]
    fn every_numeric_form_is_told_by_magnitude() {
        // 2024-05-10 12:00:00 UTC = 1715342400 s.
        let ms = 1_715_342_400_000.0;
        assert_eq!(detect(json!(1_715_342_400)), (TimeFormat::EpochSeconds, ms));
        assert_eq!(
            detect(json!(1_715_342_400.5)),
            (TimeFormat::EpochSeconds, ms + 500.0)
        );
        assert_eq!(
            detect(json!(1_715_342_400_000u64)),
            (TimeFormat::EpochMillis, ms)
        );
        assert_eq!(
            detect(json!(1_715_342_400_000_000u64)),
            (TimeFormat::EpochMicros, ms)
        );
        assert_eq!(
            detect(json!("1715342400000000000")),
            (TimeFormat::EpochNanos, ms)
        );
        assert_eq!(detect(json!(12.5)), (TimeFormat::RelativeSeconds, 12_500.0));
        let mut p = TimeParser::new(None, TimeFormat::RelativeMillis);
        assert_eq!(p.ms(&json!(250)).unwrap(), 250.0);
        assert_eq!(p.format(), Some(TimeFormat::RelativeMillis));
    }

    #[test]
    fn iso_with_and_without_offset() {
        let ms = 1_715_342_400_000.0;
        let mut p = TimeParser::new(None, TimeFormat::RelativeSeconds);
        assert_eq!(p.ms(&json!("2024-05-10T12:00:00Z")).unwrap(), ms);
        assert_eq!(
            p.ms(&json!("2024-05-10 14:00:00.250+02:00")).unwrap(),
            ms + 250.0
        );
        assert_eq!(p.describe(), "ISO 8601 date-time (with offset)");
        assert_eq!(p.ms(&json!("2024-05-10T12:00:01")).unwrap(), ms + 1000.0);
        assert_eq!(
            p.describe(),
            "ISO 8601 date-time (some with offset, some without (taken as UTC))"
        );
        let mut p = TimeParser::new(None, TimeFormat::RelativeSeconds);
        p.ms(&json!("2024-05-10 12:00:00")).unwrap();
        assert_eq!(
            p.describe(),
            "ISO 8601 date-time (without offset, taken as UTC)"
        );
    }

    #[test]
    fn a_row_in_another_form_is_an_error() {
        let mut p = TimeParser::new(None, TimeFormat::RelativeSeconds);
        p.ms(&json!("2024-05-10T12:00:00Z")).unwrap();
        assert!(p.ms(&json!(5)).unwrap_err().contains("ISO 8601"));
        assert!(p
            .ms(&json!("yesterday"))
            .unwrap_err()
            .contains("not a valid date-time"));
        let mut p = TimeParser::new(Some(TimeFormat::EpochMillis), TimeFormat::RelativeSeconds);
        assert_eq!(p.ms(&json!(5)).unwrap(), 5.0);
        assert!(p
            .ms(&json!("noon"))
            .unwrap_err()
            .contains("expected a number"));
        assert!(p.ms(&json!(-1)).unwrap_err().contains("negative"));
        let mut p = TimeParser::new(None, TimeFormat::RelativeSeconds);
        assert!(p.ms(&json!(null)).unwrap_err().contains("expected a time"));
        assert_eq!(TimeFormat::from_name("ns"), Some(TimeFormat::EpochNanos));
        assert_eq!(TimeFormat::from_name("week"), None);
    }
}
