//! The OpenAI Responses API (`POST /v1/responses`): the request's `instructions` and `input`
//! rendered as chat messages (so the prompt goes through the same chat template, engine and
//! prefix cache as a chat completion), and the response in the Responses shapes: the
//! `response` object, or the typed event stream (`response.created`, `response.in_progress`,
//! then per output item — a `reasoning` item while the model thinks, then a `message` or a
//! `function_call` item — `response.output_item.added`, `response.content_part.added` (not
//! for a call), one delta event per token (`response.reasoning_text.delta`,
//! `response.output_text.delta`, `response.function_call_arguments.delta`), its `.done`
//! event(s) and `response.output_item.done`; finally `response.completed`), each event with
//! an `event:` line and a `sequence_number`. Its error object is in `error.rs` with the other
//! APIs'.

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{bad, ApiError};
use super::http::Api;
use super::job::{chat_like_job, parse, ChatLike, Job};
use super::meta::Meta;
use super::turn::{Kind, Parts};
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
    tool_choice: Option<Value>,
    /// `{"effort": ..}`: accepted; the thinking share is `--reasoning-share` whatever it says.
    #[serde(default)]
    #[allow(dead_code)]
    reasoning: Option<Value>,
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
            tool_choice: req.tool_choice,
            thinking_budget: None,
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

/// An output item's id: `prefix` (`msg`, `rs`, `fc`) and the response id's first hex digits.
fn item_id(meta: &Meta, prefix: &str) -> String {
    let hex = meta.id.strip_prefix("resp_").unwrap_or(&meta.id);
    format!("{prefix}_{}", &hex[..hex.len().min(16)])
}

/// The id of the item of token kind `kind`.
fn kind_item_id(meta: &Meta, kind: Kind) -> String {
    match kind {
        Kind::Thinking => item_id(meta, "rs"),
        Kind::Text => item_id(meta, "msg"),
        Kind::Tool => item_id(meta, "fc"),
    }
}

fn usage(meta: &Meta, n: u32, cached: u32) -> Value {
    json!({"input_tokens": meta.prompt_tokens,
           "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0,
               "input_tokens_per_turn": [], "cached_tokens_per_turn": []},
           "output_tokens": n, "output_tokens_details": {
               "reasoning_tokens": meta.reasoning.min(n),
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
    json!({"id": item_id(meta, "msg"), "type": "message", "status": status, "role": "assistant",
           "content": content, "phase": null})
}

/// A `reasoning` item (vLLM 0.32's keys): no content while it streams.
fn reasoning_item(meta: &Meta, status: Value, text: Option<&str>) -> Value {
    let content = match text {
        Some(t) => json!([{"text": t, "type": "reasoning_text"}]),
        None => Value::Null,
    };
    json!({"id": item_id(meta, "rs"), "summary": [], "type": "reasoning", "content": content,
           "encrypted_content": null, "status": status})
}

/// A `function_call` item with its arguments so far.
fn call_item(meta: &Meta, status: &str, args: &str) -> Value {
    let name = meta.tool.as_ref().map(|t| t.name.as_str()).unwrap_or("");
    json!({"arguments": args, "call_id": meta.call_id(), "name": name, "type": "function_call",
           "id": item_id(meta, "fc"), "namespace": null, "status": status})
}

/// The output items of a finished answer: its reasoning (status `completed` when it was
/// streamed, null in one body, as vLLM 0.32), then its message or its function call.
fn output_items(meta: &Meta, parts: &Parts, streamed: bool) -> Value {
    let mut out = Vec::new();
    if !parts.thinking.is_empty() {
        let status = if streamed {
            json!("completed")
        } else {
            Value::Null
        };
        out.push(reasoning_item(meta, status, Some(&parts.thinking)));
    }
    if let Some(args) = &parts.args {
        out.push(call_item(meta, "completed", args));
    } else if !parts.text.is_empty() {
        out.push(message_item(
            meta,
            "completed",
            vec![text_part(&parts.text, true)],
        ));
    }
    Value::Array(out)
}

/// The `response` object; `output` and `usage` absent while in progress (`done` None).
fn response_json(meta: &Meta, model: &str, done: Option<(Value, u32, u32)>) -> Value {
    let (status, incomplete) = match (&done, meta.finish) {
        (None, _) => ("in_progress", Value::Null),
        (Some(_), "length") => ("incomplete", json!({"reason": "max_output_tokens"})),
        (Some(_), _) => ("completed", Value::Null),
    };
    let finished = done.is_some();
    let (output, usage) = match done {
        None => (json!([]), Value::Null),
        Some((output, n, cached)) => (output, usage(meta, n, cached)),
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
    if finished && meta.plan.missing_usage {
        if let Some(o) = v.as_object_mut() {
            o.remove("usage");
        }
    }
    v
}

/// The non-streaming answer: the finished `response` object.
pub(super) fn response_object(
    meta: &Meta,
    model: &str,
    parts: &Parts,
    n: u32,
    cached: u32,
) -> Value {
    response_json(
        meta,
        model,
        Some((output_items(meta, parts, false), n, cached)),
    )
}

fn write_event(buf: &mut BytesMut, name: &str, seq: &mut u32, mut data: Value) {
    if let Some(o) = data.as_object_mut() {
        o.insert("type".into(), json!(name));
        o.insert("sequence_number".into(), json!(*seq));
    }
    *seq += 1;
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    // Straight into the stream's buffer (no String in between); a Value always serialises.
    let _ = serde_json::to_writer((&mut *buf).writer(), &data);
    buf.extend_from_slice(b"\n\n");
}

/// `response.created` and `response.in_progress` (sequence numbers 0 and 1), sent when the
/// request is accepted.
pub(super) fn write_head(meta: &Meta, model: &str, buf: &mut BytesMut) {
    let r = response_json(meta, model, None);
    let mut seq = 0;
    write_event(buf, "response.created", &mut seq, json!({"response": r}));
    write_event(
        buf,
        "response.in_progress",
        &mut seq,
        json!({"response": r}),
    );
}

/// The sequence number of the first event after the head.
pub(super) const FIRST_SEQ: u32 = 2;

/// The events opening the output item of token kind `kind`, with its first token: a
/// reasoning item and its `reasoning_text` part, a message and its `output_text` part, or a
/// function call (no part). Returns everything of the item's delta events before the text.
pub(super) fn open_segment(meta: &Meta, kind: Kind, seq: &mut u32, buf: &mut BytesMut) -> String {
    let index = meta.output_index(kind);
    let id = kind_item_id(meta, kind);
    let (item, part) = match kind {
        Kind::Thinking => (
            reasoning_item(meta, json!("in_progress"), None),
            Some(json!({"text": "", "type": "reasoning_text"})),
        ),
        Kind::Text => (
            message_item(meta, "in_progress", vec![]),
            Some(text_part("", false)),
        ),
        Kind::Tool => (call_item(meta, "in_progress", ""), None),
    };
    let added = json!({"output_index": index, "item": item});
    write_event(buf, "response.output_item.added", seq, added);
    if let Some(part) = part {
        let ids = json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
        write_event(buf, "response.content_part.added", seq, ids);
    }
    let name = match kind {
        Kind::Thinking => "response.reasoning_text.delta",
        Kind::Text => "response.output_text.delta",
        Kind::Tool => "response.function_call_arguments.delta",
    };
    let content_index = if kind == Kind::Tool {
        ""
    } else {
        ",\"content_index\":0"
    };
    format!(
        "event: {name}\ndata: {{\"type\":\"{name}\",\"item_id\":\"{id}\",\"output_index\":{index}{content_index},\"delta\":\""
    )
}

/// Everything of a delta event of token kind `kind` after its text.
pub(super) fn end_delta(kind: Kind, seq: &mut u32, buf: &mut BytesMut) {
    if kind == Kind::Text {
        buf.extend_from_slice(b"\",\"logprobs\":[],\"sequence_number\":");
    } else {
        buf.extend_from_slice(b"\",\"sequence_number\":");
    }
    // Written in place: this runs once per token of every Responses stream.
    let _ = write!(buf, "{}", *seq);
    *seq += 1;
    buf.extend_from_slice(b"}\n\n");
}

/// The events closing the output item of token kind `kind` whose text (or arguments) is
/// `text`: its `.done` event(s), `response.content_part.done` (not for a function call) and
/// `response.output_item.done`.
pub(super) fn close_segment(
    meta: &Meta,
    kind: Kind,
    text: &str,
    seq: &mut u32,
    buf: &mut BytesMut,
) {
    let index = meta.output_index(kind);
    let id = kind_item_id(meta, kind);
    let ids = json!({"item_id": id, "output_index": index, "content_index": 0});
    let (part, item) = match kind {
        Kind::Thinking => {
            let mut done = ids.clone();
            done["text"] = json!(text);
            write_event(buf, "response.reasoning_text.done", seq, done);
            let part = json!({"text": text, "type": "reasoning_text"});
            (part, reasoning_item(meta, json!("completed"), Some(text)))
        }
        Kind::Text => {
            let mut done = ids.clone();
            done["text"] = json!(text);
            done["logprobs"] = json!([]);
            write_event(buf, "response.output_text.done", seq, done);
            let part = text_part(text, true);
            (part.clone(), message_item(meta, "completed", vec![part]))
        }
        Kind::Tool => {
            // A call of its opening token only streamed no fragment: its arguments are `{}`.
            let text = if text.is_empty() { "{}" } else { text };
            let name = meta.tool.as_ref().map(|t| t.name.as_str()).unwrap_or("");
            let done = json!({"item_id": id, "output_index": index, "arguments": text,
                "name": name});
            write_event(buf, "response.function_call_arguments.done", seq, done);
            (Value::Null, call_item(meta, "completed", text))
        }
    };
    if !part.is_null() {
        let mut p = ids;
        p["part"] = part;
        write_event(buf, "response.content_part.done", seq, p);
    }
    let done = json!({"output_index": index, "item": item});
    write_event(buf, "response.output_item.done", seq, done);
}

/// `response.completed` after `n` tokens (`parts`), carrying the output items and the usage
/// (status `incomplete` with `incomplete_details.reason` `max_output_tokens` when the length
/// limit ended it).
pub(super) fn write_completed(
    meta: &Meta,
    model: &str,
    parts: &Parts,
    (n, cached): (u32, u32),
    seq: &mut u32,
    buf: &mut BytesMut,
) {
    let r = response_json(
        meta,
        model,
        Some((output_items(meta, parts, true), n, cached)),
    );
    write_event(buf, "response.completed", seq, json!({"response": r}));
}
