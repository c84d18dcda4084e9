//! `llm-sim`: run the simulated vLLM-like server.

use std::path::PathBuf;

use clap::Parser;
use llm_sim::{FaultConfig, RouterConfig, SimConfig, PRESETS};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A simulated vLLM-like OpenAI/TGI-compatible inference server.
///
/// Engine, cache and timing flags default to the chosen --preset; any flag given overrides it.
#[derive(Parser, Debug)]
#[command(name = "llm-sim", version)]
struct Cli {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to bind (0 = any free port); with --instances N, the first of N consecutive ports.
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Run N independent engines (own scheduler, KV cache, metrics) in this process, on ports
    /// PORT..PORT+N-1; each answers with `x-inference-pod: llm-sim-I` and `x-inference-port`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    instances: u32,
    /// Also start the built-in router on a front port (what-if studies only; real deployments
    /// route with their own gateway): round-robin, least-loaded, session, prefix-aware, or one
    /// of smg's (the Shepherd Model Gateway's) policies by its name: cache_aware, prefix_hash,
    /// consistent_hashing, power_of_two, round_robin, random.
    #[arg(long, value_name = "POLICY")]
    router: Option<llm_sim::routing::Policy>,
    /// The router's port (default: PORT+N, just after the instances; 0 with --port 0).
    #[arg(long, requires = "router")]
    router_port: Option<u16>,
    /// Header carrying the session key of the router's `session` policy (else the OpenAI
    /// `user` field).
    #[arg(long, default_value = "x-session-id", requires = "router")]
    session_header: String,
    /// smg router: headers carrying the routing key of `consistent_hashing`, the first present
    /// wins (then smg's implicit keys: authorization, x-forwarded-for, cookie).
    #[arg(long, num_args = 1.., value_delimiter = ',', default_value = llm_sim::router::SMG_ROUTING_KEY_HEADER, requires = "router")]
    routing_key_headers: Vec<String>,
    /// smg router, cache_aware: the matched share of the request's chars over which it goes to
    /// the instance holding the match (smg's default).
    #[arg(
        long,
        visible_alias = "cache-match-threshold",
        default_value_t = 0.3,
        requires = "router"
    )]
    cache_threshold: f64,
    /// smg router, cache_aware spill gate, absolute part: a matched instance more than this
    /// many requests over the mean (capped at 2 sqrt(mean), never under 4) AND over
    /// --balance-rel-threshold x the mean loses the request to the least loaded.
    #[arg(
        long,
        visible_alias = "spill-abs-threshold",
        default_value_t = 64,
        requires = "router"
    )]
    balance_abs_threshold: u64,
    /// smg router, cache_aware spill gate, relative part (a multiple of the mean in flight).
    #[arg(
        long,
        visible_alias = "spill-rel-threshold",
        default_value_t = 1.5,
        requires = "router"
    )]
    balance_rel_threshold: f64,
    /// smg router, cache_aware: the approximate tree's bound (chars, summed over instances)
    /// each eviction brings it under.
    #[arg(long, default_value_t = 1 << 26, requires = "router")]
    max_tree_size: usize,
    /// smg router, cache_aware: seconds (simulated) between tree evictions (0: never).
    #[arg(long, default_value_t = 60, requires = "router")]
    eviction_interval_secs: u64,
    /// smg router, prefix_hash: tokens of the prompt's head hashed (4x as many chars of the
    /// request text).
    #[arg(long, default_value_t = 256, requires = "router")]
    prefix_token_count: usize,
    /// smg router, prefix_hash: load factor (x the mean, the incoming request included) above
    /// which the hashed instance is overloaded...
    #[arg(long, default_value_t = 1.25, requires = "router")]
    prefix_hash_load_factor: f64,
    /// smg router, prefix_hash: ...if it is also this many requests over the mean.
    #[arg(long, default_value_t = 10, requires = "router")]
    prefix_hash_balance_abs_threshold: u64,
    /// smg router: seed of random, power_of_two and keyless consistent_hashing.
    #[arg(long, default_value_t = llm_sim::routing::SmgConfig::default().seed, requires = "router")]
    router_seed: u64,
    /// Simulated time runs X times faster: engine steps and fault timers take 1/X of their
    /// simulated length (metrics keep simulated values). Pair with request-sim --scale-factor X.
    #[arg(long, default_value_t = 1.0)]
    speedup: f64,
    /// Start from this preset: fast, qwen3-8b-h100, llama-3.1-8b-h100, qwen3-0.6b-h100,
    /// llama3-70b-h100x4, qwen3-32b-a100x2 (docs/llm-sim.md: sources and fits).
    #[arg(long, default_value = "fast")]
    preset: String,
    /// Model name served (default: the preset's).
    #[arg(long)]
    model_name: Option<String>,
    /// Names served, as vLLM's flag: the first is the model's name (answers carry it), the
    /// others aliases; a request naming none of them gets vLLM's 404.
    #[arg(long, num_args = 1.., value_name = "NAME")]
    served_model_name: Vec<String>,
    /// HF tokenizer.json (default: built-in one-word-one-token vocabulary).
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// HF tokenizer_config.json whose chat_template renders chat prompts (default: ChatML).
    #[arg(long)]
    tokenizer_config: Option<PathBuf>,
    /// Longest prompt + completion accepted.
    #[arg(long)]
    max_model_len: Option<u32>,
    /// Completion length when a request gives no max_tokens.
    #[arg(long)]
    default_max_tokens: Option<u32>,
    /// Share of each answer's tokens (chat, Responses, Messages) streamed first as thinking, as
    /// a reasoning model behind vLLM's reasoning parser; usage reports them as reasoning_tokens.
    #[arg(long)]
    reasoning_share: Option<f64>,
    /// Share of the requests with tools (tool_choice auto) whose turn is a tool call, drawn
    /// from a hash of the prompt's token ids.
    #[arg(long)]
    tool_call_share: Option<f64>,
    /// Most sequences running at once.
    #[arg(long)]
    max_num_seqs: Option<usize>,
    /// Token budget per engine step (chunked prefill + decodes).
    #[arg(long)]
    max_num_batched_tokens: Option<u32>,
    /// Tokens per KV block.
    #[arg(long)]
    block_size: Option<u32>,
    /// KV blocks in the simulated GPU.
    #[arg(long)]
    num_gpu_blocks: Option<u32>,
    /// Turn prefix caching off.
    #[arg(long)]
    no_enable_prefix_caching: bool,
    /// Fixed cost of one engine step, in milliseconds.
    #[arg(long)]
    step_fixed_ms: Option<f64>,
    /// Cost per uncached prefill token, in microseconds; a step's linear part is
    /// max(fixed, prefill-token-us x tokens) (weight reads overlap compute).
    #[arg(long)]
    prefill_token_us: Option<f64>,
    /// Cost of attention per (prefill token x token it attends to) pair, in microseconds.
    #[arg(long)]
    attention_pair_us: Option<f64>,
    /// Cost per decoding sequence in a step, in microseconds.
    #[arg(long)]
    decode_seq_us: Option<f64>,
    /// Vision-encoder time per image token of an image not in the prefix cache, in
    /// microseconds (docs/images.md; the qwen2.5-vl-7b-h100 preset: 62).
    #[arg(long)]
    vision_token_us: Option<f64>,
    /// Cost per token of context of each decoding sequence (KV read), in microseconds.
    #[arg(long)]
    decode_ctx_token_us: Option<f64>,
    /// Require `Authorization: Bearer KEY` on /v1 routes.
    #[arg(long)]
    api_key: Option<String>,
    /// Tokio worker threads (1 = single-threaded runtime).
    #[arg(long, default_value_t = 1)]
    worker_threads: usize,

    /// Seed of the fault draws.
    #[arg(long, default_value_t = 0)]
    fault_seed: u64,
    /// Fraction of requests answered 500.
    #[arg(long, default_value_t = 0.0)]
    fault_500_rate: f64,
    /// Fraction of requests answered 429.
    #[arg(long, default_value_t = 0.0)]
    fault_429_rate: f64,
    /// Fraction of requests answered 503.
    #[arg(long, default_value_t = 0.0)]
    fault_503_rate: f64,
    /// Fraction of requests whose connection is reset mid-response.
    #[arg(long, default_value_t = 0.0)]
    fault_reset_rate: f64,
    /// Fraction of requests whose stream stalls mid-way.
    #[arg(long, default_value_t = 0.0)]
    fault_stall_rate: f64,
    /// Length of a stall, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    fault_stall_ms: u64,
    /// Fraction of requests with one malformed SSE chunk (truncated JSON body when not streaming).
    #[arg(long, default_value_t = 0.0)]
    fault_malformed_rate: f64,
    /// Fraction of requests whose response has no usage.
    #[arg(long, default_value_t = 0.0)]
    fault_missing_usage_rate: f64,
    /// Fraction of connections served only after --fault-slow-accept-ms.
    #[arg(long, default_value_t = 0.0)]
    fault_slow_accept_rate: f64,
    /// Delay of a slow accept, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    fault_slow_accept_ms: u64,
    /// Close a connection idle for more than this many milliseconds when the next request
    /// arrives on it, without answering (the keep-alive race of a real server, on demand).
    #[arg(long, value_name = "MS")]
    idle_close_ms: Option<u64>,
    /// Answer every request with `Connection: close` and close the connection after it.
    #[arg(long)]
    no_keep_alive: bool,
    /// With --idle-close-ms: announce the idle timeout in a `Keep-Alive: timeout=` header.
    #[arg(long, requires = "idle_close_ms")]
    announce_keep_alive: bool,
    /// Most requests waiting to be scheduled for the first time; more are answered 429
    /// (default: unbounded, as vLLM).
    #[arg(long, value_name = "N")]
    max_waiting_requests: Option<usize>,
    /// /health and generation routes answer 503 for this many (simulated) milliseconds after
    /// start, as a loading model would.
    #[arg(long, default_value_t = 0, value_name = "MS")]
    ready_delay_ms: u64,
    /// Simulated EOS: requests that do not ask for an exact length (ignore_eos, or
    /// min_tokens = max_tokens) stop after a geometric number of tokens with this mean,
    /// finish_reason `stop` when that is before max_tokens.
    #[arg(long, value_name = "TOKENS")]
    eos_mean_tokens: Option<f64>,
    /// Publish vLLM-format KV events (ZeroMQ PUB) on this endpoint: tcp://HOST:PORT connects to
    /// a subscriber that binds, tcp://*:PORT binds; instance I uses PORT+I. Off by default.
    #[arg(long, value_name = "ENDPOINT")]
    kv_events_endpoint: Option<String>,
    /// Topic frame of the KV event messages (vLLM's default: empty).
    #[arg(long, default_value = "")]
    kv_events_topic: String,
}

fn build_config(cli: Cli) -> anyhow::Result<SimConfig> {
    let mut cfg = SimConfig::preset(&cli.preset).ok_or_else(|| {
        anyhow::anyhow!(
            "unknown preset `{}` (known: {})",
            cli.preset,
            PRESETS.join(", ")
        )
    })?;
    cfg.host = cli.host;
    cfg.port = cli.port;
    if let Some(m) = cli.model_name {
        cfg.model_name = m;
    }
    if let Some((first, rest)) = cli.served_model_name.split_first() {
        cfg.model_name = first.clone();
        cfg.model_aliases = rest.to_vec();
    }
    cfg.tokenizer = cli.tokenizer;
    cfg.tokenizer_config = cli.tokenizer_config;
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = cli.$f { cfg.$f = v; } )* };
    }
    set!(
        max_model_len,
        default_max_tokens,
        reasoning_share,
        tool_call_share,
        max_num_seqs,
        max_num_batched_tokens,
        block_size,
        num_gpu_blocks,
        prefill_token_us,
        attention_pair_us,
        decode_seq_us,
        decode_ctx_token_us,
        vision_token_us
    );
    if let Some(ms) = cli.step_fixed_ms {
        cfg.step_fixed_us = ms * 1000.0;
    }
    if cli.no_enable_prefix_caching {
        cfg.enable_prefix_caching = false;
    }
    cfg.worker_threads = cli.worker_threads.max(1);
    cfg.api_key = cli.api_key;
    cfg.speedup = cli.speedup;
    cfg.idle_close_ms = cli.idle_close_ms;
    cfg.no_keep_alive = cli.no_keep_alive;
    cfg.announce_keep_alive = cli.announce_keep_alive;
    cfg.max_waiting = cli.max_waiting_requests;
    cfg.ready_delay_ms = cli.ready_delay_ms;
    cfg.eos_mean_tokens = cli.eos_mean_tokens;
    cfg.kv_events_endpoint = cli.kv_events_endpoint;
    cfg.kv_events_topic = cli.kv_events_topic;
    cfg.faults = FaultConfig {
        seed: cli.fault_seed,
        error_500_rate: cli.fault_500_rate,
        error_429_rate: cli.fault_429_rate,
        error_503_rate: cli.fault_503_rate,
        reset_rate: cli.fault_reset_rate,
        stall_rate: cli.fault_stall_rate,
        stall_ms: cli.fault_stall_ms,
        malformed_rate: cli.fault_malformed_rate,
        missing_usage_rate: cli.fault_missing_usage_rate,
        slow_accept_rate: cli.fault_slow_accept_rate,
        slow_accept_ms: cli.fault_slow_accept_ms,
    };
    cfg.validate().map_err(anyhow::Error::msg)?;
    Ok(cfg)
}

/// The router's settings from the command line (`None` without `--router`).
fn router_config(cli: &Cli) -> anyhow::Result<Option<RouterConfig>> {
    let Some(policy) = cli.router else {
        return Ok(None);
    };
    let port = match (cli.router_port, cli.port) {
        (Some(p), _) => p,
        (None, 0) => 0,
        (None, base) => u16::try_from(u32::from(base) + cli.instances).map_err(|_| {
            anyhow::anyhow!("the router's port {base}+{} is past 65535", cli.instances)
        })?,
    };
    Ok(Some(RouterConfig {
        policy,
        host: cli.host.clone(),
        port,
        session_header: cli.session_header.clone(),
        routing_key_headers: cli.routing_key_headers.clone(),
        smg: smg_config(cli)?,
    }))
}

/// The smg policies' thresholds from the command line, checked as smg checks them.
fn smg_config(cli: &Cli) -> anyhow::Result<llm_sim::routing::SmgConfig> {
    if !(0.0..=1.0).contains(&cli.cache_threshold) {
        anyhow::bail!(
            "--cache-threshold must be in 0..=1, got {}",
            cli.cache_threshold
        );
    }
    for (flag, v) in [
        ("--balance-rel-threshold", cli.balance_rel_threshold),
        ("--prefix-hash-load-factor", cli.prefix_hash_load_factor),
    ] {
        if !(v.is_finite() && v >= 1.0) {
            anyhow::bail!("{flag} must be a finite number of at least 1.0, got {v}");
        }
    }
    Ok(llm_sim::routing::SmgConfig {
        cache_threshold: cli.cache_threshold,
        balance_abs_threshold: cli.balance_abs_threshold,
        balance_rel_threshold: cli.balance_rel_threshold,
        max_tree_size: cli.max_tree_size,
        eviction_interval_secs: cli.eviction_interval_secs,
        prefix_token_count: cli.prefix_token_count,
        prefix_hash_load_factor: cli.prefix_hash_load_factor,
        prefix_hash_balance_abs_threshold: cli.prefix_hash_balance_abs_threshold,
        seed: cli.router_seed,
    })
}

fn main() {
    let cli = Cli::parse();
    let instances = cli.instances as usize;
    let router = match router_config(&cli) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("llm-sim: {e:#}");
            std::process::exit(2);
        }
    };
    let cfg = match build_config(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("llm-sim: {e:#}");
            std::process::exit(2);
        }
    };
    let rt = if cfg.worker_threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.worker_threads)
            .enable_all()
            .build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("llm-sim: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = rt.block_on(async move {
        let summary = format!(
            "speedup={} model={} max_num_seqs={} max_num_batched_tokens={} block_size={} num_gpu_blocks={} prefix_caching={} step=max({}us,{}us/prefill-token)+{}us/attention-pair+{}us/decode-seq+{}us/decode-context-token tokenizer={}",
            cfg.speedup,
            cfg.model_name,
            cfg.max_num_seqs,
            cfg.max_num_batched_tokens,
            cfg.block_size,
            cfg.num_gpu_blocks,
            cfg.enable_prefix_caching,
            cfg.step_fixed_us,
            cfg.prefill_token_us,
            cfg.attention_pair_us,
            cfg.decode_seq_us,
            cfg.decode_ctx_token_us,
            cfg.tokenizer
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "built-in".into()),
        );
        let servers = match llm_sim::start_cluster(cfg, instances).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("llm-sim: {e:#}");
                return 1;
            }
        };
        for s in &servers {
            eprintln!("llm-sim: listening on {} ({summary})", s.base_url());
        }
        let router = match router {
            Some(rc) => match llm_sim::start_router(&servers, rc.clone()).await {
                Ok(r) => {
                    eprintln!(
                        "llm-sim: router ({}, what-if studies only) listening on {} in front of {} instance(s)",
                        rc.policy,
                        r.base_url(),
                        servers.len()
                    );
                    Some(r)
                }
                Err(e) => {
                    eprintln!("llm-sim: {e:#}");
                    return 1;
                }
            },
            None => None,
        };
        let _ = tokio::signal::ctrl_c().await;
        eprintln!("llm-sim: shutting down");
        if let Some(r) = router {
            r.shutdown().await;
        }
        for s in servers {
            s.shutdown().await;
        }
        0
    });
    std::process::exit(code);
}
