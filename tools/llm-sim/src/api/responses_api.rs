//! The OpenAI Responses API (`POST /v1/responses`): the request's `instructions` and `input`
//! rendered as chat messages (so the prompt goes through the same chat template, engine and
//! prefix cache as a chat completion), and the response in the Responses shapes: the
//! `response` object, or the typed event stream (`response.created`, `response.in_progress`,
//! `response.output_item.added`, `response.content_part.added`, `response.output_text.delta`
//! per token, `response.output_text.done`, `response.content_part.done`,
//! `response.output_item.done`, `response.completed`), each event with an `event:` line and a
//! `sequence_number`. Its error object is in `error.rs` with the other APIs'.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{bad, ApiError};
use super::http::Api;
use super::job::{chat_like_job, parse, ChatLike, Job};
use super::meta::Meta;
use crate::state::AppState;
use crate::tokenize::ChatMessage;

#[derive(Deserialize)]
struct ResponsesRequest {
    #[serde(default)]
    model: Option<String>,
    input: Input,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    max_output_tokens: Option<i64>,
    /// vLLM's extensions, as on the chat route.
    #[serde(default)]
    min_tokens: Option<i64>,
    #[serde(default)]
    ignore_eos: Option<bool>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    Text(String),
    Items(Vec<Value>),
}

/// Parses and validates a Responses request into a job.
pub(super) fn job(state: &AppState, body: &[u8]) -> Result<Job, ApiError> {
    let api = Api::Responses;
    let req: ResponsesRequest = parse(api, body)?;
    let mut messages = Vec::new();
    if let Some(text) = req.instructions {
        messages.push(ChatMessage::text("system", text));
    }
    match req.input {
        Input::Text(t) => messages.push(ChatMessage::text("user", t)),
        Input::Items(items) => {
            for (i, item) in items.iter().enumerate() {
                add_item(&mut messages, item).map_err(|e| bad(api, format!("input[{i}]: {e}")))?;
            }
        }
    }
    let tools = req.tools.map(|list| {
        Value::Array(
            list.iter()
                .filter(|t| t.get("type").and_then(Value::as_str) == Some("function"))
                .map(chat_tool)
                .collect(),
        )
    });
    chat_like_job(
        state,
        ChatLike {
            api,
            model: req.model,
            user: req.user,
            messages,
            tools,
            max_tokens: req.max_output_tokens,
            min_tokens: req.min_tokens,
            ignore_eos: req.ignore_eos,
            stream: req.stream.unwrap_or(false),
        },
    )
}

/// A function tool in the chat completions shape (the Responses shape is flat).
fn chat_tool(t: &Value) -> Value {
    json!({"type": "function", "function": {
        "name": t.get("name").cloned().unwrap_or(Value::Null),
        "description": t.get("description").cloned().unwrap_or(Value::Null),
        "parameters": t.get("parameters").cloned().unwrap_or(Value::Null)}})
}

fn str_field<'a>(item: &'a Value, key: &str) -> Result<&'a str, String> {
    item.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{key}` must be a string"))
}

/// Appends one input item as chat messages: a message (`role`, text or `input_text` /
/// `output_text` parts joined by newlines), a `function_call` (an assistant tool call, merged
/// into the assistant message just before it), a `function_call_output` (a tool message);
/// `reasoning` items are dropped.
fn add_item(messages: &mut Vec<ChatMessage>, item: &Value) -> Result<(), String> {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    match kind {
        "message" => {
            let role = str_field(item, "role")?;
            let content = item_text(item.get("content"))?;
            messages.push(ChatMessage::text(role, content));
        }
        "function_call" => {
            let call = json!({"id": str_field(item, "call_id")?, "type": "function",
                "function": {"name": str_field(item, "name")?,
                             "arguments": str_field(item, "arguments")?}});
            match messages.last_mut() {
                Some(m) if m.role == "assistant" => match &mut m.tool_calls {
                    Some(Value::Array(calls)) => calls.push(call),
                    _ => m.tool_calls = Some(Value::Array(vec![call])),
                },
                _ => messages.push(ChatMessage {
                    role: "assistant".into(),
                    tool_calls: Some(Value::Array(vec![call])),
                    ..ChatMessage::default()
                }),
            }
        }
        "function_call_output" => {
            let id = str_field(item, "call_id")?;
            let content = item_text(item.get("output"))?;
            messages.push(ChatMessage {
                role: "tool".into(),
                content,
                tool_call_id: Some(id.to_string()),
                ..ChatMessage::default()
            });
        }
        "reasoning" => {}
        other => {
            return Err(format!(
                "llm-sim does not accept input items of type `{other}`"
            ))
        }
    }
    Ok(())
}

/// A message's or a tool output's text: a string, or text parts joined by newlines.
fn item_text(content: Option<&Value>) -> Result<String, String> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for p in parts {
                let kind = p.get("type").and_then(Value::as_str).unwrap_or("");
                if !matches!(kind, "input_text" | "output_text" | "text") {
                    return Err(format!(
                        "llm-sim accepts only text content parts, got `{kind}`"
                    ));
                }
                texts.push(str_field(p, "text")?);
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err("`content` must be a string or a list of parts".into()),
    }
}

/// The output message item's id (from the response's id).
fn item_id(meta: &Meta) -> String {
    let hex = meta.id.strip_prefix("resp_").unwrap_or(&meta.id);
    format!("msg_{}", &hex[..hex.len().min(16)])
}

fn usage(meta: &Meta, n: u32, cached: u32) -> Value {
    json!({"input_tokens": meta.prompt_tokens,
           "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0,
               "input_tokens_per_turn": [], "cached_tokens_per_turn": []},
           "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0,
               "tool_output_tokens": 0, "output_tokens_per_turn": [],
               "tool_output_tokens_per_turn": []},
           "total_tokens": meta.prompt_tokens + n})
}

/// An `output_text` part: `logprobs` `[]` while it streams, null once done (as vLLM 0.32).
fn text_part(text: &str, done: bool) -> Value {
    let logprobs = if done { Value::Null } else { json!([]) };
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs})
}

fn message_item(meta: &Meta, status: &str, content: Vec<Value>) -> Value {
    json!({"id": item_id(meta), "type": "message", "status": status, "role": "assistant",
           "content": content, "phase": null})
}

/// The `response` object; `output` and `usage` absent while in progress (`text` None).
fn response_json(meta: &Meta, model: &str, done: Option<(&str, u32, u32)>) -> Value {
    let (status, incomplete) = match (done, meta.finish) {
        (None, _) => ("in_progress", Value::Null),
        (Some(_), "length") => ("incomplete", json!({"reason": "max_output_tokens"})),
        (Some(_), _) => ("completed", Value::Null),
    };
    let (output, usage) = match done {
        None => (json!([]), Value::Null),
        Some((text, n, cached)) => (
            json!([message_item(meta, "completed", vec![text_part(text, true)])]),
            usage(meta, n, cached),
        ),
    };
    // vLLM 0.32's keys, its nulls and request echoes included (no `error` key).
    let mut v = json!({"id": meta.id, "object": "response", "created_at": meta.created,
        "status": status, "incomplete_details": incomplete, "instructions": null,
        "metadata": null, "model": model, "output": output, "parallel_tool_calls": true,
        "temperature": 1.0, "tool_choice": "none", "tools": [], "top_p": 1.0,
        "background": false, "max_output_tokens": meta.max_tokens, "max_tool_calls": null,
        "previous_response_id": null, "prompt": null, "reasoning": null,
        "service_tier": "auto", "text": null, "top_logprobs": null, "truncation": "disabled",
        "usage": usage, "user": null, "presence_penalty": 0.0, "frequency_penalty": 0.0,
        "kv_transfer_params": null, "ec_transfer_params": null, "input_messages": null,
        "output_messages": null});
    if done.is_some() && meta.plan.missing_usage {
        if let Some(o) = v.as_object_mut() {
            o.remove("usage");
        }
    }
    v
}

/// The non-streaming answer: the finished `response` object.
pub(super) fn response_object(meta: &Meta, model: &str, text: &str, n: u32, cached: u32) -> Value {
    response_json(meta, model, Some((text, n, cached)))
}

fn write_event(buf: &mut BytesMut, name: &str, seq: u32, mut data: Value) {
    if let Some(o) = data.as_object_mut() {
        o.insert("type".into(), json!(name));
        o.insert("sequence_number".into(), json!(seq));
    }
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    // Straight into the stream's buffer (no String in between); a Value always serialises.
    let _ = serde_json::to_writer((&mut *buf).writer(), &data);
    buf.extend_from_slice(b"\n\n");
}

/// Sequence numbers: 0 and 1 the head, 2 and 3 the item and part added, then one per token.
const FIRST_DELTA_SEQ: u32 = 4;

/// `response.created` and `response.in_progress`, sent when the request is accepted.
pub(super) fn write_head(meta: &Meta, model: &str, buf: &mut BytesMut) {
    let r = response_json(meta, model, None);
    write_event(buf, "response.created", 0, json!({"response": r}));
    write_event(buf, "response.in_progress", 1, json!({"response": r}));
}

/// `response.output_item.added` and `response.content_part.added`, with the first token.
pub(super) fn write_first(meta: &Meta, buf: &mut BytesMut) {
    let id = item_id(meta);
    write_event(
        buf,
        "response.output_item.added",
        2,
        json!({"output_index": 0, "item": message_item(meta, "in_progress", vec![])}),
    );
    write_event(
        buf,
        "response.content_part.added",
        3,
        json!({"item_id": id, "output_index": 0, "content_index": 0, "part": text_part("", false)}),
    );
}

/// Everything of a `response.output_text.delta` event before the token's text.
pub(super) fn delta_prefix(meta: &Meta) -> String {
    format!(
        "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"item_id\":\"{}\",\"output_index\":0,\"content_index\":0,\"delta\":\"",
        item_id(meta)
    )
}

/// Everything of token `i`'s delta event after its text.
pub(super) fn end_delta(i: u32, buf: &mut BytesMut) {
    buf.extend_from_slice(b"\",\"logprobs\":[],\"sequence_number\":");
    // Written in place: this runs once per token of every Responses stream.
    let _ = write!(buf, "{}", FIRST_DELTA_SEQ + i);
    buf.extend_from_slice(b"}\n\n");
}

/// The closing events after `n` tokens of `text`, ending with `response.completed` (status
/// `incomplete` with `incomplete_details.reason` `max_output_tokens` when the length limit
/// ended it) carrying the usage.
pub(super) fn write_tail(
    meta: &Meta,
    model: &str,
    text: &str,
    n: u32,
    cached: u32,
    buf: &mut BytesMut,
) {
    let id = item_id(meta);
    let seq = FIRST_DELTA_SEQ + n;
    let ids = json!({"item_id": id, "output_index": 0, "content_index": 0});
    let mut done = ids.clone();
    done["text"] = json!(text);
    done["logprobs"] = json!([]);
    write_event(buf, "response.output_text.done", seq, done);
    let mut part = ids;
    part["part"] = text_part(text, true);
    write_event(buf, "response.content_part.done", seq + 1, part);
    write_event(
        buf,
        "response.output_item.done",
        seq + 2,
        json!({"output_index": 0, "item": message_item(meta, "completed", vec![text_part(text, true)])}),
    );
    let r = response_json(meta, model, Some((text, n, cached)));
    write_event(buf, "response.completed", seq + 3, json!({"response": r}));
}
