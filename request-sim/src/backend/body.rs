//! Request bodies for each API, serialised from typed structs into a reusable buffer.
//!
//! The output length each API can enforce (`docs/backends.md`): chat and completions send
//! `max_tokens`, Responses `max_output_tokens`, Messages `max_tokens` (required by Anthropic:
//! a `messages` row without `output_length` asks for [`MESSAGES_DEFAULT_MAX_TOKENS`]); all of
//! them add vLLM's `min_tokens` and `ignore_eos` with `exact_output`, which vLLM-style servers
//! honour on every API and strict servers ignore or refuse (TGI: `ignore_eos_token`).
//! A row's thinking budget adds the API's budget field ([`super::thinking`]).

use serde::Serialize;

use super::api::ApiKind;
use super::thinking::thinking_field;

/// The prompt of one request.
#[derive(Debug, Clone, Copy)]
pub enum PromptPayload<'a> {
    /// Prompt text (chat content, completions prompt, TGI inputs).
    Text(&'a str),
    /// Token ids (completions endpoints of vLLM / SGLang only).
    TokenIds(&'a [u32]),
}

/// Per-run settings that go into every body.
#[derive(Debug, Clone)]
pub struct BodyParams {
    pub model: String,
    pub stream: bool,
    /// Ask for exactly `max_tokens`: also send `min_tokens` and `ignore_eos: true`
    /// (vLLM/SGLang extensions); off for strict OpenAI-compatible servers.
    pub exact_output: bool,
    /// Extra top-level JSON fields merged into OpenAI bodies (`--extra-body`).
    pub extra: Option<serde_json::Map<String, serde_json::Value>>,
    /// `--thinking-budget`: whether a row's thinking budget is sent.
    pub thinking: super::thinking::ThinkingBudget,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// A synthetic chat message. `content` comes first: that is how a `messages` row's message
/// objects serialise (sorted keys), so a prompt saved with `--save-prompts` and replayed gives
/// the same bytes.
#[derive(Serialize)]
struct Message<'a> {
    content: &'a str,
    role: &'static str,
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

#[derive(Serialize)]
#[serde(untagged)]
enum CompletionPrompt<'a> {
    Text(&'a str),
    Ids(&'a [u32]),
}

#[derive(Serialize)]
struct OpenAiBody<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<[Message<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<CompletionPrompt<'a>>,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ignore_eos: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_token_budget: Option<serde_json::Value>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// A Responses body with a synthetic prompt. `store: false`: a load generator's answers are
/// not kept by the server.
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

/// `max_tokens` of a Messages request from a `messages` row without `output_length` (the
/// field is required by Anthropic's API).
pub const MESSAGES_DEFAULT_MAX_TOKENS: u32 = 4096;

#[derive(Serialize)]
struct TgiParameters {
    max_new_tokens: u32,
    details: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    ignore_eos_token: Option<bool>,
}

#[derive(Serialize)]
struct TgiBody<'a> {
    inputs: &'a str,
    parameters: TgiParameters,
    stream: bool,
}

/// Serialise the chat body of a `messages` trace row into `out` (cleared first): its
/// `messages`, `tools` and `extra` as given, the token budget only when the row gives one, and
/// `user` = `session_user` when set. Later sources override earlier keys in place (no
/// duplicate keys): run settings, then `--extra-body`, then the row's `extra`.
///
/// The keys come in the order [`encode_body`] writes them (`model`, `messages`, `tools`,
/// `max_tokens`, `min_tokens`, `ignore_eos`, `stream`, `stream_options`, `--extra-body`,
/// `user`, the row's `extra`), so a synthetic prompt saved as a `messages` row
/// (`--save-prompts`) replays as the same bytes.
pub fn encode_chat_row_body(
    params: &BodyParams,
    chat: &crate::trace::ChatPayload,
    session_user: Option<&str>,
    out: &mut Vec<u8>,
) {
    encode_chat_row_body_marked(params, chat, (None, session_user), out, None);
}

/// A top-level field of a chat row body, borrowed where it can be.
enum Field<'a> {
    /// The row's `messages`, written one message at a time (so their places can be marked).
    Messages(&'a [serde_json::Value]),
    Borrowed(&'a serde_json::Value),
    Owned(serde_json::Value),
}

/// Like [`encode_chat_row_body`], with the row's thinking budget `thinking`
/// ([`crate::trace::Reasoning::budget_to_send`]); with `marks`, also the byte range of every message of the
/// row's `messages` in `out` (`--live-history` swaps recorded answers at these places). The
/// messages are written one by one, which gives the same bytes as writing the array at once.
pub fn encode_chat_row_body_marked(
    params: &BodyParams,
    chat: &crate::trace::ChatPayload,
    (thinking, session_user): (Option<u32>, Option<&str>),
    out: &mut Vec<u8>,
    marks: Option<&mut Vec<std::ops::Range<usize>>>,
) {
    use serde_json::Value;
    out.clear();
    let mut body: Vec<(&str, Field<'_>)> = Vec::with_capacity(12);
    set_field(
        &mut body,
        "model",
        Field::Owned(Value::from(params.model.as_str())),
    );
    let messages = match &chat.messages {
        Value::Array(items) => Field::Messages(items),
        other => Field::Borrowed(other),
    };
    set_field(&mut body, "messages", messages);
    if let Some(t) = &chat.tools {
        set_field(&mut body, "tools", Field::Borrowed(t));
    }
    // Servers reject max_tokens 0: a row with output_length 0 asks for one token.
    if let Some(n) = chat.max_tokens.map(|n| n.max(1)) {
        set_field(&mut body, "max_tokens", Field::Owned(Value::from(n)));
        if params.exact_output {
            set_field(&mut body, "min_tokens", Field::Owned(Value::from(n)));
            set_field(&mut body, "ignore_eos", Field::Owned(Value::from(true)));
        }
    }
    let max_tokens = chat.max_tokens.map_or(u32::MAX, |n| n.max(1));
    if let Some((k, v)) = thinking_field(ApiKind::Chat, params.thinking, thinking, max_tokens) {
        set_field(&mut body, k, Field::Owned(v));
    }
    set_field(
        &mut body,
        "stream",
        Field::Owned(Value::from(params.stream)),
    );
    if params.stream {
        set_field(
            &mut body,
            "stream_options",
            Field::Owned(serde_json::json!({"include_usage": true})),
        );
    }
    for (k, v) in params.extra.iter().flatten() {
        set_field(&mut body, k, Field::Borrowed(v));
    }
    if let Some(u) = session_user {
        set_field(&mut body, "user", Field::Owned(Value::from(u)));
    }
    for (k, v) in chat.extra.iter().flatten() {
        set_field(&mut body, k, Field::Borrowed(v));
    }
    write_fields(&body, out, marks);
}

/// Serialise the body of a `messages` trace row for `kind` into `out` (cleared first): chat
/// completions as [`encode_chat_row_body`]; Responses and Messages with the row converted to
/// their shapes ([`super::convert`]), the token budget as `max_output_tokens` / `max_tokens`
/// (Messages always has one: [`MESSAGES_DEFAULT_MAX_TOKENS`] when the row gives none), the
/// session id as Responses' `user` or Anthropic's `metadata.user_id`, then `--extra-body` and
/// the row's `extra` as for chat.
pub fn encode_row_body(
    kind: ApiKind,
    params: &BodyParams,
    chat: &crate::trace::ChatPayload,
    (thinking, session_user): (Option<u32>, Option<&str>),
    out: &mut Vec<u8>,
) {
    use serde_json::Value;
    let anthropic = match kind {
        ApiKind::Messages => true,
        ApiKind::Responses => false,
        _ => {
            let user = (thinking, session_user);
            return encode_chat_row_body_marked(params, chat, user, out, None);
        }
    };
    out.clear();
    let mut body: Vec<(&str, Field<'_>)> = Vec::with_capacity(12);
    set_field(
        &mut body,
        "model",
        Field::Owned(Value::from(params.model.as_str())),
    );
    if anthropic {
        let (system, messages) = super::convert::to_anthropic(&chat.messages);
        if let Some(sys) = system {
            set_field(&mut body, "system", Field::Owned(sys));
        }
        set_field(&mut body, "messages", Field::Owned(messages));
        if let Some(t) = &chat.tools {
            let tools = super::convert::anthropic_tools(t);
            set_field(&mut body, "tools", Field::Owned(tools));
        }
    } else {
        let input = super::convert::to_responses(&chat.messages);
        set_field(&mut body, "input", Field::Owned(input));
        if let Some(t) = &chat.tools {
            let tools = super::convert::responses_tools(t);
            set_field(&mut body, "tools", Field::Owned(tools));
        }
    }
    let budget_key = if anthropic {
        "max_tokens"
    } else {
        "max_output_tokens"
    };
    // Servers reject a budget of 0: a row with output_length 0 asks for one token.
    match (chat.max_tokens.map(|n| n.max(1)), anthropic) {
        (Some(n), _) => {
            set_field(&mut body, budget_key, Field::Owned(Value::from(n)));
            if params.exact_output {
                set_field(&mut body, "min_tokens", Field::Owned(Value::from(n)));
                set_field(&mut body, "ignore_eos", Field::Owned(Value::from(true)));
            }
        }
        (None, true) => set_field(
            &mut body,
            budget_key,
            Field::Owned(Value::from(MESSAGES_DEFAULT_MAX_TOKENS)),
        ),
        (None, false) => {}
    }
    let max_tokens = chat
        .max_tokens
        .map_or(MESSAGES_DEFAULT_MAX_TOKENS, |n| n.max(1));
    if let Some((k, v)) = thinking_field(kind, params.thinking, thinking, max_tokens) {
        set_field(&mut body, k, Field::Owned(v));
    }
    set_field(
        &mut body,
        "stream",
        Field::Owned(Value::from(params.stream)),
    );
    if !anthropic {
        set_field(&mut body, "store", Field::Owned(Value::from(false)));
    }
    for (k, v) in params.extra.iter().flatten() {
        set_field(&mut body, k, Field::Borrowed(v));
    }
    if let Some(u) = session_user {
        let (key, v) = session_user_field(kind, u);
        set_field(&mut body, key, Field::Owned(v));
    }
    for (k, v) in chat.extra.iter().flatten() {
        set_field(&mut body, k, Field::Borrowed(v));
    }
    write_fields(&body, out, None);
}

/// The top-level field that carries a session id for `kind`: OpenAI's `user`, Anthropic's
/// `metadata.user_id`.
fn session_user_field(kind: ApiKind, user: &str) -> (&'static str, serde_json::Value) {
    match kind {
        ApiKind::Messages => ("metadata", serde_json::json!({ "user_id": user })),
        _ => ("user", serde_json::Value::from(user)),
    }
}

/// `--session-user` on a synthetic body: the session id appended inside the body's top-level
/// object as the API carries it (OpenAI chat, completions and Responses: `user`; Messages:
/// `metadata.user_id`; TGI has no such field: nothing).
pub fn append_session_user(kind: ApiKind, body: &mut Vec<u8>, user: &str) {
    if !kind.openai_style_server() || body.last() != Some(&b'}') {
        return;
    }
    let (key, v) = session_user_field(kind, user);
    body.pop();
    body.push(b',');
    let _ = serde_json::to_writer(&mut *body, key);
    body.push(b':');
    let _ = serde_json::to_writer(&mut *body, &v);
    body.push(b'}');
}

/// Sets `key` to `v`, in place when the key is already there (no duplicate keys).
fn set_field<'k>(body: &mut Vec<(&'k str, Field<'k>)>, key: &'k str, v: Field<'k>) {
    match body.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = v,
        None => body.push((key, v)),
    }
}

/// Writes the fields as one JSON object into `out`; with `marks`, the byte range of every
/// message of a [`Field::Messages`] too.
fn write_fields(
    body: &[(&str, Field<'_>)],
    out: &mut Vec<u8>,
    mut marks: Option<&mut Vec<std::ops::Range<usize>>>,
) {
    if let Some(m) = marks.as_deref_mut() {
        m.clear();
    }
    out.push(b'{');
    for (i, (k, v)) in body.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let r = serde_json::to_writer(&mut *out, k).and_then(|()| {
            out.push(b':');
            match v {
                Field::Messages(items) => {
                    out.push(b'[');
                    for (j, m) in items.iter().enumerate() {
                        if j > 0 {
                            out.push(b',');
                        }
                        let at = out.len();
                        serde_json::to_writer(&mut *out, m)?;
                        if let Some(marks) = marks.as_deref_mut() {
                            marks.push(at..out.len());
                        }
                    }
                    out.push(b']');
                    Ok(())
                }
                Field::Borrowed(v) => serde_json::to_writer(&mut *out, v),
                Field::Owned(v) => serde_json::to_writer(&mut *out, v),
            }
        });
        debug_assert!(r.is_ok());
    }
    out.push(b'}');
}

/// `--live-history`: where the recorded answers of a turn's earlier turns sit in its body, so
/// the answers the server actually gave can take their place when the turn is released (the
/// rest of the body is built ahead of time like any other).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LiveBody {
    /// In body order.
    pub slots: Vec<LiveSlot>,
}

/// One recorded answer in a body; see [`LiveBody`].
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSlot {
    /// Whose answer: 1 = the parent turn's, 2 = the grandparent's, ...
    pub depth: u32,
    /// The body bytes of the recorded answer message(s); an empty range when the history has
    /// no recorded answer there (a live answer is then inserted, after a comma).
    pub bytes: std::ops::Range<usize>,
    /// The live answer message up to its content: `{"role":"assistant",` (plus the recorded
    /// `"tool_calls":[...],` when the recorded answer called tools, since the trace's tool
    /// results answer them) `"content":`.
    pub head: Box<[u8]>,
}

impl LiveSlot {
    /// The head of an answer message that keeps these recorded tool calls.
    pub fn head_with(tool_calls: &[&serde_json::Value]) -> Box<[u8]> {
        let mut h = b"{\"role\":\"assistant\",".to_vec();
        if !tool_calls.is_empty() {
            h.extend_from_slice(b"\"tool_calls\":");
            let _ = serde_json::to_writer(&mut h, tool_calls);
            h.push(b',');
        }
        h.extend_from_slice(b"\"content\":");
        h.into_boxed_slice()
    }
}

impl LiveBody {
    /// `body` with the recorded answers replaced by the live ones (`answer(depth)`); `None`
    /// when no live answer is known (send `body` as it is). A slot without a live answer keeps
    /// the recorded text.
    pub fn rebuild<'a>(
        &self,
        body: &[u8],
        answer: impl Fn(u32) -> Option<&'a str>,
    ) -> Option<Vec<u8>> {
        let answers: Vec<Option<&str>> = self.slots.iter().map(|s| answer(s.depth)).collect();
        if answers.iter().all(Option::is_none) {
            return None;
        }
        let extra: usize = answers.iter().flatten().map(|a| a.len() + 64).sum();
        let mut out = Vec::with_capacity(body.len() + extra);
        let mut at = 0;
        for (slot, text) in self.slots.iter().zip(&answers) {
            let Some(text) = text else { continue };
            out.extend_from_slice(&body[at..slot.bytes.start]);
            if slot.bytes.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(&slot.head);
            let _ = serde_json::to_writer(&mut out, text);
            out.push(b'}');
            at = slot.bytes.end;
        }
        out.extend_from_slice(&body[at..]);
        Some(out)
    }
}

/// Serialise the body of one request into `out` (cleared first).
///
/// Token-id prompts are only valid where [`ApiKind::takes_token_ids`]; the caller validates that
/// once at start-up (`config`), so here a mismatch falls back to an empty text prompt.
pub fn encode_body(
    kind: ApiKind,
    params: &BodyParams,
    prompt: PromptPayload<'_>,
    (max_tokens, thinking): (u32, Option<u32>),
    out: &mut Vec<u8>,
) {
    out.clear();
    let exact = params.exact_output;
    let thinking = thinking_field(kind, params.thinking, thinking, max_tokens).map(|(_, v)| v);
    let text = match prompt {
        PromptPayload::Text(t) => t,
        PromptPayload::TokenIds(_) => "",
    };
    let result = match kind {
        ApiKind::Chat | ApiKind::Completions => {
            let body = OpenAiBody {
                model: &params.model,
                messages: (kind == ApiKind::Chat).then_some([Message {
                    role: "user",
                    content: text,
                }]),
                prompt: (kind == ApiKind::Completions).then_some(match prompt {
                    PromptPayload::Text(t) => CompletionPrompt::Text(t),
                    PromptPayload::TokenIds(ids) => CompletionPrompt::Ids(ids),
                }),
                max_tokens,
                min_tokens: exact.then_some(max_tokens),
                ignore_eos: exact.then_some(true),
                thinking_token_budget: thinking,
                stream: params.stream,
                stream_options: params.stream.then_some(StreamOptions {
                    include_usage: true,
                }),
                extra: params.extra.as_ref(),
            };
            serde_json::to_writer(&mut *out, &body)
        }
        ApiKind::Responses => {
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
            serde_json::to_writer(&mut *out, &body)
        }
        ApiKind::Messages => {
            let body = MessagesBody {
                model: &params.model,
                messages: [Message {
                    role: "user",
                    content: text,
                }],
                max_tokens,
                min_tokens: exact.then_some(max_tokens),
                ignore_eos: exact.then_some(true),
                thinking,
                stream: params.stream,
                extra: params.extra.as_ref(),
            };
            serde_json::to_writer(&mut *out, &body)
        }
        ApiKind::VllmGrpc => {
            let prompt = match prompt {
                PromptPayload::TokenIds(ids) => Ok(ids),
                PromptPayload::Text(t) => Err(t),
            };
            super::vllm_grpc::encode_body(prompt, max_tokens, (exact, params.stream), out);
            return;
        }
        ApiKind::TgiGenerate | ApiKind::TgiGenerateStream => {
            let body = TgiBody {
                inputs: text,
                parameters: TgiParameters {
                    max_new_tokens: max_tokens,
                    details: true,
                    ignore_eos_token: exact.then_some(true),
                },
                stream: kind == ApiKind::TgiGenerateStream,
            };
            serde_json::to_writer(&mut *out, &body)
        }
    };
    // Serialising into a Vec cannot fail for these types (no maps with non-string keys).
    debug_assert!(result.is_ok());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(stream: bool) -> BodyParams {
        BodyParams {
            model: "m".into(),
            stream,
            exact_output: true,
            extra: None,
            thinking: Default::default(),
        }
    }

    #[test]
    fn chat_body_asks_for_exact_tokens_and_usage() {
        let mut out = Vec::new();
        encode_body(
            ApiKind::Chat,
            &params(true),
            PromptPayload::Text(" a\"b"),
            (7, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["messages"][0]["content"], " a\"b");
        assert_eq!(v["messages"][0]["role"], "user");
        assert_eq!(v["max_tokens"], 7);
        assert_eq!(v["min_tokens"], 7);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert!(v.get("prompt").is_none());
    }

    #[test]
    fn completions_with_token_ids_and_extra() {
        let mut p = params(false);
        p.exact_output = false;
        let mut extra = serde_json::Map::new();
        extra.insert("temperature".into(), 0.into());
        p.extra = Some(extra);
        let mut out = Vec::new();
        encode_body(
            ApiKind::Completions,
            &p,
            PromptPayload::TokenIds(&[1, 2, 3]),
            (5, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["prompt"], serde_json::json!([1, 2, 3]));
        assert_eq!(v["stream"], false);
        assert!(v.get("stream_options").is_none());
        assert!(v.get("min_tokens").is_none());
        assert_eq!(v["temperature"], 0);
    }

    #[test]
    fn live_answers_replace_recorded_ones() {
        let chat = crate::trace::ChatPayload {
            messages: serde_json::json!([
                {"role": "user", "content": "q1"},
                {"role": "assistant", "content": "recorded one"},
                {"role": "user", "content": "q2"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "r"},
                {"role": "user", "content": "q3"}
            ]),
            tools: None,
            extra: None,
            max_tokens: Some(4),
            prompt_token_ids: None,
            text_input: None,
        };
        let mut out = Vec::new();
        let mut marks = Vec::new();
        encode_chat_row_body_marked(
            &params(false),
            &chat,
            (None, None),
            &mut out,
            Some(&mut marks),
        );
        let mut plain = Vec::new();
        encode_chat_row_body(&params(false), &chat, None, &mut plain);
        assert_eq!(out, plain, "marking does not change the bytes");
        assert_eq!(marks.len(), 6);
        let msg1: serde_json::Value = serde_json::from_slice(&out[marks[1].clone()]).unwrap();
        assert_eq!(msg1["content"], "recorded one");
        let calls = chat.messages[3]["tool_calls"].clone();
        let live = LiveBody {
            slots: vec![
                LiveSlot {
                    depth: 2,
                    bytes: marks[1].clone(),
                    head: LiveSlot::head_with(&[]),
                },
                LiveSlot {
                    depth: 1,
                    bytes: marks[3].clone(),
                    head: LiveSlot::head_with(&[&calls[0]]),
                },
            ],
        };
        assert_eq!(live.rebuild(&out, |_| None), None);
        let both = live
            .rebuild(&out, |d| {
                Some(if d == 1 { "new \"two\"" } else { "new one" })
            })
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&both).unwrap();
        assert_eq!(
            v["messages"][1],
            serde_json::json!({"role": "assistant", "content": "new one"})
        );
        assert_eq!(v["messages"][3]["content"], "new \"two\"");
        assert_eq!(
            v["messages"][3]["tool_calls"],
            serde_json::json!([calls[0]])
        );
        assert_eq!(v["messages"][5]["content"], "q3");
        assert_eq!(v["max_tokens"], 4);
        // Only the grandparent's answer known: the parent's recorded answer stays.
        let one = live.rebuild(&out, |d| (d == 2).then_some("x")).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&one).unwrap();
        assert_eq!(v["messages"][1]["content"], "x");
        assert_eq!(v["messages"][3], chat.messages[3]);
        // A history without a recorded answer: the live one is inserted.
        let ins = LiveBody {
            slots: vec![LiveSlot {
                depth: 1,
                bytes: marks[0].end..marks[0].end,
                head: LiveSlot::head_with(&[]),
            }],
        };
        let v: serde_json::Value =
            serde_json::from_slice(&ins.rebuild(&out, |_| Some("y")).unwrap()).unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 7);
        assert_eq!(v["messages"][1]["content"], "y");
        assert_eq!(v["messages"][2]["content"], "recorded one");
    }

    #[test]
    fn responses_and_messages_bodies() {
        let mut out = Vec::new();
        encode_body(
            ApiKind::Responses,
            &params(true),
            PromptPayload::Text(" a b"),
            (7, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m",
                "input": [{"type": "message", "role": "user", "content": " a b"}],
                "max_output_tokens": 7, "min_tokens": 7, "ignore_eos": true, "stream": true,
                "store": false})
        );
        append_session_user(ApiKind::Responses, &mut out, "s1");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["user"], "s1");
        let mut p = params(false);
        p.exact_output = false;
        encode_body(
            ApiKind::Messages,
            &p,
            PromptPayload::Text(" a b"),
            (5, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": " a b"}],
                "max_tokens": 5, "stream": false})
        );
        append_session_user(ApiKind::Messages, &mut out, "s\"2");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["metadata"], serde_json::json!({"user_id": "s\"2"}));
        let mut tgi = b"{}".to_vec();
        append_session_user(ApiKind::TgiGenerate, &mut tgi, "s");
        assert_eq!(tgi, b"{}");
    }

    /// A `messages` row with a system message, a tool call and its result, tools and extra.
    fn tool_row() -> crate::trace::ChatPayload {
        crate::trace::ChatPayload {
            messages: serde_json::json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}
            ]),
            tools: Some(
                serde_json::json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]),
            ),
            extra: Some(serde_json::Map::from_iter([(
                "temperature".to_string(),
                serde_json::json!(0),
            )])),
            max_tokens: Some(9),
            prompt_token_ids: None,
            text_input: None,
        }
    }

    #[test]
    fn messages_rows_as_messages() {
        let chat = tool_row();
        let mut out = Vec::new();
        encode_row_body(
            ApiKind::Messages,
            &params(true),
            &chat,
            (None, Some("s")),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["system"], "Be brief.");
        assert_eq!(v["messages"].as_array().unwrap().len(), 3);
        assert_eq!(v["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(
            v["messages"][1]["content"][0]["input"],
            serde_json::json!({"x": 1})
        );
        assert_eq!(v["messages"][2]["content"][0]["type"], "tool_result");
        assert_eq!(
            v["tools"],
            serde_json::json!([{"name": "f", "input_schema": {"type": "object"}}])
        );
        assert_eq!(
            (v["max_tokens"].as_u64(), v["min_tokens"].as_u64()),
            (Some(9), Some(9))
        );
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream"], true);
        assert!(v.get("stream_options").is_none());
        assert_eq!(v["metadata"]["user_id"], "s");
        assert_eq!(v["temperature"], 0);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 10, "{keys:?}");
        assert!(out.starts_with(br#"{"model":"m","system":"Be brief.","messages":["#));
    }

    #[test]
    fn messages_rows_as_responses() {
        let chat = tool_row();
        let mut out = Vec::new();
        encode_row_body(
            ApiKind::Responses,
            &params(false),
            &chat,
            (None, Some("s")),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let items = v["input"].as_array().unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(
            (items[0]["type"].as_str(), items[0]["role"].as_str()),
            (Some("message"), Some("system"))
        );
        assert_eq!(items[2]["type"], "function_call");
        assert_eq!(items[3]["type"], "function_call_output");
        assert_eq!(v["tools"][0]["name"], "f");
        assert_eq!(v["max_output_tokens"], 9);
        assert_eq!(
            (v["store"].as_bool(), v["user"].as_str()),
            (Some(false), Some("s"))
        );
        assert!(v.get("messages").is_none() && v.get("max_tokens").is_none());
    }

    /// No output_length: Anthropic's required max_tokens gets the default; Responses none;
    /// chat: the chat encoder's bytes.
    #[test]
    fn messages_rows_without_output_length() {
        let mut chat = tool_row();
        chat.max_tokens = None;
        let mut out = Vec::new();
        encode_row_body(
            ApiKind::Messages,
            &params(false),
            &chat,
            (None, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["max_tokens"], MESSAGES_DEFAULT_MAX_TOKENS);
        assert!(v.get("min_tokens").is_none() && v.get("metadata").is_none());
        encode_row_body(
            ApiKind::Responses,
            &params(false),
            &chat,
            (None, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(v.get("max_output_tokens").is_none());
        let mut plain = Vec::new();
        encode_chat_row_body(&params(true), &chat, None, &mut plain);
        encode_row_body(ApiKind::Chat, &params(true), &chat, (None, None), &mut out);
        assert_eq!(out, plain);
    }

    #[test]
    fn tgi_body() {
        let mut out = Vec::new();
        encode_body(
            ApiKind::TgiGenerateStream,
            &params(true),
            PromptPayload::Text("hi"),
            (9, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["inputs"], "hi");
        assert_eq!(v["parameters"]["max_new_tokens"], 9);
        assert_eq!(v["parameters"]["details"], true);
        assert_eq!(v["stream"], true);
    }
}
