//! The fields every OpenAI chat and completions body ends with ([`OpenAiTail`]): shared by
//! `chat.rs` and `completions.rs`, apart from the answer reading in `mod.rs`.

use serde::Serialize;

use crate::backend::body::BodyParams;

/// What chat and completions bodies send after the prompt: the output budget, vLLM's
/// `min_tokens` and `ignore_eos` with `exact_output`, the thinking budget, the stream switch
/// with usage asked for, `--extra-body`.
#[derive(Serialize)]
pub(crate) struct OpenAiTail<'a> {
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

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl<'a> OpenAiTail<'a> {
    pub(crate) fn new(
        params: &'a BodyParams,
        max_tokens: u32,
        thinking: Option<u32>,
    ) -> OpenAiTail<'a> {
        let exact = params.exact_output;
        OpenAiTail {
            max_tokens,
            min_tokens: exact.then_some(max_tokens),
            ignore_eos: exact.then_some(true),
            thinking_token_budget: thinking_to_send(params, thinking).map(|(_, v)| v),
            stream: params.stream,
            stream_options: params.stream.then_some(StreamOptions {
                include_usage: true,
            }),
            extra: params.extra.as_ref(),
        }
    }
}

/// The thinking budget field of a chat or completions request: vLLM's
/// `thinking_token_budget` = the row's budget (`max_tokens` stays the row's whole output:
/// OpenAI's and vLLM's count reasoning tokens).
pub fn thinking_field(budget: u32) -> Option<(&'static str, serde_json::Value)> {
    Some(("thinking_token_budget", serde_json::Value::from(budget)))
}

/// [`thinking_field`] for a row's `thinking` budget, unless `--thinking-budget off`.
pub(super) fn thinking_to_send(
    params: &BodyParams,
    thinking: Option<u32>,
) -> Option<(&'static str, serde_json::Value)> {
    crate::backend::thinking::budget_to_send(params.thinking, thinking).and_then(thinking_field)
}

/// The field that carries a session id (`--session-user`): OpenAI's `user`.
pub fn session_user_field(user: &str) -> (&'static str, serde_json::Value) {
    ("user", serde_json::Value::from(user))
}
