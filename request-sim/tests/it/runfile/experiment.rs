//! `request-sim experiment FILE`: 3 points × 2 repeats on the built-in simulator into one
//! directory, compared with the baseline on the console, in experiment.json and on one page.

use crate::support::*;

#[test]
fn an_experiment_of_three_points_and_two_repeats_runs_into_one_directory() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_fixture("mooncake.jsonl");
    let file = dir.path().join("exp.toml");
    std::fs::write(
        &file,
        format!(
            r#"# The base run: the same tables as `replay --config`.
[trace]
dataset-path = {trace:?}
[schedule]
scale-factor = 50
no-pin = true
[requests]
max-output-tokens = 4
[output]
quiet = true
[prompts]
seed = 11

[experiment]
repeats = 2

[[point]]
name = "base"

[[point]]
name = "faster"
schedule.scale-factor = 100

[[point]]
name = "short"
[point.requests]
max-output-tokens = 2
"#
        ),
    )
    .unwrap();
    let out = dir.path().join("exp");
    let code = request_sim::commands::experiment(&file, Some(out.clone())).unwrap();
    assert_eq!(code, 0);
    for p in ["base", "faster", "short"] {
        for k in [1, 2] {
            let s = read_json(&out.join(format!("{p}/repeat-{k}/summary.json")));
            assert_eq!(s["completed"], 4, "{p} repeat {k}");
        }
        assert!(out.join(format!("{p}/repeats.json")).is_file());
    }
    // Each point's own settings reached its runs.
    let s = read_json(&out.join("faster/repeat-1/summary.json"));
    assert_eq!(s["rerun"]["settings"]["schedule"]["scale-factor"], 100.0);
    assert_eq!(s["rerun"]["settings"]["requests"]["max-output-tokens"], 4);
    let s = read_json(&out.join("short/repeat-2/summary.json"));
    assert_eq!(s["rerun"]["settings"]["requests"]["max-output-tokens"], 2);
    assert_eq!(s["rerun"]["settings"]["schedule"]["scale-factor"], 50.0);
    assert_eq!(s["total_output_tokens"], 8);
    let e = read_json(&out.join("experiment.json"));
    assert_eq!(e["points"].as_array().unwrap().len(), 3);
    let cmps = e["comparisons"].as_array().unwrap();
    assert_eq!(cmps.len(), 2);
    assert_eq!(cmps[0]["baseline"], "base");
    assert_eq!(cmps[0]["point"], "faster");
    let verdicts = cmps[1]["comparison"]["verdicts"].as_array().unwrap();
    assert!(!verdicts.is_empty());
    assert_eq!(cmps[1]["comparison"]["method"], "welch");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("faster against base (baseline)"), "{page}");
    assert!(page.contains("short against base (baseline)"));
    // The points link to their own pages (the template escapes `/` as `&#x2f;`).
    assert!(
        page.contains("href=\"faster/report.html\"")
            || page.contains("href=\"faster&#x2f;report.html\""),
        "{page}"
    );
    assert!(out.join("faster/report.html").is_file());
}
