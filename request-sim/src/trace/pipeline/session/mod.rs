//! Sessions (conversations), one type whatever the source format, and every session rule of
//! the trace in this module:
//!
//! - Bailian: a chain of `parent_chat_id` links is one session, named after its root's
//!   `chat_id`; a turn whose parent is not in the file becomes a root (counted as an orphan);
//!   a missing `turn` is the parent's turn + 1.
//! - `messages` and generic rows: rows sharing a `session_id` are the turns of one session, in
//!   replay (time) order; a `delay` row is at its session's previous turn (in file order) plus
//!   the delay.
//!
//! Each request of a session knows its session id (the key a scale-out shards on), its turn
//! (1-based), its parent request (the previous turn, when it is in the replayed slice) and the
//! trace's own think time before it (the row's `delay`, else the gap between the parent's and
//! its own trace time).
//!
//! - `stages.rs`: the rules that work row by row, as stages of the trace pipeline
//!   (`trace/pipeline/stages.rs`): `delay`s, missing Bailian turns, `session_id` links.
//! - `whole.rs`: the rules that need the whole trace (`trace/pipeline/load.rs`): Bailian parent chains,
//!   the sessions over the kept requests and the turns slicing cut.
//! - `infer.rs`: sessions inferred from content (a request that extends an earlier one is its
//!   next turn), over messages (`convert`) or hash ids (`--infer-sessions`).
//! - [`history`]: `--live-history`, where each turn's messages hold its earlier turns' answers.
//!
//! Not here: the run-time gate that releases a turn after its parent's answer
//! (`schedule/sessions.rs`) and the summary of sessions (`stats/sessions.rs`).

pub mod history;
mod infer;
mod stages;
mod whole;

pub use infer::{BlockSessions, SessionIds};
pub(crate) use stages::{Delays, Links, Turns};
pub(crate) use whole::{whole_trace, RowSession};

pub use crate::trace::model::{AgentTurn, SessionStats, SessionTurn, Sessions};
