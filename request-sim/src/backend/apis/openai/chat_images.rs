//! The chat body of a request with images (`docs/images.md`): one user message whose content
//! is the images as `image_url` parts with `data:` URLs, then the prompt text as a `text` part;
//! the rest of the body as [`super::chat::encode_body`] writes a synthetic chat body.

use serde::Serialize;

use super::tail::OpenAiTail;
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

/// The chat body: the one message, then what every chat body ends with.
#[derive(Serialize)]
struct ImageChatBody<'a> {
    model: &'a str,
    messages: [Message<'a>; 1],
    #[serde(flatten)]
    tail: OpenAiTail<'a>,
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
        tail: OpenAiTail::new(params, max_tokens, thinking),
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
        // Byte for byte: the message, then the fields in the order every chat body sends them.
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"model":"m","messages":[{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"text","text":" hi"}],"role":"user"}],"max_tokens":3,"min_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#
        );
    }
}
