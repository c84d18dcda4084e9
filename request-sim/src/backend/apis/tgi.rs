//! Hugging Face text-generation-inference (`--api tgi`: `/generate`, `/generate_stream`),
//! whole: the request body (`inputs` and `parameters`: `max_new_tokens`, `details: true` for
//! the output count, `ignore_eos_token` with `exact_output`), how an `--endpoint` path names
//! the endpoint (and whether it streams), the streamed events and the whole answer read into
//! the [`ResponseState`] (a `token` is a token event, special tokens carry nothing; output
//! tokens come from `details.generated_tokens`; an `error` field is an error in the answer),
//! and its calibration fact.
//!
//! TGI's server takes no token-id prompts, no session id and no thinking budget, answers no
//! `/v1/models` or `/tokenize`, and reports no prompt tokens.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::backend::api::{ApiKind, Calibration};
use crate::backend::body::BodyParams;
use crate::backend::state::{truncate, Carried, ProtocolError, ResponseState, Usage};

/// The prompt overhead cannot be known: TGI reports no prompt tokens and has no tokenizer
/// endpoint that says what its template adds.
pub const CALIBRATION: Calibration = Calibration::Unknown;

/// The path of the endpoint that answers whole.
pub const GENERATE_PATH: &str = "/generate";

/// The path of the streaming endpoint.
pub const GENERATE_STREAM_PATH: &str = "/generate_stream";

/// What an answer that ends early lacks.
pub const STREAM_END: &str = "stream ended without a final event";

#[derive(Serialize)]
struct TgiParameters {
    max_new_tokens: u32,
    details: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    ignore_eos_token: Option<bool>,
}

#[derive(Serialize)]
struct TgiBody<'a> {
    inputs: &'a str,
    parameters: TgiParameters,
    stream: bool,
}

/// Serialise the body of one request for `text` into `out` (not cleared first); `stream`: the
/// `/generate_stream` endpoint.
pub fn encode_body(
    params: &BodyParams,
    text: &str,
    max_tokens: u32,
    stream: bool,
    out: &mut Vec<u8>,
) {
    let body = TgiBody {
        inputs: text,
        parameters: TgiParameters {
            max_new_tokens: max_tokens,
            details: true,
            ignore_eos_token: params.exact_output.then_some(true),
        },
        stream,
    };
    // Serialising into a Vec cannot fail for these types (no maps with non-string keys).
    let r = serde_json::to_writer(&mut *out, &body);
    debug_assert!(r.is_ok());
}

/// The endpoint an `--endpoint` path names with `--api tgi` (a base URL: `/generate` or
/// `/generate_stream` by `stream`, set in `url`); a `/generate` endpoint cannot stream.
pub fn kind_of_path(url: &mut reqwest::Url, path: &str, stream: bool) -> Result<ApiKind, String> {
    let kind = if path.is_empty() {
        url.set_path(if stream {
            GENERATE_STREAM_PATH
        } else {
            GENERATE_PATH
        });
        if stream {
            ApiKind::TgiGenerateStream
        } else {
            ApiKind::TgiGenerate
        }
    } else if path.ends_with("/generate_stream") {
        ApiKind::TgiGenerateStream
    } else if path.ends_with("/generate") {
        ApiKind::TgiGenerate
    } else {
        return Err(format!(
            "--endpoint path {path:?} is not a TGI path: use .../generate, .../generate_stream \
             or a base URL"
        ));
    };
    if kind == ApiKind::TgiGenerate && stream {
        return Err("--stream with a TGI /generate endpoint: use /generate_stream".into());
    }
    Ok(kind)
}

#[derive(Deserialize)]
struct TgiToken {
    #[serde(default)]
    special: bool,
}

#[derive(Deserialize)]
struct TgiDetails {
    generated_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct TgiEvent {
    token: Option<TgiToken>,
    generated_text: Option<String>,
    details: Option<TgiDetails>,
    error: Option<String>,
}

impl ResponseState {
    /// One SSE payload of a `/generate_stream` answer.
    pub(crate) fn on_tgi_event(&mut self, data: &[u8], now: Instant) -> Result<(), ProtocolError> {
        let ev: TgiEvent = serde_json::from_slice(data.trim_ascii()).map_err(|e| {
            ProtocolError(format!(
                "malformed SSE JSON ({e}): {}",
                truncate(&String::from_utf8_lossy(data), 200)
            ))
        })?;
        if let Some(err) = ev.error {
            return Err(ProtocolError(format!(
                "error in stream: {}",
                truncate(&err, 512)
            )));
        }
        if let Some(tok) = &ev.token {
            let carried = if tok.special {
                Carried::NOTHING
            } else {
                Carried::ANSWER
            };
            self.token_at(now, carried);
        }
        if ev.generated_text.is_some() || ev.details.is_some() {
            self.finished = true;
            self.done = Some(now);
            if let Some(d) = ev.details {
                self.usage = Some(Usage {
                    completion_tokens: d.generated_tokens,
                    ..Usage::default()
                });
            }
        }
        Ok(())
    }

    /// A whole `/generate` answer.
    pub(crate) fn on_tgi_body(&mut self, body: &[u8], now: Instant) -> Result<(), ProtocolError> {
        let ev: TgiEvent = serde_json::from_slice(body)
            .map_err(|e| crate::backend::state::malformed_body(e, body))?;
        if let Some(err) = ev.error {
            return Err(ProtocolError(format!(
                "error in response: {}",
                truncate(&err, 512)
            )));
        }
        let Some(text) = ev.generated_text else {
            return Err(ProtocolError("response has no generated_text".into()));
        };
        let carried = if text.is_empty() {
            Carried::NOTHING
        } else {
            Carried::ANSWER
        };
        self.token_at(now, carried);
        if let Some(a) = &mut self.answer {
            a.push_str(&text);
        }
        if let Some(d) = ev.details {
            self.usage = Some(Usage {
                completion_tokens: d.generated_tokens,
                ..Usage::default()
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::state::feed_events;

    #[test]
    fn tgi_stream() {
        let ev = [
            r#"{"index":1,"token":{"id":5,"text":" a","logprob":-0.1,"special":false},"generated_text":null,"details":null}"#,
            r#"{"index":2,"token":{"id":6,"text":" b","logprob":-0.1,"special":false},"generated_text":" a b","details":{"finish_reason":"length","generated_tokens":2,"seed":null}}"#,
        ];
        let (st, r) = feed_events(ResponseState::default(), ApiKind::TgiGenerateStream, &ev);
        r.unwrap();
        assert_eq!(st.chunks, 2);
        assert!(st.finished);
        assert_eq!(st.usage.unwrap().completion_tokens, Some(2));
    }

    #[test]
    fn tgi_body() {
        let mut st = ResponseState::default();
        st.on_body(
            ApiKind::TgiGenerate,
            br#"{"generated_text":" x y","details":{"generated_tokens":2}}"#,
            Instant::now(),
        )
        .unwrap();
        assert_eq!(st.usage.unwrap().completion_tokens, Some(2));
    }
}
