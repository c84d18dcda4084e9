//! OpenAI completions (`/v1/completions`): the request body (a text prompt, or token ids on
//! vLLM and SGLang) and the calibration fact. Its answers are read by [`super`] (the `choices`
//! wire it shares with chat).

use serde::Serialize;

use super::tail::OpenAiTail;
use crate::backend::api::Calibration;
use crate::backend::body::{BodyParams, PromptPayload};

/// The endpoint's path.
pub const PATH: &str = "/v1/completions";

/// The prompt overhead is the tokenizer's special tokens around the raw prompt (no chat
/// template): from the server's `/tokenize`, or from a calibration request.
pub const CALIBRATION: Calibration = Calibration::SpecialTokens;

#[derive(Serialize)]
#[serde(untagged)]
enum CompletionPrompt<'a> {
    Text(&'a str),
    Ids(&'a [u32]),
}

#[derive(Serialize)]
struct CompletionsBody<'a> {
    model: &'a str,
    prompt: CompletionPrompt<'a>,
    #[serde(flatten)]
    tail: OpenAiTail<'a>,
}

/// The body of one request for `prompt` (not cleared first).
pub fn encode_body(
    params: &BodyParams,
    prompt: PromptPayload<'_>,
    max_tokens: u32,
    thinking: Option<u32>,
    out: &mut Vec<u8>,
) {
    let body = CompletionsBody {
        model: &params.model,
        prompt: match prompt {
            PromptPayload::Text(t) => CompletionPrompt::Text(t),
            PromptPayload::TokenIds(ids) => CompletionPrompt::Ids(ids),
        },
        tail: OpenAiTail::new(params, max_tokens, thinking),
    };
    // Serialising into a Vec cannot fail for these types (no maps with non-string keys).
    let r = serde_json::to_writer(&mut *out, &body);
    debug_assert!(r.is_ok());
}

#[cfg(test)]
mod tests {
    use super::super::chat::tests::params;
    use crate::backend::api::ApiKind;
    use crate::backend::body::PromptPayload;
    use crate::backend::dispatch::encode_body;

    #[test]
    fn completions_with_token_ids_and_extra() {
        let mut p = params(false);
        p.exact_output = false;
        let mut extra = serde_json::Map::new();
        extra.insert("temperature".into(), 0.into());
        p.extra = Some(extra);
        let mut out = Vec::new();
        encode_body(
            ApiKind::Completions,
            &p,
            PromptPayload::TokenIds(&[1, 2, 3]),
            (5, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["prompt"], serde_json::json!([1, 2, 3]));
        assert_eq!(v["stream"], false);
        assert!(v.get("stream_options").is_none());
        assert!(v.get("min_tokens").is_none());
        assert_eq!(v["temperature"], 0);
    }
}
