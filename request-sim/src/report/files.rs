//! `--result-dir` contents: `summary.json`, `requests.csv`, `results.xlsx` (sheets "Metrics"
//! and "Details"), the plots of [`super::plots`] (the servers' too, from the run's
//! `server_metrics.jsonl`) and the page of [`super::html`] that holds them all.

use std::path::{Path, PathBuf};

use rust_xlsxwriter::{Format, Workbook};

use super::format::micros;
use super::plots;
use crate::record::{read_records, Record};
use crate::stats::{Metric, RunInfo, Summary};

/// Read a `summary.json` written by [`write_result_dir`] (or `--summary-path`).
pub fn read_summary(path: &Path) -> crate::Result<Summary> {
    let text = std::fs::read_to_string(path).map_err(|e| crate::Error::read(path, e))?;
    serde_json::from_str(&text).map_err(|e| {
        crate::Error::report(format!(
            "{}: not a request-sim summary: {e}",
            path.display()
        ))
    })
}

/// The run information saved next to a records file, if any: the `run` object of
/// `<records>.summary.json` (the default `--summary-path`) or of `summary.json` in the same
/// folder. `request-sim report` uses it so a re-summarised run keeps its settings.
pub fn find_run_info(records_jsonl: &Path) -> Option<RunInfo> {
    let mut beside = records_jsonl.as_os_str().to_owned();
    beside.push(".summary.json");
    let candidates = [
        PathBuf::from(beside),
        records_jsonl
            .parent()
            .map(|d| d.join("summary.json"))
            .unwrap_or_default(),
    ];
    candidates
        .iter()
        .filter(|p| p.is_file())
        .find_map(|p| read_summary(p).ok())
        .map(|s| s.run)
}

/// Write `summary` as pretty JSON (creating the parent directory if needed).
pub fn write_summary_json(path: &Path, summary: &Summary) -> crate::Result<()> {
    crate::util::write_json(path, summary)
}

/// One cell of a detail row.
enum Cell {
    Num(f64),
    Text(String),
    Empty,
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Num(v) => format!("{v}"),
            Cell::Text(s) => s.clone(),
            Cell::Empty => String::new(),
        }
    }
}

/// A number, or an empty cell when there is none.
fn n<T: Into<f64>>(v: Option<T>) -> Cell {
    v.map_or(Cell::Empty, |v| Cell::Num(v.into()))
}

/// A column of `requests.csv` and the Details sheet: a field of the record (its header and
/// cell), or a latency metric (its column and value in `stats/latency.rs`, at the records'
/// microsecond resolution).
#[derive(Clone, Copy)]
enum Column {
    Field(&'static str, fn(&Record) -> Cell),
    Metric(Metric),
}

/// The columns in order; the metrics with a column not placed here follow at the end.
const COLUMNS: [Column; 30] = [
    Column::Field("index", |r| Cell::Num(r.index as f64)),
    Column::Field("line", |r| Cell::Num(r.line as f64)),
    Column::Field("timestamp_ms", |r| Cell::Num(r.timestamp)),
    Column::Field("scheduled_ms", |r| Cell::Num(r.scheduled_ms)),
    Column::Field("sent_ms", |r| n(r.sent_ms)),
    Column::Field("drift_ms", |r| n(r.drift_ms)),
    Column::Field("status", |r| Cell::Text(r.status.as_str().to_string())),
    Column::Field("http_status", |r| n(r.http_status)),
    Column::Field("error", |r| r.error.clone().map_or(Cell::Empty, Cell::Text)),
    Column::Metric(Metric::Ttft),
    Column::Metric(Metric::Ttfc),
    Column::Metric(Metric::E2el),
    Column::Field("done_ms", |r| n(r.done_ms)),
    Column::Metric(Metric::Tpot),
    Column::Field("itl_count", |r| {
        n(r.itl_ms.as_ref().map(|v| v.len() as f64))
    }),
    Column::Field("input_length", |r| Cell::Num(r.input_length.into())),
    Column::Field("prompt_tokens", |r| n(r.prompt_tokens)),
    Column::Field("cached_tokens", |r| n(r.cached_tokens)),
    Column::Field("output_length", |r| Cell::Num(r.output_length.into())),
    Column::Field("output_tokens", |r| n(r.output_tokens)),
    Column::Field("output_tokens_source", |r| {
        r.output_tokens_source.map_or(Cell::Empty, |s| {
            Cell::Text(
                match s {
                    crate::record::TokenSource::Usage => "usage",
                    crate::record::TokenSource::Chunks => "chunks",
                }
                .to_string(),
            )
        })
    }),
    Column::Field("chunks", |r| Cell::Num(r.chunks.into())),
    Column::Metric(Metric::Ttfa),
    Column::Field("ttf_tool_ms", |r| n(r.ttf_tool_ms)),
    Column::Field("reasoning_tokens", |r| n(r.reasoning_tokens)),
    Column::Field("answer_tokens", |r| n(r.answer_tokens)),
    Column::Field("tool_calls", |r| n(r.tool_calls)),
    Column::Field("chat_id", |r| n(r.chat_id.map(|v| v as f64))),
    Column::Field("parent_chat_id", |r| n(r.parent_chat_id.map(|v| v as f64))),
    Column::Field("turn", |r| n(r.turn)),
];

impl Column {
    fn header(self) -> &'static str {
        match self {
            Column::Field(h, _) => h,
            Column::Metric(m) => m.spec().column.unwrap_or(m.key()),
        }
    }
    fn cell(self, r: &Record) -> Cell {
        match self {
            Column::Field(_, f) => f(r),
            Column::Metric(m) => n(m.of(r).map(micros)),
        }
    }
}

/// Every column: [`COLUMNS`], then the metrics with a column [`COLUMNS`] does not place.
fn columns() -> Vec<Column> {
    let placed = |m: Metric| {
        COLUMNS
            .iter()
            .any(|c| matches!(c, Column::Metric(x) if *x == m))
    };
    let rest = Metric::ALL
        .into_iter()
        .filter(|m| m.spec().column.is_some() && !placed(*m))
        .map(Column::Metric);
    COLUMNS.iter().copied().chain(rest).collect()
}

/// The headers of `requests.csv` and the Details sheet.
pub fn detail_columns() -> Vec<&'static str> {
    columns().into_iter().map(Column::header).collect()
}

fn detail_row(columns: &[Column], r: &Record) -> Vec<Cell> {
    columns.iter().map(|c| c.cell(r)).collect()
}

/// Write the per-request CSV (one row per record, ITL values summarised as a count).
pub fn write_requests_csv(path: &Path, records: &[Record]) -> crate::Result<()> {
    let write = || -> Result<(), csv::Error> {
        let mut w = csv::Writer::from_path(path)?;
        let columns = columns();
        w.write_record(columns.iter().map(|c| c.header()))?;
        for r in records {
            w.write_record(detail_row(&columns, r).iter().map(Cell::text))?;
        }
        w.flush()?;
        Ok(())
    };
    write().map_err(|e| crate::Error::report(format!("cannot write {}: {e}", path.display())))
}

/// Flatten a JSON value into `(dotted.key, value)` rows.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        serde_json::Value::Array(a) if a.iter().all(|x| !x.is_object()) => {
            let text = a
                .iter()
                .map(|x| match x {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ");
            out.push((prefix.to_string(), serde_json::Value::String(text)));
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}

/// Excel's row limit (header included).
const XLSX_MAX_ROWS: usize = 1_048_576;

/// Write `results.xlsx`: sheet "Metrics" (metric, value: every summary field, nested ones as
/// dotted keys) and sheet "Details" (one row per record, as in `requests.csv`; truncated at
/// Excel's row limit with a note in the Metrics sheet).
pub fn write_xlsx(path: &Path, summary: &Summary, records: &[Record]) -> crate::Result<()> {
    xlsx(path, summary, records)
        .map_err(|e| crate::Error::report(format!("cannot write {}: {e}", path.display())))
}

fn xlsx(
    path: &Path,
    summary: &Summary,
    records: &[Record],
) -> Result<(), rust_xlsxwriter::XlsxError> {
    let mut wb = Workbook::new();
    let bold = Format::new().set_bold();
    let num = Format::new().set_num_format("0.00");

    let metrics = wb.add_worksheet();
    metrics.set_name("Metrics")?;
    metrics.write_string_with_format(0, 0, "metric", &bold)?;
    metrics.write_string_with_format(0, 1, "value", &bold)?;
    let mut rows = Vec::new();
    let value = serde_json::to_value(summary).unwrap_or(serde_json::Value::Null);
    flatten("", &value, &mut rows);
    let mut row = 1u32;
    for (k, v) in &rows {
        metrics.write_string(row, 0, k)?;
        match v {
            serde_json::Value::Number(x) => {
                let x = x.as_f64().unwrap_or(0.0);
                if x.fract() == 0.0 {
                    metrics.write_number(row, 1, x)?;
                } else {
                    metrics.write_number_with_format(row, 1, x, &num)?;
                }
            }
            serde_json::Value::Bool(b) => {
                metrics.write_boolean(row, 1, *b)?;
            }
            // Unknown (no values) or not applicable: said, never an empty cell read as 0.
            serde_json::Value::Null => {
                metrics.write_string(row, 1, "n/a")?;
            }
            serde_json::Value::String(s) => {
                metrics.write_string(row, 1, s)?;
            }
            other => {
                metrics.write_string(row, 1, other.to_string())?;
            }
        }
        row += 1;
    }
    let shown = records.len().min(XLSX_MAX_ROWS - 1);
    if shown < records.len() {
        metrics.write_string(row, 0, "details_truncated")?;
        metrics.write_string(
            row,
            1,
            format!(
                "Details shows the first {shown} of {} requests (Excel row limit); see requests.csv",
                records.len()
            ),
        )?;
    }
    metrics.set_column_width(0, 42)?;
    metrics.set_column_width(1, 24)?;

    let details = wb.add_worksheet();
    details.set_name("Details")?;
    let columns = columns();
    for (c, column) in columns.iter().enumerate() {
        details.write_string_with_format(0, c as u16, column.header(), &bold)?;
    }
    for (i, r) in records.iter().take(shown).enumerate() {
        let row = i as u32 + 1;
        for (c, cell) in detail_row(&columns, r).into_iter().enumerate() {
            match cell {
                Cell::Num(v) => {
                    details.write_number(row, c as u16, v)?;
                }
                Cell::Text(s) => {
                    details.write_string(row, c as u16, s)?;
                }
                Cell::Empty => {}
            }
        }
    }
    details.set_freeze_panes(1, 0)?;
    wb.save(path)?;
    Ok(())
}

/// Write the result directory (created if needed): `summary.json`, `requests.csv`,
/// `results.xlsx`, the plots and `report.html`, from `summary` and the records file of the run.
/// Returns the files written.
pub fn write_result_dir(
    dir: &Path,
    summary: &Summary,
    records_jsonl: &Path,
) -> crate::Result<Vec<PathBuf>> {
    write_result_dir_exporting(dir, summary, records_jsonl, &[])
}

/// [`write_result_dir`], and the other tools' result files of `exports` (`--export`).
pub fn write_result_dir_exporting(
    dir: &Path,
    summary: &Summary,
    records_jsonl: &Path,
    exports: &[super::export::ExportKind],
) -> crate::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::Error::io(format!("cannot create {}", dir.display()), e))?;
    let (records, _) = read_records(records_jsonl)?;
    let mut files = Vec::new();

    let p = dir.join("summary.json");
    write_summary_json(&p, summary)?;
    files.push(p);

    let p = dir.join("requests.csv");
    write_requests_csv(&p, &records)?;
    files.push(p);

    let p = dir.join("results.xlsx");
    write_xlsx(&p, summary, &records)?;
    files.push(p);

    let samples = match server_metrics_path(dir, records_jsonl) {
        Some(p) => crate::observe::samples::read_samples(&p)?,
        None => Vec::new(),
    };
    files.extend(plots::write_plots(dir, &records, summary, &samples)?);
    let page = super::html::write_run_html(dir, summary, &files)?;
    files.push(page);
    files.extend(super::export::write_exports(
        dir, exports, summary, &records,
    )?);
    Ok(files)
}

/// The files a replay may write into its result directory `dir` (the charts aside: they are
/// PNG and SVG files no run reads or writes otherwise): [`write_result_dir_exporting`]'s, the
/// scraper's `server_metrics.jsonl`, and those of each export of `exports`. A run checks them
/// against its inputs and its other outputs before anything is sent.
pub fn result_dir_files(dir: &Path, exports: &[super::export::ExportKind]) -> Vec<PathBuf> {
    use super::export::{aiperf, aiperf_aggregate, inputs, ExportKind, VLLM_BENCH_FILE};
    let mut names = vec![
        "summary.json",
        "requests.csv",
        "results.xlsx",
        super::html::REPORT_HTML,
        "server_metrics.jsonl",
    ];
    for kind in exports {
        match kind {
            ExportKind::Aiperf => names.extend([
                aiperf::RECORDS_FILE,
                aiperf_aggregate::JSON_FILE,
                aiperf_aggregate::CSV_FILE,
                inputs::INPUTS_FILE,
            ]),
            ExportKind::VllmBench => names.push(VLLM_BENCH_FILE),
        }
    }
    names.into_iter().map(|n| dir.join(n)).collect()
}

/// The run's `server_metrics.jsonl`: in the result directory (where the scraper writes it with
/// `--result-dir`), else beside the records (`<records>.server_metrics.jsonl`).
pub fn server_metrics_path(dir: &Path, records_jsonl: &Path) -> Option<PathBuf> {
    let mut beside = records_jsonl.as_os_str().to_owned();
    beside.push(".server_metrics.jsonl");
    [dir.join("server_metrics.jsonl"), PathBuf::from(beside)]
        .into_iter()
        .find(|p| p.is_file())
}
