//! What the export layouts share: which layouts there are ([`ExportKind`]), the run's start as
//! wall-clock nanoseconds, and writing a file whole.

use std::path::Path;

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

/// Write `bytes` to `path` whole or not at all.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> crate::Result<()> {
    use std::io::Write;
    let mut out = crate::util::OutputFile::create(path)?;
    out.write_all(bytes)
        .map_err(|e| crate::Error::io(format!("cannot write {}", path.display()), e))?;
    out.commit()
}
