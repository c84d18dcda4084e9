//! A run re-run from its own summary: every setting is in the summary, the same seed and
//! trace give byte-identical request bodies, a changed trace is refused before anything is
//! sent.

use std::path::Path;

use clap::{Args, Command};
use request_sim::cli::ReplayArgs;

use super::config::expanded_replay;
use crate::support::*;

/// Replay the first `n` requests of `trace` on the built-in simulator, saving the prompts.
fn first_run(trace: &Path, dir: &Path, n: &str) -> std::path::PathBuf {
    let out = dir.join("one.jsonl");
    replay(&[
        "--dataset-path",
        trace.to_str().unwrap(),
        "--max-requests",
        n,
        "--scale-factor",
        "50",
        "--max-output-tokens",
        "4",
        "--quiet",
        "--no-pin",
        "--save-prompts",
        dir.join("one.prompts.jsonl").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    summary_path(&out)
}

#[test]
fn the_summary_holds_every_replay_flag() {
    let dir = tempfile::tempdir().unwrap();
    let summary = first_run(&trace_fixture("mooncake.jsonl"), dir.path(), "4");
    let s = read_json(&summary);
    let settings = &s["rerun"]["settings"];
    // clap's own list of replay's flags, read here apart from the code under test: each one is
    // in the summary, in the table of its --help heading.
    let mut cmd = ReplayArgs::augment_args(Command::new("replay"));
    cmd.build();
    let mut checked = 0;
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let heading = arg.get_help_heading();
        if arg.is_hide_set() || heading == Some("Config file") || long == "help" {
            continue;
        }
        let table = heading
            .and_then(|h| h.split_whitespace().last())
            .unwrap()
            .to_lowercase();
        if arg.is_hide_env_values_set() {
            // A secret (--api-key): never written.
            assert!(settings[&table].get(long).is_none(), "--{long} written");
            continue;
        }
        assert!(
            settings[&table].get(long).is_some(),
            "--{long} ([{table}]) is missing from the summary's rerun.settings"
        );
        checked += 1;
    }
    assert!(checked > 90, "only {checked} flags");
    // Values resolved: the drawn seed, defaults, the given values.
    assert_eq!(settings["prompts"]["seed"], s["run"]["seed"]);
    assert!(settings["prompts"]["seed"].as_u64().is_some());
    assert_eq!(settings["schedule"]["scale-factor"], 50.0);
    assert_eq!(settings["schedule"]["spin-us"], 300);
    assert_eq!(settings["requests"]["max-output-tokens"], 4);
    assert_eq!(s["rerun"]["tool_version"], env!("CARGO_PKG_VERSION"));
    let t = &s["rerun"]["trace"];
    let bytes = std::fs::metadata(trace_fixture("mooncake.jsonl"))
        .unwrap()
        .len();
    assert_eq!(t["bytes"], bytes);
    assert_eq!(t["xxh3_64"].as_str().unwrap().len(), 16);
}

#[test]
fn a_rerun_from_the_summary_sends_byte_identical_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    std::fs::copy(trace_fixture("mooncake.jsonl"), &trace).unwrap();
    // No --seed: the first run draws one, and its summary records it.
    let summary = first_run(&trace, dir.path(), "4");
    let again = dir.path().join("again.prompts.jsonl");
    let out = dir.path().join("again.jsonl");
    let a = expanded_replay(&[
        "replay",
        "--config",
        summary.to_str().unwrap(),
        "--save-prompts",
        again.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ])
    .unwrap();
    // The output paths of the first run are not re-used; everything else is.
    assert_eq!(a.output.output_path.as_deref(), Some(out.as_path()));
    assert_eq!(a.schedule.scale_factor, 50.0);
    let outcome =
        request_sim::run::replay(request_sim::config::ReplayConfig::from_args(a).unwrap()).unwrap();
    assert_eq!(outcome.exit_code, 0);
    let first = std::fs::read(dir.path().join("one.prompts.jsonl")).unwrap();
    let second = std::fs::read(&again).unwrap();
    assert_eq!(first.iter().filter(|&&b| b == b'\n').count(), 4);
    assert!(
        first == second,
        "the re-run's request bodies differ from the first run's"
    );
    let (s1, s2) = (read_json(&summary), read_json(&summary_path(&out)));
    assert_eq!(s1["run"]["seed"], s2["run"]["seed"]);
    assert_eq!(
        s1["rerun"]["settings"]["prompts"],
        s2["rerun"]["settings"]["prompts"]
    );
}

#[test]
fn a_changed_trace_is_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    std::fs::copy(trace_fixture("mooncake.jsonl"), &trace).unwrap();
    let summary = first_run(&trace, dir.path(), "2");
    let mut text = std::fs::read_to_string(&trace).unwrap();
    let first = text.lines().next().unwrap().to_string();
    text.push_str(&first);
    text.push('\n');
    std::fs::write(&trace, text).unwrap();
    let out = dir.path().join("again.jsonl");
    let args = [
        "replay",
        "--config",
        summary.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    let e = expanded_replay(&args).unwrap_err().to_string();
    assert!(e.contains("is not the one the run read: checksum"), "{e}");
    assert!(
        e.contains("nothing was sent. Pass --accept-changed-trace"),
        "{e}"
    );
    assert!(!out.exists());
    let a = expanded_replay(&[&args[..], &["--accept-changed-trace"]].concat()).unwrap();
    assert_eq!(a.trace.dataset_path.as_deref(), Some(trace.as_path()));
    // A summary without its rerun section says so.
    let mut s = read_json(&summary);
    s.as_object_mut().unwrap().remove("rerun");
    let old = dir.path().join("old.summary.json");
    std::fs::write(&old, serde_json::to_string_pretty(&s).unwrap()).unwrap();
    let e = expanded_replay(&["replay", "--config", old.to_str().unwrap()])
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("a summary without its `rerun` section (written by a request-sim that did not record every setting): it cannot be re-run"), "{e}");
}
