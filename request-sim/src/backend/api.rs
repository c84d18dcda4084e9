//! The API a run speaks: the `--api` family ([`ApiFlavor`]), the concrete endpoint kind
//! requests go to ([`ApiKind`]) and the name the summary gives it ([`Api`]).

/// The API family chosen with `--api`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ApiFlavor {
    /// OpenAI-compatible (vLLM, SGLang, ...): chat or completions, from the URL path.
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
}

impl ApiKind {
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
        !matches!(self, ApiKind::TgiGenerate | ApiKind::TgiGenerateStream)
    }
    /// The path of this API's endpoint on a server (TGI: by streaming).
    pub fn path(self) -> &'static str {
        match self {
            ApiKind::Chat => "/v1/chat/completions",
            ApiKind::Completions => "/v1/completions",
            ApiKind::TgiGenerate => "/generate",
            ApiKind::TgiGenerateStream => "/generate_stream",
            ApiKind::Responses => "/v1/responses",
            ApiKind::Messages => "/v1/messages",
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
        ] {
            let json = serde_json::to_string(&api).unwrap();
            assert_eq!(json, format!("\"{api}\""));
        }
        assert_eq!(Api::OpenaiChat.to_string(), "openai-chat");
    }
}
