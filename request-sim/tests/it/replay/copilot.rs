//! The Copilot trace replayed against llm-sim on 127.0.0.1: without a population flag each
//! session starts at its recorded first call's offset from the corpus's earliest session
//! (`--time-in-secs` leaves out those that start after it); `UserCancel` calls are sent in
//! full, marked in their records (`trace_result`) and counted in the agent summary.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::*;
use request_sim::record::Status;
use serde_json::{json, Value};

/// A session of one turn with calls `c0` (200 ms) and `c1`, `c1` after `c0`'s tool batch
/// (100 ms), starting at `10:00:<at>`; `result`: how `c1` ended.
fn session(id: &str, at: &str, result: &str) -> Value {
    let seg = |i: u64, n: u32| json!({"type": "UserMessage", "role": "user", "sequenceId": i, "token_len": n});
    let call = |mid: &str, ts: &str, prompt: u32, segs: Vec<Value>, result: &str| {
        json!({
            "message_id": mid, "timestamp": ts, "duration_ms": 200.0,
            "initiator_type": "agent", "model": "Model A", "result": result,
            "status_code": "OK",
            "tokens": {"total": prompt + 5, "prompt": prompt, "completion": 5, "cached": 0,
                       "cached_pct": 0.0},
            "message_metadata": segs,
        })
    };
    let start = format!("2026-06-01T10:00:{at}");
    // c1 starts 300 ms after c0: c0's 200 ms plus its 100 ms tool batch
    let t0: jiff::Timestamp = format!("{start}Z").parse().unwrap();
    let t1 = t0 + jiff::SignedDuration::from_millis(300);
    json!({"session_id": id, "date": "2026-06-01", "turns": [{
        "turn_id": format!("{id}-t"),
        "llm_calls": [
            call(&format!("{id}-c0"), &format!("{start}Z"), 40, vec![seg(0, 40)], "Success"),
            call(&format!("{id}-c1"), &t1.to_string(), 60, vec![seg(0, 40), seg(1, 20)], result),
        ],
        "tool_batches": [{"timestamp": t0.to_string(), "duration_ms": 100.0,
            "auto_continue": true, "result": "Success", "request_id": format!("{id}-c0"),
            "function_calls": []}],
    }]})
}

/// Writes sessions `(id, seconds past 10:00, result of the second call)` as one shard.
fn shard(dir: &Path, sessions: &[(&str, &str, &str)]) -> std::path::PathBuf {
    let path = dir.join("shard-0000.jsonl");
    let text: String = sessions
        .iter()
        .map(|(id, at, r)| format!("{}\n", session(id, at, r)))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// Without `--users`/`--session-rate`: sessions recorded at 0, 0.6 s and 1.2 s past the
/// earliest start there (their first request's trace time is that offset, and it is never
/// sent before it), not all at t = 0.
#[test]
fn copilot_sessions_start_at_their_recorded_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let path = shard(
        dir.path(),
        &[
            ("late", "01.700", "Success"),
            ("first", "00.500", "Success"),
            ("mid", "01.100", "Success"),
        ],
    );
    let sim = start_sim(llm_sim::SimConfig::default());
    let args = base_args(&sim.base_url(), &path, dir.path());
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&dir.path().join("records.jsonl"));
    assert_eq!(recs.len(), 6, "records = scheduled");
    assert!(recs.iter().all(|r| r.status == Status::Ok), "{recs:?}");
    let first_sent = |conv: &str| {
        recs.iter()
            .filter(|r| r.conversation.as_deref() == Some(conv))
            .map(|r| (r.timestamp, r.sent_ms.unwrap()))
            .fold((f64::MAX, f64::MAX), |a, b| (a.0.min(b.0), a.1.min(b.1)))
    };
    let starts: Vec<(f64, f64)> = ["first", "mid", "late"].map(first_sent).to_vec();
    // trace times: the recorded offsets exactly
    assert_eq!(
        starts.iter().map(|s| s.0).collect::<Vec<_>>(),
        [0.0, 600.0, 1200.0]
    );
    // sent at their offsets (never before), in that order
    for (t, sent) in &starts {
        assert!(
            *sent + 1.0 >= *t,
            "sent at {sent} ms before its start {t} ms"
        );
    }
    assert!(
        starts[0].1 < starts[1].1 && starts[1].1 < starts[2].1,
        "{starts:?}"
    );
    // the second call: after the first's completion + its 100 ms tool batch
    for r in recs.iter().filter(|r| r.parent_index.is_some()) {
        let p = &recs[r.parent_index.unwrap()];
        let done = p.sent_ms.unwrap() + p.done_ms.or(p.e2e_ms).unwrap();
        assert!(r.sent_ms.unwrap() + 0.002 >= done + 100.0, "{r:?}");
    }
}

/// `--time-in-secs 1`: the session recorded 1.2 s after the earliest is left out (it starts
/// after the limit); the two before it are laid out.
#[test]
fn copilot_time_limit_leaves_out_sessions_that_start_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = shard(
        dir.path(),
        &[
            ("first", "00.500", "Success"),
            ("mid", "01.100", "Success"),
            ("late", "01.700", "Success"),
        ],
    );
    let sim = start_sim(llm_sim::SimConfig::default());
    let mut args = base_args(&sim.base_url(), &path, dir.path());
    args.extend(["--time-in-secs".to_string(), "1".to_string()]);
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&dir.path().join("records.jsonl"));
    let convs: std::collections::BTreeSet<&str> = recs
        .iter()
        .filter_map(|r| r.conversation.as_deref())
        .collect();
    assert_eq!(convs.into_iter().collect::<Vec<_>>(), ["first", "mid"]);
    let summary = read_summary_file(&summary_path(&dir.path().join("records.jsonl")));
    let layout = summary.agents.unwrap().layout.unwrap();
    assert_eq!((layout.conversations, layout.starting_after_limit), (2, 1));
    assert_eq!(
        layout.recorded_starts,
        Some(2),
        "two sessions in the first second"
    );
}

/// `UserCancel` calls are sent in full, their records say `trace_result: UserCancel`, the
/// agent summary counts them; with `--users` the sessions start as users free up.
#[test]
fn copilot_user_cancel_calls_are_sent_marked_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = shard(
        dir.path(),
        &[
            ("a", "00.000", "UserCancel"),
            ("b", "30.000", "Success"),
            ("c", "59.000", "UserCancel"),
        ],
    );
    let sim = start_sim(llm_sim::SimConfig::default());
    let mut args = base_args(&sim.base_url(), &path, dir.path());
    args.extend(["--users".to_string(), "3".to_string()]);
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&dir.path().join("records.jsonl"));
    assert_eq!(recs.len(), 6);
    let marked: Vec<(&str, u32)> = recs
        .iter()
        .filter(|r| r.trace_result.as_deref() == Some("UserCancel"))
        .map(|r| (r.conversation.as_deref().unwrap(), r.input_length))
        .collect();
    let mut marked = marked;
    marked.sort();
    // the second call of a and c, sent with its whole 60-token prompt and answered
    assert_eq!(marked, [("a", 60), ("c", 60)]);
    assert!(recs.iter().all(|r| r.status == Status::Ok));
    assert!(recs
        .iter()
        .filter(|r| r.trace_result.is_some())
        .all(|r| r.output_tokens == Some(5)));
    // --users: no recorded starts (c, recorded 59 s later, is not waited for)
    assert!(recs.iter().all(|r| r.timestamp < 5_000.0), "{recs:?}");
    let summary = read_summary_file(&summary_path(&dir.path().join("records.jsonl")));
    let a = summary.agents.unwrap();
    assert_eq!(
        a.trace_results,
        BTreeMap::from([("UserCancel".to_string(), 2)])
    );
    assert_eq!(a.layout.unwrap().recorded_starts, None);
    // a success is not marked: the field is absent from the JSON line
    let text = std::fs::read_to_string(dir.path().join("records.jsonl")).unwrap();
    assert_eq!(text.matches("\"trace_result\":\"UserCancel\"").count(), 2);
    assert_eq!(text.matches("trace_result").count(), 2);
}
