//! Responses and Messages end to end against llm-sim, which serves both on its chat engine:
//! a small generated conversation trace replayed with each API, streaming and not, gives one
//! record per scheduled request, every prompt exactly its `input_length` (the overhead
//! calibrated in the API in use), every output its `output_length`, and prefix-cache hits read
//! from each API's usage. With the real Qwen3 tokenizer served by llm-sim, the same holds with
//! only an endpoint and with `--tokenizer`.

use std::io::Write;
use std::path::{Path, PathBuf};

use request_sim::record::{Record, Status};
use request_sim::run::RunOutcome;

use crate::support::*;

/// A conversation-like mooncake trace: `n` requests 10 ms apart, every other one extending an
/// earlier request's blocks (block size 64).
fn conversation_trace(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("trace.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut next = 1u64;
    let mut prev: Vec<Vec<u64>> = Vec::new();
    for i in 0..n {
        let mut ids: Vec<u64> = if i % 2 == 1 && !prev.is_empty() {
            prev[(i * 7) % prev.len()].clone()
        } else {
            Vec::new()
        };
        for _ in 0..(1 + i % 3) {
            ids.push(next);
            next += 1;
        }
        let input = (ids.len() as u32 - 1) * 64 + 16 + (i as u32 * 13) % 48;
        writeln!(
            f,
            r#"{{"timestamp": {}, "input_length": {input}, "output_length": {}, "hash_ids": {ids:?}}}"#,
            i * 10,
            2 + i % 7
        )
        .unwrap();
        prev.push(ids);
    }
    path
}

/// Replays `trace` against `endpoint` (block size 64); the outcome and the records.
fn run(endpoint: &str, trace: &Path, out: &Path, extra: &[&str]) -> (RunOutcome, Vec<Record>) {
    let out_s = out.display().to_string();
    let mut argv = vec![
        "--endpoint",
        endpoint,
        "--dataset-path",
        trace.to_str().unwrap(),
        "--block-size",
        "64",
        "--quiet",
        "--seed",
        "11",
        "--no-pin",
        "-o",
        &out_s,
    ];
    argv.extend_from_slice(extra);
    let outcome = replay(&argv);
    let records = read_records(out);
    (outcome, records)
}

/// Every request scheduled has one completed record with exactly the trace's prompt and
/// output lengths; the summary says 100% exact.
fn assert_exact(what: &str, outcome: &RunOutcome, records: &[Record], n: usize) {
    let s = &outcome.summary;
    assert_eq!(outcome.exit_code, 0, "{what}");
    assert_eq!(
        (s.scheduled, records.len()),
        (n, n),
        "{what}: records = scheduled"
    );
    assert!(s.counts_add_up, "{what}");
    for r in records {
        assert_eq!(r.status, Status::Ok, "{what}: {r:?}");
        assert_eq!(
            r.prompt_tokens,
            Some(r.input_length),
            "{what}: request {}",
            r.index
        );
        assert_eq!(
            r.output_tokens,
            Some(r.output_length),
            "{what}: request {}",
            r.index
        );
        assert!(r.ttft_ms.unwrap() <= r.e2e_ms.unwrap(), "{what}");
    }
    assert_eq!(
        s.token_exactness.exact, n,
        "{what}: {:?}",
        s.token_exactness
    );
    assert_eq!(s.token_exactness.exact_ratio, Some(1.0), "{what}");
}

#[test]
fn responses_and_messages_replay_exactly_against_llm_sim() {
    let dir = tempfile::tempdir().unwrap();
    let n = 40;
    let trace = conversation_trace(dir.path(), n);
    let sim = default_sim();
    for (path, api) in [
        ("/v1/responses", request_sim::backend::Api::OpenaiResponses),
        ("/v1/messages", request_sim::backend::Api::AnthropicMessages),
    ] {
        for stream in ["--stream", "--no-stream"] {
            let what = format!("{path} {stream}");
            let out = dir.path().join(format!("{}{stream}.jsonl", &path[4..]));
            let endpoint = format!("{}{path}", sim.base_url());
            let (outcome, records) = run(&endpoint, &trace, &out, &[stream]);
            assert_exact(&what, &outcome, &records, n);
            assert_eq!(outcome.summary.run.server.api, Some(api), "{what}");
            // The same prompts every pass (same seed): the cache serves most of them.
            let cached: u32 = records.iter().filter_map(|r| r.cached_tokens).sum();
            assert!(cached > 0, "{what}: no cached tokens read from the usage");
            if stream == "--stream" {
                assert!(
                    records.iter().all(|r| r.chunks == r.output_length),
                    "{what}"
                );
            } else {
                // An answer in one piece has no TPOT: null in the record, never 0 (issue 30).
                assert!(
                    records.iter().all(|r| r.chunks <= 1 && r.tpot_ms.is_none()),
                    "{what}: {:?}",
                    records.iter().map(|r| r.tpot_ms).collect::<Vec<_>>()
                );
            }
        }
    }
}

#[test]
fn qwen3_prompts_are_exact_with_an_endpoint_only_and_with_a_tokenizer() {
    let Some(q) = qwen3_or_skip("API") else {
        return;
    };
    let sim = start_sim(llm_sim::SimConfig {
        tokenizer: Some(q.join("tokenizer.json")),
        tokenizer_config: Some(q.join("tokenizer_config.json")),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let n = 24;
    let trace = conversation_trace(dir.path(), n);
    let tok = q.display().to_string();
    for path in ["/v1/responses", "/v1/messages"] {
        let endpoint = format!("{}{path}", sim.base_url());
        let only: &[&str] = &[];
        let with_tok: &[&str] = &["--tokenizer", &tok];
        for (how, extra) in [("endpoint only", only), ("--tokenizer", with_tok)] {
            let what = format!("{path}, {how}");
            let out = dir
                .path()
                .join(format!("{}-{}.jsonl", &path[4..], extra.len()));
            let (outcome, records) = run(&endpoint, &trace, &out, extra);
            assert_exact(&what, &outcome, &records, n);
            // Qwen3's template: 8 tokens around a user message, the same on every API.
            assert_eq!(outcome.summary.run.prompts.chat_overhead, Some(8), "{what}");
        }
    }
}

#[test]
fn the_builtin_simulator_speaks_the_api_chosen() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 10, 100.0, 40, 3);
    for (api, want) in [
        ("responses", request_sim::backend::Api::OpenaiResponses),
        ("messages", request_sim::backend::Api::AnthropicMessages),
    ] {
        let out = dir.path().join(format!("{api}.jsonl"));
        let out_s = out.display().to_string();
        let outcome = replay(&[
            "--api",
            api,
            "--dataset-path",
            trace.to_str().unwrap(),
            "--quiet",
            "--no-pin",
            "-o",
            &out_s,
        ]);
        let records = read_records(&out);
        assert_exact(api, &outcome, &records, 10);
        assert_eq!(outcome.summary.run.server.api, Some(want));
    }
}

/// Three turns of a coding agent's session: system prompt, tools, tool calls and results.
fn agent_trace(dir: &Path) -> PathBuf {
    let system =
        serde_json::json!({"role": "system", "content": "You are a coding agent. Use the tools."});
    let tools = serde_json::json!([{"type": "function", "function": {"name": "read_file",
        "description": "Read a file", "parameters": {"type": "object",
        "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]);
    let mut messages = vec![
        system,
        serde_json::json!({"role": "user", "content": "The test in a.rs fails. Fix it."}),
    ];
    let mut rows = String::new();
    for turn in 0..3 {
        let row = serde_json::json!({"session_id": "s1", "timestamp": turn * 50,
            "messages": messages, "tools": tools, "output_length": 4});
        rows.push_str(&format!("{row}\n"));
        let id = format!("call_{turn}");
        messages.push(
            serde_json::json!({"role": "assistant", "content": "Let me look.",
            "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}}]}),
        );
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": id,
            "content": format!("fn main() {{ assert_eq!({turn}, 1); }}")}));
    }
    let path = dir.join("agent.jsonl");
    std::fs::write(&path, rows).unwrap();
    path
}

#[test]
fn agent_turns_converted_to_each_api_have_the_chat_template_count() {
    let Some(q) = qwen3_or_skip("API") else {
        return;
    };
    let sim = start_sim(llm_sim::SimConfig {
        tokenizer: Some(q.join("tokenizer.json")),
        tokenizer_config: Some(q.join("tokenizer_config.json")),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let trace = agent_trace(dir.path());
    let tok = q.display().to_string();
    for path in ["/v1/chat/completions", "/v1/responses", "/v1/messages"] {
        let endpoint = format!("{}{path}", sim.base_url());
        let out = dir.path().join(format!("{}.jsonl", path.replace('/', "_")));
        let (outcome, records) = run(&endpoint, &trace, &out, &["--tokenizer", &tok]);
        let s = &outcome.summary;
        assert_eq!((s.scheduled, records.len()), (3, 3), "{path}");
        assert!(
            records.iter().all(|r| r.status == Status::Ok),
            "{path}: {records:?}"
        );
        // The chat template rendered with the row's own chat messages and tools counts what
        // the server counted from the converted request.
        assert_eq!(
            s.token_exactness.exact, 3,
            "{path}: {:?}",
            s.token_exactness
        );
        assert_eq!(s.token_exactness.unknown_intended, 0, "{path}");
    }
}
