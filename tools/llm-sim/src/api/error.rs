//! Refused requests: [`ApiError`] and the error body of each API as vLLM 0.32 sends them (its
//! OpenAI shape on chat, completions and Responses, Anthropic's shape on Messages), and TGI's,
//! all in one place.

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::http::{json_response, Api, Body};

/// A vLLM 0.32 error: `{"error":{"message":..,"type":..,"param":..,"code":..}}`
/// (TGI routes: `{"error":..,"error_type":..}`).
pub fn error_response(api: Api, status: StatusCode, message: &str) -> Response<Body> {
    if api == Api::Messages {
        return json_response(status, &messages_error_body(status, message));
    }
    if api == Api::Tgi {
        let kind = match status.as_u16() {
            400 | 422 => "validation",
            429 => "overloaded",
            503 => "unhealthy",
            _ => "generation",
        };
        return json_response(status, &json!({"error": message, "error_type": kind}));
    }
    let kind = vllm_error_type(status);
    json_response(
        status,
        &json!({"error": {"message": message, "type": kind, "param": openai_param(status, message),
                "code": status.as_u16()}}),
    )
}

/// The request field an error blames, as vLLM 0.32 names it: `input_tokens` for a prompt past
/// the context length, `model` for an unknown model; null otherwise.
fn openai_param(status: StatusCode, message: &str) -> Value {
    if status == StatusCode::NOT_FOUND && message.starts_with("The model `") {
        json!("model")
    } else if message.contains("maximum context length") {
        json!("input_tokens")
    } else if let Some(rest) = message.split("(parameter=").nth(1) {
        json!(rest.split(',').next().unwrap_or_default())
    } else {
        Value::Null
    }
}

/// A request the server refuses, before it reaches the engine.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn into_response(self, api: Api) -> Response<Body> {
        error_response(api, self.status, &self.message)
    }
}

/// A validation error: 400 on OpenAI routes, 422 on TGI routes.
pub(super) fn bad(api: Api, msg: impl Into<String>) -> ApiError {
    let status = if api == Api::Tgi {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::BAD_REQUEST
    };
    ApiError {
        status,
        message: msg.into(),
    }
}

/// vLLM's error `type` for an HTTP status (the name of its exception class).
fn vllm_error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 413 => "BadRequestError",
        401 => "AuthenticationError",
        404 => "NotFoundError",
        409 => "ConflictError",
        429 => "RateLimitError",
        503 => "ServiceUnavailableError",
        _ => "InternalServerError",
    }
}

/// The Messages error object, as vLLM 0.32 sends it: Anthropic's shape
/// `{"type":"error","error":{"type","message"}}` with vLLM's type names.
fn messages_error_body(status: StatusCode, message: &str) -> Value {
    json!({"type": "error", "error": {"type": vllm_error_type(status), "message": message}})
}
