//! Pooled keep-alive connections the server closes: the keep-alive race (the server's idle
//! timer fires just as the client reuses the connection) must not turn into failed records.
//! llm-sim's `idle_close_ms` closes a connection idle for longer than that, unanswered, when
//! the next request arrives on it, so the race happens on every such reuse, deterministically.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::support::*;
use llm_sim::SimConfig;
use request_sim::record::Status;

/// `groups` bursts of `burst` requests each (same timestamp), the gaps between bursts
/// cycling through `gaps_ms`.
fn write_bursts(dir: &Path, groups: usize, burst: usize, gaps_ms: &[f64]) -> PathBuf {
    let path = dir.join("bursts.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut t = 0.0;
    for g in 0..groups {
        for i in 0..burst {
            writeln!(
                f,
                r#"{{"timestamp": {t:.3}, "input_length": 16, "output_length": 2, "hash_ids": [{}]}}"#,
                (g * burst + i) % 50
            )
            .unwrap();
        }
        t += gaps_ms[g % gaps_ms.len()];
    }
    path
}

/// Generation requests the simulator's engine received.
fn seen_by_server(sim: &llm_sim::SimThread) -> u64 {
    use std::sync::atomic::Ordering::Relaxed;
    let m = sim.metrics();
    m.requests_finished.load(Relaxed) + m.requests_aborted.load(Relaxed)
}

#[test]
fn idle_connections_closed_by_the_server_are_retried_once() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(SimConfig {
        idle_close_ms: Some(50),
        ..SimConfig::default()
    });
    // 1,000 requests: 125 bursts of 8, gaps of 20-80 ms around the server's 50 ms.
    let trace = write_bursts(dir.path(), 125, 8, &[20.0, 40.0, 60.0, 80.0]);
    let args = base_args(&sim.base_url(), &trace, dir.path());
    let out = replay(&strs(&args));
    let records = read_records(&dir.path().join("records.jsonl"));
    assert_one_record_per_index(&records, 1000);

    let failed: Vec<_> = records.iter().filter(|r| r.status != Status::Ok).collect();
    assert!(
        failed.is_empty(),
        "{} failed, first: {:?}",
        failed.len(),
        failed[0]
    );
    let retried: Vec<_> = records.iter().filter(|r| r.retries > 0).collect();
    // Bursts after 60 and 80 ms gaps reuse connections the server considers idle.
    assert!(retried.len() >= 100, "only {} retries", retried.len());
    assert!(retried.iter().all(|r| r.retries == 1));
    assert_eq!(out.summary.retried, retried.len());
    assert_eq!(out.summary.status.connect_error, 0);
    // The closed attempts never reached the server: it saw each request exactly once.
    assert_eq!(seen_by_server(&sim), 1000);
    // A retried record keeps its first send time: drift is measured from the schedule.
    for r in &retried {
        let (sent, drift) = (r.sent_ms.unwrap(), r.drift_ms.unwrap());
        assert!((sent - r.scheduled_ms - drift).abs() < 0.01, "{r:?}");
    }
}

#[test]
fn connection_close_server_never_fails_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(SimConfig {
        no_keep_alive: true,
        ..SimConfig::default()
    });
    let trace = write_bursts(dir.path(), 50, 4, &[10.0, 30.0]);
    let args = base_args(&sim.base_url(), &trace, dir.path());
    let out = replay(&strs(&args));
    let records = read_records(&dir.path().join("records.jsonl"));
    assert_one_record_per_index(&records, 200);
    let failed: Vec<_> = records.iter().filter(|r| r.status != Status::Ok).collect();
    assert!(
        failed.is_empty(),
        "{} failed, first: {:?}",
        failed.len(),
        failed[0]
    );
    // `Connection: close` is honoured: no connection is reused, so nothing needs a retry.
    assert_eq!(out.summary.retried, 0);
    assert_eq!(seen_by_server(&sim), 200);
}

/// A server that announces its idle timeout (`Keep-Alive: timeout=1`) gets a pool that drops
/// idle connections before it does: even with `--pool-idle-timeout 90`, bursts 1.3 s apart
/// reuse no connection the server has closed, so nothing needs a retry. (Without the header
/// the same run needs a retry for each reused connection: the first test above.)
#[test]
fn announced_keep_alive_timeout_is_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(SimConfig {
        idle_close_ms: Some(1000),
        announce_keep_alive: true,
        ..SimConfig::default()
    });
    let trace = write_bursts(dir.path(), 4, 6, &[1300.0]);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--pool-idle-timeout".to_string(), "90".to_string()]);
    let out = replay(&strs(&args));
    let records = read_records(&dir.path().join("records.jsonl"));
    assert_one_record_per_index(&records, 24);
    assert!(records.iter().all(|r| r.status == Status::Ok));
    let startup = out.summary.run.internals.startup.unwrap();
    assert_eq!(startup.server_keep_alive_s, Some(1.0));
    assert_eq!(
        out.summary.retried, 0,
        "idle connections outlived the server's"
    );
    assert_eq!(seen_by_server(&sim), 24);
}
