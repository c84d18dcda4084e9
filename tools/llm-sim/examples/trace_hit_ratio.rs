//! Checks llm-sim's prefix cache against a Mooncake-style trace: replays the first N requests
//! (sequentially, in trace order, one output token each) with prompts built so that equal hash
//! ids give identical blocks of built-in words, and compares the server-side hit ratio
//! (sum cached / sum prompt tokens) with the one computed offline from the hash ids.
//!
//! cargo run --release -p llm-sim --example trace_hit_ratio -- --trace PATH [--requests 1000]

use std::collections::HashSet;
use std::io::BufRead;

use clap::Parser;
use llm_sim::util::{hash3, mix64};
use llm_sim::SimConfig;
use serde_json::{json, Value};

#[derive(Parser, Debug)]
struct Args {
    /// Mooncake JSONL trace (input_length, hash_ids).
    #[arg(long)]
    trace: std::path::PathBuf,
    /// Requests to replay from the start of the trace.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Tokens per hash id in the trace.
    #[arg(long, default_value_t = 512)]
    trace_block: usize,
    /// The server's KV block size.
    #[arg(long, default_value_t = 16)]
    block_size: u32,
    /// Endpoint: completions (prompt = the words) or chat (content shortened by the 8-token
    /// template overhead so prompt_tokens = input_length).
    #[arg(long, default_value = "completions")]
    api: String,
    /// Prompt seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

struct Req {
    input_length: usize,
    hash_ids: Vec<u64>,
}

fn block_words(seed: u64, id: u64, len: usize, out: &mut String) {
    let words = llm_sim::vocab::builtin_words();
    for k in 0..len {
        let w = &words[(hash3(seed, id, k as u64) % words.len() as u64) as usize];
        out.push(' ');
        out.push_str(w);
    }
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let file = std::io::BufReader::new(std::fs::File::open(&a.trace)?);
    let mut reqs = Vec::new();
    for line in file.lines().take(a.requests) {
        let v: Value = serde_json::from_str(&line?)?;
        reqs.push(Req {
            input_length: v["input_length"].as_u64().unwrap_or(0) as usize,
            hash_ids: v["hash_ids"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                .unwrap_or_default(),
        });
    }
    // Offline: a request hits the leading hash ids already seen (capped at its length).
    let mut seen = HashSet::new();
    let (mut off_hit, mut off_total) = (0usize, 0usize);
    let mut distinct_tokens = 0usize;
    for r in &reqs {
        let k = r.hash_ids.iter().take_while(|h| seen.contains(*h)).count();
        off_hit += (k * a.trace_block).min(r.input_length);
        off_total += r.input_length;
        for h in &r.hash_ids {
            if seen.insert(*h) {
                distinct_tokens += a.trace_block;
            }
        }
    }
    let blocks = (distinct_tokens / a.block_size as usize) * 2 + 1024;
    let cfg = SimConfig {
        block_size: a.block_size,
        num_gpu_blocks: blocks as u32,
        max_num_batched_tokens: 1 << 20,
        step_fixed_us: 0.0,
        prefill_token_us: 0.0,
        decode_seq_us: 0.0,
        ..SimConfig::default()
    };
    let sim = llm_sim::spawn_in_thread(cfg)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let client = reqwest::Client::builder().no_proxy().build()?;
    let chat = a.api == "chat";
    let url = if chat {
        format!("{}/v1/chat/completions", sim.base_url())
    } else {
        format!("{}/v1/completions", sim.base_url())
    };
    let (mut srv_hit, mut srv_total, mut exact) = (0u64, 0u64, 0usize);
    rt.block_on(async {
        for (i, r) in reqs.iter().enumerate() {
            let target = if chat { r.input_length.saturating_sub(8) } else { r.input_length };
            let mut text = String::with_capacity(target * 5);
            let mut left = target;
            for (j, h) in r.hash_ids.iter().enumerate() {
                let len = if j + 1 == r.hash_ids.len() { left } else { a.trace_block.min(left) };
                block_words(a.seed, *h, len, &mut text);
                left -= len;
            }
            // Tokens beyond the hash-id blocks are unique to the request.
            block_words(a.seed, mix64(u64::MAX - i as u64), left, &mut text);
            let body = if chat {
                json!({"model": "llm-sim", "messages": [{"role": "user", "content": text}], "max_tokens": 1})
            } else {
                json!({"model": "llm-sim", "prompt": text, "max_tokens": 1})
            };
            let v: Value = client.post(&url).json(&body).send().await?.json().await?;
            let p = v["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
            if p as usize == r.input_length {
                exact += 1;
            }
            srv_total += p;
            srv_hit += v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0);
        }
        anyhow::Ok(())
    })?;
    let page = rt.block_on(async {
        client
            .get(format!("{}/metrics", sim.base_url()))
            .send()
            .await?
            .text()
            .await
    })?;
    let metric = |name: &str| -> f64 {
        page.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    let off = off_hit as f64 / off_total as f64;
    let srv = srv_hit as f64 / srv_total as f64;
    println!("requests                     {}", reqs.len());
    println!("api                          {}", a.api);
    println!("prompt_tokens == input_length {exact} of {}", reqs.len());
    println!(
        "offline hit ratio            {:.4} ({off_hit} / {off_total})",
        off
    );
    println!(
        "server hit ratio (usage)     {:.4} ({srv_hit} / {srv_total})",
        srv
    );
    println!(
        "server hit ratio (/metrics)  {:.4}",
        metric("vllm:prefix_cache_hits_total") / metric("vllm:prefix_cache_queries_total")
    );
    println!(
        "difference                   {:+.2} percentage points",
        (srv - off) * 100.0
    );
    Ok(())
}
