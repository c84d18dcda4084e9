//! `report.html` as a new user meets it, with the built binary: a sweep that carried nothing
//! is not shown as a success.

use crate::support::*;

/// `text` escaped as minijinja escapes HTML.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#x27;")
        .replace('/', "&#x2f;")
}

#[test]
fn a_sweep_whose_lowest_point_fell_short_is_not_shown_as_a_success() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let lines: Vec<String> = (0..20)
        .map(|i| {
            format!(
                r#"{{"timestamp": {}, "input_length": 64, "output_length": 4, "hash_ids": [{i}]}}"#,
                i * 50
            )
        })
        .collect();
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    // Every engine step takes 5 ms: no first token comes within the 1 ms SLO at any load.
    let sim = start_sim(llm_sim::SimConfig {
        step_fixed_us: 5_000.0,
        ..llm_sim::SimConfig::default()
    });
    let sweep_dir = dir.path().join("sweep");
    let (code, _, stderr) = run_cli(
        [
            "sweep",
            "--scale-factors",
            "1,2",
            "--goodput",
            "ttft:1",
            "--target",
            "0.9",
            "--sweep-dir",
            sweep_dir.to_str().unwrap(),
            "--endpoint",
            &sim.base_url(),
            "--dataset-path",
            trace.to_str().unwrap(),
            "--block-size",
            "64",
            "--seed",
            "3",
            "--quiet",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = read_sweep(&sweep_dir);
    assert_eq!(r.points.len(), 2);
    assert!(
        r.points.iter().all(|p| p.good_fraction == Some(0.0)),
        "{r:?}"
    );
    assert_eq!(r.capacity_scale_factor, None);
    assert!(
        r.answer.starts_with("capacity: below scale 1:"),
        "{}",
        r.answer
    );
    let html = std::fs::read_to_string(sweep_dir.join("report.html")).unwrap();
    // Red, and said plainly before the answer; nothing green.
    assert!(
        html.contains(&format!(
            "<p class=\"answer-failed\"><b>No capacity found: even the lowest point fell short of the target, so the server did not carry any load of this sweep; sweep lower scale factors.</b>{}</p>",
            escaped(&r.answer)
        )),
        "{html}"
    );
    assert!(!html.contains("class=\"answer\""), "{html}");
}
