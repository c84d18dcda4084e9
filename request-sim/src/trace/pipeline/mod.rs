//! The trace rules of `docs/traces.md`, as stages a row goes through, and the transforms built
//! on them.
//!
//! - `stages.rs`: the one implementation of the rules, as stages: in file order (`delay`s
//!   resolved, timestamps flagged, hash ids normalised, reshape copies), then a reorder window
//!   into time order, then in time order (rebase, Bailian turns filled in, slice, `session_id`
//!   turns linked). [`Planned`] is one request as the replay takes it.
//! - Its two forms: `stream.rs` ([`TraceStream`], a bounded window, memory independent of the
//!   trace's length) and `load.rs` (the whole trace, the stream collected, plus the passes that
//!   need the whole file).
//! - `session/`: every session rule (the pipeline's session stages, the whole-file passes,
//!   `--live-history`, sessions inferred from content).
//! - `reshape.rs`: the transforms of `request-sim transform` (amplify, sample, cap, re-time, cap
//!   idle gaps, scale prompts); `synth.rs`: fit a trace and generate a new one;
//!   `shard.rs`: a scale-out shard's share; `plan.rs`: an agent corpus laid out as the whole
//!   trace a replay takes.

pub mod load;
pub mod plan;
pub mod reshape;
pub mod session;
pub mod shard;
pub mod stages;
pub mod stream;
pub mod synth;

pub use stages::{Planned, ReorderWindow};
pub use stream::TraceStream;
