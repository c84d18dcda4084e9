//! The subcommands, as functions returning the process exit code.

use crate::cli::{AnalyzeArgs, CompareArgs, ReplayArgs, ReportArgs, VerifyArgs};
use std::path::Path;

use crate::config::{Flavor, ReplayConfig};
use crate::report::{self, ReportConfig, Slo, Summary};

/// `replay` (and the `client` binary).
pub fn replay(args: ReplayArgs, flavor: Flavor) -> Result<u8, String> {
    let cfg = ReplayConfig::from_args(args, flavor)?;
    let out = crate::run::replay(cfg)?;
    Ok(out.exit_code as u8)
}

pub fn analyze(_args: AnalyzeArgs) -> Result<u8, String> {
    Err("analyze: not yet wired".into())
}

fn report_config(goodput: &[String], percentiles: &Option<Vec<f64>>) -> Result<ReportConfig, String> {
    let mut cfg = ReportConfig::default();
    if !goodput.is_empty() {
        cfg.slo = Slo::parse(goodput)?;
    }
    if let Some(p) = percentiles {
        if p.iter().any(|v| !(v.is_finite() && *v > 0.0 && *v <= 100.0)) {
            return Err("--metric-percentile values must be in (0, 100]".into());
        }
        if !p.is_empty() {
            cfg.percentiles = p.clone();
        }
    }
    Ok(cfg)
}

/// `report RECORDS.jsonl`: recompute the summary from saved records.
pub fn report(args: ReportArgs) -> Result<u8, String> {
    let cfg = report_config(&args.goodput, &args.metric_percentile)?;
    let info = report::find_run_info(&args.records);
    let summary = report::report_from_records(&args.records, &cfg, info).map_err(|e| format!("{e:#}"))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?);
    } else {
        println!("{}", report::render_console(&summary));
    }
    if let Some(dir) = &args.result_dir {
        let files = report::write_result_dir(dir, &summary, &args.records).map_err(|e| format!("{e:#}"))?;
        eprintln!("request-sim: wrote {} files to {}", files.len(), dir.display());
    }
    Ok(0)
}

/// A run given as a summary JSON or a records JSONL.
fn load_run(path: &Path) -> Result<Summary, String> {
    let as_records = || {
        let info = report::find_run_info(path);
        report::report_from_records(path, &ReportConfig::default(), info).map_err(|e| format!("{e:#}"))
    };
    if path.extension().is_some_and(|e| e == "jsonl") {
        return as_records();
    }
    report::read_summary(path).or_else(|e| as_records().map_err(|e2| format!("{}: neither a summary ({e:#}) nor records ({e2})", path.display())))
}

/// `compare A B`.
pub fn compare(args: CompareArgs) -> Result<u8, String> {
    let a = load_run(&args.a)?;
    let b = load_run(&args.b)?;
    println!("{}", report::render_compare(&a, &b));
    Ok(0)
}

pub fn verify_prompts(_args: VerifyArgs) -> Result<u8, String> {
    Err("verify-prompts: not yet wired".into())
}
