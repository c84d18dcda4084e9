//! Reports: the renderings of a run's statistics (computed by [`crate::stats`]): the console
//! table, result files, plots, HTML, comparison and live progress.
//!
//! - [`format`]: every number, percentage and `n/a` cell of the reports.
//! - [`table`]: the vLLM-shaped console [`table::Table`], which also keeps its pieces for the
//!   HTML page.
//! - [`console`]: the vLLM-shaped result table ([`render_console`]), with its server-metrics
//!   section from [`server`] and its per-model grids from `models`; [`analysis`]: a trace analysis as text ([`render_analysis`]).
//! - [`compare`]: two runs side by side ([`render_compare`]); [`merge`]: the shards table of a
//!   merged run.
//! - [`files`]: `--result-dir` contents: summary.json, requests.csv, results.xlsx, plots,
//!   report.html; [`export`]: other tools' result files (`--export`: AIPerf's, vLLM bench's).
//! - [`plots`]: PNG and SVG charts; [`html`]: the self-contained `report.html` of a run or a
//!   sweep.
//! - [`progress`]: the live progress line on stderr.
//! - [`repeats`]: a repeat set's intervals ([`repeats::render_repeats`]); the verdicts of a
//!   comparison are [`compare::render_verdicts`].
//!
//! Metric definitions: `docs/metrics.md`.

pub mod against;
pub mod analysis;
pub mod compare;
pub mod console;
pub mod experiment;
pub mod export;
pub mod files;
pub mod format;
pub mod html;
pub mod merge;
mod models;
pub mod plots;
pub mod progress;
pub mod repeats;
pub mod server;
pub mod table;

pub use crate::util::{print_json, print_stdout};
pub use analysis::render_analysis;
pub use compare::{render_compare, render_verdicts};
pub use console::render_console;
pub use files::{
    find_run_info, read_summary, write_result_dir, write_result_dir_exporting, write_summary_json,
};
pub use progress::Progress;
