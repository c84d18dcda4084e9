//! The `trace_replay` binary runs the command line of UCM's README (`benchmarks/README.md`,
//! "Basic Usage"), with this machine's host, port and paths, against llm-sim serving the
//! Qwen3 tokenizer under the model's path (as vLLM serves `--model PATH`): every request is
//! recorded with exact prompt tokens, metrics.xlsx and the saved prompts are written; then the
//! same in benchmark mode with a ShareGPT file.

use calamine::Reader;
use request_sim::record::Status;

use crate::support::{data_path, read_records, run_program, start_sim, TRACE_REPLAY_BIN};

use super::qwen3::qwen3;

#[test]
fn ucm_command_line_runs_against_llm_sim() {
    let Some(q) = qwen3() else { return };
    let model = q.dir.display().to_string();
    let sim = start_sim(llm_sim::SimConfig {
        model_name: model.clone(),
        tokenizer: Some(q.dir.join("tokenizer.json")),
        tokenizer_config: Some(q.dir.join("tokenizer_config.json")),
        ..Default::default()
    });
    let port = sim.base_url().rsplit(':').next().unwrap().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let trace = super::server::write_trace(tmp.path(), 20);
    let out = tmp.path().join("result");
    let out_s = out.display().to_string();
    // README: --model --backend vllm --trace-path --trace-mode trace --host --port
    // --save-result --save-prompts (plus --result-dir, so the test's files stay in its dir).
    let o = run_program(
        TRACE_REPLAY_BIN,
        &[
            "--model",
            &model,
            "--backend",
            "vllm",
            "--trace-path",
            trace.to_str().unwrap(),
            "--trace-mode",
            "trace",
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--save-result",
            "--save-prompts",
            "--result-dir",
            &out_s,
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let recs = read_records(&out.join("trace_replay_records.jsonl"));
    assert_eq!(recs.len(), 20);
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(r.prompt_tokens, Some(r.input_length), "request {}", r.index);
    }
    // metrics.xlsx (UCM's file name) with the Metrics sheet.
    let mut wb = calamine::open_workbook_auto(out.join("metrics.xlsx")).unwrap();
    assert!(
        wb.sheet_names().iter().any(|s| s == "Metrics"),
        "{:?}",
        wb.sheet_names()
    );
    let metrics = wb.worksheet_range("Metrics").unwrap();
    assert!(metrics.rows().count() > 10);
    // The saved prompts: one completions row per request, next to the results.
    let saved = std::fs::read_to_string(out.join("trace_dataset.jsonl")).unwrap();
    let rows: Vec<serde_json::Value> = saved
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 20);
    assert!(
        rows.iter().all(|r| r["text_input"].is_string()),
        "{}",
        rows[0]
    );

    // Benchmark mode: ShareGPT text at the trace's lengths.
    let sharegpt = data_path("corpus/sharegpt.json");
    let o = run_program(
        TRACE_REPLAY_BIN,
        &[
            "--model",
            &model,
            "--backend",
            "vllm",
            "--trace-path",
            trace.to_str().unwrap(),
            "--trace-mode",
            "benchmark",
            "--dataset-name",
            "sharegpt",
            "--dataset-path",
            sharegpt.to_str().unwrap(),
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--seed",
            "7",
            "--save-result",
            "--result-dir",
            &out_s,
            "--max-concurrency",
            "20",
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("--max-concurrency has no effect"), "{err}");
    assert!(err.contains("corpus text is"), "{err}");
    let recs = read_records(&out.join("trace_replay_records.jsonl"));
    assert_eq!(recs.len(), 20);
    assert!(recs
        .iter()
        .all(|r| r.status == Status::Ok && r.prompt_tokens == Some(r.input_length)));
}
