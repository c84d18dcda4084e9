//! vLLM's gRPC engine API (`--api vllm-grpc`): `vllm serve MODEL --grpc`, the service
//! `vllm.grpc.engine.VllmEngine` of PyPI's `smg-grpc-proto`. One unit, in three files:
//!
//! - this file: the API itself: the request body ([`encode_body`]: the prompt's token ids, the
//!   output length, kept exactly with `min_tokens` and `ignore_eos`), the answer read into the
//!   [`ResponseState`] ([`on_message`], [`finish`]: every chunk with tokens is a token event at
//!   its arrival, as an SSE chunk is; usage and cached tokens as the engine reports them), and
//!   the gRPC status codes in the run's [`Status`] kinds ([`status_of`]);
//! - `client.rs`: the transport (HTTP/2 through tonic's channel, the pre-built body framed as a
//!   gRPC message, the `Generate` stream read to its end; `HealthCheck`, `GetModelInfo`);
//! - `proto.rs`: the messages, written from the published `.proto`.
//!
//! Requests carry token ids (the client tokenizes: `--token-ids` with `--tokenizer`); the
//! engine adds nothing around them, so the prompt overhead is 0. A text prompt is sent as the
//! request's `text` input, which the engine tokenizes itself.

pub mod client;
pub mod proto;

use std::time::Instant;

use prost::Message as _;

use crate::backend::api::Calibration;
use crate::backend::body::{BodyParams, PromptPayload};
use crate::backend::state::{Carried, ProtocolError, ResponseState, Usage};
use crate::backend::status::Status;

pub use client::{model_info, Grpc};

/// The prompt overhead is not asked for: the engine adds nothing around token ids (and a text
/// prompt's template is the engine's own, which no request here can measure).
pub const CALIBRATION: Calibration = Calibration::Unknown;

/// What a `Generate` stream that ends before `GenerateComplete` lacks.
pub const STREAM_END: &str = "stream ended without a final event";

/// The path of the `Generate` method.
pub const PATH: &str = "/vllm.grpc.engine.VllmEngine/Generate";

/// The gRPC engine's answers are protobuf messages, read by [`on_message`], never SSE or JSON.
pub fn not_sse() -> ProtocolError {
    ProtocolError("a gRPC answer is not read as SSE or JSON".into())
}

/// [`encode_body`] for a request of the run (`params`: exact output, streaming).
pub fn encode_prompt(
    params: &BodyParams,
    prompt: PromptPayload<'_>,
    max_tokens: u32,
    out: &mut Vec<u8>,
) {
    let prompt = match prompt {
        PromptPayload::TokenIds(ids) => Ok(ids),
        PromptPayload::Text(t) => Err(t),
    };
    encode_body(
        prompt,
        max_tokens,
        (params.exact_output, params.stream),
        out,
    );
}

/// The body of one request: a `GenerateRequest` without its `request_id`, protobuf-encoded into
/// `out` (cleared first). The transport writes the id in front when it sends it (a protobuf
/// message is its fields in any order), so the producers build bodies ahead of time as for
/// every other API.
///
/// `prompt`: the token ids, or a text the engine tokenizes; `exact`: keep the output at
/// `max_tokens` (`min_tokens`, `ignore_eos`).
pub fn encode_body(
    prompt: Result<&[u32], &str>,
    max_tokens: u32,
    (exact, stream): (bool, bool),
    out: &mut Vec<u8>,
) {
    out.clear();
    let input = match prompt {
        Ok(ids) => proto::Input::Tokenized(proto::TokenizedInput {
            original_text: String::new(),
            input_ids: ids.to_vec(),
        }),
        Err(t) => proto::Input::Text(t.to_string()),
    };
    let req = proto::GenerateRequest {
        request_id: String::new(),
        input: Some(input),
        sampling_params: Some(proto::SamplingParams {
            max_tokens: Some(max_tokens),
            min_tokens: if exact { max_tokens } else { 0 },
            ignore_eos: exact,
        }),
        stream,
    };
    // Encoding into a Vec only fails when the buffer cannot grow, which a Vec always can.
    let r = req.encode(out);
    debug_assert!(r.is_ok());
}

/// What one `Generate` stream has told so far, beside the [`ResponseState`]: the counts the
/// engine reports per message.
#[derive(Debug, Default)]
pub struct Reading {
    /// Output tokens of the chunks (vLLM's servicer sends each chunk's delta count).
    completion: u32,
    prompt: Option<u32>,
    cached: Option<u32>,
}

/// One message of the `Generate` stream, received at `now`. A chunk with token ids is a token
/// event (its arrival timed as an SSE chunk's); a chunk without any is not. `GenerateComplete`
/// ends the answer: streamed, its `output_ids` repeat the last chunk's and are not counted
/// again; whole (`stream: false`), it is the answer.
pub fn on_message(
    st: &mut ResponseState,
    r: &mut Reading,
    msg: proto::GenerateResponse,
    now: Instant,
) -> Result<(), ProtocolError> {
    if st.finished {
        return Err(ProtocolError(
            "a message after GenerateComplete".to_string(),
        ));
    }
    match msg.response {
        Some(proto::Response::Chunk(c)) => {
            if c.index != 0 {
                return Err(ProtocolError(format!(
                    "a chunk of output {} (one output was asked for)",
                    c.index
                )));
            }
            if !c.token_ids.is_empty() {
                st.token_at(now, Carried::ANSWER);
            }
            r.completion = r.completion.saturating_add(c.token_ids.len() as u32);
            r.prompt = Some(c.prompt_tokens);
            r.cached = Some(c.cached_tokens);
        }
        Some(proto::Response::Complete(c)) => {
            if c.finish_reason == "error" || c.finish_reason == "abort" {
                return Err(ProtocolError(format!(
                    "the engine ended the request with finish_reason {:?}",
                    c.finish_reason
                )));
            }
            let streamed = st.chunks > 0 || r.prompt.is_some();
            if !streamed {
                st.whole = true;
                st.token_at(now, Carried::ANSWER);
                r.completion = c.completion_tokens.max(c.output_ids.len() as u32);
            }
            r.prompt = Some(c.prompt_tokens);
            r.cached = Some(c.cached_tokens);
            st.finished = true;
            st.done = Some(now);
        }
        None => {
            return Err(ProtocolError(
                "a GenerateResponse with neither chunk nor complete".into(),
            ))
        }
    }
    st.usage = Some(Usage {
        prompt_tokens: r.prompt,
        completion_tokens: Some(r.completion),
        cached_tokens: r.cached,
        ..Usage::default()
    });
    Ok(())
}

/// The end of the `Generate` stream: it must have ended the answer (`GenerateComplete`) and,
/// streamed, carried a token.
pub fn finish(st: &ResponseState) -> Result<(), (Status, String)> {
    if !st.finished {
        return Err((
            Status::ProtocolError,
            "stream ended without GenerateComplete".to_string(),
        ));
    }
    if st.chunks == 0 {
        return Err((
            Status::ProtocolError,
            "stream carried no tokens".to_string(),
        ));
    }
    Ok(())
}

/// A gRPC status in the run's terms: the engine refusing or failing a request is the kind an
/// HTTP error status is (`http_error`, its code named in the message); no connection is
/// `connect_error`; the deadline `timeout`; a message that does not decode `protocol_error`.
pub fn status_of(s: &tonic::Status) -> (Status, String) {
    use tonic::Code;
    let msg = crate::backend::state::truncate(s.message(), 512);
    let kind = match s.code() {
        Code::Unavailable if is_transport(s) => Status::ConnectError,
        Code::DeadlineExceeded => Status::Timeout,
        Code::DataLoss => Status::ProtocolError,
        Code::Internal | Code::Unknown if is_transport(s) => Status::ProtocolError,
        _ => Status::HttpError,
    };
    let text = match kind {
        Status::ConnectError => format!("gRPC: {msg}{}", cause(s)),
        _ => format!("gRPC {:?}: {msg}{}", s.code(), cause(s)),
    };
    (kind, text)
}

/// The status came from the client's own transport (no connection, h2 broke, a message that
/// does not decode) rather than from the server's `grpc-status`.
fn is_transport(s: &tonic::Status) -> bool {
    std::error::Error::source(s).is_some()
}

/// The innermost cause of a transport status (": connection refused").
fn cause(s: &tonic::Status) -> String {
    let mut src = std::error::Error::source(s);
    let mut last = None;
    while let Some(e) = src {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return ": connection refused".to_string();
            }
        }
        last = Some(e.to_string());
        src = e.source();
    }
    match last {
        Some(l) if !s.message().contains(&l) => format!(": {l}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_carries_the_ids_and_the_exact_length() {
        let mut out = Vec::new();
        encode_body(Ok(&[5, 6, 7]), 9, (true, true), &mut out);
        let req = proto::GenerateRequest::decode(out.as_slice()).unwrap();
        assert_eq!(req.request_id, "");
        assert!(req.stream);
        let Some(proto::Input::Tokenized(t)) = req.input else {
            panic!("not tokenized")
        };
        assert_eq!(t.input_ids, vec![5, 6, 7]);
        let sp = req.sampling_params.unwrap();
        assert_eq!(
            (sp.max_tokens, sp.min_tokens, sp.ignore_eos),
            (Some(9), 9, true)
        );
        encode_body(Err("hi"), 4, (false, false), &mut out);
        let req = proto::GenerateRequest::decode(out.as_slice()).unwrap();
        assert_eq!(req.input, Some(proto::Input::Text("hi".into())));
        let sp = req.sampling_params.unwrap();
        assert_eq!(
            (sp.min_tokens, sp.ignore_eos, req.stream),
            (0, false, false)
        );
    }

    fn chunk(ids: &[u32]) -> proto::GenerateResponse {
        proto::GenerateResponse {
            response: Some(proto::Response::Chunk(proto::GenerateStreamChunk {
                token_ids: ids.to_vec(),
                prompt_tokens: 100,
                completion_tokens: ids.len() as u32,
                cached_tokens: 64,
                index: 0,
            })),
        }
    }

    fn complete(ids: &[u32], reason: &str) -> proto::GenerateResponse {
        proto::GenerateResponse {
            response: Some(proto::Response::Complete(proto::GenerateComplete {
                output_ids: ids.to_vec(),
                finish_reason: reason.into(),
                prompt_tokens: 100,
                completion_tokens: ids.len() as u32,
                cached_tokens: 64,
                index: 0,
            })),
        }
    }

    #[test]
    fn a_stream_times_its_token_chunks_and_sums_their_counts() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let (mut st, mut r) = (ResponseState::default(), Reading::default());
        on_message(&mut st, &mut r, chunk(&[1]), at(30)).unwrap();
        on_message(&mut st, &mut r, chunk(&[]), at(35)).unwrap();
        on_message(&mut st, &mut r, chunk(&[2, 3]), at(40)).unwrap();
        on_message(&mut st, &mut r, chunk(&[4]), at(55)).unwrap();
        assert!(finish(&st).is_err(), "no GenerateComplete yet");
        on_message(&mut st, &mut r, complete(&[4], "length"), at(56)).unwrap();
        finish(&st).unwrap();
        assert_eq!(st.chunks, 3);
        assert_eq!(st.first_token, Some(at(30)));
        assert_eq!(st.itl_ms, vec![10.0, 15.0]);
        let u = st.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
            (Some(100), Some(4), Some(64))
        );
        assert!(on_message(&mut st, &mut r, chunk(&[5]), at(60)).is_err());
    }

    #[test]
    fn a_whole_answer_and_the_ends_that_are_errors() {
        let now = Instant::now();
        let (mut st, mut r) = (ResponseState::default(), Reading::default());
        on_message(&mut st, &mut r, complete(&[1, 2, 3], "stop"), now).unwrap();
        finish(&st).unwrap();
        assert!(st.whole);
        assert_eq!(st.usage.unwrap().completion_tokens, Some(3));
        let (mut st, mut r) = (ResponseState::default(), Reading::default());
        let e = on_message(&mut st, &mut r, complete(&[], "abort"), now).unwrap_err();
        assert!(e.0.contains("abort"), "{e:?}");
        let e = on_message(
            &mut st,
            &mut r,
            proto::GenerateResponse { response: None },
            now,
        );
        assert!(e.is_err());
        let st = ResponseState::default();
        assert_eq!(finish(&st).unwrap_err().0, Status::ProtocolError);
    }

    #[test]
    fn grpc_codes_map_to_the_run_kinds() {
        let (k, m) = status_of(&tonic::Status::invalid_argument("prompt too long"));
        assert_eq!(k, Status::HttpError);
        assert_eq!(m, "gRPC InvalidArgument: prompt too long");
        let (k, _) = status_of(&tonic::Status::deadline_exceeded("late"));
        assert_eq!(k, Status::Timeout);
        let (k, _) = status_of(&tonic::Status::data_loss("bad message"));
        assert_eq!(k, Status::ProtocolError);
        // The server's own UNAVAILABLE (no transport cause) is its answer, not a lost connection.
        let (k, _) = status_of(&tonic::Status::unavailable("draining"));
        assert_eq!(k, Status::HttpError);
    }
}
