//! Reports: the renderings of a run's statistics (computed by [`crate::stats`]): the console
//! table, result files, plots, HTML, comparison and live progress.
//!
//! - [`console`]: the vLLM-shaped result table ([`render_console`]); [`analysis`]: a trace
//!   analysis as text ([`render_analysis`]); [`format`]: number formatting.
//! - [`compare`]: two runs side by side ([`render_compare`]); [`merge`]: the shards table of a
//!   merged run.
//! - [`files`]: `--result-dir` contents: summary.json, requests.csv, results.xlsx, plots,
//!   report.html.
//! - [`plots`]: PNG and SVG charts; [`html`]: the self-contained `report.html` of a run or a
//!   sweep.
//! - [`progress`]: the live progress line on stderr.
//!
//! Metric definitions: `docs/metrics.md`.

pub mod against;
pub mod analysis;
pub mod compare;
pub mod console;
pub mod files;
pub mod format;
pub mod html;
pub mod merge;
pub mod plots;
pub mod progress;

pub use crate::util::{print_json, print_stdout};
pub use analysis::render_analysis;
pub use compare::render_compare;
pub use console::render_console;
pub use files::{find_run_info, read_summary, write_result_dir, write_summary_json};
pub use progress::Progress;
