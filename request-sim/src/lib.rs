//! request-sim: replay production LLM request traces against inference servers.
//!
//! Data flows one way:
//! `trace` (formats -> one [`trace::TraceRequest`] type) ->
//! `prompt` (vocabulary, block builder, chat-template calibration) ->
//! `schedule` (producer threads, bounded channel, dispatcher clock) ->
//! `backend` (request bodies, HTTP, SSE/JSON parsing per API) ->
//! `record` (one [`record::Record`] per scheduled request; the records file's writer, reader
//! and merge) -> `stats` (the summary's statistics) -> `report` (console table, files, plots,
//! HTML); `observe` reads the servers' `/metrics`.
//!
//! `util` holds the few helpers below every stage (percentiles).
//!
//! `convert` turns request logs into anonymized traces (beside the flow: it reads logs with
//! `trace`, counts tokens with `prompt` or the server's `/tokenize`).
//!
//! `runfile` turns a run file (`--config`, a run's summary, an experiment) into command-line
//! words and a run's settings back into its summary; `cli` parses the command line, `config`
//! validates it once, and `run` orchestrates a replay;
//! `compat` maps other tools' command lines (blitz-serving's trace-replayer, UCM's
//! `trace_replay.py`) onto the same settings.

pub mod error;
pub use error::{Error, Result};

pub mod analyze;
pub mod backend;
pub mod observe;
pub mod prompt;
pub mod record;
pub mod report;
pub mod scenario;
pub mod schedule;
pub mod stats;
pub mod trace;
pub mod util;

pub mod cli;
pub mod commands;
pub mod compat;
pub mod config;
pub mod convert;
pub mod repeat;
pub mod run;
pub mod runfile;
pub mod sweep;
