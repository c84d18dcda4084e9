//! The HTTP/1.1 server (hyper 1): accepting connections, routing, and the in-process handles
//! [`SimServer`] (on the caller's runtime) and [`SimThread`] (on its own thread and runtime).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::{self, error_response, full, json_response, Api, Body};
use crate::config::{FaultConfig, SimConfig};
use crate::engine::spawn_engine;
use crate::error::{Error, Result};
use crate::faults::FaultHandle;
use crate::metrics::{FaultKind, Metrics};
pub use crate::state::AppState;
use crate::tokenize::Tokenizer;
use crate::util::mix64;

/// Largest request body accepted.
const MAX_BODY: usize = 64 << 20;

/// A running server on the caller's tokio runtime.
pub struct SimServer {
    /// The bound address (the real port when `port` was 0).
    pub addr: SocketAddr,
    state: Arc<AppState>,
    shutdown: watch::Sender<bool>,
    accept_task: Option<tokio::task::JoinHandle<()>>,
    engine_task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for SimServer {
    /// Dropping without `shutdown()` still stops the server (without waiting for it).
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

impl SimServer {
    /// `http://ADDR:PORT` of the server.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's runtime fault switches.
    pub fn faults(&self) -> FaultHandle {
        self.state.faults.clone()
    }

    /// The server's counters (also on `GET /metrics`).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.state.metrics.clone()
    }

    /// The server's shared state (the built-in router hands requests to it directly).
    pub(crate) fn state(&self) -> Arc<AppState> {
        self.state.clone()
    }

    /// Hashes of every block in the engine's prefix cache, sorted (the same hashes its KV
    /// events carry); empty once the engine has stopped.
    pub async fn cached_block_hashes(&self) -> Vec<u64> {
        self.state.engine.cached_hashes().await.unwrap_or_default()
    }

    /// Stops accepting, aborts in-flight requests and waits for the engine to stop.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.accept_task.take() {
            let _ = t.await;
        }
        if let Some(t) = self.engine_task.take() {
            let _ = t.await;
        }
    }
}

/// Binds `cfg.host:cfg.port` and starts the server on the current tokio runtime.
pub async fn start(cfg: SimConfig) -> Result<SimServer> {
    cfg.validate().map_err(Error::Config)?;
    let tokenizer = match &cfg.tokenizer {
        Some(p) => Tokenizer::load(p, cfg.tokenizer_config.as_deref())?,
        None => Tokenizer::builtin(),
    };
    let listener = TcpListener::bind((cfg.host.as_str(), cfg.port))
        .await
        .map_err(|e| Error::io(format!("binding {}:{}", cfg.host, cfg.port), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("reading the bound address", e))?;
    let metrics = Arc::new(Metrics::default());
    let (shutdown, sd_rx) = watch::channel(false);
    let kv_events = match &cfg.kv_events_endpoint {
        Some(ep) => Some(
            crate::kv_events::start_publisher(
                ep,
                &cfg.kv_events_topic,
                cfg.engine_index,
                metrics.clone(),
            )
            .await?,
        ),
        None => None,
    };
    let (engine, engine_task) = spawn_engine(&cfg, metrics.clone(), sd_rx.clone(), kv_events);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let pod = HeaderValue::from_str(&pod_name(cfg.engine_index))
        .unwrap_or(HeaderValue::from_static("llm-sim"));
    let ready_at =
        std::time::Instant::now() + Duration::from_millis(cfg.ready_delay_ms).div_f64(cfg.speedup);
    let state = Arc::new(AppState {
        ready_at,
        model_json: serde_json::Value::String(cfg.model_name.clone()).to_string(),
        faults: FaultHandle::new(cfg.faults.clone()),
        cfg,
        tokenizer,
        engine,
        metrics,
        req_counter: AtomicU64::new(0),
        conn_counter: AtomicU64::new(0),
        id_seed: mix64(started ^ u64::from(addr.port())),
        started: started / 1_000_000_000,
        pod,
        port_header: HeaderValue::from(addr.port()),
        tokenize_turn: tokio::sync::Semaphore::new(1),
    });
    let accept_task = tokio::spawn(accept_loop(listener, state.clone(), sd_rx));
    Ok(SimServer {
        addr,
        state,
        shutdown,
        accept_task: Some(accept_task),
        engine_task: Some(engine_task),
    })
}

/// Starts `n` independent engines (each its own scheduler, KV cache, metrics and fault switches)
/// on the current runtime: instance `i` gets `engine_index = i` and port `cfg.port + i` (every
/// instance a free port when `cfg.port` is 0). On an error the instances already started stop.
pub async fn start_cluster(cfg: SimConfig, n: usize) -> Result<Vec<SimServer>> {
    if n == 0 {
        return Err(Error::config("instances must be at least 1"));
    }
    if cfg.port != 0 {
        let last = usize::from(cfg.port) + n - 1;
        if last > usize::from(u16::MAX) {
            return Err(Error::config(format!(
                "ports {}..={last} do not fit below 65536",
                cfg.port
            )));
        }
    }
    let mut servers = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = cfg.clone();
        c.engine_index = i;
        if c.port != 0 {
            c.port += i as u16;
        }
        match start(c).await {
            Ok(s) => servers.push(s),
            Err(e) => {
                for s in servers {
                    s.shutdown().await;
                }
                return Err(Error::Instance {
                    index: i,
                    source: Box::new(e),
                });
            }
        }
    }
    Ok(servers)
}

async fn accept_loop(listener: TcpListener, state: Arc<AppState>, mut sd: watch::Receiver<bool>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = sd.changed() => break,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of file descriptors or similar: back off briefly.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        if state.faults.resets_enabled() {
            // With SO_LINGER 0, aborting the connection sends a real TCP RST.
            let _ = stream.set_zero_linger();
        }
        let n = state.conn_counter.fetch_add(1, Ordering::Relaxed);
        let delay = state.faults.accept_delay_ms(n).map(|ms| state.wall(ms));
        let st = state.clone();
        let mut conn_sd = sd.clone();
        tokio::spawn(async move {
            if let Some(ms) = delay {
                st.metrics.count_fault(FaultKind::SlowAccept);
                tokio::select! {
                    _ = tokio::time::sleep(ms) => {}
                    _ = conn_sd.changed() => return,
                }
            }
            let svc_state = st.clone();
            let svc = service_fn(move |req| route(svc_state.clone(), req));
            let idle = st.cfg.idle_close_ms.map(Duration::from_millis);
            let conn = http1::Builder::new()
                .keep_alive(!st.cfg.no_keep_alive)
                .serve_connection(TokioIo::new(IdleClose::new(stream, idle)), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = conn_sd.changed() => {}
            }
        });
    }
}

/// The connection's byte stream, closed (end of input, nothing answered) when bytes arrive
/// after more than `idle` without traffic in either direction: the keep-alive race of a real
/// server, made deterministic (`SimConfig::idle_close_ms`). hyper's server has no such switch
/// (its keep-alive settings only turn keep-alive on or off), hence this small wrapper.
struct IdleClose {
    inner: tokio::net::TcpStream,
    idle: Option<Duration>,
    /// End of the last traffic; `None` until the first response byte was written (a
    /// connection becomes idle only once it has served a request).
    last: Option<std::time::Instant>,
    closed: bool,
}

impl IdleClose {
    fn new(inner: tokio::net::TcpStream, idle: Option<Duration>) -> Self {
        IdleClose {
            inner,
            idle,
            last: None,
            closed: false,
        }
    }
}

impl tokio::io::AsyncRead for IdleClose {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.closed {
            return std::task::Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = r {
            if buf.filled().len() > before {
                let idle_for = self.last.map(|t| t.elapsed()).unwrap_or_default();
                if self.idle.is_some_and(|d| idle_for > d) {
                    // Forget what arrived and report the end of input: hyper closes the
                    // connection without having seen the request.
                    buf.set_filled(before);
                    self.closed = true;
                } else if self.last.is_some() {
                    self.last = Some(std::time::Instant::now());
                }
            }
        }
        r
    }
}

impl tokio::io::AsyncWrite for IdleClose {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, std::task::Poll::Ready(Ok(_))) {
            self.last = Some(std::time::Instant::now());
        }
        r
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

pub(crate) async fn read_body(req: Request<Incoming>) -> Result<Bytes, Response<Body>> {
    match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) => {
            let too_big = e
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            if too_big {
                Err(error_response(
                    Api::Completion,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "Request body too large.",
                ))
            } else {
                Err(error_response(
                    Api::Completion,
                    StatusCode::BAD_REQUEST,
                    "Could not read the request body.",
                ))
            }
        }
    }
}

/// Name of the engine with this index in the `x-inference-pod` header.
pub fn pod_name(engine_index: usize) -> String {
    format!("llm-sim-{engine_index}")
}

async fn route(state: Arc<AppState>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let mut resp = dispatch(&state, req).await;
    finish_response(&state, &mut resp);
    Ok(resp)
}

/// Counts the response's status and adds the instance's identity headers (and the keep-alive
/// announcement when asked).
pub(crate) fn finish_response(state: &AppState, resp: &mut Response<Body>) {
    state.metrics.count_status(resp.status().as_u16());
    // Which instance answered, as llm-d's inference simulator says it (useful behind a router).
    let h = resp.headers_mut();
    h.insert("x-inference-pod", state.pod.clone());
    h.insert("x-inference-port", state.port_header.clone());
    if let (true, Some(ms)) = (state.cfg.announce_keep_alive, state.cfg.idle_close_ms) {
        // Whole seconds, as servers send it; never 0 (that would mean "do not reuse").
        let secs = (ms / 1000).max(1);
        if let Ok(v) = hyper::header::HeaderValue::from_str(&format!("timeout={secs}")) {
            h.insert("keep-alive", v);
        }
    }
}

/// The request carries the API key: `Authorization: Bearer KEY`, or Anthropic's `x-api-key:
/// KEY` (on `/v1/messages`).
pub(crate) fn authorized(req: &Request<Incoming>, key: &str) -> bool {
    let h = req.headers();
    let bearer = h
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let anthropic = h.get("x-api-key").and_then(|v| v.to_str().ok());
    bearer.is_some_and(|k| k == key)
        || (req.uri().path() == "/v1/messages" && anthropic.is_some_and(|k| k == key))
}

/// 401 for a missing or wrong key: vLLM's `{"error":"Unauthorized"}`, in the API's own error
/// shape on the Responses and Messages routes.
pub(crate) fn unauthorized(path: &str) -> Response<Body> {
    match generation_route(path) {
        Some((api @ (Api::Responses | Api::Messages), _)) => {
            error_response(api, StatusCode::UNAUTHORIZED, "Invalid or missing API key.")
        }
        _ => full(
            StatusCode::UNAUTHORIZED,
            "application/json",
            r#"{"error":"Unauthorized"}"#,
        ),
    }
}

pub(crate) fn not_found() -> Response<Body> {
    full(
        StatusCode::NOT_FOUND,
        "application/json",
        r#"{"detail":"Not Found"}"#,
    )
}

fn method_not_allowed() -> Response<Body> {
    full(
        StatusCode::METHOD_NOT_ALLOWED,
        "application/json",
        r#"{"detail":"Method Not Allowed"}"#,
    )
}

/// The API of a generation route, and whether it is TGI's streaming one.
pub(crate) fn generation_route(path: &str) -> Option<(Api, bool)> {
    match path {
        "/v1/chat/completions" => Some((Api::Chat, false)),
        "/v1/completions" => Some((Api::Completion, false)),
        "/generate" => Some((Api::Tgi, false)),
        "/generate_stream" => Some((Api::Tgi, true)),
        "/v1/responses" => Some((Api::Responses, false)),
        "/v1/messages" => Some((Api::Messages, false)),
        _ => None,
    }
}

/// Answers one request: the API-key check on `/v1/` routes, then the generation routes, the
/// `GET` routes ([`get_route`]) and the other `POST` routes ([`post_route`]); 405 for a known
/// path with another method, 404 for any other path.
pub(crate) async fn dispatch(state: &Arc<AppState>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    if let Some(key) = &state.cfg.api_key {
        if path.starts_with("/v1/") && !authorized(&req, key) {
            return unauthorized(&path);
        }
    }
    if let Some((api, tgi_stream)) = generation_route(&path) {
        if method != Method::POST {
            return method_not_allowed();
        }
        let body = match read_body(req).await {
            Ok(b) => b,
            Err(r) => return r,
        };
        return api::generate(state.clone(), api, body, tgi_stream).await;
    }
    let routed = match method {
        Method::GET => get_route(state, &path),
        Method::POST => post_route(state, req, &path).await,
        _ => None,
    };
    if let Some(resp) = routed {
        return resp;
    }
    match path.as_str() {
        "/health"
        | "/version"
        | "/v1/models"
        | "/metrics"
        | "/admin/faults"
        | "/tokenize"
        | "/v1/messages/count_tokens"
        | "/detokenize"
        | "/reset_prefix_cache" => method_not_allowed(),
        _ => not_found(),
    }
}

/// The `GET` routes: `/health`, `/version`, `/v1/models`, `/metrics`, `/admin/faults`; `None`
/// for any other path.
fn get_route(state: &AppState, path: &str) -> Option<Response<Body>> {
    let resp = match path {
        "/health" if state.is_ready() => full(StatusCode::OK, "application/json", ""),
        "/health" => error_response(
            Api::Completion,
            StatusCode::SERVICE_UNAVAILABLE,
            "The server is still starting (simulated readiness delay).",
        ),
        "/version" => json_response(
            StatusCode::OK,
            &json!({"version": format!("llm-sim {}", env!("CARGO_PKG_VERSION"))}),
        ),
        "/v1/models" => {
            // One entry per served name, all of the same model (vLLM: `root` is its path).
            let root = &state.cfg.model_name;
            let data: Vec<_> = state
                .cfg
                .served_names()
                .map(|m| {
                    json!({"id": m, "object": "model", "created": state.started,
                        "owned_by": "vllm", "root": root, "parent": null,
                        "max_model_len": state.cfg.max_model_len, "permission": []})
                })
                .collect();
            json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
        }
        "/metrics" => full(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            state.metrics.render(&state.cfg, 0),
        ),
        "/admin/faults" => json_response(
            StatusCode::OK,
            &serde_json::to_value(state.faults.get()).unwrap_or_default(),
        ),
        _ => return None,
    };
    Some(resp)
}

/// The `POST` routes other than generation: `/v1/messages/count_tokens`, `/tokenize`,
/// `/detokenize`, `/reset_prefix_cache`, `/admin/faults`; `None` for any other path (the body
/// is read only on these routes).
async fn post_route(
    state: &Arc<AppState>,
    req: Request<Incoming>,
    path: &str,
) -> Option<Response<Body>> {
    let resp = match path {
        "/v1/messages/count_tokens" => {
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(r) => return Some(r),
            };
            api::count_message_tokens(state, &body)
        }
        "/tokenize" | "/detokenize" => {
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(r) => return Some(r),
            };
            if path == "/tokenize" {
                api::tokenize(state, &body)
            } else {
                api::detokenize(state, &body)
            }
        }
        "/reset_prefix_cache" => match state.engine.reset_prefix_cache().await {
            Some(true) => full(StatusCode::OK, "application/json", ""),
            Some(false) => error_response(
                Api::Completion,
                StatusCode::CONFLICT,
                "The prefix cache cannot be reset while requests hold KV blocks.",
            ),
            None => error_response(
                Api::Completion,
                StatusCode::SERVICE_UNAVAILABLE,
                "The engine is shutting down.",
            ),
        },
        "/admin/faults" => {
            let body = match read_body(req).await {
                Ok(b) => b,
                Err(r) => return Some(r),
            };
            admin_faults(state, &body)
        }
        _ => return None,
    };
    Some(resp)
}

/// `POST /admin/faults`: a JSON object with any subset of [`FaultConfig`]'s fields; the rest
/// keep their current values. `{"reset": true}` turns every fault off first.
fn admin_faults(state: &AppState, body: &[u8]) -> Response<Body> {
    let bad = |m: String| error_response(Api::Completion, StatusCode::BAD_REQUEST, &m);
    let patch: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return bad(format!("Invalid JSON: {e}")),
    };
    let serde_json::Value::Object(mut patch) = patch else {
        return bad("Expected a JSON object.".into());
    };
    let mut cur = serde_json::to_value(state.faults.get()).unwrap_or_default();
    if patch.remove("reset").and_then(|v| v.as_bool()) == Some(true) {
        let keep = state.faults.get();
        cur = serde_json::to_value(FaultConfig {
            seed: keep.seed,
            stall_ms: keep.stall_ms,
            slow_accept_ms: keep.slow_accept_ms,
            ..FaultConfig::default()
        })
        .unwrap_or_default();
    }
    if let Some(obj) = cur.as_object_mut() {
        for (k, v) in patch {
            obj.insert(k, v);
        }
    }
    let cfg: FaultConfig = match serde_json::from_value(cur) {
        Ok(c) => c,
        Err(e) => return bad(format!("Invalid fault settings: {e}")),
    };
    if let Err(e) = state.faults.set(cfg.clone()) {
        return bad(e);
    }
    json_response(
        StatusCode::OK,
        &serde_json::to_value(cfg).unwrap_or_default(),
    )
}

/// A server running on its own thread with its own single-threaded tokio runtime; it stops
/// when dropped.
pub struct SimThread {
    /// The bound address.
    pub addr: SocketAddr,
    faults: FaultHandle,
    metrics: Arc<Metrics>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SimThread {
    /// `http://ADDR:PORT` of the server.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's runtime fault switches.
    pub fn faults(&self) -> FaultHandle {
        self.faults.clone()
    }

    /// The server's counters.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }
}

impl Drop for SimThread {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a server on a background thread (its own current-thread runtime) and returns once it
/// is listening.
pub fn spawn_in_thread(cfg: SimConfig) -> Result<SimThread> {
    type Ready = Result<(SocketAddr, FaultHandle, Arc<Metrics>)>;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Ready>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = crate::util::spawn_runtime_thread("llm-sim", move |rt| {
        let rt = match rt {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready_tx.send(Err(Error::io("starting the llm-sim runtime", e)));
                return;
            }
        };
        rt.block_on(async move {
            match start(cfg).await {
                Ok(server) => {
                    let _ = ready_tx.send(Ok((server.addr, server.faults(), server.metrics())));
                    let _ = stop_rx.await;
                    server.shutdown().await;
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
        });
    })
    .map_err(|e| Error::io("spawning the llm-sim thread", e))?;
    match ready_rx.recv() {
        Ok(Ok((addr, faults, metrics))) => Ok(SimThread {
            addr,
            faults,
            metrics,
            stop: Some(stop_tx),
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => {
            let _ = thread.join();
            Err(Error::config(
                "the llm-sim thread exited before it was ready",
            ))
        }
    }
}
