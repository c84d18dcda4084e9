//! The scraper: polls the `/metrics` page of every instance during a replay, on its own thread
//! with its own single-threaded runtime and HTTP client, so it never shares a connection, a
//! worker thread or a lock with the sending path.
//!
//! Every instance has its own polling task: a slow or dead endpoint makes only its own scrapes
//! time out (counted as failures), and a scrape that takes longer than the interval skips that
//! instance's missed ticks instead of queueing them. Each sample is written to
//! `server_metrics.jsonl` (times on the run's clock) and kept, in engine-neutral form, for the
//! summary and for the per-request join.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::names::{PageKind, ServerView};
use super::prom;
use crate::record::ServedBy;

/// Shortest `--metrics-interval`.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Timeout of the start-up scrapes (the probe of the endpoint's origin included).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest timeout of a scrape during the run (it is the interval, at least 1 s, at most this).
const MAX_SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// What to scrape.
#[derive(Debug, Clone)]
pub struct ScrapeConfig {
    /// `--server-metrics`: always scraped (a dead one is reported).
    pub urls: Vec<reqwest::Url>,
    /// The endpoint origin's `/metrics`: scraped when it answers a Prometheus page at start-up.
    pub origin: Option<reqwest::Url>,
    /// The endpoint's API key, sent (as `Authorization: Bearer`) to the origin only: the same
    /// server the requests go to, never the other URLs.
    pub origin_api_key: Option<String>,
    pub interval: Duration,
    /// `server_metrics.jsonl`.
    pub out: Option<PathBuf>,
    pub insecure: bool,
}

/// The `/metrics` URL of a `--server-metrics` value: a bare origin gets `/metrics`.
pub fn metrics_url(s: &str) -> crate::Result<reqwest::Url> {
    let mut u = reqwest::Url::parse(s.trim())
        .map_err(|e| crate::Error::config(format!("--server-metrics {s:?}: not a URL ({e})")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(crate::Error::config(format!(
            "--server-metrics {s:?}: use http:// or https://"
        )));
    }
    if u.path().is_empty() || u.path() == "/" {
        u.set_path("/metrics");
    }
    Ok(u)
}

/// One gauge reading of one instance, for the time series (the summary's means and peaks, and
/// the per-request join).
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub at: Instant,
    /// Tick of the shared schedule (0 = the start-up scrape).
    pub tick: u64,
    pub running: Option<f32>,
    pub waiting: Option<f32>,
    pub kv_usage: Option<f32>,
}

/// The time series of every instance, shared with the record writer for the per-request join.
#[derive(Debug, Default)]
pub struct Series {
    per_instance: Mutex<Vec<Vec<Point>>>,
    /// Host and port of each scraped URL, in instance order (set once start-up chose them).
    addresses: OnceLock<Vec<Address>>,
}

/// Host and port of a scraped URL.
type Address = (String, Option<u16>);

/// The server's state nearest to an instant: of one instance, or summed (waiting, running) and
/// averaged (KV usage) over the cluster.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateAt {
    pub waiting: Option<f64>,
    pub running: Option<f64>,
    pub kv_usage: Option<f64>,
    /// Sample time minus the instant, ms (the largest distance over the instances).
    pub dt_ms: f64,
    /// Instances with a sample.
    pub instances: usize,
    /// The one instance the state is of, when a request named it (see [`Series::state_at`]).
    pub instance: Option<usize>,
}

impl Series {
    fn push(&self, instance: usize, p: Point) {
        let mut g = self.per_instance.lock().unwrap_or_else(|e| e.into_inner());
        if g.len() <= instance {
            g.resize_with(instance + 1, Vec::new);
        }
        g[instance].push(p);
    }

    /// Every instance's points (for the summary).
    pub fn snapshot(&self) -> Vec<Vec<Point>> {
        self.per_instance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Remember the scraped URLs' addresses (instance order) for [`Series::instance_of`].
    pub fn set_addresses(&self, urls: &[reqwest::Url]) {
        let a = urls
            .iter()
            .map(|u| {
                (
                    u.host_str().unwrap_or("").to_string(),
                    u.port_or_known_default(),
                )
            })
            .collect();
        let _ = self.addresses.set(a);
    }

    /// The scraped instance a response named: the only one on its port, or among several on
    /// that port (or without a port) the only one whose host is the pod.
    pub fn instance_of(&self, s: &ServedBy) -> Option<usize> {
        let addrs = self.addresses.get()?;
        let only = |f: &dyn Fn(&Address) -> bool| {
            let mut hits = addrs.iter().enumerate().filter(|(_, a)| f(a));
            match (hits.next(), hits.next()) {
                (Some((i, _)), None) => Some(i),
                _ => None,
            }
        };
        let host_is_pod = |a: &Address| s.pod.as_deref() == Some(a.0.as_str());
        match s.port {
            Some(port) => only(&|a| a.1 == Some(port))
                .or_else(|| only(&|a| a.1 == Some(port) && host_is_pod(a))),
            None => only(&host_is_pod),
        }
    }

    /// The state at `at` of the instance that served a request, when `served_by` names a
    /// scraped one with samples; else the cluster's.
    pub fn state_at(&self, at: Instant, served_by: Option<&ServedBy>) -> Option<StateAt> {
        served_by
            .and_then(|s| self.instance_of(s))
            .and_then(|i| self.instance_at(at, i))
            .or_else(|| self.cluster_at(at))
    }

    /// Instance `i`'s state at its sample nearest to `at`.
    pub fn instance_at(&self, at: Instant, i: usize) -> Option<StateAt> {
        let g = self.per_instance.lock().unwrap_or_else(|e| e.into_inner());
        let p = nearest(g.get(i)?, at)?;
        let f = |v: Option<f32>| v.map(f64::from);
        Some(StateAt {
            waiting: f(p.waiting),
            running: f(p.running),
            kv_usage: f(p.kv_usage),
            dt_ms: signed_ms(at, p.at),
            instances: 1,
            instance: Some(i),
        })
    }

    /// The cluster's state at the samples nearest to `at` (one per instance that has any).
    pub fn cluster_at(&self, at: Instant) -> Option<StateAt> {
        let g = self.per_instance.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Option<StateAt> = None;
        let mut kv_n = 0usize;
        for points in g.iter() {
            let Some(p) = nearest(points, at) else {
                continue;
            };
            let dt = signed_ms(at, p.at);
            let o = out.get_or_insert(StateAt {
                waiting: None,
                running: None,
                kv_usage: None,
                dt_ms: dt,
                instances: 0,
                instance: None,
            });
            o.instances += 1;
            if dt.abs() > o.dt_ms.abs() {
                o.dt_ms = dt;
            }
            add_opt(&mut o.waiting, p.waiting);
            add_opt(&mut o.running, p.running);
            if let Some(k) = p.kv_usage {
                add_opt(&mut o.kv_usage, Some(k));
                kv_n += 1;
            }
        }
        if let Some(o) = out.as_mut() {
            if kv_n > 0 {
                o.kv_usage = o.kv_usage.map(|k| k / kv_n as f64);
            }
        }
        out
    }
}

/// A record's `server`: the state, KV usage to 6 digits and the distance to µs.
impl From<StateAt> for crate::record::ServerAtSend {
    fn from(st: StateAt) -> Self {
        crate::record::ServerAtSend {
            waiting: st.waiting,
            running: st.running,
            kv_usage: st.kv_usage.map(|k| (k * 1e6).round() / 1e6),
            dt_ms: (st.dt_ms * 1e3).round() / 1e3,
            instances: st.instances,
            instance: st.instance,
        }
    }
}

fn add_opt(acc: &mut Option<f64>, v: Option<f32>) {
    if let Some(v) = v {
        *acc = Some(acc.unwrap_or(0.0) + f64::from(v));
    }
}

/// `b - a` in ms.
fn signed_ms(a: Instant, b: Instant) -> f64 {
    if b >= a {
        b.duration_since(a).as_secs_f64() * 1e3
    } else {
        -(a.duration_since(b).as_secs_f64() * 1e3)
    }
}

/// The point nearest to `at` in a time-ordered list.
fn nearest(points: &[Point], at: Instant) -> Option<&Point> {
    let i = points.partition_point(|p| p.at < at);
    let after = points.get(i);
    let before = i.checked_sub(1).and_then(|j| points.get(j));
    match (before, after) {
        (Some(b), Some(a)) => {
            if at.duration_since(b.at) <= a.at.duration_since(at) {
                Some(b)
            } else {
                Some(a)
            }
        }
        (b, a) => b.or(a),
    }
}

/// What was scraped from one instance.
#[derive(Debug, Clone)]
pub struct InstanceResult {
    pub url: String,
    /// Successful scrapes.
    pub ok: u64,
    /// Scrapes that failed (timeout, connection error, HTTP error, unreadable page).
    pub failed: u64,
    /// First error seen.
    pub first_error: Option<String>,
    /// First and last successful scrape (the counter deltas of the run).
    pub first: Option<ServerView>,
    pub last: Option<ServerView>,
}

/// Everything the scraper saw.
#[derive(Debug, Clone)]
pub struct ScrapeResult {
    pub interval: Duration,
    pub instances: Vec<InstanceResult>,
    /// Per instance, time-ordered.
    pub series: Vec<Vec<Point>>,
    /// The run's clock start, when it was set.
    pub clock_start: Option<Instant>,
    /// `server_metrics.jsonl`, when written.
    pub path: Option<PathBuf>,
    /// Lines written to it.
    pub lines: u64,
}

/// One line of `server_metrics.jsonl`.
#[derive(Serialize)]
struct Line<'a> {
    /// Middle of the scrape, ms on the run's clock (negative: before the first send).
    t_ms: f64,
    instance: usize,
    url: &'a str,
    ok: bool,
    /// How long the scrape took, ms.
    scrape_ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    view: Option<&'a ServerView>,
}

/// One finished scrape, sent from an instance's task to the collector.
struct Scraped {
    instance: usize,
    sent: Instant,
    received: Instant,
    tick: u64,
    body: Result<String, String>,
}

/// A running scraper. Drop or [`Scraper::finish`] stops it.
pub struct Scraper {
    stop: CancellationToken,
    clock: Arc<OnceLock<Instant>>,
    series: Arc<Series>,
    urls: Vec<String>,
    thread: Option<std::thread::JoinHandle<Result<ScrapeResult, String>>>,
}

impl Drop for Scraper {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The scraper thread's answer after start-up: the URLs it scrapes (none: it stopped) and notes.
type Ready = Result<(Vec<String>, Vec<String>), String>;

/// What [`Scraper::start`] found at start-up.
pub struct Started {
    /// `None` when there is nothing to scrape.
    pub scraper: Option<Scraper>,
    /// Lines for the user (which URLs, why the origin was left out).
    pub notes: Vec<String>,
}

impl Scraper {
    /// Start scraping: one round of start-up scrapes (the baseline of every counter, and the
    /// probe of the endpoint's origin), then a task per instance every `interval`. Returns
    /// once the start-up round is done.
    pub fn start(cfg: ScrapeConfig) -> crate::Result<Started> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Ready>();
        let stop = CancellationToken::new();
        let clock: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
        let series = Arc::new(Series::default());
        let (stop2, clock2, series2) = (stop.clone(), clock.clone(), series.clone());
        let thread =
            llm_common::util::spawn_runtime_thread("metrics-scraper", move |rt| match rt {
                Ok(rt) => rt.block_on(run(cfg, stop2, clock2, series2, ready_tx)),
                Err(e) => {
                    let msg = format!("cannot start the scraper's runtime: {e}");
                    let _ = ready_tx.send(Err(msg.clone()));
                    Err(msg)
                }
            })
            .map_err(|e| crate::Error::io("cannot start the metrics scraper thread", e))?;
        match ready_rx.recv() {
            Ok(Ok((urls, notes))) => {
                let scraper = if urls.is_empty() {
                    let _ = thread.join();
                    None
                } else {
                    Some(Scraper {
                        stop,
                        clock,
                        series,
                        urls,
                        thread: Some(thread),
                    })
                };
                Ok(Started { scraper, notes })
            }
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(crate::Error::server(format!("server metrics: {e}")))
            }
            Err(_) => {
                let _ = thread.join();
                Err(crate::Error::internal(
                    "the metrics scraper stopped during start-up",
                ))
            }
        }
    }

    /// The URLs scraped, in instance order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The run's clock started at `at` (times in `server_metrics.jsonl` are relative to it).
    pub fn set_clock_start(&self, at: Instant) {
        let _ = self.clock.set(at);
    }

    /// The run's clock start, once set (for the per-request join).
    pub fn clock(&self) -> Arc<OnceLock<Instant>> {
        self.clock.clone()
    }

    /// The time series, for the per-request join.
    pub fn series(&self) -> Arc<Series> {
        self.series.clone()
    }

    /// One last round of scrapes (so the counters cover every finished request), then stop and
    /// hand over what was seen.
    pub fn finish(mut self) -> crate::Result<ScrapeResult> {
        self.stop.cancel();
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| crate::Error::internal("the metrics scraper thread panicked"))?
                .map_err(|e| crate::Error::server(format!("server metrics: {e}"))),
            None => Err(crate::Error::internal(
                "the metrics scraper was not running",
            )),
        }
    }
}

fn build_client(cfg: &ScrapeConfig, timeout: Duration) -> Result<reqwest::Client, String> {
    let https = cfg
        .urls
        .iter()
        .chain(cfg.origin.iter())
        .any(|u| u.scheme() == "https");
    // The whole scrape's timeout is applied around it (see `get`), with its own message.
    reqwest::Client::builder()
        .connect_timeout(timeout.min(STARTUP_TIMEOUT))
        .danger_accept_invalid_certs(cfg.insecure)
        .tls_built_in_root_certs(https)
        .pool_max_idle_per_host(1)
        .no_proxy()
        .build()
        .map_err(|e| format!("cannot build the metrics HTTP client: {e}"))
}

async fn get(
    client: &reqwest::Client,
    url: &reqwest::Url,
    key: Option<&str>,
    timeout: Duration,
) -> Result<String, String> {
    let fut = async {
        let mut req = client.get(url.clone()).header("accept", "text/plain");
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.map_err(|e| e.without_url().to_string())?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("HTTP {}", status.as_u16()));
        }
        resp.text().await.map_err(|e| e.without_url().to_string())
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
    }
}

/// Per-instance state kept by the collector.
struct Instance {
    url: reqwest::Url,
    key: Option<String>,
    shown: String,
    result: InstanceResult,
}

struct Collector {
    instances: Vec<Instance>,
    t0: Instant,
    interval: Duration,
    clock: Arc<OnceLock<Instant>>,
    series: Arc<Series>,
    out: Option<BufWriter<std::fs::File>>,
    out_error: Option<String>,
    /// Lines waiting for the clock to start (their times are not known yet).
    pending: Vec<(Instant, usize, f64, Result<ServerView, String>)>,
    lines: u64,
}

impl Collector {
    fn new(
        kept: &[(reqwest::Url, Option<String>)],
        t0: Instant,
        cfg: &ScrapeConfig,
        clock: Arc<OnceLock<Instant>>,
        series: Arc<Series>,
        out: Option<BufWriter<std::fs::File>>,
    ) -> Collector {
        series.set_addresses(&kept.iter().map(|(u, _)| u.clone()).collect::<Vec<_>>());
        let instances = kept
            .iter()
            .map(|(u, key)| {
                let shown = crate::backend::sanitize_url(u.as_str());
                Instance {
                    url: u.clone(),
                    key: key.clone(),
                    result: InstanceResult {
                        url: shown.clone(),
                        ok: 0,
                        failed: 0,
                        first_error: None,
                        first: None,
                        last: None,
                    },
                    shown,
                }
            })
            .collect();
        Collector {
            instances,
            t0,
            interval: cfg.interval,
            clock,
            series,
            out,
            out_error: None,
            pending: Vec::new(),
            lines: 0,
        }
    }

    /// Write what is left and hand over the samples.
    fn finish(mut self, cfg: &ScrapeConfig) -> Result<ScrapeResult, String> {
        self.flush_pending(true);
        if let Some(out) = self.out.as_mut() {
            if let Err(e) = out.flush() {
                self.out_error.get_or_insert(e.to_string());
            }
        }
        if let Some(e) = self.out_error {
            return Err(format!(
                "writing {}: {e}",
                cfg.out
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ));
        }
        Ok(ScrapeResult {
            interval: cfg.interval,
            series: self.series.snapshot(),
            clock_start: self.clock.get().copied(),
            instances: self.instances.into_iter().map(|i| i.result).collect(),
            path: cfg.out.clone(),
            lines: self.lines,
        })
    }

    fn tick_of(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.t0).as_secs_f64();
        (d / self.interval.as_secs_f64()).round() as u64
    }

    fn take(&mut self, s: Scraped) {
        let mid = s.sent + s.received.duration_since(s.sent) / 2;
        let scrape_ms = s.received.duration_since(s.sent).as_secs_f64() * 1e3;
        let view = s.body.and_then(|text| {
            let page = prom::parse(&text).map_err(|e| e.to_string())?;
            if page.families.is_empty() {
                return Err("empty /metrics page".to_string());
            }
            Ok(ServerView::of(&page))
        });
        let inst = &mut self.instances[s.instance].result;
        match &view {
            Ok(v) => {
                inst.ok += 1;
                if inst.first.is_none() {
                    inst.first = Some(v.clone());
                }
                inst.last = Some(v.clone());
                self.series.push(
                    s.instance,
                    Point {
                        at: mid,
                        tick: s.tick,
                        running: v.running.map(|x| x as f32),
                        waiting: v.waiting.map(|x| x as f32),
                        kv_usage: v.kv_usage.map(|x| x as f32),
                    },
                );
            }
            Err(e) => {
                inst.failed += 1;
                if inst.first_error.is_none() {
                    inst.first_error = Some(e.clone());
                }
            }
        }
        self.pending.push((mid, s.instance, scrape_ms, view));
        self.flush_pending(false);
    }

    /// Write the lines whose time is known (all of them at the end, relative to the scraper's
    /// start when the clock never started).
    fn flush_pending(&mut self, last: bool) {
        let start = match self.clock.get() {
            Some(s) => *s,
            None if last => self.t0,
            None => return,
        };
        let Some(out) = self.out.as_mut() else {
            self.pending.clear();
            return;
        };
        for (mid, instance, scrape_ms, view) in self.pending.drain(..) {
            let line = Line {
                t_ms: (signed_ms(start, mid) * 1e3).round() / 1e3,
                instance,
                url: &self.instances[instance].shown,
                ok: view.is_ok(),
                scrape_ms: (scrape_ms * 1e3).round() / 1e3,
                error: view.as_ref().err().map(String::as_str),
                view: view.as_ref().ok(),
            };
            let r = serde_json::to_writer(&mut *out, &line)
                .map_err(|e| e.to_string())
                .and_then(|()| out.write_all(b"\n").map_err(|e| e.to_string()));
            match r {
                Ok(()) => self.lines += 1,
                Err(e) => {
                    self.out_error.get_or_insert(e);
                }
            }
        }
    }
}

/// The scraper thread: a start-up round (the baseline of every counter, and the probe of the
/// endpoint's origin), a task per instance every interval until stopped, then a final round
/// (the counters' end values).
async fn run(
    cfg: ScrapeConfig,
    stop: CancellationToken,
    clock: Arc<OnceLock<Instant>>,
    series: Arc<Series>,
    ready: std::sync::mpsc::Sender<Ready>,
) -> Result<ScrapeResult, String> {
    let fail = |msg: String| {
        let _ = ready.send(Err(msg.clone()));
        msg
    };
    let timeout = cfg
        .interval
        .max(Duration::from_secs(1))
        .min(MAX_SCRAPE_TIMEOUT);
    let client = build_client(&cfg, timeout).map_err(fail)?;
    let t0 = Instant::now();
    let (kept, first, mut notes) = startup_round(&cfg, &client).await;
    if kept.is_empty() {
        let _ = ready.send(Ok((Vec::new(), notes)));
        return Err("nothing to scrape".into());
    }
    let out = open_out(&cfg).map_err(fail)?;
    let mut col = Collector::new(&kept, t0, &cfg, clock, series, out);
    for s in first {
        col.take(s);
    }
    for (i, inst) in col.instances.iter().enumerate() {
        if let Some(e) = &inst.result.first_error {
            notes.push(format!(
                "server metrics: instance {i} ({}) did not answer at start-up ({e}); it is still scraped and its failures are counted",
                inst.shown
            ));
        }
    }
    let shown: Vec<String> = col.instances.iter().map(|i| i.shown.clone()).collect();
    notes.push(format!(
        "server metrics: scraping {} every {} ms: {}",
        if shown.len() == 1 {
            "1 endpoint".to_string()
        } else {
            format!("{} endpoints", shown.len())
        },
        cfg.interval.as_millis(),
        shown.join(", ")
    ));
    let _ = ready.send(Ok((shown, notes)));
    scrape_until_stopped(&mut col, &client, &stop, timeout).await;
    final_round(&mut col, &client).await;
    col.finish(&cfg)
}

/// A URL to scrape and the key sent with it.
type Target = (reqwest::Url, Option<String>);

/// One start-up scrape of each target, at once.
async fn probe(client: &reqwest::Client, targets: &[Target]) -> Vec<Scraped> {
    let round = futures_util::future::join_all(targets.iter().map(|(u, key)| {
        let client = client.clone();
        async move {
            let sent = Instant::now();
            let body = get(&client, u, key.as_deref(), STARTUP_TIMEOUT).await;
            (sent, Instant::now(), body)
        }
    }))
    .await;
    round
        .into_iter()
        .enumerate()
        .map(|(instance, (sent, received, body))| Scraped {
            instance,
            sent,
            received,
            tick: 0,
            body,
        })
        .collect()
}

/// The start-up round over every URL: the instances kept, their first scrapes, and notes for
/// the user. The origin is kept only when it answers with a page of engine metrics; a page of
/// llm-sim's built-in router (the origin or a listed URL) is replaced by its instances' own
/// pages, found through it.
async fn startup_round(
    cfg: &ScrapeConfig,
    client: &reqwest::Client,
) -> (Vec<Target>, Vec<Scraped>, Vec<String>) {
    let mut urls: Vec<(reqwest::Url, Option<String>)> =
        cfg.urls.iter().map(|u| (u.clone(), None)).collect();
    let mut origin_at = None;
    if let Some(o) = &cfg.origin {
        if !urls.iter().any(|(u, _)| u == o) {
            origin_at = Some(urls.len());
            urls.push((o.clone(), cfg.origin_api_key.clone()));
        }
    }
    let round = probe(client, &urls).await;
    let (mut kept, mut first, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    let mut discovered: Vec<Target> = Vec::new();
    for (i, ((u, key), mut s)) in urls.iter().zip(round).enumerate() {
        let shown = crate::backend::sanitize_url(u.as_str());
        let page = s
            .body
            .as_ref()
            .ok()
            .and_then(|t| prom::parse(t).ok())
            .filter(|p| !p.families.is_empty());
        let is_origin = Some(i) == origin_at;
        match page.as_ref().map(PageKind::of) {
            None if is_origin => {
                let why = match &s.body {
                    Err(e) => e.clone(),
                    Ok(_) => "not a Prometheus page".to_string(),
                };
                notes.push(format!(
                    "server metrics: the endpoint's {shown} did not answer ({why}); not scraped (give --server-metrics URL,... to scrape other URLs)"
                ));
                continue;
            }
            Some(PageKind::LlmSimRouter { urls: found, policy }) => {
                let skipped = router_instances(&found, &urls, &mut discovered);
                notes.push(format!(
                    "server metrics: {shown} is llm-sim's built-in router ({policy}), whose page holds no engine metrics; scraping its {} instance(s)' own pages instead{}",
                    found.len(),
                    if skipped.is_empty() {
                        String::new()
                    } else {
                        format!(" (not URLs, skipped: {})", skipped.join(", "))
                    }
                ));
                continue;
            }
            Some(PageKind::NoEngine) if is_origin => {
                notes.push(format!(
                    "server metrics: the endpoint's {shown} holds no engine metrics (none of vLLM's, SGLang's, llama.cpp's or TGI's names: a router or gateway?); not scraped. List the engines' own pages with --server-metrics URL,URL,..."
                ));
                continue;
            }
            Some(PageKind::NoEngine) => notes.push(format!(
                "server metrics: {shown} holds no engine metrics (none of vLLM's, SGLang's, llama.cpp's or TGI's names: a router or gateway?); its server figures will be n/a. List the engines' own pages with --server-metrics URL,URL,..."
            )),
            _ => {}
        }
        s.instance = kept.len();
        first.push(s);
        kept.push((u.clone(), key.clone()));
    }
    // The routers' instances: their first scrapes, the baseline of their counters.
    for mut s in probe(client, &discovered).await {
        let target = discovered[s.instance].clone();
        s.instance = kept.len();
        first.push(s);
        kept.push(target);
    }
    (kept, first, notes)
}

/// The `/metrics` URLs of a router's instances (`found`: their base URLs) not already
/// scraped, added to `discovered`; returns the listed values that are not URLs.
fn router_instances(
    found: &[String],
    scraped: &[Target],
    discovered: &mut Vec<Target>,
) -> Vec<String> {
    let mut skipped = Vec::new();
    for base in found {
        let Ok(u) = metrics_url(base) else {
            skipped.push(base.clone());
            continue;
        };
        if !scraped
            .iter()
            .chain(discovered.iter())
            .any(|(s, _)| *s == u)
        {
            // llm-sim's metrics pages need no key.
            discovered.push((u, None));
        }
    }
    skipped
}

/// `server_metrics.jsonl`, created with its directory.
fn open_out(cfg: &ScrapeConfig) -> Result<Option<BufWriter<std::fs::File>>, String> {
    let Some(p) = &cfg.out else {
        return Ok(None);
    };
    if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let f = std::fs::File::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    Ok(Some(BufWriter::new(f)))
}

/// A task per instance on this thread's runtime, each scraping every interval (missed ticks
/// skipped) until `stop`; the collector takes what they send.
async fn scrape_until_stopped(
    col: &mut Collector,
    client: &reqwest::Client,
    stop: &CancellationToken,
    timeout: Duration,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Scraped>();
    let mut tasks = Vec::new();
    for (instance, inst) in col.instances.iter().enumerate() {
        let (client, url, key) = (client.clone(), inst.url.clone(), inst.key.clone());
        let (tx, stop) = (tx.clone(), stop.clone());
        let (interval, t0) = (col.interval, col.t0);
        tasks.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at((t0 + interval).into(), interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => break,
                    _ = ticks.tick() => {}
                }
                let sent = Instant::now();
                let tick =
                    (sent.duration_since(t0).as_secs_f64() / interval.as_secs_f64()).round() as u64;
                let body = tokio::select! {
                    biased;
                    _ = stop.cancelled() => break,
                    b = get(&client, &url, key.as_deref(), timeout) => b,
                };
                let s = Scraped {
                    instance,
                    sent,
                    received: Instant::now(),
                    tick,
                    body,
                };
                if tx.send(s).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    loop {
        tokio::select! {
            biased;
            s = rx.recv() => match s {
                Some(s) => col.take(s),
                None => break,
            },
            _ = stop.cancelled() => break,
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    while let Ok(s) = rx.try_recv() {
        col.take(s);
    }
}

/// The final round, after the last request: the counters' end values.
async fn final_round(col: &mut Collector, client: &reqwest::Client) {
    let last_round = futures_util::future::join_all(col.instances.iter().map(|inst| {
        let client = client.clone();
        let (url, key) = (inst.url.clone(), inst.key.clone());
        async move {
            let sent = Instant::now();
            let body = get(&client, &url, key.as_deref(), STARTUP_TIMEOUT).await;
            (sent, Instant::now(), body)
        }
    }))
    .await;
    for (instance, (sent, received, body)) in last_round.into_iter().enumerate() {
        let tick = col.tick_of(sent).max(1);
        col.take(Scraped {
            instance,
            sent,
            received,
            tick,
            body,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served(pod: Option<&str>, port: Option<u16>) -> ServedBy {
        ServedBy {
            pod: pod.map(str::to_string),
            port,
        }
    }

    #[test]
    fn a_response_names_its_instance_by_port_then_by_host() {
        let s = Series::default();
        assert_eq!(
            s.instance_of(&served(None, Some(8001))),
            None,
            "no URLs yet"
        );
        let urls: Vec<reqwest::Url> = [
            "http://127.0.0.1:8000/metrics",
            "http://127.0.0.1:8001/metrics",
            "http://10.0.0.7:9000/metrics",
            "http://10.0.0.8:9000/metrics",
        ]
        .iter()
        .map(|u| u.parse().unwrap())
        .collect();
        s.set_addresses(&urls);
        assert_eq!(
            s.instance_of(&served(Some("llm-sim-1"), Some(8001))),
            Some(1)
        );
        // Two instances on port 9000: the pod must be the host.
        assert_eq!(s.instance_of(&served(None, Some(9000))), None);
        assert_eq!(
            s.instance_of(&served(Some("10.0.0.8"), Some(9000))),
            Some(3)
        );
        assert_eq!(s.instance_of(&served(Some("10.0.0.7"), None)), Some(2));
        assert_eq!(s.instance_of(&served(Some("llm-sim-0"), None)), None);
        assert_eq!(s.instance_of(&served(None, Some(7777))), None);
    }

    #[test]
    fn the_state_is_the_named_instances_else_the_clusters() {
        let s = Series::default();
        s.set_addresses(&[
            "http://127.0.0.1:8000/".parse().unwrap(),
            "http://127.0.0.1:8001/".parse().unwrap(),
        ]);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        for (i, waiting) in [(0, 3.0), (1, 5.0)] {
            for ms in [0, 100] {
                s.push(
                    i,
                    Point {
                        at: at(ms),
                        tick: ms / 100,
                        running: Some(1.0),
                        waiting: Some(waiting + ms as f32),
                        kv_usage: Some(0.5),
                    },
                );
            }
        }
        let st = s.state_at(at(90), Some(&served(None, Some(8001)))).unwrap();
        assert_eq!((st.instance, st.instances), (Some(1), 1));
        assert_eq!(st.waiting, Some(105.0));
        assert!((st.dt_ms - 10.0).abs() < 1e-6, "{st:?}");
        let cluster = s.state_at(at(10), Some(&served(None, Some(7777)))).unwrap();
        assert_eq!((cluster.instance, cluster.instances), (None, 2));
        assert_eq!(cluster.waiting, Some(8.0));
        assert_eq!(s.state_at(at(10), None), Some(cluster));
    }
}
