//! The non-streaming answer: wait for the whole completion, then one JSON body in the API's
//! shape (with the plan's faults: a stall before it, usage left out, the body cut in half, or
//! half of it sent before a connection reset).

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::json;

use super::error::error_response;
use super::http::{full, Api, Body};
use super::meta::{reset_error, word, Meta, RESET_PAUSE, SYSTEM_FINGERPRINT};
use super::turn::Parts;
use super::{messages_api, responses_api};
use crate::engine::{CancelOnDrop, Progress, ReqShared};
use crate::state::AppState;

/// Non-streaming: waits for the whole completion, then answers in one JSON body.
pub(super) async fn whole_response(
    state: Arc<AppState>,
    meta: Meta,
    shared: Arc<ReqShared>,
) -> Response<Body> {
    let guard = CancelOnDrop(shared);
    let mut p = Progress {
        generated: 0,
        finished: false,
        aborted: false,
    };
    while !p.finished && !p.aborted {
        p = guard.0.wait_beyond(p.generated).await;
    }
    if p.aborted {
        return error_response(
            meta.api,
            StatusCode::SERVICE_UNAVAILABLE,
            "The request was aborted by the engine.",
        );
    }
    if meta.plan.stall {
        tokio::time::sleep(state.wall(meta.plan.stall_ms)).await;
    }
    let n = p.generated;
    let parts = meta.parts(n);
    let cached = guard.0.cached_tokens();
    let v = body_json(&meta, state.cfg.model_name.as_str(), &parts, n, cached);
    let mut resp = body_response(&meta, v.to_string().into_bytes());
    if meta.api == Api::Tgi {
        let h = resp.headers_mut();
        h.insert("x-prompt-tokens", HeaderValue::from(meta.prompt_tokens));
        h.insert("x-generated-tokens", HeaderValue::from(n));
        h.insert("x-cached-tokens", HeaderValue::from(cached));
    }
    resp
}

/// The answer's JSON in the API's shape, after `n` tokens (`parts`) with `cached` prompt tokens
/// from the prefix cache (without `usage` when the plan leaves it out).
fn body_json(meta: &Meta, model: &str, parts: &Parts, n: u32, cached: u32) -> serde_json::Value {
    let text = parts.text.as_str();
    let usage: serde_json::Value = if meta.plan.missing_usage {
        serde_json::Value::Null
    } else {
        // As vLLM 0.32 with --enable-prompt-tokens-details: chat reports the cache blocks it
        // created (0 here: llm-sim does not count them), completions a null.
        let created = if meta.api == Api::Chat {
            json!(0)
        } else {
            json!(null)
        };
        let mm = match meta.image_tokens {
            0 => serde_json::Value::Null,
            n => json!({"image": n}),
        };
        json!({"prompt_tokens": meta.prompt_tokens, "total_tokens": meta.prompt_tokens + n,
               "completion_tokens": n, "prompt_tokens_details": {"cached_tokens": cached,
               "created_cache_tokens": created, "multimodal_tokens": mm},
               "completion_tokens_details": null})
    };
    let mut usage = usage;
    if meta.api == Api::Chat && meta.reasoning > 0 && usage.is_object() {
        usage["completion_tokens_details"] = json!({"reasoning_tokens": meta.reasoning.min(n)});
    }
    let mut v = match meta.api {
        // vLLM 0.32's keys, its nulls included (docs/llm-sim.md, "Differences from vLLM 0.32").
        Api::Chat => json!({
            "id": meta.id, "object": "chat.completion", "created": meta.created, "model": model,
            "choices": [{"index": 0, "message": chat_message(meta, parts),
                "logprobs": null, "finish_reason": meta.chat_finish(), "stop_reason": null,
                "token_ids": null, "routed_experts": null}],
            "service_tier": null, "system_fingerprint": SYSTEM_FINGERPRINT,
            "usage": usage, "prompt_logprobs": null, "prompt_token_ids": null,
            "prompt_text": null, "kv_transfer_params": null, "ec_transfer_params": null,
            "metrics": null}),
        Api::Completion => json!({
            "id": meta.id, "object": "text_completion", "created": meta.created, "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": meta.finish,
                "stop_reason": null, "token_ids": null, "prompt_logprobs": null,
                "prompt_token_ids": null, "routed_experts": null}],
            "service_tier": null, "system_fingerprint": SYSTEM_FINGERPRINT,
            "usage": usage, "kv_transfer_params": null, "ec_transfer_params": null,
            "metrics": null}),
        Api::Responses => responses_api::response_object(meta, model, parts, n, cached),
        Api::Messages => messages_api::message_object(meta, model, parts, n, cached),
        Api::Tgi => {
            if meta.tgi_details && !meta.plan.missing_usage {
                let tokens: Vec<serde_json::Value> = (0..n)
                    .map(|i| {
                        let (id, w) = word(meta.output_seed, i);
                        json!({"id": id, "text": format!(" {w}"), "logprob": -0.1, "special": false})
                    })
                    .collect();
                json!({"generated_text": text, "details": {"finish_reason": meta.finish,
                    "generated_tokens": n, "seed": null, "prefill": [], "tokens": tokens}})
            } else {
                json!({"generated_text": text})
            }
        }
    };
    if meta.api != Api::Tgi && meta.plan.missing_usage {
        if let Some(o) = v.as_object_mut() {
            o.remove("usage");
        }
    }
    v
}

/// The 200 response carrying `body`: cut in half when the plan makes it malformed, and when
/// the plan resets the connection, half of it sent before the reset.
fn body_response(meta: &Meta, mut body: Vec<u8>) -> Response<Body> {
    if meta.plan.malformed {
        body.truncate(body.len() / 2);
    }
    if meta.plan.reset {
        // Send half the body, then fail the connection.
        use futures_util::StreamExt;
        let half = Bytes::from(body[..body.len() / 2].to_vec());
        let frames = futures_util::stream::iter([Ok(Frame::data(half))]).chain(
            futures_util::stream::once(async {
                tokio::time::sleep(RESET_PAUSE).await;
                Err(reset_error())
            }),
        );
        let mut r = Response::new(StreamBody::new(frames).boxed_unsync());
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    } else {
        full(StatusCode::OK, "application/json", body)
    }
}

/// Chat's `message`: `reasoning` the thinking (null without), `content` the text (null when
/// there is none after thinking or a tool call), `tool_calls` the call with its whole
/// arguments (the key left out without one, as vLLM 0.32).
fn chat_message(meta: &Meta, parts: &Parts) -> serde_json::Value {
    let nothing_left = parts.text.is_empty() && (meta.reasoning > 0 || parts.args.is_some());
    let mut m = json!({"role": "assistant",
        "content": if nothing_left { json!(null) } else { json!(parts.text) },
        "refusal": null, "annotations": null, "audio": null, "function_call": null,
        "reasoning": if meta.reasoning > 0 { json!(parts.thinking) } else { json!(null) }});
    if let (Some(tool), Some(args)) = (&meta.tool, &parts.args) {
        m["tool_calls"] = json!([{"id": meta.call_id(), "type": "function",
            "function": {"name": tool.name, "arguments": args}}]);
    }
    m
}
