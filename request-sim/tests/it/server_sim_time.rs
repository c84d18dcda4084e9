//! Server metrics in simulated time (issue 30, "numbers that mislead"): llm-sim with
//! `--speedup 10` reports its latencies in simulated seconds, ten times the client's wall
//! clock; the server section must say so next to them.

use std::io::Write;

use crate::support::*;

#[test]
fn a_sped_up_simulator_s_times_are_labelled_simulated() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let mut f = std::fs::File::create(&trace).unwrap();
    for i in 0..12 {
        writeln!(
            f,
            r#"{{"timestamp": {}, "input_length": 64, "output_length": 8, "hash_ids": [{i}]}}"#,
            i * 20
        )
        .unwrap();
    }
    drop(f);
    let sim = start_sim(llm_sim::SimConfig {
        // 10 ms steps in simulated time: 1 ms of wall time at 10x.
        step_fixed_us: 10_000.0,
        speedup: 10.0,
        ..llm_sim::SimConfig::default()
    });
    let out = dir.path().join("out.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--block-size",
        "64",
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--seed",
        "7",
        "--metrics-interval",
        "100ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let s = &outcome.summary;
    assert_eq!(s.completed, 12);
    let v = serde_json::to_value(s).unwrap();
    let c = &v["server"]["cluster"];
    assert_eq!(c["time_scale"], 10.0, "{c}");
    assert_eq!(c["ttft"]["time_scale"], 10.0);
    assert_eq!(v["server"]["instances"][0]["time_scale"], 10.0);
    // Simulated TTFT: about one 10 ms step (1 ms of wall time).
    let server_ttft = c["ttft"]["mean_ms"].as_f64().unwrap();
    assert!(server_ttft >= 5.0, "{server_ttft}");
    let text = request_sim::report::render_console(s);
    let line = text
        .lines()
        .find(|l| l.starts_with("Server TTFT"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("(simulated time ×10: ÷10 for the wall clock)"),
        "{line}"
    );
    // A real server (speedup 1) gets no such label.
    let plain = start_sim(llm_sim::SimConfig::default());
    let outcome = replay(&[
        "--quiet",
        "--endpoint",
        &plain.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--metrics-interval",
        "100ms",
        "-o",
        dir.path().join("plain.jsonl").to_str().unwrap(),
    ]);
    let text = request_sim::report::render_console(&outcome.summary);
    assert!(!text.contains("simulated time"), "{text}");
}
