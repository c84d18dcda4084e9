//! The typed event streams of the OpenAI Responses and Anthropic Messages APIs, and their
//! non-streaming bodies, read into the same [`ResponseState`] as chat completions.
//!
//! - **Responses**: every `response.*.delta` event (`response.output_text.delta`, reasoning,
//!   refusal, function-call arguments, …) is token-bearing; content when its `delta` is not
//!   empty. `response.created` / `response.in_progress` / `*.added` / `*.done` carry no token.
//!   The stream ends with `response.completed` or `response.incomplete` (the output budget ran
//!   out: a normal end for a replay), whose `response.usage` gives `input_tokens`,
//!   `output_tokens` and `input_tokens_details.cached_tokens`. `response.failed` and `error`
//!   events are errors in the stream.
//! - **Messages**: every `content_block_delta` is token-bearing (content when its `text`,
//!   `thinking` or `partial_json` is not empty); `message_start`, `content_block_start`, `ping`
//!   carry no token. Usage comes from `message_start.message.usage` and then
//!   `message_delta.usage` (each field it carries replaces the earlier one): the prompt is
//!   `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`, the cached tokens
//!   `cache_read_input_tokens`. The stream ends with `message_stop`; an `error` event (also sent
//!   as `event: error`) is an error in the stream.
//!
//! A `data: [DONE]` is ignored (some servers add it); an event without a `type`, or anything
//! after the final event, is a protocol error.

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::state::{
    append_text, error_text, expect_string, malformed_body, malformed_event, non_empty, truncate,
    AnthropicUsage, Carried, ProtocolError, ResponseState, Usage,
};

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

#[derive(Deserialize)]
struct ResponsesDetails {
    cached_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct ResponsesOutputDetails {
    reasoning_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct ResponsesUsage {
    input_tokens: Option<u32>,
    output_tokens: Option<u32>,
    input_tokens_details: Option<ResponsesDetails>,
    output_tokens_details: Option<ResponsesOutputDetails>,
}

impl From<ResponsesUsage> for Usage {
    fn from(u: ResponsesUsage) -> Usage {
        Usage {
            prompt_tokens: u.input_tokens,
            completion_tokens: u.output_tokens,
            cached_tokens: u.input_tokens_details.and_then(|d| d.cached_tokens),
            reasoning_tokens: u.output_tokens_details.and_then(|d| d.reasoning_tokens),
            image_tokens: None,
        }
    }
}

/// What a Responses `*.delta` event of type `kind` carries, when its delta is not empty:
/// reasoning (summary) text, function-call (or custom tool) arguments, else answer text.
fn responses_delta_carries(kind: &str, delta: Option<&RawValue>) -> Carried {
    if non_empty(delta) {
        responses_delta_kind(kind)
    } else {
        Carried::NOTHING
    }
}

/// What a Responses `*.delta` event of type `kind` carries by its name.
fn responses_delta_kind(kind: &str) -> Carried {
    if kind.contains("reasoning") {
        Carried::REASONING
    } else if kind.contains("arguments") || kind.contains("tool_call") {
        Carried::TOOL
    } else {
        Carried::ANSWER
    }
}

/// `raw` is the empty JSON string.
fn is_empty_string(raw: Option<&RawValue>) -> bool {
    raw.is_some_and(|r| r.get() == "\"\"")
}

/// The length in bytes of the JSON string `raw` once decoded (0 for anything else).
fn string_bytes(raw: Option<&RawValue>) -> u64 {
    raw.and_then(|r| serde_json::from_str::<Cow<'_, str>>(r.get()).ok())
        .map_or(0, |s| s.len() as u64)
}

#[derive(Deserialize)]
struct ResponsesPart<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ResponsesItem<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Vec<ResponsesPart<'a>>>,
    /// A `function_call` item's arguments.
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// The `response` object (of the final events, or a whole non-streaming answer).
#[derive(Deserialize)]
struct ResponsesObject<'a> {
    #[serde(borrow)]
    status: Option<Cow<'a, str>>,
    usage: Option<ResponsesUsage>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    output: Option<Vec<ResponsesItem<'a>>>,
}

#[derive(Deserialize)]
struct ResponsesEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    delta: Option<&'a RawValue>,
    #[serde(borrow)]
    response: Option<ResponsesObject<'a>>,
    /// The item of `response.output_item.added`.
    #[serde(borrow)]
    item: Option<ResponsesItem<'a>>,
    message: Option<String>,
    #[serde(borrow)]
    code: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

/// `code: message` of an error event or object; either may be missing.
fn code_message(code: Option<&RawValue>, message: Option<&str>) -> String {
    let code = code
        .filter(|c| c.get() != "null")
        .map(|c| truncate(c.get().trim_matches('"'), 64));
    let message = message.map(|m| truncate(m, 512));
    match (code, message) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c,
        (None, Some(m)) => m,
        (None, None) => "no message".into(),
    }
}

/// The text of a `response.error` object (`{code, message}`), or of any other error value.
fn responses_error(raw: &RawValue) -> String {
    #[derive(Deserialize)]
    struct E<'a> {
        #[serde(borrow)]
        code: Option<&'a RawValue>,
        message: Option<String>,
    }
    match serde_json::from_str::<E<'_>>(raw.get()) {
        Ok(e) => code_message(e.code, e.message.as_deref()),
        Err(_) => error_text(raw),
    }
}

impl ResponseState {
    fn end(&mut self, now: Instant) {
        self.finished = true;
        self.done = Some(now);
    }

    /// One SSE payload of a streaming Responses answer.
    pub(super) fn on_responses_event(
        &mut self,
        data: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            return Ok(());
        }
        let ev: ResponsesEvent<'_> =
            serde_json::from_slice(data).map_err(|e| malformed_event(e, data))?;
        // An error object without the `type: error` around it is an error all the same.
        let kind = ev.kind.as_deref().or(ev.error.map(|_| "error"));
        let kind = self.event_kind("Responses", kind, data, "the final event")?;
        match kind {
            "error" => {
                let text = match (ev.error, ev.message.as_deref()) {
                    (Some(e), None) => responses_error(e),
                    (_, m) => code_message(ev.code, m),
                };
                return Err(ProtocolError(format!("error in stream: {text}")));
            }
            "response.failed" => {
                let text = ev
                    .response
                    .and_then(|r| r.error)
                    .map_or_else(|| "response.failed".to_string(), responses_error);
                return Err(ProtocolError(format!("error in stream: {text}")));
            }
            "response.completed" | "response.incomplete" => {
                let usage = ev.response.and_then(|r| r.usage);
                if let Some(u) = usage {
                    self.usage = Some(u.into());
                }
                self.end(now);
            }
            // A function call's item carries its name: the call's first token event, as chat's
            // name chunk and Messages' `tool_use` block start.
            "response.output_item.added"
                if ev.item.and_then(|i| i.kind).as_deref() == Some("function_call") =>
            {
                self.tool_calls += 1;
                self.token_at(now, Carried::TOOL);
            }
            k if k.ends_with(".delta") => {
                let carried = responses_delta_carries(k, ev.delta);
                if carried.any() {
                    expect_string(ev.delta, format_args!("the delta of a `{k}` event"), data)?;
                }
                if carried.tool {
                    self.tool_arg_bytes += string_bytes(ev.delta);
                }
                if !carried.any() && is_empty_string(ev.delta) {
                    // `delta: ""`: a token of the event's kind whose bytes were held back.
                    self.token_event(now, responses_delta_kind(k), false);
                } else {
                    self.token_at(now, carried);
                }
                if k == "response.output_text.delta" {
                    if let Some(a) = &mut self.answer {
                        append_text(a, ev.delta);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A whole non-streaming Responses answer.
    pub(super) fn on_responses_body(
        &mut self,
        body: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        let r: ResponsesObject<'_> =
            serde_json::from_slice(body).map_err(|e| malformed_body(e, body))?;
        if let Some(e) = r.error.filter(|e| e.get() != "null") {
            return Err(ProtocolError(format!(
                "error in response: {}",
                responses_error(e)
            )));
        }
        if r.status.as_deref() == Some("failed") {
            return Err(ProtocolError("error in response: status failed".into()));
        }
        let Some(output) = r.output else {
            return Err(ProtocolError("response has no output".into()));
        };
        let mut carried = Carried::NOTHING;
        for item in &output {
            match item.kind.as_deref() {
                Some("function_call") => {
                    carried.tool = true;
                    self.tool_calls += 1;
                    self.tool_arg_bytes += string_bytes(item.arguments);
                }
                Some("reasoning") => {
                    carried.reasoning |= item.content.iter().flatten().any(|p| non_empty(p.text));
                }
                _ => {}
            }
            for part in item.content.iter().flatten() {
                if part.kind.as_deref() == Some("output_text") {
                    carried.answer |= non_empty(part.text);
                    if let Some(a) = &mut self.answer {
                        append_text(a, part.text);
                    }
                }
            }
        }
        self.token_at(now, carried);
        self.usage = r.usage.map(Into::into);
        self.end(now);
        Ok(())
    }

    /// The type of a typed event of `api`; a protocol error for an event without one, or for
    /// any event after the stream's `last` event.
    fn event_kind<'k>(
        &self,
        api: &str,
        kind: Option<&'k str>,
        data: &[u8],
        last: &str,
    ) -> Result<&'k str, ProtocolError> {
        let Some(kind) = kind else {
            return Err(ProtocolError(format!(
                "{api} event without a type: {}",
                truncate(&String::from_utf8_lossy(data), 200)
            )));
        };
        if self.finished {
            return Err(ProtocolError(format!(
                "{} after {last}",
                truncate(kind, 64)
            )));
        }
        Ok(kind)
    }

    /// One SSE payload of a streaming Messages answer.
    pub(super) fn on_messages_event(
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
    pub(super) fn on_messages_body(
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
    use crate::backend::state::feed_events;
    use crate::backend::ApiKind;
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

    /// A Responses `delta: ""` is a held-back token of the event's kind.
    #[test]
    fn responses_empty_delta_is_a_token_of_its_kind() {
        let ev = [
            r#"{"type":"response.reasoning_text.delta","delta":"a"}"#,
            r#"{"type":"response.reasoning_text.delta","delta":""}"#,
            r#"{"type":"response.output_text.delta","delta":""}"#,
            r#"{"type":"response.output_text.delta","delta":"b"}"#,
            r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":1,"output_tokens":4}}}"#,
        ];
        let (st, r) = feed(ApiKind::Responses, &ev);
        r.unwrap();
        let t0 = st.first_token.unwrap();
        assert_eq!(
            (st.chunks, st.reasoning_chunks, st.answer_chunks),
            (4, 2, 2)
        );
        assert_eq!(st.first_answer.unwrap() - t0, Duration::from_millis(20));
        assert_eq!(st.content_chunks, 2);
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

    /// As OpenAI documents a streamed Responses answer (abridged).
    pub(crate) const RESPONSES: &[&str] = &[
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}"#,
        r#"{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","status":"in_progress"}}"#,
        r#"{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}"#,
        r#"{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}"#,
        r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}"#,
        r#"{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":" you"}"#,
        r#"{"type":"response.output_text.done","sequence_number":6,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Hi you"}"#,
        r#"{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi you","annotations":[]}]}}"#,
        r#"{"type":"response.completed","sequence_number":8,"response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":32},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":42}}}"#,
    ];

    #[test]
    fn responses_stream_ttft_from_the_first_delta_and_usage() {
        let (st, r) = feed(ApiKind::Responses, RESPONSES);
        r.unwrap();
        assert_eq!(st.chunks, 2);
        assert_eq!(st.content_chunks, 2);
        assert_eq!(st.itl_ms, vec![10.0]);
        assert_eq!(
            st.done.unwrap() - st.first_token.unwrap(),
            Duration::from_millis(40)
        );
        assert_eq!(
            st.usage,
            Some(Usage {
                prompt_tokens: Some(40),
                completion_tokens: Some(2),
                cached_tokens: Some(32),
                reasoning_tokens: Some(0),
                image_tokens: None,
            })
        );
        assert_eq!(st.answer.as_deref(), Some("Hi you"));
        // The output budget ran out: response.incomplete ends the stream normally.
        let inc = r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":4,"output_tokens":2}}}"#;
        let (st, r) = feed(ApiKind::Responses, &[RESPONSES[4], RESPONSES[5], inc]);
        r.unwrap();
        assert!(st.finished);
        assert_eq!(st.usage.unwrap().completion_tokens, Some(2));
        assert_eq!(st.usage.unwrap().cached_tokens, None);
    }

    #[test]
    fn responses_errors_and_garbage() {
        let failed = r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"KV cache exhausted"}}}"#;
        let (_, r) = feed(ApiKind::Responses, &[RESPONSES[0], RESPONSES[4], failed]);
        assert_eq!(
            r.unwrap_err().0,
            "error in stream: server_error: KV cache exhausted"
        );
        let err =
            r#"{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null}"#;
        let (_, r) = feed(ApiKind::Responses, &[err]);
        assert_eq!(
            r.unwrap_err().0,
            "error in stream: rate_limit_exceeded: slow down"
        );
        let err = r#"{"type":"error","error":{"code":null,"message":"boom"}}"#;
        let (_, r) = feed(ApiKind::Responses, &[err]);
        assert_eq!(r.unwrap_err().0, "error in stream: boom");
        let (_, r) = feed(ApiKind::Responses, &[RESPONSES[8], RESPONSES[4]]);
        assert_eq!(
            r.unwrap_err().0,
            "response.output_text.delta after the final event"
        );
        let (_, r) = feed(ApiKind::Responses, &["[1,2]"]);
        assert!(r.unwrap_err().0.starts_with("malformed SSE JSON"));
        let (_, r) = feed(ApiKind::Responses, &[r#"{"delta":"x"}"#]);
        assert!(r
            .unwrap_err()
            .0
            .starts_with("Responses event without a type"));
    }

    #[test]
    fn responses_body() {
        let now = Instant::now();
        let mut st = ResponseState::collecting();
        st.on_body(
            ApiKind::Responses,
            br#"{"id":"resp","object":"response","status":"incomplete","error":null,"output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a b","annotations":[]}]}],"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":0},"output_tokens":2}}"#,
            now,
        )
        .unwrap();
        assert_eq!((st.chunks, st.content_chunks), (1, 1));
        assert_eq!(st.usage.unwrap().prompt_tokens, Some(9));
        assert_eq!(st.usage.unwrap().cached_tokens, Some(0));
        assert_eq!(st.answer.as_deref(), Some("a b"));
        let mut st = ResponseState::default();
        let e = st
            .on_body(
                ApiKind::Responses,
                br#"{"status":"failed","error":{"code":"server_error","message":"oops"},"output":[]}"#,
                now,
            )
            .unwrap_err();
        assert_eq!(e.0, "error in response: server_error: oops");
        let e = st
            .on_body(ApiKind::Responses, br#"{"object":"response"}"#, now)
            .unwrap_err();
        assert_eq!(e.0, "response has no output");
        let e = st.on_body(ApiKind::Responses, b"<html>", now).unwrap_err();
        assert!(e.0.starts_with("malformed JSON response"), "{}", e.0);
    }
}
