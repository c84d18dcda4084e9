//! Responses and Messages against a scripted server on 127.0.0.1: TTFT from the first content
//! delta (the server waits between its opening event and the first delta), usage summed the
//! way each API counts it, cached tokens, each API's error shapes, the request bodies (tool
//! blocks of a `messages` row, headers) and the prompt overhead measured by a calibration
//! request to the API in use.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;
use request_sim::record::{Record, Status, TokenSource};
use request_sim::stats::Summary;

const MESSAGES: &str = "/v1/messages";
const RESPONSES: &str = "/v1/responses";
/// The server's silence between its opening event and the first content delta.
const DELAY: Duration = Duration::from_millis(300);

/// One SSE event with its `event:` line, as both APIs send them.
fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A streamed Messages answer: `message_start` with this usage, [DELAY], two text deltas,
/// `message_delta` with 2 output tokens, `message_stop`.
fn messages_stream(input: u32, cache_read: u32, cache_creation: u32) -> Script {
    let start = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "m", "stop_reason": null,
            "usage": {"input_tokens": input, "cache_read_input_tokens": cache_read,
                      "cache_creation_input_tokens": cache_creation, "output_tokens": 1}}}),
    );
    let block = event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    let delta = |t: &str| {
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
        )
    };
    let (a, b) = (delta("Hel"), delta("lo"));
    let tail = [
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 2}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ]
    .concat();
    let ping = event("ping", json!({"type": "ping"}));
    Script::sse(&[
        start.as_bytes(),
        ping.as_bytes(),
        block.as_bytes(),
        a.as_bytes(),
        b.as_bytes(),
        tail.as_bytes(),
    ])
    .wait_before(2, DELAY)
}

/// A streamed Responses answer: `response.created`, `response.in_progress`, [DELAY], two
/// text deltas, `response.completed` with this usage and 2 output tokens.
fn responses_stream(input: u32, cached: u32) -> Script {
    let created = [
        event(
            "response.created",
            json!({"type": "response.created", "sequence_number": 0,
                   "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}),
        ),
        event(
            "response.in_progress",
            json!({"type": "response.in_progress", "sequence_number": 1,
                   "response": {"id": "resp_1", "object": "response", "status": "in_progress"}}),
        ),
    ]
    .concat();
    let delta = |t: &str, n: u32| {
        event(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "sequence_number": n, "item_id": "msg_1",
                   "output_index": 0, "content_index": 0, "delta": t}),
        )
    };
    let (a, b) = (delta("Hel", 3), delta("lo", 4));
    let added = event(
        "response.output_item.added",
        json!({"type": "response.output_item.added", "sequence_number": 2, "output_index": 0,
               "item": {"id": "msg_1", "type": "message", "role": "assistant", "content": []}}),
    );
    let done = event(
        "response.completed",
        json!({"type": "response.completed", "sequence_number": 5,
               "response": {"id": "resp_1", "object": "response", "status": "completed", "output": [],
                            "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
                                      "output_tokens": 2, "total_tokens": input + 2}}}),
    );
    Script::sse(&[
        created.as_bytes(),
        added.as_bytes(),
        a.as_bytes(),
        b.as_bytes(),
        done.as_bytes(),
    ])
    .wait_before(2, DELAY)
}

/// Replay 2 requests of 16 prompt and 2 output tokens against a server answering with
/// `script` at `path`: the records, the summary and the server.
fn run(script: Script, path: &str, extra: &[&str]) -> (Vec<Record>, Summary, RawServer) {
    let server = RawServer::start(script);
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 2, 10.0, 16, 2);
    let mut args = base_args(&server.url(path), &trace, dir.path());
    args.extend(["--request-timeout", "5", "--record-itl"].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = replay(&strs(&args));
    assert!(out.summary.counts_add_up);
    let records = read_records(&dir.path().join("records.jsonl"));
    assert_eq!(records.len(), 2);
    assert_eq!(server.generation_requests().len(), 2);
    (records, out.summary, server)
}

fn body(r: &SeenRequest) -> Value {
    serde_json::from_slice(&r.body).unwrap()
}

/// Both records ended as `status` with an error starting with `prefix`.
fn expect(records: &[Record], status: Status, prefix: &str) {
    for r in records {
        assert_eq!(r.status, status, "{r:?}");
        let e = r.error.as_deref().unwrap_or("");
        assert!(e.starts_with(prefix), "error {e:?}, expected {prefix:?}");
    }
}

/// Completed records: TTFT (and the first content) after the server's silence, usage as
/// given, two content deltas one ITL apart.
fn expect_streamed(records: &[Record], prompt: u32, cached: u32) {
    let delay_ms = DELAY.as_secs_f64() * 1e3;
    for r in records {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        let ttft = r.ttft_ms.unwrap();
        assert!(
            ttft >= delay_ms,
            "TTFT {ttft} ms < the {delay_ms} ms silence"
        );
        assert!(r.ttfc_ms.unwrap() >= delay_ms);
        assert!(r.e2e_ms.unwrap() >= ttft);
        assert_eq!(r.chunks, 2);
        assert_eq!(r.itl_ms.as_ref().map(Vec::len), Some(1));
        assert_eq!(r.prompt_tokens, Some(prompt));
        assert_eq!(r.cached_tokens, Some(cached));
        assert_eq!(r.output_tokens, Some(2));
        assert_eq!(r.output_tokens_source, Some(TokenSource::Usage));
    }
}

#[test]
fn messages_stream_ttft_from_the_first_delta_and_prompt_summed() {
    // 3 uncached + 12 read from the cache + 1 written to it = the trace's 16.
    let (records, summary, server) = run(
        messages_stream(3, 12, 1),
        MESSAGES,
        &["--api-key", "sk-test"],
    );
    expect_streamed(&records, 16, 12);
    assert_eq!(
        summary.token_exactness.exact, 2,
        "{:?}",
        summary.token_exactness
    );
    assert_eq!(summary.cache.cached_tokens, 24);
    assert_eq!(summary.cache.prompt_tokens, 32);
    assert_eq!(
        summary.run.server.api,
        Some(request_sim::backend::Api::AnthropicMessages)
    );
    for r in server.generation_requests() {
        assert!(r.head.starts_with("POST /v1/messages "), "{}", r.head);
        assert_eq!(r.header("anthropic-version").as_deref(), Some("2023-06-01"));
        assert_eq!(r.header("x-api-key").as_deref(), Some("sk-test"));
        assert_eq!(r.header("authorization").as_deref(), Some("Bearer sk-test"));
        let b = body(&r);
        assert_eq!(b["model"], "llm-sim");
        assert_eq!(b["messages"][0]["role"], "user");
        assert!(b["messages"][0]["content"].as_str().unwrap().len() > 16);
        assert_eq!(
            (b["max_tokens"].as_u64(), b["stream"].as_bool()),
            (Some(2), Some(true))
        );
        assert_eq!(b["ignore_eos"], true);
        assert!(b.get("stream_options").is_none() && b.get("max_output_tokens").is_none());
    }
}

#[test]
fn responses_stream_ttft_from_the_first_delta_and_cached_tokens() {
    let (records, summary, server) = run(responses_stream(16, 8), RESPONSES, &[]);
    expect_streamed(&records, 16, 8);
    assert_eq!(summary.token_exactness.exact, 2);
    assert_eq!(summary.cache.hit_ratio, Some(0.5));
    assert_eq!(
        summary.run.server.api,
        Some(request_sim::backend::Api::OpenaiResponses)
    );
    for r in server.generation_requests() {
        assert!(r.head.starts_with("POST /v1/responses "), "{}", r.head);
        assert_eq!(r.header("anthropic-version"), None);
        let b = body(&r);
        assert_eq!(b["input"][0]["role"], "user");
        assert_eq!(b["max_output_tokens"], 2);
        assert_eq!(
            (b["stream"].as_bool(), b["store"].as_bool()),
            (Some(true), Some(false))
        );
        assert!(b.get("max_tokens").is_none() && b.get("messages").is_none());
    }
}

#[test]
fn the_api_flag_picks_the_path_of_a_base_url() {
    let (records, _, server) = run(responses_stream(16, 0), "", &["--api", "responses"]);
    expect_streamed(&records, 16, 0);
    assert!(server.generation_requests()[0]
        .head
        .starts_with("POST /v1/responses "));
    let (records, _, server) = run(messages_stream(16, 0, 0), "/v1", &["--api", "anthropic"]);
    expect_streamed(&records, 16, 0);
    assert!(server.generation_requests()[0]
        .head
        .starts_with("POST /v1/messages "));
}

#[test]
fn non_streaming_answers() {
    let answer = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": "Hello"}], "stop_reason": "max_tokens",
        "usage": {"input_tokens": 6, "cache_read_input_tokens": 10, "output_tokens": 2}});
    let script = Script::whole("200 OK", "application/json", answer.to_string().as_bytes());
    let (records, summary, server) = run(script, MESSAGES, &["--no-stream"]);
    for r in &records {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!((r.prompt_tokens, r.cached_tokens), (Some(16), Some(10)));
        assert_eq!(r.output_tokens, Some(2));
    }
    assert_eq!(summary.token_exactness.exact, 2);
    assert_eq!(body(&server.generation_requests()[0])["stream"], false);

    let answer = json!({"id": "resp_1", "object": "response", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"}, "error": null,
        "output": [{"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hello", "annotations": []}]}],
        "usage": {"input_tokens": 16, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 2}});
    let script = Script::whole("200 OK", "application/json", answer.to_string().as_bytes());
    let (records, summary, _) = run(script, RESPONSES, &["--no-stream"]);
    for r in &records {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!((r.prompt_tokens, r.cached_tokens), (Some(16), Some(4)));
        assert_eq!(r.output_tokens, Some(2));
    }
    assert_eq!(summary.token_exactness.exact, 2);
}

#[test]
fn each_api_error_shape_is_classified() {
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    // An HTTP error with Anthropic's error body.
    let s = Script::whole(
        "529 Site Overloaded",
        "application/json",
        overloaded.to_string().as_bytes(),
    );
    let (r, summary, _) = run(s, MESSAGES, &[]);
    expect(
        &r,
        Status::HttpError,
        "HTTP 529: overloaded_error: Overloaded",
    );
    assert_eq!(summary.errors.get("http_error:529"), Some(&2));
    // The same error as an SSE `event: error` inside a 200 stream.
    let start = event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 16, "output_tokens": 1}}}),
    );
    let err = event("error", overloaded);
    let (r, _, _) = run(
        Script::sse(&[start.as_bytes(), err.as_bytes()]),
        MESSAGES,
        &[],
    );
    expect(
        &r,
        Status::ProtocolError,
        "error in stream: overloaded_error: Overloaded",
    );
    assert_eq!(r[0].http_status, Some(200));
    // Responses: response.failed, then an `error` event.
    let failed = event(
        "response.failed",
        json!({"type": "response.failed", "response": {"status": "failed",
               "error": {"code": "server_error", "message": "KV cache exhausted"}}}),
    );
    let (r, _, _) = run(Script::sse(&[failed.as_bytes()]), RESPONSES, &[]);
    expect(
        &r,
        Status::ProtocolError,
        "error in stream: server_error: KV cache exhausted",
    );
    let err = event(
        "error",
        json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": null}),
    );
    let (r, _, _) = run(Script::sse(&[err.as_bytes()]), RESPONSES, &[]);
    expect(
        &r,
        Status::ProtocolError,
        "error in stream: rate_limit_exceeded: slow down",
    );
    // An OpenAI-shaped HTTP error from a Responses endpoint.
    let s = Script::whole(
        "400 Bad Request",
        "application/json",
        br#"{"error":{"message":"max_output_tokens too large","type":"invalid_request_error","code":null}}"#,
    );
    let (r, _, _) = run(s, RESPONSES, &[]);
    expect(
        &r,
        Status::HttpError,
        "HTTP 400: max_output_tokens too large",
    );
}

#[test]
fn cut_and_garbage_streams_are_protocol_errors() {
    let start = event(
        "message_start",
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 16}}}),
    );
    let delta = event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}),
    );
    let (r, _, _) = run(
        Script::sse(&[start.as_bytes(), delta.as_bytes()]),
        MESSAGES,
        &[],
    );
    expect(
        &r,
        Status::ProtocolError,
        "stream ended without message_stop",
    );
    let delta = event(
        "response.output_text.delta",
        json!({"type": "response.output_text.delta", "delta": "x"}),
    );
    let (r, _, _) = run(Script::sse(&[delta.as_bytes()]), RESPONSES, &[]);
    expect(
        &r,
        Status::ProtocolError,
        "stream ended without response.completed",
    );
    let (r, _, _) = run(
        Script::sse(&[b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\n\n"]),
        MESSAGES,
        &[],
    );
    expect(&r, Status::ProtocolError, "malformed SSE JSON");
    let junk: Vec<u8> = (0..2048u32).map(|i| (i * 7919 % 251) as u8).collect();
    let (r, _, _) = run(Script::sse(&[&junk]), RESPONSES, &[]);
    expect(&r, Status::ProtocolError, "");
    // A stream that ends properly but never carried a content delta.
    let stop = event("message_stop", json!({"type": "message_stop"}));
    let (r, _, _) = run(
        Script::sse(&[start.as_bytes(), stop.as_bytes()]),
        MESSAGES,
        &[],
    );
    expect(&r, Status::ProtocolError, "stream carried no tokens");
}

/// A one-row `messages` trace of an agent's turn: system prompt, a tool call and its result,
/// tools.
fn agent_trace(dir: &std::path::Path) -> std::path::PathBuf {
    let row = json!({
        "timestamp": 0,
        "session_id": "s1",
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the test."},
            {"role": "assistant", "content": "Reading it.", "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "fn main() {}"},
            {"role": "user", "content": "Go on."}
        ],
        "tools": [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                   "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}],
        "output_length": 2
    });
    let path = dir.join("agent.jsonl");
    std::fs::write(&path, format!("{row}\n")).unwrap();
    path
}

/// The body the server saw for the agent trace's row sent to `path`.
fn agent_body(script: Script, path: &str) -> Value {
    let server = RawServer::start(script);
    let dir = tempfile::tempdir().unwrap();
    let trace = agent_trace(dir.path());
    let mut args = base_args(&server.url(path), &trace, dir.path());
    args.extend(["--session-user"].map(String::from));
    let out = replay(&strs(&args));
    assert_eq!(out.summary.status.ok, 1, "{:?}", out.summary.error_examples);
    let seen = server.generation_requests();
    assert_eq!(seen.len(), 1);
    body(&seen[0])
}

#[test]
fn messages_rows_carry_their_tools_in_each_api() {
    let b = agent_body(messages_stream(16, 0, 0), MESSAGES);
    assert_eq!(b["system"], "You are a coding agent.");
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": "Fix the test."},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.rs"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "fn main() {}"}
            ]},
            {"role": "user", "content": "Go on."}
        ])
    );
    assert_eq!(
        b["tools"],
        json!([{"name": "read_file", "description": "Read a file",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}])
    );
    assert_eq!(b["max_tokens"], 2);
    assert_eq!(b["metadata"], json!({"user_id": "s1"}));

    let b = agent_body(responses_stream(16, 0), RESPONSES);
    assert_eq!(
        b["input"],
        json!([
            {"type": "message", "role": "system", "content": "You are a coding agent."},
            {"type": "message", "role": "user", "content": "Fix the test."},
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "Reading it."}]},
            {"type": "function_call", "call_id": "toolu_1", "name": "read_file", "arguments": "{\"path\":\"a.rs\"}"},
            {"type": "function_call_output", "call_id": "toolu_1", "output": "fn main() {}"},
            {"type": "message", "role": "user", "content": "Go on."}
        ])
    );
    assert_eq!(
        b["tools"],
        json!([{"type": "function", "name": "read_file", "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}])
    );
    assert_eq!(
        (b["max_output_tokens"].as_u64(), b["user"].as_str()),
        (Some(2), Some("s1"))
    );
}

#[test]
fn the_prompt_overhead_is_measured_in_the_api_in_use() {
    // Every answer reports 69 prompt tokens (5 uncached + 64 from the cache): the calibration
    // request's 64 content tokens plus the API's 5 tokens of template.
    let answer = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": "Hi"}], "stop_reason": "max_tokens",
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 64, "output_tokens": 1}});
    let server = RawServer::start(Script::whole(
        "200 OK",
        "application/json",
        answer.to_string().as_bytes(),
    ));
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 2, 10.0, 69, 1);
    let mut args = base_args(&server.url(MESSAGES), &trace, dir.path());
    let at = args.iter().position(|a| a == "--chat-overhead").unwrap();
    args.drain(at..at + 2);
    args.push("--no-stream".into());
    let out = replay(&strs(&args));
    assert_eq!(out.summary.run.prompts.chat_overhead, Some(5));
    assert_eq!(out.summary.token_exactness.exact, 2);
    let seen = server.generation_requests();
    assert_eq!(
        seen.len(),
        3,
        "the calibration request, then the two requests"
    );
    let calib = body(&seen[0]);
    assert!(seen[0].head.starts_with("POST /v1/messages "));
    assert_eq!(
        (calib["max_tokens"].as_u64(), calib["stream"].as_bool()),
        (Some(1), Some(false))
    );
    let words = |b: &Value| {
        b["messages"][0]["content"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count()
    };
    assert_eq!(words(&calib), 64);
    for r in &seen[1..] {
        assert_eq!(
            words(&body(r)),
            64,
            "69 tokens less the 5 of the API's template"
        );
    }
}

#[test]
fn live_history_is_refused_on_the_converted_apis() {
    let dir = tempfile::tempdir().unwrap();
    let trace = agent_trace(dir.path());
    for path in [MESSAGES, RESPONSES] {
        let mut args = base_args(&format!("http://127.0.0.1:9{path}"), &trace, dir.path());
        args.extend(["--live-history", "--timing", "closed"].map(String::from));
        let e = match try_replay(&strs(&args)) {
            Ok(_) => panic!("{path}: --live-history accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("--live-history works with chat completions only"),
            "{path}: {e}"
        );
    }
}

/// A streamed Messages answer in llama.cpp's shapes (`llama-server`, `tools/server`): its
/// `message_start` goes out with the first generated token's text, usage `cache_read_input_tokens`
/// first and `output_tokens` 0, and `message_delta` carries only `output_tokens`. Without
/// `start`: the stream llama.cpp sends when its first token ends inside a UTF-8 character (it
/// holds back that token's text, and with it the `message_start`).
fn llama_cpp_messages_stream(start: bool) -> Script {
    let mut events = Vec::new();
    if start {
        events.push(event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "chatcmpl-1", "type": "message",
                "role": "assistant", "content": [], "model": "m", "stop_reason": null,
                "stop_sequence": null, "usage": {"cache_read_input_tokens": 12,
                "input_tokens": 4, "output_tokens": 0}}}),
        ));
    }
    events.push(event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    for t in ["\u{4e2d}", "ab"] {
        events.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}),
        ));
    }
    events.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": null},
               "usage": {"output_tokens": 2}}),
    ));
    events.push(event("message_stop", json!({"type": "message_stop"})));
    Script::sse(&events.iter().map(|e| e.as_bytes()).collect::<Vec<_>>())
}

#[test]
fn a_messages_stream_without_message_start_is_counted_and_named() {
    // One answer with its `message_start`, one without (as llama.cpp sent 1 in 480).
    let server = RawServer::start_each(vec![
        llama_cpp_messages_stream(true),
        llama_cpp_messages_stream(false),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 2, 10.0, 16, 2);
    let args = base_args(&server.url(MESSAGES), &trace, dir.path());
    let out = replay(&strs(&args));
    let records = read_records(&dir.path().join("records.jsonl"));
    let mut prompts: Vec<_> = records
        .iter()
        .map(|r| {
            assert_eq!(r.status, Status::Ok, "{r:?}");
            assert_eq!(r.output_tokens, Some(2));
            assert_eq!(r.output_tokens_source, Some(TokenSource::Usage));
            (r.prompt_tokens, r.cached_tokens)
        })
        .collect();
    prompts.sort();
    assert_eq!(prompts, vec![(None, None), (Some(16), Some(12))]);
    let e = &out.summary.token_exactness;
    assert_eq!((e.exact, e.with_usage, e.without_usage), (1, 1, 1), "{e:?}");
    // The exactness line covers one request of two: the summary says so, and why.
    let w = out
        .summary
        .warnings
        .iter()
        .find(|w| w.starts_with("SERVER GAVE NO PROMPT USAGE for 1 of 2 completed requests"))
        .unwrap_or_else(|| panic!("no warning in {:?}", out.summary.warnings));
    assert!(w.contains("`message_start`"), "{w}");
}
