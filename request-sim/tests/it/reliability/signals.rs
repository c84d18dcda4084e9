//! Interruption of the built binary: SIGINT / SIGTERM stop dispatching, give in-flight requests
//! `--grace-secs`, cancel the rest, flush every record and write the summary (stop_reason
//! `interrupted`, exit 130); a second SIGINT cancels at once; SIGKILL leaves at most a partial
//! last line, which `request-sim report` tolerates and reports.

use std::path::Path;
use std::process::Child;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::support::*;
use request_sim::record::{Record, Status};
use request_sim::stats::Summary;

/// Requests of the 30 s trace.
const N: usize = 300;

/// A simulator and a replay of a 30 s trace of `output`-token requests started against it.
fn start(dir: &Path, output: u32, extra: &[&str]) -> (llm_sim::SimThread, Child) {
    // 5 ms per engine step, i.e. per output token of every running request: requests last long
    // enough to be in flight with few SSE events to serve.
    let sim = start_sim(llm_sim::SimConfig {
        step_fixed_us: 5_000.0,
        ..llm_sim::SimConfig::default()
    });
    let trace = write_trace(dir, "trace.jsonl", N, 30_000.0, 16, output);
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(&sim.base_url(), &trace, dir));
    args.extend(extra.iter().map(|s| s.to_string()));
    let child = spawn_bin(&strs(&args), &[]);
    // The replay is dispatching once the simulator has work (the signal handlers are installed
    // before the first request is sent).
    let until = Instant::now() + Duration::from_secs(20);
    while sim.metrics().prompt_tokens.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < until, "the replay never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    (sim, child)
}

/// Wait for the exit (at most `limit` after now), then check the files of an interrupted run.
fn finish(
    dir: &Path,
    mut child: Child,
    limit: Duration,
) -> (Vec<Record>, Summary, Duration, String) {
    let t = Instant::now();
    let status = wait_timeout(&mut child, limit);
    let took = t.elapsed();
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let status = status
        .unwrap_or_else(|| panic!("still running {limit:?} after the signal; stderr:\n{stderr}"));
    assert_eq!(status.code(), Some(130), "stderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let records = read_records(&dir.join("records.jsonl"));
    let summary = read_summary_file(&dir.join("records.jsonl.summary.json"));
    assert_eq!(
        summary.run.outcome.stop_reason.map(|r| r.as_str()),
        Some("interrupted")
    );
    assert!(summary.counts_add_up);
    assert_eq!(summary.scheduled, records.len());
    assert_eq!(summary.run.outcome.planned, Some(N));
    assert_eq!(summary.run.outcome.never_sent, N - records.len());
    assert_eq!(
        summary.run.outcome.never_sent_reason.map(|r| r.as_str()),
        Some("interrupted")
    );
    assert_one_record_per_index(&records, records.len());
    let cancelled = records
        .iter()
        .filter(|r| r.status == Status::Cancelled)
        .count();
    assert_eq!(summary.status.cancelled, cancelled);
    assert_eq!(
        summary.status.ok + cancelled,
        records.len(),
        "{:?}",
        summary.status
    );
    (records, summary, took, stderr)
}

/// SIGINT halfway through a 30 s replay: the run ends within the grace period with every
/// record flushed and the summary written.
#[test]
fn sigint_halfway_through_a_30s_replay() {
    let dir = tempfile::tempdir().unwrap();
    // 200-token outputs take at least 1 s: ~10 requests are in flight at any time, and some
    // cannot finish within the 0.5 s grace.
    let (_sim, child) = start(dir.path(), 200, &["--grace-secs", "0.5"]);
    std::thread::sleep(Duration::from_secs(15));
    signal(&child, "INT");
    let (records, summary, took, stderr) = finish(dir.path(), child, Duration::from_secs(10));
    assert!(
        took < Duration::from_millis(500 + 1_500),
        "exit took {took:?}"
    );
    // About half the trace was sent.
    assert!((100..=200).contains(&records.len()), "{}", records.len());
    assert!(summary.status.ok > 50, "{:?}", summary.status);
    assert!(summary.status.cancelled >= 1, "{:?}", summary.status);
    assert!(stderr.contains("interrupted"), "{stderr}");
    for r in records.iter().filter(|r| r.status == Status::Cancelled) {
        assert_eq!(
            r.error.as_deref(),
            Some("run stopped before the request finished")
        );
    }
}

/// A second SIGINT cancels the in-flight requests at once, even with a long grace period.
#[test]
fn second_sigint_exits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // 4,000-token outputs (20 s): nothing finishes within the test.
    let (_sim, child) = start(dir.path(), 4_000, &["--grace-secs", "60"]);
    std::thread::sleep(Duration::from_millis(1_500));
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, "INT");
    let (records, summary, took, _) = finish(dir.path(), child, Duration::from_secs(10));
    assert!(took < Duration::from_secs(2), "exit took {took:?}");
    assert!(!records.is_empty());
    assert_eq!(
        summary.status.cancelled,
        records.len(),
        "{:?}",
        summary.status
    );
}

/// SIGTERM behaves like the first SIGINT.
#[test]
fn sigterm_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, child) = start(dir.path(), 4_000, &["--grace-secs", "1"]);
    std::thread::sleep(Duration::from_millis(1_500));
    signal(&child, "TERM");
    let (records, summary, took, _) = finish(dir.path(), child, Duration::from_secs(10));
    assert!(
        took < Duration::from_millis(1_000 + 1_500),
        "exit took {took:?}"
    );
    assert!(!records.is_empty());
    assert_eq!(
        summary.status.cancelled,
        records.len(),
        "{:?}",
        summary.status
    );
}

/// SIGKILL mid-run: every complete line is a record; `report` reads the file (tolerating a
/// partial last line) and exits 0.
#[test]
fn sigkill_leaves_a_readable_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_sim, mut child) = start(dir.path(), 20, &[]);
    let path = dir.path().join("records.jsonl");
    assert!(wait_for_lines(&path, 20, Duration::from_secs(20)));
    signal(&child, "KILL");
    let _ = child.wait();
    let bytes = std::fs::read(&path).unwrap();
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(i) => &bytes[..=i],
        None => &bytes[..0],
    };
    let n = complete
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    for l in complete.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        serde_json::from_slice::<Record>(l).unwrap();
    }
    assert!(!dir.path().join("records.jsonl.summary.json").exists());
    let out = run_bin(&["report", "--json", path.to_str().unwrap()], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: Summary = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s.status.total, n);
}

/// A file cut in the middle of its last line (even inside a UTF-8 character) is reported with
/// a warning naming the line; the complete records are summarised.
#[test]
fn report_tolerates_a_truncated_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.jsonl");
    let rec = |i: usize, err: &str| {
        serde_json::json!({
            "index": i, "line": i + 1, "timestamp": i as f64, "scheduled_ms": i as f64,
            "sent_ms": i as f64, "drift_ms": 0.0, "status": "http_error", "http_status": 500,
            "error": err, "ttft_ms": null, "ttfc_ms": null, "e2e_ms": null, "done_ms": null,
            "tpot_ms": null, "input_length": 16, "prompt_tokens": null, "cached_tokens": null,
            "output_length": 8, "output_tokens": null, "output_tokens_source": null, "chunks": 0
        })
        .to_string()
    };
    let mut text = String::new();
    for i in 0..5 {
        text.push_str(&rec(i, "HTTP 500: boom"));
        text.push('\n');
    }
    let last = rec(5, "HTTP 500: \u{e9}\u{e9}\u{e9}");
    let cut_at = last.find('\u{e9}').unwrap() + 1; // inside the 2-byte character
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(&last.as_bytes()[..cut_at]);
    std::fs::write(&path, &bytes).unwrap();
    for json in [true, false] {
        let mut args = vec!["report", path.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let out = run_bin(&args, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if json {
            let s: Summary = serde_json::from_str(&stdout).unwrap();
            assert_eq!(s.status.total, 5);
            assert_eq!(s.status.http_error, 5);
            assert!(
                s.warnings
                    .iter()
                    .any(|w| w.contains("line 6") && w.contains("incomplete")),
                "{:?}",
                s.warnings
            );
        } else {
            assert!(stdout.contains("line 6"), "{stdout}");
        }
    }
}

/// SIGINT to a sweep during its second point: that point stops like an interrupted replay, the
/// sweep ends with exit 130, and sweep.json keeps the first point, whole, and the cut one.
#[test]
fn sigint_during_a_sweep_keeps_the_points_done() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(llm_sim::SimConfig {
        step_fixed_us: 5_000.0,
        ..llm_sim::SimConfig::default()
    });
    // 100 requests over 10 s: 1.25 s at scale 8, 10 s at scale 1.
    let trace = write_trace(dir.path(), "trace.jsonl", 100, 10_000.0, 16, 4);
    let sweep_dir = dir.path().join("sweep");
    let mut args = vec![
        "sweep".to_string(),
        "--scale-factors".into(),
        "8,1,0.5".into(),
        "--sweep-dir".into(),
        sweep_dir.display().to_string(),
        "--grace-secs".into(),
        "1".into(),
    ];
    // Without --output-path: a sweep sets each point's records file and refuses one given.
    let base = base_args(&sim.base_url(), &trace, dir.path());
    let at = base.iter().position(|a| a == "--output-path").unwrap();
    args.extend(base[..at].iter().chain(&base[at + 2..]).cloned());
    let mut child = spawn_bin(&strs(&args), &[]);
    // The second point is under way once its records file has a few lines.
    let second = sweep_dir.join("scale-1").join("records.jsonl");
    assert!(
        wait_for_lines(&second, 5, Duration::from_secs(60)),
        "the second point never started"
    );
    // sweep.json is saved after every point: a sweep killed now would keep the first one.
    let so_far = read_sweep(&sweep_dir);
    assert_eq!(so_far.points.len(), 1);
    assert!(!so_far.interrupted);
    assert!(so_far.answer.contains("scale 8"), "{}", so_far.answer);
    signal(&child, "INT");
    let status = wait_timeout(&mut child, Duration::from_secs(15));
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{stderr}");
    // One point was done; the cut one is said apart.
    assert!(
        stderr.contains("sweep interrupted: keeping the 1 point done; the point at scale 1 was cut short (marked interrupted, left out of the answer and the plot)"),
        "{stderr}"
    );
    // The table marks the cut point.
    let row = |f: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(f))
            .unwrap_or_else(|| panic!("no row for scale {f}:\n{stdout}"))
            .to_string()
    };
    assert!(!row("8").contains("INTERRUPTED"), "{stdout}");
    assert!(row("1").ends_with("INTERRUPTED"), "{stdout}");
    // sweep.json marks it, the chart leaves it out and says so.
    let json = read_json(&sweep_dir.join("sweep.json"));
    assert_eq!(json["points"][0]["interrupted"], false);
    assert_eq!(json["points"][1]["interrupted"], true);
    let svg = std::fs::read_to_string(sweep_dir.join("sweep.svg")).unwrap();
    assert!(
        svg.contains("scale 1 cut short by Ctrl-C: not drawn"),
        "{svg}"
    );
    let html = std::fs::read_to_string(sweep_dir.join("report.html")).unwrap();
    assert!(html.contains("INTERRUPTED"), "{html}");
    let r = read_sweep(&sweep_dir);
    assert!(r.interrupted);
    assert_eq!(r.points.len(), 2, "the third point never ran");
    let (first, cut) = (&r.points[0], &r.points[1]);
    assert_eq!((first.scale_factor, first.exit_code), (8.0, 0));
    assert_eq!((first.scheduled, first.completed), (100, 100));
    assert_eq!((cut.scale_factor, cut.exit_code), (1.0, 130));
    assert!(cut.scheduled < 100, "{cut:?}");
    assert!(!sweep_dir.join("scale-0.5").exists());
    // The cut point is kept but not judged: the answer rests on scale 8 alone.
    assert!(r.answer.contains("scale 8"), "{}", r.answer);
    assert!(!r.answer.contains("scale 1 "), "{}", r.answer);
    assert!(sweep_dir.join("report.html").is_file());
    assert!(sweep_dir.join("scale-1").join("report.html").is_file());
}
