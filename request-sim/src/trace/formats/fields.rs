//! Field-level parsing shared by the formats: typed serde visitors with the value checks
//! (lengths, timestamps) and clear type messages, and the mapping of `serde_json` errors to
//! [`RowError`].
//!
//! JSON rows are deserialised straight into small typed structs (no `serde_json::Value`, unknown
//! fields skipped); every field goes through one of the `deserialize_with` functions below, so a
//! wrong type reads `expected a non-negative integer, found the string "12"` instead of serde's
//! `invalid type: string "12", expected u32`. `serde_path_to_error` says which field failed, so
//! the message reads `field `input_length`: ...`.

use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor,
};

use serde_json::Value;

use crate::trace::error::RowError;
use crate::trace::options::MAX_LENGTH_TOKENS;

/// Largest accepted |timestamp| in milliseconds (about 31,700 years; anything larger is garbage).
pub const MAX_ABS_TIMESTAMP_MS: f64 = 1e15;

// ---------------------------------------------------------------------------------------------
// value checks (also used by the CSV parser, so both give the same messages)

/// Checks a token count: `min ..= MAX_LENGTH_TOKENS`.
pub(crate) fn check_length(v: u64, min: u64) -> Result<u32, String> {
    if v < min {
        if min == 1 {
            return Err(format!(
                "must be at least 1 (an empty prompt cannot be sent), found {v}"
            ));
        }
        return Err(format!("must be at least {min}, found {v}"));
    }
    if v > MAX_LENGTH_TOKENS {
        return Err(format!(
            "{v} tokens is absurd (the limit is {MAX_LENGTH_TOKENS})"
        ));
    }
    // MAX_LENGTH_TOKENS < u32::MAX, so this cannot truncate.
    Ok(v as u32)
}

/// Checks a timestamp in `unit` (`ms` or `s`, `scale` = ms per unit) and returns milliseconds.
pub(crate) fn check_timestamp(v: f64, unit: &str, scale: f64) -> Result<f64, String> {
    if !v.is_finite() {
        return Err(format!("must be a finite number, found {v}"));
    }
    let ms = v * scale;
    if ms.abs() > MAX_ABS_TIMESTAMP_MS {
        return Err(format!(
            "{} {unit} is absurd (more than {} {unit} away from 0)",
            short_num(v),
            short_num(MAX_ABS_TIMESTAMP_MS / scale)
        ));
    }
    Ok(ms)
}

/// A number for messages: scientific notation when it is very large.
pub(crate) fn short_num(v: f64) -> String {
    if v.abs() >= 1e9 {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// A short, safe rendering of an offending string value.
pub(crate) fn quote_short(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{:?}...", head)
    }
}

/// A short description of a JSON value for messages ("the string \"x\"", "an array", ...).
pub(crate) fn describe_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {}", quote_short(s)),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// A session id: a non-empty string or an integer (kept as its decimal text).
pub(crate) fn session_id(v: &Value) -> Result<String, RowError> {
    match v {
        Value::String(s) if !s.is_empty() => Ok(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
        other => Err(RowError::Field {
            field: "session_id".into(),
            what: format!(
                "expected a non-empty string or an integer, found {}",
                describe_value(other)
            ),
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// CSV fields (Azure, BurstGPT)

/// Splits one CSV line into its fields, unquoted and trimmed. One `csv_core` reader per
/// thread, reset for each line: a `csv::Reader` per line built its parser's state machine every
/// time, 92% of the time `analyze` took over a 5-million-row Azure CSV.
pub(crate) fn csv_split(text: &str) -> Result<csv::StringRecord, RowError> {
    use csv_core::ReadRecordResult as R;
    thread_local! {
        static READER: std::cell::RefCell<csv_core::Reader> =
            std::cell::RefCell::new(csv_core::Reader::new());
    }
    // Unquoting never lengthens a field, so `out` fits the line; `ends` grows if need be.
    let mut out = vec![0u8; text.len() + 1];
    let mut ends = vec![0usize; 16];
    let (mut input, mut outlen, mut endlen) = (text.as_bytes(), 0usize, 0usize);
    READER.with_borrow_mut(|reader| {
        reader.reset();
        loop {
            // An empty `input` after the line is read tells the reader the record ends.
            let (res, nin, nout, nend) =
                reader.read_record(input, &mut out[outlen..], &mut ends[endlen..]);
            input = &input[nin..];
            outlen += nout;
            endlen += nend;
            match res {
                R::InputEmpty => {}
                R::OutputFull => out.resize(out.len() * 2, 0),
                R::OutputEndsFull => ends.resize(ends.len() * 2, 0),
                R::Record | R::End => return,
            }
        }
    });
    let mut record = csv::StringRecord::with_capacity(outlen, endlen);
    let mut start = 0;
    for &end in &ends[..endlen] {
        let field = std::str::from_utf8(&out[start..end])
            .map_err(|e| RowError::Csv(format!("a field is not valid UTF-8: {e}")))?;
        record.push_field(field.trim());
        start = end;
    }
    Ok(record)
}

/// The positions of the wanted columns (matched case-insensitively) in a CSV header line; a
/// missing one is a header error naming it, the first columns found and then `hint`.
pub(crate) fn csv_header<const N: usize>(
    text: &str,
    wanted: [&str; N],
    hint: &str,
) -> Result<[usize; N], RowError> {
    let record = csv_split(text)?;
    let names: Vec<&str> = record.iter().collect();
    let mut pos = [0usize; N];
    for (slot, want) in pos.iter_mut().zip(wanted) {
        *slot = names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(want))
            .ok_or_else(|| {
                let shown: Vec<String> = names.iter().take(8).map(|n| quote_short(n)).collect();
                RowError::Header(format!(
                    "no column `{want}` (found {}); {hint}",
                    shown.join(", ")
                ))
            })?;
    }
    Ok(pos)
}

/// One CSV data line split into its fields, refused when it has fewer than `needed`.
pub(crate) fn csv_row(text: &str, needed: usize) -> Result<csv::StringRecord, RowError> {
    let record = csv_split(text)?;
    if record.len() < needed {
        return Err(RowError::Columns {
            expected: needed,
            found: record.len(),
        });
    }
    Ok(record)
}

/// A CSV token count: a non-negative integer `min ..= MAX_LENGTH_TOKENS`.
pub(crate) fn csv_length(field: &str, text: &str, min: u64) -> Result<u32, RowError> {
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

fn err<E: de::Error>(what: impl fmt::Display) -> E {
    E::custom(what)
}

/// Implements the visit methods for the JSON kinds a visitor does not accept.
macro_rules! reject {
    ($($kind:ident),*) => {
        $( reject!(@one $kind); )*
    };
    (@one str) => {
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Err(err(format_args!("expected {}, found the string {}", self.expected(), quote_short(v))))
        }
    };
    (@one bool) => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Err(err(format_args!("expected {}, found {v}", self.expected())))
        }
    };
    (@one unit) => {
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Err(err(format_args!("expected {}, found null", self.expected())))
        }
    };
    (@one seq) => {
        fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<Self::Value, A::Error> {
            Err(err(format_args!("expected {}, found an array", self.expected())))
        }
    };
    (@one map) => {
        fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<Self::Value, A::Error> {
            Err(err(format_args!("expected {}, found an object", self.expected())))
        }
    };
    (@one numbers) => {
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Err(err(format_args!("expected {}, found the number {v}", self.expected())))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Err(err(format_args!("expected {}, found the number {v}", self.expected())))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Err(err(format_args!("expected {}, found the number {v}", self.expected())))
        }
    };
}

// ---------------------------------------------------------------------------------------------
// token counts

struct LengthVisitor {
    min: u64,
}

const INT: &str = "a non-negative integer";

impl LengthVisitor {
    fn expected(&self) -> &'static str {
        INT
    }
}

impl<'de> Visitor<'de> for LengthVisitor {
    type Value = u32;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(INT)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u32, E> {
        check_length(v, self.min).map_err(|m| err(m))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u32, E> {
        if v < 0 {
            return Err(err(format_args!("must not be negative, found {v}")));
        }
        self.visit_u64(v as u64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u32, E> {
        Err(err(format_args!(
            "expected {INT}, found the fractional number {v}"
        )))
    }
    reject!(str, bool, unit, seq, map);
}

pub(crate) fn input_length<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    d.deserialize_any(LengthVisitor { min: 1 })
}

pub(crate) fn output_length<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    d.deserialize_any(LengthVisitor { min: 0 })
}

// ---------------------------------------------------------------------------------------------
// timestamps

struct TimestampVisitor {
    unit: &'static str,
    scale: f64,
}

const NUMBER: &str = "a number";

impl TimestampVisitor {
    fn expected(&self) -> &'static str {
        NUMBER
    }
}

impl<'de> Visitor<'de> for TimestampVisitor {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a number ({})", self.unit)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        self.visit_f64(v as f64)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        self.visit_f64(v as f64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        check_timestamp(v, self.unit, self.scale).map_err(|m| err(m))
    }
    reject!(str, bool, unit, seq, map);
}

/// `timestamp` in milliseconds (int or float).
pub(crate) fn timestamp_ms<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(TimestampVisitor {
        unit: "ms",
        scale: 1.0,
    })
}

/// `timestamp` in seconds (int or float), returned in milliseconds.
pub(crate) fn timestamp_s<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(TimestampVisitor {
        unit: "s",
        scale: 1000.0,
    })
}

// ---------------------------------------------------------------------------------------------
// hash ids

const IDS: &str = "an array of non-negative integers";

struct HashIdsVisitor {
    /// `null` gives `None` (optional hash ids) instead of an error.
    optional: bool,
}

impl HashIdsVisitor {
    fn expected(&self) -> &'static str {
        IDS
    }
}

impl<'de> Visitor<'de> for HashIdsVisitor {
    type Value = Option<Vec<u64>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(IDS)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        if self.optional {
            Ok(None)
        } else {
            Err(err(format_args!("expected {IDS}, found null")))
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut ids = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(id) = seq.next_element_seed(IdSeed { index: ids.len() })? {
            ids.push(id);
        }
        Ok(Some(ids))
    }
    reject!(str, bool, map, numbers);
}

struct IdSeed {
    index: usize,
}

impl<'de> DeserializeSeed<'de> for IdSeed {
    type Value = u64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IdSeed {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(IDS)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        if v < 0 {
            return Err(self.bad(format_args!("is negative ({v})")));
        }
        Ok(v as u64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        Err(self.bad(format_args!("is the fractional number {v}")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        Err(self.bad(format_args!("is the string {}", quote_short(v))))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<u64, E> {
        Err(self.bad(format_args!("is {v}")))
    }
    fn visit_unit<E: de::Error>(self) -> Result<u64, E> {
        Err(self.bad("is null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _seq: A) -> Result<u64, A::Error> {
        Err(self.bad("is an array"))
    }
    fn visit_map<A: MapAccess<'de>>(self, _map: A) -> Result<u64, A::Error> {
        Err(self.bad("is an object"))
    }
}

impl IdSeed {
    fn bad<E: de::Error>(&self, what: impl fmt::Display) -> E {
        err(format_args!(
            "element {} {what}; expected {IDS}",
            self.index
        ))
    }
}

/// Required `hash_ids`.
pub(crate) fn hash_ids<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    d.deserialize_any(HashIdsVisitor { optional: false })
        .map(Option::unwrap_or_default)
}

/// Optional `hash_ids` (absent or `null` = none); use with `#[serde(default)]`.
pub(crate) fn opt_hash_ids<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u64>>, D::Error> {
    d.deserialize_any(HashIdsVisitor { optional: true })
}

// ---------------------------------------------------------------------------------------------
// session fields (Bailian)

struct IntVisitor {
    min: i64,
    what: &'static str,
}

impl IntVisitor {
    fn expected(&self) -> &'static str {
        self.what
    }
}

impl<'de> Visitor<'de> for IntVisitor {
    type Value = i64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.what)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        match i64::try_from(v) {
            Ok(v) => self.visit_i64(v),
            Err(_) => Err(err(format_args!(
                "{v} is too large; expected {}",
                self.what
            ))),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        if v < self.min {
            return Err(err(format_args!("expected {}, found {v}", self.what)));
        }
        Ok(v)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        Err(err(format_args!(
            "expected {}, found the fractional number {v}",
            self.what
        )))
    }
    reject!(str, bool, unit, seq, map);
}

pub(crate) fn chat_id<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(IntVisitor {
        min: 0,
        what: "a non-negative integer",
    })
}

pub(crate) fn parent_chat_id<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(IntVisitor {
        min: -1,
        what: "a chat id (>= 0) or -1 for a root turn",
    })
}

struct TurnVisitor;

const TURN: &str = "a turn number (non-negative integer)";

impl TurnVisitor {
    fn expected(&self) -> &'static str {
        TURN
    }
}

impl<'de> Visitor<'de> for TurnVisitor {
    type Value = Option<u32>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(TURN)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<u32>, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<u32>, E> {
        match u32::try_from(v) {
            Ok(v) => Ok(Some(v)),
            Err(_) => Err(err(format_args!("{v} is absurd; expected {TURN}"))),
        }
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<u32>, E> {
        if v < 0 {
            return Err(err(format_args!("must not be negative, found {v}")));
        }
        self.visit_u64(v as u64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<u32>, E> {
        Err(err(format_args!(
            "expected {TURN}, found the fractional number {v}"
        )))
    }
    reject!(str, bool, seq, map);
}

/// Optional `turn` (absent or `null` = unknown); use with `#[serde(default)]`.
pub(crate) fn opt_turn<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    d.deserialize_any(TurnVisitor)
}

struct StrVisitor;

const STRING: &str = "a string";

impl StrVisitor {
    fn expected(&self) -> &'static str {
        STRING
    }
}

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(STRING)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<String>, E> {
        Ok(Some(v.to_owned()))
    }
    reject!(bool, seq, map, numbers);
}

/// Optional `type` string (absent or `null` = none); use with `#[serde(default)]`.
pub(crate) fn opt_kind<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    d.deserialize_any(StrVisitor)
}

// ---------------------------------------------------------------------------------------------
// whole JSON lines

/// Parses one JSON line into `T`, mapping every failure to a clear [`RowError`].
pub(crate) fn from_json_line<T: DeserializeOwned>(text: &str) -> Result<T, RowError> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') {
        return Err(RowError::NotObject {
            found: describe_json_start(trimmed),
        });
    }
    parse_json(text)
}

/// Parses JSON `text` into `T` (the whole text, like `serde_json::from_str`); errors name the
/// top-level field at fault, found by `serde_path_to_error`.
pub(crate) fn parse_json<T: DeserializeOwned>(text: &str) -> Result<T, RowError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().iter().find_map(|s| match s {
            serde_path_to_error::Segment::Map { key } => Some(key.clone()),
            _ => None,
        });
        json_error(text, field.as_deref(), e.inner())
    })?;
    de.end().map_err(|e| json_error(text, None, &e))?;
    Ok(value)
}

fn describe_json_start(t: &str) -> String {
    match t.chars().next() {
        Some('[') => "an array".into(),
        Some('"') => "a string".into(),
        Some('t') | Some('f') if t.starts_with("true") || t.starts_with("false") => {
            "a boolean".into()
        }
        Some('n') if t.starts_with("null") => "null".into(),
        Some(c) if c == '-' || c.is_ascii_digit() => "a number".into(),
        _ => {
            let head: String = t.chars().take(20).collect();
            format!("text starting with {head:?}")
        }
    }
}

/// Turns a `serde_json` error on `text` (in `field`, when known) into a [`RowError`]; the
/// position becomes `(column N)` (the file line is added by the caller).
fn json_error(text: &str, field: Option<&str>, e: &serde_json::Error) -> RowError {
    use serde_json::error::Category;
    let col = e.column();
    let full = e.to_string();
    // serde_json's Display is the message plus this exact position suffix (when it has one).
    let msg = full
        .strip_suffix(&format!(" at line {} column {col}", e.line()))
        .unwrap_or(&full);
    match e.classify() {
        // Our visitors' messages, or serde's `missing field` / `duplicate field`, which come
        // without a path and name the field themselves.
        Category::Data => match field {
            Some(f) => RowError::Json(format!("field `{f}`: {msg}")),
            None => RowError::Json(msg.to_owned()),
        },
        Category::Eof => RowError::Json(format!(
            "invalid JSON: the line ends in the middle of a value ({msg})"
        )),
        Category::Syntax | Category::Io => {
            let pos = col.saturating_sub(1);
            let rest = text.get(pos..).unwrap_or("");
            let bad_number = ["NaN", "-NaN", "Infinity", "-Infinity", "inf", "-inf", "nan"]
                .into_iter()
                .find(|w| rest.starts_with(w));
            // Between two fields the path has no key: the key before the error names the place.
            match (bad_number, field.or_else(|| key_before(text, pos))) {
                (Some(w), Some(key)) => RowError::Json(format!(
                    "field `{key}`: {w} is not a number JSON allows (column {col})"
                )),
                (Some(w), None) => RowError::Json(format!(
                    "invalid JSON: {w} is not a number JSON allows (column {col})"
                )),
                (None, Some(key)) => RowError::Json(format!(
                    "invalid JSON near field `{key}`: {msg} (column {col})"
                )),
                (None, None) => RowError::Json(format!("invalid JSON: {msg} (column {col})")),
            }
        }
    }
}

/// The object key closest before byte `pos` (heuristic, for messages only).
fn key_before(text: &str, pos: usize) -> Option<&str> {
    let head = text.get(..pos.min(text.len()))?;
    let colon = head.rfind(':')?;
    let before = head[..colon].trim_end();
    let before = before.strip_suffix('"')?;
    let start = before.rfind('"')?;
    let key = &before[start + 1..];
    if key.is_empty() || key.len() > 64 {
        return None;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_split_agrees_with_a_csv_reader_per_line() {
        let oracle = |t: &str| -> Vec<String> {
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .trim(csv::Trim::All)
                .from_reader(t.as_bytes());
            let mut record = csv::StringRecord::new();
            reader.read_record(&mut record).unwrap();
            record.iter().map(str::to_owned).collect()
        };
        let alphabet: Vec<char> = "ab,\" é1\t".chars().collect();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 24) as usize;
            let line: String = (0..len)
                .map(|k| alphabet[((x >> (k % 40)) as usize + k * 7) % alphabet.len()])
                .collect();
            let got: Vec<String> = csv_split(&line)
                .unwrap()
                .iter()
                .map(str::to_owned)
                .collect();
            assert_eq!(got, oracle(&line), "{line:?}");
        }
    }

    #[test]
    fn csv_split_unquotes_trims_and_takes_any_number_of_fields() {
        let fields =
            |t: &str| -> Vec<String> { csv_split(t).unwrap().iter().map(str::to_owned).collect() };
        assert_eq!(
            fields(r#" a ,"b, c" ,"say ""hi""",,é "#),
            ["a", "b, c", r#"say "hi""#, "", "é"]
        );
        let many: Vec<String> = (0..100).map(|i| format!("\"{i}\"")).collect();
        let want: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        assert_eq!(fields(&many.join(",")), want);
        // The reader is reused: a quote left open on one line does not leak into the next.
        assert_eq!(fields(r#"1,"open"#), ["1", "open"]);
        assert_eq!(fields("2,3"), ["2", "3"]);
        assert!(fields("").is_empty());
    }

    #[derive(serde::Deserialize, Debug)]
    struct Row {
        #[serde(deserialize_with = "timestamp_ms")]
        #[allow(dead_code)]
        timestamp: f64,
        #[serde(deserialize_with = "input_length")]
        #[allow(dead_code)]
        input_length: u32,
        #[serde(default, deserialize_with = "opt_hash_ids")]
        #[allow(dead_code)]
        hash_ids: Option<Vec<u64>>,
    }

    fn err(text: &str) -> String {
        from_json_line::<Row>(text).unwrap_err().to_string()
    }

    #[test]
    fn messages_name_the_field() {
        assert_eq!(
            err(r#"{"timestamp": 1, "input_length": "12"}"#),
            r#"field `input_length`: expected a non-negative integer, found the string "12""#
        );
        assert_eq!(
            err(r#"{"timestamp": 1, "input_length": -3}"#),
            "field `input_length`: must not be negative, found -3"
        );
        assert_eq!(
            err(r#"{"timestamp": 1, "input_length": 0}"#),
            "field `input_length`: must be at least 1 (an empty prompt cannot be sent), found 0"
        );
        assert_eq!(
            err(r#"{"timestamp": 1, "input_length": 20000000}"#),
            "field `input_length`: 20000000 tokens is absurd (the limit is 10000000)"
        );
        assert_eq!(err(r#"{"timestamp": 1}"#), "missing field `input_length`");
        assert_eq!(
            err(r#"{"timestamp": NaN, "input_length": 5}"#),
            "field `timestamp`: NaN is not a number JSON allows (column 15)"
        );
        assert_eq!(
            err(r#"{"timestamp": 1, "input_length": 5, "hash_ids": [1, -2]}"#),
            "field `hash_ids`: element 1 is negative (-2); expected an array of non-negative integers"
        );
        assert_eq!(err("[1, 2]"), "expected a JSON object, found an array");
        assert!(
            err(r#"{"timestamp": 1, "input_length": 5"#).starts_with("invalid JSON: the line ends")
        );
        assert_eq!(
            err(r#"{"timestamp": 1e999, "input_length": 5}"#),
            "invalid JSON near field `timestamp`: number out of range (column 19)"
        );
    }

    #[test]
    fn accepts_null_optional_ids_and_float_timestamps() {
        let r: Row =
            from_json_line(r#"{"timestamp": 1.5, "input_length": 5, "hash_ids": null, "x": [1]}"#)
                .unwrap();
        assert_eq!(r.hash_ids, None);
        assert_eq!(r.timestamp, 1.5);
    }
}
