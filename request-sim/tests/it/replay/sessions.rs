//! Sessions over loopback: closed-loop release against llm-sim (every follow-up after its
//! parent's answer plus the think time), messages rows arriving at a capture server exactly as
//! written, `--session-user`, and `--skip-after-failed-parent`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::support::*;
use request_sim::record::Status;

/// A Bailian trace of `sessions` chains of 1..=max_turns turns; each turn resends its parent's
/// blocks plus new ones (as a conversation does). Turns of a session are 30 ms apart in the
/// trace, sessions start 7 ms apart.
fn write_bailian(dir: &Path, sessions: usize, max_turns: usize) -> (PathBuf, usize) {
    write_bailian_blocks(dir, sessions, max_turns, 50)
}

/// Like [`write_bailian`], each turn adding `blocks` to `blocks + 19` blocks of 16 tokens.
fn write_bailian_blocks(
    dir: &Path,
    sessions: usize,
    max_turns: usize,
    blocks: usize,
) -> (PathBuf, usize) {
    let path = dir.join("bailian.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut chat = 0i64;
    let mut block = 1u64;
    let mut rows = 0;
    for s in 0..sessions {
        let turns = 1 + (s * 7) % max_turns;
        let mut ids: Vec<u64> = Vec::new();
        let mut parent = -1i64;
        for t in 0..turns {
            for _ in 0..(blocks + (s + t) % 20) {
                ids.push(block);
                block += 1;
            }
            let ts = (s as f64 * 7.0 + t as f64 * 30.0) / 1000.0;
            writeln!(
                f,
                r#"{{"chat_id": {chat}, "parent_chat_id": {parent}, "timestamp": {ts}, "input_length": {}, "output_length": {}, "turn": {}, "hash_ids": {:?}}}"#,
                ids.len() * 16,
                2 + (s + t) % 5,
                t + 1,
                ids
            )
            .unwrap();
            parent = chat;
            chat += 1;
            rows += 1;
        }
    }
    (path, rows)
}

#[test]
fn closed_loop_follow_ups_wait_for_parent_and_think_time() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, rows) = write_bailian(dir.path(), 40, 6);
    // The simulator caches in the trace's own 16-token blocks (Bailian).
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let out = dir.path().join("closed.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--timing",
        "closed",
        "--think-time",
        "40",
        "--seed",
        "3",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&out);
    assert_eq!(recs.len(), rows, "one record per scheduled request");
    let mut follow_ups = 0;
    let mut waited = 0;
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert!(r.session_id.is_some() && r.turn.is_some(), "{r:?}");
        let Some(p) = r.parent_index else {
            assert_eq!(r.turn, Some(1));
            continue;
        };
        follow_ups += 1;
        let parent = &recs[p];
        assert_eq!(parent.session_id, r.session_id);
        assert_eq!(parent.turn.unwrap() + 1, r.turn.unwrap());
        let parent_done = parent.sent_ms.unwrap() + parent.done_ms.unwrap();
        let sent = r.sent_ms.unwrap();
        assert!(
            sent + 0.002 >= parent_done + 40.0,
            "request {} sent at {sent} ms, parent {p} done at {parent_done} ms",
            r.index
        );
        // The release, not the trace time, is the schedule drift is measured from.
        assert!(r.scheduled_ms + 0.002 >= parent_done + 40.0);
        assert!(r.scheduled_ms + 0.002 >= r.timestamp);
        let wait = r
            .session_wait_ms
            .expect("closed-loop turns record their wait");
        assert!((r.scheduled_ms - r.timestamp - wait).abs() < 0.01, "{r:?}");
        waited += usize::from(wait > 0.0);
    }
    assert!(follow_ups > 50, "{follow_ups}");
    assert!(
        waited > 0,
        "some follow-ups must have waited for their parent"
    );
    let summary = read_json(&dir.path().join("closed.jsonl.summary.json"));
    let ss = &summary["sessions"];
    assert_eq!(ss["sessions"], 40);
    assert_eq!(ss["max_turns"], 6);
    assert!(ss["mean_session_wait_ms"].as_f64().unwrap() > 0.0);
    assert!(
        ss["max_session_wait_ms"].as_f64().unwrap() >= ss["mean_session_wait_ms"].as_f64().unwrap()
    );
    assert!(ss["mean_ttft_later_turns_ms"].as_f64().is_some());
    let hit = summary["cache"]["hit_ratio"].as_f64().unwrap();
    let ideal = summary["cache"]["ideal_hit_ratio"].as_f64().unwrap();
    eprintln!("closed loop: server cache hit ratio {hit:.4}, trace-ideal {ideal:.4}");
    assert!(
        (hit - ideal).abs() <= 0.01,
        "server hit ratio {hit} vs trace-ideal {ideal}"
    );
}

/// Thousands of rows, sessions of up to 10 turns, replayed closed-loop: every follow-up leaves
/// after its parent's completion plus the think time, one record per row, and the server's
/// prefix-cache hit ratio within 1 pp of the trace-ideal.
#[test]
fn bailian_chains_of_up_to_ten_turns_closed_loop() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, rows) = write_bailian_blocks(dir.path(), 400, 10, 30);
    assert!(rows >= 2000, "{rows} rows");
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let out = dir.path().join("closed.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--timing",
        "closed",
        "--think-time",
        "5",
        "--seed",
        "4",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&out);
    assert_eq!(recs.len(), rows, "one record per scheduled request");
    let mut turns = std::collections::HashMap::new();
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        let sid = r.session_id.clone().unwrap();
        let t = turns.entry(sid).or_insert(0u32);
        *t = (*t).max(r.turn.unwrap());
        if let Some(p) = r.parent_index {
            let parent = &recs[p];
            let parent_done = parent.sent_ms.unwrap() + parent.done_ms.unwrap();
            assert!(
                r.sent_ms.unwrap() + 0.002 >= parent_done + 5.0,
                "request {} sent before its parent {p} was done + think time",
                r.index
            );
        }
    }
    assert_eq!(turns.len(), 400);
    assert_eq!(turns.values().copied().max(), Some(10));
    let hit = outcome.summary.cache.hit_ratio.unwrap();
    let ideal = outcome.summary.cache.ideal_hit_ratio.unwrap();
    eprintln!("2,000+ rows closed loop: server hit ratio {hit:.4}, trace-ideal {ideal:.4}");
    assert!(
        (hit - ideal).abs() <= 0.01,
        "server hit ratio {hit} vs trace-ideal {ideal}"
    );
}

/// A tiny HTTP/1.1 server on 127.0.0.1 that keeps every POST body (with the value of an
/// `x-session-id` header, if any, as `__x_session_id`) and answers with a chat completion
/// whose text is `answer(body)` (streamed in two chunks when the body asks for a stream);
/// bodies containing `FAIL` get a 500.
struct Capture {
    url: String,
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
}

type AnswerFn = Arc<dyn Fn(&serde_json::Value) -> String + Send + Sync>;

fn capture_server(answer: &'static str) -> Capture {
    capture_server_with(Arc::new(move |_| answer.to_string()))
}

fn capture_server_with(answer: AnswerFn) -> Capture {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let keep = bodies.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (keep, answer) = (keep.clone(), answer.clone());
            std::thread::spawn(move || serve(conn, &*answer, &keep));
        }
    });
    Capture { url, bodies }
}

/// The response to one kept request: status, content type, body.
fn reply_to(
    v: &serde_json::Value,
    fail: bool,
    answer: &str,
) -> (&'static str, &'static str, String) {
    if fail {
        return (
            "500 Internal Server Error",
            "application/json",
            r#"{"error":"asked to fail"}"#.to_string(),
        );
    }
    let usage =
        serde_json::json!({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12});
    if v["stream"] == true {
        let (a, b) = answer.split_at(answer.len() / 2);
        let mut sse = String::new();
        for part in [a, b] {
            let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": part}}]});
            sse.push_str(&format!("data: {chunk}\n\n"));
        }
        sse.push_str(&format!(
            "data: {}\n\ndata: [DONE]\n\n",
            serde_json::json!({"choices": [], "usage": usage})
        ));
        return ("200 OK", "text/event-stream", sse);
    }
    let body = serde_json::json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        "usage": usage
    });
    ("200 OK", "application/json", body.to_string())
}

fn serve(
    conn: TcpStream,
    answer: &(dyn Fn(&serde_json::Value) -> String + Send + Sync),
    keep: &Mutex<Vec<serde_json::Value>>,
) {
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let post = line.starts_with("POST");
        let mut len = 0usize;
        let mut session_header = None;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap();
                }
                if k.eq_ignore_ascii_case("x-session-id") {
                    session_header = Some(v.trim().to_string());
                }
            }
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).unwrap();
        let (status, kind, reply) = if post {
            let mut v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let fail = String::from_utf8_lossy(&body).contains("FAIL");
            let reply = reply_to(&v, fail, &answer(&v));
            if let Some(h) = session_header {
                v["__x_session_id"] = h.into();
            }
            keep.lock().unwrap().push(v);
            reply
        } else {
            (
                "200 OK",
                "application/json",
                r#"{"data":[{"id":"m"}]}"#.to_string(),
            )
        };
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
            reply.len()
        );
        if w.write_all(head.as_bytes()).is_err() || w.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

const MESSAGES_TRACE: &str = r#"{"session_id": "conv-1", "timestamp": 0, "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}], "output_length": 12, "extra": {"temperature": 0.25, "tool_choice": "auto"}}
{"session_id": "conv-1", "delay": 40, "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}
{"session_id": 77, "timestamp": 10, "messages": [{"role": "user", "content": "unrelated"}], "output_length": 3}
"#;

#[test]
fn messages_rows_arrive_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("m.jsonl");
    std::fs::write(&trace, MESSAGES_TRACE).unwrap();
    let server = capture_server("ok");
    let out = dir.path().join("m-out.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--endpoint",
        &server.url,
        "--model-name",
        "m",
        "--no-stream",
        "--no-exact-output",
        "--session-user",
        "--session-header",
        "x-session-id",
        "--timing",
        "closed",
        "--dataset-path",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&out);
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.status == Status::Ok), "{recs:?}");
    assert_eq!(recs[2].parent_index, Some(0));
    assert_eq!(recs[2].session_id.as_deref(), Some("conv-1"));
    let rows: Vec<serde_json::Value> = MESSAGES_TRACE
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Only the trace's requests (not the start-up probes).
    let bodies: Vec<serde_json::Value> = server
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|b| rows.iter().any(|r| r["messages"] == b["messages"]))
        .cloned()
        .collect();
    assert_eq!(bodies.len(), 3);
    for row in &rows {
        let body = bodies
            .iter()
            .find(|b| b["messages"] == row["messages"])
            .unwrap_or_else(|| panic!("no body carries the messages of {row}"));
        assert_eq!(body["model"], "m");
        assert_eq!(body.get("tools"), row.get("tools"));
        if let Some(extra) = row["extra"].as_object() {
            for (k, v) in extra {
                assert_eq!(&body[k], v, "extra field {k}");
            }
        }
        assert_eq!(body.get("max_tokens"), row.get("output_length"));
        let session = match &row["session_id"] {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        assert_eq!(body["user"], session.as_str());
        assert_eq!(body["__x_session_id"], session.as_str(), "--session-header");
    }
}

#[test]
fn failed_parent_child_sent_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("f.jsonl");
    std::fs::write(
        &trace,
        r#"{"session_id": "a", "timestamp": 0, "messages": [{"role": "user", "content": "FAIL please"}]}
{"session_id": "a", "delay": 5, "messages": [{"role": "user", "content": "second"}]}
{"session_id": "a", "delay": 5, "messages": [{"role": "user", "content": "third"}]}
"#,
    )
    .unwrap();
    for skip in [false, true] {
        let server = capture_server("ok");
        let out = dir.path().join(format!("f-{skip}.jsonl"));
        let mut argv = vec![
            "--quiet",
            "--endpoint",
            &server.url,
            "--model-name",
            "m",
            "--no-stream",
            "--timing",
            "closed",
            "--dataset-path",
            trace.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        if skip {
            argv.push("--skip-after-failed-parent");
        }
        replay(&argv);
        let recs = read_records_by_index(&out);
        assert_eq!(recs.len(), 3, "one record each, skipped or not");
        assert_eq!(recs[0].status, Status::HttpError);
        let sent = server
            .bodies
            .lock()
            .unwrap()
            .iter()
            .filter(|b| {
                let t = b.to_string();
                t.contains("FAIL please") || t.contains("second") || t.contains("third")
            })
            .count();
        if skip {
            assert_eq!(sent, 1);
            for r in &recs[1..] {
                assert_eq!(r.status, Status::Cancelled);
                assert_eq!(r.sent_ms, None);
                assert!(r
                    .error
                    .as_deref()
                    .unwrap()
                    .starts_with("skipped: parent request"));
            }
        } else {
            assert_eq!(sent, 3);
            assert!(recs[1..].iter().all(|r| r.status == Status::Ok));
        }
    }
}

/// Two sessions with recorded answers (one a tool call) for `--live-history`.
const LIVE_TRACE: &str = r#"{"session_id": "s", "timestamp": 0, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q1"}], "output_length": 4}
{"session_id": "s", "delay": 5, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q1"}, {"role": "assistant", "content": "RECORDED one"}, {"role": "user", "content": "q2"}], "output_length": 4}
{"session_id": "s", "delay": 5, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q1"}, {"role": "assistant", "content": "RECORDED one"}, {"role": "user", "content": "q2"}, {"role": "assistant", "content": "RECORDED two"}, {"role": "user", "content": "q3"}], "output_length": 4}
{"session_id": "t", "timestamp": 1, "messages": [{"role": "user", "content": "weather?"}], "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}]}
{"session_id": "t", "delay": 5, "messages": [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": "RECORDED call", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "sunny"}, {"role": "user", "content": "thanks"}], "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}]}
"#;

/// The capture server's answer to a body: derived from its last message, so every turn's
/// answer is known and different.
fn live_answer(body: &serde_json::Value) -> String {
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or("?");
    format!("live \"answer\" to {last}")
}

#[test]
fn live_history_sends_the_servers_answers() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("live.jsonl");
    std::fs::write(&trace, LIVE_TRACE).unwrap();
    for stream in [false, true] {
        let server = capture_server_with(Arc::new(live_answer));
        let out = dir.path().join(format!("live-{stream}.jsonl"));
        let mut argv = vec![
            "--quiet",
            "--endpoint",
            &server.url,
            "--model-name",
            "m",
            "--timing",
            "closed",
            "--live-history",
            "--dataset-path",
            trace.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ];
        if !stream {
            argv.push("--no-stream");
        }
        assert_eq!(replay(&argv).exit_code, 0);
        let recs = read_records_by_index(&out);
        assert_eq!(recs.len(), 5);
        assert!(recs.iter().all(|r| r.status == Status::Ok), "{recs:?}");
        let bodies = server.bodies.lock().unwrap().clone();
        let turn = |last: &str| {
            bodies
                .iter()
                .find(|b| {
                    b["messages"]
                        .as_array()
                        .and_then(|m| m.last())
                        .is_some_and(|m| m["content"] == last)
                })
                .unwrap_or_else(|| panic!("no body ends with {last:?}"))
                .clone()
        };
        // Turn 2 carries turn 1's actual answer, not the recorded one.
        let t2 = turn("q2");
        assert_eq!(
            t2["messages"][2],
            serde_json::json!({"role": "assistant", "content": "live \"answer\" to q1"})
        );
        assert!(!t2.to_string().contains("RECORDED"), "{t2}");
        // Turn 3: both earlier answers are the live ones; the rest as recorded.
        let t3 = turn("q3");
        let m3 = t3["messages"].as_array().unwrap();
        assert_eq!(m3.len(), 6);
        assert_eq!(m3[2]["content"], "live \"answer\" to q1");
        assert_eq!(m3[4]["content"], "live \"answer\" to q2");
        assert_eq!(m3[5]["content"], "q3");
        assert!(!t3.to_string().contains("RECORDED"), "{t3}");
        assert_eq!(t3["max_tokens"], 4);
        // A recorded tool call is kept (the tool result answers it); its text is the live one.
        let t = turn("thanks");
        let call = &t["messages"][1];
        assert_eq!(call["content"], "live \"answer\" to weather?");
        assert_eq!(call["tool_calls"][0]["id"], "c1");
        assert_eq!(t["messages"][2]["role"], "tool");
        // First turns are sent as recorded.
        assert_eq!(turn("q1")["messages"].as_array().unwrap().len(), 2);
    }
}

#[test]
fn live_history_refused_in_open_mode_and_without_messages() {
    let dir = tempfile::tempdir().unwrap();
    let parse = |argv: &[&str]| config(&[&["--quiet"], argv].concat());
    let e = parse(&["--live-history", "--dry-run"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("--live-history needs --timing closed"), "{e}");
    let (trace, _) = write_bailian(dir.path(), 3, 2);
    let cfg = parse(&[
        "--live-history",
        "--timing",
        "closed",
        "--dry-run",
        "--dataset-path",
        trace.to_str().unwrap(),
        "-o",
        dir.path().join("x.jsonl").to_str().unwrap(),
    ])
    .unwrap();
    let e = request_sim::run::replay(cfg).unwrap_err().to_string();
    assert!(
        e.contains("--live-history needs a messages trace") && e.contains("bailian"),
        "{e}"
    );
}

/// Generic rows: `sessions` sessions of `turns` turns, session `s` starting at `s * start_ms`,
/// turn `t` at `t * gap_ms` after it (gaps growing with the session so they differ).
fn write_generic_sessions(
    path: &Path,
    sessions: usize,
    turns: usize,
    start_ms: f64,
    gap_ms: f64,
) -> usize {
    let mut rows = Vec::new();
    for s in 0..sessions {
        for t in 0..turns {
            let ts = s as f64 * start_ms + t as f64 * (gap_ms + s as f64);
            rows.push((ts, s, t));
        }
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut f = std::fs::File::create(path).unwrap();
    for (ts, s, t) in &rows {
        writeln!(
            f,
            r#"{{"timestamp": {ts}, "input_length": {}, "output_length": 2, "session_id": "s{s}"}}"#,
            32 * (t + 1)
        )
        .unwrap();
    }
    rows.len()
}

#[test]
fn think_time_trace_is_the_scaled_trace_gap() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("g.jsonl");
    let rows = write_generic_sessions(&trace, 12, 3, 15.0, 60.0);
    let sim = default_sim();
    let out = dir.path().join("think.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--timing",
        "closed",
        "--think-time",
        "trace",
        "--scale-factor",
        "2",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&out);
    assert_eq!(recs.len(), rows);
    let mut checked = 0;
    for r in recs.iter().filter(|r| r.parent_index.is_some()) {
        let p = &recs[r.parent_index.unwrap()];
        // The trace's own gap between the two turns, at --scale-factor 2.
        let gap = (r.timestamp - p.timestamp) / 2.0;
        let parent_done = p.sent_ms.unwrap() + p.done_ms.unwrap();
        assert!(
            r.sent_ms.unwrap() + 0.002 >= parent_done + gap,
            "request {} sent at {:?}, parent done at {parent_done}, gap {gap}",
            r.index,
            r.sent_ms
        );
        assert!((r.think_ms.unwrap() - gap).abs() < 0.002, "{r:?}");
        checked += 1;
    }
    assert_eq!(checked, 24);
    let ss = outcome.summary.sessions.as_ref().unwrap();
    assert_eq!(ss.timing, Some(request_sim::schedule::Timing::Closed));
    assert_eq!(ss.think_time.as_deref(), Some("trace"));
    assert_eq!(ss.think_time_fixed_ms, None);
    let gaps: Vec<f64> = recs.iter().filter_map(|r| r.think_ms).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    assert!((ss.mean_think_ms.unwrap() - mean).abs() < 1e-6);
    // Gaps are (60 + s) / 2 ms for session s = 0..12.
    assert!((ss.max_think_ms.unwrap() - 35.5).abs() < 0.002, "{ss:?}");
    let console = request_sim::report::render_console(&outcome.summary);
    assert!(console.contains("closed, think time trace"), "{console}");
    assert!(
        console.contains("Max think time applied (ms):"),
        "{console}"
    );
}

#[test]
fn time_limit_cuts_waiting_turns_one_record_each() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("g.jsonl");
    // 30 sessions starting 40 ms apart (the last ones after the 1 s limit), turns 50 ms apart;
    // a 2 s think time puts every follow-up's release past the limit.
    let rows = write_generic_sessions(&trace, 30, 3, 40.0, 50.0);
    let sim = default_sim();
    let out = dir.path().join("cut.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--timing",
        "closed",
        "--think-time",
        "2000",
        "--time-in-secs",
        "1",
        "-o",
        out.to_str().unwrap(),
    ]);
    let recs = read_records_by_index(&out);
    let run = &outcome.summary.run;
    assert_eq!(
        recs.len(),
        run.outcome.scheduled,
        "one record per scheduled request"
    );
    assert_eq!(
        run.outcome.scheduled + run.outcome.never_sent,
        rows,
        "{run:?}"
    );
    assert!(
        run.outcome.never_sent > 0,
        "rows after the limit are never sent"
    );
    let mut indexes: Vec<usize> = recs.iter().map(|r| r.index).collect();
    indexes.dedup();
    assert_eq!(indexes.len(), recs.len(), "no request has two records");
    let (mut sent, mut cut) = (0, 0);
    for r in &recs {
        if r.parent_index.is_none() {
            assert_eq!(r.status, Status::Ok, "{r:?}");
            sent += 1;
        } else {
            assert_eq!(r.status, Status::Cancelled, "{r:?}");
            assert_eq!(r.sent_ms, None);
            let e = r.error.as_deref().unwrap();
            assert!(
                e.starts_with(
                    "session cut: --time-in-secs reached while the turn waited for its parent"
                ),
                "{e}"
            );
            cut += 1;
        }
    }
    assert!(sent > 0 && cut > 0);
    let ss = outcome.summary.sessions.as_ref().unwrap();
    assert_eq!(ss.turns_not_sent, cut);
    assert_eq!(outcome.summary.completed, sent);
}

#[test]
fn max_requests_slice_says_how_many_turns_it_cut() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("g.jsonl");
    let rows = write_generic_sessions(&trace, 8, 4, 10.0, 30.0);
    let run = |extra: &[&str], name: &str| {
        let out = dir.path().join(name);
        let mut argv = vec![
            "--quiet",
            "--dry-run",
            "--dataset-path",
            trace.to_str().unwrap(),
            "--timing",
            "closed",
            "--max-requests",
            "13",
            "-o",
            out.to_str().unwrap(),
        ];
        argv.extend_from_slice(extra);
        let outcome = replay(&argv);
        (read_records_by_index(&out), outcome)
    };
    let (recs, outcome) = run(&[], "all.jsonl");
    assert_eq!(recs.len(), 13);
    assert_eq!(outcome.summary.run.outcome.scheduled, 13);
    let ss = outcome.summary.sessions.as_ref().unwrap();
    // Every session has a turn among the first 13 rows: the other rows are its cut turns.
    assert_eq!(ss.sessions, 8);
    assert_eq!(ss.cut_turns, rows - 13);
    assert_eq!(
        recs.len() + ss.cut_turns,
        rows,
        "records + cut turns = the trace"
    );
    assert!(ss.cut_sessions > 0 && ss.cut_sessions <= 8);
    let console = request_sim::report::render_console(&outcome.summary);
    assert!(
        console.contains("Turns cut by slicing (sessions):")
            && console.contains(&format!("{} ({})", ss.cut_turns, ss.cut_sessions)),
        "{console}"
    );
    // Shards keep sessions whole: their cut turns add up to the whole run's.
    let (a, oa) = run(&["--shard", "0/2", "--seed", "1"], "s0.jsonl");
    let (b, ob) = run(&["--shard", "1/2", "--seed", "1"], "s1.jsonl");
    assert_eq!(a.len() + b.len(), 13);
    let cut = |o: &request_sim::run::RunOutcome| {
        o.summary
            .sessions
            .as_ref()
            .map_or((0, 0), |s| (s.cut_turns, s.cut_sessions))
    };
    let (ca, cb) = (cut(&oa), cut(&ob));
    assert_eq!(ca.0 + cb.0, ss.cut_turns);
    assert_eq!(ca.1 + cb.1, ss.cut_sessions);
}

#[test]
fn messages_trace_refused_on_a_completions_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("m.jsonl");
    std::fs::write(&trace, MESSAGES_TRACE).unwrap();
    let cfg = config(&[
        "--quiet",
        "--endpoint",
        "http://127.0.0.1:9/v1/completions",
        "--model-name",
        "m",
        "--dataset-path",
        trace.to_str().unwrap(),
        "-o",
        "/dev/null",
    ])
    .unwrap();
    let e = request_sim::run::replay(cfg).unwrap_err().to_string();
    assert!(
        e.contains("m.jsonl:1: field `messages`: a messages row is sent as a conversation: it needs a chat, Responses or Messages endpoint (…/v1/chat/completions, …/v1/responses, …/v1/messages), not http://127.0.0.1:9/v1/completions"),
        "{e}"
    );
}
