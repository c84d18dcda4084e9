//! Tools in `--extra-body` with `--tokenizer` and `--tokenizer-config`: every request carries
//! the tools and the chat template renders them into the prompt, so the chat overhead is
//! measured by a calibration request whose body has them (`run/calibrate.rs`), not by the
//! template of a bare message. Against llm-sim started with the same Qwen3 files, the prompts
//! must then be exact, tool tokens included.

use request_sim::record::Status;

use crate::support::{read_records_by_index, replay, write_trace};

use super::qwen3::qwen3;

const TOOLS: &str = r#"{"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather and wind for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "the city's name"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}]}"#;

#[test]
fn tools_in_extra_body_are_counted_in_the_chat_overhead() {
    let Some(q) = qwen3() else { return };
    let (tok, tc) = (
        q.dir.join("tokenizer.json"),
        q.dir.join("tokenizer_config.json"),
    );
    let sim = crate::support::start_sim(llm_sim::SimConfig {
        tokenizer: Some(tok.clone()),
        tokenizer_config: Some(tc.clone()),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 5, 40.0, 300, 3);
    let url = sim.base_url();
    let run = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut argv = vec![
            "--quiet",
            "--endpoint",
            &url,
            "--dataset-path",
            trace.to_str().unwrap(),
            "--tokenizer",
            tok.to_str().unwrap(),
            "--tokenizer-config",
            tc.to_str().unwrap(),
            "--no-pin",
            "-o",
            out.to_str().unwrap(),
        ];
        argv.extend_from_slice(extra);
        let outcome = replay(&argv);
        assert_eq!(outcome.exit_code, 0);
        (outcome, read_records_by_index(&out))
    };

    let (plain, _) = run("plain.jsonl", &[]);
    let (tools, recs) = run("tools.jsonl", &["--extra-body", TOOLS]);
    assert_eq!(recs.len(), 5);
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(
            r.prompt_tokens,
            Some(r.input_length),
            "request {}: the server counted the tools on top of the trace's length",
            r.index
        );
    }
    let e = &tools.summary.token_exactness;
    assert_eq!(
        (e.with_usage, e.exact, e.over, e.unknown_intended),
        (5, 5, 0, 0),
        "{e:?}"
    );
    // The overhead holds the rendered tools: far more than the bare message's template.
    let with = tools.summary.run.prompts.chat_overhead.unwrap();
    let without = plain.summary.run.prompts.chat_overhead.unwrap();
    assert!(
        with > without + 50,
        "overhead {with} with tools, {without} without"
    );
    let e = &plain.summary.token_exactness;
    assert_eq!((e.with_usage, e.exact), (5, 5), "{e:?}");
}
