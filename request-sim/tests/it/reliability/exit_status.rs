//! The exit status says whether the run did its job: a run in which no request succeeded exits
//! 5 (a closed port, a wrong API key, a server not ready), whatever the reason; with
//! `--max-error-rate`, a share of errored requests above it exits 6 after recording
//! everything; a run with failures within the limit, or without the flag, exits 0.

use std::path::Path;

use crate::support::*;

/// `request-sim replay` of `n` requests against `endpoint` as the built binary: exit code and
/// stderr, and the summary it wrote.
fn run(dir: &Path, endpoint: &str, n: usize, extra: &[&str]) -> (i32, String, serde_json::Value) {
    let trace = write_trace(dir, "trace.jsonl", n, 200.0, 16, 4);
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(endpoint, &trace, dir));
    args.extend(["--request-timeout".to_string(), "5".to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let (code, _, stderr) = run_cli(&args, &[]);
    let summary = read_json(&dir.join("records.jsonl.summary.json"));
    (code, stderr, summary)
}

/// A port on 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn no_successful_request_exits_5() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens: every request is a connect_error.
    let url = format!("http://127.0.0.1:{}/v1/chat/completions", closed_port());
    let (code, stderr, s) = run(dir.path(), &url, 30, &[]);
    assert_eq!(s["status"]["connect_error"], 30, "{stderr}");
    assert_eq!(code, 5, "{stderr}");
    assert!(
        stderr.contains("exit status 5: no request succeeded (30 connect_error)"),
        "{stderr}"
    );
    // A wrong key (401) and a server not ready (503): every request answered, none succeeded.
    for (status, kind) in [
        ("401 Unauthorized", "http_error:401"),
        ("503 Service Unavailable", "http_error:503"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let server = RawServer::start(Script::whole(
            status,
            "application/json",
            br#"{"error": {"message": "no"}}"#,
        ));
        let (code, stderr, s) = run(dir.path(), &server.url("/v1/chat/completions"), 20, &[]);
        assert_eq!(s["errors"][kind], 20, "{stderr}");
        assert_eq!(code, 5, "{status}: {stderr}");
        assert!(stderr.contains(&format!("(20 {kind})")), "{stderr}");
    }
}

/// A closed port found by a start-up probe (no `--model-name`: `GET /v1/models`; no
/// `--tokenizer`: the server's `/tokenize`) exits 5 like a run whose requests all failed to
/// connect, with a message naming the endpoint (issue #39 defect 11).
#[test]
fn a_closed_port_at_start_up_exits_5() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "trace.jsonl", 3, 200.0, 16, 4);
    let port = closed_port();
    let base = format!("http://127.0.0.1:{port}");
    for (path, extra, probe) in [
        ("/v1/chat/completions", &[][..], "/v1/models"),
        (
            "/v1/chat/completions",
            &["--model-name", "m"][..],
            "/tokenize",
        ),
        ("/v1/responses", &[][..], "/v1/models"),
    ] {
        let mut args: Vec<String> = [
            "replay",
            "--endpoint",
            &format!("{base}{path}"),
            "--dataset-path",
            &trace.display().to_string(),
            "--output-path",
            &dir.path().join("records.jsonl").display().to_string(),
            "--quiet",
            "--no-server-metrics",
        ]
        .map(String::from)
        .to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        let (code, _, stderr) = run_cli(&args, &[]);
        assert_eq!(code, 5, "{path} {extra:?}: {stderr}");
        let want = format!("cannot connect to {base}{probe}");
        assert!(stderr.contains(&want), "{path} {extra:?}: {stderr}");
        assert!(stderr.contains("connection refused"), "{stderr}");
    }
}

#[test]
fn max_error_rate_is_a_ci_threshold() {
    let dir = tempfile::tempdir().unwrap();
    // 20% of the requests answered 503, the rest fine.
    let sim = faulty_sim(llm_sim::FaultConfig {
        seed: 11,
        error_503_rate: 0.2,
        ..llm_sim::FaultConfig::default()
    });
    let (code, stderr, s) = run(dir.path(), &sim.base_url(), 100, &[]);
    let errored = s["status"]["http_error"].as_u64().unwrap();
    assert!((8..=35).contains(&errored), "{errored}");
    assert_eq!(s["status"]["ok"].as_u64().unwrap() + errored, 100);
    // Without the flag, overload answers are results to record: exit 0.
    assert_eq!(code, 0, "{stderr}");
    // Above the limit: exit 6, every record written.
    let (code, stderr, s) = run(
        dir.path(),
        &sim.base_url(),
        100,
        &["--max-error-rate", "0.05"],
    );
    assert_eq!(s["status"]["total"], 100);
    let errored = s["status"]["http_error"].as_u64().unwrap();
    assert!(errored > 5, "{errored}");
    assert_eq!(code, 6, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "exit status 6: {errored} of 100 requests ({errored}.00%) ended in error, above --max-error-rate 0.05"
        )),
        "{stderr}"
    );
    // Within it: exit 0.
    let (code, stderr, _) = run(
        dir.path(),
        &sim.base_url(),
        100,
        &["--max-error-rate", "0.5"],
    );
    assert_eq!(code, 0, "{stderr}");
    // Not a fraction: refused before anything is sent.
    for bad in ["1.5", "-0.1", "NaN"] {
        let e = config(&[&format!("--max-error-rate={bad}")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--max-error-rate must be a fraction"), "{e}");
    }
}

/// One cause, one exit code: a closed port or a refused key found by the calibration request
/// (no `--chat-overhead`) or by `GET /v1/models` (no `--model-name`) exits 5, as when the
/// requests find it.
#[test]
fn start_up_requests_give_the_same_exit_code_as_requests() {
    let without = |args: Vec<String>, drop: &str, with_value: bool| {
        let mut a = args;
        if let Some(i) = a.iter().position(|x| x == drop) {
            a.drain(i..i + 1 + usize::from(with_value));
        }
        a
    };
    let cases = [("--chat-overhead", true), ("--model-name", true)];
    for (drop, with_value) in cases {
        // A closed port.
        let dir = tempfile::tempdir().unwrap();
        let trace = write_trace(dir.path(), "trace.jsonl", 3, 100.0, 16, 4);
        let url = format!("http://127.0.0.1:{}/v1/chat/completions", closed_port());
        let mut args = vec!["replay".to_string()];
        args.extend(without(
            base_args(&url, &trace, dir.path()),
            drop,
            with_value,
        ));
        let (code, _, stderr) = run_cli(&args, &[]);
        assert_eq!(code, 5, "{drop} left out, closed port: {stderr}");
        // A refused key.
        let server = RawServer::start(Script::whole(
            "401 Unauthorized",
            "application/json",
            br#"{"error": {"message": "bad key"}}"#,
        ));
        let mut args = vec!["replay".to_string()];
        args.extend(without(
            base_args(&server.url("/v1/chat/completions"), &trace, dir.path()),
            drop,
            with_value,
        ));
        let (code, _, stderr) = run_cli(&args, &[]);
        assert_eq!(code, 5, "{drop} left out, 401: {stderr}");
        if drop == "--chat-overhead" {
            assert!(stderr.contains("calibration request"), "{stderr}");
            assert!(stderr.contains("API key was refused"), "{stderr}");
        }
    }
}
