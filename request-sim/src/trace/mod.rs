//! Traces: every supported format read into one [`Trace`] of [`TraceRequest`]s (or, for an
//! agent corpus, a [`Corpus`] of session trees), then put through the trace rules.
//!
//! Three rooms, the data flowing one way (`model` ← `formats` ← `pipeline`):
//! - `model/` — the shared types, a leaf that imports nothing of `trace/`: a format's facts
//!   ([`TraceFormat`], a handle on its [`FormatInfo`]), one request and a whole trace, the session facts, a `messages` row's
//!   chat request, and the agent corpus (session trees of a main agent and its subagents).
//!   `row.rs` (a row as a reader hands it over), `options.rs` (the load and reshape settings)
//!   and `error.rs` sit beside it.
//! - `formats/` — one unit per format, each a file that declares its facts, its recogniser and
//!   its reader (`registry.rs` lists them); `open.rs` is the one front door (a path or a
//!   reader → rows or an agent corpus); `log/` reads request logs for `convert`, `write.rs`
//!   writes a trace.
//! - `pipeline/` — the trace rules of `docs/traces.md` as stages a row goes through
//!   (`stages.rs`), in two forms: streamed through a bounded reorder window (`stream.rs`) or
//!   collected whole (`load.rs`); the session rules (`session/`), the transforms of `transform`
//!   (`reshape.rs`), synthesis (`synth.rs`), a scale-out shard's share (`shard.rs`) and an
//!   agent corpus laid out as a trace (`plan.rs`).
//!
//! The analysis of a trace (`analyze`, the ideal prefix-cache hit ratio) is `crate::analyze`.

pub mod demo;
pub mod error;
pub mod formats;
pub mod model;
pub mod options;
pub mod pipeline;
pub mod row;

pub use error::{RowError, TraceError};
pub(crate) use formats::open::{open, Opened};
pub use formats::registry::detect_format;
#[cfg(test)]
pub(crate) use model::test_request;
pub use model::{
    ChatPayload, Corpus, FormatInfo, Image, Images, Reasoning, SessionInfo, SessionSource,
    SessionStats, SessionTurn, Sessions, Timestamps, Trace, TraceFormat, TraceRequest, TraceStats,
    Yields,
};
pub use options::{
    Arrivals, LoadOptions, RateSeries, Reshape, DEFAULT_MAX_LINE_BYTES, MAX_LENGTH_TOKENS,
};
pub use pipeline::load::{load, parse_reader};
pub use pipeline::session::history;
pub use pipeline::{Planned, ReorderWindow, TraceStream};
