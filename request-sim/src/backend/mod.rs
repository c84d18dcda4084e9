//! Backends: which API a request goes to, its body, and how its response is read.
//!
//! - [`body`]: typed request bodies per API;
//! - [`convert`]: a `messages` row in the shapes of the Responses and Messages APIs;
//! - [`events`]: the typed event streams (and bodies) of the Responses and Messages APIs;
//! - [`sse`]: the incremental SSE parser shared by all streaming APIs;
//! - [`response`]: per-API interpretation of messages into timings and token counts;
//! - [`warm`]: keep-alive connections opened before they are needed;
//! - this file: endpoint resolution, the pooled HTTP client, and [`execute`], which sends one
//!   request and classifies how it ended.

pub mod body;
pub mod convert;
pub mod events;
pub mod response;
pub mod sse;
pub mod tokenize;
pub mod warm;

use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

pub use body::{
    append_session_user, encode_body, encode_chat_row_body, encode_chat_row_body_marked,
    encode_row_body, BodyParams, LiveBody, LiveSlot, PromptPayload,
};
pub use response::{ProtocolError, ResponseState, Usage};

use crate::record::Status;

/// `url` without user info (`user:pass@`), query string and fragment, so credentials never
/// reach an output file or an error message. Text that is not a URL keeps only what follows
/// its last `@`.
pub fn sanitize_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            let s = u.as_str();
            // `http://h:1` parses with the path `/`; show it as given.
            match s.strip_suffix('/') {
                Some(short) if u.path() == "/" && !url.ends_with('/') => short.to_string(),
                _ => s.to_string(),
            }
        }
        Err(_) => match url.rsplit_once('@') {
            Some((_, rest)) => format!("***@{rest}"),
            None => url.to_string(),
        },
    }
}

/// The API family chosen with `--api`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ApiFlavor {
    /// OpenAI-compatible (vLLM, SGLang, ...): chat or completions, from the URL path.
    Openai,
    /// Hugging Face text-generation-inference: `/generate` or `/generate_stream`.
    Tgi,
    /// AIBrix gateway: OpenAI plus a `routing-strategy` header (`--aibrix-route`).
    Aibrix,
    /// OpenAI Responses API: `/v1/responses` (vLLM, SGLang, llama.cpp's server, OpenAI).
    #[value(alias = "openai-responses")]
    Responses,
    /// Anthropic Messages API: `/v1/messages` (vLLM, SGLang, llama.cpp's server, Anthropic).
    #[value(alias = "anthropic", alias = "anthropic-messages")]
    Messages,
}

/// The concrete endpoint kind requests are sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKind {
    Chat,
    Completions,
    TgiGenerate,
    TgiGenerateStream,
    /// OpenAI Responses (`/v1/responses`).
    Responses,
    /// Anthropic Messages (`/v1/messages`).
    Messages,
}

impl ApiKind {
    pub fn is_chat(self) -> bool {
        self == ApiKind::Chat
    }
    /// OpenAI chat or completions: the `choices` wire shape, `[DONE]`, `stream_options`.
    pub fn is_openai(self) -> bool {
        matches!(self, ApiKind::Chat | ApiKind::Completions)
    }
    /// An API whose requests carry a conversation (a `messages` row can be sent to it): chat
    /// completions, Responses, Messages.
    pub fn takes_messages(self) -> bool {
        matches!(self, ApiKind::Chat | ApiKind::Responses | ApiKind::Messages)
    }
    /// Served by the OpenAI-style servers (vLLM, SGLang, llama.cpp's server, llm-sim), which
    /// also answer `GET /v1/models` and may answer `POST /tokenize`: every API but TGI's.
    pub fn openai_style_server(self) -> bool {
        !matches!(self, ApiKind::TgiGenerate | ApiKind::TgiGenerateStream)
    }
    /// The path of this API's endpoint on a server (TGI: by streaming).
    pub fn path(self) -> &'static str {
        match self {
            ApiKind::Chat => "/v1/chat/completions",
            ApiKind::Completions => "/v1/completions",
            ApiKind::TgiGenerate => "/generate",
            ApiKind::TgiGenerateStream => "/generate_stream",
            ApiKind::Responses => "/v1/responses",
            ApiKind::Messages => "/v1/messages",
        }
    }
}

/// The API a run spoke, as the summary names it (`run.api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// OpenAI chat completions (vLLM, SGLang, ...).
    OpenaiChat,
    /// OpenAI completions.
    OpenaiCompletions,
    /// TGI `/generate` or `/generate_stream`.
    Tgi,
    /// AIBrix gateway (OpenAI plus a routing header).
    Aibrix,
    /// OpenAI Responses.
    OpenaiResponses,
    /// Anthropic Messages.
    AnthropicMessages,
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Api::OpenaiChat => "openai-chat",
            Api::OpenaiCompletions => "openai-completions",
            Api::Tgi => "tgi",
            Api::Aibrix => "aibrix",
            Api::OpenaiResponses => "openai-responses",
            Api::AnthropicMessages => "anthropic-messages",
        })
    }
}

/// A resolved endpoint. `Debug` never shows the API key.
#[derive(Clone)]
pub struct Endpoint {
    pub url: reqwest::Url,
    pub kind: ApiKind,
    pub flavor: ApiFlavor,
    pub stream: bool,
    /// `routing-strategy` header for AIBrix.
    pub route: Option<String>,
    /// `--session-header`: the header that carries each request's session id (for routers
    /// that pin a session to an instance).
    pub session_header: Option<reqwest::header::HeaderName>,
    api_key: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.display_url())
            .field("kind", &self.kind)
            .field("stream", &self.stream)
            .field("route", &self.route)
            .field("session_header", &self.session_header)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Endpoint {
    /// The API requests to this endpoint speak.
    pub fn api(&self) -> Api {
        match (self.flavor, self.kind) {
            (_, ApiKind::Responses) => Api::OpenaiResponses,
            (_, ApiKind::Messages) => Api::AnthropicMessages,
            (ApiFlavor::Aibrix, _) => Api::Aibrix,
            (_, ApiKind::Chat) => Api::OpenaiChat,
            (_, ApiKind::Completions) => Api::OpenaiCompletions,
            _ => Api::Tgi,
        }
    }

    /// Resolve `--endpoint` (full URL or base URL) for `--api`.
    ///
    /// A base URL (no path, or `/`) means chat completions for OpenAI/AIBrix, `/v1/responses`
    /// for Responses, `/v1/messages` for Messages and `/generate` or `/generate_stream` (by
    /// `stream`) for TGI. A `/v1` base gets the API's path below it. With OpenAI/AIBrix, a
    /// path ending in `/responses` or `/messages` is that API (detected from the path).
    pub fn resolve(
        endpoint: &str,
        flavor: ApiFlavor,
        stream: bool,
        route: Option<String>,
        api_key: Option<String>,
    ) -> Result<Endpoint, String> {
        let mut url = reqwest::Url::parse(endpoint).map_err(|e| {
            // Without any user:password@ part: the error is printed.
            let shown = sanitize_url(endpoint);
            format!("--endpoint {shown:?} is not a valid URL: {e}")
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "--endpoint must be http:// or https://, got {:?}",
                url.scheme()
            ));
        }
        let path = url.path().trim_end_matches('/').to_string();
        let kind = match flavor {
            ApiFlavor::Openai | ApiFlavor::Aibrix => {
                if path.is_empty() || path == "/v1" {
                    url.set_path("/v1/chat/completions");
                    ApiKind::Chat
                } else if path.ends_with("/chat/completions") {
                    ApiKind::Chat
                } else if path.ends_with("/completions") {
                    ApiKind::Completions
                } else if path.ends_with("/responses") {
                    ApiKind::Responses
                } else if path.ends_with("/messages") {
                    ApiKind::Messages
                } else {
                    return Err(format!(
                        "--endpoint path {path:?} is not an OpenAI path: use .../v1/chat/completions, \
                         .../v1/completions, .../v1/responses, .../v1/messages or a base URL like http://host:port"
                    ));
                }
            }
            ApiFlavor::Responses | ApiFlavor::Messages => {
                let (kind, name, title) = match flavor {
                    ApiFlavor::Responses => (ApiKind::Responses, "responses", "Responses"),
                    _ => (ApiKind::Messages, "messages", "Messages"),
                };
                if path.is_empty() || path == "/v1" {
                    url.set_path(kind.path());
                } else if !path.ends_with(&format!("/{name}")) {
                    return Err(format!(
                        "--endpoint path {path:?} is not a {title} path with --api {name}: use .../v1/{name} or a base URL like http://host:port"
                    ));
                }
                kind
            }
            ApiFlavor::Tgi => {
                if path.is_empty() {
                    url.set_path(if stream {
                        "/generate_stream"
                    } else {
                        "/generate"
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
                }
            }
        };
        if flavor == ApiFlavor::Aibrix && route.is_none() {
            return Err("--api aibrix needs --aibrix-route (e.g. prefix-cache, throughput)".into());
        }
        if kind == ApiKind::TgiGenerate && stream {
            return Err("--stream with a TGI /generate endpoint: use /generate_stream".into());
        }
        let stream = match kind {
            ApiKind::TgiGenerateStream => true,
            ApiKind::TgiGenerate => false,
            _ => stream,
        };
        Ok(Endpoint {
            url,
            kind,
            flavor,
            stream,
            route,
            session_header: None,
            api_key,
        })
    }

    /// The URL without any userinfo, for logs, records and summaries.
    pub fn display_url(&self) -> String {
        let mut u = self.url.clone();
        let _ = u.set_username("");
        let _ = u.set_password(None);
        u.to_string()
    }

    /// Base URL (scheme, host, port) without path or credentials.
    pub fn base_url(&self) -> String {
        let mut u = self.url.clone();
        let _ = u.set_username("");
        let _ = u.set_password(None);
        u.set_path("");
        u.set_query(None);
        u.to_string().trim_end_matches('/').to_string()
    }

    /// Add the API key (if any) to a request: `Authorization: Bearer` (OpenAI-style
    /// servers); for the Messages API also Anthropic's `x-api-key` and `anthropic-version`
    /// (the self-hosted servers read the first, Anthropic's API the others).
    pub fn authorize(&self, mut req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if self.kind == ApiKind::Messages {
            req = req.header("anthropic-version", ANTHROPIC_VERSION);
            if let Some(k) = &self.api_key {
                req = req.header("x-api-key", k);
            }
        }
        match &self.api_key {
            Some(k) => req.bearer_auth(k),
            None => req,
        }
    }

    pub fn has_api_key(&self) -> bool {
        self.api_key.is_some()
    }

    /// `text` with every occurrence of the API key replaced by `<redacted>`.
    pub fn redact(&self, text: String) -> String {
        match &self.api_key {
            Some(k) if !k.is_empty() && text.contains(k.as_str()) => {
                text.replace(k.as_str(), "<redacted>")
            }
            _ => text,
        }
    }
}

/// The `anthropic-version` header sent to the Messages API.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// HTTP client settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub insecure: bool,
    /// Load the system's root certificates (only needed for https endpoints; loading them
    /// costs start-up time).
    pub tls_roots: bool,
    pub connect_timeout: Duration,
    pub max_idle_per_host: usize,
    /// How long an idle keep-alive connection is kept for reuse. Below the keep-alive timeout
    /// of the servers users run (uvicorn/vLLM and llama.cpp close idle connections after 5 s),
    /// so the client gives up a connection before the server does.
    pub pool_idle_timeout: Duration,
}

/// Default of [`ClientOptions::pool_idle_timeout`] (`--pool-idle-timeout`), seconds.
pub const DEFAULT_POOL_IDLE_TIMEOUT_S: f64 = 4.0;

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            insecure: false,
            tls_roots: true,
            connect_timeout: Duration::from_secs(10),
            max_idle_per_host: 4096,
            pool_idle_timeout: Duration::from_secs_f64(DEFAULT_POOL_IDLE_TIMEOUT_S),
        }
    }
}

/// The HTTP clients of a run: the pooled keep-alive client every request uses, and a client
/// without a pool, whose every request opens a fresh connection, for the one retry of a
/// request whose reused connection the server had closed (see [`execute`]).
///
/// Derefs to the pooled client, for the few side requests (`/v1/models`, warm-up).
#[derive(Debug, Clone)]
pub struct HttpClient {
    pooled: reqwest::Client,
    fresh: reqwest::Client,
}

impl std::ops::Deref for HttpClient {
    type Target = reqwest::Client;
    fn deref(&self) -> &reqwest::Client {
        &self.pooled
    }
}

/// The clients (HTTP/1.1, TCP_NODELAY, rustls with the system's root certificates).
///
/// hyper's pool already honours `Connection: close` (such a connection is never reused) and
/// drops a connection it sees closed while idle; it does not read `Keep-Alive: timeout=`,
/// which is why the pool's own idle timeout stays below the servers' usual 5 s.
pub fn build_client(opts: &ClientOptions) -> crate::Result<HttpClient> {
    let base = || {
        reqwest::Client::builder()
            .tcp_nodelay(true)
            .connect_timeout(opts.connect_timeout)
            .danger_accept_invalid_certs(opts.insecure)
            .tls_built_in_root_certs(opts.tls_roots)
            .no_proxy()
    };
    let pooled = base()
        .pool_max_idle_per_host(opts.max_idle_per_host)
        .pool_idle_timeout(opts.pool_idle_timeout)
        .build()
        .map_err(|e| crate::Error::config(format!("cannot build HTTP client: {e}")))?;
    let fresh = base()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| crate::Error::config(format!("cannot build HTTP client: {e}")))?;
    Ok(HttpClient { pooled, fresh })
}

/// The idle timeout a server announces in `Keep-Alive: timeout=N[, max=M]` (RFC 9112 leaves
/// the header to implementations; Apache, nginx and some Python servers send it), if any.
/// A three-line parse: no crate parses this header on its own.
pub fn keep_alive_timeout(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get("keep-alive")?.to_str().ok()?;
    v.split(',').find_map(|part| {
        let (k, val) = part.split_once('=')?;
        if !k.trim().eq_ignore_ascii_case("timeout") {
            return None;
        }
        let secs: f64 = val.trim().trim_matches('"').parse().ok()?;
        (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
    })
}

/// The pool idle timeout to use against a server that closes idle connections after
/// `server`: comfortably below it (by a fifth, at least 0.5 s, never under half of it), or
/// `None` when `configured` is already below that.
pub fn pool_idle_for(server: Duration, configured: Duration) -> Option<Duration> {
    let margin = (server / 5).max(Duration::from_millis(500));
    let safe = server.saturating_sub(margin).max(server / 2);
    (configured > safe).then_some(safe)
}

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

/// Largest SSE event / error body we keep.
const MAX_EVENT_BYTES: usize = 8 << 20;
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
            let first = exchange(
                &client.pooled,
                ep,
                body.clone(),
                session,
                &mut state,
                &mut http_status,
            )
            .await;
            match first {
                Err(Failure::PeerClosed(_)) => {
                    retries = 1;
                    state = fresh_state();
                    exchange(
                        &client.fresh,
                        ep,
                        body,
                        session,
                        &mut state,
                        &mut http_status,
                    )
                    .await
                    .map_err(Failure::into_error)
                }
                r => r.map_err(Failure::into_error),
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
    let (status, error) = match result {
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
    };
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

/// True when `e` (from `send()`, so before any response byte) says the peer closed an
/// established connection: hyper's "connection closed before message completed", or a reset
/// / broken pipe while writing the request. Connect errors (a new connection that could not
/// be opened), timeouts and answers that are not HTTP are not this.
fn closed_by_peer(e: &reqwest::Error) -> bool {
    if e.is_connect() || e.is_timeout() {
        return false;
    }
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
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
        src = inner.source();
    }
    false
}

fn classify(e: &reqwest::Error, during_body: bool) -> ExchangeError {
    let msg = {
        let mut s = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(inner) = src {
            s.push_str(": ");
            s.push_str(&inner.to_string());
            src = inner.source();
        }
        s
    };
    // The peer answered, but not with HTTP (or with a broken response head).
    let unparsable = {
        let mut src = std::error::Error::source(e);
        let mut found = false;
        while let Some(inner) = src {
            if let Some(h) = inner.downcast_ref::<hyper::Error>() {
                found |= h.is_parse() || h.is_parse_status() || h.is_parse_too_large();
            }
            src = inner.source();
        }
        found
    };
    if e.is_timeout() {
        (Status::Timeout, msg)
    } else if unparsable {
        (
            Status::ProtocolError,
            format!("the server's answer is not valid HTTP: {msg}"),
        )
    } else if e.is_connect() {
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

async fn exchange(
    client: &reqwest::Client,
    ep: &Endpoint,
    body: Bytes,
    session: Option<&str>,
    state: &mut ResponseState,
    http_status: &mut Option<u16>,
) -> Result<(), Failure> {
    let mut req = client
        .post(ep.url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    if ep.stream {
        req = req.header(reqwest::header::ACCEPT, "text/event-stream");
    }
    req = ep.authorize(req);
    if let Some(route) = &ep.route {
        req = req.header("routing-strategy", route);
    }
    if let (Some(name), Some(id)) = (&ep.session_header, session) {
        req = req.header(name, id);
    }
    let resp = req.send().await.map_err(|e| {
        let e = e.without_url();
        if closed_by_peer(&e) {
            Failure::PeerClosed(classify(&e, false))
        } else {
            Failure::Other(classify(&e, false))
        }
    })?;
    let status = resp.status();
    *http_status = Some(status.as_u16());
    state.served_by = served_by(resp.headers());
    let mut stream = resp.bytes_stream();
    if !status.is_success() {
        let mut buf = Vec::new();
        // The status is what matters: a server that never finishes its error body must not
        // turn an HTTP error into a timeout.
        let read = async {
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(c) => {
                        buf.extend_from_slice(&c);
                        if buf.len() >= MAX_ERROR_BODY {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        };
        let _ = tokio::time::timeout(ERROR_BODY_WAIT, read).await;
        return Err(Failure::Other((
            Status::HttpError,
            format!("HTTP {}: {}", status.as_u16(), error_message(&buf)),
        )));
    }
    if ep.stream {
        let mut reader = StreamReader::new(ep.kind);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| classify(&e.without_url(), true))?;
            reader.push(&chunk, state, Instant::now())?;
        }
        reader.finish(state, Instant::now())?;
    } else {
        let mut buf = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| classify(&e.without_url(), true))?;
            buf.extend_from_slice(&chunk);
            if buf.len() > MAX_EVENT_BYTES {
                return Err((
                    Status::ProtocolError,
                    format!("response body larger than {MAX_EVENT_BYTES} bytes"),
                )
                    .into());
            }
        }
        state
            .on_body(ep.kind, &buf, Instant::now())
            .map_err(|e| (Status::ProtocolError, e.0))?;
    }
    Ok(())
}

/// Reads a streamed answer as its bytes arrive: the SSE events into the [`ResponseState`], then
/// the end-of-stream checks (the API's final event seen, some token carried). Every way it
/// fails is a [`Status::ProtocolError`].
pub struct StreamReader {
    kind: ApiKind,
    parser: sse::SseParser,
    proto: Result<(), ProtocolError>,
}

impl StreamReader {
    pub fn new(kind: ApiKind) -> StreamReader {
        StreamReader {
            kind,
            parser: sse::SseParser::new(MAX_EVENT_BYTES),
            proto: Ok(()),
        }
    }

    /// The bytes of one network chunk, received at `now`.
    pub fn push(
        &mut self,
        chunk: &[u8],
        state: &mut ResponseState,
        now: Instant,
    ) -> Result<(), (Status, String)> {
        let (kind, proto) = (self.kind, &mut self.proto);
        self.parser
            .push(chunk, |data| {
                if proto.is_ok() {
                    *proto = state.on_event(kind, data, now);
                }
            })
            .map_err(|e| (Status::ProtocolError, e.to_string()))?;
        self.proto.clone().map_err(|e| (Status::ProtocolError, e.0))
    }

    /// The end of the stream, at `now`.
    pub fn finish(
        mut self,
        state: &mut ResponseState,
        now: Instant,
    ) -> Result<(), (Status, String)> {
        let (kind, proto) = (self.kind, &mut self.proto);
        self.parser.finish(|data| {
            if proto.is_ok() {
                *proto = state.on_event(kind, data, now);
            }
        });
        self.proto.map_err(|e| (Status::ProtocolError, e.0))?;
        if !state.finished {
            let what = match self.kind {
                ApiKind::Chat | ApiKind::Completions => "stream ended without [DONE]",
                ApiKind::Responses => "stream ended without response.completed",
                ApiKind::Messages => "stream ended without message_stop",
                _ => "stream ended without a final event",
            };
            return Err((Status::ProtocolError, what.to_string()));
        }
        if state.chunks == 0 {
            return Err((
                Status::ProtocolError,
                "stream carried no tokens".to_string(),
            ));
        }
        Ok(())
    }
}

/// A whole streamed answer read from `chunks` (as they came off the network, all at `now`)
/// the way [`execute`] reads one, without the network: for tests and fuzzing.
pub fn read_stream<'a>(
    kind: ApiKind,
    chunks: impl IntoIterator<Item = &'a [u8]>,
    now: Instant,
) -> Result<ResponseState, (Status, String)> {
    let mut state = ResponseState::default();
    let mut reader = StreamReader::new(kind);
    for c in chunks {
        reader.push(c, &mut state, now)?;
    }
    reader.finish(&mut state, now)?;
    Ok(state)
}

/// Longest `x-inference-pod` value kept in a record.
const MAX_POD_LEN: usize = 253;

/// The instance named by the response headers `x-inference-pod` and `x-inference-port` (sent
/// by routers and by llm-sim clusters), if either is there and readable.
pub fn served_by(headers: &reqwest::header::HeaderMap) -> Option<crate::record::ServedBy> {
    let text = |name: &str| {
        let v = headers.get(name)?.to_str().ok()?.trim();
        (!v.is_empty() && v.len() <= MAX_POD_LEN).then(|| v.to_string())
    };
    let pod = text("x-inference-pod");
    let port = text("x-inference-port").and_then(|p| p.parse::<u16>().ok());
    (pod.is_some() || port.is_some()).then_some(crate::record::ServedBy { pod, port })
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
    fn api_words_are_the_summary_words() {
        for api in [
            Api::OpenaiChat,
            Api::OpenaiCompletions,
            Api::Tgi,
            Api::Aibrix,
            Api::OpenaiResponses,
            Api::AnthropicMessages,
        ] {
            let json = serde_json::to_string(&api).unwrap();
            assert_eq!(json, format!("\"{api}\""));
        }
        assert_eq!(Api::OpenaiChat.to_string(), "openai-chat");
    }

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
    fn sanitize_strips_credentials() {
        assert_eq!(
            sanitize_url("http://user:secret@host:8000/v1/chat/completions?key=abc#x"),
            "http://host:8000/v1/chat/completions"
        );
        assert_eq!(sanitize_url("http://h:1"), "http://h:1");
        assert_eq!(sanitize_url("http://h:1/"), "http://h:1/");
        assert_eq!(sanitize_url("http://u:pw@h:99999/v1"), "***@h:99999/v1");
        assert_eq!(sanitize_url("not a url"), "not a url");
    }

    #[test]
    fn keep_alive_header_and_pool_timeout() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(keep_alive_timeout(&h), None);
        h.insert("keep-alive", "timeout=5, max=100".parse().unwrap());
        assert_eq!(keep_alive_timeout(&h), Some(Duration::from_secs(5)));
        h.insert("keep-alive", "max=100,Timeout = 2".parse().unwrap());
        assert_eq!(keep_alive_timeout(&h), Some(Duration::from_secs(2)));
        h.insert("keep-alive", "timeout=soon".parse().unwrap());
        assert_eq!(keep_alive_timeout(&h), None);
        let s = Duration::from_secs_f64;
        // 5 s server: 4 s is already a fifth below; 90 s configured comes down to 4 s.
        assert_eq!(pool_idle_for(s(5.0), s(4.0)), None);
        assert_eq!(pool_idle_for(s(5.0), s(90.0)), Some(s(4.0)));
        // 2 s server: 0.5 s margin; 1 s server: never under half.
        assert_eq!(pool_idle_for(s(2.0), s(4.0)), Some(s(1.5)));
        assert_eq!(pool_idle_for(s(1.0), s(4.0)), Some(s(0.5)));
    }

    #[test]
    fn endpoint_resolution() {
        let e = Endpoint::resolve("http://h:8000", ApiFlavor::Openai, true, None, None).unwrap();
        assert_eq!(e.url.as_str(), "http://h:8000/v1/chat/completions");
        assert_eq!(e.kind, ApiKind::Chat);
        let e = Endpoint::resolve("http://h:8000/v1", ApiFlavor::Openai, true, None, None).unwrap();
        assert_eq!(e.url.as_str(), "http://h:8000/v1/chat/completions");
        let e = Endpoint::resolve(
            "http://h:8000/v1/completions",
            ApiFlavor::Openai,
            false,
            None,
            None,
        )
        .unwrap();
        assert_eq!(e.kind, ApiKind::Completions);
        let e = Endpoint::resolve("http://h:1/", ApiFlavor::Tgi, true, None, None).unwrap();
        assert_eq!(e.url.path(), "/generate_stream");
        assert_eq!(e.kind, ApiKind::TgiGenerateStream);
        let e =
            Endpoint::resolve("http://h:1/generate", ApiFlavor::Tgi, false, None, None).unwrap();
        assert_eq!(e.kind, ApiKind::TgiGenerate);
        assert!(!e.stream);
        assert!(
            Endpoint::resolve("http://h:1/generate", ApiFlavor::Tgi, true, None, None).is_err()
        );
        assert!(Endpoint::resolve("http://h:1/foo", ApiFlavor::Openai, true, None, None).is_err());
        // Responses and Messages: by --api (a base URL gets the API's path) or by the path.
        for (flavor, path, kind) in [
            (ApiFlavor::Responses, "/v1/responses", ApiKind::Responses),
            (ApiFlavor::Messages, "/v1/messages", ApiKind::Messages),
        ] {
            for base in ["http://h:1", "http://h:1/", "http://h:1/v1"] {
                let e = Endpoint::resolve(base, flavor, true, None, None).unwrap();
                assert_eq!((e.url.path(), e.kind, e.stream), (path, kind, true));
            }
            let e = Endpoint::resolve(
                &format!("http://h:1{path}"),
                ApiFlavor::Openai,
                false,
                None,
                None,
            )
            .unwrap();
            assert_eq!((e.kind, e.stream), (kind, false));
            let e =
                Endpoint::resolve(&format!("http://h:1{path}"), flavor, false, None, None).unwrap();
            assert_eq!(e.kind, kind);
            let err = Endpoint::resolve("http://h:1/v1/chat/completions", flavor, true, None, None)
                .unwrap_err();
            assert!(err.contains(&format!("use .../v1/{}", &path[4..])), "{err}");
        }
        assert_eq!(
            Endpoint::resolve(
                "http://h:1/v1/messages",
                ApiFlavor::Openai,
                true,
                None,
                None
            )
            .unwrap()
            .api(),
            Api::AnthropicMessages
        );
        assert!(Endpoint::resolve("h:1", ApiFlavor::Openai, true, None, None).is_err());
        assert!(Endpoint::resolve("http://h:1", ApiFlavor::Aibrix, true, None, None).is_err());
    }

    #[test]
    fn debug_and_display_hide_secrets() {
        let e = Endpoint::resolve(
            "http://user:pw@h:8000",
            ApiFlavor::Openai,
            true,
            None,
            Some("sk-secret".into()),
        )
        .unwrap();
        let dbg = format!("{e:?}");
        assert!(!dbg.contains("sk-secret") && !dbg.contains("pw"), "{dbg}");
        assert!(!e.display_url().contains("pw"));
        assert_eq!(e.base_url(), "http://h:8000");
        let err = Endpoint::resolve(
            "http://u:sk-secret@h:99999",
            ApiFlavor::Openai,
            true,
            None,
            None,
        )
        .unwrap_err();
        assert!(
            err.contains("is not a valid URL") && !err.contains("sk-secret"),
            "{err}"
        );
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
