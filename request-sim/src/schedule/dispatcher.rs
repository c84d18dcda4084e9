//! The dispatcher: takes prepared requests in trace order and releases each at
//! `start + timestamp / scale_factor`.

use std::time::{Duration, Instant};

use super::clock::Waiter;
use super::priority::IoBoost;
use super::producer::{Prepared, Producers};
use super::stop::{Stop, StopReason};
use crate::trace::TraceRequest;

/// Timing settings.
#[derive(Debug, Clone)]
pub struct DispatchPlan {
    pub scale_factor: f64,
    /// Spin (instead of sleeping) this long before each send time.
    pub spin: Duration,
    /// Do not send requests scheduled at or after this offset from the start.
    pub time_limit: Option<Duration>,
}

impl DispatchPlan {
    /// Offset of a request's send time from the start of the run.
    pub fn offset(&self, timestamp_ms: f64) -> Duration {
        Duration::from_secs_f64((timestamp_ms / 1e3 / self.scale_factor).max(0.0))
    }
}

/// What the dispatcher did.
#[derive(Debug, Clone)]
pub struct DispatchResult {
    pub dispatched: usize,
    pub reason: StopReason,
    /// How precisely the dispatcher itself kept the schedule.
    pub stats: DispatchStats,
    /// When the last request was handed over.
    pub last_send: Option<Instant>,
}

/// The dispatcher's own lateness: the time it handed each request to the runtime minus the
/// scheduled time. Send drift in the records adds the runtime's delay in starting the request
/// task; comparing the two tells which stage made a request late.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct DispatchStats {
    /// Times the next body was not built yet when the dispatcher wanted it (it then waited).
    pub not_ready: u64,
    /// Hand-overs later than 1 ms / 5 ms after their scheduled time.
    pub late_over_1ms: u64,
    pub late_over_5ms: u64,
    /// Latest hand-over, ms after its scheduled time.
    pub max_late_ms: f64,
    /// CPU time spent spinning before send times, seconds.
    pub spin_s: f64,
}

/// Dispatch `requests` in order; `send(prepared, scheduled)` hands one to the runtime.
///
/// With `boost`, the I/O threads are raised to real-time priority [`IoBoost::LEAD`] before each
/// send time and lowered once the requests handed over have started, unless the next send comes
/// first (see [`super::priority`]).
pub fn dispatch(
    requests: &[TraceRequest],
    producers: &Producers,
    start: Instant,
    plan: &DispatchPlan,
    stop: &Stop,
    mut boost: Option<IoBoost>,
    mut send: impl FnMut(Prepared, Instant),
) -> DispatchResult {
    let mut stats = DispatchStats::default();
    let mut last_send = None;
    let mut waiter = Waiter::new(plan.spin);
    let result = |dispatched, reason, mut stats: DispatchStats, last_send, w: &Waiter| {
        stats.spin_s = w.spun().as_secs_f64();
        DispatchResult {
            dispatched,
            reason,
            stats,
            last_send,
        }
    };
    for (i, req) in requests.iter().enumerate() {
        let offset = plan.offset(req.timestamp_ms);
        if let Some(limit) = plan.time_limit {
            if offset >= limit {
                // Wait out the time limit so in-flight requests get the full window.
                let _ = waiter.wait_until(start + limit, stop.flag());
                return result(i, StopReason::TimeLimit, stats, last_send, &waiter);
            }
        }
        let scheduled = start + offset;
        // Take the body first (it is normally ready long before its time).
        let prepared = match producers.try_take(i) {
            Some(p) => p,
            None => {
                stats.not_ready += 1;
                match producers.take(i) {
                    Some(p) => p,
                    None => {
                        return result(i, StopReason::ProducerFailed, stats, last_send, &waiter)
                    }
                }
            }
        };
        if let Some(b) = boost.as_mut() {
            if !b.is_raised() {
                let lead = scheduled.checked_sub(IoBoost::LEAD).unwrap_or(scheduled);
                if !waiter.sleep_until(lead, stop.flag()) {
                    return result(
                        i,
                        stop.reason().unwrap_or(StopReason::Interrupted),
                        stats,
                        last_send,
                        &waiter,
                    );
                }
                b.raise();
            }
        }
        if !waiter.wait_until(scheduled, stop.flag()) {
            return result(
                i,
                stop.reason().unwrap_or(StopReason::Interrupted),
                stats,
                last_send,
                &waiter,
            );
        }
        let now = Instant::now();
        let late = now.saturating_duration_since(scheduled);
        if late > Duration::from_millis(1) {
            stats.late_over_1ms += 1;
            if late > Duration::from_millis(5) {
                stats.late_over_5ms += 1;
            }
        }
        stats.max_late_ms = stats.max_late_ms.max(late.as_secs_f64() * 1e3);
        send(prepared, scheduled);
        last_send = Some(now);
        if let Some(b) = boost.as_mut() {
            // Lower the I/O threads once the requests handed over have started (and been
            // written), if that happens before the next send needs them raised again.
            let until = match requests.get(i + 1) {
                Some(r) => (start + plan.offset(r.timestamp_ms))
                    .checked_sub(IoBoost::LEAD)
                    .unwrap_or(start),
                None => Instant::now() + IoBoost::SETTLE_MAX,
            };
            b.settle(i + 1, until, stop.flag());
        }
    }
    result(
        requests.len(),
        StopReason::Completed,
        stats,
        last_send,
        &waiter,
    )
}
