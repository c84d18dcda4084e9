//! `client`: request-sim with the blitz-serving trace-replayer command line and defaults, so
//! existing scripts run unchanged (`request_sim::compat::blitz`).
use std::process::ExitCode;

use clap::Parser;
use mimalloc::MiMalloc;
use request_sim::compat::blitz::{self, ClientCli};

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() -> ExitCode {
    match blitz::run(ClientCli::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("client: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
