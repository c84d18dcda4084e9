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

/// The (width, height) of a base64 `data:` image URL, from its PNG or JPEG header (decoding
/// only the bytes the header needs, the whole image for a JPEG whose frame header is late).
pub fn image_url_size(url: &str) -> Option<(u32, u32)> {
    use base64::Engine as _;
    let (_, data) = llm_common::vision::data_url_parts(url)?;
    let engine = base64::engine::general_purpose::STANDARD;
    let head = engine.decode(data.get(..44).unwrap_or(data)).ok();
    if let Some(size) = head.as_deref().and_then(llm_common::vision::image_size) {
        return Some(size);
    }
    llm_common::vision::image_size(&engine.decode(data).ok()?)
}

/// The `image_url` parts' URLs of a chat `messages` array, in order.
pub fn image_urls(messages: &serde_json::Value) -> Vec<&str> {
    let parts = messages
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("content")?.as_array())
        .flatten();
    parts
        .filter(|p| p.get("type").and_then(|t| t.as_str()) == Some("image_url"))
        .filter_map(|p| match p.get("image_url")? {
            serde_json::Value::String(u) => Some(u.as_str()),
            v => v.get("url")?.as_str(),
        })
        .collect()
}

impl ChatPayload {
    /// A literal prompt (`text_input` or `prompt_token_ids`) rather than a chat request.
    pub fn is_literal(&self) -> bool {
        self.text_input.is_some() || self.prompt_token_ids.is_some()
    }
}
