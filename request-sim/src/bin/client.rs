//! `client`: request-sim with the blitz-serving trace-replayer command line and defaults, so
//! existing scripts run unchanged.
use std::process::ExitCode;

use clap::Parser;
use mimalloc::MiMalloc;
use request_sim::cli::ClientCli;
use request_sim::config::Flavor;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() -> ExitCode {
    let cli = ClientCli::parse();
    match request_sim::commands::replay(cli.args, Flavor::Client) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("client: error: {e}");
            ExitCode::from(1)
        }
    }
}
