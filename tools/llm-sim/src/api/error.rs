//! Refused requests: [`ApiError`] and the error body of each API (vLLM's OpenAI shape, TGI's,
//! the OpenAI Responses shape and Anthropic's), all in one place.

use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::http::{json_response, Api, Body};

/// A vLLM 0.32 error: `{"error":{"message":..,"type":..,"param":..,"code":..}}`
/// (TGI routes: `{"error":..,"error_type":..}`).
pub fn error_response(api: Api, status: StatusCode, message: &str) -> Response<Body> {
    match api {
        Api::Responses => return json_response(status, &responses_error_body(status, message)),
        Api::Messages => return json_response(status, &messages_error_body(status, message)),
        _ => {}
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
    let kind = match status.as_u16() {
        400 => "BadRequestError",
        404 => "NotFoundError",
        409 => "ConflictError",
        413 => "BadRequestError",
        429 => "RateLimitError",
        503 => "ServiceUnavailableError",
        _ => "InternalServerError",
    };
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

/// The Responses error object: `{"error": {"message", "type", "param", "code"}}`.
fn responses_error_body(status: StatusCode, message: &str) -> Value {
    let (kind, code) = match status.as_u16() {
        400 | 413 | 422 => ("invalid_request_error", Value::Null),
        401 => ("invalid_request_error", json!("invalid_api_key")),
        404 => ("invalid_request_error", json!("model_not_found")),
        429 => ("rate_limit_error", json!("rate_limit_exceeded")),
        503 => ("server_error", json!("service_unavailable")),
        _ => ("server_error", json!("server_error")),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// Anthropic's error object: `{"type":"error","error":{"type","message"}}`.
fn messages_error_body(status: StatusCode, message: &str) -> Value {
    let kind = match status.as_u16() {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
