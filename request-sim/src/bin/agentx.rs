//! `agentx`: request-sim with AgentX's command line (`agentx profile ...`: AIPerf's, with
//! `--scenario agentx` by default; see `request_sim::compat::aiperf` and docs/agentx.md).
use std::process::ExitCode;

use mimalloc::MiMalloc;
use request_sim::compat::aiperf;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn main() -> ExitCode {
    match aiperf::run_agentx(std::env::args().collect()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("agentx: error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
