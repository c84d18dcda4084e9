//! The subcommands, as functions returning the process exit code: one file per subcommand
//! (`replay`, `analyze`, `transform` and its `--synthesize`, `report`, `compare`,
//! `verify-prompts`, `convert`, `config`; `sweep` is [`crate::sweep`]), and here what several of them
//! share: two traces analysed at the same cache sizes, and shards' records merged into one run.

mod analyze;
mod compare;
mod config;
mod convert;
mod experiment;
mod replay;
mod report;
mod synthesize;
mod transform;
mod verify;

pub use analyze::analyze;
pub use compare::{compare, load_side};
pub use config::config;
pub use convert::convert;
pub use experiment::run as experiment;
pub use replay::{replay, run_replay};
pub use report::report;
pub use transform::transform;
pub use verify::verify_prompts;

use crate::analyze::{analyze_columns, AnalyzeOptions, Columns};
use crate::stats::{self, ReportConfig, Summary};
use crate::Result;

/// Analyses of two traces with the same LRU sizes (`sizes`, else A's default sweep).
fn analyze_pair(
    a: Columns,
    b: Columns,
    sizes: &[u64],
) -> (crate::analyze::Analysis, crate::analyze::Analysis) {
    let mut opts = AnalyzeOptions {
        cache_sizes_tokens: sizes.to_vec(),
        ..AnalyzeOptions::default()
    };
    let aa = analyze_columns(a, &opts);
    opts.cache_sizes_tokens = aa.lru_sweep.iter().map(|p| p.capacity_tokens).collect();
    let ab = analyze_columns(b, &opts);
    (aa, ab)
}

/// Several shards' records merged into one run (exit code 1 when the union is not every
/// index exactly once).
fn merged_summary(
    paths: &[std::path::PathBuf],
    expected: Option<usize>,
    cfg: &ReportConfig,
) -> Result<(Summary, stats::merge::Merged)> {
    let files = crate::record::merge::expand_inputs(paths)?;
    let merged = stats::merge::merge_files(&files, expected, cfg)?;
    if merged.records.is_empty() {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        return Err(stats::no_records(&names.join(", "), &merged.stats));
    }
    let mut info = stats::RunInfo::new();
    info.outcome.scheduled = merged.union.expected.max(merged.records.len());
    info.outcome.never_sent = merged
        .records
        .iter()
        .filter(|r| r.sent_ms.is_none())
        .count();
    info.outcome.dry_run = !merged.records.is_empty()
        && merged
            .records
            .iter()
            .all(|r| r.status == crate::record::Status::DryRun);
    let mut summary = stats::summarize_records(&merged.records, &merged.stats, cfg, Some(info))?;
    if !merged.union.complete() {
        summary.warnings.push(format!(
            "the merged records are not every index 0..{} exactly once: {} missing, {} duplicated",
            merged.union.expected,
            merged.union.missing.len(),
            merged.union.duplicated.len()
        ));
    }
    Ok((summary, merged))
}
