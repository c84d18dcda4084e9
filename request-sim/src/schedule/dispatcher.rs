//! The dispatcher: takes prepared requests in trace order and releases each at
//! `start + timestamp / scale_factor`.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::clock::wait_until;
use super::producer::{Prepared, Producers};
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

/// Why dispatching ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every request was dispatched.
    Completed,
    /// `--time-in-secs` reached.
    TimeLimit,
    /// Interrupted (signal) or early stop on errors.
    Stopped,
    /// A producer thread died (a bug): the rest could not be built.
    ProducerFailed,
}

/// What the dispatcher did.
#[derive(Debug, Clone)]
pub struct DispatchResult {
    pub dispatched: usize,
    pub reason: StopReason,
}

/// Dispatch `requests` in order; `send(prepared, scheduled)` hands one to the runtime.
pub fn dispatch(
    requests: &[TraceRequest],
    producers: &Producers,
    start: Instant,
    plan: &DispatchPlan,
    stop: &AtomicBool,
    mut send: impl FnMut(Prepared, Instant),
) -> DispatchResult {
    for (i, req) in requests.iter().enumerate() {
        let offset = plan.offset(req.timestamp_ms);
        if let Some(limit) = plan.time_limit {
            if offset >= limit {
                // Wait out the time limit so in-flight requests get the full window.
                let _ = wait_until(start + limit, plan.spin, stop);
                return DispatchResult {
                    dispatched: i,
                    reason: StopReason::TimeLimit,
                };
            }
        }
        let scheduled = start + offset;
        // Take the body first (it is normally ready long before its time).
        let prepared = match producers.try_take(i) {
            Some(p) => p,
            None => match producers.take(i) {
                Some(p) => p,
                None => {
                    return DispatchResult {
                        dispatched: i,
                        reason: StopReason::ProducerFailed,
                    }
                }
            },
        };
        if !wait_until(scheduled, plan.spin, stop) {
            return DispatchResult {
                dispatched: i,
                reason: StopReason::Stopped,
            };
        }
        send(prepared, scheduled);
    }
    DispatchResult {
        dispatched: requests.len(),
        reason: StopReason::Completed,
    }
}
