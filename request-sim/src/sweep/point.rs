//! Replaying the points of a sweep ([`Sweep`]: what every point shares): each point into its
//! own directory with its own seed and the prefix caches reset, as one run or as a repeat set;
//! `sweep.json` saved after each; Ctrl-C watched between points.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::answer::{answer, search_words, users_answer};
use super::args::DEFAULT_POINT_SECS;
use super::result::{point_of, SweepPoint, SweepResult};
use crate::cli::ReplayArgs;
use crate::config::ReplayConfig;
use crate::{Error, Result};

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
pub(super) struct Sweep {
    pub(super) dir: PathBuf,
    pub(super) base: ReplayArgs,
    /// The trace slice's request rate at scale 1.
    pub(super) rate: f64,
    /// Set by Ctrl-C (see [`watch_interrupts`]).
    pub(super) stop: Arc<AtomicBool>,
    pub(super) slo: Option<String>,
    pub(super) target: f64,
    /// A `--users` sweep without --time-in-secs and --max-requests: the corpus's conversations
    /// and requests; a point replays it once (more passes when there are more users than
    /// conversations).
    pub(super) corpus: Option<(usize, usize)>,
    /// `--gpus`: the curve's throughput is per GPU.
    pub(super) gpus: Option<u32>,
}

/// A flag set by SIGINT or SIGTERM for the rest of the process. A replay listens only while
/// it runs; between points (cache reset, the next point's start-up) the sweep's own listener
/// keeps the signal from being lost or, before the first point, from killing the process with
/// nothing saved.
pub(super) fn watch_interrupts() -> Arc<AtomicBool> {
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
    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// `sweep.json` as it stands (after every point, so a killed sweep keeps its points).
    pub(super) fn save(&self, result: &mut SweepResult) -> Result<()> {
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
    pub(super) fn point(&self, k: usize, f: f64, of: &str) -> Result<(SweepPoint, bool)> {
        self.point_with(k, f, None, of)
    }

    /// [`Sweep::point`], or with `users` a `--users` point at scale 1 (`users-N/`).
    pub(super) fn point_with(
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
            if let Some((conversations, requests)) = self.corpus {
                // Whole passes of the corpus (the layout takes whole conversations up to the
                // limit), enough for each user to have a conversation.
                let passes = u.div_ceil(conversations.max(1)).max(1);
                a.trace.max_requests = Some(passes * requests);
            }
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
        // The sweep's own files: a sweep run again into its directory replaces them.
        a.output.overwrite = true;
        a.output.report.result_dir = Some(pdir.clone());
        // The point's summary re-runs the point.
        let s = &mut a.run_file.settings;
        s.set("scale-factor", f);
        s.set("users", a.trace.users.clone());
        s.set("max-requests", a.trace.max_requests);
        s.set("seed", a.prompts.seed);
        s.set("time-in-secs", a.schedule.time_in_secs);
        s.set("overwrite", true);
        s.set_path("output-path", a.output.output_path.as_deref());
        s.set_path("summary-path", None);
        s.set_path("result-dir", Some(pdir.as_path()));
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
        p.output_throughput_per_gpu = self.gpus.map(|g| p.output_throughput / f64::from(g));
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
