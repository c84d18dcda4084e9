//! Phase 5, before the clock starts: open the keep-alive connections the first second of the
//! schedule needs (so the first bursts do not pay for TCP set-up at their send time), and let
//! the producers build the bodies due in the first moments (so no request is late because the
//! run just began).

use std::time::{Duration, Instant};

use super::load::Loaded;
use super::note::{ms_since, note};
use super::pipeline::Pipeline;
use super::server::Server;
use crate::backend::{self, warm};
use crate::config::ReplayConfig;
use crate::stats::StartupTimes;
use crate::Result;

/// Before the clock starts, producers build the bodies scheduled in this first stretch…
const WARMUP_SCHEDULE_MS: f64 = 20.0;
/// …but at most this many (or the first burst's, `Loaded::first_burst`: the lookahead holds
/// it, see `run::pipeline`)…
const WARMUP_MAX_BODIES: usize = 256;
/// …for at most this long.
const WARMUP_MAX: Duration = Duration::from_secs(2);
/// Before the start, the connections of the first second's requests are opened, at most this
/// many…
const WARMUP_CONNECTIONS: usize = 64;
/// …and, when more requests are due together (a burst, `Loaded::first_burst`) in that second,
/// one for each of those, at most this many (and half the descriptors the process may open):
/// a burst of 1,000 at one instant then only writes its requests. Opened at its send time,
/// each took a TCP set-up, and the writes of the burst spread over 113 ms on two cores
/// (docs/performance.md, "Measured on the wire").
const WARMUP_BURST_CONNECTIONS: usize = 16_384;
const WARMUP_CONNECT_MAX: Duration = Duration::from_secs(2);

pub(super) fn run(
    cfg: &ReplayConfig,
    trace: &Loaded,
    server: &mut Server,
    pipeline: &Pipeline,
    startup: &mut StartupTimes,
) -> Result<()> {
    let t = Instant::now();
    if !cfg.requests.dry_run {
        connect(cfg, trace, server, startup)?;
    }
    prefill(cfg, trace, pipeline, startup);
    startup.warmup_ms = ms_since(t);
    // A bad row the feeder met already (within the first rows of a streamed trace): stop
    // before anything is sent.
    match pipeline.producers.take_feed_error() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// How many connections a burst may open ahead: [`WARMUP_BURST_CONNECTIONS`], within half the
/// descriptors this process may open.
fn burst_cap() -> usize {
    let fds = rlimit::getrlimit(rlimit::Resource::NOFILE)
        .map(|(soft, _)| soft as usize)
        .unwrap_or(1024);
    WARMUP_BURST_CONNECTIONS.min(fds / 2)
}

/// Open the connections the first second of the schedule will need. A server that announces
/// its idle timeout (`Keep-Alive: timeout=N`) gets a pool that lets connections go before it
/// does (the connections just opened go with the old one, so they are opened again).
fn connect(
    cfg: &ReplayConfig,
    trace: &Loaded,
    server: &mut Server,
    startup: &mut StartupTimes,
) -> Result<()> {
    let first_second = trace
        .head
        .iter()
        .take_while(|p| p.req.timestamp_ms / cfg.schedule.scale_factor < 1000.0)
        .count();
    let n = first_second.clamp(1, WARMUP_CONNECTIONS).max(
        trace
            .first_burst(cfg.schedule.scale_factor)
            .min(burst_cap()),
    );
    let (mut answered, announced) = server.rt.block_on(warm::open_connections(
        &server.client,
        &server.ep,
        n,
        WARMUP_CONNECT_MAX,
    ));
    if let Some(announced) = announced {
        startup.server_keep_alive_s = Some(announced.as_secs_f64());
        let ours = server.client_options.pool_idle_timeout;
        if let Some(idle) = backend::pool_idle_for(announced, ours) {
            server.client_options.pool_idle_timeout = idle;
            server.client = backend::build_client(&server.client_options)?;
            note(format!(
                "the server closes idle connections after {:.1} s (Keep-Alive header): idle connections are kept {:.1} s instead of {:.1} s",
                announced.as_secs_f64(),
                idle.as_secs_f64(),
                ours.as_secs_f64()
            ));
            answered += server
                .rt
                .block_on(warm::open_connections(
                    &server.client,
                    &server.ep,
                    n,
                    WARMUP_CONNECT_MAX,
                ))
                .0;
        }
    }
    startup.connections = answered;
    if cfg.target.warm_connections {
        let warmth = warm::Warmth::new(server.client_options.pool_idle_timeout);
        warmth.opened(answered);
        server.warmth = Some(warmth);
    }
    Ok(())
}

/// The clock starts when its start is ready: the first requests themselves (not just any
/// bodies) must be built, whatever the producer count; but it never waits long for them.
fn prefill(cfg: &ReplayConfig, trace: &Loaded, pipeline: &Pipeline, startup: &mut StartupTimes) {
    let producers = &pipeline.producers;
    let early = trace
        .head
        .iter()
        .take_while(|p| p.req.timestamp_ms / cfg.schedule.scale_factor < WARMUP_SCHEDULE_MS)
        .count();
    let capacity = super::pipeline::lookahead_count(cfg, trace);
    let want = early
        .clamp(
            1,
            capacity.min(WARMUP_MAX_BODIES.max(trace.first_burst(cfg.schedule.scale_factor))),
        )
        .min(trace.head.len());
    let t = Instant::now();
    let until = t + WARMUP_MAX;
    while !producers.built_first(want) && Instant::now() < until {
        std::thread::sleep(Duration::from_micros(200));
    }
    let prefilled = producers.built_first(want);
    startup.prefill_due = want;
    startup.prefill_built = if prefilled {
        want
    } else {
        (0..want)
            .take_while(|&k| producers.built_first(k + 1))
            .count()
    };
    note(format!(
        "pre-fill: the first {want} request bodies (due in the first {WARMUP_SCHEDULE_MS:.0} ms) {} in {:.1} ms; lookahead: {} bodies, {:.0} MB, {:.1} s",
        if prefilled { "built" } else { "NOT all built" },
        ms_since(t),
        capacity,
        cfg.schedule.lookahead_bytes as f64 / 1e6,
        cfg.schedule.lookahead.as_secs_f64(),
    ));
}
