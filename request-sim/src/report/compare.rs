//! Two runs side by side (`request-sim compare A B`): the values, then the verdicts of
//! [`crate::stats::compare`].

use std::fmt::Write;

use super::format::{change, change_interval, row_value, wide_or_dash, wide_or_na};
use crate::stats::compare::{Comparison, Method};
use crate::stats::headline::open_loop;
use crate::stats::latency::{p_word, Metric};
use crate::stats::Summary;

/// Whether a larger value is better for a metric (for the "better/worse" hint).
#[derive(Clone, Copy)]
enum Better {
    Higher,
    Lower,
    Neither,
}

/// A row: its label, its value (`None`: unknown in this run) and its direction.
type Row = (String, Option<f64>, Better);

fn rows(s: &Summary) -> Vec<Row> {
    use Better::*;
    let mut v = vec![
        (
            "Successful requests".to_string(),
            Some(s.completed as f64),
            Higher,
        ),
        ("Failed requests".to_string(), Some(s.failed as f64), Lower),
        (
            "Benchmark duration (s)".to_string(),
            Some(s.duration_s),
            Neither,
        ),
        (
            "Request throughput (req/s)".to_string(),
            Some(s.request_throughput),
            Higher,
        ),
    ];
    if let Some(g) = s.request_goodput {
        v.push(("Request goodput (req/s)".to_string(), Some(g), Higher));
    }
    v.extend([
        (
            "Output token throughput (tok/s)".to_string(),
            Some(s.output_throughput),
            Higher,
        ),
        (
            "Peak output token throughput (tok/s)".to_string(),
            s.max_output_tokens_per_s,
            Higher,
        ),
        (
            "Total token throughput (tok/s)".to_string(),
            Some(s.total_token_throughput),
            Higher,
        ),
    ]);
    // TTFA only for runs whose answers carried thinking or tool calls.
    let ttfa = (s.latency[Metric::Ttfa].count > 0).then_some(Metric::Ttfa);
    for metric in Metric::vllm().chain(ttfa) {
        let (label, m) = (metric.label(), s.latency.get(metric));
        // No values: unknown, not 0.
        let known = |x: f64| (m.count > 0).then_some(x);
        v.push((format!("Mean {label} (ms)"), known(m.mean), Lower));
        v.push((format!("Median {label} (ms)"), known(m.median), Lower));
        for (p, val) in &m.percentiles {
            if *p >= 90.0 {
                v.push((format!("P{} {label} (ms)", p_word(*p)), known(*val), Lower));
            }
        }
    }
    let drift = |x: f64| (s.drift.count > 0).then_some(x);
    v.push((
        "P99 send drift (ms)".to_string(),
        drift(s.drift.p99_ms),
        Lower,
    ));
    v.push((
        "Max send drift (ms)".to_string(),
        drift(s.drift.max_ms),
        Lower,
    ));
    v.push((
        "Server cache hit ratio (%)".to_string(),
        s.cache.hit_ratio.map(|r| r * 100.0),
        Higher,
    ));
    v
}

/// Side-by-side table of the headline metrics of runs `a` and `b` with the relative change
/// `(b - a) / a` of each, marked `+` (better) or `!` (worse) where the direction is clear.
/// Metrics that only one run has (a percentile not configured in the other, goodput without
/// SLO) show `-`; a value the run could not measure (no values: TPOT of non-streaming
/// answers, ITL without `--record-itl`) shows `n/a` and is not ranked.
pub fn render_compare(a: &Summary, b: &Summary) -> String {
    let ra = rows(a);
    let rb = rows(b);
    let mut out = String::new();
    let _ = writeln!(out, "{:=^78}", " Run comparison ");
    // A start time is wider than a column: one line each, whole.
    for (name, s) in [("A", a), ("B", b)] {
        if let Some(t) = &s.run.started_at {
            let _ = writeln!(out, "{:<40} {t}", format!("Started ({name})"));
        }
    }
    let _ = writeln!(out, "{:<40} {:>12} {:>12} {:>10}", "", "A", "B", "change");
    // Union of row labels in A's order, then B-only rows.
    let mut labels: Vec<(String, Better)> = ra.iter().map(|r| (r.0.clone(), r.2)).collect();
    for r in &rb {
        if !labels.iter().any(|l| l.0 == r.0) {
            labels.push((r.0.clone(), r.2));
        }
    }
    let find = |rs: &[Row], l: &str| rs.iter().find(|r| r.0 == l).map(|r| r.1);
    // An open-loop schedule sets the throughputs: their change is shown, not marked.
    let open = open_loop(a) == Some(true) && open_loop(b) == Some(true);
    for (label, better) in labels {
        let better = if open && label.contains("throughput") && !label.starts_with("Peak") {
            Better::Neither
        } else {
            better
        };
        let va = find(&ra, &label);
        let vb = find(&rb, &label);
        // Only two known values are compared (and ranked).
        let change = match (va.flatten(), vb.flatten()) {
            (Some(x), Some(y)) if x != 0.0 => {
                let c = (y - x) / x.abs() * 100.0;
                let mark = match better {
                    Better::Higher if c > 0.5 => " +",
                    Better::Higher if c < -0.5 => " !",
                    Better::Lower if c < -0.5 => " +",
                    Better::Lower if c > 0.5 => " !",
                    _ => "  ",
                };
                format!("{c:+.1}%{mark}")
            }
            (Some(x), Some(y)) if x == y => "0.0%  ".to_string(),
            _ => "-  ".to_string(),
        };
        let _ = writeln!(
            out,
            "{:<40} {:>12} {:>12} {:>10}",
            label,
            row_value(va),
            row_value(vb),
            change
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(78));
    let _ = writeln!(out, "change = (B - A) / A;  + better, ! worse");
    if open {
        let _ = writeln!(
            out,
            "both runs are open loop: their throughputs are set by the schedule, not marked"
        );
    }
    out
}

/// A value of the verdict table: two decimals, none from 100,000 up; `n/a`: the run has the
/// metric but could not measure it (as in the side-by-side table); `-`: the run has no such
/// metric.
fn cell(v: Option<f64>, present: bool) -> String {
    if present {
        wide_or_na(v, 2)
    } else {
        wide_or_dash(v, 2)
    }
}

/// The verdicts of a comparison: for each headline metric A and B (repeat means with Welch),
/// the change `(B - A) / A`, its 95% interval, and `significantly worse`, `significantly
/// better`, `no significant difference` or `not tested` with the reason; then the method, the
/// settings that differ and the notes.
pub fn render_verdicts(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:=^104}", " Significance at 95% ");
    let _ = writeln!(
        out,
        "{:<34} {:>11} {:>11} {:>8}  {:<19} verdict",
        "", "A", "B", "change", "95% CI of change"
    );
    for v in &c.verdicts {
        let change = change(v.change_pct());
        let ci = change_interval(v.ci_pct());
        let verdict = v.verdict_text();
        let _ = writeln!(
            out,
            "{:<34} {:>11} {:>11} {:>8}  {:<19} {verdict}",
            v.label,
            cell(v.a, v.present.0),
            cell(v.b, v.present.1),
            change,
            ci
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(104));
    let _ = writeln!(out, "method: {}", method_words(c));
    if c.differences.is_empty() {
        let _ = writeln!(out, "settings: the same (as far as both runs record them)");
    } else {
        let d: Vec<String> = c
            .differences
            .iter()
            .map(|(k, a, b)| format!("{k} {a} (A) vs {b} (B)"))
            .collect();
        let _ = writeln!(out, "configurations differ: {}", d.join("; "));
    }
    for n in &c.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// The method of a comparison in words.
pub fn method_words(c: &Comparison) -> String {
    match c.method {
        Method::Welch => "Welch's t over the repeats' values (each metric's mean over repeats; interval of the difference of means)".to_string(),
        Method::Bootstrap => format!(
            "percentile bootstrap over per-request records ({} resamples, seed {}; requests taken as independent); throughput and goodput have one value per run and are tested only between repeat sets",
            c.bootstrap_resamples, c.bootstrap_seed
        ),
        Method::None => "none: a side has neither repeats nor per-request records".to_string(),
    }
}
