//! Reports: statistics, the console table, result files, plots, comparison and live progress.
//!
//! - [`stats`]: mean / median / std / linear-interpolation percentiles (numpy semantics).
//! - [`run_info`]: [`RunInfo`], what was run (settings, trace facts, start-up times).
//! - [`accumulator`]: the streaming [`Accumulator`] over records.
//! - [`summary`]: the [`Summary`] the accumulator produces; [`latency`]: its latency statistics
//!   with vLLM's flat keys.
//! - [`console`]: the vLLM-shaped result table ([`render_console`]); [`analysis`]: a trace
//!   analysis as text ([`render_analysis`]); [`format`]: number formatting.
//! - [`compare`]: two runs side by side ([`render_compare`]).
//! - [`files`]: `--result-dir` contents: summary.json, requests.csv, results.xlsx, plots,
//!   report.html.
//! - [`plots`]: PNG and SVG charts; [`html`]: the self-contained `report.html` of a run or a
//!   sweep.
//! - [`progress`]: the live progress line on stderr.
//! - [`slo`]: goodput SLO parsing.
//!
//! Metric definitions: `docs/metrics.md`.

pub mod accumulator;
pub mod analysis;
pub mod compare;
pub mod console;
pub mod files;
pub mod format;
pub mod html;
pub mod latency;
pub mod merge;
pub mod plots;
pub mod progress;
pub mod run_info;
pub mod sessions;
pub mod slo;
pub mod stats;
pub mod summary;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::record::{read_records, read_records_from, ReadStats};
pub use crate::util::{print_json, print_stdout};
pub use accumulator::Accumulator;
pub use analysis::render_analysis;
pub use compare::render_compare;
pub use console::render_console;
pub use files::{find_run_info, read_summary, write_result_dir, write_summary_json};
pub use progress::Progress;
pub use run_info::{now_rfc3339, PromptVerification, RunInfo, StartupTimes};
pub use slo::Slo;
pub use stats::{parse_percentile, MetricStats, Percentiles, DEFAULT_PERCENTILES};
pub use summary::Summary;

use crate::record::{Record, RecordReader, Status};

/// What to compute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportConfig {
    /// Percentiles to report for every latency metric.
    pub percentiles: Percentiles,
    /// Goodput SLO; empty = no goodput.
    pub slo: Slo,
}

/// Recompute a [`Summary`] from a saved records JSONL file, read as a stream (ITL from the
/// records' `itl_ms` when present). Without `info`, the run information is reconstructed from
/// the records as far as possible.
pub fn report_from_records(
    path: &Path,
    cfg: &ReportConfig,
    info: Option<RunInfo>,
) -> crate::Result<Summary> {
    let mut reader = RecordReader::open(path)?;
    let mut sum = RecordsSummary::new(cfg);
    for r in reader.by_ref() {
        sum.add(&r?);
    }
    Ok(sum.finish(reader.stats(), info))
}

/// [`report_from_records`] over records already in memory.
pub fn summarize_records(
    records: &[Record],
    st: &ReadStats,
    cfg: &ReportConfig,
    info: Option<RunInfo>,
) -> Summary {
    let mut sum = RecordsSummary::new(cfg);
    for r in records {
        sum.add(r);
    }
    sum.finish(st, info)
}

/// The summary of saved records: the accumulator plus what [`RunInfo`] can be rebuilt from.
struct RecordsSummary {
    acc: Accumulator,
    records: usize,
    never_sent: usize,
    dry_run: usize,
}

impl RecordsSummary {
    fn new(cfg: &ReportConfig) -> Self {
        RecordsSummary {
            acc: Accumulator::new(cfg),
            records: 0,
            never_sent: 0,
            dry_run: 0,
        }
    }

    fn add(&mut self, r: &Record) {
        self.acc.add(r, r.itl_ms.as_deref().unwrap_or(&[]));
        self.records += 1;
        self.never_sent += usize::from(r.sent_ms.is_none());
        self.dry_run += usize::from(r.status == Status::DryRun);
    }

    fn finish(self, st: &ReadStats, info: Option<RunInfo>) -> Summary {
        let info = info.unwrap_or_else(|| {
            let mut i = RunInfo::new();
            i.scheduled = self.records;
            i.never_sent = self.never_sent;
            i.dry_run = self.records > 0 && self.dry_run == self.records;
            i
        });
        let mut s = self.acc.finish(&info);
        if let Some(line) = st.partial_last_line {
            s.warnings.push(format!(
                "line {line} of the records file is incomplete (the run was killed?) and was \
                 ignored"
            ));
        }
        let ok = s.completed;
        if ok > 0 && st.with_itl == 0 {
            s.warnings.push(
                "records carry no per-chunk ITL (replay with --record-itl): ITL statistics and \
                 peak output tokens/s are incomplete"
                    .to_string(),
            );
        }
        s
    }
}
