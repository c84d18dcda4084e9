//! The prefix cache against hash-id traces: prompts where equal hash ids give identical blocks
//! of built-in words, replayed in order; the server's hit ratio (sum cached / sum prompt
//! tokens) must match the ratio computed offline from the hash ids within 1 percentage point.
//! A synthetic trace always; the first 200 requests of the real Mooncake trace when
//! `shared/traces/` is beside the repository.

use std::collections::HashSet;

use crate::support::*;
use llm_sim::util::{hash3, mix64};
use llm_sim::SimConfig;
use serde_json::{json, Value};

struct Req {
    input_length: usize,
    hash_ids: Vec<u64>,
}

fn block_words(seed: u64, id: u64, len: usize, out: &mut String) {
    let words = llm_sim::vocab::builtin_words();
    for k in 0..len {
        out.push(' ');
        out.push_str(&words[(hash3(seed, id, k as u64) % words.len() as u64) as usize]);
    }
}

fn offline_ratio(reqs: &[Req], trace_block: usize) -> f64 {
    let mut seen = HashSet::new();
    let (mut hit, mut total) = (0usize, 0usize);
    for r in reqs {
        let k = r.hash_ids.iter().take_while(|h| seen.contains(*h)).count();
        hit += (k * trace_block).min(r.input_length);
        total += r.input_length;
        seen.extend(r.hash_ids.iter().copied());
    }
    hit as f64 / total as f64
}

async fn server_ratio(reqs: &[Req], trace_block: usize, chat: bool) -> f64 {
    let cfg = SimConfig {
        num_gpu_blocks: 1 << 20,
        max_num_batched_tokens: 1 << 20,
        step_fixed_us: 0.0,
        prefill_token_us: 0.0,
        decode_seq_us: 0.0,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let (mut hit, mut total) = (0u64, 0u64);
    for (i, r) in reqs.iter().enumerate() {
        let target = if chat {
            r.input_length - 8
        } else {
            r.input_length
        };
        let mut text = String::with_capacity(target * 5);
        let mut left = target;
        for (j, h) in r.hash_ids.iter().enumerate() {
            let len = if j + 1 == r.hash_ids.len() {
                left
            } else {
                trace_block.min(left)
            };
            block_words(7, *h, len, &mut text);
            left -= len;
        }
        block_words(7, mix64(u64::MAX - i as u64), left, &mut text);
        let (path, body) = if chat {
            ("/v1/chat/completions", chat_body(&text, 1, false))
        } else {
            ("/v1/completions", completion_body(json!(text), 1, false))
        };
        let v: Value = post(&b, path, &body).await.json().await.unwrap();
        let p = v["usage"]["prompt_tokens"].as_u64().unwrap();
        assert_eq!(p as usize, r.input_length, "request {i}");
        total += p;
        hit += v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap();
    }
    let page = metrics(&b).await;
    assert_eq!(metric(&page, "vllm:prefix_cache_hits_total") as u64, hit);
    assert_eq!(
        metric(&page, "vllm:prefix_cache_queries_total") as u64,
        total
    );
    server.shutdown().await;
    hit as f64 / total as f64
}

/// Conversations: each turn extends an earlier turn by a few new blocks (its partial last
/// block becoming a new, longer block), or starts fresh after a shared first block.
fn synthetic(n: usize, trace_block: usize) -> Vec<Req> {
    let mut sessions: Vec<Vec<u64>> = Vec::new();
    let mut next_id = 0u64;
    let mut out = Vec::new();
    for i in 0..n {
        let h = mix64(i as u64);
        let one_in_three = matches!(h % 3, 0);
        let mut ids = if !sessions.is_empty() && !one_in_three {
            // The previous turn's last block was partial: its extension is a new block.
            let s = (h >> 8) as usize % sessions.len();
            let prev = &sessions[s];
            prev[..prev.len() - 1].to_vec()
        } else {
            vec![0] // a shared system-prompt block
        };
        for _ in 0..1 + (h >> 20) % 3 {
            next_id += 1;
            ids.push(next_id);
        }
        let partial = 1 + (h >> 30) as usize % trace_block;
        let input_length = (ids.len() - 1) * trace_block + partial;
        sessions.push(ids.clone());
        out.push(Req {
            input_length,
            hash_ids: ids,
        });
    }
    out
}

#[tokio::test]
async fn synthetic_conversations_match_the_offline_ratio() {
    let reqs = synthetic(150, 64);
    let off = offline_ratio(&reqs, 64);
    assert!(off > 0.3, "the synthetic trace shares prefixes: {off}");
    for chat in [false, true] {
        let srv = server_ratio(&reqs, 64, chat).await;
        assert!(
            (srv - off).abs() < 0.01,
            "chat={chat}: server {srv:.4} vs offline {off:.4}"
        );
    }
}

#[tokio::test]
async fn real_mooncake_trace_matches_the_offline_ratio() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/traces/mooncake_conversation_trace.jsonl");
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("skipped: {} not found", path.display());
        return;
    };
    let reqs: Vec<Req> = text
        .lines()
        .take(200)
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Req {
                input_length: v["input_length"].as_u64().unwrap() as usize,
                hash_ids: v["hash_ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap())
                    .collect(),
            }
        })
        .collect();
    let off = offline_ratio(&reqs, 512);
    let srv = server_ratio(&reqs, 512, false).await;
    assert!(
        (srv - off).abs() < 0.01,
        "server {srv:.4} vs offline {off:.4}"
    );
}
