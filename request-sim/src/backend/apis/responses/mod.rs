//! The OpenAI Responses API (`--api responses`, `/v1/responses`; vLLM, SGLang, llama.cpp's
//! server, OpenAI), whole: the request bodies (a synthetic prompt, a `messages` row converted
//! to Responses items by [`convert`]), its typed event stream and non-streaming
//! answer read into the [`ResponseState`], its usage and errors, and its calibration fact.
//!
//! Reading: every `response.*.delta` event (`response.output_text.delta`, reasoning, refusal,
//! function-call arguments, …) is token-bearing; content when its `delta` is not empty.
//! `response.created` / `response.in_progress` / `*.added` / `*.done` carry no token. The
//! stream ends with `response.completed` or `response.incomplete` (the output budget ran out: a
//! normal end for a replay), whose `response.usage` gives `input_tokens`, `output_tokens` and
//! `input_tokens_details.cached_tokens`. `response.failed` and `error` events are errors in the
//! stream. A `data: [DONE]` is ignored (some servers add it); an event without a `type`, or
//! anything after the final event, is a protocol error.

pub mod convert;

use std::borrow::Cow;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::backend::api::{ApiKind, Calibration};
use crate::backend::body::{BodyParams, RowBody};
use crate::backend::state::{
    append_text, error_text, expect_string, is_empty_string, malformed_body, malformed_event,
    non_empty, string_bytes, truncate, Carried, ProtocolError, ResponseState, Usage,
};

/// The endpoint's path.
pub const PATH: &str = "/v1/responses";

/// The prompt overhead is measured by a calibration request to the API itself (the servers
/// render it through the chat template, but the API may add its own around it).
pub const CALIBRATION: Calibration = Calibration::ApiRequest;

/// What an answer that ends early lacks.
pub const STREAM_END: &str = "stream ended without response.completed";

/// The field that carries a session id (`--session-user`): OpenAI's `user`.
pub fn session_user_field(user: &str) -> (&'static str, serde_json::Value) {
    ("user", serde_json::Value::from(user))
}

/// The endpoint an `--endpoint` path names with `--api responses` (a base URL or `/v1`: the
/// API's path, set in `url`).
pub fn kind_of_path(url: &mut reqwest::Url, path: &str) -> Result<ApiKind, String> {
    super::single_path(url, path, (PATH, "responses", "Responses"))?;
    Ok(ApiKind::Responses)
}

/// A synthetic Responses input item: a message that names its `type`, as the Responses API
/// specifies (llama.cpp's server refuses an item without one).
#[derive(Serialize)]
struct InputMessage<'a> {
    content: &'a str,
    role: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// A Responses body with a synthetic prompt. `store: false`: a load generator's answers are
/// not kept by the server. No thinking budget: vLLM takes none here.
#[derive(Serialize)]
struct ResponsesBody<'a> {
    model: &'a str,
    input: [InputMessage<'a>; 1],
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ignore_eos: Option<bool>,
    stream: bool,
    store: bool,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// The body of a synthetic prompt `text` (not cleared first).
pub fn encode_body(params: &BodyParams, text: &str, max_tokens: u32, out: &mut Vec<u8>) {
    let exact = params.exact_output;
    let body = ResponsesBody {
        model: &params.model,
        input: [InputMessage {
            content: text,
            role: "user",
            kind: "message",
        }],
        max_output_tokens: max_tokens,
        min_tokens: exact.then_some(max_tokens),
        ignore_eos: exact.then_some(true),
        stream: params.stream,
        store: false,
        extra: params.extra.as_ref(),
    };
    // Serialising into a Vec cannot fail for these types (no maps with non-string keys).
    let r = serde_json::to_writer(&mut *out, &body);
    debug_assert!(r.is_ok());
}

/// Serialise the body of a `messages` trace row into `out` (cleared by the caller): the row
/// converted to Responses items ([`convert::to_responses`]) and tools, the
/// token budget as `max_output_tokens` only when the row gives one, `store: false`, the
/// session id as `user`, then `--extra-body` and the row's `extra` as for chat.
pub fn encode_row_body(
    params: &BodyParams,
    chat: &crate::trace::ChatPayload,
    session_user: Option<&str>,
    out: &mut Vec<u8>,
) {
    use serde_json::Value;
    let mut body = RowBody::new(params);
    body.own("input", convert::to_responses(&chat.messages));
    if let Some(t) = &chat.tools {
        body.own("tools", convert::responses_tools(t));
    }
    // Servers reject a budget of 0: a row with output_length 0 asks for one token.
    if let Some(n) = chat.max_tokens.map(|n| n.max(1)) {
        body.budget(params, "max_output_tokens", n);
    }
    body.own("stream", Value::from(params.stream));
    body.own("store", Value::from(false));
    body.tail(params, session_user.map(session_user_field), chat);
    body.write(out, None);
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
    /// One SSE payload of a streaming Responses answer.
    pub(crate) fn on_responses_event(
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
    pub(crate) fn on_responses_body(
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::state::feed_events;
    use std::time::Duration;

    fn feed(kind: ApiKind, events: &[&str]) -> (ResponseState, Result<(), ProtocolError>) {
        feed_events(ResponseState::collecting(), kind, events)
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
