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

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

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

use crate::record::{Record, Status};

/// What to compute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportConfig {
    /// Percentiles to report for every latency metric.
    pub percentiles: Percentiles,
    /// Goodput SLO; empty = no goodput.
    pub slo: Slo,
}

/// What [`read_records`] found besides the records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadStats {
    /// Lines read (including blank ones).
    pub lines: usize,
    pub records: usize,
    /// 1-based line number of an incomplete last line that was ignored (the writing process
    /// was killed mid-line).
    pub partial_last_line: Option<usize>,
    /// Records that carry per-chunk ITL values.
    pub with_itl: usize,
}

/// Read a records JSONL file. Blank lines are skipped; an unparsable last line without a
/// trailing newline is taken as cut off by a killed process and reported in
/// [`ReadStats::partial_last_line`]; any other bad line is an error naming `file:line`.
pub fn read_records(path: &Path) -> crate::Result<(Vec<Record>, ReadStats)> {
    let file = std::fs::File::open(path)
        .map_err(|e| crate::Error::io(format!("cannot open {}", path.display()), e))?;
    read_records_from(BufReader::new(file), &path.display().to_string())
}

/// [`read_records`] over any reader; `name` is used in error messages.
pub fn read_records_from<R: Read>(
    mut reader: BufReader<R>,
    name: &str,
) -> crate::Result<(Vec<Record>, ReadStats)> {
    let mut records = Vec::new();
    let mut st = ReadStats::default();
    // Bytes, not `read_line`: a line cut by a kill may end inside a UTF-8 character, which
    // must count as a partial last line, not as a read error.
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| crate::Error::io(format!("{name}:{}: read error", st.lines + 1), e))?;
        if n == 0 {
            break;
        }
        st.lines += 1;
        let complete = buf.ends_with(b"\n");
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Record>(line) {
            Ok(r) => {
                if r.itl_ms.is_some() {
                    st.with_itl += 1;
                }
                records.push(r)
            }
            Err(e) => {
                if !complete {
                    // Last line (no newline follows): cut off when the writer was killed.
                    st.partial_last_line = Some(st.lines);
                    break;
                }
                return Err(crate::Error::report(format!(
                    "{name}:{}: invalid record: {e}",
                    st.lines
                )));
            }
        }
    }
    st.records = records.len();
    Ok((records, st))
}

/// Recompute a [`Summary`] from a saved records JSONL file (ITL from the records' `itl_ms`
/// when present). Without `info`, the run information is reconstructed from the records as
/// far as possible.
pub fn report_from_records(
    path: &Path,
    cfg: &ReportConfig,
    info: Option<RunInfo>,
) -> crate::Result<Summary> {
    let (records, st) = read_records(path)?;
    Ok(summarize_records(&records, &st, cfg, info))
}

/// [`report_from_records`] over records already in memory.
pub fn summarize_records(
    records: &[Record],
    st: &ReadStats,
    cfg: &ReportConfig,
    info: Option<RunInfo>,
) -> Summary {
    let mut acc = Accumulator::new(cfg);
    for r in records {
        acc.add(r, r.itl_ms.as_deref().unwrap_or(&[]));
    }
    let info = info.unwrap_or_else(|| {
        let mut i = RunInfo::new();
        i.scheduled = records.len();
        i.never_sent = records.iter().filter(|r| r.sent_ms.is_none()).count();
        i.dry_run = !records.is_empty() && records.iter().all(|r| r.status == Status::DryRun);
        i
    });
    let mut s = acc.finish(&info);
    if let Some(line) = st.partial_last_line {
        s.warnings.push(format!(
            "line {line} of the records file is incomplete (the run was killed?) and was ignored"
        ));
    }
    let ok = s.completed;
    if ok > 0 && st.with_itl == 0 {
        s.warnings.push(
            "records carry no per-chunk ITL (replay with --record-itl): ITL statistics and peak \
             output tokens/s are incomplete"
                .to_string(),
        );
    }
    s
}
