//! The streaming answer: Server-Sent Events in the API's shape (OpenAI chat and completion
//! chunks, TGI's token events, the Responses and Messages event streams written by
//! `responses_api.rs` and `messages_api.rs`), written as the engine produces the tokens, with
//! the plan's faults (a stall, a malformed chunk, a connection reset at the fault position).

use std::fmt::Write as _;
use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::Response;

use super::http::{Api, Body};
use super::meta::{reset_error, word, Meta, RESET_PAUSE, SYSTEM_FINGERPRINT};
use super::turn::{escaped, Kind};
use super::{messages_api, responses_api};
use crate::engine::{CancelOnDrop, ReqShared};
use crate::state::AppState;

/// Per-request state of an SSE stream.
struct SseState {
    state: Arc<AppState>,
    guard: CancelOnDrop,
    meta: Meta,
    /// Prefix of every content event up to the token text.
    prefix: String,
    sent: u32,
    stalled: bool,
    done: bool,
    /// The events announcing the response were written (Responses, Messages).
    head_sent: bool,
    /// The text so far (TGI's last event); Responses and Messages: of the current output
    /// item (its closing events).
    text: String,
    /// Responses: the next event's `sequence_number`.
    seq: u32,
    buf: BytesMut,
}

pub(super) fn stream_response(
    state: Arc<AppState>,
    meta: Meta,
    shared: Arc<ReqShared>,
) -> Response<Body> {
    let model_json = state.model_json.as_str();
    let prefix = match meta.api {
        Api::Chat => format!(
            "data: {{\"id\":\"{}\",\"object\":\"chat.completion.chunk\",\"created\":{},\"model\":{model_json},\"choices\":[{{\"index\":0,\"delta\":",
            meta.id, meta.created
        ),
        Api::Completion => format!(
            "data: {{\"id\":\"{}\",\"object\":\"text_completion\",\"created\":{},\"model\":{model_json},\"choices\":[{{\"index\":0,\"text\":\"",
            meta.id, meta.created
        ),
        // Set as each output item or block opens; until then, the first one's (a malformed
        // chunk before the first token cuts it).
        Api::Responses => {
            responses_api::open_segment(&meta, meta.kind(0), &mut 0, &mut BytesMut::new())
        }
        Api::Messages => messages_api::open_segment(&meta, meta.kind(0), &mut BytesMut::new()),
        Api::Tgi => String::new(),
    };
    let text = if matches!(meta.api, Api::Tgi | Api::Responses | Api::Messages) {
        String::with_capacity(meta.max_tokens as usize * 5)
    } else {
        String::new()
    };
    let st = SseState {
        state,
        guard: CancelOnDrop(shared),
        meta,
        prefix,
        sent: 0,
        stalled: false,
        done: false,
        head_sent: false,
        text,
        seq: responses_api::FIRST_SEQ,
        buf: BytesMut::with_capacity(4096),
    };
    let stream = futures_util::stream::unfold(st, next_frame);
    let mut r = Response::new(StreamBody::new(stream).boxed_unsync());
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    r
}

async fn next_frame(mut st: SseState) -> Option<(Result<Frame<Bytes>, io::Error>, SseState)> {
    if st.done {
        return None;
    }
    if !st.head_sent {
        st.head_sent = true;
        if let Some(frame) = head_frame(&mut st).await {
            return Some((Ok(frame), st));
        }
    }
    let plan = st.meta.plan;
    if plan.stall && !st.stalled && st.sent >= st.meta.fault_at {
        st.stalled = true;
        tokio::time::sleep(st.state.wall(plan.stall_ms)).await;
    }
    if plan.reset && st.sent >= st.meta.fault_at {
        st.done = true;
        tokio::time::sleep(RESET_PAUSE).await;
        return Some((Err(reset_error()), st));
    }
    let p = st.guard.0.wait_beyond(st.sent).await;
    if p.aborted {
        st.done = true;
        return Some((
            Err(io::Error::new(
                io::ErrorKind::Interrupted,
                "request aborted",
            )),
            st,
        ));
    }
    let mut upto = p.generated.min(st.meta.max_tokens);
    if (plan.reset || (plan.stall && !st.stalled)) && st.sent < st.meta.fault_at {
        upto = upto.min(st.meta.fault_at);
    }
    // One buffer per stream, reused: once hyper has written and dropped the previous frames,
    // `reserve` reclaims the same allocation, so steady-state streaming allocates nothing.
    let mut buf = std::mem::take(&mut st.buf);
    buf.reserve((upto - st.sent) as usize * (st.prefix.len() + 80) + 256);
    for i in st.sent..upto {
        if plan.malformed && i == st.meta.fault_at {
            write_malformed(&st, &mut buf);
        }
        write_token(&mut st, i, &mut buf);
    }
    st.sent = upto;
    if p.finished && st.sent >= p.generated {
        write_tail(&mut st, &mut buf);
        st.done = true;
    }
    let frame = buf.split().freeze();
    st.buf = buf;
    Some((Ok(Frame::data(frame)), st))
}

/// The events a response starts with before its first token, if its API has any: Responses'
/// `response.created` and `response.in_progress` at once (as servers send them on accepting
/// the request), Anthropic's `message_start` once the engine has scheduled the request (its
/// usage tells the prefix-cache hit).
async fn head_frame(st: &mut SseState) -> Option<Frame<Bytes>> {
    let mut buf = BytesMut::with_capacity(1024);
    match st.meta.api {
        Api::Responses => {
            responses_api::write_head(&st.meta, &st.state.cfg.model_name, &mut buf);
        }
        Api::Messages => {
            st.guard.0.wait_admitted().await;
            let cached = st.guard.0.cached_tokens();
            messages_api::write_start(&st.meta, &st.state.cfg.model_name, cached, &mut buf);
        }
        _ => return None,
    }
    Some(Frame::data(buf.freeze()))
}

fn write_malformed(st: &SseState, buf: &mut BytesMut) {
    // A chunk cut off in the middle of its JSON, as a broken proxy might deliver it.
    let cut = match st.prefix.find("data: ") {
        // Events with an `event:` line: cut inside the data line.
        Some(at) if at > 0 => (at + 30).min(st.prefix.len()),
        _ => st.prefix.len().min(40),
    };
    match st.meta.api {
        Api::Tgi => buf.extend_from_slice(b"data:{\"index\":"),
        _ => buf.extend_from_slice(&st.prefix.as_bytes()[..cut]),
    }
    buf.extend_from_slice(b"\n\n");
}

/// Appends token `i`'s event in the API's shape.
fn write_token(st: &mut SseState, i: u32, buf: &mut BytesMut) {
    let (id, w) = word(st.meta.output_seed, i);
    let last = i + 1 == st.meta.max_tokens;
    match st.meta.api {
        Api::Chat => write_chat_token(st, i, w, last, buf),
        Api::Completion => write_completion_token(st, i, w, last, buf),
        Api::Responses | Api::Messages => write_chat_like_token(st, i, w, buf),
        Api::Tgi => write_tgi_token(st, i, id, w, last, buf),
    }
}

/// Token `i` (`w`) as a chat completion chunk, after the chunk announcing the assistant's
/// role when it is the first.
fn write_chat_token(st: &SseState, i: u32, w: &str, last: bool, buf: &mut BytesMut) {
    let meta = &st.meta;
    if i == 0 {
        buf.extend_from_slice(st.prefix.as_bytes());
        buf.extend_from_slice(
            b"{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]",
        );
        // vLLM 0.32's first chunk only.
        buf.extend_from_slice(b",\"prompt_token_ids\":null,\"prompt_text\":null");
        if meta.continuous_usage {
            buf.extend_from_slice(b",\"usage\":");
            buf.extend_from_slice(
                usage_json(
                    meta.prompt_tokens,
                    0,
                    st.guard.0.cached_tokens(),
                    meta.image_tokens,
                )
                .as_bytes(),
            );
        }
        buf.extend_from_slice(b"}\n\n");
    }
    buf.extend_from_slice(st.prefix.as_bytes());
    match meta.kind(i) {
        Kind::Thinking => {
            buf.extend_from_slice(b"{\"reasoning\":\" ");
            buf.extend_from_slice(w.as_bytes());
        }
        Kind::Text => {
            buf.extend_from_slice(b"{\"content\":\" ");
            buf.extend_from_slice(w.as_bytes());
        }
        Kind::Tool => write_chat_tool_delta(meta, i, buf),
    }
    // The delta's string, then the delta (a tool call's function, call and list before it).
    match meta.kind(i) {
        Kind::Tool => buf.extend_from_slice(b"\"}}]}"),
        _ => buf.extend_from_slice(b"\"}"),
    }
    if last {
        buf.extend_from_slice(b",\"logprobs\":null,\"finish_reason\":\"");
        buf.extend_from_slice(meta.chat_finish().as_bytes());
        buf.extend_from_slice(b"\",\"stop_reason\":null,\"token_ids\":null}]");
    } else {
        buf.extend_from_slice(b",\"logprobs\":null,\"finish_reason\":null,\"token_ids\":null}]");
    }
    if meta.continuous_usage {
        buf.extend_from_slice(b",\"usage\":");
        buf.extend_from_slice(
            usage_json(
                meta.prompt_tokens,
                i + 1,
                st.guard.0.cached_tokens(),
                meta.image_tokens,
            )
            .as_bytes(),
        );
    }
    buf.extend_from_slice(b"}\n\n");
}

/// Token `i`'s tool-call delta up to the end of its arguments fragment (the caller closes it
/// with `"}}]}`): `{"content":null,"tool_calls":[{...,"function":{...,"arguments":"FRAGMENT`
/// (vLLM 0.32's hermes parser keys); the first also carries the call's id, type and name.
fn write_chat_tool_delta(meta: &Meta, i: u32, buf: &mut BytesMut) {
    buf.extend_from_slice(b"{\"content\":null,\"tool_calls\":[{");
    if i == meta.reasoning {
        let name = meta.tool.as_ref().map(|t| t.name.as_str()).unwrap_or("");
        let _ = write!(
            buf,
            "\"id\":\"{}\",\"type\":\"function\",\"index\":0,\"function\":{{\"name\":\"{}\",",
            meta.call_id(),
            escaped(name)
        );
    } else {
        buf.extend_from_slice(b"\"index\":0,\"function\":{");
    }
    buf.extend_from_slice(b"\"arguments\":\"");
    buf.extend_from_slice(escaped(&meta.fragment(i)).as_bytes());
}

/// The end of a completion chunk's choice after its finish reason (vLLM 0.32's keys; no
/// `usage` key follows unless usage is continuous).
const COMPLETION_CHOICE_END: &[u8] =
    b",\"stop_reason\":null,\"prompt_token_ids\":null,\"token_ids\":null}]";

/// Token `i` (`w`) as a completion chunk.
fn write_completion_token(st: &SseState, i: u32, w: &str, last: bool, buf: &mut BytesMut) {
    let meta = &st.meta;
    buf.extend_from_slice(st.prefix.as_bytes());
    buf.extend_from_slice(b" ");
    buf.extend_from_slice(w.as_bytes());
    if last {
        buf.extend_from_slice(b"\",\"logprobs\":null,\"finish_reason\":\"");
        buf.extend_from_slice(meta.finish.as_bytes());
        buf.extend_from_slice(b"\"");
        buf.extend_from_slice(COMPLETION_CHOICE_END);
    } else {
        buf.extend_from_slice(b"\",\"logprobs\":null,\"finish_reason\":null");
        buf.extend_from_slice(COMPLETION_CHOICE_END);
    }
    if meta.continuous_usage {
        buf.extend_from_slice(b",\"usage\":");
        buf.extend_from_slice(
            usage_json(
                meta.prompt_tokens,
                i + 1,
                st.guard.0.cached_tokens(),
                meta.image_tokens,
            )
            .as_bytes(),
        );
    }
    buf.extend_from_slice(b"}\n\n");
}

/// Token `i` (`w`) as a Responses or Messages delta event, after the events closing the
/// previous output item (or block) and opening its own when it is the first of its kind.
fn write_chat_like_token(st: &mut SseState, i: u32, w: &str, buf: &mut BytesMut) {
    let kind = st.meta.kind(i);
    if i == 0 || st.meta.kind(i - 1) != kind {
        if i > 0 {
            close_segment(st, st.meta.kind(i - 1), buf);
        }
        st.prefix = match st.meta.api {
            Api::Responses => responses_api::open_segment(&st.meta, kind, &mut st.seq, buf),
            _ => messages_api::open_segment(&st.meta, kind, buf),
        };
        if kind == Kind::Tool {
            // The event opening the call (its name) is the call's first token.
            return;
        }
    }
    buf.extend_from_slice(st.prefix.as_bytes());
    if kind == Kind::Tool {
        let fragment = st.meta.fragment(i);
        buf.extend_from_slice(escaped(&fragment).as_bytes());
        st.text.push_str(&fragment);
    } else {
        buf.extend_from_slice(b" ");
        buf.extend_from_slice(w.as_bytes());
        st.text.push(' ');
        st.text.push_str(w);
    }
    if st.meta.api == Api::Responses {
        responses_api::end_delta(kind, &mut st.seq, buf);
    } else {
        buf.extend_from_slice(messages_api::DELTA_SUFFIX);
    }
}

/// The events closing the output item (Responses) or block (Messages) of token kind `kind`;
/// the next item's text starts afresh.
fn close_segment(st: &mut SseState, kind: Kind, buf: &mut BytesMut) {
    if st.meta.api == Api::Responses {
        responses_api::close_segment(&st.meta, kind, &st.text, &mut st.seq, buf);
    } else {
        messages_api::close_segment(&st.meta, kind, buf);
    }
    st.text.clear();
}

/// Token `i` (`id`, `w`) as a TGI stream event; the last one carries the whole text (and the
/// details when asked for).
fn write_tgi_token(st: &mut SseState, i: u32, id: u32, w: &str, last: bool, buf: &mut BytesMut) {
    let meta = &st.meta;
    st.text.push(' ');
    st.text.push_str(w);
    let index = i + 1;
    let details = if last && meta.tgi_details && !meta.plan.missing_usage {
        format!(
                "{{\"finish_reason\":\"{}\",\"generated_tokens\":{},\"seed\":null,\"input_length\":{}}}",
                meta.finish, meta.max_tokens, meta.prompt_tokens
            )
    } else {
        "null".to_string()
    };
    let generated = if last {
        serde_json::Value::String(st.text.clone()).to_string()
    } else {
        "null".to_string()
    };
    let line = format!(
            "data:{{\"index\":{index},\"token\":{{\"id\":{id},\"text\":\" {w}\",\"logprob\":-0.1,\"special\":false}},\"generated_text\":{generated},\"details\":{details}}}\n\n"
        );
    buf.extend_from_slice(line.as_bytes());
}

fn write_tail(st: &mut SseState, buf: &mut BytesMut) {
    let cached = st.guard.0.cached_tokens();
    if matches!(st.meta.api, Api::Responses | Api::Messages) && st.sent > 0 {
        close_segment(st, st.meta.kind(st.sent - 1), buf);
    }
    let meta = &st.meta;
    let model = st.state.cfg.model_name.as_str();
    match meta.api {
        Api::Tgi => return,
        Api::Responses => {
            let parts = meta.parts(st.sent);
            let counts = (st.sent, cached);
            return responses_api::write_completed(meta, model, &parts, counts, &mut st.seq, buf);
        }
        Api::Messages => return messages_api::write_tail(meta, st.sent, cached, buf),
        _ => {}
    }
    if meta.include_usage && !meta.plan.missing_usage {
        let object = if meta.api == Api::Chat {
            "chat.completion.chunk"
        } else {
            "text_completion"
        };
        let mut usage = usage_json(
            meta.prompt_tokens,
            st.sent,
            st.guard.0.cached_tokens(),
            meta.image_tokens,
        );
        if meta.api == Api::Chat {
            // vLLM 0.32's chat (not completions) stream also reports the cache blocks created.
            usage.truncate(usage.len() - 2);
            usage.push_str(",\"created_cache_tokens\":0}");
            // With thinking, the count of it (vLLM 0.32 reports 0 here: docs/llm-sim.md).
            if meta.reasoning > 0 {
                let n = meta.reasoning.min(st.sent);
                usage.push_str(&format!(
                    ",\"completion_tokens_details\":{{\"reasoning_tokens\":{n}}}"
                ));
            }
            usage.push('}');
        }
        let line = format!(
            "data: {{\"id\":\"{}\",\"object\":\"{object}\",\"created\":{},\"model\":{},\"choices\":[],\"usage\":{usage},\"system_fingerprint\":\"{SYSTEM_FINGERPRINT}\"}}\n\n",
            meta.id, meta.created, st.state.model_json
        );
        buf.extend_from_slice(line.as_bytes());
    }
    buf.extend_from_slice(b"data: [DONE]\n\n");
}

/// A stream's usage; a prompt with images also reports its image tokens as vLLM does
/// (`multimodal_tokens`).
fn usage_json(prompt: u32, completion: u32, cached: u32, images: u32) -> String {
    let mm = match images {
        0 => String::new(),
        n => format!(",\"multimodal_tokens\":{{\"image\":{n}}}"),
    };
    format!(
        "{{\"prompt_tokens\":{prompt},\"total_tokens\":{},\"completion_tokens\":{completion},\"prompt_tokens_details\":{{\"cached_tokens\":{cached}{mm}}}}}",
        prompt + completion
    )
}
