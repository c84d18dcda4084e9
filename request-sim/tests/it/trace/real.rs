//! Measurement on the real Mooncake conversation trace (not part of the normal test run: it needs
//! the file). Run with
//! `cargo test --release -p request-sim --test it trace::real -- --ignored --nocapture`
//! or point `REQUEST_SIM_REAL_TRACE` at another copy of the trace.

use std::path::PathBuf;
use std::time::Instant;

use request_sim::analyze::{analyze, AnalyzeOptions};
use request_sim::report::render_analysis;
use request_sim::trace::{load, LoadOptions, TraceFormat};

fn real_trace() -> Option<PathBuf> {
    let p = std::env::var_os("REQUEST_SIM_REAL_TRACE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/traces/mooncake_conversation_trace.jsonl"));
    p.exists().then_some(p)
}

#[test]
#[ignore = "needs the real Mooncake conversation trace; run with --ignored"]
fn mooncake_conversation_trace_numbers_and_speed() {
    let Some(path) = real_trace() else {
        eprintln!("real trace not found; skipping");
        return;
    };
    let t0 = Instant::now();
    let trace = load(&path, &LoadOptions::default()).expect("load");
    let t_load = t0.elapsed();
    let a = analyze(&trace, &AnalyzeOptions::default());
    let t_total = t0.elapsed();
    println!("{}", render_analysis(&a));
    println!(
        "load {:.1} ms, load + analyze {:.1} ms ({} LRU sizes)",
        t_load.as_secs_f64() * 1e3,
        t_total.as_secs_f64() * 1e3,
        a.lru_sweep.len()
    );
    assert_eq!(trace.format, TraceFormat::from_name("mooncake").unwrap());
    assert_eq!(a.requests, 12_031);
    assert!(
        (a.input_length.mean - 12_035.06).abs() < 0.01,
        "{}",
        a.input_length.mean
    );
    assert!(
        (a.output_length.mean - 342.62).abs() < 0.01,
        "{}",
        a.output_length.mean
    );
    assert_eq!(a.distinct_hash_ids, 182_790);
    assert!((a.duration_s - 3536.999).abs() < 1e-6);
    if !cfg!(debug_assertions) {
        assert!(t_total.as_secs_f64() < 2.0, "too slow: {t_total:?}");
    }
}
