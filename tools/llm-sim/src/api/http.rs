//! What every route's response is built from: the body type, which API a request came
//! through, and plain and JSON responses.

use std::convert::Infallible;
use std::io;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

/// Response body type of every route.
pub type Body = http_body_util::combinators::UnsyncBoxBody<Bytes, io::Error>;

/// Which API a request came through (decides the response shapes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Chat,
    Completion,
    Tgi,
    /// OpenAI Responses (`POST /v1/responses`).
    Responses,
    /// Anthropic Messages (`POST /v1/messages`).
    Messages,
}

pub fn full(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(
        Full::new(body.into())
            .map_err(|e: Infallible| match e {})
            .boxed_unsync(),
    );
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

pub fn json_response(status: StatusCode, v: &serde_json::Value) -> Response<Body> {
    full(status, "application/json", v.to_string())
}
