//! A stop ends the run within `--grace-secs` whatever gap the trace has before its next row:
//! the time limit, SIGTERM and SIGINT during a 30 s gap, SIGINT before a row at 10^15 ms, and a
//! second SIGINT (the forced stop) while a request is in flight. Each run is the built binary
//! on a real trace file; each ends with every record, the never-sent row counted, and the
//! summary (which says when the stop was forced).

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::support::*;
use request_sim::record::Status;
use request_sim::stats::Summary;

/// A row at 10^15 ms (31,700 years): a run waits for it forever unless a stop ends the wait.
const FAR_MS: f64 = 1e15;

/// A mooncake trace `dir/name` of two rows, at 0 and at `second_ms`, the first with `output`
/// output tokens.
fn two_rows(dir: &Path, name: &str, second_ms: f64, output: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "{{\"timestamp\": 0, \"input_length\": 16, \"output_length\": {output}, \"hash_ids\": [1]}}\n\
             {{\"timestamp\": {second_ms:.0}, \"input_length\": 16, \"output_length\": 4, \"hash_ids\": [2]}}\n"
        ),
    )
    .unwrap();
    path
}

/// `replay` of `trace` with the built-in simulator (the README's first command), records in
/// `dir/records.jsonl`, plus `extra`.
fn builtin_replay(dir: &Path, trace: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "replay".into(),
        "--dataset-path".into(),
        trace.display().to_string(),
        "--output-path".into(),
        dir.join("records.jsonl").display().to_string(),
        "--quiet".into(),
        "--no-pin".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Wait for the exit (`limit` at most), then check what a stopped two-row run leaves: exit
/// `code`, the stop reason, one record (the first row) ending as `first`, the second row
/// counted as never sent, and the summary. Returns the time it took and the summary.
fn stopped_run(
    dir: &Path,
    mut child: Child,
    limit: Duration,
    code: i32,
    reason: &str,
    first: Status,
) -> (Duration, Summary) {
    let t = Instant::now();
    let status = wait_timeout(&mut child, limit);
    let took = t.elapsed();
    if status.is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let status =
        status.unwrap_or_else(|| panic!("still running {limit:?} after the stop:\n{stderr}"));
    assert_eq!(status.code(), Some(code), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let records = read_records(&dir.join("records.jsonl"));
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!((records[0].index, records[0].status), (0, first));
    let summary = read_summary_file(&dir.join("records.jsonl.summary.json"));
    let o = &summary.run.outcome;
    assert_eq!(o.stop_reason.map(|r| r.as_str()), Some(reason), "{stderr}");
    assert_eq!(
        (summary.scheduled, o.never_sent, o.planned),
        (1, 1, Some(2))
    );
    assert_eq!(o.never_sent_reason.map(|r| r.as_str()), Some(reason));
    assert!(summary.counts_add_up);
    (took, summary)
}

/// A two-row run (the second row `second_ms` later) on the built-in simulator with
/// `--grace-secs 2`, sent `sig` `pause` after the first row's record: what [`stopped_run`]
/// checks of it (exit 130, interrupted, the first row ok).
fn signalled_in_gap(dir: &Path, second_ms: f64, sig: &str, pause: Duration) -> (Duration, Summary) {
    let trace = two_rows(dir, "gap.jsonl", second_ms, 4);
    let args = builtin_replay(dir, &trace, &["--grace-secs", "2"]);
    let child = spawn_bin(&strs(&args), &[]);
    // The first row has its record: the run is in the gap.
    assert!(wait_for_lines(
        &dir.join("records.jsonl"),
        1,
        Duration::from_secs(20)
    ));
    std::thread::sleep(pause);
    signal(&child, sig);
    stopped_run(
        dir,
        child,
        Duration::from_secs(40),
        130,
        "interrupted",
        Status::Ok,
    )
}

/// `replay -t 3` of a trace with rows at 0 and 30 s ends at the limit, not at the second
/// row's lookahead (it took 25 s).
#[test]
fn a_time_limit_ends_the_run_during_a_30s_gap() {
    let dir = tempfile::tempdir().unwrap();
    let trace = two_rows(dir.path(), "gap.jsonl", 30_000.0, 4);
    let args = builtin_replay(dir.path(), &trace, &["-t", "3", "--grace-secs", "1"]);
    let t = Instant::now();
    let child = spawn_bin(&strs(&args), &[]);
    let (_, summary) = stopped_run(
        dir.path(),
        child,
        Duration::from_secs(40),
        0,
        "time_limit",
        Status::Ok,
    );
    let took = t.elapsed();
    // The limit, the 1 s grace (nothing is in flight) and 1 s for start-up and the files.
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(3 + 1 + 1),
        "took {took:?}"
    );
    assert!(summary.run.outcome.wall_time_s.is_some_and(|w| w < 4.0));
}

/// SIGTERM 4 s into a 30 s gap: the run ends within the grace (it ended 21 s later, past
/// Kubernetes' 30 s grace for any gap over ~35 s).
#[test]
fn sigterm_ends_the_run_during_a_30s_gap() {
    let dir = tempfile::tempdir().unwrap();
    let (took, _) = signalled_in_gap(dir.path(), 30_000.0, "TERM", Duration::from_secs(3));
    assert!(took < Duration::from_secs(2 + 1), "exit took {took:?}");
}

/// SIGINT before a row at 10^15 ms: the run ends (it never did).
#[test]
fn sigint_ends_the_run_before_a_row_at_1e15_ms() {
    let dir = tempfile::tempdir().unwrap();
    let (took, summary) = signalled_in_gap(dir.path(), FAR_MS, "INT", Duration::from_millis(500));
    assert!(took < Duration::from_secs(2 + 1), "exit took {took:?}");
    assert!(
        !summary.warnings.iter().any(|w| w.contains("forced")),
        "{:?}",
        summary.warnings
    );
}

/// A second SIGINT while the first row is in flight (a 60 s grace it would wait out) and the
/// next row is at 10^15 ms: the stop is forced, the run ends at once with the cancelled
/// record, and the summary says the stop was forced (it hung until SIGKILL).
#[test]
fn a_second_sigint_forces_the_stop_before_a_row_at_1e15_ms() {
    let dir = tempfile::tempdir().unwrap();
    // 5 ms per output token: the first row's 4,000 tokens take 20 s.
    let sim = start_sim(llm_sim::SimConfig {
        step_fixed_us: 5_000.0,
        ..llm_sim::SimConfig::default()
    });
    let trace = two_rows(dir.path(), "far.jsonl", FAR_MS, 4_000);
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(&sim.base_url(), &trace, dir.path()));
    args.extend(["--grace-secs".to_string(), "60".to_string()]);
    let child = spawn_bin(&strs(&args), &[]);
    let until = Instant::now() + Duration::from_secs(20);
    while sim.metrics().prompt_tokens.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < until, "the replay never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, "INT");
    let (took, summary) = stopped_run(
        dir.path(),
        child,
        Duration::from_secs(20),
        130,
        "interrupted",
        Status::Cancelled,
    );
    // Far within the 60 s grace (about 50 ms on a quiet machine).
    assert!(took < Duration::from_secs(3), "exit took {took:?}");
    assert_eq!(summary.status.cancelled, 1, "{:?}", summary.status);
    assert!(
        summary.warnings.iter().any(|w| w.contains(
            "the stop was forced by a second Ctrl-C/SIGTERM: the requests in flight were cancelled at once, without --grace-secs (cancelled: 1, never sent: 1)"
        )),
        "{:?}",
        summary.warnings
    );
}
