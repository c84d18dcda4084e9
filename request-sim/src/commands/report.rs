//! `report`: the summary recomputed from saved records, one file or several shards merged.

use super::merged_summary;
use crate::cli::ReportArgs;
use crate::config::report_config;
use crate::report;
use crate::stats::{self, ReportConfig, DEFAULT_PERCENTILES};
use crate::{Error, Result};

/// `report RECORDS.jsonl`: recompute the summary from saved records.
pub fn report(args: ReportArgs) -> Result<u8> {
    let cfg = report_config(&args.report, &DEFAULT_PERCENTILES)?;
    if crate::record::merge::is_multi(&args.records) || args.expected_requests.is_some() {
        return report_merged(&args, &cfg);
    }
    let records = &args.records[0];
    let info = report::find_run_info(records);
    let summary = stats::report_from_records(records, &cfg, info)?;
    if args.json {
        report::print_json(&summary)?;
    } else {
        report::print_stdout(&format!("{}\n", report::render_console(&summary)))?;
    }
    if let Some(dir) = &args.report.result_dir {
        let files =
            report::write_result_dir_exporting(dir, &summary, records, &args.report.export)?;
        eprintln!(
            "request-sim: wrote {} files to {}",
            files.len(),
            dir.display()
        );
    }
    Ok(0)
}

fn report_merged(args: &ReportArgs, cfg: &ReportConfig) -> Result<u8> {
    let (summary, merged) = merged_summary(&args.records, args.expected_requests, cfg)?;
    let table = report::merge::render_merge(&merged);
    if args.json {
        report::print_json(&summary)?;
        eprint!("{table}");
    } else {
        report::print_stdout(&format!("{}\n", report::render_console(&summary)))?;
        report::print_stdout(&table)?;
    }
    if let Some(dir) = &args.report.result_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        let path = dir.join("records.jsonl");
        crate::record::write_records(&path, &merged.records)?;
        let files = report::write_result_dir_exporting(dir, &summary, &path, &args.report.export)?;
        eprintln!(
            "request-sim: wrote {} files and the merged records.jsonl to {}",
            files.len(),
            dir.display()
        );
    }
    Ok(if merged.union.complete() { 0 } else { 1 })
}
