//! Front ends with other tools' command lines, each mapped onto the same settings as
//! `request-sim replay` ([`crate::config::ReplayConfig`]):
//!
//! - [`blitz`]: the `client` binary, the command line and defaults of blitz-serving's
//!   trace-replayer (the anchor);
//! - [`ucm`]: the `trace_replay` binary, the command line of UCM's
//!   `benchmarks/trace_replay.py`;
//! - [`aiperf`]: the `aiperf` binary, the command line of AIPerf's `aiperf profile` for trace
//!   replay (the AIPerf flags it accepts without applying: [`aiperf_flags`]).

pub mod aiperf;
pub mod aiperf_flags;
pub mod blitz;
pub mod ucm;
