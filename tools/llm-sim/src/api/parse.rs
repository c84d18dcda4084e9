//! Request parsing and validation of the OpenAI chat and completions routes and TGI's
//! `/generate` and `/generate_stream`, and [`parse_job`], the job of a request of any API (the
//! Responses and Messages requests are converted in `responses_api.rs` and `messages_api.rs`).

use serde::Deserialize;

use super::error::{bad, ApiError};
use super::http::Api;
use super::image::PromptImages;
use super::job::{check_model, parse, resolve_lengths, Job};
use super::turn::pick_tool;
use super::{messages_api, responses_api};
use crate::state::AppState;
use crate::tokenize::ChatMessage;

#[derive(Deserialize, Default)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
    #[serde(default)]
    continuous_usage_stats: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
pub(super) struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    /// `{"url": ..}` or the URL itself.
    #[serde(default)]
    image_url: Option<serde_json::Value>,
}

#[derive(Deserialize)]
pub(super) struct InMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    tool_calls: Option<serde_json::Value>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct ChatRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<InMessage>,
    #[serde(default)]
    tools: Option<serde_json::Value>,
    #[serde(default)]
    tool_choice: Option<serde_json::Value>,
    /// vLLM's thinking budget: the model thinks for at most this many tokens.
    #[serde(default)]
    thinking_token_budget: Option<i64>,
    #[serde(default)]
    max_tokens: Option<i64>,
    #[serde(default)]
    max_completion_tokens: Option<i64>,
    #[serde(default)]
    min_tokens: Option<i64>,
    #[serde(default)]
    ignore_eos: Option<bool>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    n: Option<i64>,
    /// OpenAI's end-user id (the built-in router's `session` policy may route by it).
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Prompt {
    Text(String),
    Ids(Vec<u32>),
    Texts(Vec<String>),
    IdLists(Vec<Vec<u32>>),
}

#[derive(Deserialize)]
struct CompletionRequest {
    #[serde(default)]
    model: Option<String>,
    prompt: Prompt,
    /// Accepted as vLLM does; completions have no reasoning parser, so it changes nothing.
    #[serde(default)]
    thinking_token_budget: Option<i64>,
    #[serde(default)]
    max_tokens: Option<i64>,
    #[serde(default)]
    min_tokens: Option<i64>,
    #[serde(default)]
    ignore_eos: Option<bool>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    n: Option<i64>,
    /// OpenAI's end-user id (the built-in router's `session` policy may route by it).
    #[serde(default)]
    user: Option<String>,
}

#[derive(Deserialize, Default)]
struct TgiParameters {
    #[serde(default)]
    max_new_tokens: Option<i64>,
    #[serde(default)]
    details: Option<bool>,
}

#[derive(Deserialize)]
struct TgiRequest {
    inputs: String,
    #[serde(default)]
    parameters: Option<TgiParameters>,
}

/// Parses and validates a generation request of `api` against `state`'s model, tokenizer and
/// limits, without serving it (the built-in router parses once, then picks the instance).
pub fn parse_job(
    state: &AppState,
    api: Api,
    body: &[u8],
    tgi_stream: bool,
) -> Result<Job, ApiError> {
    match api {
        Api::Chat => chat_job(state, body),
        Api::Completion => completion_job(state, body),
        Api::Tgi => tgi_job(state, body, tgi_stream),
        Api::Responses => responses_api::job(state, body),
        Api::Messages => messages_api::job(state, body),
    }
}

fn check_n(api: Api, n: Option<i64>) -> Result<(), ApiError> {
    match n {
        None | Some(1) => Ok(()),
        Some(v) => Err(bad(api, format!("llm-sim supports only n=1, got n={v}."))),
    }
}

fn stream_flags(
    api: Api,
    stream: bool,
    opts: Option<StreamOptions>,
) -> Result<(bool, bool), ApiError> {
    match opts {
        Some(_) if !stream => Err(bad(
            api,
            "Stream options can only be defined when `stream=True`.",
        )),
        Some(o) => Ok((
            o.include_usage.unwrap_or(false),
            o.include_usage.unwrap_or(false) && o.continuous_usage_stats.unwrap_or(false),
        )),
        None => Ok((false, false)),
    }
}

/// Chat messages with their content flattened to text (text parts joined by newlines), and
/// their image parts (`image.rs`; ids below `vocab`).
pub(super) fn chat_messages(
    api: Api,
    messages: Vec<InMessage>,
    vocab: u32,
) -> Result<(Vec<ChatMessage>, PromptImages), ApiError> {
    let mut images = PromptImages::default();
    let mut msgs = Vec::with_capacity(messages.len());
    for m in messages {
        let content = match m.content {
            None => String::new(),
            Some(Content::Text(t)) => t,
            Some(Content::Parts(parts)) => {
                let mut texts = Vec::with_capacity(parts.len());
                for p in parts {
                    if p.kind == "image_url" {
                        let url = p.image_url.as_ref().and_then(|v| match v {
                            serde_json::Value::String(s) => Some(s.as_str()),
                            v => v.get("url")?.as_str(),
                        });
                        let url = url.ok_or_else(|| bad(api, "An image_url part needs a url."))?;
                        images.add(api, url, vocab)?;
                        continue;
                    }
                    if p.kind != "text" {
                        return Err(bad(
                            api,
                            format!("llm-sim accepts only text content parts, got `{}`.", p.kind),
                        ));
                    }
                    texts.push(p.text.unwrap_or_default());
                }
                texts.join("\n")
            }
        };
        msgs.push(ChatMessage {
            role: m.role,
            content,
            tool_calls: m.tool_calls,
            tool_call_id: m.tool_call_id,
            name: m.name,
        });
    }
    Ok((msgs, images))
}

/// The vocabulary image token ids stay below (the tokenizer's, else the built-in list's).
pub(super) fn image_vocab(state: &AppState) -> u32 {
    state.tokenizer.vocab_size().unwrap_or(32_000)
}

fn chat_job(state: &AppState, body: &[u8]) -> Result<Job, ApiError> {
    let api = Api::Chat;
    let req: ChatRequest = parse(api, body)?;
    check_model(state, &req.model)?;
    check_n(api, req.n)?;
    if req.messages.is_empty() {
        return Err(bad(api, "messages must contain at least one message."));
    }
    let (msgs, images) = chat_messages(api, req.messages, image_vocab(state))?;
    let prompt = state
        .tokenizer
        .encode_chat_tools(&msgs, req.tools.as_ref(), true)
        .map_err(|e| bad(api, e))?;
    let prompt = images.put_before(prompt);
    let stream = req.stream.unwrap_or(false);
    let (include_usage, continuous_usage) = stream_flags(api, stream, req.stream_options)?;
    let max = req.max_completion_tokens.or(req.max_tokens);
    let max_tokens = resolve_lengths(state, api, prompt.len(), max, req.min_tokens)?;
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
        stream,
        include_usage,
        continuous_usage,
        tgi_details: false,
        thinking_budget: thinking_budget(api, req.thinking_token_budget)?,
        tool,
        image_regions: images.regions,
        image_tokens: images.image_tokens,
    })
}

/// vLLM's `thinking_token_budget`: a non-negative integer.
fn thinking_budget(api: Api, v: Option<i64>) -> Result<Option<u32>, ApiError> {
    match v {
        Some(b) if b < 0 => Err(bad(
            api,
            format!("`thinking_token_budget` must be a non-negative integer, got {b}."),
        )),
        Some(b) => Ok(Some(b.min(i64::from(u32::MAX)) as u32)),
        None => Ok(None),
    }
}

fn completion_job(state: &AppState, body: &[u8]) -> Result<Job, ApiError> {
    let api = Api::Completion;
    let req: CompletionRequest = parse(api, body)?;
    check_model(state, &req.model)?;
    check_n(api, req.n)?;
    let prompt = match req.prompt {
        Prompt::Text(t) => state.tokenizer.encode_text(&t).map_err(|e| bad(api, e))?,
        Prompt::Texts(mut v) if v.len() == 1 => state
            .tokenizer
            .encode_text(&v.remove(0))
            .map_err(|e| bad(api, e))?,
        Prompt::IdLists(mut v) if v.len() == 1 => v.remove(0),
        Prompt::Ids(ids) => ids,
        Prompt::Texts(_) | Prompt::IdLists(_) => {
            return Err(bad(api, "llm-sim serves exactly one prompt per request."))
        }
    };
    if let Some(vs) = state.tokenizer.vocab_size() {
        if let Some(&bad_id) = prompt.iter().find(|&&t| t >= vs) {
            return Err(bad(api, format!("Token id {bad_id} is out of vocabulary")));
        }
    }
    let stream = req.stream.unwrap_or(false);
    let (include_usage, continuous_usage) = stream_flags(api, stream, req.stream_options)?;
    let max_tokens = resolve_lengths(state, api, prompt.len(), req.max_tokens, req.min_tokens)?;
    let min_tokens = req.min_tokens.unwrap_or(0) as u32;
    Ok(Job {
        api,
        user: req.user,
        prompt,
        max_tokens,
        exact: req.ignore_eos == Some(true) || min_tokens >= max_tokens,
        min_tokens,
        stream,
        include_usage,
        continuous_usage,
        tgi_details: false,
        thinking_budget: thinking_budget(api, req.thinking_token_budget)?,
        tool: None,
        image_regions: Vec::new(),
        image_tokens: 0,
    })
}

fn tgi_job(state: &AppState, body: &[u8], stream: bool) -> Result<Job, ApiError> {
    let api = Api::Tgi;
    let req: TgiRequest = parse(api, body)?;
    let params = req.parameters.unwrap_or_default();
    let prompt = state
        .tokenizer
        .encode_text(&req.inputs)
        .map_err(|e| bad(api, e))?;
    let max_tokens = resolve_lengths(state, api, prompt.len(), params.max_new_tokens, None)?;
    Ok(Job {
        api,
        user: None,
        prompt,
        max_tokens,
        exact: false,
        min_tokens: 0,
        stream,
        include_usage: false,
        continuous_usage: false,
        tgi_details: params.details.unwrap_or(false),
        thinking_budget: None,
        tool: None,
        image_regions: Vec::new(),
        image_tokens: 0,
    })
}
