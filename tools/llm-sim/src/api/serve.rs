//! Serving a generation request: the readiness check and the request's fault plan, parsing
//! off the runtime thread, the hand-over to the engine (the simulated EOS length, the waiting
//! queue's bound) and the answer, streaming (`stream.rs`) or whole (`whole.rs`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hyper::{Response, StatusCode};

use super::error::{error_response, ApiError};
use super::http::{Api, Body};
use super::job::Job;
use super::meta::Meta;
use super::parse::parse_job;
use super::stream::stream_response;
use super::turn::reasoning_tokens;
use super::whole::whole_response;
use crate::engine::{NewRequest, ReqShared};
use crate::faults::FaultPlan;
use crate::metrics::FaultKind;
use crate::state::AppState;
use crate::util::{hash3, mix64};

/// Serves one generation request of `api`.
pub async fn generate(
    state: Arc<AppState>,
    api: Api,
    body: Bytes,
    tgi_stream: bool,
) -> Response<Body> {
    let (n, plan) = match admit(&state) {
        Ok(a) => a,
        Err(e) => return e.into_response(api),
    };
    let job = parse_job_off_runtime(&state, api, body, tgi_stream).await;
    match job {
        Ok(j) => serve(state, n, plan, j).await,
        Err(e) => e.into_response(api),
    }
}

/// Bodies up to this size are parsed and counted inline with the built-in tokenizer (~6k
/// words: well under a millisecond), and without waiting for their turn with a real one.
const SHORT_BODY_MAX_BYTES: usize = 32 * 1024;

/// [`parse_job`], on a blocking thread when the tokenizer is a real one (or the body long): rendering a chat
/// template and tokenizing a long prompt take milliseconds (a 12k-token Qwen3 prompt), and on
/// the server's runtime thread they held up the engine's steps and every stream (the engine
/// then caught up in bursts: all of a stream's tokens at once). The built-in tokenizer is cheap
/// and stays inline.
///
/// One request is tokenized at a time, in arrival order (`AppState::tokenize_turn`, a fair
/// semaphore), as a server's front end does. With one blocking thread per request, a burst of
/// long prompts was tokenized all at once, sharing the cores: each took as long as the whole
/// burst, and the first one reached the engine only when the last was counted (the client's
/// mean TTFT with Qwen3 was 24% above the built-in tokenizer's). In order, the first enters
/// the engine after its own counting and the others are counted while it is prefilled.
///
/// The built-in tokenizer takes the same path for long bodies (a 12k-word prompt is ~1.5 ms
/// of counting, longer than an engine step): inline, a burst of them held up the engine's
/// steps and streams, and a real tokenizer's timing was compared with a distorted one.
/// Shorter bodies stay inline (a thread hand-off would cost more than the counting).
///
/// With a real tokenizer, short bodies go to a blocking thread at once, without waiting for
/// their turn: the built-in tokenizer counts them inline, so they never queue behind a burst's
/// long prompts, and a real tokenizer's short requests waited for every long one before them
/// (a quarter of the Mooncake trace's requests; the blocking thread still keeps a short body
/// of new words, counted piece by piece, off the runtime thread).
pub async fn parse_job_off_runtime(
    state: &Arc<AppState>,
    api: Api,
    body: Bytes,
    tgi_stream: bool,
) -> Result<Job, ApiError> {
    let short = body.len() < SHORT_BODY_MAX_BYTES;
    if state.tokenizer.is_builtin() && short {
        return parse_job(state, api, &body, tgi_stream);
    }
    let failed = |why: String| ApiError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: format!("Tokenizing the request failed: {why}"),
    };
    // The semaphore is never closed; the permit is held until the job is parsed.
    let _turn = match short {
        true => None,
        false => Some(
            state
                .tokenize_turn
                .acquire()
                .await
                .map_err(|e| failed(e.to_string()))?,
        ),
    };
    let st = state.clone();
    tokio::task::spawn_blocking(move || parse_job(&st, api, &body, tgi_stream))
        .await
        .unwrap_or_else(|e| Err(failed(e.to_string())))
}

/// Serves a request parsed by [`parse_job`] (on an instance with the same model and limits).
pub async fn generate_job(state: Arc<AppState>, job: Job) -> Response<Body> {
    match admit(&state) {
        Ok((n, plan)) => serve(state, n, plan, job).await,
        Err(e) => e.into_response(job.api),
    }
}

/// The readiness check, the request's number and its fault plan; an error when the server is
/// not ready or the plan is an error status.
fn admit(state: &AppState) -> Result<(u64, FaultPlan), ApiError> {
    if !state.is_ready() {
        return Err(ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "The server is still starting (simulated readiness delay).".into(),
        });
    }
    let n = state.req_counter.fetch_add(1, Ordering::Relaxed);
    let plan = state.faults.plan(n);
    if let Some(code) = plan.status {
        state.metrics.count_fault(FaultKind::Status);
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let msg = match code {
            429 => "Simulated fault: too many requests.",
            503 => "Simulated fault: service unavailable.",
            _ => "Simulated fault: internal server error.",
        };
        return Err(ApiError {
            status,
            message: msg.into(),
        });
    }
    Ok((n, plan))
}

/// Hands request number `n` to the engine and answers it (streaming or whole).
async fn serve(state: Arc<AppState>, n: u64, plan: FaultPlan, job: Job) -> Response<Body> {
    let api = job.api;
    let shared = Arc::new(ReqShared::new(job.stream));
    let output_seed = hash3(state.id_seed, n, 0x0u64);
    let prompt_tokens = job.prompt.len() as u32;
    let (length, stops) = match state.cfg.eos_mean_tokens {
        Some(mean) if !job.exact => {
            let drawn = eos_length(output_seed, mean);
            let len = drawn.clamp(job.min_tokens.max(1), job.max_tokens);
            (len, len < job.max_tokens)
        }
        _ => (job.max_tokens, false),
    };
    let queued = state.metrics.unscheduled.fetch_add(1, Ordering::Relaxed);
    if let Some(limit) = state.cfg.max_waiting {
        if queued >= limit as u64 {
            state.metrics.unscheduled.fetch_sub(1, Ordering::Relaxed);
            return error_response(
                api,
                StatusCode::TOO_MANY_REQUESTS,
                &format!("The waiting queue is full ({limit} requests)."),
            );
        }
    }
    let submitted = state.engine.submit(NewRequest {
        prompt: job.prompt,
        max_tokens: length,
        output_seed,
        stops,
        shared: shared.clone(),
        image_regions: job.image_regions,
    });
    if !submitted {
        state.metrics.unscheduled.fetch_sub(1, Ordering::Relaxed);
        return error_response(
            api,
            StatusCode::SERVICE_UNAVAILABLE,
            "The engine is shutting down.",
        );
    }
    let reasoning = reasoning_tokens(api, length, state.cfg.reasoning_share, job.thinking_budget);
    let meta = Meta {
        api,
        id: request_id(api, state.id_seed, n),
        created: now_secs(),
        prompt_tokens,
        image_tokens: job.image_tokens,
        max_tokens: length,
        finish: match (stops, api) {
            (false, _) => "length",
            (true, Api::Tgi) => "eos_token",
            (true, _) => "stop",
        },
        output_seed,
        include_usage: job.include_usage,
        continuous_usage: job.continuous_usage,
        tgi_details: job.tgi_details,
        plan,
        fault_at: plan.position(length),
        reasoning,
        // A turn that thinks to its last token never reaches its tool call.
        tool: job.tool.filter(|_| reasoning < length),
    };
    count_plan_faults(&state, &plan);
    if job.stream {
        stream_response(state, meta, shared)
    } else {
        whole_response(state, meta, shared).await
    }
}

fn count_plan_faults(state: &AppState, plan: &FaultPlan) {
    if plan.reset {
        state.metrics.count_fault(FaultKind::Reset);
    }
    if plan.stall {
        state.metrics.count_fault(FaultKind::Stall);
    }
    if plan.malformed {
        state.metrics.count_fault(FaultKind::Malformed);
    }
    if plan.missing_usage {
        state.metrics.count_fault(FaultKind::MissingUsage);
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn request_id(api: Api, seed: u64, n: u64) -> String {
    let a = mix64(seed ^ n);
    let b = mix64(a ^ 0xA5A5);
    match api {
        Api::Chat => format!("chatcmpl-{a:016x}{b:016x}"),
        Api::Completion => format!("cmpl-{a:016x}{b:016x}"),
        Api::Tgi => format!("tgi-{a:016x}"),
        Api::Responses => format!("resp_{a:016x}{b:016x}"),
        Api::Messages => format!("msg_{a:016x}{b:016x}"),
    }
}

/// Length of a request ended by the simulated EOS: geometric with mean `mean` (at least 1),
/// drawn from the request's output seed.
pub fn eos_length(seed: u64, mean: f64) -> u32 {
    if mean <= 1.0 {
        return 1;
    }
    // Uniform in (0, 1] from 53 bits of the seed's hash.
    let u = ((mix64(seed ^ 0xE05E_E05E) >> 11) + 1) as f64 / (1u64 << 53) as f64;
    let p = 1.0 / mean;
    let extra = (u.ln() / (1.0 - p).ln()).floor();
    1 + extra.min(f64::from(u32::MAX - 1)) as u32
}
