//! The sweep's combined table: on the console ([`render_table`]) and in the sweep's
//! `report.html` ([`write_html`]), one row per point with the same cells.

use std::path::{Path, PathBuf};

use super::answer::{verdict, Verdict};
use super::result::{SweepPoint, SweepResult};
use crate::config::{ReplayConfig, Target};
use crate::report::html::AnswerLook;

/// Columns of the combined table (console and `report.html`), with their console widths.
const COLUMNS: [(&str, usize); 12] = [
    ("scale", 7),
    ("offer r/s", 9),
    ("tput r/s", 9),
    ("out tok/s", 9),
    ("good%", 6),
    ("failed", 6),
    ("TTFT p50", 9),
    ("TTFT p99", 9),
    ("TPOT p50", 8),
    ("TPOT p99", 8),
    ("drift99", 8),
    ("hit%", 6),
];

/// A point's cells in the combined table.
fn cells(p: &SweepPoint) -> Vec<String> {
    let opt = |v: Option<f64>, d: usize| v.map_or("n/a".to_string(), |v| format!("{v:.d$}"));
    vec![
        p.users
            .map_or(p.scale_factor.to_string(), |u| format!("{u} usr")),
        format!("{:.2}", p.offered_rps),
        format!("{:.2}", p.request_throughput),
        format!("{:.1}", p.output_throughput),
        opt(p.good_fraction.map(|g| g * 100.0), 1),
        p.failed.to_string(),
        opt(p.ttft_p50_ms, 1),
        opt(p.ttft_p99_ms, 1),
        opt(p.tpot_p50_ms, 2),
        opt(p.tpot_p99_ms, 2),
        format!("{:.3}", p.drift_p99_ms),
        opt(p.server_hit_ratio.map(|h| h * 100.0), 1),
    ]
}

/// Why a point's row is marked: its invalid reasons, and a cut short by Ctrl-C.
fn marks(p: &SweepPoint) -> String {
    let mut m = Vec::new();
    if !p.invalid.is_empty() {
        m.push(format!("INVALID: {}", p.invalid.join("; ")));
    }
    if p.interrupted {
        m.push("INTERRUPTED: Ctrl-C cut this point short (not judged, not plotted)".to_string());
    }
    m.join("; ")
}

/// The combined table.
pub fn render_table(r: &SweepResult) -> String {
    let line = |cells: Vec<String>| {
        let cols: Vec<String> = cells
            .iter()
            .zip(COLUMNS)
            .map(|(c, (_, w))| format!("{c:>w$}"))
            .collect();
        cols.join(" ")
    };
    let mut out = line(COLUMNS.iter().map(|c| c.0.to_string()).collect());
    out.push('\n');
    for p in &r.points {
        out.push_str(&line(cells(p)));
        if !p.invalid.is_empty() {
            out.push_str("  INVALID");
        }
        if p.interrupted {
            out.push_str("  INTERRUPTED");
        }
        out.push('\n');
    }
    out.push_str(&curve(r));
    out.push_str(&r.answer);
    out.push('\n');
    out
}

/// A `--users` sweep: InferenceX's curve, one line per point: output tokens/s (per GPU with
/// `--gpus`) against the median output tokens/s per user, with the scenario stamp.
pub fn curve(r: &SweepResult) -> String {
    let points: Vec<&SweepPoint> = r.points.iter().filter(|p| p.users.is_some()).collect();
    if points.is_empty() {
        return String::new();
    }
    let per_gpu = points.iter().any(|p| p.output_throughput_per_gpu.is_some());
    let mut out = format!(
        "throughput vs interactivity:\n{:>7} {:>14} {:>14} {:>8}\n",
        "users",
        if per_gpu { "tok/s/GPU" } else { "out tok/s" },
        "tok/s/user p50",
        "valid"
    );
    for p in points {
        let y = p.output_throughput_per_gpu.unwrap_or(p.output_throughput);
        let x = p
            .per_user_output_tps
            .map_or("n/a".to_string(), |v| format!("{v:.1}"));
        let valid = match p.submission_valid {
            None => "-".to_string(),
            Some(true) => "yes".to_string(),
            Some(false) => format!("no ({})", p.violations.join(", ")),
        };
        out.push_str(&format!(
            "{:>7} {:>14.1} {:>14} {:>8}\n",
            p.users.unwrap_or(0),
            y,
            x,
            valid
        ));
    }
    out
}

/// How the page shows the answer, and what a bound means in plain words: only a capacity
/// found is shown as a success.
fn answer_look(r: &SweepResult) -> (AnswerLook, String) {
    let users = r.points.iter().any(|p| p.users.is_some());
    let (lower, higher) = if users {
        ("fewer --users", "more --users")
    } else {
        ("lower scale factors", "higher scale factors")
    };
    match verdict(r) {
        Verdict::Found => (AnswerLook::Found, String::new()),
        Verdict::AboveRange => (
            AnswerLook::Bound,
            format!("No capacity found: every point met the target, so the capacity is above this sweep's range; sweep {higher}."),
        ),
        Verdict::BelowRange => (
            AnswerLook::Failed,
            format!("No capacity found: even the lowest point fell short of the target, so the server did not carry any load of this sweep; sweep {lower}."),
        ),
        Verdict::NoPoint => (
            AnswerLook::Failed,
            "No capacity found: no point was run to its end.".to_string(),
        ),
    }
}

/// The sweep's `report.html`: the table with a link to each point's page, and the chart.
pub(super) fn write_html(dir: &Path, r: &SweepResult, cfg: &ReplayConfig, charts: &[PathBuf]) {
    use crate::report::html::{write_sweep_html, SweepPage, SweepPagePoint, REPORT_HTML};
    let mut meta = vec![("points".to_string(), r.points.len().to_string())];
    if let crate::config::TraceSource::File(t) = &cfg.trace.source {
        meta.push(("trace".into(), t.display().to_string()));
    }
    if let Target::Remote(e) = &cfg.target.server {
        meta.push((
            "endpoint".into(),
            crate::backend::sanitize_url(e.url.as_str()),
        ));
    }
    if let Some(slo) = &r.slo {
        meta.push(("SLOs".into(), slo.clone()));
        meta.push(("target".into(), format!("{:.0}% good", r.target * 100.0)));
    }
    let mut notes = Vec::new();
    if r.interrupted {
        notes.push("The sweep was interrupted: these are the points done so far.".to_string());
    }
    let points = r
        .points
        .iter()
        .map(|p| {
            let page = Path::new(&p.dir).join(REPORT_HTML);
            SweepPagePoint {
                cells: cells(p),
                link: page.is_file().then(|| {
                    page.strip_prefix(dir)
                        .unwrap_or(&page)
                        .display()
                        .to_string()
                }),
                invalid: marks(p),
            }
        })
        .collect();
    let (look, lead) = answer_look(r);
    let page = SweepPage {
        meta,
        answer: r.answer.clone(),
        look,
        lead,
        notes,
        head: COLUMNS.iter().map(|c| c.0.to_string()).collect(),
        points,
    };
    if let Err(e) = write_sweep_html(dir, &page, charts) {
        eprintln!("request-sim: sweep: cannot write {REPORT_HTML}: {e}");
    }
}
