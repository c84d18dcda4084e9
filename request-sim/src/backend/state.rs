//! What is observed while reading one response ([`ResponseState`]: timings, token counts,
//! usage, the answer's text), the usage types of the APIs ([`Usage`], [`AnthropicUsage`]),
//! [`ProtocolError`], the two entry points that read an answer ([`ResponseState::on_event`],
//! [`ResponseState::on_body`]: each API's module reads its own, through the dispatch), and the
//! small JSON-text helpers the API modules' readers share ([`super::apis`]).

use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::status::ServedBy;

/// Server-reported token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    pub cached_tokens: Option<u32>,
    /// `completion_tokens_details.reasoning_tokens` (Responses:
    /// `output_tokens_details.reasoning_tokens`) as the server reported it, 0 included.
    pub reasoning_tokens: Option<u32>,
    /// `prompt_tokens_details.multimodal_tokens.image` (vLLM): the image tokens of the prompt.
    pub image_tokens: Option<u32>,
}

/// What one token event carried (several at once in a chunk that has, say, the last thinking
/// and the first answer text).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Carried {
    /// Thinking text: chat `reasoning_content` / `reasoning`, Responses reasoning (summary)
    /// text, Messages `thinking`.
    pub reasoning: bool,
    /// Answer text: chat `content`, completions `text`, Responses output text, Messages text.
    pub answer: bool,
    /// A tool call's name or arguments.
    pub tool: bool,
}

impl Carried {
    pub const NOTHING: Carried = Carried {
        reasoning: false,
        answer: false,
        tool: false,
    };
    pub const ANSWER: Carried = Carried {
        reasoning: false,
        answer: true,
        tool: false,
    };
    pub const REASONING: Carried = Carried {
        reasoning: true,
        answer: false,
        tool: false,
    };
    pub const TOOL: Carried = Carried {
        reasoning: false,
        answer: false,
        tool: true,
    };

    /// Any text, thinking or tool call in it.
    pub fn any(self) -> bool {
        self.reasoning || self.answer || self.tool
    }
}

/// Why a response could not be understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

/// Everything observed while reading one response.
#[derive(Debug, Clone, Default)]
pub struct ResponseState {
    /// When the request's first byte went into the socket (plain HTTP, `super::socket`);
    /// `None` where the client cannot see it (https, gRPC).
    pub written: Option<Instant>,
    /// The latest a token-carrying read of this answer came after its bytes arrived, ms
    /// (receive lateness; plain HTTP only).
    pub rx_late_ms: Option<f64>,
    pub first_token: Option<Instant>,
    pub first_content: Option<Instant>,
    pub last_token: Option<Instant>,
    pub done: Option<Instant>,
    /// Gaps between consecutive token-bearing messages, ms.
    pub itl_ms: Vec<f64>,
    /// Token-bearing messages.
    pub chunks: u32,
    /// Messages with non-empty text (thinking, answer or tool call).
    pub content_chunks: u32,
    /// The first token event carrying answer text / a tool call.
    pub first_answer: Option<Instant>,
    pub first_tool: Option<Instant>,
    /// Token events carrying thinking, answer text, tool calls (an event may carry several).
    pub reasoning_chunks: u32,
    pub answer_chunks: u32,
    pub tool_chunks: u32,
    /// Tool calls the answer made, and the bytes of their streamed arguments.
    pub tool_calls: u32,
    pub tool_arg_bytes: u64,
    /// The answer came whole (not streamed): its token counts are the server's, not events.
    pub whole: bool,
    pub usage: Option<Usage>,
    /// `data: [DONE]` seen (OpenAI) / final event with details seen (TGI).
    pub finished: bool,
    /// The instance that answered, when the response headers say.
    pub served_by: Option<ServedBy>,
    /// The answer's text (`content` of chat messages, `text` of completions, TGI's
    /// `generated_text`), kept only when the state was made with [`ResponseState::collecting`]
    /// (`--live-history`); `None` otherwise, so reading a response costs nothing extra.
    pub answer: Option<String>,
    /// Anthropic's usage fields seen so far (`message_start`, then `message_delta`).
    pub(super) anthropic: AnthropicUsage,
}

/// Anthropic's usage fields, as far as they are known.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct AnthropicUsage {
    pub input_tokens: Option<u32>,
    pub output_tokens: Option<u32>,
    pub cache_read_input_tokens: Option<u32>,
    pub cache_creation_input_tokens: Option<u32>,
}

impl AnthropicUsage {
    /// Each field `later` carries replaces this one's.
    pub(super) fn merge(&mut self, later: AnthropicUsage) {
        let pick = |a: &mut Option<u32>, b: Option<u32>| {
            if b.is_some() {
                *a = b;
            }
        };
        pick(&mut self.input_tokens, later.input_tokens);
        pick(&mut self.output_tokens, later.output_tokens);
        pick(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
        pick(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
    }

    /// The usage in the records' terms: prompt = uncached + cache read + cache written.
    pub(super) fn usage(&self) -> Usage {
        let parts = [
            self.input_tokens,
            self.cache_read_input_tokens,
            self.cache_creation_input_tokens,
        ];
        let prompt = parts.iter().any(Option::is_some).then(|| {
            parts
                .iter()
                .flatten()
                .fold(0u32, |a, &b| a.saturating_add(b))
        });
        Usage {
            prompt_tokens: prompt,
            completion_tokens: self.output_tokens,
            cached_tokens: self.cache_read_input_tokens,
            reasoning_tokens: None,
            image_tokens: None,
        }
    }
}

/// A JSON string value that is non-empty (`null` and `""` are empty).
pub(super) fn non_empty(v: Option<&RawValue>) -> bool {
    matches!(v, Some(r) if { let s = r.get(); s != "\"\"" && s != "null" })
}

/// A token-bearing field (`what`) of a stream event must be a JSON string (or `null`): a number
/// or an object there is a protocol error, not a token of unknown kind.
/// `what` is only formatted for the error: nothing is allocated per token.
pub(super) fn expect_string(
    v: Option<&RawValue>,
    what: impl std::fmt::Display,
    data: &[u8],
) -> Result<(), ProtocolError> {
    match v {
        Some(r) if !r.get().starts_with('"') && r.get() != "null" => Err(ProtocolError(format!(
            "{what} is not a string: {}",
            truncate(&String::from_utf8_lossy(data), 200)
        ))),
        _ => Ok(()),
    }
}

pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

pub(super) fn error_text(raw: &RawValue) -> String {
    #[derive(Deserialize)]
    struct Obj {
        message: Option<String>,
    }
    if let Ok(o) = serde_json::from_str::<Obj>(raw.get()) {
        if let Some(m) = o.message {
            return truncate(&m, 512);
        }
    }
    if let Ok(s) = serde_json::from_str::<String>(raw.get()) {
        return truncate(&s, 512);
    }
    truncate(raw.get(), 512)
}

/// A response body that is not the JSON expected.
pub(super) fn malformed_body(e: serde_json::Error, body: &[u8]) -> ProtocolError {
    ProtocolError(format!(
        "malformed JSON response ({e}): {}",
        truncate(&String::from_utf8_lossy(body), 200)
    ))
}

/// An SSE payload that is not the JSON expected.
pub(super) fn malformed_event(e: serde_json::Error, data: &[u8]) -> ProtocolError {
    ProtocolError(format!(
        "malformed SSE JSON ({e}): {}",
        truncate(&String::from_utf8_lossy(data), 200)
    ))
}

/// Appends the JSON string `raw` (a content value; `null` adds nothing) to `out`.
pub(super) fn append_text(out: &mut String, raw: Option<&RawValue>) {
    if let Some(r) = raw {
        if let Ok(t) = serde_json::from_str::<std::borrow::Cow<'_, str>>(r.get()) {
            out.push_str(&t);
        }
    }
}

/// `raw` is the empty JSON string.
pub(super) fn is_empty_string(raw: Option<&RawValue>) -> bool {
    raw.is_some_and(|r| r.get() == "\"\"")
}

/// The length in bytes of the JSON string `raw` once decoded (0 for anything else).
pub(super) fn string_bytes(raw: Option<&RawValue>) -> u64 {
    raw.and_then(|r| serde_json::from_str::<std::borrow::Cow<'_, str>>(r.get()).ok())
        .map_or(0, |s| s.len() as u64)
}

impl ResponseState {
    /// The answer ended, at `now`.
    pub(super) fn end(&mut self, now: Instant) {
        self.finished = true;
        self.done = Some(now);
    }

    /// The type of a typed event (Responses, Messages) of `api`; a protocol error for an
    /// event without one, or for any event after the stream's `last` event.
    pub(super) fn event_kind<'k>(
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

    /// A state that also keeps the answer's text ([`ResponseState::answer`]).
    pub fn collecting() -> ResponseState {
        ResponseState {
            answer: Some(String::new()),
            ..ResponseState::default()
        }
    }

    /// A token event at `now` that carried `c`.
    pub(super) fn token_at(&mut self, now: Instant, c: Carried) {
        self.token_event(now, c, c.any());
    }

    /// A token event at `now` that carried `c`; `visible`: it had text (a chat answer token
    /// whose bytes the server held back, `content: ""`, is an answer token without text: no
    /// first content yet).
    pub(super) fn token_event(&mut self, now: Instant, c: Carried, visible: bool) {
        let has_content = visible;
        if c.reasoning {
            self.reasoning_chunks += 1;
        }
        if c.answer {
            self.answer_chunks += 1;
            self.first_answer.get_or_insert(now);
        }
        if c.tool {
            self.tool_chunks += 1;
            self.first_tool.get_or_insert(now);
        }
        if self.first_token.is_none() {
            self.first_token = Some(now);
        } else if let Some(prev) = self.last_token {
            self.itl_ms
                .push(now.duration_since(prev).as_micros() as f64 / 1e3);
        }
        if has_content {
            self.content_chunks += 1;
            if self.first_content.is_none() {
                self.first_content = Some(now);
            }
        }
        self.last_token = Some(now);
        self.chunks += 1;
    }
}

/// Test helper: feeds `events` to `st` through [`ResponseState::on_event`] 10 ms apart (from
/// now), stopping at the first error.
#[cfg(test)]
pub(super) fn feed_events(
    mut st: ResponseState,
    kind: super::api::ApiKind,
    events: &[&str],
) -> (ResponseState, Result<(), ProtocolError>) {
    let t0 = Instant::now();
    for (i, e) in events.iter().enumerate() {
        let at = t0 + std::time::Duration::from_millis(10 * (i as u64 + 1));
        let r = st.on_event(kind, e.as_bytes(), at);
        if r.is_err() {
            return (st, r);
        }
    }
    (st, Ok(()))
}
