//! Two trace analyses side by side (`request-sim analyze A --against B`, `transform
//! --compare`): is the transformed trace still the workload? One line per figure, both values
//! and B relative to A.

use std::fmt::Write as _;

use super::format::{num_or_dash, percent_or_dash, thousands};
use crate::analyze::{Analysis, LengthStats};

/// The two analyses as a table; `names` label the columns.
pub fn render_against(a: &Analysis, b: &Analysis, names: (&str, &str)) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:=^92}", " Trace Analysis: side by side ");
    let _ = writeln!(out, "A: {}", names.0);
    let _ = writeln!(out, "B: {}", names.1);
    let _ = writeln!(out, "{:<40} {:>16} {:>16} {:>16}", "", "A", "B", "B vs A");
    let mut rows = Rows(&mut out);
    rows.section("Arrivals");
    rows.count("Requests", a.requests as f64, b.requests as f64);
    rows.num("Duration (s)", a.duration_s, b.duration_s);
    rows.opt("Mean rate (req/s)", a.mean_rate_per_s, b.mean_rate_per_s);
    rows.count(
        "Peak rate (req in 1 s)",
        a.peak_rate_per_s as f64,
        b.peak_rate_per_s as f64,
    );
    rows.opt("Burstiness (CV of gaps)", a.burstiness, b.burstiness);
    rows.section("Lengths (tokens)");
    lengths(&mut rows, "Input", &a.input_length, &b.input_length);
    lengths(&mut rows, "Output", &a.output_length, &b.output_length);
    rows.section("Prefix cache");
    rows.ratio(
        "Ideal hit ratio (infinite cache)",
        a.prefix_cache.hit_ratio,
        b.prefix_cache.hit_ratio,
    );
    rows.count(
        "Distinct prefix blocks",
        a.distinct_prefix_blocks as f64,
        b.distinct_prefix_blocks as f64,
    );
    for pa in &a.lru_sweep {
        let pb = b
            .lru_sweep
            .iter()
            .find(|p| p.capacity_tokens == pa.capacity_tokens);
        rows.ratio_opt(
            &format!("LRU hit ratio at {} tokens", thousands(pa.capacity_tokens)),
            Some(pa.hit_ratio),
            pb.map(|p| p.hit_ratio),
        );
    }
    rows.section("Sessions");
    let sessions = |x: &Analysis| x.sessions.as_ref().map(|s| s.sessions as f64);
    rows.opt("Sessions", sessions(a), sessions(b));
    let turns = |x: &Analysis| x.sessions.as_ref().map(|s| s.mean_turns_per_session);
    rows.opt("Mean turns per session", turns(a), turns(b));
    let think = |x: &Analysis, p: Option<f64>| {
        x.think_time_s
            .as_ref()
            .and_then(|t| p.map_or(Some(t.mean), |p| t.percentiles.get(p)))
    };
    rows.opt("Think time mean (s)", think(a, None), think(b, None));
    for p in [50.0, 90.0, 99.0] {
        rows.opt(
            &format!("Think time P{p} (s)"),
            think(a, Some(p)),
            think(b, Some(p)),
        );
    }
    let _ = writeln!(out, "{:=<92}", "");
    out
}

fn lengths(rows: &mut Rows<'_>, name: &str, a: &LengthStats, b: &LengthStats) {
    rows.num(&format!("{name} mean"), a.mean, b.mean);
    for &(p, va) in &a.percentiles.0 {
        rows.opt(&format!("{name} P{p}"), Some(va), b.percentiles.get(p));
    }
}

struct Rows<'a>(&'a mut String);

impl Rows<'_> {
    fn section(&mut self, name: &str) {
        let _ = writeln!(self.0, "{:-^92}", format!(" {name} "));
    }

    fn line(&mut self, name: &str, a: String, b: String, d: String) {
        let _ = writeln!(self.0, "{name:<40} {a:>16} {b:>16} {d:>16}");
    }

    fn num(&mut self, name: &str, a: f64, b: f64) {
        self.opt(name, Some(a), Some(b));
    }

    fn count(&mut self, name: &str, a: f64, b: f64) {
        self.line(
            name,
            format!("{a:.0}"),
            format!("{b:.0}"),
            rel(Some(a), Some(b)),
        );
    }

    fn opt(&mut self, name: &str, a: Option<f64>, b: Option<f64>) {
        let f = |x: Option<f64>| num_or_dash(x, 2);
        self.line(name, f(a), f(b), rel(a, b));
    }

    fn ratio(&mut self, name: &str, a: f64, b: f64) {
        self.ratio_opt(name, Some(a), Some(b));
    }

    /// Hit ratios: percentages, and the difference in percentage points.
    fn ratio_opt(&mut self, name: &str, a: Option<f64>, b: Option<f64>) {
        let f = percent_or_dash;
        let d = match (a, b) {
            (Some(a), Some(b)) => format!("{:+.2} pp", (b - a) * 100.0),
            _ => "-".into(),
        };
        self.line(name, f(a), f(b), d);
    }
}

/// B relative to A, as a signed percentage.
fn rel(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => format!("{:+.1}%", (b / a - 1.0) * 100.0),
        (Some(a), Some(b)) if a == b => "+0.0%".into(),
        _ => "-".into(),
    }
}
