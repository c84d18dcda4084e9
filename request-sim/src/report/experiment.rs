//! An experiment's result (`experiment.json`), its console text and (in `html.rs`) its page:
//! the points run by `commands::experiment` and each compared with the baseline.

use serde::Serialize;

use crate::stats::compare::Comparison;

/// What `experiment.json` records of one point.
#[derive(Debug, Clone, Serialize)]
pub struct PointRun {
    pub name: String,
    pub repeats: u32,
    pub dir: String,
    /// Its settings over the base's, as flags.
    pub overrides: Vec<String>,
    pub exit_code: u8,
}

/// One point compared with the baseline.
#[derive(Debug, Clone, Serialize)]
pub struct PointComparison {
    pub baseline: String,
    pub point: String,
    /// `None`: not comparable (`error` says why).
    pub comparison: Option<Comparison>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `experiment.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ExperimentResult {
    pub file: String,
    pub tool_version: String,
    pub started_at: String,
    pub points: Vec<PointRun>,
    pub comparisons: Vec<PointComparison>,
}

/// The console's text: the points, then each comparison's verdicts.
pub fn render(r: &ExperimentResult) -> String {
    let mut t = String::from("Experiment points\n");
    for p in &r.points {
        t.push_str(&format!(
            "  {:<16} repeats {:<3} exit {:<3} {}  {}\n",
            p.name,
            p.repeats,
            p.exit_code,
            p.dir,
            p.overrides.join(" ")
        ));
    }
    for c in &r.comparisons {
        t.push_str(&format!("\n{} vs {} (baseline)\n", c.point, c.baseline));
        match (&c.comparison, &c.error) {
            (Some(cmp), _) => t.push_str(&super::compare::render_verdicts(cmp)),
            (None, Some(e)) => t.push_str(&format!("  not compared: {e}\n")),
            (None, None) => {}
        }
    }
    t
}
