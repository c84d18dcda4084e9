//! The GPU presets in numbers, computed in virtual time by `llm_sim::engine::simulate` (the
//! server's scheduler and step-cost model without HTTP or sleeping): TTFT and TPOT of one
//! request at a time (512 and 4,096 prompt tokens, 128 out), TPOT at a steady request rate,
//! and the saturation throughput (500 requests of 512/128 all at once, as `vllm bench serve
//! --request-rate inf` sends them). docs/llm-sim.md's preset table is this output.
//!
//! `cargo run --release -p llm-sim --example presets [PRESET...]`

use llm_sim::engine::{simulate, OfflineRequest, OfflineResult};
use llm_sim::SimConfig;

/// `n` requests of `input`/`output` tokens, each prompt distinct (no prefix-cache hits),
/// arriving every `gap_us`.
fn requests(n: usize, input: u32, output: u32, gap_us: f64) -> Vec<OfflineRequest> {
    (0..n)
        .map(|i| OfflineRequest {
            arrival_us: i as f64 * gap_us,
            prompt: (0..input).map(|t| (i as u32) << 16 | t).collect(),
            max_tokens: output,
        })
        .collect()
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    s / n.max(1) as f64
}

/// One request at a time: each arrives long after the previous one finished.
fn concurrency_one(cfg: &SimConfig, input: u32) -> (f64, f64) {
    let r = simulate(cfg, &requests(3, input, 128, 60e6));
    (
        mean(r.iter().map(|x| x.ttft_us / 1e3)),
        mean(r.iter().map(|x| x.tpot_us() / 1e3)),
    )
}

/// Steady arrivals at `rate` req/s of 512/128 for 60 simulated seconds: mean TPOT (ms) over
/// the second half.
fn tpot_at_rate(cfg: &SimConfig, rate: f64) -> f64 {
    let n = (rate * 60.0) as usize;
    let r = simulate(cfg, &requests(n, 512, 128, 1e6 / rate));
    mean(r[n / 2..].iter().map(|x| x.tpot_us() / 1e3))
}

/// 500 requests of 512/128 at once: requests per second over the makespan, mean TTFT (ms) and
/// mean TPOT (ms).
fn saturation(cfg: &SimConfig) -> (f64, f64, f64) {
    let r: Vec<OfflineResult> = simulate(cfg, &requests(500, 512, 128, 0.0));
    let span_s = r.iter().map(|x| x.e2e_us).fold(0.0, f64::max) / 1e6;
    (
        r.len() as f64 / span_s,
        mean(r.iter().map(|x| x.ttft_us / 1e3)),
        mean(r.iter().map(|x| x.tpot_us() / 1e3)),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<&str> = if args.is_empty() {
        llm_sim::PRESETS.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    println!("| preset | TTFT 512 in | TPOT 512/128 | TTFT 4,096 in | TPOT 4,096/128 | TPOT at 16 req/s | saturation: 500 × 512/128 at once |");
    println!("|---|---|---|---|---|---|---|");
    for name in names {
        let Some(cfg) = SimConfig::preset(name) else {
            eprintln!("unknown preset {name}");
            std::process::exit(2);
        };
        let (ttft1, tpot1) = concurrency_one(&cfg, 512);
        let (ttft4, tpot4) = concurrency_one(&cfg, 4096);
        let (rps, ttft_sat, tpot_sat) = saturation(&cfg);
        println!(
            "| `{name}` | {ttft1:.1} ms | {tpot1:.2} ms | {ttft4:.1} ms | {tpot4:.2} ms | {:.2} ms | {rps:.1} req/s, TTFT {ttft_sat:.0} ms, TPOT {tpot_sat:.2} ms |",
            tpot_at_rate(&cfg, 16.0),
        );
    }
}
