//! `--config FILE`: the file's keys are the flags, the command line wins, bad keys name
//! `file:line`; the checked-in example reproduces the README's main example; the checked-in
//! schema is the generated one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use request_sim::cli::{Cli, Command, ReplayArgs};

/// `request-sim ARGS...` with `--config` expanded, as `main` does: the replay's flags.
pub fn expanded_replay(args: &[&str]) -> request_sim::Result<ReplayArgs> {
    let argv: Vec<OsString> = ["request-sim"]
        .iter()
        .chain(args)
        .map(OsString::from)
        .collect();
    let argv = request_sim::runfile::expand_cli(&Cli::command(), argv)?;
    match Cli::try_parse_from(argv) {
        Ok(Cli {
            command: Command::Replay(a),
        }) => Ok(*a),
        Ok(_) => unreachable!("a replay"),
        Err(e) => Err(request_sim::Error::config(e.to_string())),
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn a_config_file_sets_flags_and_the_command_line_wins() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("run.toml");
    std::fs::write(
        &f,
        r#"# a run
[schedule]
scale-factor = 2
spin-us = 50

[target]
header = ["x-a:1", "x-b:2"]
api = "openai"

[requests]
no-stream = true
max-output-tokens = 16

[output]
goodput = ["ttft:2000", "tpot:50"]
"#,
    )
    .unwrap();
    let cfg = f.to_str().unwrap();
    let a = expanded_replay(&["replay", "--config", cfg]).unwrap();
    assert_eq!(a.schedule.scale_factor, 2.0);
    assert_eq!(a.schedule.spin_us, 50);
    assert_eq!(a.target.header, ["x-a:1", "x-b:2"]);
    assert!(a.requests.no_stream);
    assert_eq!(a.requests.max_output_tokens, Some(16));
    assert_eq!(a.output.report.goodput, ["ttft:2000", "tpot:50"]);
    assert_eq!(a.run_file.config.as_deref(), Some(f.as_path()));
    // The command line wins: a value, a list (replaced, not added to), and a switch that
    // conflicts with the file's (--stream against no-stream = true).
    let a = expanded_replay(&[
        "replay",
        "--config",
        cfg,
        "--scale-factor",
        "3",
        "--header",
        "x-c:3",
        "--stream",
    ])
    .unwrap();
    assert_eq!(a.schedule.scale_factor, 3.0);
    assert_eq!(a.schedule.spin_us, 50);
    assert_eq!(a.target.header, ["x-c:3"]);
    assert!(a.requests.stream && !a.requests.no_stream);
    // A flag that needs one only the file gives.
    std::fs::write(dir.path().join("m.toml"), "[output]\nmetrics-port = 0\n").unwrap();
    let m = dir.path().join("m.toml");
    let a = expanded_replay(&[
        "replay",
        "--config",
        m.to_str().unwrap(),
        "--metrics-host",
        "0.0.0.0",
    ])
    .unwrap();
    assert_eq!(a.output.live_metrics.metrics_port, Some(0));
    assert_eq!(a.output.live_metrics.metrics_host, "0.0.0.0");
    // `sweep` takes the same file (its replay flags).
    let argv: Vec<OsString> = [
        "request-sim",
        "sweep",
        "--config",
        cfg,
        "--scale-factors",
        "1,2",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let argv = request_sim::runfile::expand_cli(&Cli::command(), argv).unwrap();
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Sweep(s) => {
            assert_eq!(s.scale_factors, [1.0, 2.0]);
            assert_eq!(s.replay.schedule.spin_us, 50);
            assert_eq!(s.replay.requests.max_output_tokens, Some(16));
        }
        _ => unreachable!(),
    }
}

#[test]
fn bad_config_files_are_refused_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bad.toml");
    let cases = [
        (
            "[schedule]\nscale-factor = 2\nspinus = 3\n",
            ":3: unknown key `spinus` in [schedule]",
        ),
        (
            "[target]\n\nscale-factor = 2\n",
            ":3: `scale-factor` belongs in [schedule], not in [target]",
        ),
        (
            "[schedule]\nscale-factor = \"twice\"\n",
            ":2: `schedule.scale-factor` = \"twice\": invalid value",
        ),
        (
            "[requests]\nstream = \"yes\"\n",
            ":2: `requests.stream` is a switch: true or false, not a string",
        ),
        ("[schedule\n", ":1: "),
    ];
    for (text, want) in cases {
        std::fs::write(&f, text).unwrap();
        let e = expanded_replay(&["replay", "--config", f.to_str().unwrap()])
            .unwrap_err()
            .to_string();
        let at = format!("{}{want}", f.display());
        assert!(e.starts_with(&at), "{text:?}: {e}");
    }
}

#[test]
fn a_config_file_is_an_input_no_output_may_land_on() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("run.toml");
    std::fs::write(&f, "[schedule]\nscale-factor = 2\n").unwrap();
    let a = expanded_replay(&[
        "replay",
        "--config",
        f.to_str().unwrap(),
        "--save-prompts",
        f.to_str().unwrap(),
    ])
    .unwrap();
    let e = request_sim::config::ReplayConfig::from_args(a)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--save-prompts names the run file (--config)"),
        "{e}"
    );
}

#[test]
fn the_example_config_reproduces_the_readme_example() {
    let example = repo_root().join("examples/replay.toml");
    let from_file = expanded_replay(&["replay", "--config", example.to_str().unwrap()]).unwrap();
    // The README's "Replaying a trace against your server" command line.
    let from_flags = expanded_replay(&[
        "replay",
        "--endpoint",
        "http://127.0.0.1:8000/v1/chat/completions",
        "--tokenizer",
        "qwen3/tokenizer.json",
        "--tokenizer-config",
        "qwen3/tokenizer_config.json",
        "--dataset-path",
        "mooncake_conversation_trace.jsonl",
        "--scale-factor",
        "2",
        "--max-requests",
        "2000",
        "--goodput",
        "ttft:2000",
        "tpot:50",
        "--output-path",
        "results/run1.jsonl",
        "--result-dir",
        "results/run1",
    ])
    .unwrap();
    // Every setting the same.
    assert_eq!(from_file.run_file.settings, from_flags.run_file.settings);
    assert_eq!(from_file.schedule.scale_factor, 2.0);
    assert_eq!(from_file.output.report.goodput, ["ttft:2000", "tpot:50"]);
    // And the README says so.
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert!(readme.contains("--config examples/replay.toml"));
}

#[test]
fn the_checked_in_schemas_are_the_generated_ones() {
    use request_sim::runfile::schema::{experiment_schema, replay_schema};
    for (file, schema, flag) in [
        (
            "request-sim.schema.json",
            replay_schema(&request_sim::cli::replay_keys()),
            "",
        ),
        (
            "experiment.schema.json",
            experiment_schema(&request_sim::cli::replay_keys()),
            " --experiment",
        ),
    ] {
        let path = repo_root().join("docs").join(file);
        let checked_in: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            checked_in,
            schema,
            "{} is stale: `cargo run -- config schema{flag} > docs/{file}`",
            path.display()
        );
    }
    // Every flag table is in the schema, closed to unknown keys.
    let s = replay_schema(&request_sim::cli::replay_keys());
    let tables: Vec<&String> = s["properties"].as_object().unwrap().keys().collect();
    assert_eq!(tables.len(), 9, "{tables:?}");
    let e = experiment_schema(&request_sim::cli::replay_keys());
    assert_eq!(e["properties"]["point"]["items"]["required"][0], "name");
    assert_eq!(
        e["properties"]["point"]["items"]["properties"]["schedule"]["properties"]["scale-factor"]
            ["type"],
        "number"
    );
}
