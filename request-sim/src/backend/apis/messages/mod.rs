//! Anthropic's Messages API (`--api messages`, `/v1/messages`; vLLM, SGLang, llama.cpp's
//! server, Anthropic), whole: the request bodies (a synthetic prompt, a `messages` row converted
//! to Anthropic's shape by [`convert`]), the thinking budget it carries, the
//! session id as `metadata.user_id`, the `anthropic-version` header, its typed event stream and
//! non-streaming answer read into the [`ResponseState`], its usage and errors, and its
//! calibration fact.
//!
//! Reading: every `content_block_delta` is token-bearing (content when its `text`, `thinking`
//! or `partial_json` is not empty); `message_start`, `content_block_start`, `ping` carry no
//! token. Usage comes from `message_start.message.usage` and then `message_delta.usage` (each
//! field it carries replaces the earlier one): the prompt is `input_tokens +
//! cache_read_input_tokens + cache_creation_input_tokens`, the cached tokens
//! `cache_read_input_tokens`. The stream ends with `message_stop`; an `error` event (also sent
//! as `event: error`) is an error in the stream. A `data: [DONE]` is ignored (some servers add
//! it); an event without a `type`, or anything after `message_stop`, is a protocol error.

pub mod convert;

use std::borrow::Cow;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::backend::state::{
    append_text, expect_string, is_empty_string, malformed_body, malformed_event, non_empty,
    string_bytes, truncate, AnthropicUsage, Carried, ProtocolError, ResponseState,
};

use crate::backend::api::{ApiKind, Calibration};
use crate::backend::body::{BodyParams, RowBody};

/// The endpoint's path.
pub const PATH: &str = "/v1/messages";

/// The `anthropic-version` header sent to the Messages API.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The prompt overhead is measured by a calibration request to the API itself (the servers
/// render it through the chat template, but the API may add its own around it).
pub const CALIBRATION: Calibration = Calibration::ApiRequest;

/// What an answer that ends early lacks.
pub const STREAM_END: &str = "stream ended without message_stop";

/// `max_tokens` of a Messages request from a `messages` row without `output_length` (the
/// field is required by Anthropic's API).
pub const MESSAGES_DEFAULT_MAX_TOKENS: u32 = 4096;

/// The smallest `thinking.budget_tokens` a Messages request may carry.
pub const MESSAGES_MIN_THINKING_BUDGET: u32 = 1024;

/// The `budget_tokens` a Messages request with `max_tokens` can carry for `budget`: `None`
/// unless `1024 <= budget < max_tokens` (vLLM's Anthropic endpoint, like Anthropic's API,
/// refuses other budgets).
pub fn messages_thinking_budget(budget: u32, max_tokens: u32) -> Option<u32> {
    (MESSAGES_MIN_THINKING_BUDGET..max_tokens)
        .contains(&budget)
        .then_some(budget)
}

/// The thinking budget field of a Messages request with `max_tokens`: Anthropic's
/// `thinking: {"type": "enabled", "budget_tokens": B}`, when [`messages_thinking_budget`]
/// allows it.
pub fn thinking_field(budget: u32, max_tokens: u32) -> Option<(&'static str, serde_json::Value)> {
    messages_thinking_budget(budget, max_tokens).map(|b| {
        (
            "thinking",
            serde_json::json!({"type": "enabled", "budget_tokens": b}),
        )
    })
}

/// The field that carries a session id (`--session-user`): Anthropic's `metadata.user_id`.
pub fn session_user_field(user: &str) -> (&'static str, serde_json::Value) {
    ("metadata", serde_json::json!({ "user_id": user }))
}

/// The endpoint an `--endpoint` path names with `--api messages` (a base URL or `/v1`: the
/// API's path, set in `url`).
pub fn kind_of_path(url: &mut reqwest::Url, path: &str) -> Result<ApiKind, String> {
    super::single_path(url, path, (PATH, "messages", "Messages"))?;
    Ok(ApiKind::Messages)
}

/// A synthetic chat message (`content` first, as a `messages` row's objects serialise).
#[derive(Serialize)]
struct Message<'a> {
    content: &'a str,
    role: &'static str,
}

/// An Anthropic Messages body with a synthetic prompt.
#[derive(Serialize)]
struct MessagesBody<'a> {
    model: &'a str,
    messages: [Message<'a>; 1],
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ignore_eos: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<serde_json::Value>,
    stream: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// The thinking field for a row's `thinking` budget, unless `--thinking-budget off`.
fn thinking_to_send(
    params: &BodyParams,
    thinking: Option<u32>,
    max_tokens: u32,
) -> Option<(&'static str, serde_json::Value)> {
    crate::backend::thinking::budget_to_send(params.thinking, thinking)
        .and_then(|b| thinking_field(b, max_tokens))
}

/// The body of a synthetic prompt `text` (not cleared first).
pub fn encode_body(
    params: &BodyParams,
    text: &str,
    max_tokens: u32,
    thinking: Option<u32>,
    out: &mut Vec<u8>,
) {
    let exact = params.exact_output;
    let body = MessagesBody {
        model: &params.model,
        messages: [Message {
            role: "user",
            content: text,
        }],
        max_tokens,
        min_tokens: exact.then_some(max_tokens),
        ignore_eos: exact.then_some(true),
        thinking: thinking_to_send(params, thinking, max_tokens).map(|(_, v)| v),
        stream: params.stream,
        extra: params.extra.as_ref(),
    };
    // Serialising into a Vec cannot fail for these types (no maps with non-string keys).
    let r = serde_json::to_writer(&mut *out, &body);
    debug_assert!(r.is_ok());
}

/// Serialise the body of a `messages` trace row into `out` (cleared by the caller): the row
/// converted to Anthropic's shape ([`convert::to_anthropic`]: the system
/// message as `system`, tool calls and results as blocks, tools as Anthropic's), the token
/// budget as `max_tokens` (always there: [`MESSAGES_DEFAULT_MAX_TOKENS`] when the row gives
/// none), the thinking budget, the session id as `metadata.user_id`, then `--extra-body` and
/// the row's `extra` as for chat.
pub fn encode_row_body(
    params: &BodyParams,
    chat: &crate::trace::ChatPayload,
    (thinking, session_user): (Option<u32>, Option<&str>),
    out: &mut Vec<u8>,
) {
    use serde_json::Value;
    let mut body = RowBody::new(params);
    let (system, messages) = convert::to_anthropic(&chat.messages);
    if let Some(sys) = system {
        body.own("system", sys);
    }
    body.own("messages", messages);
    if let Some(t) = &chat.tools {
        body.own("tools", convert::anthropic_tools(t));
    }
    // Servers reject a budget of 0: a row with output_length 0 asks for one token.
    match chat.max_tokens.map(|n| n.max(1)) {
        Some(n) => body.budget(params, "max_tokens", n),
        None => body.own("max_tokens", Value::from(MESSAGES_DEFAULT_MAX_TOKENS)),
    }
    let max_tokens = chat
        .max_tokens
        .map_or(MESSAGES_DEFAULT_MAX_TOKENS, |n| n.max(1));
    if let Some((k, v)) = thinking_to_send(params, thinking, max_tokens) {
        body.own(k, v);
    }
    body.own("stream", Value::from(params.stream));
    body.tail(params, session_user.map(session_user_field), chat);
    body.write(out, None);
}

/// `{"type": .., "message": ..}` of an Anthropic error.
#[derive(Deserialize)]
struct AnthropicError {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

impl AnthropicError {
    fn text(&self) -> String {
        let msg = truncate(self.message.as_deref().unwrap_or(""), 512);
        match &self.kind {
            Some(k) => format!("{}: {msg}", truncate(k, 64)),
            None => msg,
        }
    }
}

#[derive(Deserialize)]
struct AnthropicDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    #[serde(borrow)]
    thinking: Option<&'a RawValue>,
    #[serde(borrow)]
    partial_json: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct AnthropicBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    #[serde(borrow)]
    thinking: Option<&'a RawValue>,
    /// A `tool_use` block's arguments (an object).
    #[serde(borrow)]
    input: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct AnthropicMessage {
    usage: Option<AnthropicUsage>,
}

/// One Anthropic event, or a whole non-streaming answer (`type: message`).
#[derive(Deserialize)]
struct AnthropicEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    message: Option<AnthropicMessage>,
    #[serde(borrow)]
    delta: Option<AnthropicDelta<'a>>,
    #[serde(borrow)]
    content_block: Option<AnthropicBlock<'a>>,
    usage: Option<AnthropicUsage>,
    error: Option<AnthropicError>,
    // A non-streaming answer's blocks.
    #[serde(borrow, default)]
    content: Option<Vec<AnthropicBlock<'a>>>,
}

impl ResponseState {
    /// One SSE payload of a streaming Messages answer.
    pub(crate) fn on_messages_event(
        &mut self,
        data: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            return Ok(());
        }
        let ev: AnthropicEvent<'_> =
            serde_json::from_slice(data).map_err(|e| malformed_event(e, data))?;
        // An error object without the `type: error` around it is an error all the same.
        let kind = ev.kind.as_deref().or(ev.error.as_ref().map(|_| "error"));
        let kind = self.event_kind("Messages", kind, data, "message_stop")?;
        match kind {
            "error" => {
                let text = ev
                    .error
                    .map_or_else(|| "no message".to_string(), |e| e.text());
                return Err(ProtocolError(format!("error in stream: {text}")));
            }
            "message_start" => {
                if let Some(u) = ev.message.and_then(|m| m.usage) {
                    self.add_anthropic_usage(u);
                }
            }
            "content_block_start" => {
                // The opening block is normally empty; text in it is the first content.
                // A tool_use block's start carries the tool's name: a token event.
                if let Some(b) = ev.content_block {
                    let tool = b.kind.as_deref() == Some("tool_use");
                    if tool {
                        self.tool_calls += 1;
                    }
                    let carried = Carried {
                        reasoning: non_empty(b.thinking),
                        answer: non_empty(b.text),
                        tool,
                    };
                    if carried.any() {
                        self.token_at(now, carried);
                        self.append_answer(b.text);
                    }
                }
            }
            "content_block_delta" => {
                let d = ev.delta;
                if let Some(d) = &d {
                    expect_string(d.text, "a `content_block_delta`'s `text`", data)?;
                    expect_string(d.thinking, "a `content_block_delta`'s `thinking`", data)?;
                    expect_string(
                        d.partial_json,
                        "an `input_json_delta`'s `partial_json`",
                        data,
                    )?;
                }
                // A thinking block's closing `signature_delta` carries no token.
                if d.as_ref().and_then(|d| d.kind.as_deref()) == Some("signature_delta") {
                    return Ok(());
                }
                let carried = d.as_ref().map_or(Carried::NOTHING, |d| Carried {
                    reasoning: non_empty(d.thinking),
                    answer: non_empty(d.text),
                    tool: non_empty(d.partial_json),
                });
                self.tool_arg_bytes += string_bytes(d.as_ref().and_then(|d| d.partial_json));
                // Empty text: a token of that kind whose bytes the server held back.
                let held = d.as_ref().filter(|_| !carried.any()).map(|d| Carried {
                    reasoning: is_empty_string(d.thinking),
                    answer: is_empty_string(d.text),
                    tool: is_empty_string(d.partial_json),
                });
                match held.filter(|h| h.any()) {
                    Some(h) => self.token_event(now, h, false),
                    None => self.token_at(now, carried),
                }
                self.append_answer(d.and_then(|d| d.text));
            }
            "message_delta" => {
                if let Some(u) = ev.usage {
                    self.add_anthropic_usage(u);
                }
            }
            "message_stop" => self.end(now),
            _ => {}
        }
        Ok(())
    }

    /// A whole non-streaming Messages answer.
    pub(crate) fn on_messages_body(
        &mut self,
        body: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        let m: AnthropicEvent<'_> =
            serde_json::from_slice(body).map_err(|e| malformed_body(e, body))?;
        if m.kind.as_deref() == Some("error") || m.error.is_some() {
            let text = m
                .error
                .map_or_else(|| "no message".to_string(), |e| e.text());
            return Err(ProtocolError(format!("error in response: {text}")));
        }
        let Some(blocks) = m.content else {
            return Err(ProtocolError("response has no content".into()));
        };
        let mut carried = Carried::NOTHING;
        for b in &blocks {
            match b.kind.as_deref() {
                Some("text") => {
                    carried.answer |= non_empty(b.text);
                    self.append_answer(b.text);
                }
                Some("thinking") => carried.reasoning |= non_empty(b.thinking),
                Some("tool_use") => {
                    carried.tool = true;
                    self.tool_calls += 1;
                    self.tool_arg_bytes += b.input.map_or(0, |i| i.get().len() as u64);
                }
                _ => {}
            }
        }
        self.token_at(now, carried);
        if let Some(u) = m.usage {
            self.add_anthropic_usage(u);
        }
        self.end(now);
        Ok(())
    }

    fn add_anthropic_usage(&mut self, u: AnthropicUsage) {
        self.anthropic.merge(u);
        self.usage = Some(self.anthropic.usage());
    }

    fn append_answer(&mut self, text: Option<&RawValue>) {
        if let Some(a) = &mut self.answer {
            append_text(a, text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::state::{feed_events, Usage};
    use std::time::Duration;

    fn feed(kind: ApiKind, events: &[&str]) -> (ResponseState, Result<(), ProtocolError>) {
        feed_events(ResponseState::collecting(), kind, events)
    }

    /// As Anthropic documents a streamed answer (with a cache hit).
    pub(crate) const MESSAGES: &[&str] = &[
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"cache_creation_input_tokens":2,"cache_read_input_tokens":20,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"ping"}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":3}}"#,
        r#"{"type":"message_stop"}"#,
    ];

    #[test]
    fn messages_stream_ttft_from_the_first_delta_and_usage_summed() {
        let (st, r) = feed(ApiKind::Messages, MESSAGES);
        r.unwrap();
        let t0 = st.first_token.unwrap();
        // message_start, content_block_start and ping (events 1..3) carry no token.
        assert_eq!(st.first_token, st.first_content);
        // The tool_use block's start (its name) is a token event too.
        assert_eq!(st.chunks, 4);
        assert_eq!(st.content_chunks, 4);
        assert_eq!(st.itl_ms, vec![10.0, 20.0, 10.0]);
        assert_eq!((st.answer_chunks, st.tool_chunks, st.tool_calls), (2, 2, 1));
        assert_eq!(st.tool_arg_bytes, 7);
        assert_eq!(st.first_tool.unwrap() - t0, Duration::from_millis(30));
        assert_eq!(st.last_token.unwrap() - t0, Duration::from_millis(40));
        assert!(st.finished);
        assert_eq!(st.done.unwrap() - t0, Duration::from_millis(70));
        assert_eq!(
            st.usage,
            Some(Usage {
                prompt_tokens: Some(25),
                completion_tokens: Some(3),
                cached_tokens: Some(20),
                reasoning_tokens: None,
                image_tokens: None,
            })
        );
        assert_eq!(st.answer.as_deref(), Some("Hello there"));
        // message_delta carrying cumulative input usage replaces message_start's.
        let delta =
            r#"{"type":"message_delta","delta":{},"usage":{"input_tokens":4,"output_tokens":2}}"#;
        let (st, r) = feed(
            ApiKind::Messages,
            &[MESSAGES[0], MESSAGES[3], delta, MESSAGES[10]],
        );
        r.unwrap();
        assert_eq!(st.usage.unwrap().prompt_tokens, Some(26));
        assert_eq!(st.usage.unwrap().completion_tokens, Some(2));
    }

    /// llama.cpp's streamed Messages answer as its server writes it (`event:` lines, usage with
    /// `cache_read_input_tokens` first), cut into network chunks every possible way: the usage
    /// is read whole from every cut. Without the `message_start` (llama.cpp leaves it out when
    /// its first token ends inside a UTF-8 character) the answer is still read, with its output
    /// tokens and no prompt: nothing in the stream says what the prompt was.
    #[test]
    fn llama_cpp_messages_stream_cut_anywhere() {
        let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"chatcmpl-x\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"cache_read_input_tokens\":0,\"input_tokens\":57,\"output_tokens\":0}}}\n\n";
        let rest = concat!(
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\\u4e2d\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" a\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":4}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let whole = format!("{start}{rest}");
        let b = whole.as_bytes();
        let read = |chunks: Vec<&[u8]>| {
            crate::backend::read_stream(ApiKind::Messages, chunks, Instant::now()).unwrap()
        };
        let want = Usage {
            prompt_tokens: Some(57),
            completion_tokens: Some(4),
            cached_tokens: Some(0),
            reasoning_tokens: None,
            image_tokens: None,
        };
        for cut in 0..=b.len() {
            let st = read(vec![&b[..cut], &b[cut..]]);
            assert_eq!(st.usage, Some(want), "cut at {cut}");
            assert_eq!(st.chunks, 2, "cut at {cut}");
        }
        for size in [1, 2, 3, 7, 13, 64, 1460] {
            let st = read(b.chunks(size).collect());
            assert_eq!(st.usage, Some(want), "chunks of {size}");
        }
        // Only cached tokens, the uncached count 0: the prompt is the cached tokens.
        let cached = whole.replace(
            "\"cache_read_input_tokens\":0,\"input_tokens\":57",
            "\"cache_read_input_tokens\":57,\"input_tokens\":0",
        );
        let st = read(vec![cached.as_bytes()]);
        assert_eq!(st.usage.unwrap().prompt_tokens, Some(57));
        assert_eq!(st.usage.unwrap().cached_tokens, Some(57));
        // A message_delta with null fields keeps message_start's.
        let nulls = whole.replace(
            "\"usage\":{\"output_tokens\":4}",
            "\"usage\":{\"input_tokens\":null,\"cache_read_input_tokens\":null,\"output_tokens\":4}",
        );
        assert_eq!(read(vec![nulls.as_bytes()]).usage, Some(want));
        // No message_start: an answer with output tokens and no prompt.
        let st = read(vec![rest.as_bytes()]);
        assert!(st.finished);
        assert_eq!(st.chunks, 2);
        assert_eq!(
            st.usage,
            Some(Usage {
                prompt_tokens: None,
                completion_tokens: Some(4),
                cached_tokens: None,
                reasoning_tokens: None,
                image_tokens: None,
            })
        );
    }

    /// vLLM 0.32's thinking block: a held-back token streams as empty text (a thinking event
    /// all the same) and the block closes with a `signature_delta`, which is no token.
    #[test]
    fn messages_empty_thinking_is_a_token_and_the_signature_is_none() {
        let ev = [
            MESSAGES[0],
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"a"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":2}}"#,
            r#"{"type":"message_stop"}"#,
        ];
        let (st, r) = feed(ApiKind::Messages, &ev);
        r.unwrap();
        assert_eq!(
            (st.chunks, st.reasoning_chunks, st.content_chunks),
            (2, 2, 1)
        );
        assert_eq!(st.itl_ms, vec![10.0]);
    }

    #[test]
    fn messages_errors_and_garbage() {
        let err = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let (st, r) = feed(ApiKind::Messages, &[MESSAGES[0], MESSAGES[3], err]);
        assert_eq!(
            r.unwrap_err().0,
            "error in stream: overloaded_error: Overloaded"
        );
        assert_eq!(st.chunks, 1);
        let bare = r#"{"error":{"type":"api_error","message":"boom"}}"#;
        let (_, r) = feed(ApiKind::Messages, &[bare]);
        assert_eq!(r.unwrap_err().0, "error in stream: api_error: boom");
        let (_, r) = feed(ApiKind::Responses, &[r#"{"error":{"message":"boom"}}"#]);
        assert_eq!(r.unwrap_err().0, "error in stream: boom");
        let (_, r) = feed(ApiKind::Messages, &[r#"{"index":0}"#]);
        assert!(r
            .unwrap_err()
            .0
            .starts_with("Messages event without a type"));
        let (_, r) = feed(ApiKind::Messages, &["{\"type\":"]);
        assert!(r.unwrap_err().0.starts_with("malformed SSE JSON"));
        let (_, r) = feed(ApiKind::Messages, &[MESSAGES[10], MESSAGES[3]]);
        assert_eq!(r.unwrap_err().0, "content_block_delta after message_stop");
        let (_, r) = feed(
            ApiKind::Messages,
            &[r#"{"type":"message_start","message":{"usage":{"input_tokens":-1}}}"#],
        );
        assert!(r.unwrap_err().0.starts_with("malformed SSE JSON"));
        // [DONE] after message_stop is tolerated.
        let mut evs = MESSAGES.to_vec();
        evs.push("[DONE]");
        feed(ApiKind::Messages, &evs).1.unwrap();
    }

    #[test]
    fn messages_body() {
        let now = Instant::now();
        let mut st = ResponseState::collecting();
        st.on_body(
            ApiKind::Messages,
            br#"{"id":"msg","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"},{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"max_tokens","usage":{"input_tokens":5,"cache_read_input_tokens":64,"cache_creation_input_tokens":0,"output_tokens":7}}"#,
            now,
        )
        .unwrap();
        assert_eq!((st.chunks, st.content_chunks), (1, 1));
        assert_eq!(
            st.usage,
            Some(Usage {
                prompt_tokens: Some(69),
                completion_tokens: Some(7),
                cached_tokens: Some(64),
                reasoning_tokens: None,
                image_tokens: None,
            })
        );
        assert_eq!(st.answer.as_deref(), Some("Hi"));
        let mut st = ResponseState::default();
        let e = st
            .on_body(
                ApiKind::Messages,
                br#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#,
                now,
            )
            .unwrap_err();
        assert_eq!(
            e.0,
            "error in response: invalid_request_error: max_tokens: Field required"
        );
        let e = st
            .on_body(ApiKind::Messages, br#"{"type":"message"}"#, now)
            .unwrap_err();
        assert_eq!(e.0, "response has no content");
    }
}
