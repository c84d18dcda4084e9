//! Load client for measuring llm-sim itself: N streaming chat requests at a fixed concurrency
//! against a running llm-sim (loopback only), reporting completion, TTFT/TPOT, and the
//! server's CPU time per request read from /proc/PID/stat. Used by scripts/bench-llm-sim.sh.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use tokio::sync::Semaphore;

#[derive(Parser, Debug)]
struct Args {
    /// Base URL of the server (must be a loopback address).
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    url: String,
    /// PID of the llm-sim process, for its CPU time.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Clock ticks per second of /proc/PID/stat (getconf CLK_TCK).
    #[arg(long, default_value_t = 100)]
    clk_tck: u64,
    /// Requests to send in total.
    #[arg(long, default_value_t = 1000)]
    requests: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 1000)]
    concurrency: usize,
    /// Words (= tokens with the built-in tokenizer) per prompt.
    #[arg(long, default_value_t = 200)]
    prompt_words: usize,
    /// Output tokens per request.
    #[arg(long, default_value_t = 200)]
    max_tokens: u32,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
}

struct Outcome {
    ok: bool,
    tokens: u64,
    ttft: Duration,
    e2e: Duration,
}

/// (user, system) CPU ticks of a process.
fn cpu_ticks(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

async fn metric(client: &reqwest::Client, base: &str, name: &str) -> Option<f64> {
    let page = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    page.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let idx = p / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (idx.floor() as usize, idx.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (idx - lo as f64)
}

fn count(hay: &[u8], needle: &[u8]) -> u64 {
    hay.windows(needle.len()).filter(|w| *w == needle).count() as u64
}

async fn one(client: reqwest::Client, url: String, body: Arc<String>) -> Outcome {
    let start = Instant::now();
    let mut out = Outcome {
        ok: false,
        tokens: 0,
        ttft: Duration::ZERO,
        e2e: Duration::ZERO,
    };
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.as_bytes().to_vec())
        .send()
        .await;
    let Ok(mut resp) = resp else { return out };
    if !resp.status().is_success() {
        return out;
    }
    let mut done = false;
    while let Ok(Some(chunk)) = resp.chunk().await {
        let n = count(&chunk, b"\"content\":\" ");
        if n > 0 && out.tokens == 0 {
            out.ttft = start.elapsed();
        }
        out.tokens += n;
        if count(&chunk, b"[DONE]") > 0 {
            done = true;
        }
    }
    out.e2e = start.elapsed();
    out.ok = done;
    out
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let host = a
        .url
        .trim_start_matches("http://")
        .split(':')
        .next()
        .unwrap_or_default()
        .to_string();
    anyhow::ensure!(
        host == "localhost" || host.starts_with("127.") || host == "[::1]",
        "refusing to load a non-loopback address: {host}"
    );
    let words = llm_sim::vocab::builtin_words();
    let client = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(a.concurrency)
        .timeout(Duration::from_secs(a.timeout_s))
        .build()?;
    let url = format!("{}/v1/chat/completions", a.url);
    let sem = Arc::new(Semaphore::new(a.concurrency));
    let cpu0 = a.server_pid.and_then(cpu_ticks);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(a.requests);
    for i in 0..a.requests {
        // Distinct prompts (no cache hits): word i*prompt_words.. of the list.
        let mut content = String::with_capacity(a.prompt_words * 5);
        for k in 0..a.prompt_words {
            content.push(' ');
            content.push_str(&words[(i * 7919 + k * 31) % words.len()]);
        }
        let body = Arc::new(
            serde_json::json!({
                "model": "llm-sim",
                "messages": [{"role": "user", "content": content}],
                "max_tokens": a.max_tokens, "min_tokens": a.max_tokens, "ignore_eos": true,
                "stream": true, "stream_options": {"include_usage": true}
            })
            .to_string(),
        );
        let permit = sem.clone().acquire_owned().await?;
        let (c, u) = (client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let o = one(c, u, body).await;
            drop(permit);
            o
        }));
    }
    let mut outcomes = Vec::with_capacity(tasks.len());
    for t in tasks {
        outcomes.push(t.await?);
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu1 = a.server_pid.and_then(cpu_ticks);
    let ok = outcomes.iter().filter(|o| o.ok).count();
    let tokens: u64 = outcomes.iter().map(|o| o.tokens).sum();
    let mut ttft: Vec<f64> = outcomes
        .iter()
        .filter(|o| o.ok)
        .map(|o| o.ttft.as_secs_f64() * 1e3)
        .collect();
    let mut tpot: Vec<f64> = outcomes
        .iter()
        .filter(|o| o.ok && o.tokens > 1)
        .map(|o| (o.e2e - o.ttft).as_secs_f64() * 1e3 / (o.tokens - 1) as f64)
        .collect();
    println!(
        "requests            {} ({} completed with [DONE], {} failed)",
        a.requests,
        ok,
        a.requests - ok
    );
    println!("concurrency         {}", a.concurrency);
    println!(
        "prompt/output       {} words / {} tokens",
        a.prompt_words, a.max_tokens
    );
    println!("wall time           {wall:.2} s");
    println!(
        "tokens received     {tokens} ({:.0} tokens/s)",
        tokens as f64 / wall
    );
    println!(
        "TTFT ms             p50 {:.1}  p99 {:.1}  max {:.1}",
        pct(&mut ttft, 50.0),
        pct(&mut ttft, 99.0),
        pct(&mut ttft, 100.0)
    );
    println!(
        "TPOT ms             p50 {:.2}  p99 {:.2}  max {:.2}",
        pct(&mut tpot, 50.0),
        pct(&mut tpot, 99.0),
        pct(&mut tpot, 100.0)
    );
    let steps = metric(&client, &a.url, "llm_sim:engine_steps_total")
        .await
        .unwrap_or(f64::NAN);
    let sim = metric(&client, &a.url, "llm_sim:engine_step_seconds_total")
        .await
        .unwrap_or(f64::NAN);
    let lag = metric(&client, &a.url, "llm_sim:engine_lag_seconds_total")
        .await
        .unwrap_or(f64::NAN);
    println!(
        "engine              {steps:.0} steps, {:.3} ms simulated + {:.3} ms wake-up lag per step",
        sim * 1e3 / steps,
        lag * 1e3 / steps
    );
    if let (Some(c0), Some(c1), Some(pid)) = (cpu0, cpu1, a.server_pid) {
        let user = (c1.0 - c0.0) as f64 / a.clk_tck as f64;
        let sys = (c1.1 - c0.1) as f64 / a.clk_tck as f64;
        let cpu_s = user + sys;
        println!(
            "server CPU          {cpu_s:.2} s = {user:.2} user + {sys:.2} system ({:.0}% of one core over the run)",
            100.0 * cpu_s / wall
        );
        println!(
            "server CPU/request  {:.0} us",
            cpu_s * 1e6 / a.requests as f64
        );
        println!(
            "server CPU/token    {:.2} us",
            cpu_s * 1e6 / tokens.max(1) as f64
        );
        if let Some(rss) = peak_rss_kib(pid) {
            println!("server peak RSS     {:.1} MiB", rss as f64 / 1024.0);
        }
    }
    anyhow::ensure!(
        ok == a.requests,
        "{} requests did not complete",
        a.requests - ok
    );
    Ok(())
}
