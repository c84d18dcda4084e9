//! The API a run speaks: the `--api` family ([`ApiFlavor`]), the concrete endpoint kind
//! requests go to ([`ApiKind`]) and the name the summary gives it ([`Api`]); and the one
//! dispatch over them. The rest of the crate asks these types what an API does; each question
//! is one `match`, each arm a call into (or a constant of) that API's module in
//! [`super::apis`], where its bodies, its answer reading, its usage and errors and its
//! calibration fact live.

use std::time::Instant;

use serde_json::Value;

use super::apis::{messages, openai, responses, tgi, vllm_grpc};
use super::body::{BodyParams, PromptPayload};
use super::state::{ProtocolError, ResponseState};

/// The API family chosen with `--api`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ApiFlavor {
    /// OpenAI-compatible (vLLM, SGLang, ...): chat or completions, from the URL path.
    #[default]
    Openai,
    /// Hugging Face text-generation-inference: `/generate` or `/generate_stream`.
    Tgi,
    /// AIBrix gateway: OpenAI plus a `routing-strategy` header (`--aibrix-route`).
    Aibrix,
    /// OpenAI Responses API: `/v1/responses` (vLLM, SGLang, llama.cpp's server, OpenAI).
    #[value(alias = "openai-responses")]
    Responses,
    /// Anthropic Messages API: `/v1/messages` (vLLM, SGLang, llama.cpp's server, Anthropic).
    #[value(alias = "anthropic", alias = "anthropic-messages")]
    Messages,
    /// vLLM's gRPC engine API (`vllm serve --grpc`): token-id prompts over HTTP/2,
    /// `grpc://host:port`.
    #[value(name = "vllm-grpc")]
    #[serde(rename = "vllm-grpc")]
    VllmGrpc,
}

impl ApiFlavor {
    /// The name `--api` takes.
    pub fn name(self) -> &'static str {
        match self {
            ApiFlavor::Openai => "openai",
            ApiFlavor::Tgi => "tgi",
            ApiFlavor::Aibrix => "aibrix",
            ApiFlavor::Responses => "responses",
            ApiFlavor::Messages => "messages",
            ApiFlavor::VllmGrpc => "vllm-grpc",
        }
    }
    /// Why this API cannot go to the built-in simulator, when it cannot.
    pub fn needs_endpoint(self) -> Option<&'static str> {
        match self {
            ApiFlavor::Aibrix => Some("the AIBrix gateway"),
            ApiFlavor::VllmGrpc => {
                Some("grpc://host:port of `vllm serve --grpc`; llm-sim speaks HTTP only")
            }
            _ => None,
        }
    }
    /// Requests carry AIBrix's `routing-strategy` header (`--aibrix-route`).
    pub fn needs_route(self) -> bool {
        self == ApiFlavor::Aibrix
    }
    /// Some endpoint of this family takes token-id prompts (`--token-ids`).
    pub fn may_take_token_ids(self) -> bool {
        self != ApiFlavor::Tgi
    }
    /// The family speaks only one API, Responses or Messages: a `messages` row's answer
    /// history is that API's (the OpenAI family's is chat).
    pub fn is_responses_or_messages(self) -> bool {
        matches!(self, ApiFlavor::Responses | ApiFlavor::Messages)
    }

    /// What carries this family's requests.
    pub fn transport(self) -> Transport {
        match self {
            ApiFlavor::VllmGrpc => Transport::Grpc,
            _ => Transport::HttpSse,
        }
    }
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
    /// The API requests of this family to a `kind` endpoint speak, as the summary names it.
    pub fn api(self, kind: ApiKind) -> Api {
        match (self, kind) {
            (_, ApiKind::Responses) => Api::OpenaiResponses,
            (_, ApiKind::Messages) => Api::AnthropicMessages,
            (_, ApiKind::VllmGrpc) => Api::VllmGrpc,
            (ApiFlavor::Aibrix, _) => Api::Aibrix,
            (_, ApiKind::Chat) => Api::OpenaiChat,
            (_, ApiKind::Completions) => Api::OpenaiCompletions,
            _ => Api::Tgi,
        }
    }
}

/// The concrete endpoint kind requests are sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKind {
    Chat,
    Completions,
    TgiGenerate,
    TgiGenerateStream,
    /// OpenAI Responses (`/v1/responses`).
    Responses,
    /// Anthropic Messages (`/v1/messages`).
    Messages,
    /// vLLM's gRPC engine `Generate` (`backend/vllm_grpc/`).
    VllmGrpc,
}

/// How the requests of an API travel: what `execute` hands the body to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// HTTP/1.1 POST of a JSON body, the answer an SSE stream or a JSON body (reqwest).
    HttpSse,
    /// gRPC over HTTP/2, the answer a stream of protobuf messages (tonic).
    Grpc,
}

/// How an API's prompt overhead (the tokens the server adds around the content) is found,
/// when no flag gives it (`run/calibrate.rs` runs the steps; each API module states its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calibration {
    /// The chat template's: from `--tokenizer-config`, the server's `/tokenize` with
    /// `messages`, or a calibration request.
    ChatTemplate,
    /// The tokenizer's special tokens around a raw prompt: from the server's `/tokenize`, or a
    /// calibration request.
    SpecialTokens,
    /// A calibration request to the API itself (it may add its own tokens around the chat
    /// template's).
    ApiRequest,
    /// It cannot be known (no prompt tokens reported, no tokenizer endpoint).
    Unknown,
}

impl ApiKind {
    /// What carries this API's requests.
    pub fn transport(self) -> Transport {
        match self {
            ApiKind::VllmGrpc => Transport::Grpc,
            _ => Transport::HttpSse,
        }
    }
    /// Prompts may be token ids (`--token-ids`, `prompt_token_ids` rows): OpenAI completions
    /// and vLLM's gRPC engine.
    pub fn takes_token_ids(self) -> bool {
        matches!(self, ApiKind::Completions | ApiKind::VllmGrpc)
    }
    /// Prompts must be token ids (the client tokenizes): vLLM's gRPC engine.
    pub fn needs_token_ids(self) -> bool {
        self == ApiKind::VllmGrpc
    }
    /// The answer's text comes back (`--live-history` can send it on): not from the gRPC
    /// engine, which answers token ids.
    pub fn answers_text(self) -> bool {
        self != ApiKind::VllmGrpc
    }
    /// A row's thinking budget can be sent (`thinking_token_budget` / Messages' `thinking`).
    pub fn takes_thinking_budget(self) -> bool {
        matches!(
            self,
            ApiKind::Chat | ApiKind::Completions | ApiKind::Messages
        )
    }
    /// The prompt is tokenized as sent, with the tokenizer's own special tokens (OpenAI
    /// completions; no chat template).
    pub fn raw_prompt(self) -> bool {
        self == ApiKind::Completions
    }
    /// Anthropic's Messages API (its `thinking` field, its `anthropic-version` header).
    pub fn is_messages(self) -> bool {
        self == ApiKind::Messages
    }
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
    pub fn is_chat(self) -> bool {
        self == ApiKind::Chat
    }
    /// OpenAI chat or completions: the `choices` wire shape, `[DONE]`, `stream_options`.
    pub fn is_openai(self) -> bool {
        matches!(self, ApiKind::Chat | ApiKind::Completions)
    }
    /// An API whose requests carry a conversation (a `messages` row can be sent to it): chat
    /// completions, Responses, Messages.
    pub fn takes_messages(self) -> bool {
        matches!(self, ApiKind::Chat | ApiKind::Responses | ApiKind::Messages)
    }
    /// Served by the OpenAI-style servers (vLLM, SGLang, llama.cpp's server, llm-sim), which
    /// also answer `GET /v1/models` and may answer `POST /tokenize`: every API but TGI's.
    pub fn openai_style_server(self) -> bool {
        !matches!(
            self,
            ApiKind::TgiGenerate | ApiKind::TgiGenerateStream | ApiKind::VllmGrpc
        )
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
    /// Whether the endpoint streams whatever `--stream` says (TGI: by its path).
    pub fn fixed_stream(self) -> Option<bool> {
        match self {
            ApiKind::TgiGenerate => Some(false),
            ApiKind::TgiGenerateStream => Some(true),
            _ => None,
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

/// The API a run spoke, as the summary names it (`run.api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// OpenAI chat completions (vLLM, SGLang, ...).
    OpenaiChat,
    /// OpenAI completions.
    OpenaiCompletions,
    /// TGI `/generate` or `/generate_stream`.
    Tgi,
    /// AIBrix gateway (OpenAI plus a routing header).
    Aibrix,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Anthropic Messages.
    AnthropicMessages,
    /// vLLM's gRPC engine API.
    VllmGrpc,
}

impl Api {
    /// The name vLLM's `vllm bench serve` gives this API's backend (`--export vllm`).
    pub fn vllm_bench_backend(self) -> &'static str {
        match self {
            Api::OpenaiChat => "openai-chat",
            Api::Tgi => "tgi",
            _ => "openai",
        }
    }
    /// A streamed answer reports its prompt tokens only at its start (Anthropic's
    /// `message_start`), where some servers send none.
    pub fn prompt_usage_only_at_start(self) -> bool {
        self == Api::AnthropicMessages
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Api::OpenaiChat => "openai-chat",
            Api::OpenaiCompletions => "openai-completions",
            Api::Tgi => "tgi",
            Api::Aibrix => "aibrix",
            Api::OpenaiResponses => "openai-responses",
            Api::AnthropicMessages => "anthropic-messages",
            Api::VllmGrpc => "vllm-grpc",
        })
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_words_are_the_summary_words() {
        for api in [
            Api::OpenaiChat,
            Api::OpenaiCompletions,
            Api::Tgi,
            Api::Aibrix,
            Api::OpenaiResponses,
            Api::AnthropicMessages,
            Api::VllmGrpc,
        ] {
            let json = serde_json::to_string(&api).unwrap();
            assert_eq!(json, format!("\"{api}\""));
        }
        assert_eq!(Api::OpenaiChat.to_string(), "openai-chat");
    }
}
