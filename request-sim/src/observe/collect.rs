//! The collector of the scraper thread: it takes every finished scrape, parses its page,
//! keeps the counters' first and last views and the gauges' time series, and writes
//! `server_metrics.jsonl` on the run's clock; at the end it hands over the [`ScrapeResult`].

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::names::ServerView;
use super::prom;
use super::series::{signed_ms, Point, Series};

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
    /// When it stopped answering after it had answered, and when it answered again (`None`:
    /// it never did before the run ended), with the first error of the outage.
    pub outages: Vec<Outage>,
}

/// A time an instance did not answer its scrapes.
#[derive(Debug, Clone)]
pub struct Outage {
    /// The first failed scrape.
    pub from: Instant,
    /// The first successful scrape after it.
    pub to: Option<Instant>,
    pub error: String,
}

/// An instance the router in front listed or stopped listing during the run.
#[derive(Debug, Clone)]
pub struct MembershipEvent {
    pub at: Instant,
    /// The instance's base URL, as the router lists it.
    pub url: String,
    pub appeared: bool,
}

/// What the router's own page counted during the run, per worker: (URL, succeeded, failed).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouterCounts {
    pub url: String,
    pub workers: Vec<(String, f64, f64)>,
    /// The end's read failed (the counts are then empty).
    pub error: Option<String>,
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
    /// The router's list of instances changing during the run.
    pub membership: Vec<MembershipEvent>,
    /// `--kv-events`: the placement (its counts are read once the record writer is done).
    pub placement: Option<std::sync::Arc<super::placement::Placement>>,
    /// The router's own page's per-worker counts over the run, when it was found.
    pub router: Option<RouterCounts>,
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
pub(super) struct Scraped {
    pub(super) instance: usize,
    pub(super) sent: Instant,
    pub(super) received: Instant,
    pub(super) tick: u64,
    pub(super) body: Result<String, String>,
}

/// Per-instance state kept by the collector.
pub(super) struct Instance {
    pub(super) url: reqwest::Url,
    pub(super) key: Option<String>,
    /// The URL without credentials, for messages and `server_metrics.jsonl`.
    pub(super) shown: String,
    pub(super) result: InstanceResult,
}

impl Instance {
    fn new(url: reqwest::Url, key: Option<String>) -> Instance {
        let shown = crate::backend::sanitize_url(url.as_str());
        Instance {
            url,
            key,
            result: InstanceResult {
                url: shown.clone(),
                ok: 0,
                failed: 0,
                first_error: None,
                first: None,
                last: None,
                outages: Vec::new(),
            },
            shown,
        }
    }
}

/// Takes the scrapes of every instance (see the module doc).
pub(super) struct Collector {
    pub(super) instances: Vec<Instance>,
    /// When the scraper started: tick 0 of the shared schedule.
    pub(super) t0: Instant,
    pub(super) interval: Duration,
    /// `server_metrics.jsonl`, when written.
    path: Option<PathBuf>,
    clock: Arc<OnceLock<Instant>>,
    series: Arc<Series>,
    out: Option<BufWriter<std::fs::File>>,
    out_error: Option<String>,
    /// Lines waiting for the clock to start (their times are not known yet).
    pending: Vec<(Instant, usize, f64, Result<ServerView, String>)>,
    lines: u64,
    membership: Vec<MembershipEvent>,
}

impl Collector {
    pub(super) fn new(
        kept: &[(reqwest::Url, Option<String>)],
        t0: Instant,
        interval: Duration,
        path: Option<PathBuf>,
        clock: Arc<OnceLock<Instant>>,
        series: Arc<Series>,
        out: Option<BufWriter<std::fs::File>>,
    ) -> Collector {
        series.set_addresses(&kept.iter().map(|(u, _)| u.clone()).collect::<Vec<_>>());
        let instances = kept
            .iter()
            .map(|(u, key)| Instance::new(u.clone(), key.clone()))
            .collect();
        Collector {
            instances,
            t0,
            interval,
            path,
            clock,
            series,
            out,
            out_error: None,
            pending: Vec::new(),
            lines: 0,
            membership: Vec::new(),
        }
    }

    /// Seconds from the run's start (from the scraper's before the run starts), for messages.
    fn at_s(&self, at: Instant) -> f64 {
        signed_ms(self.clock.get().copied().unwrap_or(self.t0), at) / 1e3
    }

    /// The router listed (`appeared`) or stopped listing the instance at `base`: said on
    /// stderr and kept for the summary. A new instance is added and its index returned (the
    /// caller scrapes it from then on); one already scraped is not added again.
    pub(super) fn membership_change(
        &mut self,
        base: &reqwest::Url,
        appeared: bool,
        router: &str,
    ) -> Option<usize> {
        let now = Instant::now();
        let metrics = super::discover::metrics_of(base);
        let shown = crate::backend::sanitize_url(base.as_str());
        let known = self.instances.iter().position(|i| i.url == metrics);
        eprintln!(
            "request-sim: server metrics: at {:.1} s the router ({router}) {} instance {shown}{}",
            self.at_s(now),
            if appeared {
                "lists a new"
            } else {
                "no longer lists"
            },
            match known {
                Some(i) => format!(" (instance {i})"),
                None => String::new(),
            }
        );
        self.membership.push(MembershipEvent {
            at: now,
            url: shown,
            appeared,
        });
        if !appeared || known.is_some() {
            return None;
        }
        let i = self.instances.len();
        self.series.add_address(&metrics);
        self.instances.push(Instance::new(metrics, None));
        Some(i)
    }

    /// Write what is left and hand over the samples.
    pub(super) fn finish(mut self) -> Result<ScrapeResult, String> {
        self.flush_pending(true);
        if let Some(out) = self.out.as_mut() {
            if let Err(e) = out.flush() {
                self.out_error.get_or_insert(e.to_string());
            }
        }
        if let Some(e) = self.out_error {
            return Err(format!(
                "writing {}: {e}",
                self.path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ));
        }
        Ok(ScrapeResult {
            interval: self.interval,
            series: self.series.snapshot(),
            clock_start: self.clock.get().copied(),
            instances: self.instances.into_iter().map(|i| i.result).collect(),
            path: self.path,
            lines: self.lines,
            membership: self.membership,
            placement: None,
            router: None,
        })
    }

    pub(super) fn tick_of(&self, at: Instant) -> u64 {
        let d = at.saturating_duration_since(self.t0).as_secs_f64();
        (d / self.interval.as_secs_f64()).round() as u64
    }

    pub(super) fn take(&mut self, s: Scraped) {
        let mid = s.sent + s.received.duration_since(s.sent) / 2;
        let scrape_ms = s.received.duration_since(s.sent).as_secs_f64() * 1e3;
        let view = s.body.and_then(|text| {
            let page = prom::parse(&text).map_err(|e| e.to_string())?;
            if page.families.is_empty() {
                return Err("empty /metrics page".to_string());
            }
            Ok(ServerView::of(&page))
        });
        let at_s = self.at_s(mid);
        let instance = &mut self.instances[s.instance];
        let inst = &mut instance.result;
        // An outage starts at a failure after a success and ends at the next success; each
        // edge is said as it happens.
        match (&view, inst.outages.last_mut()) {
            (Ok(_), Some(o)) if o.to.is_none() => {
                o.to = Some(mid);
                eprintln!(
                    "request-sim: server metrics: instance {} ({}) answers again at {at_s:.1} s (no answer for {:.1} s)",
                    s.instance,
                    instance.shown,
                    mid.saturating_duration_since(o.from).as_secs_f64()
                );
            }
            (Err(e), last) if inst.ok > 0 && last.as_ref().is_none_or(|o| o.to.is_some()) => {
                eprintln!(
                    "request-sim: server metrics: instance {} ({}) stopped answering at {at_s:.1} s: {e}",
                    s.instance, instance.shown
                );
                inst.outages.push(Outage {
                    from: mid,
                    to: None,
                    error: e.clone(),
                });
            }
            _ => {}
        }
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

/// `server_metrics.jsonl`, created with its directory.
pub(super) fn open_out(path: Option<&Path>) -> Result<Option<BufWriter<std::fs::File>>, String> {
    let Some(p) = path else {
        return Ok(None);
    };
    if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let f = std::fs::File::create(p).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    Ok(Some(BufWriter::new(f)))
}
