//! The subcommands, as functions returning the process exit code.

use crate::cli::{AnalyzeArgs, CompareArgs, ReplayArgs, ReportArgs, VerifyArgs};
use crate::config::{Flavor, ReplayConfig};

/// `replay` (and the `client` binary).
pub fn replay(args: ReplayArgs, flavor: Flavor) -> Result<u8, String> {
    let cfg = ReplayConfig::from_args(args, flavor)?;
    let out = crate::run::replay(cfg)?;
    Ok(out.exit_code as u8)
}

pub fn analyze(_args: AnalyzeArgs) -> Result<u8, String> {
    Err("analyze: not yet wired".into())
}

pub fn report(_args: ReportArgs) -> Result<u8, String> {
    Err("report: not yet wired".into())
}

pub fn compare(_args: CompareArgs) -> Result<u8, String> {
    Err("compare: not yet wired".into())
}

pub fn verify_prompts(_args: VerifyArgs) -> Result<u8, String> {
    Err("verify-prompts: not yet wired".into())
}
