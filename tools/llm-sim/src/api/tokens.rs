//! The token routes: vLLM's `POST /tokenize` and `POST /detokenize`, and Anthropic's
//! `POST /v1/messages/count_tokens`.

use hyper::{Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::error::{bad, ApiError};
use super::http::{json_response, Api, Body};
use super::job::{check_model, parse};
use super::messages_api;
use super::parse::{chat_messages, InMessage};
use crate::state::AppState;

#[derive(Deserialize)]
struct TokenizeRequest {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    messages: Option<Vec<InMessage>>,
    #[serde(default)]
    tools: Option<serde_json::Value>,
    #[serde(default)]
    add_special_tokens: Option<bool>,
    #[serde(default)]
    add_generation_prompt: Option<bool>,
    #[serde(default)]
    return_token_strs: Option<bool>,
}

#[derive(Deserialize)]
struct DetokenizeRequest {
    #[serde(default)]
    model: Option<String>,
    tokens: Vec<u32>,
}

/// `POST /tokenize` in vLLM's shapes: `{"prompt": text}` (special tokens added unless
/// `add_special_tokens` is false) or `{"messages": [...]}` (chat template,
/// `add_generation_prompt` true unless false) → `{"count", "max_model_len", "tokens",
/// "token_strs"}`.
pub fn tokenize(state: &AppState, body: &[u8]) -> Response<Body> {
    let api = Api::Completion;
    let run = || -> Result<serde_json::Value, ApiError> {
        let req: TokenizeRequest = parse(api, body)?;
        check_model(state, &req.model)?;
        let tokens = match (req.prompt, req.messages) {
            (Some(p), None) => state
                .tokenizer
                .encode_text_with(&p, req.add_special_tokens.unwrap_or(true))
                .map_err(|e| bad(api, e))?,
            (None, Some(m)) => {
                let (msgs, images) = chat_messages(api, m, super::parse::image_vocab(state))?;
                let text = state
                    .tokenizer
                    .encode_chat_tools(
                        &msgs,
                        req.tools.as_ref(),
                        req.add_generation_prompt.unwrap_or(true),
                    )
                    .map_err(|e| bad(api, e))?;
                images.put_before(text)
            }
            _ => return Err(bad(api, "Give exactly one of `prompt` and `messages`.")),
        };
        let strs = if req.return_token_strs == Some(true) {
            Some(
                state
                    .tokenizer
                    .token_strs(&tokens)
                    .map_err(|e| bad(api, e))?,
            )
        } else {
            None
        };
        Ok(
            json!({"count": tokens.len(), "max_model_len": state.cfg.max_model_len,
                  "tokens": tokens, "token_strs": strs}),
        )
    };
    match run() {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => e.into_response(api),
    }
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`, the prompt tokens of the same
/// Messages request (errors in Anthropic's shape).
pub fn count_message_tokens(state: &AppState, body: &[u8]) -> Response<Body> {
    match messages_api::count_tokens(state, body) {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => e.into_response(Api::Messages),
    }
}

/// `POST /detokenize` in vLLM's shape: `{"tokens": [ids]}` → `{"prompt": text}`.
pub fn detokenize(state: &AppState, body: &[u8]) -> Response<Body> {
    let api = Api::Completion;
    let run = || -> Result<serde_json::Value, ApiError> {
        let req: DetokenizeRequest = parse(api, body)?;
        check_model(state, &req.model)?;
        let text = state
            .tokenizer
            .decode(&req.tokens)
            .map_err(|e| bad(api, e))?;
        Ok(json!({ "prompt": text }))
    };
    match run() {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => e.into_response(api),
    }
}
