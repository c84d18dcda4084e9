//! The chat body of a request with images (`docs/images.md`): one user message whose content
//! is the images as `image_url` parts with `data:` URLs, then the prompt text as a `text` part;
//! the rest of the body as [`super::chat::encode_body`] writes a synthetic chat body.

use serde::Serialize;

use crate::backend::body::BodyParams;

#[derive(Serialize)]
struct Url<'a> {
    url: &'a str,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    ImageUrl { image_url: Url<'a> },
    Text { text: &'a str },
}

#[derive(Serialize)]
struct Message<'a> {
    content: Vec<Part<'a>>,
    role: &'static str,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct ImageChatBody<'a> {
    model: &'a str,
    messages: [Message<'a>; 1],
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ignore_eos: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_token_budget: Option<serde_json::Value>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// Serialise a chat completions body of `images` (data URLs, in order) then `text` into `out`
/// (cleared first), asking for `max_tokens` (with `thinking`, a row's thinking budget).
pub fn encode_image_chat_body(
    params: &BodyParams,
    images: &[String],
    text: &str,
    (max_tokens, thinking): (u32, Option<u32>),
    out: &mut Vec<u8>,
) {
    out.clear();
    let exact = params.exact_output;
    let thinking = super::tail::thinking_to_send(params, thinking).map(|(_, v)| v);
    let mut content: Vec<Part<'_>> = images
        .iter()
        .map(|u| Part::ImageUrl {
            image_url: Url { url: u },
        })
        .collect();
    content.push(Part::Text { text });
    let body = ImageChatBody {
        model: &params.model,
        messages: [Message {
            content,
            role: "user",
        }],
        max_tokens,
        min_tokens: exact.then_some(max_tokens),
        ignore_eos: exact.then_some(true),
        thinking_token_budget: thinking,
        stream: params.stream,
        stream_options: params.stream.then_some(StreamOptions {
            include_usage: true,
        }),
        extra: params.extra.as_ref(),
    };
    let r = serde_json::to_writer(&mut *out, &body);
    debug_assert!(r.is_ok());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_then_text() {
        let params = BodyParams {
            model: "m".into(),
            stream: true,
            exact_output: true,
            extra: None,
            thinking: Default::default(),
        };
        let mut out = Vec::new();
        let urls = ["data:image/png;base64,AAAA".to_string()];
        encode_image_chat_body(&params, &urls, " hi", (3, None), &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v["messages"][0]["content"],
            serde_json::json!([
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "text", "text": " hi"}
            ])
        );
        assert_eq!(
            (v["max_tokens"].as_u64(), v["min_tokens"].as_u64()),
            (Some(3), Some(3))
        );
        assert_eq!(v["stream_options"]["include_usage"], true);
    }
}
