//! Exact prompts with only an endpoint: the server's `POST /tokenize` (llm-sim started with the
//! real Qwen3 tokenizer) picks the prompt words, checks the start-up sample and counts the chat
//! overhead; no tokenizer file is given to request-sim.

use std::io::Write;
use std::path::{Path, PathBuf};

use request_sim::backend::tokenize::ServerTokenizer;
use request_sim::backend::{self, ApiFlavor, Endpoint};
use request_sim::prompt::{verify_sample, PromptBuilder, Vocab};
use request_sim::record::Status;
use request_sim::trace::TraceRequest;

use super::qwen3::qwen3;
use crate::support::{config, read_records, replay, start_sim};

/// `n` mooncake rows, block 512, half of them extending an earlier row's hash ids.
pub(super) fn write_trace(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("trace.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut next = 1u64;
    let mut prev: Vec<Vec<u64>> = Vec::new();
    for i in 0..n {
        let mut ids = if i % 2 == 1 {
            prev[(i * 7) % prev.len()].clone()
        } else {
            Vec::new()
        };
        for _ in 0..(1 + i % 3) {
            ids.push(next);
            next += 1;
        }
        let input = (ids.len() as u32 - 1) * 512 + 16 + (i as u32 * 97) % 496;
        writeln!(
            f,
            r#"{{"timestamp": {}, "input_length": {input}, "output_length": {}, "hash_ids": {ids:?}}}"#,
            i * 20,
            2 + i % 5
        )
        .unwrap();
        prev.push(ids);
    }
    path
}

pub(super) fn sim() -> llm_sim::SimThread {
    let q = qwen3().unwrap();
    start_sim(llm_sim::SimConfig {
        tokenizer: Some(q.dir.join("tokenizer.json")),
        tokenizer_config: Some(q.dir.join("tokenizer_config.json")),
        ..Default::default()
    })
}

#[test]
fn server_vocabulary_equals_the_local_one_and_checks_prompts() {
    let Some(q) = qwen3() else { return };
    let sim = sim();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = backend::build_client(&backend::ClientOptions::default()).unwrap();
    let ep = Endpoint::resolve(&sim.base_url(), ApiFlavor::Openai, true, None, None).unwrap();
    let st = ServerTokenizer::probe(rt.handle().clone(), &client, &ep, None)
        .expect("llm-sim answers /tokenize");
    let server = Vocab::from_candidates(&st, st.candidates().unwrap()).unwrap();
    // Same words, same ids, same order: the same seed builds the same prompts either way.
    assert_eq!(server.len(), q.vocab.len());
    for i in 0..server.len() {
        assert_eq!(
            (server.id(i), server.word(i)),
            (q.vocab.id(i), q.vocab.word(i))
        );
    }
    let b = PromptBuilder::new(std::sync::Arc::new(server), 5, 512);
    let reqs: Vec<TraceRequest> = (0..6)
        .map(|i| TraceRequest {
            model: None,
            reasoning: Default::default(),
            images: None,
            index: i,
            line: i + 1,
            timestamp_ms: 0.0,
            input_length: 300 + 700 * i as u32,
            output_length: 1,
            hash_ids: vec![i as u64, 100 + i as u64].into(),
            session: None,
        })
        .collect();
    let v = verify_sample(&b, &st, &reqs, 6);
    assert_eq!((v.checked, v.exact), (6, 6), "{v:?}");
    assert_eq!(
        st.overhead(backend::ApiKind::Chat, false).unwrap(),
        Some((8, ""))
    );
    assert_eq!(
        st.overhead(backend::ApiKind::Completions, false).unwrap(),
        Some((0, ""))
    );
}

#[test]
fn endpoint_only_replay_is_exact_on_chat_and_completions() {
    if qwen3().is_none() {
        return;
    }
    let sim = sim();
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 30);
    for path in ["/v1/chat/completions", "/v1/completions"] {
        let out = dir.path().join("out.jsonl");
        let endpoint = format!("{}{path}", sim.base_url());
        let argv = [
            "--endpoint",
            &endpoint,
            "--dataset-path",
            trace.to_str().unwrap(),
            "-q",
            "--scale-factor",
            "4",
            "-o",
            out.to_str().unwrap(),
        ];
        let outcome = replay(&argv);
        let recs = read_records(&out);
        assert_eq!(recs.len(), 30);
        for r in &recs {
            assert_eq!(r.status, Status::Ok, "{path}: {r:?}");
            assert_eq!(r.prompt_tokens, Some(r.input_length), "{path}: {}", r.index);
        }
        let run = &outcome.summary.run;
        let source = run.prompts.prompt_token_source.as_deref().unwrap();
        assert!(source.starts_with("server /tokenize"), "{source}");
        let pv = run.prompts.prompt_verification.unwrap();
        assert!(pv.checked > 0 && pv.exact == pv.checked, "{pv:?}");
        let want = if path.contains("chat") { 8 } else { 0 };
        assert_eq!(run.prompts.chat_overhead, Some(want), "{path}");
    }
}

#[test]
fn tokenizer_accepts_a_model_directory() {
    let Some(q) = qwen3() else { return };
    let sim = sim();
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 12);
    let out = dir.path().join("out.jsonl");
    let argv = [
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--tokenizer",
        q.dir.to_str().unwrap(),
        "-q",
        "--scale-factor",
        "4",
        "-o",
        out.to_str().unwrap(),
    ];
    let cfg = config(&argv).unwrap();
    assert_eq!(cfg.prompts.tokenizer, Some(q.dir.join("tokenizer.json")));
    assert_eq!(
        cfg.prompts.tokenizer_config,
        Some(q.dir.join("tokenizer_config.json"))
    );
    let outcome = request_sim::run::replay(cfg).unwrap();
    let run = &outcome.summary.run;
    assert!(run
        .prompts
        .prompt_token_source
        .as_deref()
        .unwrap()
        .starts_with("local tokenizer"));
    assert_eq!(run.prompts.chat_overhead, Some(8));
    let recs = read_records(&out);
    assert_eq!(recs.len(), 12);
    assert!(recs
        .iter()
        .all(|r| r.status == Status::Ok && r.prompt_tokens == Some(r.input_length)));

    // A directory without tokenizer.json is a clear error.
    let empty = tempfile::tempdir().unwrap();
    let e = request_sim::prompt::tokenizer_files(empty.path()).unwrap_err();
    assert!(e.to_string().contains("no tokenizer.json"), "{e}");
}

#[test]
fn endpoint_only_replay_is_exact_with_a_trimming_template() {
    let Some(q) = qwen3() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Like Llama 3's template: the content is trimmed (its first word would lose its space).
    let cfg = dir.path().join("tokenizer_config.json");
    std::fs::write(
        &cfg,
        r#"{"chat_template": "<|im_start|>user\n{{ messages[0]['content'] | trim }}<|im_end|>\n<|im_start|>assistant\n"}"#,
    )
    .unwrap();
    let sim = start_sim(llm_sim::SimConfig {
        tokenizer: Some(q.dir.join("tokenizer.json")),
        tokenizer_config: Some(cfg),
        ..Default::default()
    });
    let trace = write_trace(dir.path(), 12);
    let out = dir.path().join("out.jsonl");
    let argv = [
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "-q",
        "--scale-factor",
        "4",
        "-o",
        out.to_str().unwrap(),
    ];
    let outcome = replay(&argv);
    // The lead's tokens are counted in the overhead (8 for the template itself).
    let overhead = outcome.summary.run.prompts.chat_overhead.unwrap();
    assert!(overhead > 8, "{overhead}");
    let recs = read_records(&out);
    assert_eq!(recs.len(), 12);
    for r in &recs {
        assert_eq!(r.status, Status::Ok);
        assert_eq!(r.prompt_tokens, Some(r.input_length), "request {}", r.index);
    }
}
