//! Runs that end before the trace does: `--time-in-secs`, `--max-requests` and
//! `--early-stop-error-threshold` (count and rate) end cleanly, every dispatched request has
//! one record, and requests never sent are counted separately.

use std::path::Path;

use crate::support::*;
use llm_sim::FaultConfig;
use request_sim::record::Status;
use request_sim::stats::Summary;

/// The invariants of a run that stopped early; returns the records' statuses.
fn check(dir: &Path, s: &Summary, planned: usize, reason: &str) -> Vec<Status> {
    let records = read_records(&dir.join("records.jsonl"));
    let file = read_summary_file(&dir.join("records.jsonl.summary.json"));
    assert_eq!(
        (&file.status, &file.errors, &file.run.outcome.stop_reason),
        (&s.status, &s.errors, &s.run.outcome.stop_reason)
    );
    assert_eq!(s.run.outcome.stop_reason.map(|r| r.as_str()), Some(reason));
    assert_eq!(s.run.outcome.planned, Some(planned));
    assert_eq!(s.scheduled, records.len());
    assert_one_record_per_index(&records, records.len());
    assert_eq!(s.scheduled + s.run.outcome.never_sent, planned);
    assert!(s.counts_add_up);
    assert_eq!(s.status.total, records.len());
    assert_eq!(s.completed, s.status.ok);
    if s.run.outcome.never_sent > 0 {
        assert_eq!(
            s.run.outcome.never_sent_reason.map(|r| r.as_str()),
            Some(reason)
        );
    }
    records.iter().map(|r| r.status).collect()
}

#[test]
fn time_limit_stops_sending_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let sim = faulty_sim(FaultConfig::default());
    let trace = write_trace(dir.path(), "t.jsonl", 400, 4_000.0, 16, 4);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--time-in-secs", "1"].map(String::from));
    let out = replay(&strs(&args));
    assert_eq!(out.exit_code, 0);
    let st = check(dir.path(), &out.summary, 400, "time_limit");
    // Requests at trace times [0, 1000) ms: 100 of 400 (one every ~10 ms).
    assert_eq!(st.len(), 100);
    assert!(st.iter().all(|&s| s == Status::Ok));
    assert_eq!(out.summary.run.outcome.never_sent, 300);
}

#[test]
fn time_limit_cancels_requests_still_running_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let sim = faulty_sim(FaultConfig::default());
    // 5,000-token outputs (~5 s each) cannot finish within 1 s + 0.5 s grace.
    let trace = write_trace(dir.path(), "t.jsonl", 20, 2_000.0, 16, 5_000);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--time-in-secs", "1", "--grace-secs", "0.5"].map(String::from));
    let t = std::time::Instant::now();
    let out = replay(&strs(&args));
    assert!(t.elapsed().as_secs_f64() < 4.0, "{:?}", t.elapsed());
    let st = check(dir.path(), &out.summary, 20, "time_limit");
    assert_eq!(st.len(), 10);
    assert!(st.iter().all(|&s| s == Status::Cancelled), "{st:?}");
    assert_eq!(out.summary.errors.get("cancelled"), Some(&10));
}

#[test]
fn max_requests_replays_exactly_that_many() {
    let dir = tempfile::tempdir().unwrap();
    let sim = faulty_sim(FaultConfig::default());
    let trace = write_trace(dir.path(), "t.jsonl", 400, 4_000.0, 16, 4);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--max-requests", "50"].map(String::from));
    let out = replay(&strs(&args));
    assert_eq!(out.exit_code, 0);
    let st = check(dir.path(), &out.summary, 50, "completed");
    assert_eq!(st.len(), 50);
    assert_eq!(out.summary.completed, 50);
    assert_eq!(out.summary.run.outcome.never_sent, 0);
    assert_eq!(
        out.summary
            .run
            .trace_stats
            .as_ref()
            .unwrap()
            .over_max_requests,
        350
    );
}

#[test]
fn early_stop_after_a_count_of_errors() {
    let dir = tempfile::tempdir().unwrap();
    let sim = faulty_sim(FaultConfig {
        seed: 3,
        error_503_rate: 0.2,
        ..FaultConfig::default()
    });
    let trace = write_trace(dir.path(), "t.jsonl", 1_000, 5_000.0, 16, 4);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--early-stop-error-threshold", "10"].map(String::from));
    let out = replay(&strs(&args));
    assert_eq!(out.exit_code, 3);
    let st = check(dir.path(), &out.summary, 1_000, "early_stop");
    let failed = st.iter().filter(|&&s| s == Status::HttpError).count();
    assert!(failed >= 10, "{failed}");
    // Stopped soon after the 10th failure (~50 requests at 20%), not at the end of the trace.
    assert!(st.len() < 200, "{}", st.len());
    assert!(out.summary.run.outcome.never_sent > 800);
    assert_eq!(out.summary.errors.get("http_error:503"), Some(&failed));
}

#[test]
fn early_stop_on_an_error_rate() {
    let dir = tempfile::tempdir().unwrap();
    let sim = faulty_sim(FaultConfig {
        seed: 4,
        error_500_rate: 0.3,
        ..FaultConfig::default()
    });
    let trace = write_trace(dir.path(), "t.jsonl", 1_000, 5_000.0, 16, 4);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--early-stop-error-threshold", "10%"].map(String::from));
    let out = replay(&strs(&args));
    assert_eq!(out.exit_code, 3);
    let st = check(dir.path(), &out.summary, 1_000, "early_stop");
    assert!(
        st.len() >= 20,
        "the rate needs at least 20 finished requests"
    );
    assert!(st.len() < 300, "{}", st.len());
    assert!(out.summary.run.outcome.never_sent > 700);
}

#[test]
fn early_stop_rate_not_reached_completes() {
    let dir = tempfile::tempdir().unwrap();
    let sim = faulty_sim(FaultConfig {
        seed: 5,
        error_500_rate: 0.05,
        ..FaultConfig::default()
    });
    let trace = write_trace(dir.path(), "t.jsonl", 300, 1_500.0, 16, 4);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--early-stop-error-threshold", "50%"].map(String::from));
    let out = replay(&strs(&args));
    assert_eq!(out.exit_code, 0);
    let st = check(dir.path(), &out.summary, 300, "completed");
    assert_eq!(st.len(), 300);
}
