//! A `messages` row's OpenAI chat request ([`ChatPayload`]), kept verbatim for the request
//! body (also the messages of an agent corpus's requests).

/// The OpenAI chat request of a `messages` row, kept verbatim for the request body.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatPayload {
    /// The `messages` array as given (validated: roles, contents, tool calls).
    pub messages: serde_json::Value,
    /// The `tools` array as given.
    pub tools: Option<serde_json::Value>,
    /// `extra`: merged into the request body.
    pub extra: Option<serde_json::Map<String, serde_json::Value>>,
    /// `output_length` when the row gives one (else the server decides).
    pub max_tokens: Option<u32>,
    /// A `text_input` row (AIPerf's literal prompt): this text is the prompt, sent like a
    /// synthetic one (chat content or completions prompt); `messages` is then `null`.
    pub text_input: Option<String>,
    /// A `prompt_token_ids` row (what `--save-prompts` writes with `--token-ids`): these token
    /// ids are the completions prompt; `messages` is then `null`.
    pub prompt_token_ids: Option<Vec<u32>>,
}

impl ChatPayload {
    /// A literal prompt (`text_input` or `prompt_token_ids`) rather than a chat request.
    pub fn is_literal(&self) -> bool {
        self.text_input.is_some() || self.prompt_token_ids.is_some()
    }
}
