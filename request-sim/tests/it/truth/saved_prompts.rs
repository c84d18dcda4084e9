//! `replay --dry-run --save-prompts F`: the saved prompts are exact, or the run is refused.
//! Without an endpoint the built-in simulator's chat template is known (8 tokens), so the saved
//! prompts replay at exactly the trace's lengths (they used to be saved uncalibrated, 8 tokens
//! over in every request); against a remote endpoint nothing tells the overhead in a dry run,
//! so it is refused with the ways to give it.

use std::sync::atomic::Ordering;

use crate::support::*;

#[test]
fn dry_run_saved_prompts_replay_at_the_trace_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_fixture("mooncake.jsonl");
    let saved = dir.path().join("saved.jsonl");
    replay(&[
        "--dry-run",
        "--dataset-path",
        trace.to_str().unwrap(),
        "--scale-factor",
        "1000",
        "--seed",
        "4",
        "--quiet",
        "--save-prompts",
        saved.to_str().unwrap(),
        "-o",
        dir.path().join("dry.jsonl").to_str().unwrap(),
    ]);
    let sim = default_sim();
    let out = dir.path().join("again.jsonl");
    replay(&[
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        saved.to_str().unwrap(),
        "--scale-factor",
        "1000",
        "--max-output-tokens",
        "2",
        "--quiet",
        "--no-server-metrics",
        "-o",
        out.to_str().unwrap(),
    ]);
    // The trace's lengths, as the dry run recorded them.
    let lengths: Vec<u32> = read_records_by_index(&dir.path().join("dry.jsonl"))
        .iter()
        .map(|r| r.input_length)
        .collect();
    assert_eq!(lengths.len(), 4);
    let recs = read_records_by_index(&out);
    assert_eq!(recs.len(), lengths.len());
    for (r, want) in recs.iter().zip(&lengths) {
        assert_eq!(r.prompt_tokens, Some(*want), "request {}", r.index);
    }
}

#[test]
fn dry_run_save_against_an_endpoint_without_a_known_overhead_is_refused() {
    let server = RawServer::start(Script::default());
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("saved.jsonl");
    let (code, _, stderr) = run_cli(
        [
            "replay",
            "--endpoint",
            &server.url("/v1/chat/completions"),
            "--dry-run",
            "--dataset-path",
            trace_fixture("mooncake.jsonl").to_str().unwrap(),
            "--save-prompts",
            saved.to_str().unwrap(),
            "-o",
            dir.path().join("r.jsonl").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("--save-prompts with --dry-run against")
            && stderr.contains("pass --chat-overhead N"),
        "{stderr}"
    );
    assert!(!stderr.contains("dry run: not calibrated"), "{stderr}");
    assert!(!saved.exists(), "no uncalibrated file");
    assert_eq!(server.connections.load(Ordering::SeqCst), 0);
}
