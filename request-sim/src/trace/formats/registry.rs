//! The registry of trace formats: each format file declares one [`Format`] (`unit.rs`: its
//! facts, how its content is recognised, its reader), and [`ALL`] lists them in recognition
//! order. Name
//! lookup (`--dataset`), detection and the choice of reader all go through here, so a new
//! format is its own file plus one line of [`ALL`].

use serde_json::{Map, Value};

use super::unit::{Format, Probe};
use crate::trace::error::RowError;
use crate::trace::model::TraceFormat;

/// Every format, in recognition order: the first whose recogniser accepts a probe is the
/// format. Binary and directory formats come first, then the JSON formats from the most to the
/// least specific (`generic` takes any JSON object), then the CSV formats (`azure` takes any
/// other CSV header).
pub(crate) static ALL: [&Format; 13] = [
    &super::parquet::FORMAT,
    &super::servegen::FORMAT,
    &super::copilot::FORMAT,
    &super::weka::FORMAT,
    &super::dynamo::FORMAT,
    &super::tracelab::FORMAT,
    &super::dag::FORMAT,
    &super::messages::FORMAT,
    &super::bailian::FORMAT,
    &super::mooncake::FORMAT,
    &super::generic::FORMAT,
    &super::burstgpt::FORMAT,
    &super::azure::FORMAT,
];

/// The format a handle stands for.
pub(crate) fn format_of(f: TraceFormat) -> &'static Format {
    ALL.iter()
        .find(|g| std::ptr::eq(&g.info, f.info()))
        .or_else(|| ALL.iter().find(|g| g.info.name == f.name()))
        .copied()
        .unwrap_or(&super::generic::FORMAT)
}

/// The format of rows whose format was never recognised (an input without rows).
pub(crate) fn fallback() -> TraceFormat {
    super::generic::FORMAT.handle()
}

/// Every format a `--dataset` can name, in recognition order.
pub fn all() -> impl Iterator<Item = TraceFormat> {
    ALL.iter().filter(|f| listed(f)).map(|f| f.handle())
}

/// Whether a format is named on its own (a variant recognised only inside another's file is
/// not).
fn listed(f: &Format) -> bool {
    !f.info.name.is_empty()
}

/// The `--dataset` names, comma-separated (for `--help` and errors).
pub fn names() -> String {
    all().map(|f| f.name()).collect::<Vec<_>>().join(", ")
}

impl TraceFormat {
    /// Parses a `--dataset` name or alias (case-insensitive).
    pub fn from_name(name: &str) -> Option<TraceFormat> {
        let name = name.trim();
        ALL.iter()
            .filter(|f| listed(f))
            .find(|f| {
                f.info.name.eq_ignore_ascii_case(name)
                    || f.info.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
            })
            .map(|f| f.handle())
    }
}

impl<'de> serde::Deserialize<'de> for TraceFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TraceFormat, D::Error> {
        let name = String::deserialize(d)?;
        TraceFormat::from_name(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown trace format {name:?} (known: {})",
                names()
            ))
        })
    }
}

/// The format of a probe: the first of [`ALL`] that recognises it, or why none does.
pub(crate) fn recognise(probe: &Probe<'_>) -> Result<&'static Format, RowError> {
    if let Some(f) = ALL.iter().find(|f| (f.recognise)(probe)) {
        return Ok(f);
    }
    Err(RowError::Undetectable(match probe.line {
        Some(t) if t.starts_with('{') => {
            let e = super::fields::parse_json::<Map<String, Value>>(t)
                .err()
                .map_or_else(|| "not an object".to_owned(), |e| e.to_string());
            format!("the first data line looks like JSON but does not parse ({e})")
        }
        Some(t) if t.starts_with('[') => {
            "the first data line is a JSON array, not one object per line (JSONL)".into()
        }
        Some(t) => {
            let head: String = t.chars().take(40).collect();
            format!("the first data line ({head:?}) is neither a JSON object nor a CSV header")
        }
        None => "no data line".into(),
    }))
}

/// Detects the format from the first non-blank line of a file (see [`ALL`] for the order).
pub fn detect_format(first_line: &str) -> Result<TraceFormat, RowError> {
    let line = first_line.trim_start_matches('\u{feff}').trim();
    let json = line
        .starts_with('{')
        .then(|| super::fields::parse_json::<Map<String, Value>>(line).ok())
        .flatten();
    let probe = Probe {
        dir: None,
        magic: line.as_bytes(),
        head: line.as_bytes(),
        line: Some(line),
        json: json.as_ref(),
    };
    recognise(&probe).map(|f| f.handle())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_resolve_to_their_format() {
        for f in all() {
            assert_eq!(TraceFormat::from_name(f.name()), Some(f));
            assert_eq!(
                TraceFormat::from_name(&f.name().to_ascii_uppercase()),
                Some(f)
            );
            for a in f.info().aliases {
                assert_eq!(TraceFormat::from_name(a), Some(f));
            }
        }
        assert_eq!(TraceFormat::from_name("sharegpt"), None);
        assert!(names().contains("servegen"), "{}", names());
        assert!(names().contains("parquet"), "{}", names());
    }

    #[test]
    fn every_format_has_one_entry_and_a_unique_name() {
        let mut seen = std::collections::HashSet::new();
        for f in all() {
            assert!(seen.insert(f.name()), "{} listed twice", f.name());
            assert!(f.default_block_size() >= 1);
            assert!(std::ptr::eq(format_of(f).info.name, f.name()));
        }
    }

    #[test]
    fn detects_each_format_from_its_first_line() {
        let d = |s| detect_format(s).unwrap().name();
        assert_eq!(d(r#"{"chat_id": 1, "hash_ids": [1]}"#), "bailian");
        assert_eq!(d(r#"{"timestamp": 0, "hash_ids": [1]}"#), "mooncake");
        assert_eq!(d(r#"{"timestamp": 0, "input_length": 5}"#), "generic");
        // Session fields matter: such a row is not plain Mooncake.
        assert_eq!(
            d(r#"{"session_id": "s1", "timestamp": 0, "hash_ids": [1]}"#),
            "generic"
        );
        assert_eq!(d(r#"{"timestamp": 0, "messages": []}"#), "messages");
        assert_eq!(d(r#"{"tools": []}"#), "messages");
        assert_eq!(
            d(
                r#"{"session_id": "s", "round_index": 0, "prefix_tokens": 5, "input_tokens_total": 9}"#
            ),
            "tracelab"
        );
        assert_eq!(
            d(r#"{"schema": "dynamo.request.trace.v1", "event_type": "request_end"}"#),
            "dynamo"
        );
        assert_eq!(
            d(r#"{"timestamp": 1, "event": {"schema": "dynamo.request.trace.v1"}}"#),
            "dynamo"
        );
        assert_eq!(
            d(r#"{"session_id": "root", "turns": [{"messages": []}]}"#),
            "dag_jsonl"
        );
        assert_eq!(
            d(r#"{"session_id": "s", "turns": [{"turn_id": "t", "llm_calls": []}]}"#),
            "copilot"
        );
        assert_eq!(d("TIMESTAMP,ContextTokens,GeneratedTokens"), "azure");
        assert_eq!(
            d("\u{feff}TIMESTAMP,ContextTokens,GeneratedTokens"),
            "azure"
        );
        assert_eq!(
            d("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"),
            "burstgpt"
        );
        assert_eq!(d("PAR1\u{15}\u{4}"), "parquet");
        for bad in ["hello", "[1,2]", "{\"a\": "] {
            assert!(detect_format(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serde_round_trip_by_name() {
        for f in all() {
            let j = serde_json::to_string(&f).unwrap();
            assert_eq!(j, format!("\"{}\"", f.name()));
            let back: TraceFormat = serde_json::from_str(&j).unwrap();
            assert_eq!(back, f);
        }
        assert!(serde_json::from_str::<TraceFormat>("\"nope\"").is_err());
    }
}
