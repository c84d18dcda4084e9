//! `messages` JSONL (AIPerf style): every row carries a whole OpenAI chat request.
//!
//! `{"session_id": "s1", "timestamp": 0, "messages": [{"role": "user", "content": "Hello"}],
//!   "tools": [...], "output_length": 50, "extra": {"temperature": 0}}`
//!
//! - `messages` (required): an OpenAI chat array; each item an object with `role` one of
//!   system/developer/user/assistant/tool, `content` a string, an array of content parts
//!   (objects with a string `type`) or `null`; optional `tool_calls` (array of objects) and
//!   `tool_call_id` (string, required for `tool` messages).
//! - `tools` (optional): OpenAI tool definitions (array of objects); only valid with `messages`.
//! - `session_id` (optional, string or integer): rows with the same id are the turns of one
//!   session, in time order.
//! - `timestamp` (ms) or `delay` (ms after the previous turn of the same session; needs
//!   `session_id` and an earlier turn). One of them is required.
//! - `output_length` (optional): sent as the token budget; absent = the server decides.
//! - A recorded thinking length (`reasoning_tokens`, `reasoning_length`,
//!   `usage.completion_tokens_details.reasoning_tokens`, ...) and a thinking budget
//!   (`thinking_token_budget`, `thinking.budget_tokens`): `reasoning_fields.rs`.
//! - `extra` (optional object): merged into the request body as given.
//! - `input_length` / `text_input` are refused: a `messages` row is sent as given.
//! - A row with `text_input` (a string) instead of `messages` is AIPerf's literal prompt: sent
//!   as the chat content or completions prompt, like a synthetic prompt (`--save-prompts`
//!   writes such rows for completions endpoints). `text` (AIPerf's `single_turn` rows) is the
//!   same when the row has no `text_input`.
//! - A row with `prompt_token_ids` (an array of token ids) is a literal completions prompt of
//!   token ids (`--save-prompts` with `--token-ids` writes such rows).
//!
//! Rows are checked with hand-written walks over `serde_json::Value` (not typed structs) because
//! the payload must be kept verbatim for the request body while every bad field still gets a
//! message naming its JSON path.

use serde_json::{Map, Value};

use super::fields;
use super::unit::{Format, Reader};
use crate::trace::error::RowError;
use crate::trace::model::ChatPayload;
use crate::trace::model::{FormatInfo, SessionSource, Timestamps};
use crate::trace::row::RawRow;

const ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

fn bad(field: impl Into<String>, what: impl Into<String>) -> RowError {
    RowError::Field {
        field: field.into(),
        what: what.into(),
    }
}

fn non_negative_ms(field: &str, v: &Value) -> Result<f64, RowError> {
    let x = v.as_f64().ok_or_else(|| {
        bad(
            field,
            format!(
                "expected a number of milliseconds, found {}",
                fields::describe_value(v)
            ),
        )
    })?;
    let ms = fields::check_timestamp(x, "ms", 1.0).map_err(|w| bad(field, w))?;
    if ms < 0.0 {
        return Err(bad(
            field,
            format!("must be >= 0, found {}", fields::short_num(x)),
        ));
    }
    Ok(ms)
}

/// An `image_url` part (`docs/images.md`): its URL must be a `data:` URL (the image is in the
/// row; nothing is fetched). A base64 PNG or JPEG is counted by the image rule; another one
/// leaves the row's intended length unknown (the server's count is kept).
fn check_image_part(path: &str, p: &Value) -> Result<(), RowError> {
    let url = match p.get("image_url") {
        Some(Value::String(u)) => Some(u.as_str()),
        Some(v) => v.get("url").and_then(Value::as_str),
        None => None,
    };
    let field = format!("{path}.image_url.url");
    let Some(url) = url else {
        return Err(bad(&field, "an image_url part needs a URL"));
    };
    if !url.starts_with("data:") {
        return Err(bad(
            &field,
            format!(
                "expected a data: URL (request-sim sends images inline and counts their tokens), found {}",
                fields::quote_short(url)
            ),
        ));
    }
    Ok(())
}

fn check_content(path: &str, v: &Value, role: &str) -> Result<(), RowError> {
    match v {
        Value::String(_) => Ok(()),
        Value::Null if role == "assistant" => Ok(()),
        Value::Array(parts) => {
            for (k, p) in parts.iter().enumerate() {
                let pp = format!("{path}[{k}]");
                let obj = p.as_object().ok_or_else(|| {
                    bad(
                        &pp,
                        format!(
                            "expected a content part object, found {}",
                            fields::describe_value(p)
                        ),
                    )
                })?;
                match obj.get("type") {
                    Some(Value::String(t)) if t == "image_url" => check_image_part(&pp, p)?,
                    Some(Value::String(_)) => {}
                    Some(t) => {
                        return Err(bad(
                            format!("{pp}.type"),
                            format!("expected a string, found {}", fields::describe_value(t)),
                        ))
                    }
                    None => return Err(bad(&pp, "a content part needs a `type`")),
                }
            }
            Ok(())
        }
        other => Err(bad(
            path,
            format!(
                "expected a string or an array of content parts{}, found {}",
                if role == "assistant" { " or null" } else { "" },
                fields::describe_value(other)
            ),
        )),
    }
}

pub(crate) fn check_messages(v: &Value) -> Result<(), RowError> {
    let items = v.as_array().ok_or_else(|| {
        bad(
            "messages",
            format!(
                "expected an array of chat messages, found {}",
                fields::describe_value(v)
            ),
        )
    })?;
    if items.is_empty() {
        return Err(bad("messages", "must hold at least one message"));
    }
    for (i, m) in items.iter().enumerate() {
        let path = format!("messages[{i}]");
        let obj = m.as_object().ok_or_else(|| {
            bad(
                &path,
                format!("expected an object, found {}", fields::describe_value(m)),
            )
        })?;
        let role = match obj.get("role") {
            Some(Value::String(r)) if ROLES.contains(&r.as_str()) => r.as_str(),
            Some(Value::String(r)) => {
                return Err(bad(
                    format!("{path}.role"),
                    format!(
                        "expected one of {}, found {}",
                        ROLES.join("/"),
                        fields::quote_short(r)
                    ),
                ))
            }
            Some(other) => {
                return Err(bad(
                    format!("{path}.role"),
                    format!("expected a string, found {}", fields::describe_value(other)),
                ))
            }
            None => return Err(bad(&path, "missing `role`")),
        };
        match obj.get("content") {
            Some(c) => check_content(&format!("{path}.content"), c, role)?,
            None if role == "assistant" && obj.contains_key("tool_calls") => {}
            None => return Err(bad(&path, "missing `content`")),
        }
        if let Some(tc) = obj.get("tool_calls") {
            let calls = tc.as_array().ok_or_else(|| {
                bad(
                    format!("{path}.tool_calls"),
                    format!("expected an array, found {}", fields::describe_value(tc)),
                )
            })?;
            if role != "assistant" {
                return Err(bad(
                    format!("{path}.tool_calls"),
                    format!("only assistant messages carry tool calls, this one is {role}"),
                ));
            }
            for (k, c) in calls.iter().enumerate() {
                if !c.is_object() {
                    return Err(bad(
                        format!("{path}.tool_calls[{k}]"),
                        format!("expected an object, found {}", fields::describe_value(c)),
                    ));
                }
            }
        }
        match obj.get("tool_call_id") {
            Some(Value::String(_)) => {}
            Some(other) => {
                return Err(bad(
                    format!("{path}.tool_call_id"),
                    format!("expected a string, found {}", fields::describe_value(other)),
                ))
            }
            None if role == "tool" => {
                return Err(bad(&path, "a tool message needs `tool_call_id`"))
            }
            None => {}
        }
    }
    Ok(())
}

/// A `prompt_token_ids` value: a non-empty array of token ids.
fn prompt_token_ids(v: &Value) -> Result<Vec<u32>, RowError> {
    let ids = v.as_array().filter(|a| !a.is_empty()).and_then(|a| {
        a.iter()
            .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
            .collect::<Option<Vec<u32>>>()
    });
    ids.ok_or_else(|| {
        bad(
            "prompt_token_ids",
            format!(
                "expected a non-empty array of token ids (integers), found {}",
                fields::describe_value(v)
            ),
        )
    })
}

/// Parses one non-blank line of a `messages` trace: the prompt (messages, literal text or
/// token ids), tools, extra body fields, session and timing, output length.
pub(crate) fn parse_line(text: &str) -> Result<RawRow, RowError> {
    let mut row: Map<String, Value> = fields::from_json_line(text)?;
    let prompt = take_prompt(&mut row)?;
    let tools = take_tools(&mut row)?;
    let extra = take_extra(&mut row)?;
    let timing = timing(&row)?;
    let output_length = output_length(&row)?;
    let reasoning = super::reasoning_fields::reasoning(&row, output_length)?;
    Ok(RawRow {
        model: None,
        timestamp_ms: timing.timestamp_ms.unwrap_or(f64::NAN),
        input_length: 0,
        output_length: output_length.unwrap_or(0),
        hash_ids: None,
        session: None,
        turn_given: false,
        session_id: timing.session_id,
        delay_ms: timing.delay_ms,
        chat: Some(Box::new(ChatPayload {
            messages: prompt.messages,
            tools,
            extra,
            max_tokens: output_length,
            text_input: prompt.text_input,
            prompt_token_ids: prompt.token_ids,
        })),
        reasoning,
        images: None,
    })
}

/// What a row sends as its prompt: a chat (`messages`), or AIPerf's literal `text_input`, or
/// `prompt_token_ids` (then `messages` is null).
struct Prompt {
    messages: Value,
    text_input: Option<String>,
    token_ids: Option<Vec<u32>>,
}

/// Takes the prompt fields out of `row`; one of them is required, `messages` is checked, and
/// `input_length` is refused.
fn take_prompt(row: &mut Map<String, Value>) -> Result<Prompt, RowError> {
    // AIPerf's `single_turn` rows name the literal prompt `text`.
    if !row.contains_key("text_input") {
        if let Some(t) = row.remove("text") {
            row.insert("text_input".into(), t);
        }
    }
    let text_input = match row.remove("text_input") {
        None => None,
        Some(Value::String(t)) if !row.contains_key("messages") => Some(t),
        Some(Value::String(_)) => {
            return Err(bad(
                "text_input",
                "cannot be combined with `messages` (a messages row is sent as given)",
            ))
        }
        Some(other) => {
            return Err(bad(
                "text_input",
                format!(
                    "expected a string (the prompt), found {}",
                    fields::describe_value(&other)
                ),
            ))
        }
    };
    let token_ids = match row.remove("prompt_token_ids") {
        None => None,
        Some(v) if text_input.is_none() && !row.contains_key("messages") => {
            Some(prompt_token_ids(&v)?)
        }
        Some(_) => {
            return Err(bad(
                "prompt_token_ids",
                "cannot be combined with `messages` or `text_input`",
            ))
        }
    };
    let messages = match row.remove("messages") {
        Some(m) => m,
        None if (text_input.is_some() || token_ids.is_some()) && !row.contains_key("tools") => {
            Value::Null
        }
        None if row.contains_key("tools") => {
            return Err(bad(
                "tools",
                "is only valid with `messages` (this row has none)",
            ))
        }
        None => {
            return Err(RowError::Json(
                "missing field `messages` (a messages trace row is an OpenAI chat request)".into(),
            ))
        }
    };
    for refused in ["input_length"] {
        if row.contains_key(refused) {
            return Err(bad(
                refused,
                "cannot be combined with `messages` (a messages row is sent as given)",
            ));
        }
    }
    if text_input.is_none() && token_ids.is_none() {
        check_messages(&messages)?;
    }
    Ok(Prompt {
        messages,
        text_input,
        token_ids,
    })
}

/// Takes `tools` out of `row`: an array of tool definition objects.
pub(crate) fn take_tools(row: &mut Map<String, Value>) -> Result<Option<Value>, RowError> {
    match row.remove("tools") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(t)) => {
            if let Some((k, x)) = t.iter().enumerate().find(|(_, x)| !x.is_object()) {
                return Err(bad(
                    format!("tools[{k}]"),
                    format!(
                        "expected a tool definition object, found {}",
                        fields::describe_value(x)
                    ),
                ));
            }
            Ok(Some(Value::Array(t)))
        }
        Some(other) => Err(bad(
            "tools",
            format!(
                "expected an array of tool definitions, found {}",
                fields::describe_value(&other)
            ),
        )),
    }
}

/// Takes `extra` out of `row`: an object merged into the request body.
pub(crate) fn take_extra(
    row: &mut Map<String, Value>,
) -> Result<Option<Map<String, Value>>, RowError> {
    match row.remove("extra") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(e)) => Ok(Some(e)),
        Some(other) => Err(bad(
            "extra",
            format!(
                "expected an object, found {}",
                fields::describe_value(&other)
            ),
        )),
    }
}

/// When a row is sent: its session, `timestamp` and `delay` (ms).
struct Timing {
    session_id: Option<String>,
    timestamp_ms: Option<f64>,
    delay_ms: Option<f64>,
}

/// The row's session and timing; a `timestamp` or a `delay` (with a `session_id`) is required.
fn timing(row: &Map<String, Value>) -> Result<Timing, RowError> {
    let session = match row.get("session_id") {
        None | Some(Value::Null) => None,
        Some(v) => Some(fields::session_id(v)?),
    };
    let timestamp = match row.get("timestamp") {
        None | Some(Value::Null) => None,
        Some(v) => Some(non_negative_ms("timestamp", v)?),
    };
    let delay = match row.get("delay") {
        None | Some(Value::Null) => None,
        Some(v) => Some(non_negative_ms("delay", v)?),
    };
    if delay.is_some() && session.is_none() {
        return Err(bad(
            "delay",
            "needs a `session_id` (it counts from the previous turn of the session)",
        ));
    }
    if timestamp.is_none() && delay.is_none() {
        return Err(RowError::Json(
            "missing field `timestamp` (ms) or `delay` (ms after the previous turn)".into(),
        ));
    }
    Ok(Timing {
        session_id: session,
        timestamp_ms: timestamp,
        delay_ms: delay,
    })
}

/// The row's `output_length`, the token budget sent (absent: the server decides).
fn output_length(row: &Map<String, Value>) -> Result<Option<u32>, RowError> {
    let Some(v) = row.get("output_length").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let n = v.as_u64().ok_or_else(|| {
        bad(
            "output_length",
            format!(
                "expected a non-negative integer, found {}",
                fields::describe_value(v)
            ),
        )
    })?;
    let n = fields::check_length(n, 0).map_err(|w| bad("output_length", w))?;
    Ok(Some(n))
}

/// Messages: a row with `messages`, `tools`, a literal `text_input` or `prompt_token_ids`.
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo {
        sessions: SessionSource::Ids,
        sends_rows_as_written: true,
        has_delays: true,
        ..FormatInfo::rows(
            "messages",
            512,
            Timestamps::Millis,
            "AIPerf-style JSONL: a whole OpenAI chat request per row (messages, tools, output_length), sent as written",
        )
    },
    recognise: |p| {
        ["messages", "tools", "text_input", "prompt_token_ids"]
            .iter()
            .any(|k| p.has(k))
    },
    read: Reader::Lines(parse_line),
};

#[cfg(test)]
mod tests {
    use super::*;

    fn err(line: &str) -> String {
        parse_line(line).unwrap_err().to_string()
    }

    #[test]
    fn keeps_the_payload() {
        let r = parse_line(r#"{"session_id": 7, "timestamp": 5, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "tools": [{"type": "function", "function": {"name": "f"}}], "output_length": 3, "extra": {"temperature": 0}}"#).unwrap();
        assert_eq!(r.session_id.as_deref(), Some("7"));
        assert_eq!(r.timestamp_ms, 5.0);
        let c = r.chat.unwrap();
        assert_eq!(c.max_tokens, Some(3));
        assert_eq!(c.messages[0]["content"][0]["text"], "hi");
        assert_eq!(c.tools.unwrap()[0]["function"]["name"], "f");
        assert_eq!(c.extra.unwrap()["temperature"], 0);
    }

    #[test]
    fn bad_rows_are_named() {
        assert_eq!(
            err(r#"{"timestamp": 0, "tools": []}"#),
            "field `tools`: is only valid with `messages` (this row has none)"
        );
        assert_eq!(
            err(r#"{"timestamp": 0, "input_length": 4, "messages": [{"role": "user", "content": "x"}]}"#),
            "field `input_length`: cannot be combined with `messages` (a messages row is sent as given)"
        );
        assert_eq!(
            err(r#"{"delay": 10, "messages": [{"role": "user", "content": "x"}]}"#),
            "field `delay`: needs a `session_id` (it counts from the previous turn of the session)"
        );
        assert_eq!(
            err(r#"{"timestamp": 0, "messages": [{"role": "user", "content": 5}]}"#),
            "field `messages[0].content`: expected a string or an array of content parts, found the number 5"
        );
        assert_eq!(
            err(r#"{"timestamp": 0, "messages": [{"role": "bot", "content": "x"}]}"#),
            "field `messages[0].role`: expected one of system/developer/user/assistant/tool, found \"bot\""
        );
        assert_eq!(
            err(r#"{"timestamp": 0, "messages": [{"role": "tool", "content": "x"}]}"#),
            "field `messages[0]`: a tool message needs `tool_call_id`"
        );
        assert_eq!(
            err(r#"{"timestamp": 0, "messages": "hello"}"#),
            "field `messages`: expected an array of chat messages, found the string \"hello\""
        );
        assert_eq!(
            err(r#"{"timestamp": 0, "messages": [{"role": "user", "content": "x"}], "tools": {}}"#),
            "field `tools`: expected an array of tool definitions, found an object"
        );
        assert!(err(r#"{"messages": [{"role": "user", "content": "x"}]}"#).contains("`timestamp`"));
    }
}

#[cfg(test)]
mod reasoning_tests {
    use super::*;
    use crate::trace::model::Reasoning;

    #[test]
    fn a_row_carries_its_thinking_length_and_budget() {
        let r = parse_line(r#"{"timestamp": 0, "messages": [{"role": "user", "content": "x"}], "output_length": 900, "usage": {"completion_tokens_details": {"reasoning_tokens": 700}}, "thinking_token_budget": 1024}"#).unwrap();
        assert_eq!(r.output_length, 900);
        assert_eq!(
            r.reasoning,
            Reasoning {
                tokens: Some(700),
                budget: Some(1024)
            }
        );
        let e = parse_line(r#"{"timestamp": 0, "messages": [{"role": "user", "content": "x"}], "output_length": 9, "reasoning_tokens": 10}"#).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "field `reasoning_tokens`: 10 thinking tokens exceed the row's output_length 9"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_bad_thinking_length_is_reported_at_its_line() {
        let text = "{\"timestamp\": 0, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"output_length\": 4}\n\
                    {\"timestamp\": 1, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"output_length\": 4, \"reasoning_tokens\": 5}\n";
        let opts = crate::trace::LoadOptions::default();
        let e = crate::trace::parse_reader("r.jsonl", text.as_bytes(), &opts).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("r.jsonl:2: field `reasoning_tokens`: 5 thinking tokens exceed"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod token_id_tests {
    use super::*;

    #[test]
    fn prompt_token_ids_rows_are_literal_prompts() {
        let r =
            parse_line(r#"{"timestamp": 5, "prompt_token_ids": [1, 2, 3], "output_length": 4}"#)
                .unwrap();
        let c = r.chat.unwrap();
        assert_eq!(c.prompt_token_ids.as_deref(), Some(&[1u32, 2, 3][..]));
        assert!(c.is_literal() && c.messages.is_null());
        for bad in [
            r#"{"timestamp": 0, "prompt_token_ids": []}"#,
            r#"{"timestamp": 0, "prompt_token_ids": [1, -2]}"#,
            r#"{"timestamp": 0, "prompt_token_ids": "1 2"}"#,
            r#"{"timestamp": 0, "prompt_token_ids": [1], "text_input": "x"}"#,
        ] {
            let e = parse_line(bad).err().unwrap().to_string();
            assert!(e.contains("prompt_token_ids"), "{bad}: {e}");
        }
    }
}
