//! Bad input through the built binary: every broken trace file gives exactly one clear
//! `request-sim: error: FILE[:LINE]: ...` line on stderr and exit code 1, never a panic; invalid
//! flag combinations are rejected before anything is sent (a listening socket sees no
//! connection).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::support::*;

/// Run `replay` on `trace` (against a raw server that must never be contacted); the single
/// stderr line.
fn one_error_line(trace: &Path, extra: &[&str]) -> String {
    let server = RawServer::start(Script::default());
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(&server.url(""), trace, dir.path()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = run_bin(&strs(&args), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{}: {stderr}", trace.display());
    assert!(!stderr.contains("panicked"), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "exactly one error line for {}: {stderr}",
        trace.display()
    );
    assert!(lines[0].starts_with("request-sim: error: "), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout");
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        0,
        "nothing was sent"
    );
    assert!(
        !dir.path().join("records.jsonl").exists(),
        "no records file for a failed start"
    );
    lines[0].to_string()
}

/// Line-level errors name `path:line:`; file-level ones `path:`.
#[test]
fn every_broken_trace_file_gives_one_clear_error() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(bad_traces_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 30, "the corpus of tests/data/traces/bad");
    for f in &files {
        let line = one_error_line(f, &[]);
        let shown = f.display().to_string();
        let rest = line
            .strip_prefix(&format!("request-sim: error: {shown}"))
            .unwrap_or_else(|| panic!("names the file: {line}"));
        assert!(rest.starts_with(':'), "{line}");
        let after = &rest[1..];
        // `:N: what` for one line at fault, or `: what` for the whole file.
        let what = match after.split_once(": ") {
            Some((n, what)) if n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() => {
                assert!(n.parse::<usize>().unwrap() >= 1);
                what
            }
            _ => after.trim_start(),
        };
        assert!(what.len() > 10, "a message that says what is wrong: {line}");
    }
}

#[test]
fn huge_line_is_rejected_with_its_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(
        f,
        r#"{{"timestamp": 0, "input_length": 16, "output_length": 4, "hash_ids": [1]}}"#
    )
    .unwrap();
    let chunk = vec![b'7'; 1 << 20];
    f.write_all(br#"{"timestamp": 1, "input_length": 16, "output_length": 4, "hash_ids": ["#)
        .unwrap();
    for _ in 0..65 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(b"]}\n").unwrap();
    drop(f);
    let line = one_error_line(&path, &[]);
    assert!(
        line.ends_with(&format!(
            "{}:2: line is longer than 67108864 bytes (is this really a trace file?)",
            path.display()
        )),
        "{line}"
    );
}

#[test]
fn forced_format_mismatch_is_one_error() {
    let good = trace_fixture("mooncake.jsonl");
    let line = one_error_line(&good, &["--dataset", "azure"]);
    assert!(line.contains(":1: "), "{line}");
    let csv = trace_fixture("azure.csv");
    let line = one_error_line(&csv, &["--dataset", "mooncake"]);
    assert!(line.contains(":1: "), "{line}");
}

#[test]
fn missing_trace_file() {
    let line = one_error_line(Path::new("/nonexistent/trace.jsonl"), &[]);
    assert!(line.contains("/nonexistent/trace.jsonl"), "{line}");
}

/// Invalid combinations: rejected with one line before anything is sent.
#[test]
fn invalid_flag_combinations_are_rejected_before_sending() {
    let good = trace_fixture("mooncake.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let cfg_file = dir.path().join("tokenizer_config.json");
    std::fs::write(&cfg_file, "{}").unwrap();
    let cfg_file = cfg_file.to_str().unwrap();
    let same_as_records = dir.path().join("records.jsonl").display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--tokenizer-config", cfg_file],
            "--tokenizer-config needs --tokenizer",
        ),
        (
            vec!["--start-ms", "500", "--end-ms", "500"],
            "--end-ms (500) must be greater than --start-ms (500)",
        ),
        (
            vec!["--start-ms", "500", "--end-ms", "100"],
            "must be greater than --start-ms",
        ),
        (vec!["--api", "aibrix"], "--api aibrix needs --aibrix-route"),
        (
            vec!["--goodput", "ttft:fast"],
            "invalid goodput SLO `ttft:fast`",
        ),
        (vec!["--goodput", "latency:100"], "unknown metric `latency`"),
        (vec!["--goodput=ttft:-5"], "must be a positive number"),
        (
            vec!["--token-ids"],
            "--token-ids needs a completions endpoint",
        ),
        (
            vec!["--scale-factor", "0"],
            "--scale-factor must be a positive number",
        ),
        (
            vec!["--scale-factor", "NaN"],
            "--scale-factor must be a positive number",
        ),
        (
            vec!["--time-in-secs=-1"],
            "--time-in-secs must be a positive number",
        ),
        (
            vec!["--request-timeout", "0"],
            "--request-timeout must be a positive number",
        ),
        (vec!["--grace-secs=-1"], "--grace-secs must be >= 0"),
        (
            vec!["--early-stop-error-threshold", "0"],
            "--early-stop-error-threshold",
        ),
        (
            vec!["--early-stop-error-threshold", "120%"],
            "--early-stop-error-threshold",
        ),
        (
            vec!["--max-requests", "0"],
            "--max-requests must be at least 1",
        ),
        (
            vec!["--num-producer", "0"],
            "--num-producer must be between 1 and 256",
        ),
        (
            vec!["--channel-capacity", "0"],
            "--channel-capacity must be at least 1",
        ),
        (
            vec!["--metric-percentile", "0,50"],
            "--metric-percentile values must be in (0, 100]",
        ),
        (vec!["--block-size", "0"], "--block-size must be between"),
        (vec!["--dataset", "sharegpt"], "unknown dataset"),
        (
            vec!["--api-key-file", "/nonexistent/key"],
            "--api-key-file /nonexistent/key",
        ),
        (
            vec!["--summary-path", &same_as_records],
            "--summary-path must differ from --output-path",
        ),
    ];
    for (extra, want) in cases {
        let server = RawServer::start(Script::default());
        let mut args = vec!["replay".to_string()];
        args.extend(base_args(&server.url(""), &good, dir.path()));
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = run_bin(&strs(&args), &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{extra:?} accepted");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(
            stderr.contains(want),
            "{extra:?}: expected {want:?} in {stderr}"
        );
        assert_eq!(
            server.connections.load(Ordering::SeqCst),
            0,
            "{extra:?}: something was sent"
        );
    }
    // The endpoint itself.
    for (endpoint, want) in [
        (
            "ftp://127.0.0.1:1/",
            "--endpoint must be http:// or https://",
        ),
        ("not a url", "is not a valid URL"),
        ("http://127.0.0.1:1/v1/embeddings", "is not an OpenAI path"),
    ] {
        let mut args = vec!["replay".to_string()];
        args.extend(base_args(endpoint, &good, dir.path()));
        let out = run_bin(&strs(&args), &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{endpoint}");
        assert!(stderr.contains(want), "{endpoint}: {stderr}");
    }
}
