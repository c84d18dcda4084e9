//! The simulated engine: one event-driven scheduler loop (a single tokio task) doing continuous
//! batching with chunked prefill, a token budget per step, a prefix cache, and preemption by
//! recomputation when KV blocks run out, in the manner of vLLM's V1 scheduler.
//!
//! Requests come in over an unbounded channel. Each step the loop picks the work, sleeps for the
//! step's simulated duration, then applies it: computed tokens advance, finished prefills and
//! decodes each produce one output token. Progress is published to the request's
//! [`ReqShared`] (atomics + a `Notify`), so delivering a token costs an atomic store and a wake-up,
//! never an allocation or a message.
//!
//! - `progress`: what the engine and the HTTP side share of one request ([`ReqShared`],
//!   [`NewRequest`]) and the output token ids;
//! - `scheduler`: the engine's state and one step (schedule, then complete);
//! - `task`: the engine as a tokio task on the server's runtime ([`spawn_engine`],
//!   [`EngineHandle`]);
//! - `offline`: the same engine in virtual time ([`simulate`]).

mod offline;
mod progress;
mod scheduler;
mod task;

pub use offline::{simulate, OfflineRequest, OfflineResult};
pub use progress::{output_token, CancelOnDrop, NewRequest, Progress, ReqShared};
pub use task::{spawn_engine, EngineHandle};
