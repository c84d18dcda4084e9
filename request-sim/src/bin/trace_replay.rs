//! `trace_replay`: request-sim with the command line of UCM's `benchmarks/trace_replay.py`
//! (see `request_sim::compat::ucm` and the README section "Coming from UCM trace_replay.py").
use std::process::ExitCode;

use clap::Parser;
use mimalloc::MiMalloc;
use request_sim::compat::ucm::{self, UcmArgs};

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() -> ExitCode {
    match ucm::run(UcmArgs::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("trace_replay: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
