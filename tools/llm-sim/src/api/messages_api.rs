//! The Anthropic Messages API (`POST /v1/messages`): `system` and `messages` (text,
//! `tool_use` and `tool_result` blocks) rendered as chat messages, as vLLM's Anthropic
//! endpoint converts them (so the prompt goes through the same chat template, engine and
//! prefix cache as a chat completion), and the answer in Anthropic's shapes: the `message`
//! object, or the event stream `message_start`, then per content block (`thinking` while the
//! model thinks, then `text` or `tool_use`) `content_block_start`, one `content_block_delta`
//! per token (`thinking_delta`, `text_delta`, `input_json_delta`; a thinking block's
//! `signature_delta` last) and `content_block_stop`; then `message_delta` and `message_stop`,
//! each with its `event:` line. Usage splits the prompt as a server with
//! automatic prefix caching reports it: `cache_read_input_tokens` the prefix-cache hit,
//! `input_tokens` the rest, `cache_creation_input_tokens` 0. Its error object is in `error.rs`
//! with the other APIs'.

use bytes::{BufMut, BytesMut};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{bad, ApiError};
use super::http::Api;
use super::job::{chat_like_job, check_model, parse, ChatLike, Job};
use super::meta::Meta;
use super::turn::{Kind, Parts};
use crate::state::AppState;
use crate::tokenize::ChatMessage;

#[derive(Deserialize)]
struct MessagesRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<InMessage>,
    #[serde(default)]
    system: Option<Content>,
    #[serde(default)]
    max_tokens: Option<i64>,
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
    /// `{"type":"enabled","budget_tokens":N}`: the model thinks for min(N, n) tokens;
    /// `{"type":"disabled"}`: it does not think; otherwise `--reasoning-share`.
    #[serde(default)]
    thinking: Option<Value>,
    #[serde(default)]
    metadata: Option<Value>,
}

#[derive(Deserialize)]
struct InMessage {
    role: String,
    content: Content,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

/// Parses and validates a Messages request into a job (`max_tokens` is required, as
/// Anthropic's API has it).
pub(super) fn job(state: &AppState, body: &[u8]) -> Result<Job, ApiError> {
    let req: MessagesRequest = parse(Api::Messages, body)?;
    if req.max_tokens.is_none() {
        return Err(bad(Api::Messages, "max_tokens: Field required"));
    }
    let budget = thinking_budget(req.thinking.as_ref(), req.max_tokens.unwrap_or(0))?;
    let mut c = chat_like(req)?;
    c.thinking_budget = budget;
    chat_like_job(state, c)
}

/// The thinking budget of Anthropic's `thinking`: `budget_tokens` (at least 1, and less than
/// `max_tokens` as vLLM checks; vLLM's floor of 1024 is not enforced) when enabled, 0 when
/// disabled, none (the share) otherwise.
fn thinking_budget(thinking: Option<&Value>, max_tokens: i64) -> Result<Option<u32>, ApiError> {
    let Some(t) = thinking else {
        return Ok(None);
    };
    match t.get("type").and_then(Value::as_str) {
        Some("enabled") => {
            let b = t.get("budget_tokens").and_then(Value::as_i64);
            match b {
                Some(b) if b < 1 => Err(bad(
                    Api::Messages,
                    format!("thinking.budget_tokens: must be at least 1, got {b}"),
                )),
                Some(b) if b >= max_tokens => Err(bad(
                    Api::Messages,
                    "thinking.budget_tokens must be less than max_tokens",
                )),
                Some(b) => Ok(Some(b as u32)),
                None => Err(bad(Api::Messages, "thinking.budget_tokens: Field required")),
            }
        }
        Some("disabled") => Ok(Some(0)),
        _ => Ok(None),
    }
}

/// `POST /v1/messages/count_tokens` (Anthropic's, as vLLM and SGLang serve it): the prompt
/// tokens the same request would have, `{"input_tokens": N}`.
pub(super) fn count_tokens(state: &AppState, body: &[u8]) -> Result<Value, ApiError> {
    let req: MessagesRequest = parse(Api::Messages, body)?;
    let c = chat_like(req)?;
    check_model(state, &c.model)?;
    if c.messages.is_empty() {
        return Err(bad(
            Api::Messages,
            "messages: at least one message is required",
        ));
    }
    let n = state
        .tokenizer
        .encode_chat_tools(&c.messages, c.tools.as_ref(), true)
        .map_err(|e| bad(Api::Messages, e))?
        .len();
    Ok(json!({ "input_tokens": n }))
}

/// The request as chat messages and tools.
fn chat_like(req: MessagesRequest) -> Result<ChatLike, ApiError> {
    let api = Api::Messages;
    let mut messages = Vec::new();
    if let Some(system) = req.system {
        let text = match system {
            Content::Text(t) => t,
            Content::Blocks(blocks) => {
                block_texts(&blocks).map_err(|e| bad(api, format!("system: {e}")))?
            }
        };
        messages.push(ChatMessage::text("system", text));
    }
    for (i, m) in req.messages.into_iter().enumerate() {
        add_message(&mut messages, m).map_err(|e| bad(api, format!("messages[{i}]: {e}")))?;
    }
    let tools = req
        .tools
        .map(|list| Value::Array(list.iter().map(chat_tool).collect()));
    let user = req
        .metadata
        .as_ref()
        .and_then(|m| m.get("user_id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(ChatLike {
        api,
        model: req.model,
        user,
        messages,
        tools,
        max_tokens: req.max_tokens,
        min_tokens: req.min_tokens,
        ignore_eos: req.ignore_eos,
        stream: req.stream.unwrap_or(false),
        tool_choice: req.tool_choice,
        thinking_budget: None,
    })
}

/// A tool in the chat completions shape (`input_schema` becomes `parameters`).
fn chat_tool(t: &Value) -> Value {
    json!({"type": "function", "function": {
        "name": t.get("name").cloned().unwrap_or(Value::Null),
        "description": t.get("description").cloned().unwrap_or(Value::Null),
        "parameters": t.get("input_schema").cloned().unwrap_or(Value::Null)}})
}

fn str_field<'a>(block: &'a Value, key: &str) -> Result<&'a str, String> {
    block
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{key}` must be a string"))
}

/// The texts of `text` blocks joined by newlines (other blocks refused).
fn block_texts(blocks: &[Value]) -> Result<String, String> {
    let mut texts = Vec::with_capacity(blocks.len());
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => texts.push(str_field(b, "text")?),
            other => {
                return Err(format!(
                    "expected text blocks, got `{}`",
                    other.unwrap_or("(no type)")
                ))
            }
        }
    }
    Ok(texts.join("\n"))
}

/// Appends one Anthropic message as chat messages: its text blocks joined by newlines,
/// `tool_use` blocks as the message's tool calls (arguments the input's JSON), each
/// `tool_result` as a tool message placed before the rest of the message; `thinking` blocks
/// are dropped.
fn add_message(messages: &mut Vec<ChatMessage>, m: InMessage) -> Result<(), String> {
    let blocks = match m.content {
        Content::Text(t) => {
            messages.push(ChatMessage::text(m.role, t));
            return Ok(());
        }
        Content::Blocks(b) => b,
    };
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for b in &blocks {
        match b.get("type").and_then(Value::as_str).unwrap_or("") {
            "text" => texts.push(str_field(b, "text")?),
            "tool_use" => calls.push(json!({"id": str_field(b, "id")?, "type": "function",
                "function": {"name": str_field(b, "name")?,
                             "arguments": b.get("input").unwrap_or(&json!({})).to_string()}})),
            "tool_result" => {
                let content = match b.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => block_texts(parts)?,
                    Some(_) => {
                        return Err("tool_result `content` must be a string or blocks".into())
                    }
                };
                messages.push(ChatMessage {
                    role: "tool".into(),
                    content,
                    tool_call_id: Some(str_field(b, "tool_use_id")?.to_string()),
                    ..ChatMessage::default()
                });
            }
            "thinking" | "redacted_thinking" => {}
            other => return Err(format!("llm-sim does not accept `{other}` content blocks")),
        }
    }
    if !texts.is_empty() || !calls.is_empty() {
        messages.push(ChatMessage {
            role: m.role,
            content: texts.join("\n"),
            tool_calls: (!calls.is_empty()).then_some(Value::Array(calls)),
            ..ChatMessage::default()
        });
    }
    Ok(())
}

fn stop_reason(meta: &Meta) -> &'static str {
    if meta.finish == "length" {
        "max_tokens"
    } else if meta.tool.is_some() {
        "tool_use"
    } else {
        "end_turn"
    }
}

/// A thinking block's signature (vLLM 0.32: a random uuid's 32 hex digits; here from the id).
fn signature(meta: &Meta) -> String {
    let hex = meta.id.strip_prefix("msg_").unwrap_or(&meta.id);
    format!("{:0<32}", &hex[..hex.len().min(32)])
}

fn tool_name(meta: &Meta) -> &str {
    meta.tool.as_ref().map(|t| t.name.as_str()).unwrap_or("")
}

/// The prompt split as Anthropic counts it: uncached input, cache reads, cache writes.
fn usage(meta: &Meta, n: u32, cached: u32) -> Value {
    json!({"input_tokens": meta.prompt_tokens.saturating_sub(cached),
           "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached,
           "output_tokens": n})
}

/// The non-streaming answer: the `message` object, its content a `thinking` block (with its
/// signature), then a `text` block (when there is text) or a `tool_use` block (its input the
/// arguments' JSON); a single empty text block when there is nothing, as vLLM 0.32.
pub(super) fn message_object(
    meta: &Meta,
    model: &str,
    parts: &Parts,
    n: u32,
    cached: u32,
) -> Value {
    let mut content = Vec::new();
    if !parts.thinking.is_empty() {
        content.push(json!({"type": "thinking", "thinking": parts.thinking,
            "signature": signature(meta)}));
    }
    if !parts.text.is_empty() {
        content.push(json!({"type": "text", "text": parts.text}));
    }
    if let Some(args) = &parts.args {
        let input: Value = serde_json::from_str(args).unwrap_or_else(|_| json!({}));
        content.push(
            json!({"type": "tool_use", "id": meta.call_id(), "name": tool_name(meta),
            "input": input}),
        );
    }
    if content.is_empty() {
        content.push(json!({"type": "text", "text": ""}));
    }
    json!({"id": meta.id, "type": "message", "role": "assistant", "model": model,
           "content": content, "stop_reason": stop_reason(meta),
           "usage": usage(meta, n, cached)})
}

fn write_event(buf: &mut BytesMut, name: &str, data: &Value) {
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    // Straight into the stream's buffer (no String in between); a Value always serialises.
    let _ = serde_json::to_writer((&mut *buf).writer(), data);
    buf.extend_from_slice(b"\n\n");
}

/// `message_start`, once the request is scheduled (its usage tells the cache hit).
pub(super) fn write_start(meta: &Meta, model: &str, cached: u32, buf: &mut BytesMut) {
    // vLLM 0.32: the whole prompt as `input_tokens` here, the split (uncached input, cache
    // reads) only in `message_delta`.
    let _ = cached;
    let mut message = json!({"id": meta.id, "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": meta.prompt_tokens, "output_tokens": 0}});
    if meta.plan.missing_usage {
        if let Some(o) = message.as_object_mut() {
            o.remove("usage");
        }
    }
    write_event(
        buf,
        "message_start",
        &json!({"type": "message_start", "message": message}),
    );
}

/// `content_block_start` of the block of token kind `kind`, with its first token (vLLM 0.32
/// sends no `ping`). Returns everything of the block's delta events before the text.
pub(super) fn open_segment(meta: &Meta, kind: Kind, buf: &mut BytesMut) -> String {
    let index = meta.output_index(kind);
    let (block, delta) = match kind {
        Kind::Thinking => (
            json!({"type": "thinking", "thinking": ""}),
            "thinking_delta\",\"thinking",
        ),
        Kind::Text => (json!({"type": "text", "text": ""}), "text_delta\",\"text"),
        Kind::Tool => (
            json!({"type": "tool_use", "id": meta.call_id(), "name": tool_name(meta), "input": {}}),
            "input_json_delta\",\"partial_json",
        ),
    };
    write_event(
        buf,
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": block}),
    );
    format!(
        "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{index},\"delta\":{{\"type\":\"{delta}\":\""
    )
}

/// Everything of a `content_block_delta` event after the token's text.
pub(super) const DELTA_SUFFIX: &[u8] = b"\"}}\n\n";

/// The events closing the block of token kind `kind`: a thinking block's `signature_delta`
/// (as vLLM 0.32), then `content_block_stop`.
pub(super) fn close_segment(meta: &Meta, kind: Kind, buf: &mut BytesMut) {
    let index = meta.output_index(kind);
    if kind == Kind::Thinking {
        write_event(
            buf,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "signature_delta", "signature": signature(meta)}}),
        );
    }
    write_event(
        buf,
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    );
}

/// `message_delta` (stop reason, usage with the output tokens) and `message_stop` after `n`
/// tokens.
pub(super) fn write_tail(meta: &Meta, n: u32, cached: u32, buf: &mut BytesMut) {
    let mut delta = json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason(meta), "stop_sequence": null},
        "usage": usage(meta, n, cached)});
    if meta.plan.missing_usage {
        if let Some(o) = delta.as_object_mut() {
            o.remove("usage");
        }
    }
    write_event(buf, "message_delta", &delta);
    write_event(buf, "message_stop", &json!({"type": "message_stop"}));
}
