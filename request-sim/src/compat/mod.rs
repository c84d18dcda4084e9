//! Front ends with other tools' command lines, each mapped onto the same settings as
//! `request-sim replay` ([`crate::config::ReplayConfig`]):
//!
//! - [`blitz`]: the `client` binary, the command line and defaults of blitz-serving's
//!   trace-replayer (the anchor);
//! - [`ucm`]: the `trace_replay` binary, the command line of UCM's
//!   `benchmarks/trace_replay.py`.

pub mod blitz;
pub mod ucm;
