//! The sweep's own flags checked (the points, the search, the target), the replay flags a
//! sweep sets per point refused, the limits every point gets when not given, and the sweep's
//! directory.

use std::path::PathBuf;

use crate::cli::{ReplayArgs, SweepArgs};
use crate::{Error, Result};

/// Time limit of a point when `--time-in-secs` is not given.
pub const DEFAULT_POINT_SECS: f64 = 300.0;
/// Request limit of a point when `--max-requests` is not given.
pub const DEFAULT_POINT_REQUESTS: usize = 2000;

/// The sweep's directory: `--sweep-dir`, else `results/sweep-<UTC time>`.
pub(super) fn sweep_dir(args: &SweepArgs) -> PathBuf {
    args.sweep_dir.clone().unwrap_or_else(|| {
        let ts = crate::stats::file_stamp();
        PathBuf::from(format!("results/sweep-{ts}"))
    })
}

/// The replay flags a sweep sets per point are refused: given, they would be ignored.
fn check_point_flags(r: &ReplayArgs) -> Result<()> {
    let per_point = |flag: &str, what: &str| {
        Err(Error::config(format!(
            "{flag} is set per point by the sweep ({what}): {}",
            if flag == "--scale-factor" {
                "give the points with --scale-factors, or let the sweep search"
            } else {
                "give the sweep's directory with --sweep-dir"
            }
        )))
    };
    // 1 is the default: the same as not given.
    if r.schedule.scale_factor != 1.0 {
        return per_point("--scale-factor", "each point's scale");
    }
    if r.output.report.result_dir.is_some() {
        return per_point("--result-dir", "SWEEP_DIR/scale-F/");
    }
    if r.output.output_path.is_some() {
        return per_point("--output-path", "SWEEP_DIR/scale-F/records.jsonl");
    }
    if r.output.summary_path.is_some() {
        return per_point("--summary-path", "SWEEP_DIR/scale-F/summary.json");
    }
    Ok(())
}

/// `--search LO,HI` as a pair, and the other flags checked.
pub(super) fn check_args(args: &SweepArgs) -> Result<Option<(f64, f64)>> {
    if args.gpus == Some(0) {
        return Err(Error::config("--gpus must be at least 1"));
    }
    let positive = |f: f64| f.is_finite() && f > 0.0;
    for &f in &args.scale_factors {
        if !positive(f) {
            return Err(Error::config(format!(
                "--scale-factors: {f} is not a positive number"
            )));
        }
    }
    let mut seen: Vec<String> = Vec::new();
    for &f in &args.scale_factors {
        let name = f.to_string();
        if seen.contains(&name) {
            return Err(Error::config(format!(
                "--scale-factors: scale {f} is given twice (its second point would overwrite the first's directory scale-{f})"
            )));
        }
        seen.push(name);
    }
    let users = &args.replay.trace.users;
    if let Some((_, &u)) = users
        .iter()
        .enumerate()
        .find(|&(k, u)| users[..k].contains(u))
    {
        return Err(Error::config(format!(
            "--users: {u} is given twice (its second point would overwrite the first's directory users-{u})"
        )));
    }
    check_point_flags(&args.replay)?;
    if args.replay.trace.users.len() > 1
        && (!args.scale_factors.is_empty() || !args.search.is_empty())
    {
        return Err(Error::config(
            "sweep --users N1,N2,... sweeps the users at scale 1: give it without --scale-factors or --search",
        ));
    }
    if !(args.target > 0.0 && args.target <= 1.0) {
        return Err(Error::config(format!(
            "--target must be in (0, 1], got {}",
            args.target
        )));
    }
    if !(args.tolerance.is_finite() && args.tolerance > 0.0) {
        return Err(Error::config(format!(
            "--tolerance must be a positive fraction (0.05 = 5%), got {}",
            args.tolerance
        )));
    }
    if args.max_points == 0 {
        return Err(Error::config("--max-points must be at least 1"));
    }
    match args.search.as_slice() {
        [] => Ok(None),
        &[lo, hi] if positive(lo) && positive(hi) && lo < hi => Ok(Some((lo, hi))),
        other => Err(Error::config(format!(
            "--search takes LO,HI: two positive scale factors, LO below HI (got {other:?})"
        ))),
    }
}
