//! Other tools' result files, written from a run's records and summary (`--export`), so that
//! scripts and dashboards built on those tools read a request-sim run unchanged:
//!
//! - [`aiperf`]: AIPerf 0.13's `profile_export.jsonl` (one `MetricRecordInfo` per request),
//!   with [`aiperf_aggregate`] its `profile_export_aiperf.json` and `.csv`;
//! - [`inputs`]: AIPerf's `inputs.json`, the request bodies as sent (filled while the
//!   producers build them);
//! - [`vllm`]: the JSON `vllm bench serve --save-result --save-detailed` writes.
//!
//! What only request-sim measures (send drift, prompt exactness, server samples) stays in
//! request-sim's own files (`summary.json`, the records); these files hold only the other
//! tool's names, units and layout. Field meanings: `docs/coming-from-aiperf.md`.

pub mod aiperf;
pub mod aiperf_aggregate;
pub mod inputs;
pub mod vllm;

use std::path::{Path, PathBuf};

use crate::record::Record;
use crate::stats::Summary;

/// A result-file layout of another tool (`--export`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum ExportKind {
    /// AIPerf's `profile_export.jsonl`, `profile_export_aiperf.json`, `profile_export_aiperf.csv`
    /// (and `inputs.json` on a replay).
    Aiperf,
    /// `vllm bench serve --save-result --save-detailed`'s JSON: `vllm-bench.json`.
    VllmBench,
}

/// The file name of the vLLM-shaped result.
pub const VLLM_BENCH_FILE: &str = "vllm-bench.json";

/// The run's start as nanoseconds since the Unix epoch (`summary.run.started_at`), or 0 when
/// the summary does not say (records re-read without their run facts).
pub fn start_unix_ns(summary: &Summary) -> i128 {
    summary
        .run
        .started_at
        .as_deref()
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .map(|t| t.as_nanosecond())
        .unwrap_or(0)
}

/// Write the files of each layout of `kinds` into `dir` (created if needed) from `summary` and
/// `records`; returns the files written.
pub fn write_exports(
    dir: &Path,
    kinds: &[ExportKind],
    summary: &Summary,
    records: &[Record],
) -> crate::Result<Vec<PathBuf>> {
    if kinds.is_empty() {
        return Ok(Vec::new());
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::Error::io(format!("cannot create {}", dir.display()), e))?;
    let mut files = Vec::new();
    for kind in kinds {
        match kind {
            ExportKind::Aiperf => {
                let p = dir.join(aiperf::RECORDS_FILE);
                aiperf::write_records(&p, summary, records)?;
                files.push(p);
                let agg = aiperf_aggregate::Aggregates::of(summary, records);
                let p = dir.join(aiperf_aggregate::JSON_FILE);
                agg.write_json(&p, summary)?;
                files.push(p);
                let p = dir.join(aiperf_aggregate::CSV_FILE);
                agg.write_csv(&p)?;
                files.push(p);
            }
            ExportKind::VllmBench => {
                let p = dir.join(VLLM_BENCH_FILE);
                vllm::write(&p, summary, records)?;
                files.push(p);
            }
        }
    }
    Ok(files)
}

/// Write `bytes` to `path` whole or not at all.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> crate::Result<()> {
    use std::io::Write;
    let mut out = crate::util::OutputFile::create(path)?;
    out.write_all(bytes)
        .map_err(|e| crate::Error::io(format!("cannot write {}", path.display()), e))?;
    out.commit()
}
