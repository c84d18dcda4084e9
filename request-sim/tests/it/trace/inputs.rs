//! Traces from what is not a regular file, as a user gives them: a pipe (`<(cat t.jsonl)`), a
//! named FIFO, a device that never ends a line. Each is read once and ends, never hangs.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::trace_fixture;

const BIN: &str = env!("CARGO_BIN_EXE_request-sim");

/// Waits for `child` at most `limit`; its exit code, stdout and stderr (killed and failed past
/// the limit: a hang).
fn finish(mut child: Child, limit: Duration, what: &str) -> (i32, String, String) {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (
                status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn spawn(args: &[&str]) -> Child {
    Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn requests(json: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    v["requests"].as_u64().unwrap()
}

#[test]
fn analyze_reads_a_process_substitution_pipe() {
    let trace = trace_fixture("generic.jsonl");
    let want = {
        let (code, out, err) = finish(
            spawn(&["analyze", trace.to_str().unwrap(), "--json"]),
            Duration::from_secs(30),
            "analyze file",
        );
        assert_eq!(code, 0, "{err}");
        requests(&out)
    };
    let child = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "exec {BIN} analyze <(cat {}) --json",
            trace.display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err) = finish(child, Duration::from_secs(30), "analyze <(cat ...)");
    assert_eq!(code, 0, "{err}");
    assert_eq!(requests(&out), want, "the pipe gives the file's requests");
}

/// A named FIFO in a temporary directory, fed `text` by a writer thread once a reader opens it.
fn fifo(text: String) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.fifo");
    let ok = Command::new("mkfifo").arg(&path).status().unwrap();
    assert!(ok.success());
    let p = path.clone();
    std::thread::spawn(move || {
        // Opening for writing blocks until the reader opens it.
        if let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&p) {
            let _ = f.write_all(text.as_bytes());
        }
    });
    (dir, path)
}

#[test]
fn analyze_and_replay_read_a_named_fifo_once() {
    let text = std::fs::read_to_string(trace_fixture("generic.jsonl")).unwrap();
    let rows = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
    let (_dir, path) = fifo(text.clone());
    let (code, out, err) = finish(
        spawn(&["analyze", path.to_str().unwrap(), "--json"]),
        Duration::from_secs(30),
        "analyze FIFO",
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(requests(&out), rows);

    let (dir, path) = fifo(text);
    let rec = dir.path().join("rec.jsonl");
    let (code, _, err) = finish(
        spawn(&[
            "replay",
            "--dataset-path",
            path.to_str().unwrap(),
            "--scale-factor",
            "50",
            "-o",
            rec.to_str().unwrap(),
        ]),
        Duration::from_secs(60),
        "replay FIFO",
    );
    assert_eq!(code, 0, "{err}");
    let records = std::fs::read_to_string(&rec).unwrap();
    assert_eq!(records.lines().count() as u64, rows, "{records}");
}

#[test]
fn a_device_that_never_ends_a_line_is_an_error_not_a_spin() {
    for extra in [&[][..], &["--skip-invalid"][..]] {
        let mut args = vec!["analyze", "/dev/zero"];
        args.extend_from_slice(extra);
        let (code, _, err) = finish(spawn(&args), Duration::from_secs(60), "analyze /dev/zero");
        assert_ne!(code, 0, "{err}");
        assert!(
            err.contains("/dev/zero:1: line is longer than 67108864 bytes")
                || err.contains("no line end in 1073741"),
            "{extra:?}: {err}"
        );
    }
}
