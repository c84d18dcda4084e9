//! Scheduling: producer threads build bodies ahead of time ([`producer`]), the dispatcher
//! releases them at trace time ([`dispatcher`]) using a spin-then-sleep clock ([`clock`]).

pub mod clock;
pub mod dispatcher;
// Thread priorities need libc calls that no safe crate wraps per thread.
#[allow(unsafe_code)]
pub mod priority;
pub mod producer;
pub mod sessions;
// adjtimex (the clock's error estimate) is a libc call no safe crate wraps.
#[allow(unsafe_code)]
pub mod start;
pub mod stop;

pub use dispatcher::{dispatch, DispatchPlan, DispatchResult, DispatchStats};
pub use priority::{Realtime, RealtimeMode, RealtimeReport, SchedPolicy};
pub use producer::{BuildFn, Prepared, ProducerConfig, ProducerStats, Producers, Scratch};
pub use sessions::{SessionGate, SessionOptions, ThinkTime, Timing};
pub use start::{StartAt, StartAtReport};
pub use stop::{Stop, StopReason};
