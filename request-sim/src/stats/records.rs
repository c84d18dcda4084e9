//! The [`Summary`] of saved records: a records JSONL file read as a stream
//! ([`report_from_records`]) or records already in memory ([`summarize_records`]), with the
//! run information rebuilt from them when none is given.

use std::path::Path;

use super::accumulator::Accumulator;
use super::config::ReportConfig;
use super::run_info::RunInfo;
use super::summary::Summary;
use super::window::{self, MeasureWindow};
use crate::record::{ReadStats, Record, RecordReader, Status};

/// Recompute a [`Summary`] from a saved records JSONL file, read as a stream (ITL from the
/// records' `itl_ms` when present). Without `info`, the run information is reconstructed from
/// the records as far as possible. A file without a single record is an error: there is
/// nothing to summarise; so is a `--measure-window` no request was sent in. `auto` reads the
/// file twice (the first pass finds the steady span).
pub fn report_from_records(
    path: &Path,
    cfg: &ReportConfig,
    info: Option<RunInfo>,
) -> crate::Result<Summary> {
    let what = path.display().to_string();
    let mut sum = RecordsSummary::new(cfg);
    if cfg.window == Some(MeasureWindow::Auto) {
        let mut spans = Vec::new();
        for r in RecordReader::open(path)? {
            let r = r?;
            spans.extend(window::spans(std::slice::from_ref(&r)));
        }
        sum.auto_window(&what, &spans)?;
    }
    let mut reader = RecordReader::open(path)?;
    for r in reader.by_ref() {
        sum.add(&r?);
    }
    if sum.records == 0 {
        return Err(no_records(&what, reader.stats()));
    }
    sum.finish(&what, reader.stats(), info)
}

/// The error for records files (`what`) that hold no record.
pub fn no_records(what: &str, st: &ReadStats) -> crate::Error {
    let why = match st.partial_last_line {
        Some(line) => format!(
            " (line {line} is incomplete: the run was killed before its first record was written?)"
        ),
        None => " (the file is empty: did the run start?)".to_string(),
    };
    crate::Error::report(format!("{what}: no records{why}; nothing to report"))
}

/// [`report_from_records`] over records already in memory (`what` names them in errors).
pub fn summarize_records(
    records: &[Record],
    st: &ReadStats,
    cfg: &ReportConfig,
    info: Option<RunInfo>,
) -> crate::Result<Summary> {
    let what = "the records";
    let mut sum = RecordsSummary::new(cfg);
    if cfg.window == Some(MeasureWindow::Auto) {
        sum.auto_window(what, &window::spans(records))?;
    }
    for r in records {
        sum.add(r);
    }
    sum.finish(what, st, info)
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

    /// `--measure-window auto`: find the steady span of `spans` and count only inside it.
    fn auto_window(&mut self, what: &str, spans: &[(f64, f64)]) -> crate::Result<()> {
        let (a, b, auto) = window::steady_window(spans)
            .map_err(|e| crate::Error::report(format!("{what}: {e}")))?;
        self.acc.set_auto_window(a, b, auto);
        Ok(())
    }

    fn finish(self, what: &str, st: &ReadStats, info: Option<RunInfo>) -> crate::Result<Summary> {
        if let Some(e) = self.acc.window_error() {
            return Err(crate::Error::report(format!("{what}: {e}")));
        }
        let info = info.unwrap_or_else(|| {
            let mut i = RunInfo::new();
            i.outcome.scheduled = self.records;
            i.outcome.never_sent = self.never_sent;
            i.outcome.dry_run = self.records > 0 && self.dry_run == self.records;
            i
        });
        let mut s = self.acc.finish(&info);
        if let Some(line) = st.partial_last_line {
            s.warnings.push(format!(
                "line {line} of the records file is incomplete (the run was killed?) and was \
                 ignored"
            ));
        }
        // Streamed records without their ITL values: the accumulator's warning says so.
        Ok(s)
    }
}
