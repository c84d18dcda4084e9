//! The console's per-model rows (model fleets): one grid by served model, one by trace model
//! (`stats::models`).

use super::format::{num, pct};
use super::table::Table;
use crate::stats::models::{ModelRow, ModelSummary};

/// The per-model grids: by the served model, then by the trace's model (with where it went).
pub(super) fn models_section(t: &mut Table, m: &ModelSummary) {
    t.header("Models (served)", '-');
    grid(t, &m.served, false);
    if !m.trace.is_empty() {
        t.header("Models (trace → served)", '-');
        grid(t, &m.trace, true);
    }
}

fn grid(t: &mut Table, rows: &[ModelRow], trace: bool) {
    let head = [
        "model",
        "req",
        "ok",
        "err",
        "in tok",
        "out tok",
        "ttft p50/p99",
        "e2el p50/p99",
        "cached",
        "hit%",
    ];
    let rows = rows
        .iter()
        .map(|r| {
            let name = match (&r.sent_as, trace) {
                (Some(s), true) => format!("{} → {s}", r.model),
                _ => r.model.clone(),
            };
            vec![
                name,
                r.requests.to_string(),
                r.ok.to_string(),
                r.errors.to_string(),
                r.input_tokens.to_string(),
                r.output_tokens.to_string(),
                format!("{}/{}", num(r.ttft_p50_ms, 1), num(r.ttft_p99_ms, 1)),
                format!("{}/{}", num(r.e2el_p50_ms, 1), num(r.e2el_p99_ms, 1)),
                r.cached_tokens.to_string(),
                pct(r.hit_ratio),
            ]
        })
        .collect();
    t.grid(head.map(String::from).to_vec(), rows, |c| {
        format!(
            "{:<24} {:>6} {:>6} {:>5} {:>10} {:>9} {:>15} {:>15} {:>10} {:>6}",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9]
        )
    });
}
