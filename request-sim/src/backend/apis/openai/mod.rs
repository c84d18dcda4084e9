//! The OpenAI chat and completions APIs (`--api openai`, also behind the AIBrix gateway):
//! what both share, the `choices` wire shape. This file reads their answers into the
//! [`ResponseState`], following the `vllm bench serve` definitions (see `docs/metrics.md`): a
//! *token event* is an SSE message with a non-empty `choices` list other than the role-only
//! preamble chat servers send first; TTFT is the first, E2EL the last, ITL the gaps between
//! consecutive ones (unlike `vllm bench serve`, which counts the preamble); the first *content*
//! message (non-empty text) is kept separately (`ttfc`); output tokens come from
//! `usage.completion_tokens`; the stream ends with `[DONE]`; an `error` object in a chunk or a
//! body is an error in the answer. It also holds what both send (the thinking budget field)
//! and how an `--endpoint` path names one of them (or Responses, Messages).
//!
//! - [`chat`]: chat completions' bodies (synthetic prompt, `messages` rows, `--live-history`),
//!   [`chat_images`]: its body with images, `fast`: its token chunk of vLLM's exact shape, read
//!   without a JSON parser; and its calibration fact;
//! - [`completions`]: the completions body (text or token ids) and its calibration fact.
//!
//! AIBrix (`--api aibrix`) is these APIs plus the `routing-strategy` header
//! ([`ROUTE_HEADER`], sent by `send.rs` when the endpoint has a route); its flavour's facts
//! (needs `--aibrix-route`, needs `--endpoint`) are the answers of the dispatch
//! (`backend/api.rs`).

pub mod chat;
pub mod chat_images;
pub mod completions;
mod fast;
mod tail;

pub use tail::{session_user_field, thinking_field};

use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::backend::api::ApiKind;
use crate::backend::state::{
    append_text, error_text, expect_string, malformed_body, non_empty, truncate, Carried,
    ProtocolError, ResponseState, Usage,
};

/// The header that carries AIBrix's routing strategy (`--aibrix-route`).
pub const ROUTE_HEADER: &str = "routing-strategy";

/// What an answer that ends early lacks.
pub const STREAM_END: &str = "stream ended without [DONE]";

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
    prompt_tokens_details: Option<WireDetails>,
    completion_tokens_details: Option<WireCompletionDetails>,
}

#[derive(Deserialize)]
struct WireDetails {
    cached_tokens: Option<u32>,
    multimodal_tokens: Option<WireModalities>,
}

/// vLLM's `multimodal_tokens`: `{"image": N}` (`null` on a text prompt).
#[derive(Deserialize)]
struct WireModalities {
    image: Option<u32>,
}

#[derive(Deserialize)]
struct WireCompletionDetails {
    reasoning_tokens: Option<u32>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_tokens: u
                .prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens),
            reasoning_tokens: u.completion_tokens_details.and_then(|d| d.reasoning_tokens),
            image_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.multimodal_tokens)
                .and_then(|m| m.image),
        }
    }
}

/// A field that is there and not `null` (`""` included).
fn present(v: Option<&RawValue>) -> bool {
    v.is_some_and(|r| r.get() != "null")
}

/// One entry of a chat delta's (or message's) `tool_calls`: the first chunk of a call has its
/// `id` and function `name`, later ones `arguments` pieces. A tool-call delta of another shape
/// is a protocol error.
#[derive(Deserialize)]
struct WireToolCall<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    function: Option<WireFunction<'a>>,
}

#[derive(Deserialize)]
struct WireFunction<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    arguments: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    reasoning_content: Option<&'a RawValue>,
    #[serde(borrow)]
    reasoning: Option<&'a RawValue>,
    #[serde(borrow)]
    role: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<WireToolCall<'a>>>,
}

impl WireDelta<'_> {
    /// What it carried: thinking, answer text, a tool call.
    fn carried(&self) -> Carried {
        Carried {
            reasoning: non_empty(self.reasoning_content) || non_empty(self.reasoning),
            answer: non_empty(self.content),
            tool: self.tool_calls.as_ref().is_some_and(|t| !t.is_empty()),
        }
    }

    /// Text, thinking or tool-call arguments in it.
    fn has_content(&self) -> bool {
        self.carried().any()
    }

    /// A delta with nothing in it (`{}`, or only nulls): what OpenAI and llama.cpp send with
    /// the `finish_reason` after the last token. No token event, as the role preamble before
    /// the first one is not.
    fn is_bare(&self) -> bool {
        !present(self.content)
            && !present(self.reasoning)
            && !present(self.reasoning_content)
            && !present(self.role)
            && self.tool_calls.as_ref().is_none_or(Vec::is_empty)
    }

    /// Tool calls begun in it (entries with an `id` or a function `name`), and the bytes of
    /// the arguments it streamed.
    fn tool_call_parts(&self) -> (u32, u64) {
        let mut calls = 0u32;
        let mut bytes = 0u64;
        for t in self.tool_calls.iter().flatten() {
            let f = t.function.as_ref();
            if non_empty(t.id) || f.is_some_and(|f| non_empty(f.name)) {
                calls += 1;
            }
            bytes += f
                .and_then(|f| f.arguments.as_ref())
                .map_or(0, |a| a.len() as u64);
        }
        (calls, bytes)
    }

    /// What a delta of empty text stands for: a thinking token (`reasoning: ""`) or an
    /// answer token (`content: ""`) whose bytes are held back; `None` for anything else.
    fn held(&self) -> Option<Carried> {
        if present(self.reasoning) || present(self.reasoning_content) {
            Some(Carried::REASONING)
        } else if present(self.content) {
            Some(Carried::ANSWER)
        } else {
            None
        }
    }

    /// The role-only preamble chat servers send before the first token (vLLM:
    /// `{"role": "assistant", "content": ""}`): it carries no token. A delta without a role
    /// whose content is `""` is a token all the same (vLLM sends one for a token that is part
    /// of a multi-byte character).
    fn is_role_preamble(&self) -> bool {
        self.role.is_some() && !self.has_content()
    }
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(borrow)]
    delta: Option<WireDelta<'a>>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<WireDelta<'a>>,
}

/// The first element of a JSON array (`None` when it is empty); the others are skipped
/// unparsed.
struct First<T>(Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<First<T>, A::Error> {
                let first = seq.next_element::<T>()?;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }
        d.deserialize_seq(Visit(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct WireChunk<'a> {
    /// Only the first choice is read (request-sim asks for one): no list is allocated per
    /// streamed chunk.
    #[serde(borrow, default)]
    choices: Option<First<WireChoice<'a>>>,
    usage: Option<WireUsage>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    object: Option<&'a str>,
    message: Option<String>,
}

/// The API an `--endpoint` path names with `--api openai` or `aibrix` (a base URL or `/v1`:
/// chat completions, whose path is set in `url`): chat, completions, Responses or Messages.
pub fn kind_of_path(url: &mut reqwest::Url, path: &str) -> Result<ApiKind, String> {
    Ok(if path.is_empty() || path == "/v1" {
        url.set_path(chat::PATH);
        ApiKind::Chat
    } else if path.ends_with("/chat/completions") {
        ApiKind::Chat
    } else if path.ends_with("/completions") {
        ApiKind::Completions
    } else if path.ends_with("/responses") {
        ApiKind::Responses
    } else if path.ends_with("/messages") {
        ApiKind::Messages
    } else {
        return Err(format!(
            "--endpoint path {path:?} is not an OpenAI path: use .../v1/chat/completions, \
             .../v1/completions, .../v1/responses, .../v1/messages or a base URL like http://host:port"
        ));
    })
}

impl ResponseState {
    /// One SSE payload of a streaming chat or completions answer.
    pub(crate) fn on_openai_event(
        &mut self,
        data: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        let data = data.trim_ascii();
        if data == b"[DONE]" {
            self.finished = true;
            self.done = Some(now);
            return Ok(());
        }
        if self.finished {
            return Err(ProtocolError("data after [DONE]".into()));
        }
        // Nearly every token chunk of vLLM and llm-sim: read without the JSON parser, the same
        // way the full parse below reads it (tests: `the_fast_path_reads_as_the_full_parse`).
        if let Some(t) = fast::chat_token(data) {
            self.token_at(now, t.carried);
            if let (Some(a), true) = (&mut self.answer, t.carried.answer) {
                a.push_str(t.text);
            }
            return Ok(());
        }
        self.on_openai_chunk(data, now)
    }

    /// A chat or completions chunk (not `[DONE]`), read by the full JSON parse.
    fn on_openai_chunk(&mut self, data: &[u8], now: Instant) -> Result<(), ProtocolError> {
        let chunk: WireChunk<'_> = serde_json::from_slice(data).map_err(|e| {
            ProtocolError(format!(
                "malformed SSE JSON ({e}): {}",
                truncate(&String::from_utf8_lossy(data), 200)
            ))
        })?;
        if let Some(err) = chunk.error {
            return Err(ProtocolError(format!(
                "error in stream: {}",
                error_text(err)
            )));
        }
        if chunk.object == Some("error") {
            let msg = chunk.message.unwrap_or_default();
            return Err(ProtocolError(format!(
                "error in stream: {}",
                truncate(&msg, 512)
            )));
        }
        if let Some(First(Some(c))) = &chunk.choices {
            let delta = c.delta.as_ref();
            expect_string(c.text, "a choice's `text`", data)?;
            if let Some(d) = delta {
                expect_string(d.content, "a delta's `content`", data)?;
                expect_string(d.reasoning, "a delta's `reasoning`", data)?;
                expect_string(d.reasoning_content, "a delta's `reasoning_content`", data)?;
            }
            // The role preamble before the first token is no token event (docs/metrics.md),
            // nor is a bare finish delta after the last one.
            let preamble = (self.first_token.is_none()
                && delta.is_some_and(|d| d.is_role_preamble()))
                || (delta.is_some_and(WireDelta::is_bare) && !present(c.text));
            let mut carried = delta.map_or(Carried::NOTHING, WireDelta::carried);
            carried.answer |= non_empty(c.text);
            if !preamble {
                // `reasoning: ""` or `content: ""` after the first token: a thinking or
                // answer token whose bytes the server held back (part of a multi-byte
                // character), a thinking or answer event all the same.
                match delta.map(WireDelta::held).filter(|_| !carried.any()) {
                    Some(Some(held)) => self.token_event(now, held, false),
                    _ => self.token_at(now, carried),
                }
            }
            if let Some(d) = delta {
                let (calls, bytes) = d.tool_call_parts();
                self.tool_calls += calls;
                self.tool_arg_bytes += bytes;
            }
            if let Some(a) = &mut self.answer {
                append_text(a, c.delta.as_ref().and_then(|d| d.content));
                append_text(a, c.text);
            }
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u.into());
        }
        Ok(())
    }

    /// A complete non-streaming chat or completions answer, received at `now`.
    pub(crate) fn on_openai_body(
        &mut self,
        body: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        let chunk: WireChunk<'_> =
            serde_json::from_slice(body).map_err(|e| malformed_body(e, body))?;
        if let Some(err) = chunk.error {
            return Err(ProtocolError(format!(
                "error in response: {}",
                error_text(err)
            )));
        }
        let Some(c) = chunk.choices.and_then(|c| c.0) else {
            return Err(ProtocolError("response has no choices".into()));
        };
        let message = c.message.as_ref();
        let mut carried = message.map_or(Carried::NOTHING, WireDelta::carried);
        carried.answer |= non_empty(c.text);
        self.token_at(now, carried);
        if let Some(m) = message {
            let (calls, bytes) = m.tool_call_parts();
            self.tool_calls += calls;
            self.tool_arg_bytes += bytes;
        }
        if let Some(a) = &mut self.answer {
            append_text(a, c.message.as_ref().and_then(|m| m.content));
            append_text(a, c.text);
        }
        self.usage = chunk.usage.map(Into::into);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::state::feed_events;
    use std::time::Duration;

    #[test]
    fn the_fast_path_reads_as_the_full_parse() {
        let tok = r#"{"id":"c-1","object":"chat.completion.chunk","created":17,"model":"m","choices":[{"index":0,"delta":{"content":" a"},"logprobs":null,"finish_reason":null,"token_ids":null}]}"#;
        let think = tok.replace(r#""content""#, r#""reasoning""#);
        let preamble = tok.replace(r#""content":" a""#, r#""role":"assistant","content":"""#);
        let held = tok.replace(r#"" a""#, r#""""#);
        let escaped = tok.replace(r#"" a""#, r#""\"é\n""#);
        let last = tok.replace(r#""finish_reason":null"#, r#""finish_reason":"length""#);
        let streams: [&[&str]; 4] = [
            &[&preamble, tok, tok, &last],
            &[&preamble, &think, &held, tok, &escaped, &last],
            &[tok, &think, &think, &held, tok],
            &[&escaped, tok, &held],
        ];
        let now = Instant::now();
        for events in streams {
            for collecting in [false, true] {
                let fresh = || {
                    if collecting {
                        ResponseState::collecting()
                    } else {
                        ResponseState::default()
                    }
                };
                let (mut fast, mut full) = (fresh(), fresh());
                for (i, e) in events.iter().enumerate() {
                    let at = now + Duration::from_millis(3 * i as u64);
                    fast.on_event(ApiKind::Chat, e.as_bytes(), at).unwrap();
                    full.on_openai_chunk(e.as_bytes(), at).unwrap();
                }
                assert_eq!(format!("{fast:?}"), format!("{full:?}"), "{events:?}");
                assert!(fast.chunks >= 3, "{fast:?}");
            }
        }
        // The shape is taken for the common chunks (else this test compares nothing).
        assert!(fast::chat_token(tok.as_bytes()).is_some());
        assert!(fast::chat_token(think.as_bytes()).is_some());
    }

    /// Real vLLM 0.32 streams (recorded, tests/data/vllm-0.32): the fast path takes their
    /// token chunks, and reads each stream exactly as the full parse does.
    #[test]
    fn real_vllm_token_chunks_take_the_fast_path_and_read_the_same() {
        let recorded = [
            include_str!("../../../../tests/data/vllm-0.32/chat_stream.sse"),
            include_str!("../../../../tests/data/vllm-0.32/chat_stream_reasoning.sse"),
        ];
        let now = Instant::now();
        for sse in recorded {
            let events: Vec<&str> = sse
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .filter(|d| *d != "[DONE]")
                .collect();
            let fast_hits = events
                .iter()
                .filter(|e| fast::chat_token(e.as_bytes()).is_some())
                .count();
            assert!(fast_hits >= 3, "{fast_hits} of {events:?}");
            // What it leaves has a reason: the role preamble, an escape in the text, the finish
            // reason, usage.
            for e in events
                .iter()
                .filter(|e| fast::chat_token(e.as_bytes()).is_none())
            {
                assert!(
                    ["\"role\"", "\\", "\"finish_reason\":\"", "\"usage\""]
                        .iter()
                        .any(|why| e.contains(why)),
                    "{e}"
                );
            }
            let (mut fast, mut full) = (ResponseState::collecting(), ResponseState::collecting());
            for (i, e) in events.iter().enumerate() {
                let at = now + Duration::from_millis(2 * i as u64);
                fast.on_event(ApiKind::Chat, e.as_bytes(), at).unwrap();
                full.on_openai_chunk(e.as_bytes(), at).unwrap();
            }
            assert_eq!(format!("{fast:?}"), format!("{full:?}"));
        }
    }

    fn feed(kind: ApiKind, events: &[&str]) -> (ResponseState, Result<(), ProtocolError>) {
        feed_events(ResponseState::default(), kind, events)
    }

    // Shapes as vLLM's OpenAI server emits them for chat with include_usage.
    const CHAT: &[&str] = &[
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" hello"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}"#,
        "[DONE]",
    ];

    #[test]
    fn chat_stream_timings_and_usage() {
        let (st, r) = feed(ApiKind::Chat, CHAT);
        r.unwrap();
        let t0 = st.first_token.unwrap();
        // The role preamble is no token event: TTFT at " hello", one gap.
        assert_eq!(st.chunks, 2);
        assert_eq!(st.content_chunks, 2);
        assert_eq!(st.first_content, st.first_token);
        assert_eq!(st.first_answer, st.first_token);
        assert_eq!(st.last_token.unwrap() - t0, Duration::from_millis(10));
        assert_eq!(st.itl_ms, vec![10.0]);
        assert!(st.finished);
        assert_eq!(
            st.usage,
            Some(Usage {
                prompt_tokens: Some(12),
                completion_tokens: Some(2),
                cached_tokens: Some(8),
                reasoning_tokens: None,
                image_tokens: None,
            })
        );
    }

    /// vLLM 0.32's held-back tokens (part of a multi-byte character) stream as empty text:
    /// `reasoning: ""` is a thinking event, `content: ""` an answer event, though neither is
    /// content yet (TTFC waits for text).
    #[test]
    fn empty_text_after_the_first_token_is_a_held_back_token_of_its_kind() {
        let ev = [
            CHAT[0],
            r#"{"choices":[{"index":0,"delta":{"reasoning":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"reasoning":" think"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":" yes"}}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
            "[DONE]",
        ];
        let (st, r) = feed(ApiKind::Chat, &ev);
        r.unwrap();
        let t0 = st.first_token.unwrap();
        assert_eq!(
            (st.chunks, st.reasoning_chunks, st.answer_chunks),
            (4, 2, 2)
        );
        assert_eq!(st.content_chunks, 2);
        assert_eq!(st.first_content.unwrap() - t0, Duration::from_millis(10));
        assert_eq!(st.first_answer.unwrap() - t0, Duration::from_millis(20));
        assert_eq!(st.itl_ms, vec![10.0, 10.0, 10.0]);
    }

    #[test]
    fn answer_kept_only_when_collecting() {
        let (st, r) = feed(ApiKind::Chat, CHAT);
        r.unwrap();
        assert_eq!(st.answer, None);
        let t0 = Instant::now();
        let mut st = ResponseState::collecting();
        for e in CHAT {
            st.on_event(ApiKind::Chat, e.as_bytes(), t0).unwrap();
        }
        assert_eq!(st.answer.as_deref(), Some(" hello world"));
        // Escapes are decoded; reasoning is not part of the answer.
        let mut st = ResponseState::collecting();
        let ev = [
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a \"b\"\n\u00e9"}}]}"#,
        ];
        for e in ev {
            st.on_event(ApiKind::Chat, e.as_bytes(), t0).unwrap();
        }
        assert_eq!(st.answer.as_deref(), Some("a \"b\"\n\u{e9}"));
        let mut st = ResponseState::collecting();
        st.on_body(
            ApiKind::Chat,
            br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"whole"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
            t0,
        )
        .unwrap();
        assert_eq!(st.answer.as_deref(), Some("whole"));
    }

    #[test]
    fn completions_stream_text() {
        let ev = [
            r#"{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" b","logprobs":null,"finish_reason":"length"}]}"#,
            r#"{"id":"cmpl-1","object":"text_completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":null}}"#,
            "[DONE]",
        ];
        let (st, r) = feed(ApiKind::Completions, &ev);
        r.unwrap();
        assert_eq!(st.chunks, 2);
        assert_eq!(st.content_chunks, 2);
        assert_eq!(st.usage.unwrap().cached_tokens, None);
        assert_eq!(st.usage.unwrap().completion_tokens, Some(2));
    }

    #[test]
    fn error_inside_200_stream() {
        let ev = [
            CHAT[0],
            r#"{"object":"error","message":"boom","type":"InternalServerError","code":500}"#,
        ];
        let (_, r) = feed(ApiKind::Chat, &ev);
        assert_eq!(r.unwrap_err().0, "error in stream: boom");
        let ev = [r#"{"error":{"message":"overloaded","code":503}}"#];
        let (_, r) = feed(ApiKind::Chat, &ev);
        assert_eq!(r.unwrap_err().0, "error in stream: overloaded");
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let (_, r) = feed(ApiKind::Chat, &["{not json"]);
        assert!(r.unwrap_err().0.starts_with("malformed SSE JSON"));
        let (_, r) = feed(ApiKind::Chat, &["[DONE]", CHAT[1]]);
        assert_eq!(r.unwrap_err().0, "data after [DONE]");
    }
}
