//! Token exactness of `messages` rows: with `--tokenizer` and `--tokenizer-config`, the
//! intended prompt tokens of a row are its chat template rendered with its messages and tools;
//! llm-sim started with the same Qwen3 files must count exactly as many.

use clap::Parser;
use request_sim::cli::{Cli, Command};
use request_sim::config::ReplayConfig;
use request_sim::record::{Record, Status};

use super::qwen3::qwen3;

/// Rows with and without tools: a system prompt, multi-part text, a tool call whose arguments
/// keep a non-sorted key order, a tool result, and non-ASCII text.
const TRACE: &str = r#"{"timestamp": 0, "messages": [{"role": "user", "content": "Hello there, how are you?"}], "output_length": 3}
{"timestamp": 5, "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": [{"type": "text", "text": "Weather in"}, {"type": "text", "text": "Zürich <today>?"}]}], "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather & wind", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}], "output_length": 3}
{"timestamp": 10, "messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"unit\": \"c\", \"city\": \"Paris\"}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}, {"role": "user", "content": "Thanks! And tomorrow?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}, {"type": "function", "function": {"name": "lookup", "description": "Search"}}], "output_length": 3}
{"timestamp": 15, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a fact."}, {"role": "assistant", "content": "Water boils at 100 °C."}, {"role": "user", "content": "Another one."}], "output_length": 3}
"#;

fn replay(argv: &[&str]) -> request_sim::run::RunOutcome {
    let mut full = vec!["request-sim", "replay", "--quiet"];
    full.extend_from_slice(argv);
    let args = match Cli::try_parse_from(full).unwrap().command {
        Command::Replay(a) => *a,
        _ => unreachable!(),
    };
    request_sim::run::replay(ReplayConfig::from_args(args).unwrap()).unwrap()
}

fn records(path: &std::path::Path) -> Vec<Record> {
    let mut v: Vec<Record> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    v.sort_by_key(|r| r.index);
    v
}

#[test]
fn messages_rows_with_and_without_tools_are_exact_against_llm_sim() {
    let Some(q) = qwen3() else { return };
    let (tok, tc) = (
        q.dir.join("tokenizer.json"),
        q.dir.join("tokenizer_config.json"),
    );
    let sim = llm_sim::spawn_in_thread(llm_sim::SimConfig {
        tokenizer: Some(tok.clone()),
        tokenizer_config: Some(tc.clone()),
        ..Default::default()
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("m.jsonl");
    std::fs::write(&trace, TRACE).unwrap();
    let out = dir.path().join("exact.jsonl");
    let outcome = replay(&[
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--tokenizer",
        tok.to_str().unwrap(),
        "--tokenizer-config",
        tc.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let recs = records(&out);
    assert_eq!(recs.len(), 4);
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert!(r.input_length > 10, "intended prompt tokens counted: {r:?}");
        assert_eq!(r.prompt_tokens, Some(r.input_length), "line {}", r.line);
    }
    // The tools are part of the count (the rows with tools are much longer).
    assert!(
        recs[1].input_length > recs[0].input_length + 100,
        "{recs:?}"
    );
    let e = &outcome.summary.token_exactness;
    assert_eq!((e.with_usage, e.exact, e.unknown_intended), (4, 4, 0));

    // Without --tokenizer-config there is no intended count: the server's count is recorded,
    // not compared.
    let out = dir.path().join("unchecked.jsonl");
    let outcome = replay(&[
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let recs = records(&out);
    assert!(recs
        .iter()
        .all(|r| r.input_length == 0 && r.prompt_tokens.is_some_and(|p| p > 10)));
    let e = &outcome.summary.token_exactness;
    assert_eq!((e.with_usage, e.unknown_intended), (0, 4));
    assert!(
        !outcome
            .summary
            .warnings
            .iter()
            .any(|w| w.contains("prompt_tokens")),
        "{:?}",
        outcome.summary.warnings
    );
}
