//! A generic trace with `session_id` and `hash_ids` keeps its sessions when detected (it used to
//! be read as Mooncake and replayed open-loop without a word), and `--timing closed` on a trace
//! without sessions is refused instead of running open-loop.

use std::path::{Path, PathBuf};

use crate::support::*;

/// Four sessions of three turns, `session_id` + `hash_ids` (block 16), turns 100 ms apart.
fn session_trace(dir: &Path) -> PathBuf {
    let path = dir.join("sessions.jsonl");
    let mut text = String::new();
    for s in 0..4u64 {
        for t in 0..3u64 {
            let ids: Vec<u64> = (s * 100..s * 100 + (t + 1) * 2).collect();
            text.push_str(&format!(
                "{{\"session_id\": \"s{s}\", \"timestamp\": {}, \"input_length\": {}, \"output_length\": 4, \"hash_ids\": {ids:?}}}\n",
                s * 10 + t * 100,
                32 * (t + 1)
            ));
        }
    }
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn detected_generic_sessions_run_closed_loop() {
    let dir = tempfile::tempdir().unwrap();
    let trace = session_trace(dir.path());
    let sim = default_sim();
    let out = dir.path().join("r.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--block-size",
        "16",
        "--timing",
        "closed",
        "--think-time",
        "500",
        "--scale-factor",
        "10",
        "--seed",
        "1",
        "--no-server-metrics",
        "-o",
        out.to_str().unwrap(),
    ]);
    let sessions = outcome.summary.sessions.expect("a sessions section");
    assert_eq!(sessions.sessions, 4);
    let recs = read_records_by_index(&out);
    assert_eq!(recs.len(), 12);
    assert!(
        recs.iter().all(|r| r.session_id.is_some()),
        "session ids in the records"
    );
    // Closed loop: a later turn waited for its parent plus 500 ms of think time (its trace
    // gap at scale 10 is 10 ms).
    let followers: Vec<_> = recs.iter().filter(|r| r.parent_index.is_some()).collect();
    assert_eq!(followers.len(), 8);
    for r in followers {
        assert!(r.session_wait_ms.unwrap_or(0.0) >= 450.0, "{r:?}");
    }
}

#[test]
fn closed_timing_without_sessions_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mooncake = trace_fixture("mooncake.jsonl");
    let azure = trace_fixture("azure.csv");
    for (trace, why) in [
        (&mooncake, "no row has a session id"),
        (&azure, "an azure trace has no session ids"),
    ] {
        let (code, _, stderr) = run_cli(
            [
                "replay",
                "--dataset-path",
                trace.to_str().unwrap(),
                "--timing",
                "closed",
                "--dry-run",
                "-o",
                dir.path().join("x.jsonl").to_str().unwrap(),
            ],
            &[],
        );
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains("--timing closed needs a trace with sessions") && stderr.contains(why),
            "{stderr}"
        );
    }
}

#[test]
fn session_flags_on_a_trace_without_sessions_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run_cli(
        [
            "replay",
            "--dataset-path",
            trace_fixture("mooncake.jsonl").to_str().unwrap(),
            "--session-user",
            "--dry-run",
            "--scale-factor",
            "1000",
            "--quiet",
            "-o",
            dir.path().join("x.jsonl").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("WARNING: --session-user has no effect")
            && stderr.contains("no request of the trace has a session id"),
        "{stderr}"
    );
}
