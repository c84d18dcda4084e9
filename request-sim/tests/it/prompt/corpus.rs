//! Real-text prompts (`--prompt-corpus`) with the real Qwen3 tokenizer: exact lengths and ids,
//! block sharing, determinism, concatenation stability and the corpus share, then a replay
//! against llm-sim (started with the same tokenizer) on chat and completions endpoints.

use std::path::PathBuf;
use std::sync::Arc;

use request_sim::prompt::{verify_trace, Corpus, CorpusReport, CorpusSpec, PromptBuilder};
use request_sim::record::Status;

use crate::support::{data_path, read_records, replay};

use super::qwen3::{conversation_requests, qwen3, req, Qwen3};

fn data(p: &str) -> PathBuf {
    data_path("corpus").join(p)
}

fn corpus(q: &Qwen3, p: &str) -> Arc<Corpus> {
    Arc::new(Corpus::load(&CorpusSpec::new(data(p)), Some(&q.tok), false).unwrap())
}

#[test]
fn corpus_units_are_stable_and_prompts_exact() {
    let Some(q) = qwen3() else { return };
    for p in ["sharegpt.json", "rows.jsonl", "txt"] {
        let c = corpus(q, p);
        let s = c.stats();
        assert!(s.units > 3000, "{p}: {s:?}");
        // Byte-level BPE splits before every space: no boundary is unstable.
        assert_eq!(s.dropped_unstable, 0, "{p}: {s:?}");
        for (block, count) in [(16usize, 120usize), (64, 60), (512, 12)] {
            let b = PromptBuilder::with_corpus(q.vocab.clone(), Some(c.clone()), 11, block);
            for r in conversation_requests(count, block, block as u64 + 3) {
                let n = r.input_length as usize;
                let text = b.text(&r, n);
                let ids = q.tok.encode(text.as_str(), false).unwrap();
                assert_eq!(ids.len(), n, "{p} block {block}: {r:?}");
                assert_eq!(ids.get_ids(), b.token_ids(&r, n).as_slice(), "{p}");
            }
        }
    }
}

#[test]
fn corpus_prompts_share_blocks_exactly_and_diverge_at_once() {
    let Some(q) = qwen3() else { return };
    let b = PromptBuilder::with_corpus(q.vocab.clone(), Some(corpus(q, "sharegpt.json")), 5, 32);
    // Full blocks only: a partial block is the full block's prefix only up to its last whole
    // unit (real traces never reuse a partial block's hash id at another length; `verify-prompts`
    // on the Mooncake trace compares every shared block).
    let reqs: Vec<_> = conversation_requests(300, 32, 99)
        .into_iter()
        .map(|mut r| {
            let covered = (r.hash_ids.len() * 32) as u32;
            r.input_length = r.input_length.max(covered);
            r
        })
        .collect();
    let rep = verify_trace(&b, &q.tok, &reqs);
    assert!(rep.ok(), "{rep:?}");
    assert_eq!(rep.pct_exact, 100.0);
    assert!(rep.shared_blocks_compared > 100, "{rep:?}");
    assert_eq!(rep.shared_block_mismatches, 0);
    assert!(rep.branch_points > 50, "{rep:?}");
    // Every block starts with its keyed words: ids less than V apart differ at once.
    assert_eq!(rep.first_token_collisions, 0, "{rep:?}");
    assert_eq!(rep.two_token_collisions, 0);
}

#[test]
fn corpus_prompts_are_the_same_from_any_builder_and_change_with_the_seed() {
    let Some(q) = qwen3() else { return };
    let a = PromptBuilder::with_corpus(q.vocab.clone(), Some(corpus(q, "txt")), 7, 64);
    let b = PromptBuilder::with_corpus(q.vocab.clone(), Some(corpus(q, "txt")), 7, 64);
    let c = PromptBuilder::with_corpus(q.vocab.clone(), Some(corpus(q, "txt")), 8, 64);
    for r in conversation_requests(50, 64, 1) {
        let n = r.input_length as usize;
        assert_eq!(a.text(&r, n), b.text(&r, n));
        if n > 0 {
            assert_ne!(a.text(&r, n), c.text(&r, n));
        }
    }
}

#[test]
fn corpus_blocks_concatenate_stably() {
    let Some(q) = qwen3() else { return };
    let b = PromptBuilder::with_corpus(q.vocab.clone(), Some(corpus(q, "rows.jsonl")), 3, 100);
    let mut text = String::new();
    let mut want = Vec::new();
    for (k, h) in [5u64, 900, 17, 4_000_000, 6, 12].into_iter().enumerate() {
        let len = 37 + 29 * k;
        let mut t = String::new();
        b.write_block_text(h, len, &mut t);
        let ids = q.tok.encode(t.as_str(), false).unwrap();
        assert_eq!(ids.len(), len, "block {h} alone");
        want.extend_from_slice(ids.get_ids());
        text.push_str(&t);
    }
    let all = q.tok.encode(text.as_str(), false).unwrap();
    assert_eq!(all.get_ids(), want.as_slice());
}

#[test]
fn corpus_share_is_at_least_95_percent_for_512_token_blocks() {
    let Some(q) = qwen3() else { return };
    let b = PromptBuilder::with_corpus(q.vocab.clone(), Some(corpus(q, "sharegpt.json")), 1, 512);
    let reqs: Vec<_> = (0..200)
        .map(|i| req(i, (i as u64 * 10..i as u64 * 10 + 8).collect(), 8 * 512))
        .collect();
    let r = CorpusReport::new(&b, &reqs, 0).unwrap();
    assert!(r.corpus_token_share >= 0.95, "{}", r.corpus_token_share);
    assert!(r.corpus_token_share < 1.0);
    assert!(r.line().contains("corpus text is"), "{}", r.line());
}

#[test]
fn corpus_replay_is_exact_on_chat_and_completions_and_hits_like_the_trace() {
    let Some(q) = qwen3() else { return };
    let sim = super::server::sim();
    let dir = tempfile::tempdir().unwrap();
    let trace = super::server::write_trace(dir.path(), 40);
    for path in ["/v1/chat/completions", "/v1/completions"] {
        let out = dir.path().join("out.jsonl");
        let endpoint = format!("{}{path}", sim.base_url());
        let corpus = data("sharegpt.json");
        let argv = [
            "--endpoint",
            &endpoint,
            "--dataset-path",
            trace.to_str().unwrap(),
            "--tokenizer",
            q.dir.to_str().unwrap(),
            "--prompt-corpus",
            corpus.to_str().unwrap(),
            // A new seed per endpoint: the second run must not hit the first one's cache.
            "--seed",
            if path.contains("chat") { "1" } else { "2" },
            "-q",
            "--scale-factor",
            "2",
            "-o",
            out.to_str().unwrap(),
        ];
        let outcome = replay(&argv);
        let recs = read_records(&out);
        assert_eq!(recs.len(), 40);
        for r in &recs {
            assert_eq!(r.status, Status::Ok, "{path}: {r:?}");
            assert_eq!(r.prompt_tokens, Some(r.input_length), "{path}: {}", r.index);
        }
        let s = &outcome.summary;
        let pc = s.run.prompts.prompt_corpus.as_ref().unwrap();
        assert!(pc.corpus_token_share > 0.9, "{pc:?}");
        let (hit, ideal) = (s.cache.hit_ratio.unwrap(), s.cache.ideal_hit_ratio.unwrap());
        assert!(ideal > 0.2, "{ideal}");
        // The server caches 16-token blocks (and never a prompt's last token); the trace
        // counts 512-token blocks: a little under, never over by more than the template.
        assert!(
            (hit - ideal).abs() < 0.02,
            "{path}: server {hit}, trace-ideal {ideal}"
        );
    }
}
