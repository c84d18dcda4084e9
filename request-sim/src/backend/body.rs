//! Request bodies for each API, serialised from typed structs into a reusable buffer.

use serde::Serialize;

use super::ApiKind;

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
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

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
    use serde_json::Value;
    out.clear();
    let mut body: Vec<(&str, Value)> = Vec::with_capacity(12);
    fn set<'k>(body: &mut Vec<(&'k str, Value)>, key: &'k str, v: Value) {
        match body.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = v,
            None => body.push((key, v)),
        }
    }
    set(&mut body, "model", Value::from(params.model.as_str()));
    set(&mut body, "messages", chat.messages.clone());
    if let Some(t) = &chat.tools {
        set(&mut body, "tools", t.clone());
    }
    // Servers reject max_tokens 0: a row with output_length 0 asks for one token.
    if let Some(n) = chat.max_tokens.map(|n| n.max(1)) {
        set(&mut body, "max_tokens", Value::from(n));
        if params.exact_output {
            set(&mut body, "min_tokens", Value::from(n));
            set(&mut body, "ignore_eos", Value::from(true));
        }
    }
    set(&mut body, "stream", Value::from(params.stream));
    if params.stream {
        set(
            &mut body,
            "stream_options",
            serde_json::json!({"include_usage": true}),
        );
    }
    for (k, v) in params.extra.iter().flatten() {
        set(&mut body, k, v.clone());
    }
    if let Some(u) = session_user {
        set(&mut body, "user", Value::from(u));
    }
    for (k, v) in chat.extra.iter().flatten() {
        set(&mut body, k, v.clone());
    }
    out.push(b'{');
    for (i, (k, v)) in body.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let r = serde_json::to_writer(&mut *out, k).and_then(|()| {
            out.push(b':');
            serde_json::to_writer(&mut *out, v)
        });
        debug_assert!(r.is_ok());
    }
    out.push(b'}');
}

/// Serialise the body of one request into `out` (cleared first).
///
/// Token-id prompts are only valid for [`ApiKind::Completions`]; the caller validates that
/// once at start-up (`config`), so here a mismatch falls back to an empty text prompt.
pub fn encode_body(
    kind: ApiKind,
    params: &BodyParams,
    prompt: PromptPayload<'_>,
    max_tokens: u32,
    out: &mut Vec<u8>,
) {
    out.clear();
    let exact = params.exact_output;
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
                stream: params.stream,
                stream_options: params.stream.then_some(StreamOptions {
                    include_usage: true,
                }),
                extra: params.extra.as_ref(),
            };
            serde_json::to_writer(&mut *out, &body)
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
        }
    }

    #[test]
    fn chat_body_asks_for_exact_tokens_and_usage() {
        let mut out = Vec::new();
        encode_body(
            ApiKind::Chat,
            &params(true),
            PromptPayload::Text(" a\"b"),
            7,
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
            5,
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
    fn tgi_body() {
        let mut out = Vec::new();
        encode_body(
            ApiKind::TgiGenerateStream,
            &params(true),
            PromptPayload::Text("hi"),
            9,
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["inputs"], "hi");
        assert_eq!(v["parameters"]["max_new_tokens"], 9);
        assert_eq!(v["parameters"]["details"], true);
        assert_eq!(v["stream"], true);
    }
}
