//! Live client metrics (`--metrics-port`, `docs/server-metrics.md` "Live client metrics"): the
//! client's own latencies and counts as a Prometheus page on `GET /metrics` while a replay runs,
//! with vLLM's histogram bucket bounds so one dashboard puts the client's TTFT and E2E next to
//! the server's `vllm:*` histograms.
//!
//! Updating costs a relaxed atomic add (counters, the in-flight gauge) or a short uncontended
//! lock (a histogram observation) and happens where the records are finished: the record
//! writer's thread ([`LiveMetrics::on_record`]), plus one counter each where the dispatcher
//! hands a request over ([`LiveMetrics::on_scheduled`]) and where a task sends it
//! ([`LiveMetrics::on_sent`]). Serving happens on a thread of its own with its own
//! single-threaded runtime ([`Exporter`]), kept off the dispatcher's core: a scrape never waits
//! for, or holds up, a send.
//!
//! The exposition format comes from `prometheus-client` (the Prometheus project's own Rust
//! client; OpenMetrics text, which Prometheus scrapes natively).

use std::borrow::Cow;
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::record::{Record, Status};

/// vLLM V1's bucket bounds (seconds) of `vllm:time_to_first_token_seconds`,
/// `vllm:inter_token_latency_seconds` and `vllm:e2e_request_latency_seconds` (defined once in
/// `llm_common::buckets`, shared with llm-sim's `/metrics`).
pub use llm_common::buckets::{ITL_BUCKETS, REQUEST_LATENCY_BUCKETS as E2E_BUCKETS, TTFT_BUCKETS};

/// Send drift (seconds): 0.1 ms to 2.5 s, fine where a healthy run's drift lies (well under the
/// default 5 ms `--max-drift-ms`).
pub const DRIFT_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Every status a record can end with, in the order of the request counters.
const STATUSES: [Status; 7] = [
    Status::Ok,
    Status::HttpError,
    Status::Timeout,
    Status::ConnectError,
    Status::ProtocolError,
    Status::Cancelled,
    Status::DryRun,
];

/// The labels every series of the page carries.
#[derive(Debug, Clone)]
pub struct ExportLabels {
    /// `run_id`: names the run (common to the shards of one run).
    pub run_id: String,
    /// `shard`: `K/N` (`0/1` without sharding).
    pub shard: String,
    /// `api`: the API spoken (`openai-chat`, `openai-completions`, `tgi`, `aibrix`).
    pub api: String,
}

/// Where and how long the page is served.
#[derive(Debug, Clone)]
pub struct ExportConfig {
    /// `--metrics-host`:`--metrics-port` (port 0: any free port, see [`Exporter::addr`]).
    pub addr: SocketAddr,
    pub labels: ExportLabels,
    /// `--metrics-linger`: how long the final values stay up after the run.
    pub linger: Duration,
    /// The core the serving thread is pinned to (never the dispatcher's), if any.
    pub pin_core: Option<usize>,
}

/// The client's metrics, updated as requests are handed over, sent and recorded.
#[derive(Debug)]
pub struct LiveMetrics {
    ttft: Histogram,
    tpot: Histogram,
    itl: Histogram,
    e2e: Histogram,
    drift: Histogram,
    /// One counter per status, in [`STATUSES`] order.
    requests: Vec<Counter>,
    scheduled: Counter,
    sent: Counter,
    in_flight: Gauge,
    prompt_tokens: Counter,
    generation_tokens: Counter,
    /// Thinking and tool calls (reasoning models, agents): time to the first answer token,
    /// thinking token events, tool calls.
    ttfa: Histogram,
    reasoning_tokens: Counter,
    tool_calls: Counter,
}

/// Status label set of the requests counter.
type StatusLabel = [(&'static str, &'static str); 1];

impl LiveMetrics {
    /// The metrics and the registry that renders them, every series labelled with `labels`.
    fn new(labels: &ExportLabels) -> (LiveMetrics, Registry) {
        let constant = [
            ("run_id", labels.run_id.clone()),
            ("shard", labels.shard.clone()),
            ("api", labels.api.clone()),
        ];
        let mut reg = Registry::with_labels(
            constant
                .into_iter()
                .map(|(k, v)| (Cow::Borrowed(k), Cow::Owned(v))),
        );
        let hist = |reg: &mut Registry, name: &str, help: &str, bounds: &[f64]| {
            let h = Histogram::new(bounds.iter().copied());
            reg.register(format!("request_sim:{name}"), help, h.clone());
            h
        };
        let ttft = hist(&mut reg, "time_to_first_token_seconds",
            "Client TTFT of requests that ended ok: first SSE message with a non-empty choices list, from the send", TTFT_BUCKETS);
        let tpot = hist(&mut reg, "request_time_per_output_token_seconds",
            "Client TPOT of requests that ended ok with more than one output token: (E2EL - TTFT) / (output tokens - 1)", ITL_BUCKETS);
        let itl = hist(
            &mut reg,
            "inter_token_latency_seconds",
            "Client ITL: gaps between consecutive token-bearing chunks of requests that ended ok",
            ITL_BUCKETS,
        );
        let e2e = hist(
            &mut reg,
            "e2e_request_latency_seconds",
            "Client E2EL of requests that ended ok: last token-bearing chunk, from the send",
            E2E_BUCKETS,
        );
        let drift = hist(
            &mut reg,
            "send_drift_seconds",
            "Send drift of every sent request: actual send time - scheduled send time",
            DRIFT_BUCKETS,
        );
        let family = Family::<StatusLabel, Counter>::default();
        reg.register(
            "request_sim:requests",
            "Requests recorded, by how they ended (every scheduled request ends as one record)",
            family.clone(),
        );
        let requests = STATUSES
            .iter()
            .map(|s| family.get_or_create_owned(&[("status", s.as_str())]))
            .collect();
        let counter = |reg: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            reg.register(format!("request_sim:{name}"), help, c.clone());
            c
        };
        let scheduled = counter(
            &mut reg,
            "requests_scheduled",
            "Requests the dispatcher handed over at their scheduled time",
        );
        let sent = counter(&mut reg, "requests_sent", "Requests sent to the server");
        let in_flight = Gauge::default();
        reg.register(
            "request_sim:requests_in_flight",
            "Requests sent and not yet recorded",
            in_flight.clone(),
        );
        let prompt_tokens = counter(
            &mut reg,
            "prompt_tokens",
            "Intended prompt tokens (trace input_length) of requests that ended ok",
        );
        let generation_tokens = counter(
            &mut reg,
            "generation_tokens",
            "Output tokens (usage, else token-bearing chunks) of requests that ended ok",
        );
        let (ttfa, reasoning_tokens, tool_calls) = register_reasoning(&mut reg);
        let m = LiveMetrics {
            ttfa,
            reasoning_tokens,
            tool_calls,
            ttft,
            tpot,
            itl,
            e2e,
            drift,
            requests,
            scheduled,
            sent,
            in_flight,
            prompt_tokens,
            generation_tokens,
        };
        (m, reg)
    }

    /// The dispatcher handed a request over at its time.
    pub fn on_scheduled(&self) {
        self.scheduled.inc();
    }

    /// A request is being sent to the server.
    pub fn on_sent(&self) {
        self.sent.inc();
        self.in_flight.inc();
    }

    /// A request's record was finished (on the record writer's thread); `itl_ms`: its
    /// inter-token latencies (else the record's own `itl_ms`).
    pub fn on_record(&self, rec: &Record, itl_ms: &[f64]) {
        if let Some(i) = STATUSES.iter().position(|s| *s == rec.status) {
            self.requests[i].inc();
        }
        if rec.sent_ms.is_some() && rec.status != Status::DryRun {
            self.in_flight.dec();
        }
        if let Some(d) = rec.drift_ms {
            self.drift.observe(d / 1e3);
        }
        if rec.status != Status::Ok {
            return;
        }
        for (h, v) in [
            (&self.ttft, rec.ttft_ms),
            (&self.tpot, rec.tpot_ms),
            (&self.e2e, rec.e2e_ms),
        ] {
            if let Some(v) = v {
                h.observe(v / 1e3);
            }
        }
        let itl = if itl_ms.is_empty() {
            rec.itl_ms.as_deref().unwrap_or(&[])
        } else {
            itl_ms
        };
        for v in itl {
            self.itl.observe(v / 1e3);
        }
        if let Some(v) = rec.ttfa_ms {
            self.ttfa.observe(v / 1e3);
        }
        self.reasoning_tokens
            .inc_by(u64::from(rec.reasoning_tokens.unwrap_or(0)));
        self.tool_calls
            .inc_by(u64::from(rec.tool_calls.unwrap_or(0)));
        self.prompt_tokens.inc_by(u64::from(rec.input_length));
        self.generation_tokens
            .inc_by(u64::from(rec.output_tokens.unwrap_or(rec.chunks)));
    }
}

/// The thinking and tool-call metrics: the time to the first answer token, thinking token
/// events, tool calls.
fn register_reasoning(reg: &mut Registry) -> (Histogram, Counter, Counter) {
    let ttfa = Histogram::new(TTFT_BUCKETS.iter().copied());
    reg.register(
        "request_sim:time_to_first_answer_token_seconds",
        "Client time to the first answer token of requests that ended ok and carried thinking or a tool call, from the send",
        ttfa.clone(),
    );
    let reasoning = Counter::default();
    reg.register(
        "request_sim:reasoning_tokens",
        "Thinking token events counted from the streams of requests that ended ok",
        reasoning.clone(),
    );
    let tools = Counter::default();
    reg.register(
        "request_sim:tool_calls",
        "Tool calls in the answers of requests that ended ok",
        tools.clone(),
    );
    (ttfa, reasoning, tools)
}

/// The page's server: a thread with its own runtime, answering `GET /metrics` until stopped.
pub struct Exporter {
    metrics: Arc<LiveMetrics>,
    addr: SocketAddr,
    linger: Duration,
    stop: CancellationToken,
    thread: Option<JoinHandle<()>>,
}

impl Exporter {
    /// Listen on `cfg.addr` (a port in use is an error here, before anything is sent) and
    /// start serving.
    pub fn start(cfg: ExportConfig) -> crate::Result<Exporter> {
        let listener = StdListener::bind(cfg.addr).map_err(|e| {
            crate::Error::config(format!(
                "--metrics-port {}: cannot listen on {} ({e}); choose a free port, or 0 for any",
                cfg.addr.port(),
                cfg.addr
            ))
        })?;
        let addr = listener
            .local_addr()
            .and_then(|a| listener.set_nonblocking(true).map(|_| a))
            .map_err(|e| crate::Error::io("live metrics: cannot set up the listener", e))?;
        let (metrics, registry) = LiveMetrics::new(&cfg.labels);
        let (registry, stop) = (Arc::new(registry), CancellationToken::new());
        let stop2 = stop.clone();
        let pin = cfg.pin_core;
        let thread = llm_common::util::spawn_runtime_thread("metrics-exporter", move |rt| {
            if let Some(id) = pin {
                core_affinity::set_for_current(core_affinity::CoreId { id });
            }
            match rt {
                Ok(rt) => rt.block_on(serve(listener, registry, stop2)),
                Err(e) => eprintln!("request-sim: live metrics: cannot start a runtime: {e}"),
            }
        })
        .map_err(|e| crate::Error::io("cannot start the live metrics thread", e))?;
        Ok(Exporter {
            metrics: Arc::new(metrics),
            addr,
            linger: cfg.linger,
            stop,
            thread: Some(thread),
        })
    }

    /// The metrics to update.
    pub fn metrics(&self) -> Arc<LiveMetrics> {
        self.metrics.clone()
    }

    /// The address served (the actual port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How long [`Exporter::finish`] keeps serving.
    pub fn linger(&self) -> Duration {
        self.linger
    }

    /// The run is over: keep serving the final values for the linger time, then stop.
    pub fn finish(self) {
        if !self.linger.is_zero() {
            std::thread::sleep(self.linger);
        }
        drop(self);
    }
}

impl Drop for Exporter {
    /// Stops serving at once (an error ended the run, or the linger is over).
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts connections until `stop`; each is served in a task of its own.
async fn serve(listener: StdListener, registry: Arc<Registry>, stop: CancellationToken) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("request-sim: live metrics: cannot listen: {e}");
            return;
        }
    };
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                // Out of descriptors and the like: try again shortly, never spin.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let page = respond(&req, &registry);
                async move { Ok::<_, Infallible>(page) }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// The answer to one request: the page on `GET /metrics`, else 404 or 405.
fn respond(req: &Request<Incoming>, registry: &Registry) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, ctype: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = ctype.parse() {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    let text = "text/plain; charset=utf-8";
    if req.uri().path() != "/metrics" {
        return reply(
            StatusCode::NOT_FOUND,
            text,
            "only /metrics is served\n".into(),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            text,
            "GET /metrics\n".into(),
        );
    }
    let mut page = String::with_capacity(8 << 10);
    match encode(&mut page, registry) {
        Ok(()) => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            page,
        ),
        Err(_) => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            text,
            "cannot render the metrics\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> ExportLabels {
        ExportLabels {
            run_id: "r1".into(),
            shard: "0/1".into(),
            api: "openai-chat".into(),
        }
    }

    fn ok_record(ttft: f64, e2e: f64, out: u32) -> Record {
        Record {
            sent_ms: Some(1.0),
            drift_ms: Some(0.2),
            ttft_ms: Some(ttft),
            e2e_ms: Some(e2e),
            tpot_ms: (out > 1).then(|| (e2e - ttft) / (out as f64 - 1.0)),
            input_length: 100,
            output_tokens: Some(out),
            ..Record::new(0, 1, Status::Ok)
        }
    }

    #[test]
    fn records_fill_the_histograms_and_counters() {
        let (m, reg) = LiveMetrics::new(&labels());
        for _ in 0..3 {
            m.on_scheduled();
            m.on_sent();
        }
        m.on_record(&ok_record(30.0, 530.0, 11), &[50.0; 10]);
        m.on_record(&ok_record(3000.0, 3000.0, 1), &[]);
        let failed = Record {
            sent_ms: Some(2.0),
            drift_ms: Some(0.1),
            ..Record::new(1, 2, Status::HttpError)
        };
        m.on_record(&failed, &[]);
        let mut page = String::new();
        encode(&mut page, &reg).unwrap();
        let has = |line: &str| assert!(page.contains(line), "{line} not in\n{page}");

        has("request_sim:requests_total{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\",status=\"ok\"} 2");
        has("request_sim:requests_total{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\",status=\"http_error\"} 1");
        has("request_sim:requests_total{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\",status=\"timeout\"} 0");
        has("request_sim:requests_in_flight{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\"} 0");
        has("request_sim:requests_scheduled_total{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\"} 3");
        has("request_sim:time_to_first_token_seconds_count{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\"} 2");
        has("request_sim:time_to_first_token_seconds_bucket{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\",le=\"0.04\"} 1");
        has("request_sim:time_to_first_token_seconds_bucket{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\",le=\"2.5\"} 1");
        // TPOT only for more than one output token; ITL per gap.
        has("request_sim:request_time_per_output_token_seconds_count{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\"} 1");
        has("request_sim:inter_token_latency_seconds_count{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\"} 10");
        has("request_sim:send_drift_seconds_count{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\"} 3");
        has("request_sim:prompt_tokens_total{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\"} 200");
        has("request_sim:generation_tokens_total{run_id=\"r1\",shard=\"0/1\",api=\"openai-chat\"} 12");
    }
}
