//! The prompt API on a real trace with a real tokenizer, and what it costs: tokenizer load and
//! vocabulary (start-up), a sample check, the chat-template overhead, and single-thread
//! `write_text` throughput. The full exactness and sharing check of every prompt is the
//! `request-sim verify-prompts` subcommand.
//!
//! ```text
//! scripts/fetch-tokenizer.sh
//! cargo run --release -p request-sim --example verify_prompts -- \
//!     ../shared/traces/mooncake_conversation_trace.jsonl .cache/tokenizers/qwen3 2000
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use request_sim::prompt::{
    chat_overhead_from_template, load_tokenizer, verify_sample, PromptBuilder, Vocab,
};
use request_sim::trace::{self, LoadOptions};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: verify_prompts TRACE [TOKENIZER_DIR] [REQUESTS]";
    let trace_path = PathBuf::from(args.next().ok_or_else(|| anyhow::anyhow!(usage))?);
    let dir = PathBuf::from(args.next().unwrap_or(".cache/tokenizers/qwen3".into()));
    let n: usize = args.next().map_or(Ok(2000), |s| s.parse())?;

    let t0 = Instant::now();
    let tok = load_tokenizer(&dir)?;
    let t_load = t0.elapsed();
    let vocab = Arc::new(Vocab::from_tokenizer(&tok)?);
    println!(
        "tokenizer load {:.0} ms, vocabulary {:.0} ms: {} words ({})",
        t_load.as_secs_f64() * 1e3,
        (t0.elapsed() - t_load).as_secs_f64() * 1e3,
        vocab.len(),
        vocab.method()
    );
    let overhead = chat_overhead_from_template(&tok, &dir.join("tokenizer_config.json"))?;
    println!("chat template overhead: {overhead} tokens");

    let opts = LoadOptions {
        max_requests: Some(n),
        ..LoadOptions::default()
    };
    let trace = trace::load(&trace_path, &opts)?;
    let requests = &trace.requests;
    let tokens: u64 = requests.iter().map(|r| u64::from(r.input_length)).sum();
    let builder = PromptBuilder::new(vocab, 1, trace.block_size);
    let sample = verify_sample(&builder, &tok, requests, 8);
    println!(
        "{} requests, {tokens} prompt tokens; sample: {}/{} exact",
        requests.len(),
        sample.exact,
        sample.checked
    );

    // Single-thread write_text throughput over the same requests, about 1 s of CPU.
    let mut buf = String::new();
    let (mut built, t) = (0u64, Instant::now());
    while t.elapsed().as_secs_f64() < 1.0 {
        for r in requests {
            buf.clear();
            builder.write_text(r, r.input_length as usize, &mut buf);
            built += u64::from(r.input_length);
        }
    }
    println!(
        "write_text: {:.1} M tokens/s on one thread (wall)",
        built as f64 / t.elapsed().as_secs_f64() / 1e6
    );
    Ok(())
}
