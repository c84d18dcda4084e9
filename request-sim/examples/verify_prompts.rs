//! Measure the prompt module on a real trace with a real tokenizer:
//! start-up (tokenizer load + vocabulary), the start-up sample check, the chat-template
//! overhead, single-thread `write_text` throughput, and the full re-tokenization + sharing
//! check (`verify_trace`) of the first N requests.
//!
//! ```text
//! scripts/fetch-tokenizer.sh
//! cargo run --release -p request-sim --example verify_prompts -- \
//!     --trace ../shared/traces/mooncake_conversation_trace.jsonl --requests 2000 --block-size 512
//! ```
//! Options: `--tokenizer-dir DIR` (default `.cache/tokenizers/qwen3` or `$REQUEST_SIM_QWEN3_DIR`),
//! `--seed N` (default 1), `--skip-trace-check` (only start-up, sample and throughput). The trace is parsed here directly (mooncake / generic JSONL:
//! `timestamp`, `input_length`, `output_length`, `hash_ids`); surplus hash ids beyond
//! `ceil(input_length / block_size)` are dropped as the trace loader does.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use request_sim::prompt::{
    chat_overhead_from_template, load_tokenizer, verify_sample, verify_trace, PromptBuilder, Vocab,
};
use request_sim::trace::TraceRequest;

fn main() -> anyhow::Result<()> {
    let mut trace = PathBuf::from("../shared/traces/mooncake_conversation_trace.jsonl");
    let mut dir = std::env::var_os("REQUEST_SIM_QWEN3_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".cache/tokenizers/qwen3"));
    let mut n_requests = 2000usize;
    let mut block = 512usize;
    let mut seed = 1u64;
    let mut full_check = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || {
            args.next()
                .ok_or_else(|| anyhow::anyhow!("{a} needs a value"))
        };
        match a.as_str() {
            "--trace" => trace = PathBuf::from(val()?),
            "--tokenizer-dir" => dir = PathBuf::from(val()?),
            "--requests" => n_requests = val()?.parse()?,
            "--block-size" => block = val()?.parse()?,
            "--seed" => seed = val()?.parse()?,
            "--skip-trace-check" => full_check = false,
            other => anyhow::bail!("unknown argument {other}"),
        }
    }

    // Start-up: tokenizer load + vocabulary.
    let (t0, c0) = (Instant::now(), process_cpu_s());
    let tok = load_tokenizer(&dir.join("tokenizer.json"))?;
    let (t_load, c_load) = (t0.elapsed(), process_cpu_s());
    let vocab = Arc::new(Vocab::from_tokenizer(&tok)?);
    let (t_startup, c_startup) = (t0.elapsed(), process_cpu_s());
    println!(
        "tokenizer load {:.0} ms, vocabulary {:.0} ms, start-up total {:.0} ms wall \
         (process CPU: load {:.0} ms, vocabulary {:.0} ms); {} words",
        t_load.as_secs_f64() * 1e3,
        (t_startup - t_load).as_secs_f64() * 1e3,
        t_startup.as_secs_f64() * 1e3,
        (c_load - c0) * 1e3,
        (c_startup - c_load) * 1e3,
        vocab.len()
    );

    let overhead = chat_overhead_from_template(&tok, &dir.join("tokenizer_config.json"))?;
    println!("chat template overhead: {overhead} tokens");

    let requests = read_trace(&trace, n_requests, block)?;
    let total_tokens: u64 = requests.iter().map(|r| r.input_length as u64).sum();
    println!(
        "{} requests, {} prompt tokens, {} hash ids",
        requests.len(),
        total_tokens,
        requests.iter().map(|r| r.hash_ids.len()).sum::<usize>()
    );

    let builder = PromptBuilder::new(vocab.clone(), seed, block);
    let sample = verify_sample(&builder, &tok, &requests, 8);
    println!("start-up sample: {}", serde_json::to_string(&sample)?);

    // Single-thread write_text throughput over the same requests, ~1 s; per wall second and
    // per second on the CPU (the latter is unaffected by other processes on a busy machine).
    let mut buf = String::new();
    let mut built = 0u64;
    let t = Instant::now();
    let cpu0 = thread_cpu_s();
    while t.elapsed().as_secs_f64() < 1.0 {
        for r in &requests {
            buf.clear();
            builder.write_text(r, r.input_length as usize, &mut buf);
            built += r.input_length as u64;
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = thread_cpu_s() - cpu0;
    println!(
        "write_text: {:.1} M tokens/s per CPU second of one thread ({:.1} M per wall second; \
         {:.2} µs wall per average prompt of {:.0} tokens)",
        built as f64 / cpu / 1e6,
        built as f64 / secs / 1e6,
        secs * 1e6 / (built as f64 / (total_tokens as f64 / requests.len() as f64)),
        total_tokens as f64 / requests.len() as f64
    );

    if !full_check {
        return Ok(());
    }
    let report = verify_trace(&builder, &tok, &requests);
    println!(
        "verify_trace: {}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    if !report.ok() {
        anyhow::bail!("verification failed");
    }
    Ok(())
}

/// CPU time of the whole process (all threads), from /proc/self/stat (Linux; 0 elsewhere).
fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// CPU time of the calling thread in seconds, from /proc/thread-self/schedstat (Linux).
fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ns| ns / 1e9)
        .unwrap_or(f64::NAN)
}

fn read_trace(
    path: &std::path::Path,
    limit: usize,
    block: usize,
) -> anyhow::Result<Vec<TraceRequest>> {
    #[derive(serde::Deserialize)]
    struct Row {
        timestamp: f64,
        input_length: u32,
        output_length: u32,
        #[serde(default)]
        hash_ids: Vec<u64>,
    }
    let text = std::fs::read_to_string(path)?;
    let mut out = Vec::new();
    let mut t0 = None;
    for (i, line) in text.lines().enumerate() {
        if out.len() >= limit {
            break;
        }
        if line.trim().is_empty() {
            continue;
        }
        let row: Row = serde_json::from_str(line)
            .map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), i + 1))?;
        let mut hash_ids = row.hash_ids;
        if block > 0 {
            hash_ids.truncate((row.input_length as usize).div_ceil(block));
        }
        let t0 = *t0.get_or_insert(row.timestamp);
        out.push(TraceRequest {
            index: out.len(),
            line: i + 1,
            timestamp_ms: row.timestamp - t0,
            input_length: row.input_length,
            output_length: row.output_length,
            hash_ids,
            session: None,
        });
    }
    Ok(out)
}
