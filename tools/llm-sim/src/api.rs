//! The HTTP API: request parsing and validation, and responses in the shapes vLLM (OpenAI
//! chat/completions) and TGI (`/generate`, `/generate_stream`) emit, streaming or not. The
//! OpenAI Responses and Anthropic Messages APIs have their request conversion and their shapes
//! in `responses_api.rs` and `messages_api.rs`; their requests run through the same job, engine
//! and streaming loop as chat.

use std::convert::Infallible;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::Deserialize;
use serde_json::json;

use crate::engine::{output_token, CancelOnDrop, NewRequest, Progress, ReqShared};
use crate::faults::FaultPlan;
use crate::metrics::FaultKind;
use crate::state::AppState;
use crate::tokenize::ChatMessage;
use crate::util::{hash3, mix64};
use crate::vocab::builtin_words;
use crate::{messages_api, responses_api};

/// Response body type of every route.
pub type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, io::Error>;

/// Which API a request came through (decides the response shapes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Chat,
    Completion,
    Tgi,
    /// OpenAI Responses (`POST /v1/responses`).
    Responses,
    /// Anthropic Messages (`POST /v1/messages`).
    Messages,
}

pub fn full(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(
        Full::new(body.into())
            .map_err(|e: Infallible| match e {})
            .boxed_unsync(),
    );
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

pub fn json_response(status: StatusCode, v: &serde_json::Value) -> Response<Body> {
    full(status, "application/json", v.to_string())
}

/// A vLLM-style error: `{"object":"error","message":..,"type":..,"param":null,"code":..}`
/// (TGI routes: `{"error":..,"error_type":..}`).
pub fn error_response(api: Api, status: StatusCode, message: &str) -> Response<Body> {
    match api {
        Api::Responses => {
            return json_response(status, &responses_api::error_body(status, message))
        }
        Api::Messages => return json_response(status, &messages_api::error_body(status, message)),
        _ => {}
    }
    if api == Api::Tgi {
        let kind = match status.as_u16() {
            400 | 422 => "validation",
            429 => "overloaded",
            503 => "unhealthy",
            _ => "generation",
        };
        return json_response(status, &json!({"error": message, "error_type": kind}));
    }
    let kind = match status.as_u16() {
        400 => "BadRequestError",
        404 => "NotFoundError",
        409 => "ConflictError",
        413 => "BadRequestError",
        429 => "RateLimitError",
        503 => "ServiceUnavailableError",
        _ => "InternalServerError",
    };
    json_response(
        status,
        &json!({"object": "error", "message": message, "type": kind, "param": null,
                "code": status.as_u16()}),
    )
}

/// A request the server refuses, before it reaches the engine.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn into_response(self, api: Api) -> Response<Body> {
        error_response(api, self.status, &self.message)
    }
}

/// A validation error: 400 on OpenAI routes, 422 on TGI routes.
pub(crate) fn bad(api: Api, msg: impl Into<String>) -> ApiError {
    let status = if api == Api::Tgi {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::BAD_REQUEST
    };
    ApiError {
        status,
        message: msg.into(),
    }
}

// ---------- request types ----------

#[derive(Deserialize, Default)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
    #[serde(default)]
    continuous_usage_stats: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct InMessage {
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

/// A generation request parsed and validated, ready for an engine ([`parse_job`],
/// [`generate_job`]).
pub struct Job {
    api: Api,
    /// OpenAI's `user` field (Anthropic: `metadata.user_id`).
    user: Option<String>,
    prompt: Vec<u32>,
    max_tokens: u32,
    /// The client asked for exactly `max_tokens` (no simulated EOS).
    exact: bool,
    min_tokens: u32,
    stream: bool,
    include_usage: bool,
    continuous_usage: bool,
    tgi_details: bool,
}

/// A request of an API whose input is rendered as chat messages (Responses, Messages): what
/// [`chat_like_job`] needs to make it a [`Job`].
pub(crate) struct ChatLike {
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
}

/// Tokenizes a chat-like request's messages with the chat template the chat path uses (so a
/// prompt has the same template overhead on every API) and checks its lengths.
pub(crate) fn chat_like_job(state: &AppState, req: ChatLike) -> Result<Job, ApiError> {
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

pub(crate) fn check_model(state: &AppState, model: &Option<String>) -> Result<(), ApiError> {
    match model {
        Some(m) if *m != state.cfg.model_name => Err(ApiError {
            status: StatusCode::NOT_FOUND,
            message: format!("The model `{m}` does not exist."),
        }),
        _ => Ok(()),
    }
}

fn check_n(api: Api, n: Option<i64>) -> Result<(), ApiError> {
    match n {
        None | Some(1) => Ok(()),
        Some(v) => Err(bad(api, format!("llm-sim supports only n=1, got n={v}."))),
    }
}

/// Resolves max_tokens/min_tokens against the prompt length and the context limit.
fn resolve_lengths(
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
    if p + max > limit {
        let msg = if api == Api::Tgi {
            format!(
                "Input validation error: `inputs` tokens + `max_new_tokens` must be <= {limit}. Given: {p} `inputs` tokens and {max} `max_new_tokens`"
            )
        } else {
            format!(
                "This model's maximum context length is {limit} tokens. However, you requested {} tokens ({p} in the messages, {max} in the completion). Please reduce the length of the messages or completion.",
                p + max
            )
        };
        return Err(bad(api, msg));
    }
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

pub(crate) fn parse<T: for<'de> Deserialize<'de>>(api: Api, body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad(api, format!("Invalid request body: {e}")))
}

/// Chat messages with their content flattened to text (text parts joined by newlines).
fn chat_messages(api: Api, messages: Vec<InMessage>) -> Result<Vec<ChatMessage>, ApiError> {
    let mut msgs = Vec::with_capacity(messages.len());
    for m in messages {
        let content = match m.content {
            None => String::new(),
            Some(Content::Text(t)) => t,
            Some(Content::Parts(parts)) => {
                let mut texts = Vec::with_capacity(parts.len());
                for p in parts {
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
    Ok(msgs)
}

fn chat_job(state: &AppState, body: &[u8]) -> Result<Job, ApiError> {
    let api = Api::Chat;
    let req: ChatRequest = parse(api, body)?;
    check_model(state, &req.model)?;
    check_n(api, req.n)?;
    if req.messages.is_empty() {
        return Err(bad(api, "messages must contain at least one message."));
    }
    let msgs = chat_messages(api, req.messages)?;
    let prompt = state
        .tokenizer
        .encode_chat_tools(&msgs, req.tools.as_ref(), true)
        .map_err(|e| bad(api, e))?;
    let stream = req.stream.unwrap_or(false);
    let (include_usage, continuous_usage) = stream_flags(api, stream, req.stream_options)?;
    let max = req.max_completion_tokens.or(req.max_tokens);
    let max_tokens = resolve_lengths(state, api, prompt.len(), max, req.min_tokens)?;
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
    })
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
    })
}

// ---------- /tokenize and /detokenize ----------

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
                let msgs = chat_messages(api, m)?;
                state
                    .tokenizer
                    .encode_chat_tools(
                        &msgs,
                        req.tools.as_ref(),
                        req.add_generation_prompt.unwrap_or(true),
                    )
                    .map_err(|e| bad(api, e))?
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

// ---------- serving ----------

/// Serves one generation request of `api`.
pub async fn generate(
    state: Arc<AppState>,
    api: Api,
    body: Bytes,
    tgi_stream: bool,
) -> Response<Body> {
    let (n, plan) = match admit(&state) {
        Ok(a) => a,
        Err(e) => return e.into_response(api),
    };
    let job = parse_job_off_runtime(&state, api, body, tgi_stream).await;
    match job {
        Ok(j) => serve(state, n, plan, j).await,
        Err(e) => e.into_response(api),
    }
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

/// Bodies up to this size are parsed and counted inline with the built-in tokenizer (~6k
/// words: well under a millisecond), and without waiting for their turn with a real one.
const SHORT_BODY_MAX_BYTES: usize = 32 * 1024;

/// [`parse_job`], on a blocking thread when the tokenizer is a real one (or the body long): rendering a chat
/// template and tokenizing a long prompt take milliseconds (a 12k-token Qwen3 prompt), and on
/// the server's runtime thread they held up the engine's steps and every stream (the engine
/// then caught up in bursts: all of a stream's tokens at once). The built-in tokenizer is cheap
/// and stays inline.
///
/// One request is tokenized at a time, in arrival order (`AppState::tokenize_turn`, a fair
/// semaphore), as a server's front end does. With one blocking thread per request, a burst of
/// long prompts was tokenized all at once, sharing the cores: each took as long as the whole
/// burst, and the first one reached the engine only when the last was counted (the client's
/// mean TTFT with Qwen3 was 24% above the built-in tokenizer's). In order, the first enters
/// the engine after its own counting and the others are counted while it is prefilled.
///
/// The built-in tokenizer takes the same path for long bodies (a 12k-word prompt is ~1.5 ms
/// of counting, longer than an engine step): inline, a burst of them held up the engine's
/// steps and streams, and a real tokenizer's timing was compared with a distorted one.
/// Shorter bodies stay inline (a thread hand-off would cost more than the counting).
///
/// With a real tokenizer, short bodies go to a blocking thread at once, without waiting for
/// their turn: the built-in tokenizer counts them inline, so they never queue behind a burst's
/// long prompts, and a real tokenizer's short requests waited for every long one before them
/// (a quarter of the Mooncake trace's requests; the blocking thread still keeps a short body
/// of new words, counted piece by piece, off the runtime thread).
pub async fn parse_job_off_runtime(
    state: &Arc<AppState>,
    api: Api,
    body: Bytes,
    tgi_stream: bool,
) -> Result<Job, ApiError> {
    let short = body.len() < SHORT_BODY_MAX_BYTES;
    if state.tokenizer.is_builtin() && short {
        return parse_job(state, api, &body, tgi_stream);
    }
    let failed = |why: String| ApiError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: format!("Tokenizing the request failed: {why}"),
    };
    // The semaphore is never closed; the permit is held until the job is parsed.
    let _turn = match short {
        true => None,
        false => Some(
            state
                .tokenize_turn
                .acquire()
                .await
                .map_err(|e| failed(e.to_string()))?,
        ),
    };
    let st = state.clone();
    tokio::task::spawn_blocking(move || parse_job(&st, api, &body, tgi_stream))
        .await
        .unwrap_or_else(|e| Err(failed(e.to_string())))
}

/// Serves a request parsed by [`parse_job`] (on an instance with the same model and limits).
pub async fn generate_job(state: Arc<AppState>, job: Job) -> Response<Body> {
    match admit(&state) {
        Ok((n, plan)) => serve(state, n, plan, job).await,
        Err(e) => e.into_response(job.api),
    }
}

/// The readiness check, the request's number and its fault plan; an error when the server is
/// not ready or the plan is an error status.
fn admit(state: &AppState) -> Result<(u64, FaultPlan), ApiError> {
    if !state.is_ready() {
        return Err(ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "The server is still starting (simulated readiness delay).".into(),
        });
    }
    let n = state.req_counter.fetch_add(1, Ordering::Relaxed);
    let plan = state.faults.plan(n);
    if let Some(code) = plan.status {
        state.metrics.count_fault(FaultKind::Status);
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let msg = match code {
            429 => "Simulated fault: too many requests.",
            503 => "Simulated fault: service unavailable.",
            _ => "Simulated fault: internal server error.",
        };
        return Err(ApiError {
            status,
            message: msg.into(),
        });
    }
    Ok((n, plan))
}

/// Hands request number `n` to the engine and answers it (streaming or whole).
async fn serve(state: Arc<AppState>, n: u64, plan: FaultPlan, job: Job) -> Response<Body> {
    let api = job.api;
    let shared = Arc::new(ReqShared::new(job.stream));
    let output_seed = hash3(state.id_seed, n, 0x0u64);
    let prompt_tokens = job.prompt.len() as u32;
    let (length, stops) = match state.cfg.eos_mean_tokens {
        Some(mean) if !job.exact => {
            let drawn = eos_length(output_seed, mean);
            let len = drawn.clamp(job.min_tokens.max(1), job.max_tokens);
            (len, len < job.max_tokens)
        }
        _ => (job.max_tokens, false),
    };
    let queued = state.metrics.unscheduled.fetch_add(1, Ordering::Relaxed);
    if let Some(limit) = state.cfg.max_waiting {
        if queued >= limit as u64 {
            state.metrics.unscheduled.fetch_sub(1, Ordering::Relaxed);
            return error_response(
                api,
                StatusCode::TOO_MANY_REQUESTS,
                &format!("The waiting queue is full ({limit} requests)."),
            );
        }
    }
    let submitted = state.engine.submit(NewRequest {
        prompt: job.prompt,
        max_tokens: length,
        output_seed,
        stops,
        shared: shared.clone(),
    });
    if !submitted {
        state.metrics.unscheduled.fetch_sub(1, Ordering::Relaxed);
        return error_response(
            api,
            StatusCode::SERVICE_UNAVAILABLE,
            "The engine is shutting down.",
        );
    }
    let meta = Meta {
        api,
        id: request_id(api, state.id_seed, n),
        created: now_secs(),
        prompt_tokens,
        max_tokens: length,
        finish: match (stops, api) {
            (false, _) => "length",
            (true, Api::Tgi) => "eos_token",
            (true, _) => "stop",
        },
        output_seed,
        include_usage: job.include_usage,
        continuous_usage: job.continuous_usage,
        tgi_details: job.tgi_details,
        plan,
        fault_at: plan.position(length),
    };
    count_plan_faults(&state, &plan);
    if job.stream {
        stream_response(state, meta, shared)
    } else {
        whole_response(state, meta, shared).await
    }
}

fn count_plan_faults(state: &AppState, plan: &FaultPlan) {
    if plan.reset {
        state.metrics.count_fault(FaultKind::Reset);
    }
    if plan.stall {
        state.metrics.count_fault(FaultKind::Stall);
    }
    if plan.malformed {
        state.metrics.count_fault(FaultKind::Malformed);
    }
    if plan.missing_usage {
        state.metrics.count_fault(FaultKind::MissingUsage);
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn request_id(api: Api, seed: u64, n: u64) -> String {
    let a = mix64(seed ^ n);
    let b = mix64(a ^ 0xA5A5);
    match api {
        Api::Chat => format!("chatcmpl-{a:016x}{b:016x}"),
        Api::Completion => format!("cmpl-{a:016x}{b:016x}"),
        Api::Tgi => format!("tgi-{a:016x}"),
        Api::Responses => format!("resp_{a:016x}{b:016x}"),
        Api::Messages => format!("msg_{a:016x}{b:016x}"),
    }
}

/// Length of a request ended by the simulated EOS: geometric with mean `mean` (at least 1),
/// drawn from the request's output seed.
pub fn eos_length(seed: u64, mean: f64) -> u32 {
    if mean <= 1.0 {
        return 1;
    }
    // Uniform in (0, 1] from 53 bits of the seed's hash.
    let u = ((mix64(seed ^ 0xE05E_E05E) >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let p = 1.0 / mean;
    let extra = (u.ln() / (1.0 - p).ln()).floor();
    1 + extra.min(f64::from(u32::MAX - 1)) as u32
}

/// What the response of one request is made of.
pub(crate) struct Meta {
    pub api: Api,
    pub id: String,
    pub created: u64,
    pub prompt_tokens: u32,
    /// Tokens this request produces (its limit, or the EOS length when it stops earlier).
    pub max_tokens: u32,
    /// `finish_reason` of its last token: `length`, `stop` (TGI: `eos_token`).
    pub finish: &'static str,
    output_seed: u64,
    include_usage: bool,
    continuous_usage: bool,
    tgi_details: bool,
    pub plan: FaultPlan,
    fault_at: u32,
}

fn word(seed: u64, i: u32) -> (u32, &'static str) {
    let id = output_token(seed, i);
    let words = builtin_words();
    (id, words[id as usize % words.len()].as_str())
}

fn usage_json(prompt: u32, completion: u32, cached: u32) -> String {
    format!(
        "{{\"prompt_tokens\":{prompt},\"total_tokens\":{},\"completion_tokens\":{completion},\"prompt_tokens_details\":{{\"cached_tokens\":{cached}}}}}",
        prompt + completion
    )
}

/// Pause before a simulated reset, so the bytes already sent reach the client before the RST
/// (a RST makes the peer's kernel drop data the application has not read yet).
const RESET_PAUSE: Duration = Duration::from_millis(100);

fn reset_error() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "simulated connection reset")
}

/// Non-streaming: waits for the whole completion, then answers in one JSON body.
async fn whole_response(
    state: Arc<AppState>,
    meta: Meta,
    shared: Arc<ReqShared>,
) -> Response<Body> {
    let guard = CancelOnDrop(shared);
    let mut p = Progress {
        generated: 0,
        finished: false,
        aborted: false,
    };
    while !p.finished && !p.aborted {
        p = guard.0.wait_beyond(p.generated).await;
    }
    if p.aborted {
        return error_response(
            meta.api,
            StatusCode::SERVICE_UNAVAILABLE,
            "The request was aborted by the engine.",
        );
    }
    if meta.plan.stall {
        tokio::time::sleep(state.wall(meta.plan.stall_ms)).await;
    }
    let n = p.generated;
    let mut text = String::with_capacity(n as usize * 5);
    for i in 0..n {
        text.push(' ');
        text.push_str(word(meta.output_seed, i).1);
    }
    let cached = guard.0.cached_tokens();
    let usage: serde_json::Value = if meta.plan.missing_usage {
        serde_json::Value::Null
    } else {
        json!({"prompt_tokens": meta.prompt_tokens, "total_tokens": meta.prompt_tokens + n,
               "completion_tokens": n, "prompt_tokens_details": {"cached_tokens": cached}})
    };
    let model = state.cfg.model_name.as_str();
    let mut v = match meta.api {
        Api::Chat => json!({
            "id": meta.id, "object": "chat.completion", "created": meta.created, "model": model,
            "choices": [{"index": 0,
                "message": {"role": "assistant", "reasoning_content": null, "content": text, "tool_calls": []},
                "logprobs": null, "finish_reason": meta.finish, "stop_reason": null}],
            "usage": usage, "prompt_logprobs": null}),
        Api::Completion => json!({
            "id": meta.id, "object": "text_completion", "created": meta.created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": meta.finish,
                "stop_reason": null, "prompt_logprobs": null}],
            "usage": usage}),
        Api::Responses => responses_api::response_object(&meta, model, &text, n, cached),
        Api::Messages => messages_api::message_object(&meta, model, &text, n, cached),
        Api::Tgi => {
            if meta.tgi_details && !meta.plan.missing_usage {
                let tokens: Vec<serde_json::Value> = (0..n)
                    .map(|i| {
                        let (id, w) = word(meta.output_seed, i);
                        json!({"id": id, "text": format!(" {w}"), "logprob": -0.1, "special": false})
                    })
                    .collect();
                json!({"generated_text": text, "details": {"finish_reason": meta.finish,
                    "generated_tokens": n, "seed": null, "prefill": [], "tokens": tokens}})
            } else {
                json!({"generated_text": text})
            }
        }
    };
    if meta.api != Api::Tgi && meta.plan.missing_usage {
        if let Some(o) = v.as_object_mut() {
            o.remove("usage");
        }
    }
    let mut body = v.to_string().into_bytes();
    if meta.plan.malformed {
        body.truncate(body.len() / 2);
    }
    let mut resp = if meta.plan.reset {
        // Send half the body, then fail the connection.
        use futures_util::StreamExt;
        let half = Bytes::from(body[..body.len() / 2].to_vec());
        let frames = futures_util::stream::iter([Ok(Frame::data(half))]).chain(
            futures_util::stream::once(async {
                tokio::time::sleep(RESET_PAUSE).await;
                Err(reset_error())
            }),
        );
        let mut r = Response::new(StreamBody::new(frames).boxed_unsync());
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    } else {
        full(StatusCode::OK, "application/json", body)
    };
    if meta.api == Api::Tgi {
        let h = resp.headers_mut();
        h.insert("x-prompt-tokens", HeaderValue::from(meta.prompt_tokens));
        h.insert("x-generated-tokens", HeaderValue::from(n));
        h.insert("x-cached-tokens", HeaderValue::from(cached));
    }
    resp
}

/// Per-request state of an SSE stream.
struct SseState {
    state: Arc<AppState>,
    guard: CancelOnDrop,
    meta: Meta,
    /// Prefix of every content event up to the token text.
    prefix: String,
    sent: u32,
    stalled: bool,
    done: bool,
    /// The events announcing the response were written (Responses, Messages).
    head_sent: bool,
    /// The text so far (TGI's last event, the Responses and Messages closing events).
    text: String,
    buf: BytesMut,
}

fn stream_response(state: Arc<AppState>, meta: Meta, shared: Arc<ReqShared>) -> Response<Body> {
    let model_json = state.model_json.as_str();
    let prefix = match meta.api {
        Api::Chat => format!(
            "data: {{\"id\":\"{}\",\"object\":\"chat.completion.chunk\",\"created\":{},\"model\":{model_json},\"choices\":[{{\"index\":0,\"delta\":",
            meta.id, meta.created
        ),
        Api::Completion => format!(
            "data: {{\"id\":\"{}\",\"object\":\"text_completion\",\"created\":{},\"model\":{model_json},\"choices\":[{{\"index\":0,\"text\":\"",
            meta.id, meta.created
        ),
        Api::Responses => responses_api::delta_prefix(&meta),
        Api::Messages => messages_api::DELTA_PREFIX.to_string(),
        Api::Tgi => String::new(),
    };
    let text = if matches!(meta.api, Api::Tgi | Api::Responses | Api::Messages) {
        String::with_capacity(meta.max_tokens as usize * 5)
    } else {
        String::new()
    };
    let st = SseState {
        state,
        guard: CancelOnDrop(shared),
        meta,
        prefix,
        sent: 0,
        stalled: false,
        done: false,
        head_sent: false,
        text,
        buf: BytesMut::with_capacity(4096),
    };
    let stream = futures_util::stream::unfold(st, next_frame);
    let mut r = Response::new(StreamBody::new(stream).boxed_unsync());
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    r
}

async fn next_frame(mut st: SseState) -> Option<(Result<Frame<Bytes>, io::Error>, SseState)> {
    if st.done {
        return None;
    }
    if !st.head_sent {
        st.head_sent = true;
        if let Some(frame) = head_frame(&mut st).await {
            return Some((Ok(frame), st));
        }
    }
    let plan = st.meta.plan;
    if plan.stall && !st.stalled && st.sent >= st.meta.fault_at {
        st.stalled = true;
        tokio::time::sleep(st.state.wall(plan.stall_ms)).await;
    }
    if plan.reset && st.sent >= st.meta.fault_at {
        st.done = true;
        tokio::time::sleep(RESET_PAUSE).await;
        return Some((Err(reset_error()), st));
    }
    let p = st.guard.0.wait_beyond(st.sent).await;
    if p.aborted {
        st.done = true;
        return Some((
            Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "request aborted",
            )),
            st,
        ));
    }
    let mut upto = p.generated.min(st.meta.max_tokens);
    if (plan.reset || (plan.stall && !st.stalled)) && st.sent < st.meta.fault_at {
        upto = upto.min(st.meta.fault_at);
    }
    // One buffer per stream, reused: once hyper has written and dropped the previous frames,
    // `reserve` reclaims the same allocation, so steady-state streaming allocates nothing.
    let mut buf = std::mem::take(&mut st.buf);
    buf.reserve((upto - st.sent) as usize * (st.prefix.len() + 80) + 256);
    for i in st.sent..upto {
        if plan.malformed && i == st.meta.fault_at {
            write_malformed(&st, &mut buf);
        }
        write_token(&mut st, i, &mut buf);
    }
    st.sent = upto;
    if p.finished && st.sent >= p.generated {
        write_tail(&st, &mut buf);
        st.done = true;
    }
    let frame = buf.split().freeze();
    st.buf = buf;
    Some((Ok(Frame::data(frame)), st))
}

/// The events a response starts with before its first token, if its API has any: Responses'
/// `response.created` and `response.in_progress` at once (as servers send them on accepting
/// the request), Anthropic's `message_start` once the engine has scheduled the request (its
/// usage tells the prefix-cache hit).
async fn head_frame(st: &mut SseState) -> Option<Frame<Bytes>> {
    let mut buf = BytesMut::with_capacity(1024);
    match st.meta.api {
        Api::Responses => {
            responses_api::write_head(&st.meta, &st.state.cfg.model_name, &mut buf);
        }
        Api::Messages => {
            st.guard.0.wait_admitted().await;
            let cached = st.guard.0.cached_tokens();
            messages_api::write_start(&st.meta, &st.state.cfg.model_name, cached, &mut buf);
        }
        _ => return None,
    }
    Some(Frame::data(buf.freeze()))
}

fn write_malformed(st: &SseState, buf: &mut BytesMut) {
    // A chunk cut off in the middle of its JSON, as a broken proxy might deliver it.
    let cut = match st.prefix.find("data: ") {
        // Events with an `event:` line: cut inside the data line.
        Some(at) if at > 0 => (at + 30).min(st.prefix.len()),
        _ => st.prefix.len().min(40),
    };
    match st.meta.api {
        Api::Tgi => buf.extend_from_slice(b"data:{\"index\":"),
        _ => buf.extend_from_slice(&st.prefix.as_bytes()[..cut]),
    }
    buf.extend_from_slice(b"\n\n");
}

fn write_token(st: &mut SseState, i: u32, buf: &mut BytesMut) {
    let (id, w) = word(st.meta.output_seed, i);
    let last = i + 1 == st.meta.max_tokens;
    let meta = &st.meta;
    match meta.api {
        Api::Chat => {
            if i == 0 {
                buf.extend_from_slice(st.prefix.as_bytes());
                buf.extend_from_slice(
                    b"{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]",
                );
                if meta.continuous_usage {
                    buf.extend_from_slice(b",\"usage\":");
                    buf.extend_from_slice(
                        usage_json(meta.prompt_tokens, 0, st.guard.0.cached_tokens()).as_bytes(),
                    );
                }
                buf.extend_from_slice(b"}\n\n");
            }
            buf.extend_from_slice(st.prefix.as_bytes());
            buf.extend_from_slice(b"{\"content\":\" ");
            buf.extend_from_slice(w.as_bytes());
            if last {
                buf.extend_from_slice(b"\"},\"logprobs\":null,\"finish_reason\":\"");
                buf.extend_from_slice(meta.finish.as_bytes());
                buf.extend_from_slice(b"\",\"stop_reason\":null}]");
            } else {
                buf.extend_from_slice(b"\"},\"logprobs\":null,\"finish_reason\":null}]");
            }
            if meta.continuous_usage {
                buf.extend_from_slice(b",\"usage\":");
                buf.extend_from_slice(
                    usage_json(meta.prompt_tokens, i + 1, st.guard.0.cached_tokens()).as_bytes(),
                );
            }
            buf.extend_from_slice(b"}\n\n");
        }
        Api::Completion => {
            buf.extend_from_slice(st.prefix.as_bytes());
            buf.extend_from_slice(b" ");
            buf.extend_from_slice(w.as_bytes());
            if last {
                buf.extend_from_slice(b"\",\"logprobs\":null,\"finish_reason\":\"");
                buf.extend_from_slice(meta.finish.as_bytes());
                buf.extend_from_slice(b"\",\"stop_reason\":null}]");
            } else {
                buf.extend_from_slice(
                    b"\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}]",
                );
            }
            if meta.continuous_usage {
                buf.extend_from_slice(b",\"usage\":");
                buf.extend_from_slice(
                    usage_json(meta.prompt_tokens, i + 1, st.guard.0.cached_tokens()).as_bytes(),
                );
                buf.extend_from_slice(b"}\n\n");
            } else {
                buf.extend_from_slice(b",\"usage\":null}\n\n");
            }
        }
        Api::Responses | Api::Messages => {
            st.text.push(' ');
            st.text.push_str(w);
            if i == 0 {
                if meta.api == Api::Responses {
                    responses_api::write_first(meta, buf);
                } else {
                    messages_api::write_first(buf);
                }
            }
            buf.extend_from_slice(st.prefix.as_bytes());
            buf.extend_from_slice(b" ");
            buf.extend_from_slice(w.as_bytes());
            if meta.api == Api::Responses {
                responses_api::end_delta(i, buf);
            } else {
                buf.extend_from_slice(messages_api::DELTA_SUFFIX);
            }
        }
        Api::Tgi => {
            st.text.push(' ');
            st.text.push_str(w);
            let index = i + 1;
            let details = if last && meta.tgi_details && !meta.plan.missing_usage {
                format!(
                    "{{\"finish_reason\":\"{}\",\"generated_tokens\":{},\"seed\":null,\"input_length\":{}}}",
                    meta.finish, meta.max_tokens, meta.prompt_tokens
                )
            } else {
                "null".to_string()
            };
            let generated = if last {
                serde_json::Value::String(st.text.clone()).to_string()
            } else {
                "null".to_string()
            };
            let line = format!(
                "data:{{\"index\":{index},\"token\":{{\"id\":{id},\"text\":\" {w}\",\"logprob\":-0.1,\"special\":false}},\"generated_text\":{generated},\"details\":{details}}}\n\n"
            );
            buf.extend_from_slice(line.as_bytes());
        }
    }
}

fn write_tail(st: &SseState, buf: &mut BytesMut) {
    let meta = &st.meta;
    let cached = st.guard.0.cached_tokens();
    let model = st.state.cfg.model_name.as_str();
    match meta.api {
        Api::Tgi => return,
        Api::Responses => {
            return responses_api::write_tail(meta, model, &st.text, st.sent, cached, buf)
        }
        Api::Messages => return messages_api::write_tail(meta, st.sent, cached, buf),
        _ => {}
    }
    if meta.include_usage && !meta.plan.missing_usage {
        let object = if meta.api == Api::Chat {
            "chat.completion.chunk"
        } else {
            "text_completion"
        };
        let usage = usage_json(meta.prompt_tokens, st.sent, st.guard.0.cached_tokens());
        let line = format!(
            "data: {{\"id\":\"{}\",\"object\":\"{object}\",\"created\":{},\"model\":{},\"choices\":[],\"usage\":{usage}}}\n\n",
            meta.id, meta.created, st.state.model_json
        );
        buf.extend_from_slice(line.as_bytes());
    }
    buf.extend_from_slice(b"data: [DONE]\n\n");
}
