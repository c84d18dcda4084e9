//! The built-in router (`--router POLICY`): one front port for the instances of a cluster, for
//! what-if studies only (real deployments route with their own gateway).
//!
//! It runs in the same process and runtime as the instances and hands each request to the
//! chosen instance's engine directly instead of proxying it over HTTP: the request is parsed
//! once (on instance 0's tokenizer and limits, which every instance shares), the policy
//! ([`crate::routing`]) picks the instance, and that instance serves it exactly as if it had
//! come to its own port (its fault switches, metrics, identity headers). Streaming costs
//! nothing extra: the response body is the instance's own.
//!
//! The router's port also answers `GET /health` (200 once every instance is ready), `GET
//! /metrics` (its own counters, and each instance's URL as `llm_sim:router_instance_info`),
//! `GET /instances` (the instances' URLs as JSON, so a client finds their own metrics pages),
//! `POST /reset_prefix_cache` (every instance, and the router's prefix index); everything else
//! is served by instance 0.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::HeaderName;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::{self, error_response, full, Api, Body};
use crate::cache::extend_block_hashes;
use crate::error::{Error, Result};
use crate::routing::{Policy, RouteRequest, Router, SmgConfig};
use crate::server::{self, SimServer};
use crate::state::AppState;

/// Settings of the built-in router.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterConfig {
    pub policy: Policy,
    /// Address and port of the front port (0: any free port).
    pub host: String,
    pub port: u16,
    /// Header carrying the session key for the `session` policy (the OpenAI `user` field is
    /// used when the header is absent).
    pub session_header: String,
    /// Headers carrying smg's routing key (`consistent_hashing`), the first present wins
    /// (smg's `--routing-key-headers`, default `x-smg-routing-key`); without one, smg's
    /// implicit keys `authorization`, `x-forwarded-for`, `cookie` in that order.
    pub routing_key_headers: Vec<String>,
    /// The smg policies' thresholds (smg's defaults).
    pub smg: SmgConfig,
}

impl RouterConfig {
    /// A router of `policy` on a free port of 127.0.0.1, sessions in `x-session-id`.
    pub fn new(policy: Policy) -> RouterConfig {
        RouterConfig {
            policy,
            host: "127.0.0.1".into(),
            port: 0,
            session_header: "x-session-id".into(),
            routing_key_headers: vec![SMG_ROUTING_KEY_HEADER.into()],
            smg: SmgConfig::default(),
        }
    }
}

/// smg's default routing-key header.
pub const SMG_ROUTING_KEY_HEADER: &str = "x-smg-routing-key";

/// The headers smg takes a routing key from when no routing-key header is present
/// (`policies/consistent_hashing.rs`).
const SMG_IMPLICIT_KEY_HEADERS: [&str; 3] = ["authorization", "x-forwarded-for", "cookie"];

/// State shared by the router's connections.
struct RouterState {
    instances: Vec<Arc<AppState>>,
    /// Each instance's bound address.
    addrs: Vec<SocketAddr>,
    policy: Policy,
    router: Mutex<Router>,
    session_header: HeaderName,
    /// Where `consistent_hashing` looks for its key, in order.
    key_headers: Vec<HeaderName>,
    /// When the router started, and how much faster simulated time runs (`cache_aware`'s
    /// eviction interval is simulated time).
    started: std::time::Instant,
    speedup: f64,
    /// Requests routed to each instance whose response has not ended (its waiting + running,
    /// as the router sees them).
    in_flight: Vec<AtomicU64>,
    /// Requests routed to each instance.
    routed: Vec<AtomicU64>,
    /// Generation requests refused before routing (unparsable, too long, ...).
    rejected: AtomicU64,
}

/// A running router on the caller's runtime; stops with [`SimRouter::shutdown`] or on drop.
pub struct SimRouter {
    /// The bound address of the front port.
    pub addr: SocketAddr,
    state: Arc<RouterState>,
    shutdown: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for SimRouter {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

impl SimRouter {
    /// `http://ADDR:PORT` of the front port.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests routed to each instance so far.
    pub fn routed(&self) -> Vec<u64> {
        self.state
            .routed
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    /// Stops accepting and waits for the accept loop to end (the instances keep running).
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

/// Starts a router of `cfg.policy` in front of `servers` (a cluster started with
/// [`crate::start_cluster`]) on the current runtime.
pub async fn start_router(servers: &[SimServer], cfg: RouterConfig) -> Result<SimRouter> {
    let instances: Vec<Arc<AppState>> = servers.iter().map(SimServer::state).collect();
    let addrs: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let Some(first) = instances.first() else {
        return Err(Error::config("the router needs at least one instance"));
    };
    let session_header = HeaderName::from_bytes(cfg.session_header.as_bytes()).map_err(|e| {
        Error::config(format!(
            "session header `{}` is not a header name: {e}",
            cfg.session_header
        ))
    })?;
    let mut key_headers = Vec::new();
    for h in cfg
        .routing_key_headers
        .iter()
        .map(String::as_str)
        .chain(SMG_IMPLICIT_KEY_HEADERS)
    {
        key_headers.push(HeaderName::from_bytes(h.as_bytes()).map_err(|e| {
            Error::config(format!(
                "routing key header `{h}` is not a header name: {e}"
            ))
        })?);
    }
    let capacity = first.cfg.num_gpu_blocks as usize;
    let speedup = first.cfg.speedup;
    let listener = TcpListener::bind((cfg.host.as_str(), cfg.port))
        .await
        .map_err(|e| {
            Error::io(
                format!("binding the router to {}:{}", cfg.host, cfg.port),
                e,
            )
        })?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("reading the router's bound address", e))?;
    let n = instances.len();
    let state = Arc::new(RouterState {
        router: Mutex::new(Router::with_smg(cfg.policy, n, capacity, cfg.smg.clone())),
        policy: cfg.policy,
        session_header,
        key_headers,
        started: std::time::Instant::now(),
        speedup,
        in_flight: (0..n).map(|_| AtomicU64::new(0)).collect(),
        routed: (0..n).map(|_| AtomicU64::new(0)).collect(),
        rejected: AtomicU64::new(0),
        instances,
        addrs,
    });
    let (shutdown, sd) = watch::channel(false);
    let task = tokio::spawn(accept_loop(listener, state.clone(), sd));
    Ok(SimRouter {
        addr,
        state,
        shutdown,
        task: Some(task),
    })
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<RouterState>,
    mut sd: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = sd.changed() => break,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let st = state.clone();
        let mut conn_sd = sd.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let st = st.clone();
                async move { Ok::<_, Infallible>(handle(&st, req).await) }
            });
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = conn_sd.changed() => {}
            }
        });
    }
}

async fn handle(st: &Arc<RouterState>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let first = &st.instances[0];
    if let Some(key) = &first.cfg.api_key {
        if path.starts_with("/v1/") && !server::authorized(&req, key) {
            return server::unauthorized(&path);
        }
    }
    match (req.method(), path.as_str()) {
        (&Method::POST, p) if server::generation_route(p).is_some() => generate(st, req).await,
        (&Method::GET, "/health") if st.instances.iter().all(|s| s.is_ready()) => {
            full(StatusCode::OK, "application/json", "")
        }
        (&Method::GET, "/health") => error_response(
            Api::Completion,
            StatusCode::SERVICE_UNAVAILABLE,
            "An instance is still starting (simulated readiness delay).",
        ),
        (&Method::GET, "/metrics") => full(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            render_metrics(st, &instance_urls(st, &req)),
        ),
        (&Method::GET, "/instances") => instances_json(st, &instance_urls(st, &req)),
        (&Method::POST, "/reset_prefix_cache") => reset_prefix_caches(st).await,
        _ => server::dispatch(first, req).await,
    }
}

/// Parses a generation request once, routes it and hands it to the chosen instance.
async fn generate(st: &Arc<RouterState>, req: Request<Incoming>) -> Response<Body> {
    let Some((api, tgi_stream)) = server::generation_route(req.uri().path()) else {
        return server::not_found();
    };
    let header_key = req
        .headers()
        .get(&st.session_header)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let routing_key = match st.policy {
        Policy::ConsistentHashing => st.key_headers.iter().find_map(|h| {
            let v = req.headers().get(h)?.to_str().ok()?;
            (!v.is_empty()).then(|| v.to_owned())
        }),
        _ => None,
    };
    let at_secs = st.started.elapsed().as_secs_f64() * st.speedup;
    let body = match server::read_body(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let first = &st.instances[0];
    // smg reads the text off the body itself; only the policies that route on it pay for it.
    let text_body = st.policy.needs_text().then(|| body.clone());
    let job = match api::parse_job_off_runtime(first, api, body, tgi_stream).await {
        Ok(j) => j,
        Err(e) => {
            st.rejected.fetch_add(1, Ordering::Relaxed);
            return e.into_response(api);
        }
    };
    let session = header_key.as_deref().or(job.user());
    let mut blocks = Vec::new();
    if st.policy == Policy::PrefixAware {
        extend_block_hashes(&mut blocks, job.prompt(), first.cfg.block_size as usize);
    }
    let text = text_body.map(|b| routing_text(api, &b));
    let i = {
        let Ok(mut router) = st.router.lock() else {
            return error_response(api, StatusCode::INTERNAL_SERVER_ERROR, "Router poisoned.");
        };
        let loads: Vec<u64> = st
            .in_flight
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        router.route(
            &RouteRequest {
                session,
                blocks: &blocks,
                text: text.as_deref(),
                routing_key: routing_key.as_deref(),
                at_secs,
            },
            &loads,
        )
    };
    st.routed[i].fetch_add(1, Ordering::Relaxed);
    let guard = InFlight::new(st.clone(), i);
    let instance = st.instances[i].clone();
    let mut resp = api::generate_job(instance.clone(), job).await;
    server::finish_response(&instance, &mut resp);
    // The request stays in flight until its body is done (or dropped by a client gone away).
    resp.map(|b| {
        b.map_frame(move |f| {
            let _keep = &guard;
            f
        })
        .boxed_unsync()
    })
}

/// The text smg's HTTP router routes a request on (`GenerationRequest::extract_text_for_routing`
/// in smg's `crates/protocols`): a chat request's message contents in order, joined by single
/// spaces (a message's text parts joined by spaces too, an assistant message's
/// `reasoning_content` after its content); a completion's prompt (a list of prompts joined by
/// spaces). Other APIs route on an empty text. An unreadable body has been refused already.
pub fn routing_text(api: Api, body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Content {
        Text(String),
        Parts(Vec<Part>),
        Other(serde::de::IgnoredAny),
    }
    #[derive(serde::Deserialize)]
    struct Part {
        #[serde(rename = "type", default)]
        kind: String,
        #[serde(default)]
        text: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Message {
        #[serde(default)]
        content: Option<Content>,
        #[serde(default)]
        reasoning_content: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Chat {
        #[serde(default)]
        messages: Vec<Message>,
    }
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Prompt {
        One(String),
        Many(Vec<String>),
        Other(serde::de::IgnoredAny),
    }
    #[derive(serde::Deserialize)]
    struct Completion {
        prompt: Option<Prompt>,
    }
    let mut out = String::new();
    match api {
        Api::Chat => {
            let Ok(chat) = serde_json::from_slice::<Chat>(body) else {
                return out;
            };
            for m in chat.messages {
                let mut pieces: Vec<String> = match m.content {
                    Some(Content::Text(t)) => vec![t],
                    Some(Content::Parts(parts)) => parts
                        .into_iter()
                        .filter(|p| p.kind == "text")
                        .filter_map(|p| p.text)
                        .collect(),
                    Some(Content::Other(_)) | None => Vec::new(),
                };
                pieces.extend(m.reasoning_content);
                for p in pieces.iter().filter(|p| !p.is_empty()) {
                    if !out.is_empty() {
                        out.push(' ');
                    }
                    out.push_str(p);
                }
            }
        }
        Api::Completion => match serde_json::from_slice::<Completion>(body) {
            Ok(Completion {
                prompt: Some(Prompt::One(p)),
            }) => out = p,
            Ok(Completion {
                prompt: Some(Prompt::Many(ps)),
            }) => out = ps.join(" "),
            _ => {}
        },
        Api::Tgi | Api::Responses | Api::Messages => {}
    }
    out
}

/// Counts a request in flight on instance `i` until dropped.
struct InFlight {
    st: Arc<RouterState>,
    i: usize,
}

impl InFlight {
    fn new(st: Arc<RouterState>, i: usize) -> InFlight {
        st.in_flight[i].fetch_add(1, Ordering::Relaxed);
        InFlight { st, i }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.st.in_flight[self.i].fetch_sub(1, Ordering::Relaxed);
    }
}

/// Resets every instance's prefix cache, then the router's index; 409 (nothing reset on the
/// refusing instances) while any instance has requests holding blocks.
async fn reset_prefix_caches(st: &RouterState) -> Response<Body> {
    let mut refused = Vec::new();
    for (i, inst) in st.instances.iter().enumerate() {
        if inst.engine.reset_prefix_cache().await != Some(true) {
            refused.push(i.to_string());
        }
    }
    if let Ok(mut r) = st.router.lock() {
        r.reset();
    }
    if refused.is_empty() {
        full(StatusCode::OK, "application/json", "")
    } else {
        error_response(
            Api::Completion,
            StatusCode::CONFLICT,
            &format!(
                "The prefix cache of instance(s) {} cannot be reset while requests hold KV blocks.",
                refused.join(", ")
            ),
        )
    }
}

/// Each instance's base URL as a client of the router reaches it: its bound address, or, when
/// it listens on every interface, the host the client used for the router.
fn instance_urls(st: &RouterState, req: &Request<Incoming>) -> Vec<String> {
    let asked = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<hyper::http::uri::Authority>().ok())
        .map(|a| a.host().to_string());
    st.addrs
        .iter()
        .map(|a| {
            if !a.ip().is_unspecified() {
                return format!("http://{a}");
            }
            let host = asked.clone().unwrap_or_else(|| "127.0.0.1".into());
            if host.contains(':') && !host.starts_with('[') {
                format!("http://[{host}]:{}", a.port())
            } else {
                format!("http://{host}:{}", a.port())
            }
        })
        .collect()
}

/// `GET /instances`: the instances behind the router, their URLs and metrics pages.
fn instances_json(st: &RouterState, urls: &[String]) -> Response<Body> {
    let list: Vec<serde_json::Value> = urls
        .iter()
        .enumerate()
        .map(|(i, u)| {
            serde_json::json!({"index": i, "pod": server::pod_name(i), "url": u,
                               "metrics_url": format!("{u}/metrics")})
        })
        .collect();
    api::json_response(
        StatusCode::OK,
        &serde_json::json!({"object": "list", "policy": st.policy.name(), "instances": list}),
    )
}

/// The router's Prometheus page: each instance's URL, requests routed to and in flight on each
/// instance.
fn render_metrics(st: &RouterState, urls: &[String]) -> String {
    use std::fmt::Write;
    let policy = st.policy.name();
    let mut out = String::with_capacity(256 + st.instances.len() * 240);
    let _ = writeln!(
        out,
        "# HELP llm_sim:router_instance_info An instance behind the built-in router: its base URL (its engine metrics are on its own /metrics).\n# TYPE llm_sim:router_instance_info gauge"
    );
    for (i, u) in urls.iter().enumerate() {
        let _ = writeln!(
            out,
            "llm_sim:router_instance_info{{policy=\"{policy}\",instance=\"{i}\",pod=\"{}\",url=\"{u}\"}} 1",
            server::pod_name(i)
        );
    }
    let _ = writeln!(
        out,
        "# HELP llm_sim:router_requests_total Requests the built-in router handed to each instance.\n# TYPE llm_sim:router_requests_total counter"
    );
    for (i, c) in st.routed.iter().enumerate() {
        let _ = writeln!(
            out,
            "llm_sim:router_requests_total{{policy=\"{policy}\",instance=\"{i}\",pod=\"{}\"}} {}",
            server::pod_name(i),
            c.load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(
        out,
        "# HELP llm_sim:router_in_flight Requests routed to each instance whose response has not ended.\n# TYPE llm_sim:router_in_flight gauge"
    );
    for (i, c) in st.in_flight.iter().enumerate() {
        let _ = writeln!(
            out,
            "llm_sim:router_in_flight{{policy=\"{policy}\",instance=\"{i}\",pod=\"{}\"}} {}",
            server::pod_name(i),
            c.load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(
        out,
        "# HELP llm_sim:router_rejected_total Generation requests refused before routing (invalid).\n# TYPE llm_sim:router_rejected_total counter\nllm_sim:router_rejected_total{{policy=\"{policy}\"}} {}",
        st.rejected.load(Ordering::Relaxed)
    );
    out
}
