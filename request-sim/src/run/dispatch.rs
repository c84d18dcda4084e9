//! Phase 6: the dispatcher thread. It runs pinned to the last core and, when permitted, under
//! real-time scheduling; it waits for `--start-at` if given, starts the clock, and hands every
//! request to the async runtime at its time (`task`: what happens to it there). The thread ends
//! with dispatching, so nothing after it (drain, reports) runs at real-time priority.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::task::TaskTracker;

use super::note::{ms_since, note};
use super::pipeline::Pipeline;
use super::server::Server;
use super::task::{closed_turn, ms_between, run_one, TaskCtx, TaskSettings};
use crate::config::ReplayConfig;
use crate::schedule::{self, DispatchPlan, DispatchResult};
use crate::stats::{self, StartupTimes};
use crate::{Error, Result};

/// What dispatching did.
pub(super) struct Dispatched {
    pub(super) result: DispatchResult,
    /// The clock's start (trace time 0).
    pub(super) start: Instant,
    /// The same, RFC 3339.
    pub(super) started_at: String,
    /// `--start-at`: how far from the common start the clock started (ms), how long the run
    /// waited for it (ms).
    pub(super) start_offset_ms: Option<f64>,
    pub(super) waited_ms: Option<f64>,
    /// Earliest send, µs after `start` (u64::MAX when nothing was sent).
    pub(super) first_sent_us: u64,
    /// The request tasks, still running.
    pub(super) tracker: TaskTracker,
    /// `--timing closed` with sessions: the clock still releasing waiting turns (stopped by
    /// the drain once every task has ended).
    pub(super) clock: Option<schedule::ReleaseClock>,
}

pub(super) fn run(
    cfg: &ReplayConfig,
    server: &Server,
    pipeline: &Pipeline,
    t_start: Instant,
    startup: &mut StartupTimes,
) -> Result<Dispatched> {
    let deadline = start_deadline(cfg, t_start)?;
    let waited_ms =
        deadline.map(|d| d.saturating_duration_since(Instant::now()).as_secs_f64() * 1e3);
    let tracker = TaskTracker::new();
    let pin = pipeline.ncores >= 2 && cfg.schedule.pin;
    let last_core = || core_affinity::get_core_ids().and_then(|ids| ids.last().copied());
    // The release clock shares the dispatcher's core: both spin only just before instants.
    let clock = match &pipeline.gate {
        Some(_) => Some(
            schedule::ReleaseClock::start(
                server.realtime.clone(),
                if pin { last_core() } else { None },
                cfg.schedule.spin,
            )
            .map_err(|e| Error::io("cannot start the release clock thread", e))?,
        ),
        None => None,
    };
    let releases = clock.as_ref().map(|c| c.releases());
    let (result, start, started_at, start_offset_ms, ctx) = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("dispatcher".into())
            .spawn_scoped(scope, || {
                if let Some(last) = last_core().filter(|_| pin) {
                    core_affinity::set_for_current(last);
                }
                server.realtime.enter_dispatcher();
                // The I/O-thread booster (and its keep-awake threads) is set up before the
                // clock starts: starting its threads took 4-8 ms, all of it on the first burst.
                let boost = server.realtime.io_boost(true);
                // A common start (`--start-at`): wait for it on this thread, precisely.
                if let Some(at) = deadline {
                    schedule::clock::wait_until(
                        at,
                        cfg.schedule.spin,
                        pipeline.control.stop.flag(),
                    );
                }
                // The clock starts on this thread once it is set up, so its own start-up
                // never makes the first requests late.
                let started_at = stats::now_rfc3339();
                let start = Instant::now();
                if let Some(s) = &pipeline.scraper {
                    s.set_clock_start(start);
                }
                let start_offset_ms = cfg.schedule.start_at.map(|a| a.offset_now_ms());
                pipeline.producers.start_clock(start);
                startup.total_ms = ms_between(t_start, start);
                let ctx = task_context(cfg, server, pipeline, start, releases);
                let result = send_all(cfg, server, pipeline, &ctx, &tracker, start, boost);
                (result, start, started_at, start_offset_ms, ctx)
            })
            .map_err(|e| Error::io("cannot start the dispatcher thread", e))?
            .join()
            .map_err(|_| Error::internal("the dispatcher thread panicked"))
    })?;
    Ok(Dispatched {
        result,
        start,
        started_at,
        start_offset_ms,
        waited_ms,
        first_sent_us: ctx.first_sent_us.load(Ordering::Relaxed),
        tracker,
        clock,
    })
}

/// `--start-at`: start-up must be over before the common start.
fn start_deadline(cfg: &ReplayConfig, t_start: Instant) -> Result<Option<Instant>> {
    let Some(at) = cfg.schedule.start_at else {
        return Ok(None);
    };
    match at.instant() {
        Ok(deadline) => {
            note(format!(
                "start-up done; waiting {:.3} s for the common start {}",
                (deadline - Instant::now()).as_secs_f64(),
                at.rfc3339()
            ));
            Ok(Some(deadline))
        }
        Err(late) => Err(Error::config(format!(
            "start-up ended {:.3} s after --start-at {} (it took {:.0} ms): nothing was sent; choose a later start",
            late.as_secs_f64(),
            at.rfc3339(),
            ms_since(t_start)
        ))),
    }
}

/// What every request task shares.
fn task_context(
    cfg: &ReplayConfig,
    server: &Server,
    pipeline: &Pipeline,
    start: Instant,
    releases: Option<schedule::Releases>,
) -> Arc<TaskCtx> {
    Arc::new(TaskCtx {
        client: server.client.clone(),
        ep: server.ep.clone(),
        control: pipeline.control.clone(),
        settings: TaskSettings::new(cfg),
        start,
        progress: pipeline.progress.clone(),
        realtime: server.realtime.clone(),
        gate: pipeline.gate.clone(),
        releases,
        warmth: server.warmth.clone(),
        first_sent_us: AtomicU64::new(u64::MAX),
        send_seq: AtomicU64::new(0),
        live: pipeline.live.clone(),
        models: pipeline.models.clone(),
    })
}

/// Hand every request over at its time: a task of its own on the runtime.
fn send_all(
    cfg: &ReplayConfig,
    server: &Server,
    pipeline: &Pipeline,
    ctx: &Arc<TaskCtx>,
    tracker: &TaskTracker,
    start: Instant,
    boost: Option<schedule::priority::IoBoost>,
) -> DispatchResult {
    let plan = DispatchPlan {
        scale_factor: cfg.schedule.scale_factor,
        spin: cfg.schedule.spin,
        time_limit: cfg.schedule.time_limit,
        burst_lead: ctx.warmth.as_ref().map(|_| WARM_LEAD),
        awake_burst: match ctx.gate {
            Some(_) => schedule::CLOSED_AWAKE_BURST,
            None => schedule::priority::IoBoost::AWAKE_BURST,
        },
        learn_spin: ctx.gate.is_some(),
    };
    let handle = server.rt.handle();
    schedule::dispatch(
        &pipeline.producers,
        start,
        &plan,
        &pipeline.control.stop,
        boost,
        |prepared, scheduled| {
            ctx.progress.on_sent();
            if let Some(l) = &ctx.live {
                l.on_scheduled();
            }
            let (ctx, tx) = (ctx.clone(), pipeline.tx.clone());
            let waits = ctx.gate.is_some()
                && prepared
                    .planned
                    .turn
                    .as_ref()
                    .is_some_and(|t| t.waits().next().is_some());
            if waits {
                // Closed loop: the turn waits for its parent (and joins) in its own task, so no
                // other request waits behind it.
                tracker.spawn_on(closed_turn(ctx, prepared, scheduled, tx), handle);
            } else {
                tracker.spawn_on(run_one(ctx, prepared, scheduled, None, None, tx), handle);
            }
        },
        |n, due| match &ctx.warmth {
            Some(w) => {
                let k = w.needed(n, due);
                w.warm(handle, &ctx.client, &ctx.ep, k);
                k
            }
            None => 0,
        },
    )
}

/// How long before a burst the connections it needs are opened (a loopback connect and `GET`
/// take well under a millisecond; a busy server's front end may take a few).
const WARM_LEAD: Duration = Duration::from_millis(50);
