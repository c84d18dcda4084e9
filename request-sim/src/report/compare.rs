//! Two runs side by side (`request-sim compare A B`).

use std::fmt::Write;

use crate::stats::latency::{p_word, Metric};
use crate::stats::Summary;

/// Whether a larger value is better for a metric (for the "better/worse" hint).
#[derive(Clone, Copy)]
enum Better {
    Higher,
    Lower,
    Neither,
}

fn rows(s: &Summary) -> Vec<(String, Option<f64>, Better)> {
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
        (
            "Request goodput (req/s)".to_string(),
            s.request_goodput,
            Higher,
        ),
        (
            "Output token throughput (tok/s)".to_string(),
            Some(s.output_throughput),
            Higher,
        ),
        (
            "Peak output token throughput (tok/s)".to_string(),
            Some(s.max_output_tokens_per_s),
            Higher,
        ),
        (
            "Total token throughput (tok/s)".to_string(),
            Some(s.total_token_throughput),
            Higher,
        ),
    ];
    for metric in Metric::VLLM {
        let (label, m) = (metric.label(), s.latency.get(metric));
        v.push((format!("Mean {label} (ms)"), Some(m.mean), Lower));
        v.push((format!("Median {label} (ms)"), Some(m.median), Lower));
        for (p, val) in &m.percentiles {
            if *p >= 90.0 {
                v.push((format!("P{} {label} (ms)", p_word(*p)), Some(*val), Lower));
            }
        }
    }
    v.push((
        "P99 send drift (ms)".to_string(),
        Some(s.drift.p99_ms),
        Lower,
    ));
    v.push((
        "Max send drift (ms)".to_string(),
        Some(s.drift.max_ms),
        Lower,
    ));
    v.push((
        "Server cache hit ratio (%)".to_string(),
        s.cache.hit_ratio.map(|r| r * 100.0),
        Higher,
    ));
    v
}

fn fmt(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| {
        if x.fract() == 0.0 && x.abs() < 1e15 {
            format!("{x:.0}")
        } else {
            format!("{x:.2}")
        }
    })
}

/// Side-by-side table of the headline metrics of runs `a` and `b` with the relative change
/// `(b - a) / a` of each, marked `+` (better) or `!` (worse) where the direction is clear.
/// Metrics that only one run has (a percentile not configured in the other, goodput without
/// SLO) show `-`.
pub fn render_compare(a: &Summary, b: &Summary) -> String {
    let ra = rows(a);
    let rb = rows(b);
    let mut out = String::new();
    let _ = writeln!(out, "{:=^78}", " Run comparison ");
    let _ = writeln!(out, "{:<40} {:>12} {:>12} {:>10}", "", "A", "B", "change");
    if let (Some(x), Some(y)) = (&a.run.started_at, &b.run.started_at) {
        let _ = writeln!(out, "{:<40} {:>12.12} {:>12.12}", "Started", x, y);
    }
    // Union of row labels in A's order, then B-only rows.
    let mut labels: Vec<(String, Better)> = ra.iter().map(|r| (r.0.clone(), r.2)).collect();
    for r in &rb {
        if !labels.iter().any(|l| l.0 == r.0) {
            labels.push((r.0.clone(), r.2));
        }
    }
    let find = |rs: &[(String, Option<f64>, Better)], l: &str| {
        rs.iter().find(|r| r.0 == l).and_then(|r| r.1)
    };
    for (label, better) in labels {
        let va = find(&ra, &label);
        let vb = find(&rb, &label);
        let change = match (va, vb) {
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
            fmt(va),
            fmt(vb),
            change
        );
    }
    let _ = writeln!(out, "{}", "=".repeat(78));
    let _ = writeln!(out, "change = (B - A) / A;  + better, ! worse");
    out
}
