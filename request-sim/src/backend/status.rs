//! How a request ended ([`Status`]) and which instance served it ([`ServedBy`]): what the
//! sending path tells the record (`crate::record` names both too).

use serde::{Deserialize, Serialize};

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Completed with a full response.
    Ok,
    /// Server answered with a non-2xx HTTP status.
    HttpError,
    /// No complete response within the request timeout.
    Timeout,
    /// Could not connect, or the connection was reset/closed.
    ConnectError,
    /// Malformed SSE/JSON, error object inside a 200 stream, stream ended without [DONE].
    ProtocolError,
    /// The run stopped (Ctrl-C, time limit, early stop) before the request finished.
    Cancelled,
    /// `--dry-run`: the body was built and scheduled but not sent.
    DryRun,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::HttpError => "http_error",
            Status::Timeout => "timeout",
            Status::ConnectError => "connect_error",
            Status::ProtocolError => "protocol_error",
            Status::Cancelled => "cancelled",
            Status::DryRun => "dry_run",
        }
    }
}

/// Which instance served a request, from the response headers `x-inference-pod` (a pod name,
/// host or address) and `x-inference-port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedBy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}
