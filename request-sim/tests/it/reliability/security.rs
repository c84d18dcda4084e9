//! Security: the API key from `--api-key`, `$OPENAI_API_KEY` or `--api-key-file` reaches the
//! server as `Authorization: Bearer KEY` and never appears on stdout/stderr, in records or in the
//! summary, even when the server echoes it in an error; nothing request-sim starts listens on a
//! non-loopback address.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;

const KEY: &str = "sk-test-Zq7Kx2Vb9Np4Lm1Rt8Yw";

/// Run the binary against a raw server; the server's requests, stdout+stderr and the output
/// files' text.
fn run_with_key(script: Script, how: &str) -> (Vec<SeenRequest>, String, String) {
    let server = RawServer::start(script);
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 3, 10.0, 16, 2);
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(
        &server.url("/v1/chat/completions"),
        &trace,
        dir.path(),
    ));
    // No --model-name: the GET /v1/models call must carry the key too.
    let i = args.iter().position(|a| a == "--model-name").unwrap();
    args.drain(i..i + 2);
    let mut envs = Vec::new();
    let key_file = dir.path().join("key.txt");
    match how {
        "flag" => args.extend(["--api-key".to_string(), KEY.to_string()]),
        "env" => envs.push(("OPENAI_API_KEY", KEY)),
        "file" => {
            std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
            args.extend(["--api-key-file".to_string(), key_file.display().to_string()]);
        }
        _ => unreachable!(),
    }
    let out = run_bin(&strs(&args), &envs);
    let console = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{console}");
    let mut files = String::new();
    for f in ["records.jsonl", "records.jsonl.summary.json"] {
        files.push_str(&std::fs::read_to_string(dir.path().join(f)).unwrap());
    }
    (server.requests(), console, files)
}

fn ok_stream() -> Script {
    let a = chat_chunk("a");
    let b = chat_chunk("b");
    let tail = chat_usage_done(16, 2);
    Script::sse(&[a.as_bytes(), b.as_bytes(), tail.as_bytes()])
}

#[test]
fn api_key_reaches_the_server_and_nothing_else() {
    for how in ["flag", "env", "file"] {
        let (seen, console, files) = run_with_key(ok_stream(), how);
        let models = seen
            .iter()
            .filter(|r| r.head.starts_with("GET /v1/models"))
            .count();
        assert_eq!(seen.len() - models, 3, "{how}: 3 requests");
        assert!(models >= 2, "{how}: model lookup and connection warm-up");
        for r in &seen {
            assert_eq!(
                r.header("authorization").as_deref(),
                Some(format!("Bearer {KEY}").as_str()),
                "{how}: {}",
                r.head
            );
        }
        assert!(
            !console.contains(KEY) && !console.contains(&KEY[8..]),
            "{how}: key printed:\n{console}"
        );
        assert!(!files.contains(&KEY[8..]), "{how}: key written");
        assert!(files.contains("\"ok\""), "{how}");
    }
}

#[test]
fn key_echoed_by_the_server_is_redacted() {
    let body = format!("{{\"error\":{{\"message\":\"Incorrect API key provided: {KEY}. You can find your API key at ...\",\"code\":\"invalid_api_key\"}}}}");
    let script = Script::whole("401 Unauthorized", "application/json", body.as_bytes());
    // The model lookup fails first with 401: give the model name to reach the requests.
    let server = RawServer::start(script);
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 3, 10.0, 16, 2);
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(
        &server.url("/v1/chat/completions"),
        &trace,
        dir.path(),
    ));
    args.extend(["--api-key".to_string(), KEY.to_string()]);
    let out = run_bin(&strs(&args), &[]);
    let console = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Every request refused: no request succeeded (exit 5).
    assert_eq!(out.status.code(), Some(5), "{console}");
    let records = read_records(&dir.path().join("records.jsonl"));
    assert_eq!(records.len(), 3);
    for r in &records {
        assert_eq!(r.http_status, Some(401));
        let e = r.error.as_deref().unwrap();
        assert!(
            e.starts_with("HTTP 401: Incorrect API key provided: "),
            "{e}"
        );
        assert!(!e.contains(&KEY[8..]), "{e}");
    }
    let summary = std::fs::read_to_string(dir.path().join("records.jsonl.summary.json")).unwrap();
    assert!(!summary.contains(&KEY[8..]));
    assert!(!console.contains(&KEY[8..]), "{console}");
}

/// Socket inodes of a process (from /proc/PID/fd).
#[cfg(target_os = "linux")]
fn socket_inodes(pid: u32) -> Vec<String> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for e in rd.flatten() {
            if let Ok(t) = std::fs::read_link(e.path()) {
                let t = t.display().to_string();
                if let Some(i) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                    v.push(i.to_string());
                }
            }
        }
    }
    v
}

/// Local addresses (hex, as in /proc/net/tcp*) of listening TCP sockets with these inodes.
#[cfg(target_os = "linux")]
fn listening(pid: u32, inodes: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for f in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{f}")) else {
            continue;
        };
        for l in text.lines().skip(1) {
            let cols: Vec<&str> = l.split_whitespace().collect();
            if cols.len() > 9 && cols[3] == "0A" && inodes.iter().any(|i| i == cols[9]) {
                out.push(cols[1].to_string());
            }
        }
    }
    out
}

/// With no --endpoint the built-in simulator runs in-process: it listens on 127.0.0.1 only.
#[cfg(target_os = "linux")]
#[test]
fn nothing_listens_on_a_non_loopback_address() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 40, 4_000.0, 16, 4);
    let records = dir.path().join("records.jsonl");
    let child = spawn_bin(
        &[
            "replay",
            "--dataset-path",
            trace.to_str().unwrap(),
            "--output-path",
            records.to_str().unwrap(),
            "--quiet",
            "--no-pin",
        ],
        &[],
    );
    let pid = child.id();
    let until = Instant::now() + Duration::from_secs(20);
    let mut found = Vec::new();
    while found.is_empty() && Instant::now() < until {
        found = listening(pid, &socket_inodes(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !found.is_empty(),
        "the built-in simulator was seen listening"
    );
    for a in &found {
        let (host, _port) = a.split_once(':').unwrap();
        let loopback = host == "0100007F" || host == "00000000000000000000000001000000";
        assert!(loopback, "listening on {a} (not 127.0.0.1 / ::1)");
    }
    assert_eq!(read_records(Path::new(&records)).len(), 40);
}
