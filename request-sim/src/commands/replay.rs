//! `replay`: one run, or a repeat set with `--repeat N`.

use crate::cli::ReplayArgs;
use crate::config::ReplayConfig;
use crate::Result;

/// `replay` (`--repeat N`: a repeat set, [`crate::repeat`]).
pub fn replay(args: ReplayArgs) -> Result<u8> {
    if let Some(n) = crate::repeat::count(&args)? {
        return crate::repeat::replay(args, n);
    }
    run_replay(ReplayConfig::from_args(args)?)
}

/// Run a replay with validated settings (`replay` and the `compat` front ends): its exit code.
pub fn run_replay(cfg: ReplayConfig) -> Result<u8> {
    let out = crate::run::replay(cfg)?;
    Ok(out.exit_code as u8)
}
