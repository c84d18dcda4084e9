//! A repeat set's table (`replay --repeat N`): each headline metric's mean over the repeats,
//! its 95% confidence interval and the spread.

use std::fmt::Write;

use super::format::wide_or_na;
use crate::stats::repeats::RepeatSet;

/// A value of the table: two decimals, none from 100,000 up.
fn num(v: Option<f64>) -> String {
    wide_or_na(v, 2)
}

/// The table: metric, mean, 95% CI (Student t over the repeats), sample std, min and max; a
/// metric some repeat could not measure says how many did.
pub fn render_repeats(set: &RepeatSet) -> String {
    let n = set.repeats.len();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:=^100}",
        format!(
            " {n} repeats: mean and {:.0}% confidence interval ",
            set.level * 100.0
        )
    );
    let _ = writeln!(
        out,
        "{:<34} {:>10} {:>23} {:>9} {:>10} {:>10}",
        "", "mean", "95% CI", "std", "min", "max"
    );
    for m in &set.metrics {
        let Some(c) = &m.ci else {
            let _ = writeln!(out, "{:<34} {:>10}", m.label, "n/a");
            continue;
        };
        let ci = match (c.ci_low, c.ci_high) {
            (Some(l), Some(h)) => format!("[{}, {}]", num(Some(l)), num(Some(h))),
            _ => "-".to_string(),
        };
        let known = if c.n < n {
            format!("  ({} of {n} repeats measured it)", c.n)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:<34} {:>10} {:>23} {:>9} {:>10} {:>10}{known}",
            m.label,
            num(Some(c.mean)),
            ci,
            num(Some(c.std)),
            num(Some(c.min)),
            num(Some(c.max))
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(100));
    let _ = writeln!(
        out,
        "CI = mean ± t(0.975, n-1) · s / √n over the repeats' values (s: sample std); min/max: the spread"
    );
    for r in &set.repeats {
        let _ = writeln!(
            out,
            "repeat {}: seed {}, prefix cache {}, exit {}, {}",
            r.repeat, r.seed, r.cache, r.exit_code, r.dir
        );
    }
    out
}
