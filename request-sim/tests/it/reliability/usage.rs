//! Impossible usage from a server (issue: numbers counted wrong): more cached than prompt
//! tokens, more output tokens than asked. Counted, capped where a ratio needs it, and said
//! loudly; the output side of token exactness beside the prompt side.

use crate::support::{base_args, run_bin, strs, write_trace, RawServer, Script};

/// A chat stream of 4 tokens whose usage claims `prompt`/`completion` tokens and `cached`.
fn script(prompt: u32, completion: u32, cached: u32) -> Script {
    let chunk = |c: &str| {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{c}\"}}}}]}}\n\n"
        )
    };
    let usage = format!(
        "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{completion},\"total_tokens\":{},\"prompt_tokens_details\":{{\"cached_tokens\":{cached}}}}}}}\n\ndata: [DONE]\n\n",
        prompt + completion
    );
    let pieces: Vec<String> = vec![chunk(" a"), chunk(" b"), chunk(" c"), chunk(" d"), usage];
    let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_bytes()).collect();
    Script::sse(&refs)
}

fn summary(dir: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("records.jsonl.summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn impossible_usage_is_counted_capped_and_said() {
    let dir = tempfile::tempdir().unwrap();
    // 3 requests of 16 prompt tokens asking 4 output tokens.
    let trace = write_trace(dir.path(), "t.jsonl", 3, 20.0, 16, 4);
    let server = RawServer::start(script(16, 200_000, 8000));
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(
        &server.url("/v1/chat/completions"),
        &trace,
        dir.path(),
    ));
    let out = run_bin(&strs(&args), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let s = summary(dir.path());
    // Cached tokens capped at the prompt: the ratio is at most 100 %, not 50000 %.
    assert_eq!(s["cache"]["impossible_cached"], 3, "{}", s["cache"]);
    assert_eq!(s["cache"]["cached_tokens"], 48);
    assert_eq!(s["cache"]["hit_ratio"], 1.0);
    // Output: asked 4, told 200,000.
    let o = &s["output_exactness"];
    assert_eq!(o["with_usage"], 3, "{o}");
    assert_eq!(o["exact"], 0);
    assert_eq!(o["over"], 3);
    assert_eq!(o["max_abs_diff"], 199_996);
    let warnings = s["warnings"].to_string();
    assert!(
        warnings.contains(
            "IMPOSSIBLE USAGE: 3 requests reported more cached tokens than prompt tokens"
        ),
        "{warnings}"
    );
    assert!(
        warnings.contains(
            "IMPOSSIBLE USAGE: 3 of 3 requests reported more output tokens than they asked for"
        ),
        "{warnings}"
    );
}

#[test]
fn honest_usage_is_exact_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 3, 20.0, 16, 4);
    let server = RawServer::start(script(16, 4, 8));
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(
        &server.url("/v1/chat/completions"),
        &trace,
        dir.path(),
    ));
    let out = run_bin(&strs(&args), &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(dir.path());
    assert!(
        s["cache"].get("impossible_cached").is_none(),
        "{}",
        s["cache"]
    );
    assert_eq!(s["cache"]["hit_ratio"], 0.5);
    assert_eq!(s["output_exactness"]["exact"], 3);
    assert_eq!(s["output_exactness"]["over"], 0);
    assert!(!s["warnings"].to_string().contains("IMPOSSIBLE"));
}

/// A finish chunk with an empty delta (`{"delta":{},"finish_reason":"stop"}`, what OpenAI and
/// llama.cpp send) is no token event: 4 tokens 5 ms apart and the finish chunk 200 ms later
/// give 4 chunks, 3 gaps and an E2EL of the 4 tokens, not of the finish chunk.
#[test]
fn an_empty_finish_delta_is_no_token_event() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 1, 0.0, 16, 4);
    let chunk = |c: &str| {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{c}\"}},\"finish_reason\":null}}]}}\n\n"
        )
    };
    let finish = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    let usage = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":4,\"total_tokens\":20}}\n\ndata: [DONE]\n\n";
    let pieces = [
        chunk(" a"),
        chunk(" b"),
        chunk(" c"),
        chunk(" d"),
        finish.to_string(),
        usage.to_string(),
    ];
    let refs: Vec<&[u8]> = pieces.iter().map(|p| p.as_bytes()).collect();
    // Piece 0 is the response head; the finish chunk is piece 5.
    let server =
        RawServer::start(Script::sse(&refs).wait_before(5, std::time::Duration::from_millis(200)));
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(
        &server.url("/v1/chat/completions"),
        &trace,
        dir.path(),
    ));
    args.push("--record-itl".into());
    let out = run_bin(&strs(&args), &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("records.jsonl")).unwrap();
    let r: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(r["chunks"], 4, "{r}");
    assert_eq!(r["itl_ms"].as_array().map(Vec::len), Some(3), "{r}");
    let (ttft, e2e) = (
        r["ttft_ms"].as_f64().unwrap(),
        r["e2e_ms"].as_f64().unwrap(),
    );
    assert!(
        e2e - ttft < 150.0,
        "the finish chunk 200 ms later is not a token: {r}"
    );
    assert!(r["tpot_ms"].as_f64().unwrap() < 50.0, "{r}");
}

/// A finished stream (`[DONE]` sent) whose HTTP body never ends is a finished answer, not a
/// timeout after the request timeout.
#[test]
fn a_finished_stream_whose_body_never_ends_is_ok() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 1, 0.0, 16, 4);
    let mut script = script(16, 4, 0);
    script.hang = Some(std::time::Duration::from_secs(30));
    let server = RawServer::start(script);
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(
        &server.url("/v1/chat/completions"),
        &trace,
        dir.path(),
    ));
    args.extend(["--request-timeout".to_string(), "10".to_string()]);
    let t = std::time::Instant::now();
    let out = run_bin(&strs(&args), &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        t.elapsed().as_secs_f64() < 8.0,
        "waited for the body's end: {:?}",
        t.elapsed()
    );
    let text = std::fs::read_to_string(dir.path().join("records.jsonl")).unwrap();
    let r: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["output_tokens"], 4, "{r}");
    assert!(
        r["done_ms"].as_f64().unwrap() < 400.0,
        "done at [DONE], not after the wait: {r}"
    );
}
