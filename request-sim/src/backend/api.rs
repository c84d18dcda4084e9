//! The API a run speaks: the `--api` family ([`ApiFlavor`]), the concrete endpoint kind
//! requests go to ([`ApiKind`]) and the name the summary gives it ([`Api`]); and the one
//! dispatch over them. The rest of the crate asks these types what an API does; each question
//! is one `match`, each arm a call into (or a constant of) that API's module in
//! [`super::apis`], where its bodies, its answer reading, its usage and errors and its
//! calibration fact live.

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
    /// Whether the endpoint streams whatever `--stream` says (TGI: by its path).
    pub fn fixed_stream(self) -> Option<bool> {
        match self {
            ApiKind::TgiGenerate => Some(false),
            ApiKind::TgiGenerateStream => Some(true),
            _ => None,
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
