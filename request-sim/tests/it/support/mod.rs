//! The one support module of the integration tests (declared once in `main.rs`): running a
//! replay in-process or the built binaries, command lines, reading and writing records, small
//! generated traces and fixtures, llm-sim and a raw HTTP server on 127.0.0.1, deterministic
//! test data and the plain statistics the tests recompute.
//!
//! Test files take what they need with `use crate::support::*` (or by name); nothing here is a
//! test. When the settings change shape, only `args.rs` should have to follow.

mod args;
mod data;
mod files;
mod raw_server;
mod run;
mod sim;
mod stats;
mod synthetic;

pub use args::*;
pub use data::*;
pub use files::*;
pub use raw_server::*;
pub use run::*;
pub use sim::*;
pub use stats::*;
pub use synthetic::*;
