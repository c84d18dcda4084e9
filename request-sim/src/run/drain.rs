//! Phase 7, after the last send: wait for the requests in flight (up to `--grace-secs` after a
//! stop, then cancel what is left; each cancelled request still ends as one record), take the
//! scraper's last round, and let the writer write every record and hand back its accumulator.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use super::control::Control;
use super::dispatch::Dispatched;
use super::note::note;
use super::pipeline::Pipeline;
use super::server::Server;
use crate::config::ReplayConfig;
use crate::observe::ScrapeResult;
use crate::schedule::{FeedEnd, ProducerStats, RealtimeReport, ReleaseStats, StopReason};
use crate::stats::{Accumulator, ClientCpu};
use crate::{Error, Result};

/// Everything the run produced, ready for the summary.
pub(super) struct Drained {
    pub(super) dispatched: Dispatched,
    /// How sending ended.
    pub(super) reason: StopReason,
    pub(super) accumulator: Accumulator,
    /// The scraper's samples (`None` without scraping).
    pub(super) scraped: Option<Result<ScrapeResult>>,
    /// From the clock's start to the last record.
    pub(super) wall: Duration,
    pub(super) producer_stats: ProducerStats,
    pub(super) realtime: RealtimeReport,
    /// `--timing closed`: what the release clock did.
    pub(super) releases: Option<ReleaseStats>,
    /// The client's CPU time over the run.
    pub(super) client_cpu: Option<ClientCpu>,
    /// How the feed of planned requests ended (how many the slice had, a trace error).
    pub(super) feed: FeedEnd,
    /// A second signal forced the stop (the requests in flight were cancelled at once).
    pub(super) forced: bool,
}

pub(super) fn run(
    cfg: &ReplayConfig,
    server: &mut Server,
    pipeline: Pipeline,
    mut dispatched: Dispatched,
) -> Result<Drained> {
    let mut producer_stats = pipeline.producers.stats();
    let result = &dispatched.result;
    if let Some(last) = result.last_send {
        let s = last.duration_since(dispatched.start).as_secs_f64();
        if s > 0.0 {
            producer_stats.bodies_per_s = result.dispatched as f64 / s;
        }
    }
    let Pipeline {
        producers,
        scraper,
        writer,
        tx,
        progress,
        control,
        ..
    } = pipeline;
    // Nothing more is built; the feeder counts the rest of the slice meanwhile.
    producers.stop();
    drop(tx);
    let reason = result.reason;
    if reason == StopReason::TimeLimit {
        note(format!(
            "time limit reached: stopped sending; in-flight requests get {:.1} s",
            cfg.requests.grace.as_secs_f64()
        ));
    }
    let stopped_early = reason != StopReason::Completed;
    wait_in_flight(
        &server.rt,
        dispatched.tracker.clone(),
        &control,
        stopped_early,
        cfg.requests.grace,
    );
    let wall = dispatched.start.elapsed();
    // Every task has ended: no turn waits for a release any more.
    let releases = dispatched.clock.take().map(|c| c.finish());
    let realtime = server.realtime.report();
    let feed = producers.finish();
    // The scraper's last round comes after the last request, before the simulator stops.
    let scraped = scraper.map(|s| s.finish());
    let (written, accumulator) = writer.finish().map_err(|e| {
        Error::io(
            format!("writing {} failed", cfg.output.records_path.display()),
            e,
        )
    })?;
    progress.finish();
    let builtin_simulator = server.sim.take().is_some();
    let client_cpu =
        super::cpu::client_cpu(written.written, builtin_simulator, server.steal_at_start);
    if written.written != result.dispatched {
        return Err(Error::internal(format!(
            "{} requests dispatched but {} records written",
            result.dispatched, written.written
        )));
    }
    // A stop asked for from outside (Ctrl-C, early stop) is the reason even when the
    // dispatcher had already handed everything over.
    let reason = control.stopped_by().unwrap_or(reason);
    Ok(Drained {
        dispatched,
        reason,
        accumulator,
        scraped,
        wall,
        producer_stats,
        realtime,
        releases,
        client_cpu,
        feed,
        forced: control.was_forced(),
    })
}

/// Wait for every request task. After a complete dispatch that is all of them (unless a
/// stop comes meanwhile); after a stop, in-flight requests get `grace`, then are cancelled.
fn wait_in_flight(
    rt: &tokio::runtime::Runtime,
    tracker: TaskTracker,
    control: &Arc<Control>,
    stopped_early: bool,
    grace: Duration,
) {
    let control = control.clone();
    rt.block_on(async move {
        tracker.close();
        if !stopped_early {
            tokio::select! {
                _ = tracker.wait() => return,
                _ = control.stopping.cancelled() => {}
            }
        }
        tokio::select! {
            _ = tracker.wait() => {}
            _ = tokio::time::sleep(grace) => {
                control.cancel.cancel();
                tracker.wait().await;
            }
            _ = control.cancel.cancelled() => tracker.wait().await,
        }
    });
}
