//! The scraper: polls the `/metrics` page of every instance during a replay, on its own thread
//! with its own single-threaded runtime and HTTP client, so it never shares a connection, a
//! worker thread or a lock with the sending path.
//!
//! Every instance has its own polling task: a slow or dead endpoint makes only its own scrapes
//! time out (counted as failures), and a scrape that takes longer than the interval skips that
//! instance's missed ticks instead of queueing them. Each sample is written to
//! `server_metrics.jsonl` (times on the run's clock) and kept, in engine-neutral form, for the
//! summary and for the per-request join.
//!
//! This file holds the thread, its start-up round and the polling tasks; what they scrape goes
//! to the [`Collector`] of [`super::collect`], the gauges' time series to [`super::series`].

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::collect::{open_out, Collector, RouterCounts, ScrapeResult, Scraped};
use super::discover;
use super::kv::{KvListener, KvSource};
use super::names::PageKind;
use super::placement::Placement;
use super::prom;
use super::series::Series;

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

/// A running scraper. Drop or [`Scraper::finish`] stops it.
pub struct Scraper {
    stop: CancellationToken,
    clock: Arc<OnceLock<Instant>>,
    series: Arc<Series>,
    urls: Vec<String>,
    thread: Option<std::thread::JoinHandle<Result<ScrapeResult, String>>>,
    /// `--kv-events`: where each request was placed, and the listener that feeds it.
    kv: Option<(Arc<Placement>, KvListener)>,
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
                        kv: None,
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

    /// `--kv-events`: listen to the instances' KV cache events, to place each request on the
    /// instance that served it ([`Placement`]). Named sources go to the scraped instance of
    /// that URL, bare ones to the scraped instances in order. Returns the start-up note.
    pub fn listen_kv_events(
        &mut self,
        sources: &[KvSource],
        horizon: Duration,
    ) -> crate::Result<String> {
        let bases: Vec<String> = self
            .urls
            .iter()
            .map(|u| u.strip_suffix("/metrics").unwrap_or(u).to_string())
            .collect();
        let mut endpoints = vec![String::new(); bases.len()];
        for (k, src) in sources.iter().enumerate() {
            let i = match &src.instance {
                Some(u) => bases.iter().position(|b| b == u).ok_or_else(|| {
                    crate::Error::config(format!(
                        "--kv-events {u}=...: {u} is not a scraped instance (scraped: {})",
                        bases.join(", ")
                    ))
                })?,
                None if k < bases.len() => k,
                None => {
                    return Err(crate::Error::config(format!(
                        "--kv-events: {} endpoints for {} scraped instance(s) ({})",
                        sources.len(),
                        bases.len(),
                        bases.join(", ")
                    )))
                }
            };
            endpoints[i] = src.endpoint.clone();
        }
        let placement = Arc::new(Placement::new(bases.clone(), endpoints.clone(), horizon));
        let listener = KvListener::start(placement.clone(), endpoints.clone())?;
        let pairs: Vec<String> = bases
            .iter()
            .zip(&endpoints)
            .filter(|(_, e)| !e.is_empty())
            .map(|(b, e)| format!("{b} <- {e}"))
            .collect();
        self.kv = Some((placement, listener));
        Ok(format!(
            "KV events: placing each request on the instance that stores its prompt: {}",
            pairs.join(", ")
        ))
    }

    /// `--kv-events`: the placement the record writer asks.
    pub fn placement(&self) -> Option<Arc<Placement>> {
        self.kv.as_ref().map(|(p, _)| p.clone())
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
        let mut r = match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| crate::Error::internal("the metrics scraper thread panicked"))?
                .map_err(|e| crate::Error::server(format!("server metrics: {e}")))?,
            None => {
                return Err(crate::Error::internal(
                    "the metrics scraper was not running",
                ))
            }
        };
        if let Some((placement, listener)) = self.kv.take() {
            drop(listener);
            r.placement = Some(placement);
        }
        Ok(r)
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
    let (kept, first, mut notes, mut membership) = startup_round(&cfg, &client).await;
    // The router's own page: listed (smg's page names its workers), or smg's default port on
    // the router's host when smg's list found the instances.
    // (A listed URL start-up did not keep is a router's page or dead; `first` tells.)
    let mut router_page = cfg.urls.iter().find(|u| !kept.iter().any(|(k, _)| k == *u));
    let probed = match (&membership, router_page) {
        (Some(m), None) if m.listing.router == "smg" => {
            let mut u = m.list.clone();
            let _ = u.set_port(Some(SMG_METRICS_PORT));
            u.set_path("/metrics");
            Some(u)
        }
        _ => None,
    };
    let router_url = router_page.take().cloned().or(probed);
    let router = match &router_url {
        Some(u) => RouterPage::first(&client, u).await,
        None => None,
    };
    if let Some(r) = &router {
        notes.push(format!(
            "server metrics: the router's own page {} is read at the start and the end (its count of requests per instance)",
            crate::backend::sanitize_url(r.url.as_str())
        ));
    }
    if kept.is_empty() {
        let _ = ready.send(Ok((Vec::new(), notes)));
        return Err("nothing to scrape".into());
    }
    let out = open_out(cfg.out.as_deref()).map_err(fail)?;
    let mut col = Collector::new(&kept, t0, cfg.interval, cfg.out.clone(), clock, series, out);
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
    scrape_until_stopped(&mut col, &client, &stop, timeout, membership.as_mut()).await;
    final_round(&mut col, &client).await;
    let mut result = col.finish()?;
    if let Some(r) = router {
        result.router = Some(r.last(&client).await);
    }
    Ok(result)
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
/// the user. The origin is kept only when it answers with a page of engine metrics; an origin
/// without one that lists its instances (smg's `/workers`, [`discover`]) is replaced by them;
/// a router's page that names its instances (the origin or a listed URL) is replaced by their
/// own pages.
async fn startup_round(
    cfg: &ScrapeConfig,
    client: &reqwest::Client,
) -> (Vec<Target>, Vec<Scraped>, Vec<String>, Option<Membership>) {
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
    let mut membership = None;
    for (i, ((u, key), mut s)) in urls.iter().zip(round).enumerate() {
        let shown = crate::backend::sanitize_url(u.as_str());
        let page = s
            .body
            .as_ref()
            .ok()
            .and_then(|t| prom::parse(t).ok())
            .filter(|p| !p.families.is_empty());
        let is_origin = Some(i) == origin_at;
        let router_page = match page.as_ref().map(PageKind::of) {
            None | Some(PageKind::NoEngine) => true,
            Some(_) => false,
        };
        if is_origin && router_page {
            // A router in front: its instances, from its own list of them.
            if let Some(m) = Membership::find(client, u, key.as_deref()).await {
                notes.push(m.adopt(&urls, &mut discovered));
                membership = Some(m);
                continue;
            }
        }
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
            Some(PageKind::Router {
                router,
                urls: found,
                policy,
            }) => {
                let skipped = router_instances(&found, &urls, &mut discovered);
                notes.push(format!(
                    "server metrics: {shown} is {router}{}, whose page holds no engine metrics; scraping its {} instance(s)' own pages instead{}",
                    policy.map(|p| format!(" ({p})")).unwrap_or_default(),
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
    (kept, first, notes, membership)
}

/// smg's default `--prometheus-port`, tried on the router's host when its `/workers` found the
/// instances.
const SMG_METRICS_PORT: u16 = 29000;

/// A router's own metrics page, read at the start and the end of the run: its count of the
/// requests it sent each worker (smg's `smg_worker_cb_outcomes_total`).
struct RouterPage {
    url: reqwest::Url,
    first: std::collections::BTreeMap<String, (f64, f64)>,
}

impl RouterPage {
    async fn read(
        client: &reqwest::Client,
        url: &reqwest::Url,
    ) -> Result<std::collections::BTreeMap<String, (f64, f64)>, String> {
        let text = get(client, url, None, STARTUP_TIMEOUT).await?;
        let page = prom::parse(&text).map_err(|e| e.to_string())?;
        Ok(super::names::router_outcomes(&page))
    }

    /// The page at start-up, when it is a router's page with per-worker counts.
    async fn first(client: &reqwest::Client, url: &reqwest::Url) -> Option<RouterPage> {
        let text = get(client, url, None, STARTUP_TIMEOUT).await.ok()?;
        let page = prom::parse(&text).ok()?;
        if !matches!(PageKind::of(&page), PageKind::Router { .. }) {
            return None;
        }
        Some(RouterPage {
            url: url.clone(),
            first: super::names::router_outcomes(&page),
        })
    }

    /// The counts since [`RouterPage::first`] (a counter that went down counts from zero).
    async fn last(self, client: &reqwest::Client) -> RouterCounts {
        let url = crate::backend::sanitize_url(self.url.as_str());
        match Self::read(client, &self.url).await {
            Ok(now) => RouterCounts {
                url,
                workers: now
                    .into_iter()
                    .map(|(w, (ok, failed))| {
                        let (ok0, failed0) = self.first.get(&w).copied().unwrap_or_default();
                        let d = |a: f64, b: f64| if a >= b { a - b } else { a };
                        (w, d(ok, ok0), d(failed, failed0))
                    })
                    .collect(),
                error: None,
            },
            Err(e) => RouterCounts {
                url,
                workers: Vec::new(),
                error: Some(e),
            },
        }
    }
}

/// The list of instances of the router in front (see [`super::discover`]), read again during
/// the run.
struct Membership {
    listing: &'static discover::Listing,
    /// The list's URL, and the endpoint's key sent with it.
    list: reqwest::Url,
    key: Option<String>,
    /// The instances' base URLs at the last read.
    known: Vec<reqwest::Url>,
}

impl Membership {
    /// The first of the known routers' lists that the endpoint's origin answers.
    async fn find(
        client: &reqwest::Client,
        origin_metrics: &reqwest::Url,
        key: Option<&str>,
    ) -> Option<Membership> {
        for listing in discover::LISTINGS {
            let mut list = origin_metrics.clone();
            list.set_path(listing.path);
            list.set_query(None);
            let Ok(body) = get(client, &list, key, STARTUP_TIMEOUT).await else {
                continue;
            };
            if let Some(known) = discover::worker_urls(&body, listing.url_keys) {
                return Some(Membership {
                    listing,
                    list,
                    key: key.map(str::to_string),
                    known,
                });
            }
        }
        None
    }

    fn shown(&self) -> String {
        crate::backend::sanitize_url(self.list.as_str())
    }

    /// The listed instances' `/metrics` pages not already among `scraped`, added to
    /// `discovered`; returns the start-up note.
    fn adopt(&self, scraped: &[Target], discovered: &mut Vec<Target>) -> String {
        for base in &self.known {
            let u = discover::metrics_of(base);
            if !scraped
                .iter()
                .chain(discovered.iter())
                .any(|(s, _)| *s == u)
            {
                discovered.push((u, None));
            }
        }
        let found: Vec<String> = self.known.iter().map(ToString::to_string).collect();
        format!(
            "server metrics: the endpoint is a router ({}, {} lists {} instance(s)): scraping each instance's own /metrics: {}",
            self.listing.router,
            self.shown(),
            self.known.len(),
            found.join(", ")
        )
    }

    /// Read the list again: the instances that appeared and disappeared since the last read
    /// (nothing when the router did not answer: a router down is not its instances gone).
    async fn relist(
        &mut self,
        client: &reqwest::Client,
        timeout: Duration,
    ) -> (Vec<reqwest::Url>, Vec<reqwest::Url>) {
        let Ok(body) = get(client, &self.list, self.key.as_deref(), timeout).await else {
            return (Vec::new(), Vec::new());
        };
        let now = discover::worker_urls(&body, self.listing.url_keys).unwrap_or_default();
        let (appeared, gone) = discover::changes(&self.known, &now);
        self.known = now;
        (appeared, gone)
    }
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

/// A task per instance on this thread's runtime, each scraping every interval (missed ticks
/// skipped) until `stop`; the collector takes what they send. With a router in front
/// (`membership`), its list is read again every [`discover::RELIST_EVERY`]: an instance that
/// appears is said and scraped from then on, one that disappears is said (and still scraped:
/// its failures show when it went).
async fn scrape_until_stopped(
    col: &mut Collector,
    client: &reqwest::Client,
    stop: &CancellationToken,
    timeout: Duration,
    mut membership: Option<&mut Membership>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Scraped>();
    let spawn = |instance: usize, url: reqwest::Url, key: Option<String>, col: &Collector| {
        let (client, tx, stop) = (client.clone(), tx.clone(), stop.clone());
        let (interval, t0) = (col.interval, col.t0);
        tokio::spawn(async move {
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
        })
    };
    let mut tasks = Vec::new();
    for (instance, inst) in col.instances.iter().enumerate() {
        tasks.push(spawn(instance, inst.url.clone(), inst.key.clone(), col));
    }
    let mut relist = tokio::time::interval_at(
        (Instant::now() + discover::RELIST_EVERY).into(),
        discover::RELIST_EVERY,
    );
    relist.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            biased;
            s = rx.recv() => match s {
                Some(s) => col.take(s),
                None => break,
            },
            _ = stop.cancelled() => break,
            _ = relist.tick(), if membership.is_some() => {
                let Some(m) = membership.as_deref_mut() else { continue };
                let (appeared, gone) = m.relist(client, timeout).await;
                for base in gone {
                    col.membership_change(&base, false, m.listing.router);
                }
                for base in appeared {
                    let url = discover::metrics_of(&base);
                    if let Some(i) = col.membership_change(&base, true, m.listing.router) {
                        tasks.push(spawn(i, url, None, col));
                    }
                }
            }
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
