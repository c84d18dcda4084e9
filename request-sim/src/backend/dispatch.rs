//! The one dispatch over the APIs: each question the rest of the crate asks of an API
//! (`ApiKind::encode_body`, `read_event`, `path`, `calibration`, ...) is one `match` here, each
//! arm a call into (or a constant of) that API's module in [`super::apis`]; and the entry
//! points built on it (a request's body, a `messages` row's body, a streamed answer's event).
//! It sits above the API modules, which use only the types of `api.rs`, `body.rs`, `state.rs`
//! and `thinking.rs`, so the data flows one way.

use std::time::Instant;

use serde_json::Value;

use super::api::{ApiFlavor, ApiKind, Calibration};
use super::apis::{messages, openai, responses, tgi, vllm_grpc};
use super::body::{BodyParams, PromptPayload};
use super::state::{ProtocolError, ResponseState};

impl ApiFlavor {
    /// The endpoint kind an `--endpoint` `path` (without its trailing `/`) names for this
    /// family; a base URL gets the API's path set in `url`.
    pub fn kind_of_path(
        self,
        url: &mut reqwest::Url,
        path: &str,
        stream: bool,
    ) -> Result<ApiKind, String> {
        match self {
            ApiFlavor::Openai | ApiFlavor::Aibrix => openai::kind_of_path(url, path),
            ApiFlavor::Responses => responses::kind_of_path(url, path),
            ApiFlavor::Messages => messages::kind_of_path(url, path),
            ApiFlavor::Tgi => tgi::kind_of_path(url, path, stream),
            ApiFlavor::VllmGrpc => Ok(ApiKind::VllmGrpc),
        }
    }
}

impl ApiKind {
    /// How the prompt overhead is found.
    pub fn calibration(self) -> Calibration {
        match self {
            ApiKind::Chat => openai::chat::CALIBRATION,
            ApiKind::Completions => openai::completions::CALIBRATION,
            ApiKind::TgiGenerate | ApiKind::TgiGenerateStream => tgi::CALIBRATION,
            ApiKind::Responses => responses::CALIBRATION,
            ApiKind::Messages => messages::CALIBRATION,
            ApiKind::VllmGrpc => vllm_grpc::CALIBRATION,
        }
    }
    /// The path of this API's endpoint on a server (TGI: by streaming).
    pub fn path(self) -> &'static str {
        match self {
            ApiKind::Chat => openai::chat::PATH,
            ApiKind::Completions => openai::completions::PATH,
            ApiKind::TgiGenerate => tgi::GENERATE_PATH,
            ApiKind::TgiGenerateStream => tgi::GENERATE_STREAM_PATH,
            ApiKind::Responses => responses::PATH,
            ApiKind::Messages => messages::PATH,
            ApiKind::VllmGrpc => vllm_grpc::PATH,
        }
    }
    /// Writes the body of one request into `out` (already cleared); token-id prompts go only
    /// where [`Self::takes_token_ids`] (elsewhere they are an empty text).
    pub fn encode_body(
        self,
        params: &BodyParams,
        prompt: PromptPayload<'_>,
        (max_tokens, thinking): (u32, Option<u32>),
        out: &mut Vec<u8>,
    ) {
        let text = prompt.text();
        match self {
            ApiKind::Chat => openai::chat::encode_body(params, text, max_tokens, thinking, out),
            ApiKind::Completions => {
                openai::completions::encode_body(params, prompt, max_tokens, thinking, out)
            }
            ApiKind::TgiGenerate => tgi::encode_body(params, text, max_tokens, false, out),
            ApiKind::TgiGenerateStream => tgi::encode_body(params, text, max_tokens, true, out),
            ApiKind::Responses => responses::encode_body(params, text, max_tokens, out),
            ApiKind::Messages => messages::encode_body(params, text, max_tokens, thinking, out),
            ApiKind::VllmGrpc => vllm_grpc::encode_prompt(params, prompt, max_tokens, out),
        }
    }
    /// Writes the body of a `messages` trace row into `out` (already cleared): chat's for
    /// every API that has no conversation shape of its own.
    pub fn encode_row_body(
        self,
        params: &BodyParams,
        chat: &crate::trace::ChatPayload,
        (thinking, session_user): (Option<u32>, Option<&str>),
        out: &mut Vec<u8>,
    ) {
        match self {
            ApiKind::Responses => responses::encode_row_body(params, chat, session_user, out),
            ApiKind::Messages => {
                messages::encode_row_body(params, chat, (thinking, session_user), out)
            }
            _ => openai::chat::encode_chat_row_body_marked(
                params,
                chat,
                (thinking, session_user),
                out,
                None,
            ),
        }
    }
    /// The top-level field that carries a session id (`--session-user`), where the API has one.
    pub fn session_user_field(self, user: &str) -> Option<(&'static str, Value)> {
        match self {
            ApiKind::Chat | ApiKind::Completions => Some(openai::session_user_field(user)),
            ApiKind::Responses => Some(responses::session_user_field(user)),
            ApiKind::Messages => Some(messages::session_user_field(user)),
            ApiKind::TgiGenerate | ApiKind::TgiGenerateStream | ApiKind::VllmGrpc => None,
        }
    }
    /// The top-level field a request with `max_tokens` adds for a thinking budget `budget`.
    pub fn thinking_field(self, budget: u32, max_tokens: u32) -> Option<(&'static str, Value)> {
        match self {
            ApiKind::Chat | ApiKind::Completions => openai::thinking_field(budget),
            ApiKind::Messages => messages::thinking_field(budget, max_tokens),
            ApiKind::Responses
            | ApiKind::TgiGenerate
            | ApiKind::TgiGenerateStream
            | ApiKind::VllmGrpc => None,
        }
    }
    /// Reads one SSE `data` payload of a streamed answer, received at `now`, into `st`.
    pub fn read_event(
        self,
        st: &mut ResponseState,
        data: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        match self {
            ApiKind::Chat | ApiKind::Completions => st.on_openai_event(data, now),
            ApiKind::TgiGenerate | ApiKind::TgiGenerateStream => st.on_tgi_event(data, now),
            ApiKind::Responses => st.on_responses_event(data, now),
            ApiKind::Messages => st.on_messages_event(data, now),
            ApiKind::VllmGrpc => Err(vllm_grpc::not_sse()),
        }
    }
    /// Reads a whole non-streamed answer, received at `now`, into `st`.
    pub fn read_body(
        self,
        st: &mut ResponseState,
        body: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        match self {
            ApiKind::Chat | ApiKind::Completions => st.on_openai_body(body, now),
            ApiKind::TgiGenerate | ApiKind::TgiGenerateStream => st.on_tgi_body(body, now),
            ApiKind::Responses => st.on_responses_body(body, now),
            ApiKind::Messages => st.on_messages_body(body, now),
            ApiKind::VllmGrpc => Err(vllm_grpc::not_sse()),
        }
    }
    /// What a stream that ended before its final event lacks (the error it gets).
    pub fn stream_end(self) -> &'static str {
        match self {
            ApiKind::Chat | ApiKind::Completions => openai::STREAM_END,
            ApiKind::Responses => responses::STREAM_END,
            ApiKind::Messages => messages::STREAM_END,
            ApiKind::TgiGenerate | ApiKind::TgiGenerateStream => tgi::STREAM_END,
            ApiKind::VllmGrpc => vllm_grpc::STREAM_END,
        }
    }
}

impl ResponseState {
    /// One SSE `data` payload of a streaming `kind` answer, received at `now`.
    pub fn on_event(
        &mut self,
        kind: ApiKind,
        data: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        kind.read_event(self, data, now)
    }

    /// A complete non-streaming `kind` answer, received at `now`.
    pub fn on_body(
        &mut self,
        kind: ApiKind,
        body: &[u8],
        now: Instant,
    ) -> Result<(), ProtocolError> {
        self.whole = true;
        kind.read_body(self, body, now)?;
        self.end(now);
        Ok(())
    }
}

/// Serialise the body of one request into `out` (cleared first), in the shape of `kind`'s API.
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
    kind.encode_body(params, prompt, (max_tokens, thinking), out);
}

/// Serialise the body of a `messages` trace row for `kind` into `out` (cleared first): chat
/// completions' for every API but Responses and Messages, which convert the row to their
/// shapes ([`super::convert`]). `thinking`: the row's thinking budget
/// ([`crate::trace::Reasoning::budget_to_send`]); `session_user`: `--session-user`'s id.
pub fn encode_row_body(
    kind: ApiKind,
    params: &BodyParams,
    chat: &crate::trace::ChatPayload,
    (thinking, session_user): (Option<u32>, Option<&str>),
    out: &mut Vec<u8>,
) {
    out.clear();
    kind.encode_row_body(params, chat, (thinking, session_user), out);
}

/// `--session-user` on a synthetic body: the session id appended inside the body's top-level
/// object as the API carries it ([`ApiKind::session_user_field`]; nothing where the API has no
/// such field).
pub fn append_session_user(kind: ApiKind, body: &mut Vec<u8>, user: &str) {
    if body.last() != Some(&b'}') {
        return;
    }
    let Some((key, v)) = kind.session_user_field(user) else {
        return;
    };
    body.pop();
    body.push(b',');
    let _ = serde_json::to_writer(&mut *body, key);
    body.push(b':');
    let _ = serde_json::to_writer(&mut *body, &v);
    body.push(b'}');
}
