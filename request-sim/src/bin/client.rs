//! `client`: request-sim with the blitz-serving trace-replayer command line and defaults, so
//! existing scripts run unchanged (`request_sim::compat::blitz`).
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use mimalloc::MiMalloc;
use request_sim::compat::blitz::{self, ClientCli};

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() -> ExitCode {
    // `--config FILE`, as for `request-sim replay`.
    let argv =
        request_sim::runfile::expand(&ClientCli::command(), std::env::args_os().collect(), 1)
            .and_then(|argv| blitz::run(ClientCli::parse_from(argv)));
    match argv {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("client: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
