//! Settings of one simulated server: where it listens, what it serves, how its engine is timed,
//! how big its KV cache is, and which faults it injects.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Fault switches. Every rate is a probability in `[0, 1]`, drawn per request (per connection
/// for `slow_accept_rate`) from a hash of (`seed`, request number, fault kind), so a run with the
/// same seed and the same request order injects the same faults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultConfig {
    /// Seed of the fault draws.
    pub seed: u64,
    /// Fraction of requests answered `500 Internal Server Error` before any work.
    pub error_500_rate: f64,
    /// Fraction of requests answered `429 Too Many Requests` before any work.
    pub error_429_rate: f64,
    /// Fraction of requests answered `503 Service Unavailable` before any work.
    pub error_503_rate: f64,
    /// Fraction of requests whose connection is reset (TCP RST) partway through the response.
    pub reset_rate: f64,
    /// Fraction of requests whose stream stalls for `stall_ms` partway through.
    pub stall_rate: f64,
    /// How long a stalled stream stays silent, in milliseconds.
    pub stall_ms: u64,
    /// Fraction of requests that get one malformed (truncated JSON) SSE chunk partway through;
    /// for non-streaming requests the JSON body itself is truncated.
    pub malformed_rate: f64,
    /// Fraction of requests whose response carries no `usage` (no usage chunk when streaming).
    pub missing_usage_rate: f64,
    /// Fraction of connections that wait `slow_accept_ms` before the server reads from them.
    pub slow_accept_rate: f64,
    /// Delay of a slow accept, in milliseconds.
    pub slow_accept_ms: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            seed: 0,
            error_500_rate: 0.0,
            error_429_rate: 0.0,
            error_503_rate: 0.0,
            reset_rate: 0.0,
            stall_rate: 0.0,
            stall_ms: 5_000,
            malformed_rate: 0.0,
            missing_usage_rate: 0.0,
            slow_accept_rate: 0.0,
            slow_accept_ms: 1_000,
        }
    }
}

impl FaultConfig {
    /// Checks that every rate is a probability and the three error rates add up to at most 1.
    pub fn validate(&self) -> Result<(), String> {
        let rates = [
            ("error_500_rate", self.error_500_rate),
            ("error_429_rate", self.error_429_rate),
            ("error_503_rate", self.error_503_rate),
            ("reset_rate", self.reset_rate),
            ("stall_rate", self.stall_rate),
            ("malformed_rate", self.malformed_rate),
            ("missing_usage_rate", self.missing_usage_rate),
            ("slow_accept_rate", self.slow_accept_rate),
        ];
        for (name, r) in rates {
            if !(0.0..=1.0).contains(&r) {
                return Err(format!("{name} must be within [0, 1], got {r}"));
            }
        }
        let sum = self.error_500_rate + self.error_429_rate + self.error_503_rate;
        if sum > 1.0 + 1e-9 {
            return Err(format!(
                "error_500_rate + error_429_rate + error_503_rate must be at most 1, got {sum}"
            ));
        }
        Ok(())
    }

    /// True when no fault can fire.
    pub fn is_off(&self) -> bool {
        self.error_500_rate == 0.0
            && self.error_429_rate == 0.0
            && self.error_503_rate == 0.0
            && self.reset_rate == 0.0
            && self.stall_rate == 0.0
            && self.malformed_rate == 0.0
            && self.missing_usage_rate == 0.0
            && self.slow_accept_rate == 0.0
    }
}

/// Everything one simulated server needs. `Default` is a fast preset for tests and demos; see
/// [`SimConfig::preset`] for presets shaped like real GPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    /// Address to bind (default 127.0.0.1; nothing else unless asked).
    pub host: String,
    /// Port to bind; 0 picks a free ephemeral port.
    pub port: u16,
    /// The model name served (`/v1/models`, the `model` field of responses).
    pub model_name: String,
    /// HF `tokenizer.json`; `None` uses the built-in one-word-one-token vocabulary.
    pub tokenizer: Option<PathBuf>,
    /// HF `tokenizer_config.json` whose `chat_template` renders chat prompts; `None` uses ChatML.
    pub tokenizer_config: Option<PathBuf>,
    /// Longest prompt + completion accepted (vLLM `--max-model-len`).
    pub max_model_len: u32,
    /// Completion length when a request gives no `max_tokens` (capped by `max_model_len`).
    pub default_max_tokens: u32,

    /// Most sequences running at once (vLLM `--max-num-seqs`).
    pub max_num_seqs: usize,
    /// Token budget of one engine step, shared by chunked prefills and decodes
    /// (vLLM `--max-num-batched-tokens`).
    pub max_num_batched_tokens: u32,
    /// Tokens per KV block (vLLM `--block-size`).
    pub block_size: u32,
    /// KV blocks in the simulated GPU (vLLM `--num-gpu-blocks-override`).
    pub num_gpu_blocks: u32,
    /// Prefix caching on (vLLM's default) or off.
    pub enable_prefix_caching: bool,

    /// Fixed cost of one engine step (reading the weights), microseconds.
    pub step_fixed_us: f64,
    /// Cost per prefill token computed in a step (cached tokens cost nothing), microseconds.
    /// The step's linear part is `max(step_fixed_us, prefill_token_us × tokens)`: the GPU reads
    /// the weights while it computes (see [`crate::timing`]).
    pub prefill_token_us: f64,
    /// Cost per (prefill token × token it attends to) pair, microseconds: attention over the
    /// context of the prompt tokens computed in a step, cached prefix included.
    #[serde(default)]
    pub attention_pair_us: f64,
    /// Cost per decoding sequence in a step, microseconds.
    pub decode_seq_us: f64,
    /// Cost per token of context of each decoding sequence in a step (reading its KV cache),
    /// microseconds: a sequence with c tokens of context adds `decode_seq_us + c * this`.
    pub decode_ctx_token_us: f64,

    /// Tokio worker threads for the binary (1 = a single-threaded runtime).
    pub worker_threads: usize,

    /// When set, `/v1/*` routes require `Authorization: Bearer <api_key>` (vLLM `--api-key`).
    pub api_key: Option<String>,

    /// Fault switches at start-up (change them at runtime with a [`crate::FaultHandle`]).
    pub faults: FaultConfig,

    /// The keep-alive race on demand: a connection idle for more than this many milliseconds
    /// is closed, without an answer, when the next request arrives on it (what a server's
    /// keep-alive timer does when it fires just as the client reuses the connection).
    /// `None` keeps connections open.
    #[serde(default)]
    pub idle_close_ms: Option<u64>,
    /// Answer every request with `Connection: close` and close the connection after it.
    #[serde(default)]
    pub no_keep_alive: bool,
    /// With `idle_close_ms`: announce it as `Keep-Alive: timeout=<whole seconds>` on every
    /// response, as Apache and nginx do (uvicorn and llama.cpp's server do not).
    #[serde(default)]
    pub announce_keep_alive: bool,

    /// Index of this engine in a `--instances N` cluster (0-based). It names the instance in
    /// the `x-inference-pod` response header (`llm-sim-INDEX`) and is the engine's identity for
    /// per-instance metrics.
    #[serde(default)]
    pub engine_index: usize,
    /// Simulated time runs this many times faster than the wall clock: engine steps and fault
    /// timers (stalls, slow accepts) last 1/speedup of their simulated length; metrics keep the
    /// simulated values. 1 = real time.
    #[serde(default = "one")]
    pub speedup: f64,

    /// Most requests waiting to be scheduled for the first time; one more is answered 429
    /// (`None`: unbounded, as vLLM).
    #[serde(default)]
    pub max_waiting: Option<usize>,
    /// `/health` (and every generation route) answers 503 for this long after start, in
    /// simulated milliseconds (divided by `speedup` in wall time), as a loading model would.
    #[serde(default)]
    pub ready_delay_ms: u64,
    /// Simulated EOS: a request that does not ask for an exact length (`ignore_eos`, or
    /// `min_tokens` = `max_tokens`) stops after a length drawn from a geometric distribution
    /// with this mean (clamped to `[min_tokens, max_tokens]`), with `finish_reason` `stop` when
    /// that comes before `max_tokens`. `None`: every request runs to `max_tokens`.
    #[serde(default)]
    pub eos_mean_tokens: Option<f64>,
    /// Publish vLLM-format KV events on this ZeroMQ endpoint (`tcp://HOST:PORT`: connect to a
    /// subscriber that binds; `tcp://*:PORT`: bind). Engine `i` of a cluster uses PORT + i.
    /// `None` (the default): no events.
    #[serde(default)]
    pub kv_events_endpoint: Option<String>,
    /// Topic frame of every KV event message (vLLM's default: empty).
    #[serde(default)]
    pub kv_events_topic: String,
}

fn one() -> f64 {
    1.0
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            host: "127.0.0.1".to_string(),
            port: 0,
            model_name: "llm-sim".to_string(),
            tokenizer: None,
            tokenizer_config: None,
            max_model_len: 262_144,
            default_max_tokens: 256,
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            block_size: 16,
            num_gpu_blocks: 65_536,
            enable_prefix_caching: true,
            step_fixed_us: 1_000.0,
            prefill_token_us: 0.25,
            attention_pair_us: 0.0,
            decode_seq_us: 2.0,
            decode_ctx_token_us: 0.0,
            worker_threads: 1,
            api_key: None,
            faults: FaultConfig::default(),
            idle_close_ms: None,
            no_keep_alive: false,
            announce_keep_alive: false,
            engine_index: 0,
            speedup: 1.0,
            max_waiting: None,
            ready_delay_ms: 0,
            eos_mean_tokens: None,
            kv_events_endpoint: None,
            kv_events_topic: String::new(),
        }
    }
}

/// Names accepted by [`SimConfig::preset`].
pub const PRESETS: &[&str] = &[
    "fast",
    "qwen3-8b-h100",
    "llama3-70b-h100x4",
    "qwen3-32b-a100x2",
];

impl SimConfig {
    /// A named preset. `fast` is [`SimConfig::default`]; the others are rough roofline estimates
    /// for vLLM on real hardware (see docs/llm-sim.md for the arithmetic):
    /// - fixed step cost = weight bytes / HBM bandwidth (+ ~20% overheads, + all-reduce for TP);
    /// - prefill cost per token = 2 x parameters FLOPs at ~50% of the dense BF16 peak;
    /// - decode cost per sequence = ~10 us of per-sequence overhead + its KV cache read
    ///   (KV bytes per token / HBM bandwidth per token of context);
    /// - KV blocks = (90% of HBM - weights) / KV bytes per token / 16.
    pub fn preset(name: &str) -> Option<SimConfig> {
        let base = SimConfig::default();
        match name {
            "fast" => Some(base),
            // Qwen3-8B BF16 on one H100 SXM (80 GB, 3.35 TB/s, 989 TFLOP/s):
            // 16.4 GB weights -> 4.9 ms, +20% -> 6 ms; 16.4 GFLOP/token at 495 TFLOP/s -> 33 us;
            // KV 144 KiB/token (36 layers x 8 KV heads x 128 x 2 x 2 B) / 3.35 TB/s -> 0.044 us
            // per token of context (0.09 ms for a 2k-token sequence);
            // (72 GB - 16.4 GB) / 144 KiB / 16 -> ~23.5k blocks.
            "qwen3-8b-h100" => Some(SimConfig {
                model_name: "Qwen/Qwen3-8B".to_string(),
                max_model_len: 131_072,
                max_num_seqs: 256,
                max_num_batched_tokens: 8192,
                num_gpu_blocks: 23_500,
                step_fixed_us: 6_000.0,
                prefill_token_us: 33.0,
                decode_seq_us: 10.0,
                decode_ctx_token_us: 0.044,
                ..base
            }),
            // Llama-3.1-70B BF16 on 4 x H100 SXM, TP=4: 141 GB / 13.4 TB/s -> 10.5 ms, + all-reduce
            // and overheads -> 14 ms; 141 GFLOP/token at 4 x 495 TFLOP/s -> 71 us; KV 320 KiB/token
            // (80 x 8 x 128 x 2 x 2 B) / 13.4 TB/s -> 0.0245 us per token of context;
            // (288 GB - 141 GB) / 320 KiB / 16 -> ~28k blocks.
            "llama3-70b-h100x4" => Some(SimConfig {
                model_name: "meta-llama/Llama-3.1-70B-Instruct".to_string(),
                max_model_len: 131_072,
                max_num_seqs: 256,
                max_num_batched_tokens: 8192,
                num_gpu_blocks: 28_000,
                step_fixed_us: 14_000.0,
                prefill_token_us: 71.0,
                decode_seq_us: 10.0,
                decode_ctx_token_us: 0.0245,
                ..base
            }),
            // Qwen3-32B BF16 on 2 x A100 80 GB, TP=2 (2 x 2.0 TB/s, 2 x 312 TFLOP/s):
            // 65.5 GB / 4 TB/s -> 16.4 ms, + overheads -> 20 ms; 65.5 GFLOP/token at 312 TFLOP/s
            // -> 210 us; KV 256 KiB/token (64 x 8 x 128 x 2 x 2 B) / 4 TB/s -> 0.066 us per token
            // of context;
            // (144 GB - 65.5 GB) / 256 KiB / 16 -> ~18.7k blocks.
            "qwen3-32b-a100x2" => Some(SimConfig {
                model_name: "Qwen/Qwen3-32B".to_string(),
                max_model_len: 40_960,
                max_num_seqs: 128,
                max_num_batched_tokens: 8192,
                num_gpu_blocks: 18_700,
                step_fixed_us: 20_000.0,
                prefill_token_us: 210.0,
                decode_seq_us: 10.0,
                decode_ctx_token_us: 0.066,
                ..base
            }),
            _ => None,
        }
    }

    /// Checks the engine settings for values the engine cannot run with.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.speedup.is_finite() && self.speedup > 0.0) {
            return Err(format!(
                "speedup must be a positive number, got {}",
                self.speedup
            ));
        }
        if let Some(m) = self.eos_mean_tokens {
            if !(m.is_finite() && m >= 1.0) {
                return Err(format!("eos_mean_tokens must be at least 1, got {m}"));
            }
        }
        if self.max_num_seqs == 0 {
            return Err("max_num_seqs must be at least 1".into());
        }
        if self.max_num_batched_tokens == 0 {
            return Err("max_num_batched_tokens must be at least 1".into());
        }
        if self.block_size == 0 {
            return Err("block_size must be at least 1".into());
        }
        if self.num_gpu_blocks == 0 {
            return Err("num_gpu_blocks must be at least 1".into());
        }
        if self.max_model_len == 0 {
            return Err("max_model_len must be at least 1".into());
        }
        for (name, v) in [
            ("step_fixed_us", self.step_fixed_us),
            ("prefill_token_us", self.prefill_token_us),
            ("attention_pair_us", self.attention_pair_us),
            ("decode_seq_us", self.decode_seq_us),
            ("decode_ctx_token_us", self.decode_ctx_token_us),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!(
                    "{name} must be a finite non-negative number, got {v}"
                ));
            }
        }
        self.faults.validate()
    }
}
