//! The schedule group of the settings ([`ScheduleConfig`]): when requests are sent (speed, time
//! limit, the wall-clock start), and the threads that build and send them.

use std::time::Duration;

use super::check::positive;
use crate::cli::ScheduleArgs;
use crate::schedule::StartAt;
use crate::{Error, Result};

/// When requests are sent, and the threads that build and send them.
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    pub scale_factor: f64,
    pub time_limit: Option<Duration>,
    /// `--start-at`: the wall-clock start of the trace clock.
    pub start_at: Option<StartAt>,
    pub producers: usize,
    pub channel_capacity: usize,
    /// `--lookahead-mb`, in bytes.
    pub lookahead_bytes: u64,
    /// `--lookahead-secs`.
    pub lookahead: Duration,
    pub threads: usize,
    pub spin: Duration,
    pub pin: bool,
    /// `--realtime` and `--rt-priority`.
    pub realtime: crate::schedule::RealtimeMode,
    pub rt_priority: u8,
    /// Spin a SCHED_IDLE thread per core while the I/O threads are raised (`--no-keep-awake`
    /// turns it off).
    pub keep_awake: bool,
}

/// `--scale-factor` and `--time-in-secs`, checked.
pub(super) struct Speed {
    scale_factor: f64,
    time_limit: Option<Duration>,
}

/// `--lookahead-mb`, `--lookahead-secs` and `--threads`, checked.
pub(super) struct Threads {
    lookahead_bytes: u64,
    lookahead: Duration,
    threads: usize,
}

impl ScheduleConfig {
    /// The group from its flags, with the speed ([`speed`]), the start ([`start_at`]) and the
    /// threads ([`threads`]) checked.
    pub(super) fn new(
        s: ScheduleArgs,
        speed: Speed,
        start_at: Option<StartAt>,
        threads: Threads,
    ) -> ScheduleConfig {
        ScheduleConfig {
            scale_factor: speed.scale_factor,
            time_limit: speed.time_limit,
            start_at,
            producers: s.num_producer,
            channel_capacity: s.channel_capacity,
            lookahead_bytes: threads.lookahead_bytes,
            lookahead: threads.lookahead,
            threads: threads.threads,
            spin: Duration::from_micros(s.spin_us),
            pin: !s.no_pin,
            realtime: s.realtime,
            rt_priority: s.rt_priority,
            keep_awake: !s.no_keep_awake,
        }
    }
}

/// One replay: `--repeat N` is run by `replay` and `sweep` ([`crate::repeat`]), which clear it
/// for each run; another front end (the `client`, `trace_replay` binaries) refuses it.
pub(super) fn single_run(a: &ScheduleArgs) -> Result<()> {
    match a.repeat {
        None | Some(1) => Ok(()),
        Some(0) => Err(Error::config(
            "--repeat 0: a repeat set needs at least one run (give N >= 2 for intervals, or leave --repeat out)",
        )),
        Some(n) => Err(Error::config(format!(
            "--repeat {n}: repeat sets are run by `request-sim replay` and `request-sim sweep`"
        ))),
    }
}

/// `--start-at`: a wall-clock instant not yet past.
pub(super) fn start_at(a: &ScheduleArgs) -> Result<Option<StartAt>> {
    Ok(match &a.start_at {
        Some(s) => {
            let at = StartAt::parse(s).map_err(Error::config)?;
            if let Err(late) = at.remaining() {
                return Err(Error::config(format!(
                    "--start-at {}: that is {:.1} s in the past (now {})",
                    at.rfc3339(),
                    late.as_secs_f64(),
                    crate::stats::now_rfc3339()
                )));
            }
            Some(at)
        }
        None => None,
    })
}

/// `--scale-factor` and `--time-in-secs`.
pub(super) fn speed(a: &ScheduleArgs) -> Result<Speed> {
    let scale_factor = positive("--scale-factor", a.scale_factor)?;
    let time_in_secs = a
        .time_in_secs
        .map(|t| positive("--time-in-secs", t))
        .transpose()?;
    Ok(Speed {
        scale_factor,
        time_limit: time_in_secs.map(Duration::from_secs_f64),
    })
}

/// `--rt-priority`, `--spin-us`, then producers, lookahead and I/O threads.
pub(super) fn threads(a: &ScheduleArgs) -> Result<Threads> {
    if !(1..=48).contains(&a.rt_priority) {
        return Err(Error::config(format!(
            "--rt-priority must be between 1 and 48, got {}",
            a.rt_priority
        )));
    }
    if a.spin_us > 100_000 {
        return Err(Error::config(format!(
            "--spin-us must be at most 100000, got {}",
            a.spin_us
        )));
    }
    if a.num_producer == 0 || a.num_producer > 256 {
        return Err(Error::config(format!(
            "--num-producer must be between 1 and 256, got {}",
            a.num_producer
        )));
    }
    if a.channel_capacity == 0 {
        return Err(Error::config("--channel-capacity must be at least 1"));
    }
    if !a.lookahead_mb.is_finite() || a.lookahead_mb <= 0.0 {
        return Err(Error::config(format!(
            "--lookahead-mb must be > 0, got {}",
            a.lookahead_mb
        )));
    }
    if !a.lookahead_secs.is_finite() || a.lookahead_secs < 0.0 {
        return Err(Error::config(format!(
            "--lookahead-secs must be >= 0, got {}",
            a.lookahead_secs
        )));
    }
    let threads = a.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    if threads == 0 || threads > 1024 {
        return Err(Error::config(format!(
            "--threads must be between 1 and 1024, got {threads}"
        )));
    }
    Ok(Threads {
        lookahead_bytes: (a.lookahead_mb * 1e6) as u64,
        lookahead: Duration::from_secs_f64(a.lookahead_secs),
        threads,
    })
}
