//! A generation request parsed and validated ([`Job`]), whatever its API: the model check, the
//! body's JSON, the lengths resolved against the prompt, the context limit and the KV cache,
//! and the job of an API whose input is rendered as chat messages ([`ChatLike`]).

use hyper::StatusCode;
use serde::Deserialize;

use super::error::{bad, ApiError};
use super::http::Api;
use super::meta::ToolCall;
use super::turn::pick_tool;
use crate::state::AppState;
use crate::tokenize::ChatMessage;

/// A generation request parsed and validated, ready for an engine ([`parse_job`](super::parse_job),
/// [`generate_job`](super::generate_job)).
pub struct Job {
    pub(super) api: Api,
    /// OpenAI's `user` field (Anthropic: `metadata.user_id`).
    pub(super) user: Option<String>,
    pub(super) prompt: Vec<u32>,
    pub(super) max_tokens: u32,
    /// The client asked for exactly `max_tokens` (no simulated EOS).
    pub(super) exact: bool,
    pub(super) min_tokens: u32,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) continuous_usage: bool,
    pub(super) tgi_details: bool,
    /// The request's thinking budget (chat and completions' `thinking_token_budget`,
    /// Anthropic's `thinking.budget_tokens`), which beats `--reasoning-share`.
    pub(super) thinking_budget: Option<u32>,
    /// The tool call the turn ends in (`turn::pick_tool`).
    pub(super) tool: Option<ToolCall>,
    /// Per image in the prompt: (end of its tokens, its image tokens); empty without images.
    pub(super) image_regions: Vec<(u32, u32)>,
    /// Σ image tokens (`multimodal_tokens.image`), 0 without images.
    pub(super) image_tokens: u32,
}

/// A request of an API whose input is rendered as chat messages (Responses, Messages): what
/// [`chat_like_job`] needs to make it a [`Job`].
pub(super) struct ChatLike {
    pub api: Api,
    pub model: Option<String>,
    pub user: Option<String>,
    pub messages: Vec<ChatMessage>,
    /// Tools in the chat completions shape (`{"type":"function","function":{..}}`).
    pub tools: Option<serde_json::Value>,
    pub max_tokens: Option<i64>,
    pub min_tokens: Option<i64>,
    pub ignore_eos: Option<bool>,
    pub stream: bool,
    /// The request's `tool_choice`, as its API spells it.
    pub tool_choice: Option<serde_json::Value>,
    pub thinking_budget: Option<u32>,
}

/// Tokenizes a chat-like request's messages with the chat template the chat path uses (so a
/// prompt has the same template overhead on every API) and checks its lengths.
pub(super) fn chat_like_job(state: &AppState, req: ChatLike) -> Result<Job, ApiError> {
    let api = req.api;
    check_model(state, &req.model)?;
    if req.messages.is_empty() {
        return Err(bad(api, "The input must contain at least one message."));
    }
    let prompt = state
        .tokenizer
        .encode_chat_tools(&req.messages, req.tools.as_ref(), true)
        .map_err(|e| bad(api, e))?;
    let max_tokens = resolve_lengths(state, api, prompt.len(), req.max_tokens, req.min_tokens)?;
    let min_tokens = req.min_tokens.unwrap_or(0) as u32;
    let tool = pick_tool(
        req.tools.as_ref(),
        req.tool_choice.as_ref(),
        state.cfg.tool_call_share,
        &prompt,
    )
    .map_err(|e| bad(api, e))?;
    Ok(Job {
        api,
        user: req.user,
        prompt,
        max_tokens,
        exact: req.ignore_eos == Some(true) || min_tokens >= max_tokens,
        min_tokens,
        stream: req.stream,
        include_usage: true,
        continuous_usage: false,
        tgi_details: false,
        thinking_budget: req.thinking_budget,
        tool,
        image_regions: Vec::new(),
        image_tokens: 0,
    })
}

impl Job {
    /// The prompt's token ids.
    pub fn prompt(&self) -> &[u32] {
        &self.prompt
    }

    /// The request's OpenAI `user` field.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }
}

/// A request naming a model that is none of the served names gets vLLM 0.32's 404.
pub(super) fn check_model(state: &AppState, model: &Option<String>) -> Result<(), ApiError> {
    match model {
        Some(m) if !state.cfg.served_names().any(|n| n == m) => Err(ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!(
                "The model `{m}` does not exist. Valid aliases: {}.",
                state.cfg.served_names().collect::<Vec<_>>().join(", ")
            ),
        }),
        _ => Ok(()),
    }
}

/// Resolves max_tokens/min_tokens against the prompt length and the context limit.
pub(super) fn resolve_lengths(
    state: &AppState,
    api: Api,
    prompt_len: usize,
    max_tokens: Option<i64>,
    min_tokens: Option<i64>,
) -> Result<u32, ApiError> {
    let limit = u64::from(state.cfg.max_model_len);
    let p = prompt_len as u64;
    if prompt_len == 0 {
        return Err(bad(api, "The prompt cannot be empty."));
    }
    let name = match api {
        Api::Tgi => "max_new_tokens",
        Api::Responses => "max_output_tokens",
        _ => "max_tokens",
    };
    let max = match max_tokens {
        Some(v) if v < 1 => return Err(bad(api, format!("{name} must be at least 1, got {v}."))),
        Some(v) => v as u64,
        None => u64::from(state.cfg.default_max_tokens)
            .min(limit.saturating_sub(p))
            .max(1),
    };
    if let Some(m) = min_tokens {
        if m < 0 {
            return Err(bad(
                api,
                format!("min_tokens must be greater than or equal to 0, got {m}."),
            ));
        }
        if m as u64 > max {
            return Err(bad(
                api,
                format!("min_tokens must be less than or equal to max_tokens={max}, got {m}."),
            ));
        }
    }
    if api == Api::Tgi && p + max > limit {
        return Err(bad(api, format!(
            "Input validation error: `inputs` tokens + `max_new_tokens` must be <= {limit}. Given: {p} `inputs` tokens and {max} `max_new_tokens`"
        )));
    }
    // vLLM 0.32: a prompt past the context length is refused; so is a max_tokens past it; a
    // prompt + max_tokens past it is served with max_tokens cut to what fits.
    if p > limit {
        return Err(bad(api, format!(
            "This model's maximum context length is {limit} tokens. However, your prompt contains at least {} input tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value={})",
            limit + 1, limit + 1
        )));
    }
    if max > limit {
        return Err(bad(api, format!(
            "{name}={max} cannot be greater than max_model_len={limit}. Please request fewer output tokens. (parameter={name}, value={max})"
        )));
    }
    if p == limit {
        // No room for one output token: vLLM 0.32 cuts max_tokens to 0 and refuses that.
        return Err(bad(
            api,
            format!("{name} must be at least 1, got 0. (parameter={name}, value=0)"),
        ));
    }
    let max = max.min(limit - p);
    let blocks = (p + max).div_ceil(u64::from(state.cfg.block_size));
    if blocks > u64::from(state.cfg.num_gpu_blocks) {
        return Err(bad(
            api,
            format!(
                "The request needs {blocks} KV cache blocks ({} tokens) but the simulated cache has only {}.",
                p + max,
                state.cfg.num_gpu_blocks
            ),
        ));
    }
    Ok(max as u32)
}

pub(super) fn parse<T: for<'de> Deserialize<'de>>(api: Api, body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad(api, format!("Invalid request body: {e}")))
}
