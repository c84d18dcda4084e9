//! `request-sim sweep`: the same trace slice replayed at a list of scale factors, or at the
//! points a capacity search picks ([`search`]), one result directory per point, a combined
//! table, `sweep.json` and `report.html`, and the answer in one line: the highest load the
//! server carried (within the goodput SLOs when given). See `docs/server-metrics.md`
//! ("Capacity sweep").

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod search;
mod table;

pub use search::{round3, Search, SearchInfo};
pub use table::render_table;
use table::write_html;

use crate::cli::{ReplayArgs, SweepArgs};
use crate::config::ReplayConfig;
use crate::stats::Summary;
use crate::{Error, Result};

/// Time limit of a point when `--time-in-secs` is not given.
pub const DEFAULT_POINT_SECS: f64 = 300.0;
/// Request limit of a point when `--max-requests` is not given.
pub const DEFAULT_POINT_REQUESTS: usize = 2000;
/// Throughput below this fraction of the offered rate: the server no longer keeps up.
const KEEPS_UP: f64 = 0.9;

/// One point of a sweep.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepPoint {
    pub scale_factor: f64,
    /// A `--users` sweep (agent corpora): the point's concurrent users.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<usize>,
    pub seed: u64,
    /// Result directory of the point.
    pub dir: String,
    /// Requests per second the schedule offered (scheduled requests over the replayed span).
    pub offered_rps: f64,
    pub scheduled: usize,
    pub completed: usize,
    pub failed: usize,
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub request_goodput: Option<f64>,
    /// Requests meeting every SLO / requests that could be judged (only with `--goodput`):
    /// requests the time limit cut before they met or broke an SLO are not counted either way.
    pub good_fraction: Option<f64>,
    /// Latency percentiles; `None` when unknown (no values: TPOT of non-streaming answers).
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub drift_p99_ms: f64,
    /// Prefix-cache hit ratio from the server's counters, when scraped.
    pub server_hit_ratio: Option<f64>,
    /// Whether `POST /reset_prefix_cache` succeeded before the point.
    pub cache_reset: bool,
    /// Why the point's measurements are suspect (see the summary's `invalid`).
    pub invalid: Vec<String>,
    pub exit_code: i32,
    /// Ctrl-C cut the point short: kept in `sweep.json`, marked in the table, but neither
    /// judged nor plotted (its numbers cover part of the point).
    pub interrupted: bool,
    /// `--repeat N`: the point is a repeat set (`scale-F/repeats.json`, each repeat in
    /// `scale-F/repeat-K/`); its rates, latencies and good fraction are the means over the
    /// repeats, its counts the sums, its drift the largest. 0: one run.
    #[serde(skip_serializing_if = "is_zero")]
    pub repeats: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The whole sweep (`sweep.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepResult {
    pub points: Vec<SweepPoint>,
    /// `--goodput` in words, when given.
    pub slo: Option<String>,
    pub target: f64,
    /// The highest point carried, when any.
    pub capacity_scale_factor: Option<f64>,
    /// A `--users` sweep: the most concurrent users carried, when any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_users: Option<usize>,
    pub answer: String,
    /// The sweep was interrupted: the points so far.
    pub interrupted: bool,
    /// The capacity search, when the sweep searched (no `--scale-factors`).
    pub search: Option<SearchInfo>,
}

/// The trace slice's request rate at scale 1 (requests over the span of their timestamps).
fn trace_rate(cfg: &ReplayConfig) -> Result<f64> {
    // An agent corpus has no rate of its own: its load is closed-loop (users, arrivals).
    if let crate::config::TraceSource::File(p) = &cfg.trace.source {
        if crate::trace::agent::is_agent_corpus(p, cfg.trace.load.format) {
            return Ok(0.0);
        }
    }
    let t = crate::run::load_trace(cfg)?;
    let span_s = match (t.requests.first(), t.requests.last()) {
        (Some(a), Some(b)) => (b.timestamp_ms - a.timestamp_ms) / 1e3,
        _ => 0.0,
    };
    Ok(if span_s > 0.0 {
        t.requests.len() as f64 / span_s
    } else {
        0.0
    })
}

fn point_of(
    s: &Summary,
    f: f64,
    rate: f64,
    seed: u64,
    dir: &Path,
    reset: bool,
    code: i32,
) -> SweepPoint {
    let scheduled = s.scheduled;
    SweepPoint {
        scale_factor: f,
        users: None,
        seed,
        dir: dir.display().to_string(),
        offered_rps: rate * f,
        scheduled,
        completed: s.completed,
        failed: s.failed,
        request_throughput: s.request_throughput,
        output_throughput: s.output_throughput,
        request_goodput: s.request_goodput,
        good_fraction: s.good_fraction(),
        ttft_p50_ms: s.latency.ttft.known_median(),
        ttft_p99_ms: s.latency.ttft.known_percentile(99.0),
        tpot_p50_ms: s.latency.tpot.known_median(),
        tpot_p99_ms: s.latency.tpot.known_percentile(99.0),
        drift_p99_ms: s.drift.p99_ms,
        server_hit_ratio: s.server.as_ref().and_then(|x| x.cluster.prefix_hit_ratio),
        cache_reset: reset,
        invalid: s.invalid.clone(),
        exit_code: code,
        interrupted: s.run.outcome.stop_reason == Some(crate::schedule::StopReason::Interrupted),
        repeats: 0,
    }
}

/// Whether a point was carried: within the SLO target when there is one, else the server
/// kept up with the offered rate (a `--users` point, whose load is closed-loop: at least 90%
/// of the requests sent completed).
fn carried(p: &SweepPoint, target: f64) -> bool {
    match (p.good_fraction, p.users) {
        (Some(g), _) => g >= target,
        (None, Some(_)) => {
            p.completed > 0 && p.completed as f64 >= KEEPS_UP * (p.completed + p.failed) as f64
        }
        (None, None) => p.offered_rps > 0.0 && p.request_throughput >= KEEPS_UP * p.offered_rps,
    }
}

/// A `--users` sweep's answer: the most concurrent users carried with every smaller number
/// carried too.
pub fn users_answer(
    points: &[SweepPoint],
    slo: Option<&str>,
    target: f64,
) -> (Option<usize>, String) {
    let mut sorted: Vec<&SweepPoint> = points.iter().filter(|p| !p.interrupted).collect();
    sorted.sort_by_key(|p| p.users);
    let best = sorted.iter().take_while(|p| carried(p, target)).last();
    let next = sorted.iter().find(|p| !carried(p, target));
    let what = match slo {
        Some(s) => format!("{:.0}% of requests within {s}", target * 100.0),
        None => format!("{:.0}% of the requests sent completed", KEEPS_UP * 100.0),
    };
    let users = |p: &SweepPoint| p.users.unwrap_or(0);
    let load = |p: &SweepPoint| {
        format!(
            "{:.2} req/s served{}",
            p.request_throughput,
            p.good_fraction
                .map(|g| format!(", {:.1}% good", g * 100.0))
                .unwrap_or_default()
        )
    };
    let text = match (best, next) {
        (Some(b), Some(n)) => format!(
            "capacity: {} concurrent users ({}) is the most with {what}; {} users fell short ({})",
            users(b),
            load(b),
            users(n),
            load(n)
        ),
        (Some(b), None) => format!(
            "capacity: every point up to {} users ({}) had {what}: the capacity is higher, sweep further",
            users(b),
            load(b)
        ),
        (None, Some(n)) => format!(
            "capacity: below {} users: even the fewest fell short of {what} ({})",
            users(n),
            load(n)
        ),
        (None, None) => "capacity: no point was run".to_string(),
    };
    (best.map(|p| users(p)), text)
}

/// The answer in one line, and the capacity point (the highest scale factor carried with every
/// lower one carried too; a point cut short by Ctrl-C is not judged).
pub fn answer(points: &[SweepPoint], slo: Option<&str>, target: f64) -> (Option<f64>, String) {
    // A point Ctrl-C cut short is kept in sweep.json but not judged.
    let mut sorted: Vec<&SweepPoint> = points.iter().filter(|p| !p.interrupted).collect();
    sorted.sort_by(|a, b| a.scale_factor.total_cmp(&b.scale_factor));
    let best = sorted
        .iter()
        .take_while(|p| carried(p, target))
        .last()
        .copied();
    let next = sorted.iter().find(|p| !carried(p, target)).copied();
    let what = match slo {
        Some(s) => format!("{:.0}% of requests within {s}", target * 100.0),
        None => format!("throughput >= {:.0}% of the offered rate", KEEPS_UP * 100.0),
    };
    let measure = |p: &SweepPoint| match p.good_fraction {
        Some(g) => format!("{:.1}% good", g * 100.0),
        None => format!(
            "{:.2} of {:.2} req/s served",
            p.request_throughput, p.offered_rps
        ),
    };
    let good = |p: &SweepPoint| {
        p.good_fraction
            .map(|g| format!(", {:.1}% good", g * 100.0))
            .unwrap_or_default()
    };
    let text = match (best, next) {
        (Some(b), Some(n)) => format!(
            "capacity: scale {} ({:.2} req/s offered, {:.2} req/s served{}) is the highest point with {what}; scale {} fell short ({})",
            b.scale_factor,
            b.offered_rps,
            b.request_throughput,
            good(b),
            n.scale_factor,
            measure(n)
        ),
        (Some(b), None) => format!(
            "capacity: every point up to scale {} ({:.2} req/s offered, {}) had {what}: the capacity is higher, sweep further",
            b.scale_factor,
            b.offered_rps,
            measure(b)
        ),
        (None, Some(n)) => format!(
            "capacity: below scale {}: even the lowest point fell short of {what} ({})",
            n.scale_factor,
            measure(n)
        ),
        (None, None) => "capacity: no point was run".to_string(),
    };
    (best.map(|p| p.scale_factor), text)
}

/// A seed per point: the given seed's neighbours (so a sweep can be repeated), or fresh ones.
fn point_seed(base: Option<u64>, k: usize) -> u64 {
    match base {
        Some(s) => s.wrapping_add((k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        None => crate::config::fresh_seed(),
    }
}

fn point_dir(dir: &Path, f: f64) -> PathBuf {
    dir.join(format!("scale-{f}"))
}

/// What every point of a sweep shares.
struct Sweep {
    dir: PathBuf,
    base: ReplayArgs,
    /// The trace slice's request rate at scale 1.
    rate: f64,
    /// Set by Ctrl-C (see [`watch_interrupts`]).
    stop: Arc<AtomicBool>,
    slo: Option<String>,
    target: f64,
}

/// A flag set by SIGINT or SIGTERM for the rest of the process. A replay listens only while
/// it runs; between points (cache reset, the next point's start-up) the sweep's own listener
/// keeps the signal from being lost or, before the first point, from killing the process with
/// nothing saved.
fn watch_interrupts() -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let spawned = rt.map(|rt| {
        std::thread::Builder::new()
            .name("sweep-signals".into())
            .spawn(move || {
                rt.block_on(async move {
                    use tokio::signal::unix::{signal, SignalKind};
                    let mut term = signal(SignalKind::terminate()).ok();
                    let _ = ready_tx.send(());
                    loop {
                        let got = match term.as_mut() {
                            Some(t) => tokio::select! {
                                r = tokio::signal::ctrl_c() => r.is_ok(),
                                r = t.recv() => r.is_some(),
                            },
                            None => tokio::signal::ctrl_c().await.is_ok(),
                        };
                        if !got {
                            return;
                        }
                        flag.store(true, Ordering::SeqCst);
                    }
                })
            })
    });
    match spawned {
        Ok(Ok(_)) => {
            let _ = ready_rx.recv_timeout(Duration::from_secs(2));
        }
        _ => eprintln!(
            "request-sim: sweep: cannot watch for Ctrl-C between points; Ctrl-C during a point still stops it"
        ),
    }
    stop
}

impl Sweep {
    /// Ctrl-C was pressed.
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// `sweep.json` as it stands (after every point, so a killed sweep keeps its points).
    fn save(&self, result: &mut SweepResult) -> Result<()> {
        if result.points.iter().any(|p| p.users.is_some()) {
            let (cap, text) = users_answer(&result.points, self.slo.as_deref(), self.target);
            result.capacity_users = cap;
            result.answer = text;
            return crate::util::write_json(&self.dir.join("sweep.json"), result);
        }
        let (cap, text) = answer(&result.points, self.slo.as_deref(), self.target);
        result.capacity_scale_factor = cap;
        result.answer = match &result.search {
            Some(s) => format!("{text}{}", search_words(s, result.points.len())),
            None => text,
        };
        crate::util::write_json(&self.dir.join("sweep.json"), result)
    }

    /// Replay point `k` at scale `f` into its own directory, with a fresh seed and the prefix
    /// caches reset; returns the point and whether Ctrl-C interrupted it.
    fn point(&self, k: usize, f: f64, of: &str) -> Result<(SweepPoint, bool)> {
        self.point_with(k, f, None, of)
    }

    /// [`Sweep::point`], or with `users` a `--users` point at scale 1 (`users-N/`).
    fn point_with(
        &self,
        k: usize,
        f: f64,
        users: Option<usize>,
        of: &str,
    ) -> Result<(SweepPoint, bool)> {
        let pdir = match users {
            Some(u) => self.dir.join(format!("users-{u}")),
            None => point_dir(&self.dir, f),
        };
        let mut a = self.base.clone();
        a.schedule.scale_factor = f;
        if let Some(u) = users {
            a.trace.users = vec![u];
        }
        a.prompts.seed = Some(point_seed(self.base.prompts.seed, k));
        a.schedule.time_in_secs = Some(
            self.base
                .schedule
                .time_in_secs
                .unwrap_or(DEFAULT_POINT_SECS),
        );
        a.output.output_path = Some(pdir.join("records.jsonl"));
        a.output.summary_path = None;
        a.output.report.result_dir = Some(pdir.clone());
        if let Some(n) = crate::repeat::count(&self.base)? {
            return self.repeated_point(a, n, k, f, of, &pdir);
        }
        let cfg = ReplayConfig::from_args(a)?;
        let seed = cfg.prompts.seed;
        let reset = crate::run::reset_prefix_caches(&cfg);
        let what = match users {
            Some(u) => format!("{u} users"),
            None => format!("scale {f}"),
        };
        eprintln!(
            "request-sim: sweep point {}{of}: {what}, seed {seed}{} -> {}",
            k + 1,
            if reset { ", prefix caches reset" } else { "" },
            pdir.display()
        );
        let out = crate::run::replay(cfg)?;
        let mut p = point_of(
            &out.summary,
            f,
            self.rate,
            seed,
            &pdir,
            reset,
            out.exit_code,
        );
        if users.is_some() {
            // Closed-loop users offer what they sent: the requests sent over the run.
            let s = &out.summary;
            p.users = users;
            p.offered_rps = if s.duration_s > 0.0 {
                (s.completed + s.failed) as f64 / s.duration_s
            } else {
                0.0
            };
        }
        let stopped = p.interrupted || self.stopped();
        Ok((p, stopped))
    }
}

impl Sweep {
    /// Point `k` as a repeat set of `n` runs in `pdir` (`a`: the point's flags).
    fn repeated_point(
        &self,
        mut a: ReplayArgs,
        n: u32,
        k: usize,
        f: f64,
        of: &str,
        pdir: &Path,
    ) -> Result<(SweepPoint, bool)> {
        a.output.output_path = None;
        a.output.summary_path = None;
        eprintln!(
            "request-sim: sweep point {}{of}: scale {f}, {n} repeats -> {}",
            k + 1,
            pdir.display()
        );
        let out = crate::repeat::run_set(&a, n, pdir)?;
        crate::report::html::write_repeats_html(pdir, &out.set)?;
        let first = out
            .summaries
            .first()
            .ok_or_else(|| Error::internal("a repeat set without a run".to_string()))?;
        let seed = out.set.repeats.first().map_or(0, |r| r.seed);
        let reset = out.set.repeats.iter().all(|r| r.cache == "reset");
        let mut p = point_of(first, f, self.rate, seed, pdir, reset, out.exit_code);
        let mean = |key: &str| {
            out.set
                .metric(key)
                .and_then(|m| m.ci.as_ref())
                .map(|c| c.mean)
        };
        let ss = &out.summaries;
        p.repeats = ss.len();
        p.scheduled = ss.iter().map(|s| s.scheduled).sum();
        p.completed = ss.iter().map(|s| s.completed).sum();
        p.failed = ss.iter().map(|s| s.failed).sum();
        p.request_throughput = mean("request_throughput").unwrap_or(0.0);
        p.output_throughput = mean("output_throughput").unwrap_or(0.0);
        p.request_goodput = mean("request_goodput");
        p.good_fraction = first.good_requests.map(|_| {
            let fr: Vec<f64> = ss
                .iter()
                .map(|s| s.good_fraction().unwrap_or(0.0))
                .collect();
            fr.iter().sum::<f64>() / fr.len() as f64
        });
        p.ttft_p50_ms = mean("median_ttft_ms");
        p.ttft_p99_ms = mean("p99_ttft_ms");
        p.tpot_p50_ms = mean("median_tpot_ms");
        p.tpot_p99_ms = mean("p99_tpot_ms");
        p.drift_p99_ms = ss.iter().map(|s| s.drift.p99_ms).fold(0.0, f64::max);
        p.invalid = ss.iter().flat_map(|s| s.invalid.clone()).collect();
        p.interrupted = out.exit_code == 130;
        let stopped = p.interrupted || self.stopped();
        Ok((p, stopped))
    }
}

/// The sweep's directory: `--sweep-dir`, else `results/sweep-<UTC time>`.
fn sweep_dir(args: &SweepArgs) -> PathBuf {
    args.sweep_dir.clone().unwrap_or_else(|| {
        let ts = crate::stats::file_stamp();
        PathBuf::from(format!("results/sweep-{ts}"))
    })
}

/// The replay flags a sweep sets per point are refused: given, they would be ignored.
fn check_point_flags(r: &ReplayArgs) -> Result<()> {
    let per_point = |flag: &str, what: &str| {
        Err(Error::config(format!(
            "{flag} is set per point by the sweep ({what}): {}",
            if flag == "--scale-factor" {
                "give the points with --scale-factors, or let the sweep search"
            } else {
                "give the sweep's directory with --sweep-dir"
            }
        )))
    };
    // 1 is the default: the same as not given.
    if r.schedule.scale_factor != 1.0 {
        return per_point("--scale-factor", "each point's scale");
    }
    if r.output.report.result_dir.is_some() {
        return per_point("--result-dir", "SWEEP_DIR/scale-F/");
    }
    if r.output.output_path.is_some() {
        return per_point("--output-path", "SWEEP_DIR/scale-F/records.jsonl");
    }
    if r.output.summary_path.is_some() {
        return per_point("--summary-path", "SWEEP_DIR/scale-F/summary.json");
    }
    Ok(())
}

/// `--search LO,HI` as a pair, and the other flags checked.
fn check_args(args: &SweepArgs) -> Result<Option<(f64, f64)>> {
    let positive = |f: f64| f.is_finite() && f > 0.0;
    for &f in &args.scale_factors {
        if !positive(f) {
            return Err(Error::config(format!(
                "--scale-factors: {f} is not a positive number"
            )));
        }
    }
    let mut seen: Vec<String> = Vec::new();
    for &f in &args.scale_factors {
        let name = f.to_string();
        if seen.contains(&name) {
            return Err(Error::config(format!(
                "--scale-factors: scale {f} is given twice (its second point would overwrite the first's directory scale-{f})"
            )));
        }
        seen.push(name);
    }
    check_point_flags(&args.replay)?;
    if args.replay.trace.users.len() > 1
        && (!args.scale_factors.is_empty() || !args.search.is_empty())
    {
        return Err(Error::config(
            "sweep --users N1,N2,... sweeps the users at scale 1: give it without --scale-factors or --search",
        ));
    }
    if !(args.target > 0.0 && args.target <= 1.0) {
        return Err(Error::config(format!(
            "--target must be in (0, 1], got {}",
            args.target
        )));
    }
    if !(args.tolerance.is_finite() && args.tolerance > 0.0) {
        return Err(Error::config(format!(
            "--tolerance must be a positive fraction (0.05 = 5%), got {}",
            args.tolerance
        )));
    }
    if args.max_points == 0 {
        return Err(Error::config("--max-points must be at least 1"));
    }
    match args.search.as_slice() {
        [] => Ok(None),
        &[lo, hi] if positive(lo) && positive(hi) && lo < hi => Ok(Some((lo, hi))),
        other => Err(Error::config(format!(
            "--search takes LO,HI: two positive scale factors, LO below HI (got {other:?})"
        ))),
    }
}

/// Run the sweep; returns the process exit code (130 when interrupted). With
/// `--scale-factors`, each of them in order; without, the capacity search ([`search`]).
pub fn sweep(args: SweepArgs) -> Result<u8> {
    let start = check_args(&args)?;
    let dir = sweep_dir(&args);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    let mut base = args.replay.clone();
    // Every point is bounded in requests and in time; the request limit is part of the slice
    // (the offered rate is measured on it), the time limit is set per point.
    if base.trace.max_requests.is_none() {
        base.trace.max_requests = Some(DEFAULT_POINT_REQUESTS);
        eprintln!(
            "request-sim: sweep: every point replays at most {DEFAULT_POINT_REQUESTS} requests (--max-requests to change)"
        );
    }
    if base.schedule.time_in_secs.is_none() {
        eprintln!(
            "request-sim: sweep: every point stops sending after {DEFAULT_POINT_SECS:.0} s (--time-in-secs to change)"
        );
    }
    let mut probe_args = base.clone();
    if probe_args.trace.users.len() > 1 {
        probe_args.trace.users.truncate(1);
    }
    let probe = ReplayConfig::from_args(probe_args)?;
    let slo_words =
        (!probe.output.report.slo.is_empty()).then(|| probe.output.report.slo.describe());
    let sw = Sweep {
        rate: trace_rate(&probe)?,
        dir: dir.clone(),
        base,
        stop: watch_interrupts(),
        slo: slo_words.clone(),
        target: args.target,
    };
    let mut result = SweepResult {
        slo: slo_words,
        target: args.target,
        ..SweepResult::default()
    };
    let users = args.replay.trace.users.clone();
    if users.len() > 1 {
        let n = users.len();
        for (k, &u) in users.iter().enumerate() {
            if sw.stopped() {
                result.interrupted = true;
                break;
            }
            let (p, interrupted) = sw.point_with(k, 1.0, Some(u), &format!("/{n}"))?;
            result.points.push(p);
            result.interrupted = interrupted;
            sw.save(&mut result)?;
            if interrupted {
                break;
            }
        }
    } else if args.scale_factors.is_empty() {
        run_search(&sw, &args, start, &mut result)?;
    } else {
        let n = args.scale_factors.len();
        for (k, &f) in args.scale_factors.iter().enumerate() {
            if sw.stopped() {
                result.interrupted = true;
                break;
            }
            let (p, interrupted) = sw.point(k, f, &format!("/{n}"))?;
            result.points.push(p);
            result.interrupted = interrupted;
            sw.save(&mut result)?;
            if interrupted {
                break;
            }
        }
    }
    if result.interrupted {
        eprintln!("request-sim: {}", interrupted_words(&result.points));
    }
    sw.save(&mut result)?;
    finish(&dir, &result, &probe)
}

/// What an interrupted sweep keeps: the whole points, and the point Ctrl-C cut short, apart.
fn interrupted_words(points: &[SweepPoint]) -> String {
    let cut: Vec<String> = points
        .iter()
        .filter(|p| p.interrupted)
        .map(|p| format!("scale {}", p.scale_factor))
        .collect();
    let done = points.len() - cut.len();
    let mut text = format!(
        "sweep interrupted: keeping the {done} point{} done",
        if done == 1 { "" } else { "s" }
    );
    if !cut.is_empty() {
        text.push_str(&format!(
            "; the point at {} was cut short (marked interrupted, left out of the answer and the plot)",
            cut.join(", ")
        ));
    }
    text
}

/// The capacity search: points until the bracket is within the tolerance, `--max-points`
/// ran, or Ctrl-C.
fn run_search(
    sw: &Sweep,
    args: &SweepArgs,
    start: Option<(f64, f64)>,
    result: &mut SweepResult,
) -> Result<()> {
    let mut s = Search::new(start, args.tolerance);
    let of = format!(" (search, at most {})", args.max_points);
    let info = |s: &Search| {
        let (lo, hi) = s.bracket();
        SearchInfo {
            start: start.map(|(a, b)| [a, b]),
            tolerance: args.tolerance,
            max_points: args.max_points,
            lo,
            hi,
            converged: s.converged(),
        }
    };
    while result.points.len() < args.max_points {
        let Some(f) = s.next() else { break };
        if sw.stopped() {
            result.interrupted = true;
            break;
        }
        let (p, interrupted) = sw.point(result.points.len(), f, &of)?;
        if !p.interrupted {
            // A whole point (even if Ctrl-C came after it) counts; a cut one does not.
            s.record(f, carried(&p, args.target));
        }
        result.points.push(p);
        result.interrupted = interrupted;
        result.search = Some(info(&s));
        sw.save(result)?;
        if interrupted {
            break;
        }
    }
    result.search = Some(info(&s));
    Ok(())
}

/// The search's end in words, after the answer: the bracket and how the search ended.
fn search_words(s: &SearchInfo, points: usize) -> String {
    let how = if s.converged {
        format!("within {:.0}%", s.tolerance * 100.0)
    } else {
        format!(
            "not within {:.0}%: stopped after {points} of --max-points {}",
            s.tolerance * 100.0,
            s.max_points
        )
    };
    match (s.lo, s.hi) {
        (Some(lo), Some(hi)) => {
            format!("; search bracket [{lo}, {hi}) {how}, {points} points")
        }
        _ => format!("; search found no bracket ({how}), {points} points"),
    }
}

/// The combined chart, `report.html` and the table on stdout (`sweep.json` is saved).
fn finish(dir: &Path, result: &SweepResult, probe: &ReplayConfig) -> Result<u8> {
    let cap = result.capacity_scale_factor;
    // A point cut short is not drawn: its numbers cover part of the point.
    let plot_points: Vec<crate::report::plots::SweepPlotPoint> = result
        .points
        .iter()
        .filter(|p| !p.interrupted)
        .map(|p| crate::report::plots::SweepPlotPoint {
            offered_rps: p.offered_rps,
            users: p.users,
            served_rps: p.request_throughput,
            goodput_rps: p.request_goodput,
            ttft_p50_ms: p.ttft_p50_ms,
            ttft_p99_ms: p.ttft_p99_ms,
            tpot_p50_ms: p.tpot_p50_ms,
            tpot_p99_ms: p.tpot_p99_ms,
            drift_p99_ms: p.drift_p99_ms,
            capacity: match p.users {
                Some(u) => Some(u) == result.capacity_users,
                None => Some(p.scale_factor) == cap,
            },
        })
        .collect();
    let mut title = result.answer.clone();
    for p in result.points.iter().filter(|p| p.interrupted) {
        title.push_str(&format!(
            " (scale {} cut short by Ctrl-C: not drawn)",
            p.scale_factor
        ));
    }
    let drawn = crate::report::plots::write_sweep_plot(
        dir,
        &plot_points,
        &title,
        probe.validity.max_drift_ms,
    );
    let charts = match drawn {
        Ok(files) => files,
        Err(e) => {
            eprintln!("request-sim: sweep: cannot draw the plot: {e:#}");
            Vec::new()
        }
    };
    write_html(dir, result, probe, &charts);
    crate::report::print_stdout(&format!("\n{}", render_table(result)))?;
    eprintln!("request-sim: sweep: {}", dir.join("sweep.json").display());
    let nothing_succeeded =
        !result.points.is_empty() && result.points.iter().all(|p| p.exit_code == 5);
    Ok(if result.interrupted {
        130
    } else if nothing_succeeded {
        eprintln!("request-sim: sweep: exit status 5: no request succeeded at any point");
        5
    } else {
        0
    })
}
