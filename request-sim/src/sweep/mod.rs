//! `request-sim sweep`: the same trace slice replayed at a list of scale factors, or at the
//! points a capacity search picks ([`search`]), one result directory per point, a combined
//! table, `sweep.json` and `report.html`, and the answer in one line: the highest load the
//! server carried (within the goodput SLOs when given). See `docs/server-metrics.md`
//! ("Capacity sweep").
//!
//! The files follow a sweep's course: `args` (its flags and per-point limits), `run` (the
//! sweep from start to end), `point` (replaying one point), `search` (the capacity search's
//! next point), `result` (what `sweep.json` records), `answer` (carried or not, the capacity
//! in one line), `table` (the combined table on the console and in `report.html`).

mod answer;
mod args;
mod point;
mod result;
mod run;
mod search;
mod table;

pub use answer::{answer, users_answer};
pub use args::{DEFAULT_POINT_REQUESTS, DEFAULT_POINT_SECS};
pub use result::{SweepPoint, SweepResult};
pub use run::sweep;
pub use search::{round3, Search, SearchInfo};
pub use table::render_table;
