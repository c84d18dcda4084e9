//! `aiperf`: request-sim with the command line of AIPerf's `aiperf profile` for trace replay
//! (see `request_sim::compat::aiperf` and docs/coming-from-aiperf.md).
use std::process::ExitCode;

use mimalloc::MiMalloc;
use request_sim::compat::aiperf;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() -> ExitCode {
    match aiperf::run(std::env::args().collect()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("aiperf: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
