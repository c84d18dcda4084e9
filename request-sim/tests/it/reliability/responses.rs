//! Responses llm-sim cannot produce, from a tiny raw HTTP server on 127.0.0.1: garbage, UTF-8
//! split across network chunks, oversized events, an error object inside a 200 stream, no usage,
//! no `[DONE]`, silence, non-HTTP bytes. Each ends as the right record status with a clear error,
//! never a panic, never a hang.

use std::time::{Duration, Instant};

use crate::support::*;
use request_sim::record::{Record, Status, TokenSource};

/// Replay 2 requests against a raw server answering with `script`; the records.
fn replay_against(script: Script, path: &str, extra: &[&str]) -> Vec<Record> {
    let server = RawServer::start(script);
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 2, 10.0, 16, 4);
    let mut args = base_args(&server.url(path), &trace, dir.path());
    if !extra.contains(&"--request-timeout") {
        args.extend(["--request-timeout".to_string(), "3".to_string()]);
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let t = Instant::now();
    let out = replay(&strs(&args));
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "took {:?}",
        t.elapsed()
    );
    // Exit 5 when neither request succeeded (most scripts here), else 0.
    let expected = if out.summary.completed == 0 { 5 } else { 0 };
    assert_eq!(out.exit_code, expected);
    assert!(out.summary.counts_add_up);
    let records = read_records(&dir.path().join("records.jsonl"));
    assert_eq!(records.len(), 2);
    assert_eq!(
        server.generation_requests().len(),
        2,
        "each request sent exactly once"
    );
    records
}

/// Both records have `status` and an error starting with `prefix`.
fn expect(records: &[Record], status: Status, prefix: &str) {
    for r in records {
        assert_eq!(r.status, status, "{r:?}");
        let e = r.error.as_deref().unwrap_or("");
        assert!(
            e.starts_with(prefix),
            "error {e:?} should start with {prefix:?}"
        );
        assert!(e.len() <= 1_100, "error text is bounded: {} bytes", e.len());
    }
}

const CHAT: &str = "/v1/chat/completions";

#[test]
fn garbage_sse_payload_is_a_protocol_error() {
    let r = replay_against(Script::sse(&[b"data: {garbage\n\n"]), CHAT, &[]);
    expect(&r, Status::ProtocolError, "malformed SSE JSON");
}

#[test]
fn binary_garbage_body_is_a_protocol_error() {
    let junk: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    let r = replay_against(Script::sse(&[&junk]), CHAT, &[]);
    expect(&r, Status::ProtocolError, "");
}

#[test]
fn non_http_answer_is_a_protocol_error() {
    let r = replay_against(Script::raw(b"SSH-2.0-OpenSSH_9.6\r\n\r\n"), CHAT, &[]);
    expect(&r, Status::ProtocolError, "");
    assert!(r[0].error.as_deref().unwrap().contains("HTTP"), "{r:?}");
}

#[test]
fn utf8_and_crlf_split_across_chunks_is_fine() {
    let first = chat_chunk("h\u{e9}llo").replace("\n\n", "\r\n\r\n");
    let b = first.as_bytes();
    let mid = first.find('\u{e9}').unwrap() + 1; // between the two bytes of é
    let crlf = b.len() - 3; // between \r and \n of the blank line
    let second = chat_chunk(" w\u{f6}rld \u{1f600}");
    let s2 = second.as_bytes();
    let emoji = second.find('\u{1f600}').unwrap() + 2;
    let tail = chat_usage_done(16, 2);
    let r = replay_against(
        Script::sse(&[
            &b[..mid],
            &b[mid..crlf],
            &b[crlf..],
            &s2[..emoji],
            &s2[emoji..],
            tail.as_bytes(),
        ]),
        CHAT,
        &[],
    );
    for x in &r {
        assert_eq!(x.status, Status::Ok, "{x:?}");
        assert_eq!(x.chunks, 2);
        assert_eq!(x.output_tokens, Some(2));
        assert_eq!(x.output_tokens_source, Some(TokenSource::Usage));
        assert!(x.ttft_ms.unwrap() <= x.e2e_ms.unwrap());
    }
}

#[test]
fn oversized_event_is_a_protocol_error() {
    // 9 MiB in one event, no event boundary: more than the 8 MiB limit.
    let big = format!("data: {{\"x\":\"{}", "a".repeat(9 << 20));
    let r = replay_against(Script::sse(&[big.as_bytes()]), CHAT, &[]);
    expect(
        &r,
        Status::ProtocolError,
        "SSE event larger than 8388608 bytes",
    );
}

#[test]
fn oversized_multiline_event_is_a_protocol_error() {
    let line = format!("data: {}\n", "b".repeat(1 << 16));
    let many = line.repeat(140); // ~9 MiB of data lines, never a blank line
    let r = replay_against(Script::sse(&[many.as_bytes()]), CHAT, &[]);
    expect(&r, Status::ProtocolError, "SSE event larger than");
}

#[test]
fn error_object_inside_a_200_stream() {
    let chunk = chat_chunk("hi");
    let err = "data: {\"object\":\"error\",\"message\":\"KV cache exhausted\",\"type\":\"InternalServerError\",\"code\":500}\n\n";
    let r = replay_against(Script::sse(&[chunk.as_bytes(), err.as_bytes()]), CHAT, &[]);
    expect(
        &r,
        Status::ProtocolError,
        "error in stream: KV cache exhausted",
    );
    assert_eq!(r[0].http_status, Some(200));
    assert_eq!(r[0].chunks, 1);
}

#[test]
fn openai_error_shape_inside_a_200_stream() {
    let err = "data: {\"error\":{\"message\":\"overloaded\",\"code\":503}}\n\ndata: [DONE]\n\n";
    let r = replay_against(Script::sse(&[err.as_bytes()]), CHAT, &[]);
    expect(&r, Status::ProtocolError, "error in stream: overloaded");
}

#[test]
fn usage_absent_is_a_protocol_error_unless_allowed() {
    let a = chat_chunk("a");
    let b = chat_chunk("b");
    let script = || Script::sse(&[a.as_bytes(), b.as_bytes(), b"data: [DONE]\n\n"]);
    let r = replay_against(script(), CHAT, &[]);
    expect(&r, Status::ProtocolError, "server sent no usage");
    let r = replay_against(script(), CHAT, &["--allow-missing-usage"]);
    for x in &r {
        assert_eq!(x.status, Status::Ok);
        assert_eq!(x.output_tokens, Some(2));
        assert_eq!(x.output_tokens_source, Some(TokenSource::Chunks));
    }
}

#[test]
fn stream_without_done_is_a_protocol_error() {
    let a = chat_chunk("a");
    let usage = chat_usage_done(16, 1);
    let usage = usage.trim_end_matches("data: [DONE]\n\n");
    let r = replay_against(Script::sse(&[a.as_bytes(), usage.as_bytes()]), CHAT, &[]);
    expect(&r, Status::ProtocolError, "stream ended without [DONE]");
    let r = replay_against(Script::sse(&[]), CHAT, &[]);
    expect(&r, Status::ProtocolError, "stream ended without [DONE]");
}

#[test]
fn html_instead_of_sse_is_a_protocol_error() {
    let r = replay_against(
        Script::whole(
            "200 OK",
            "text/html",
            b"<html><body>proxy login</body></html>",
        ),
        CHAT,
        &[],
    );
    expect(&r, Status::ProtocolError, "stream ended without [DONE]");
}

#[test]
fn silent_server_is_a_timeout() {
    let mut s = Script::sse(&[chat_chunk("a").as_bytes()]);
    s.hang = Some(Duration::from_secs(6));
    let r = replay_against(s, CHAT, &["--request-timeout", "1"]);
    expect(&r, Status::Timeout, "no complete response within 1.0 s");
    assert_eq!(r[0].chunks, 1, "timings up to the timeout are kept");
}

#[test]
fn cut_body_is_a_connect_error() {
    let mut s = Script::raw(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 100000\r\n\r\ndata: {\"choices\":[");
    s.hang = None;
    let r = replay_against(s, CHAT, &[]);
    expect(&r, Status::ConnectError, "connection lost mid-response");
}

#[test]
fn non_streaming_garbage_body_is_a_protocol_error() {
    let r = replay_against(
        Script::whole("200 OK", "application/json", b"{\"choices\": [tru"),
        CHAT,
        &["--no-stream"],
    );
    expect(&r, Status::ProtocolError, "malformed JSON response");
}

#[test]
fn huge_error_body_is_truncated() {
    let body = format!("{{\"message\":\"{}\"}}", "x".repeat(100_000));
    let r = replay_against(
        Script::whole(
            "500 Internal Server Error",
            "application/json",
            body.as_bytes(),
        ),
        CHAT,
        &[],
    );
    expect(&r, Status::HttpError, "HTTP 500: ");
    assert_eq!(r[0].http_status, Some(500));
}

#[test]
fn tgi_error_event_is_a_protocol_error() {
    let ev = b"data:{\"token\":{\"id\":1,\"text\":\" a\",\"logprob\":-0.1,\"special\":false},\"generated_text\":null,\"details\":null}\n\ndata:{\"error\":\"Request failed during generation: out of memory\",\"error_type\":\"generation\"}\n\n";
    let r = replay_against(Script::sse(&[ev]), "/generate_stream", &["--api", "tgi"]);
    expect(
        &r,
        Status::ProtocolError,
        "error in stream: Request failed during generation",
    );
}

#[test]
fn data_after_done_is_a_protocol_error() {
    let a = chat_chunk("a");
    let tail = chat_usage_done(16, 1);
    let r = replay_against(
        Script::sse(&[a.as_bytes(), tail.as_bytes(), a.as_bytes()]),
        CHAT,
        &[],
    );
    expect(&r, Status::ProtocolError, "data after [DONE]");
}

/// Replay 2 requests against `endpoint` (nothing answering HTTP there); the records.
fn replay_unreachable(endpoint: &str) -> Vec<Record> {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 2, 10.0, 16, 4);
    let mut args = base_args(endpoint, &trace, dir.path());
    args.extend(["--request-timeout".to_string(), "5".to_string()]);
    let t = Instant::now();
    let out = replay(&strs(&args));
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "took {:?}",
        t.elapsed()
    );
    assert!(out.summary.counts_add_up);
    read_records(&dir.path().join("records.jsonl"))
}

#[test]
fn connection_refused_is_a_connect_error() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = replay_unreachable(&format!("http://127.0.0.1:{port}/v1/chat/completions"));
    expect(&r, Status::ConnectError, "");
    assert!(r[0].error.as_deref().unwrap().contains("refused"), "{r:?}");
    assert_eq!(r[0].http_status, None);
}

#[test]
fn tls_to_a_plain_server_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let _ = std::io::Write::write_all(&mut s, b"HTTP/1.1 400 Bad Request\r\n\r\n");
        }
    });
    let r = replay_unreachable(&format!("https://{addr}/v1/chat/completions"));
    expect(&r, Status::ConnectError, "");
}

#[test]
fn error_status_with_an_endless_body_is_an_http_error() {
    let mut s = Script::raw(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"message\":\"over");
    s.hang = Some(Duration::from_secs(6));
    let r = replay_against(s, CHAT, &[]);
    expect(&r, Status::HttpError, "HTTP 503: {\"message\":\"over");
    assert_eq!(r[0].http_status, Some(503));
}

/// A tool-call delta of the wrong shape, on each API that streams tool calls: a protocol error
/// whose first example names the request index, never a token and never a panic.
#[test]
fn malformed_tool_call_delta_is_a_protocol_error_with_the_request_index() {
    let chat: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":5}}]}}]}\n\n";
    let responses: &[u8] = b"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"delta\":{\"a\":1}}\n\n";
    let messages: &[u8] = b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":7}}\n\n";
    for (path, body) in [
        (CHAT, chat),
        ("/v1/responses", responses),
        ("/v1/messages", messages),
    ] {
        let server = RawServer::start(Script::sse(&[body]));
        let dir = tempfile::tempdir().unwrap();
        let trace = write_trace(dir.path(), "t.jsonl", 2, 10.0, 16, 4);
        let mut args = base_args(&server.url(path), &trace, dir.path());
        args.extend(["--request-timeout".to_string(), "3".to_string()]);
        let out = replay(&strs(&args));
        let records = read_records(&dir.path().join("records.jsonl"));
        assert_eq!(records.len(), 2, "{path}");
        for r in &records {
            assert_eq!(r.status, Status::ProtocolError, "{path}: {r:?}");
            assert_eq!(r.chunks, 0, "{path}: no token counted");
        }
        let first = &out.summary.error_examples["protocol_error"];
        assert!(
            first.starts_with("request 0: ") || first.starts_with("request 1: "),
            "{path}: {first:?}"
        );
    }
}
