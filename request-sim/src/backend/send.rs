//! Sending one request ([`execute`]): the exchange with the server through the API's transport
//! (HTTP + SSE here, with the one retry on a fresh connection after the keep-alive race; gRPC
//! in `vllm_grpc/client.rs`), the timeout and cancellation around it, and how the request ended
//! ([`Outcome`]): its status, the server's error message, the instance that served it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::api::Transport;
use super::client::{AnswerBody, HttpClient, TransportError};
use super::endpoint::Endpoint;
use super::socket::ConnClock;
use super::state::ResponseState;
use super::status::{ServedBy, Status};
use super::stream::{StreamReader, MAX_EVENT_BYTES};

/// How one request ended, with everything measured relative to its send time.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: Status,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    pub state: ResponseState,
    /// 1 when the request was sent a second time on a fresh connection (see [`execute`]).
    pub retries: u32,
}

/// Largest error body we keep.
const MAX_ERROR_BODY: usize = 4096;
/// How long the body of an HTTP error response is waited for.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(1);

/// Per-request options of [`execute`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestOpts<'a> {
    /// `--session-header`: the session id sent in that header.
    pub session: Option<&'a str>,
    /// Keep the answer's text in [`ResponseState::answer`] (`--live-history`).
    pub collect_answer: bool,
}

/// Send one request (body already built) and read its response to the end.
///
/// `sent` is taken by the caller just before calling. The request ends as `Timeout` after
/// `timeout`, as `Cancelled` when `cancel` fires; timings measured up to then are kept.
///
/// When the pooled connection is closed by the server before any byte of the response arrived
/// (the keep-alive race: the server's idle timer fired as the request was written), the request
/// is sent once more, right away, on a fresh connection, and counted in `retries`. Never after
/// a response byte, never twice; the timeout covers both attempts and all times stay relative
/// to the first send. docs/reliability.md explains why this cannot double processed work.
pub async fn execute(
    client: &HttpClient,
    ep: &Endpoint,
    body: Bytes,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
    allow_missing_usage: bool,
    opts: RequestOpts<'_>,
) -> Outcome {
    let fresh_state = || {
        if opts.collect_answer {
            ResponseState::collecting()
        } else {
            ResponseState::default()
        }
    };
    let session = opts.session;
    let mut state = fresh_state();
    let mut http_status = None;
    let mut retries = 0;
    let result = {
        let fut = async {
            match (ep.kind.transport(), &ep.grpc) {
                (Transport::Grpc, Some(g)) => {
                    super::apis::vllm_grpc::client::exchange(g, body, &mut state).await
                }
                (Transport::Grpc, None) => Err((
                    Status::ConnectError,
                    "a gRPC API without its engine's channel".to_string(),
                )),
                (Transport::HttpSse, _) => {
                    let mut http = Attempt {
                        state: &mut state,
                        http_status: &mut http_status,
                        retries: &mut retries,
                    };
                    http.with_one_retry(client, ep, body, session, fresh_state)
                        .await
                }
            }
        };
        tokio::pin!(fut);
        let sleep = async {
            match timeout {
                Some(t) => tokio::time::sleep(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err((Status::Cancelled, "run stopped before the request finished".to_string())),
            r = &mut fut => r,
            _ = sleep => Err((Status::Timeout, format!("no complete response within {:.1} s", timeout.unwrap_or_default().as_secs_f64()))),
        }
    };
    let (status, error) = verdict(ep, &state, result, allow_missing_usage);
    // Servers may echo the key in an error ("Incorrect API key provided: sk-..."): it must
    // never reach a record.
    let error = error.map(|e| ep.redact(e));
    Outcome {
        status,
        http_status,
        error,
        state,
        retries,
    }
}

/// The status of an exchange that ended with `result`: a finished stream without the usage it
/// was asked for is a protocol error unless `allow_missing_usage`.
fn verdict(
    ep: &Endpoint,
    state: &ResponseState,
    result: Result<(), ExchangeError>,
    allow_missing_usage: bool,
) -> (Status, Option<String>) {
    match result {
        Ok(()) => {
            let usage_missing = ep.kind.openai_style_server()
                && ep.stream
                && state.usage.and_then(|u| u.completion_tokens).is_none();
            if usage_missing && !allow_missing_usage {
                let why = if ep.kind.is_openai() {
                    "server sent no usage (stream_options.include_usage ignored?)"
                } else {
                    "server sent no usage (no output_tokens in the stream)"
                };
                (Status::ProtocolError, Some(why.to_string()))
            } else {
                (Status::Ok, None)
            }
        }
        Err((s, e)) => (s, Some(e)),
    }
}

/// What one HTTP request writes as it goes: the answer read, the HTTP status, the retry.
struct Attempt<'s> {
    state: &'s mut ResponseState,
    http_status: &'s mut Option<u16>,
    retries: &'s mut u32,
}

impl Attempt<'_> {
    /// The request on a pooled connection; when the server closed that connection before
    /// any byte of the response, once more on a fresh one, with a fresh answer state.
    async fn with_one_retry(
        &mut self,
        client: &HttpClient,
        ep: &Endpoint,
        body: Bytes,
        session: Option<&str>,
        fresh_state: impl Fn() -> ResponseState,
    ) -> Result<(), ExchangeError> {
        let first = exchange(
            client,
            false,
            ep,
            body.clone(),
            session,
            self.state,
            self.http_status,
        )
        .await;
        match first {
            Err(Failure::PeerClosed(_)) => {
                *self.retries = 1;
                *self.state = fresh_state();
                exchange(
                    client,
                    true,
                    ep,
                    body,
                    session,
                    self.state,
                    self.http_status,
                )
                .await
                .map_err(Failure::into_error)
            }
            r => r.map_err(Failure::into_error),
        }
    }
}

type ExchangeError = (Status, String);

/// Why one attempt failed.
enum Failure {
    /// The connection was closed by the peer (end of input, reset, broken pipe) after the
    /// request was handed to it and before any byte of the response: retryable once.
    PeerClosed(ExchangeError),
    Other(ExchangeError),
}

impl Failure {
    fn into_error(self) -> ExchangeError {
        match self {
            Failure::PeerClosed(e) | Failure::Other(e) => e,
        }
    }
}

impl From<ExchangeError> for Failure {
    fn from(e: ExchangeError) -> Self {
        Failure::Other(e)
    }
}

/// Why no connection could be opened, when `e` is such a failure (`None` for any other
/// error): "connection refused" for a closed port, else the innermost I/O or resolver error
/// (e.g. "failed to lookup address information: Name or service not known").
pub fn connect_failure(e: &reqwest::Error) -> Option<String> {
    if !e.is_connect() {
        return None;
    }
    let mut cause = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return Some("connection refused".to_string());
            }
        }
        cause = inner.to_string();
        src = inner.source();
    }
    Some(cause)
}

/// True when `e` (from `send()`, so before any response byte) says the peer closed an
/// established connection: hyper's "connection closed before message completed", or a reset
/// / broken pipe while writing the request. Connect errors (a new connection that could not
/// be opened), timeouts and answers that are not HTTP are not this.
fn closed_by_peer(e: &TransportError) -> bool {
    if e.connect || e.timeout {
        return false;
    }
    for inner in e.chain() {
        if let Some(h) = inner.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return true;
            }
            if h.is_parse() || h.is_parse_status() || h.is_parse_too_large() || h.is_user() {
                return false;
            }
        }
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            return matches!(
                io.kind(),
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
            );
        }
    }
    false
}

fn classify(e: &TransportError, during_body: bool) -> ExchangeError {
    let msg = e
        .chain()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(": ");
    // The peer answered, but not with HTTP (or with a broken response head).
    let unparsable = e.chain().any(|inner| {
        inner
            .downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_parse() || h.is_parse_status() || h.is_parse_too_large())
    });
    let timed_out = e.timeout
        || e.chain().any(|inner| {
            inner
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        });
    if timed_out {
        (Status::Timeout, msg)
    } else if unparsable {
        (
            Status::ProtocolError,
            format!("the server's answer is not valid HTTP: {msg}"),
        )
    } else if e.connect {
        (Status::ConnectError, msg)
    } else if during_body {
        (
            Status::ConnectError,
            format!("connection lost mid-response: {msg}"),
        )
    } else {
        (Status::ConnectError, msg)
    }
}

/// One HTTP request of `body` (on a new connection when `fresh`), its answer read into
/// `state`.
async fn exchange(
    client: &HttpClient,
    fresh: bool,
    ep: &Endpoint,
    body: Bytes,
    session: Option<&str>,
    state: &mut ResponseState,
    http_status: &mut Option<u16>,
) -> Result<(), Failure> {
    use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
    let mut headers = ep.auth_headers();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    // What reqwest sends when asked for nothing else, on both clients.
    let accept = if ep.stream {
        "text/event-stream"
    } else {
        "*/*"
    };
    headers.insert(ACCEPT, HeaderValue::from_static(accept));
    if let Some(v) = ep
        .route
        .as_ref()
        .and_then(|r| HeaderValue::from_str(r).ok())
    {
        headers.insert(super::apis::openai::ROUTE_HEADER, v);
    }
    if let (Some(name), Some(v)) = (
        &ep.session_header,
        session.and_then(|id| HeaderValue::from_str(id).ok()),
    ) {
        headers.insert(name.clone(), v);
    }
    let mut resp = client
        .send(fresh, reqwest::Method::POST, &ep.url, headers, body)
        .await
        .map_err(|e| {
            if closed_by_peer(&e) {
                Failure::PeerClosed(classify(&e, false))
            } else {
                Failure::Other(classify(&e, false))
            }
        })?;
    let status = resp.status;
    *http_status = Some(status.as_u16());
    state.served_by = served_by(&resp.headers);
    let clock = resp.clock.take();
    if let Some(c) = &clock {
        state.written = c.written();
    }
    let mut reader = Chunks {
        body: resp.body,
        clock,
    };
    if !status.is_success() {
        return Err(Failure::Other(error_answer(status, &mut reader).await));
    }
    if ep.stream {
        read_events(ep, &mut reader, state).await
    } else {
        read_body(ep, &mut reader, state).await
    }
}

/// An answer's body chunk by chunk, each with the time its bytes arrived: the kernel's stamp
/// of the read that brought them when the connection has one (`super::socket`), else the
/// moment the chunk was taken.
struct Chunks {
    body: AnswerBody,
    clock: Option<ConnClock>,
}

impl Chunks {
    async fn next(&mut self) -> Option<Result<Chunk, TransportError>> {
        let chunk = self.body.chunk().await?;
        let now = Instant::now();
        Some(chunk.map(|bytes| {
            let arrival = self.clock.as_ref().and_then(|k| k.arrival());
            Chunk {
                bytes,
                at: arrival.map_or(now, |a| a.at.min(now)),
                late: arrival.map(|a| a.late),
            }
        }))
    }
}

/// One chunk of an answer's body (see [`Chunks`]), with the time its bytes arrived and how
/// late the read that brought them came (kernel stamps only).
struct Chunk {
    bytes: Bytes,
    at: Instant,
    late: Option<Duration>,
}

/// An HTTP error's status and message: its body read for at most [`ERROR_BODY_WAIT`].
async fn error_answer(status: reqwest::StatusCode, body: &mut Chunks) -> ExchangeError {
    let mut buf = Vec::new();
    // The status is what matters: a server that never finishes its error body must not
    // turn an HTTP error into a timeout.
    let read = async {
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(c) => {
                    buf.extend_from_slice(&c.bytes);
                    if buf.len() >= MAX_ERROR_BODY {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    };
    let _ = tokio::time::timeout(ERROR_BODY_WAIT, read).await;
    (
        Status::HttpError,
        format!("HTTP {}: {}", status.as_u16(), error_message(&buf)),
    )
}

/// A streamed answer's events, to the API's last event and the body's end after it. Each
/// chunk's events are stamped with its bytes' arrival; the latest read of a token-carrying
/// chunk sets the request's receive lateness.
async fn read_events(
    ep: &Endpoint,
    body: &mut Chunks,
    state: &mut ResponseState,
) -> Result<(), Failure> {
    let mut reader = StreamReader::new(ep.kind);
    let mut end = None;
    while let Some(chunk) = body.next().await {
        let Chunk { bytes, at, late } = chunk.map_err(|e| classify(&e, true))?;
        let tokens = state.chunks;
        reader.push(&bytes, state, at)?;
        if state.chunks > tokens {
            if let Some(late) = late {
                let ms = late.as_secs_f64() * 1e3;
                state.rx_late_ms = Some(state.rx_late_ms.map_or(ms, |m: f64| m.max(ms)));
            }
        }
        if state.finished {
            end = Some(at);
            break;
        }
    }
    if let Some(at) = end {
        // The API's last event came: what follows is only the body's end (data after it
        // is still a protocol error). A server that never ends the body must not turn a
        // finished answer into a timeout; its end is waited for a moment (so the
        // connection can go back to the pool), no longer.
        let deadline = tokio::time::Instant::now() + STREAM_TAIL_WAIT;
        while let Ok(Some(Ok(c))) = tokio::time::timeout_at(deadline, body.next()).await {
            reader.push(&c.bytes, state, c.at)?;
        }
        reader.finish(state, at)?;
    } else {
        reader.finish(state, Instant::now())?;
    }
    Ok(())
}

/// A whole (not streamed) answer's body, at most [`MAX_EVENT_BYTES`].
async fn read_body(
    ep: &Endpoint,
    body: &mut Chunks,
    state: &mut ResponseState,
) -> Result<(), Failure> {
    let mut buf = Vec::new();
    let mut last = None;
    while let Some(chunk) = body.next().await {
        let c = chunk.map_err(|e| classify(&e, true))?;
        last = Some((c.at, c.late));
        buf.extend_from_slice(&c.bytes);
        if buf.len() > MAX_EVENT_BYTES {
            return Err((
                Status::ProtocolError,
                format!("response body larger than {MAX_EVENT_BYTES} bytes"),
            )
                .into());
        }
    }
    if let Some((_, Some(late))) = last {
        state.rx_late_ms = Some(late.as_secs_f64() * 1e3);
    }
    state
        .on_body(ep.kind, &buf, last.map_or_else(Instant::now, |(at, _)| at))
        .map_err(|e| (Status::ProtocolError, e.0))?;
    Ok(())
}

/// How long the end of a streamed body is waited for after the API's last event.
const STREAM_TAIL_WAIT: Duration = Duration::from_millis(500);

/// Longest `x-inference-pod` value kept in a record.
const MAX_POD_LEN: usize = 253;

/// The instance named by the response headers `x-inference-pod` and `x-inference-port` (sent
/// by routers and by llm-sim clusters), if either is there and readable.
pub fn served_by(headers: &reqwest::header::HeaderMap) -> Option<ServedBy> {
    let text = |name: &str| {
        let v = headers.get(name)?.to_str().ok()?.trim();
        (!v.is_empty() && v.len() <= MAX_POD_LEN).then(|| v.to_string())
    };
    let pod = text("x-inference-pod");
    let port = text("x-inference-port").and_then(|p| p.parse::<u16>().ok());
    (pod.is_some() || port.is_some()).then_some(ServedBy { pod, port })
}

/// The server's error message: `message` / `error.message` / `error` of a JSON body (an
/// Anthropic error, `{"type":"error","error":{"type","message"}}`, as `type: message`), or the
/// text itself, truncated to 512 bytes.
fn error_message(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct E {
        message: Option<String>,
        error: Option<serde_json::Value>,
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    let text = String::from_utf8_lossy(body);
    let msg = match serde_json::from_slice::<E>(body) {
        Ok(E {
            message: Some(m), ..
        }) => m,
        Ok(E {
            error: Some(serde_json::Value::String(s)),
            ..
        }) => s,
        Ok(E {
            error: Some(serde_json::Value::Object(o)),
            kind,
            ..
        }) => match (
            o.get("message").and_then(|m| m.as_str()),
            o.get("type").and_then(|t| t.as_str()),
        ) {
            (Some(m), Some(t)) if kind.as_deref() == Some("error") => format!("{t}: {m}"),
            (Some(m), _) => m.to_string(),
            (None, _) => text.to_string(),
        },
        _ => text.trim().to_string(),
    };
    let mut end = msg.len().min(512);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    msg[..end].to_string()
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_instance_comes_from_the_response_headers() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(served_by(&h), None);
        h.insert("x-inference-port", "8002".parse().unwrap());
        let s = served_by(&h).unwrap();
        assert_eq!((s.pod, s.port), (None, Some(8002)));
        h.insert("x-inference-pod", " llm-sim-2 ".parse().unwrap());
        let s = served_by(&h).unwrap();
        assert_eq!((s.pod.as_deref(), s.port), (Some("llm-sim-2"), Some(8002)));
        h.insert("x-inference-port", "not a port".parse().unwrap());
        h.insert("x-inference-pod", "x".repeat(300).parse().unwrap());
        assert_eq!(served_by(&h), None);
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            error_message(br#"{"object":"error","message":"bad","code":400}"#),
            "bad"
        );
        assert_eq!(error_message(br#"{"error":{"message":"nope"}}"#), "nope");
        assert_eq!(error_message(br#"{"error":"tgi says"}"#), "tgi says");
        assert_eq!(
            error_message(
                br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "overloaded_error: Overloaded"
        );
        assert_eq!(error_message(b"plain text\n"), "plain text");
        let long = "\u{e9}".repeat(400);
        assert!(error_message(long.as_bytes()).len() <= 512);
    }
}
