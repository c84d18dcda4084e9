//! Format detection from the first data line (or, for a directory, its files).

use crate::trace::error::RowError;
use crate::trace::model::TraceFormat;

/// Only the keys detection looks at; everything else in the line is skipped.
#[derive(serde::Deserialize)]
struct Keys {
    #[serde(default)]
    chat_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    hash_ids: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    messages: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    tools: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    text_input: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    prompt_token_ids: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    session_id: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    prefix_tokens: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    round_index: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    turns: Option<serde_json::Value>,
    #[serde(default)]
    schema: Option<serde_json::Value>,
    #[serde(default)]
    event: Option<serde_json::Value>,
}

impl Keys {
    /// A Dynamo request trace record, bare or wrapped in `{"timestamp": ..., "event": {...}}`.
    fn is_dynamo(&self) -> bool {
        let is_v1 = |v: Option<&serde_json::Value>| {
            v.and_then(|s| s.as_str())
                .is_some_and(|s| s.starts_with("dynamo.request.trace."))
        };
        is_v1(self.schema.as_ref()) || is_v1(self.event.as_ref().and_then(|e| e.get("schema")))
    }
}

/// True when `path` is a ServeGen directory: it holds `chunk-<i>-trace.csv` files
/// (`servegen.rs`).
pub fn is_servegen_dir(path: &std::path::Path) -> bool {
    path.is_dir() && !super::servegen::trace_files(path).is_empty()
}

/// True when `path` is a Copilot partition: a directory (`date=YYYY-MM-DD`) holding
/// `shard-*.jsonl` or `shard-*.jsonl.gz` files (`copilot.rs`).
pub fn is_copilot_dir(path: &std::path::Path) -> bool {
    path.is_dir() && !copilot_shards(path).is_empty()
}

/// The shard files of a Copilot partition directory (`shard-*.jsonl`, `shard-*.jsonl.gz`), by
/// name.
pub(crate) fn copilot_shards(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("shard-") && (n.ends_with(".jsonl") || n.ends_with(".jsonl.gz"))
            })
        })
        .collect();
    files.sort();
    files
}

/// True when a first data line is a Copilot session: `session_id` and `turns` whose first turn
/// has `llm_calls`.
fn is_copilot_session(keys: &Keys) -> bool {
    keys.session_id.is_some()
        && keys
            .turns
            .as_ref()
            .and_then(|t| t.as_array())
            .and_then(|t| t.first())
            .is_some_and(|t| t.get("llm_calls").is_some())
}

/// Detects the format from the first non-blank line of a file:
/// a `schema` `dynamo.request.trace.*` (bare or in `event`) is a Dynamo request trace, one with
/// `prefix_tokens` and `round_index` is TraceLab, one with `session_id` and `turns` whose first
/// turn has `llm_calls` is Copilot, any other with `turns` is AIPerf `dag_jsonl`;
/// a JSON object with `messages` (or `tools`, or a literal `text_input` prompt) is a messages trace, one with `chat_id` is Bailian,
/// one with `hash_ids` (and no `session_id`) is Mooncake, any other JSON object is Generic (so
/// a row with `hash_ids` and `session_id` keeps its sessions); a CSV header naming
/// `Request tokens` is BurstGPT; any other line that is not JSON but has a comma (a CSV header)
/// is Azure.
pub fn detect_format(first_line: &str) -> Result<TraceFormat, RowError> {
    let t = first_line.trim_start_matches('\u{feff}').trim();
    if t.starts_with('{') {
        let keys: Keys = super::fields::parse_json(t).map_err(|e| {
            RowError::Undetectable(format!(
                "the first data line looks like JSON but does not parse ({e})"
            ))
        })?;
        return Ok(if keys.is_dynamo() {
            TraceFormat::Dynamo
        } else if keys.prefix_tokens.is_some() && keys.round_index.is_some() {
            TraceFormat::Tracelab
        } else if is_copilot_session(&keys) {
            TraceFormat::Copilot
        } else if keys.turns.is_some() {
            TraceFormat::Dag
        } else if keys.messages.is_some()
            || keys.tools.is_some()
            || keys.text_input.is_some()
            || keys.prompt_token_ids.is_some()
        {
            TraceFormat::Messages
        } else if keys.chat_id.is_some() {
            TraceFormat::Bailian
        } else if keys.hash_ids.is_some() && keys.session_id.is_none() {
            TraceFormat::Mooncake
        } else {
            TraceFormat::Generic
        });
    }
    if t.starts_with('[') {
        return Err(RowError::Undetectable(
            "the first data line is a JSON array, not one object per line (JSONL)".into(),
        ));
    }
    if super::burstgpt::is_header(t) {
        return Ok(TraceFormat::BurstGpt);
    }
    if t.contains(',') || t.to_ascii_uppercase().contains("TIMESTAMP") {
        return Ok(TraceFormat::Azure);
    }
    let head: String = t.chars().take(40).collect();
    Err(RowError::Undetectable(format!(
        "the first data line ({head:?}) is neither a JSON object nor a CSV header"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_each_format() {
        let d = |s| detect_format(s).unwrap();
        assert_eq!(
            d(r#"{"chat_id": 1, "hash_ids": [1]}"#),
            TraceFormat::Bailian
        );
        assert_eq!(
            d(r#"{"timestamp": 0, "hash_ids": [1]}"#),
            TraceFormat::Mooncake
        );
        assert_eq!(
            d(r#"{"timestamp": 0, "input_length": 5}"#),
            TraceFormat::Generic
        );
        // Session fields matter: such a row is not plain Mooncake.
        assert_eq!(
            d(r#"{"session_id": "s1", "timestamp": 0, "hash_ids": [1]}"#),
            TraceFormat::Generic
        );
        assert_eq!(
            d(r#"{"timestamp": 0, "messages": []}"#),
            TraceFormat::Messages
        );
        assert_eq!(d(r#"{"tools": []}"#), TraceFormat::Messages);
        assert_eq!(
            d(
                r#"{"session_id": "s", "round_index": 0, "prefix_tokens": 5, "input_tokens_total": 9}"#
            ),
            TraceFormat::Tracelab
        );
        assert_eq!(
            d(r#"{"schema": "dynamo.request.trace.v1", "event_type": "request_end"}"#),
            TraceFormat::Dynamo
        );
        assert_eq!(
            d(r#"{"timestamp": 1, "event": {"schema": "dynamo.request.trace.v1"}}"#),
            TraceFormat::Dynamo
        );
        assert_eq!(
            d(r#"{"session_id": "root", "turns": [{"messages": []}]}"#),
            TraceFormat::Dag
        );
        assert_eq!(
            d(r#"{"session_id": "s", "turns": [{"turn_id": "t", "llm_calls": []}]}"#),
            TraceFormat::Copilot
        );
        assert_eq!(
            d("TIMESTAMP,ContextTokens,GeneratedTokens"),
            TraceFormat::Azure
        );
        assert_eq!(
            d("\u{feff}TIMESTAMP,ContextTokens,GeneratedTokens"),
            TraceFormat::Azure
        );
        assert_eq!(
            d("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"),
            TraceFormat::BurstGpt
        );
        assert!(detect_format("hello").is_err());
        assert!(detect_format("[1,2]").is_err());
        assert!(detect_format("{\"a\": ").is_err());
    }
}
