//! Answers that are tool calls, judged by `--goodput ttfa:MS`: a turn that answers with a tool
//! call has no answer text, and its answer is the call, so its TTFA is the first tool-call
//! token (`stats::per_record::ttfa_of`: the earlier of the first answer text and the first
//! tool call). Against llm-sim on 127.0.0.1 with `tools` and `tool_choice: required` in
//! `--extra-body` (llm-sim, as vLLM, then ends every turn in a tool call), and through the
//! `aiperf` drop-in with AIPerf's `time_to_first_output_token` limit.

use std::process::Command;

use request_sim::stats::Metric;

use crate::support::{
    base_args, read_json, read_json_lines, read_records_by_index, replay, start_sim, strs,
    write_trace,
};

const TOOLS: &str = r#"{"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}], "tool_choice": "required"}"#;

const AIPERF_BIN: &str = env!("CARGO_BIN_EXE_aiperf");

#[test]
fn tool_call_answers_meet_a_generous_ttfa_limit() {
    let sim = start_sim(llm_sim::SimConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 6, 50.0, 16, 6);
    let run = |limit: &str| {
        let mut args = base_args(&sim.base_url(), &trace, dir.path());
        args.extend(["--stream", "--extra-body", TOOLS, "--goodput"].map(String::from));
        args.push(format!("ttfa:{limit}"));
        replay(&strs(&args))
    };

    // A minute: every answer is good (with TTFA = the answer text only, none would be judged).
    let out = run("60000");
    let s = &out.summary;
    assert_eq!(s.status.ok, 6);
    let records = read_records_by_index(&dir.path().join("records.jsonl"));
    for r in &records {
        assert_eq!(r.tool_calls, Some(1), "{r:?}");
        assert_eq!(r.answer_tokens, Some(0), "no answer text: {r:?}");
        let tool = r.ttf_tool_ms.expect("the first tool-call token's time");
        assert!(tool > 0.0 && tool < 60_000.0, "{r:?}");
        // Nothing but the call: its first token is the first token of the answer.
        assert_eq!(r.ttft_ms, Some(tool), "{r:?}");
        assert_eq!(r.ttfa_ms, None, "no answer text came: {r:?}");
    }
    assert_eq!(
        s.good_requests,
        Some(6),
        "tool-call answers meet ttfa:60000"
    );
    assert_eq!(s.good_fraction(), Some(1.0));
    // The summary's ttfa statistics take the same TTFA: one value per answer, the call's.
    let ttfa = &s.latency[Metric::Ttfa];
    assert_eq!(ttfa.count, 6);
    let max_tool = records
        .iter()
        .filter_map(|r| r.ttf_tool_ms)
        .fold(0.0, f64::max);
    assert!((ttfa.max - max_tool).abs() < 1e-3, "{ttfa:?} vs {max_tool}");

    // The limit is applied, not waived: 1 µs is broken by every answer.
    let out = run("0.001");
    assert_eq!(out.summary.status.ok, 6);
    assert_eq!(out.summary.good_requests, Some(0));
}

/// AIPerf's `--goodput time_to_first_output_token:MS` reaches the same limit through the drop-in
/// (`--extra-inputs` with the tools as a JSON object), and its files say so: the good request
/// count, and each record's `time_to_first_output_token` (the call's time).
#[test]
fn aiperf_time_to_first_output_token_goodput_counts_tool_call_answers() {
    let sim = start_sim(llm_sim::SimConfig::default());
    let url = sim.base_url().trim_start_matches("http://").to_string();
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), "t.jsonl", 5, 40.0, 16, 6);
    let o = Command::new(AIPERF_BIN)
        .current_dir(dir.path())
        .args(["profile", "--model", "llm-sim", "--endpoint-type", "chat"])
        .args(["--streaming", "--url", &url, "--input-file"])
        .arg(&trace)
        .args([
            "--custom-dataset-type",
            "mooncake_trace",
            "--fixed-schedule",
        ])
        .args(["--extra-inputs", TOOLS])
        .args(["--goodput", "time_to_first_output_token:60000"])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let art = dir.path().join("artifacts");
    let agg = read_json(&art.join("profile_export_aiperf.json"));
    assert_eq!(agg["request_count"]["avg"].as_f64(), Some(5.0));
    assert_eq!(
        agg["good_request_count"]["avg"].as_f64(),
        Some(5.0),
        "{agg}"
    );
    let recs = read_records_by_index(&art.join("request_sim_records.jsonl"));
    let lines = read_json_lines(&art.join("profile_export.jsonl"));
    assert_eq!(lines.len(), 5);
    for r in &recs {
        assert_eq!(r.tool_calls, Some(1), "{r:?}");
        let tool = r.ttf_tool_ms.unwrap();
        let found = lines.iter().any(|l| {
            l["metrics"]["time_to_first_output_token"]["value"]
                .as_f64()
                .is_some_and(|v| (v - tool).abs() < 1e-3)
        });
        assert!(
            found,
            "no time_to_first_output_token of {tool} ms: {lines:?}"
        );
    }
}
