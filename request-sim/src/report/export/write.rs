//! `--export`: the files of each layout asked for, written into the result directory.

use std::path::{Path, PathBuf};

use super::common::{ExportKind, VLLM_BENCH_FILE};
use super::{aiperf, aiperf_aggregate, vllm};
use crate::record::Record;
use crate::stats::Summary;

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
