//! Scheduling: the feeder streams the planned requests to producer threads ([`feed`]), which
//! build bodies ahead of time ([`producer`]); the dispatcher releases them at trace time
//! ([`dispatcher`]) using a spin-then-sleep clock ([`clock`]). Around send times the I/O
//! threads run at real-time priority ([`priority`]) with the cores kept awake before sends
//! ([`awake`]). Closed-loop turns are sent at their release instants by one clock thread
//! ([`release`]).

pub mod awake;
pub mod clock;
pub mod dispatcher;
pub mod feed;
// Thread priorities need libc calls that no safe crate wraps per thread.
#[allow(unsafe_code)]
pub mod priority;
pub mod producer;
pub mod release;
pub mod sessions;
// adjtimex (the clock's error estimate) is a libc call no safe crate wraps.
#[allow(unsafe_code)]
pub mod start;
pub mod stop;

pub use dispatcher::{dispatch, DispatchPlan, DispatchResult, DispatchStats, CLOSED_AWAKE_BURST};
pub use feed::{Feed, FeedEnd};
pub use priority::{Realtime, RealtimeMode, RealtimeReport, SchedPolicy};
pub use producer::{
    BuildFn, Built, BuiltImages, Prepared, ProducerConfig, ProducerStats, Producers, Scratch,
};
pub use release::{ReleaseClock, ReleaseStats, Releases};
pub use sessions::{SessionGate, SessionOptions, ThinkTime, Timing};
pub use start::{StartAt, StartAtReport};
pub use stop::{Stop, StopReason};

/// Whether `cond` holds within 20 s (checked every 2 ms): tests wait on threads with it.
#[cfg(test)]
pub(crate) fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < until {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    false
}
