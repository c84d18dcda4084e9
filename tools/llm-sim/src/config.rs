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
    /// More names the same model answers to (vLLM's `--served-model-name a b c`: every name
    /// is listed by `/v1/models`; answers carry the first, `model_name`).
    pub model_aliases: Vec<String>,
    /// HF `tokenizer.json`; `None` uses the built-in one-word-one-token vocabulary.
    pub tokenizer: Option<PathBuf>,
    /// HF `tokenizer_config.json` whose `chat_template` renders chat prompts; `None` uses ChatML.
    pub tokenizer_config: Option<PathBuf>,
    /// Longest prompt + completion accepted (vLLM `--max-model-len`).
    pub max_model_len: u32,
    /// Completion length when a request gives no `max_tokens` (capped by `max_model_len`).
    pub default_max_tokens: u32,
    /// Share of each answer's tokens (chat, Responses, Messages) streamed first as thinking
    /// (chat's `delta.reasoning`, as vLLM 0.32 with a reasoning parser), the rest as the
    /// answer; 0 (default): no thinking. A request's thinking budget beats it.
    #[serde(default)]
    pub reasoning_share: f64,
    /// Share of the requests with `tools` (and `tool_choice` auto or absent) whose turn ends
    /// in a tool call, drawn from a hash of the prompt's token ids; 0 (default): none.
    #[serde(default)]
    pub tool_call_share: f64,

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
    /// The vision encoder's time per image token of an image not in the prefix cache,
    /// microseconds (`docs/images.md`); 0: images cost only their prompt tokens.
    #[serde(default)]
    pub vision_token_us: f64,
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

impl SimConfig {
    /// Every name the model is served under: `model_name`, then the aliases.
    pub fn served_names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.model_name.as_str())
            .chain(self.model_aliases.iter().map(String::as_str))
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            host: "127.0.0.1".to_string(),
            port: 0,
            model_name: "llm-sim".to_string(),
            model_aliases: Vec::new(),
            tokenizer: None,
            tokenizer_config: None,
            max_model_len: 262_144,
            default_max_tokens: 256,
            reasoning_share: 0.0,
            tool_call_share: 0.0,
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            block_size: 16,
            num_gpu_blocks: 65_536,
            enable_prefix_caching: true,
            step_fixed_us: 1_000.0,
            prefill_token_us: 0.25,
            attention_pair_us: 0.0,
            vision_token_us: 0.0,
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
    "llama-3.1-8b-h100",
    "qwen3-0.6b-h100",
    "llama3-70b-h100x4",
    "qwen3-32b-a100x2",
    "qwen2.5-vl-7b-h100",
];

impl SimConfig {
    /// A named preset. `fast` is [`SimConfig::default`]. The one-H100 presets are fitted to
    /// published figures (the §14 figures of docs/llm-sim.md, Presets: sources, fits and the
    /// resulting TTFT/TPOT next to the published ones). The multi-GPU ones are roofline estimates: fixed step
    /// = weight bytes / HBM bandwidth (+ ~20%, + all-reduce), prefill = 2 × parameters FLOPs
    /// per token at ~50% of the BF16 peak, attention scaled from the 8B figure by FLOPs per
    /// token pair, decode = ~10 µs per sequence + KV bytes per token / bandwidth, KV blocks =
    /// (90% of HBM − weights) / KV bytes per token / 16.
    pub fn preset(name: &str) -> Option<SimConfig> {
        match name {
            "fast" => Some(SimConfig::default()),
            _ => Self::one_gpu_preset(name).or_else(|| Self::multi_gpu_preset(name)),
        }
    }

    /// The one-H100 presets, fitted to published figures.
    fn one_gpu_preset(name: &str) -> Option<SimConfig> {
        let base = SimConfig::default();
        match name {
            // Qwen3-8B BF16, one H100 SXM. §14 figures (docs/llm-sim.md): fixed 6.5 ms (vLLM TPOT p50 at
            // concurrency 1-4), attention 0.0012 us per pair, decode 5 us per sequence +
            // 0.08 us per context token; prefill 20.4 us per token fitted to its step times
            // (512 tokens -> 12 ms, 4,096 -> 84 ms: the model gives 10.6 and 93.7 ms).
            // KV: 36 layers x 8 KV heads x 128 x 2 x 2 B = 144 KiB per token;
            // (72 GB - 16.4 GB) / 144 KiB / 16 -> ~23.5k blocks.
            "qwen3-8b-h100" => Some(SimConfig {
                model_name: "Qwen/Qwen3-8B".to_string(),
                max_model_len: 131_072,
                max_num_seqs: 256,
                max_num_batched_tokens: 8192,
                num_gpu_blocks: 23_500,
                step_fixed_us: 6_500.0,
                prefill_token_us: 20.4,
                attention_pair_us: 0.0012,
                decode_seq_us: 5.0,
                decode_ctx_token_us: 0.08,
                ..base
            }),
            // Llama-3.1-8B-Instruct BF16, one H100. BLIS (inference-sim defaults.yaml, vLLM
            // 0.8.4, TP 1): step 5,753 us, 6.0 us per decode token, 29,205 KV blocks; prefill,
            // attention and context terms as Qwen3-8B (the §14 figures of docs/llm-sim.md give them for both models;
            // BLIS's 17.3 us per prefill token belongs to its additive model and cannot move
            // into a max(fixed, prefill) one).
            "llama-3.1-8b-h100" => Some(SimConfig {
                model_name: "meta-llama/Llama-3.1-8B-Instruct".to_string(),
                max_model_len: 131_072,
                max_num_seqs: 256,
                max_num_batched_tokens: 8192,
                num_gpu_blocks: 29_205,
                step_fixed_us: 5_753.0,
                prefill_token_us: 20.4,
                attention_pair_us: 0.0012,
                decode_seq_us: 6.0,
                decode_ctx_token_us: 0.08,
                ..base
            }),
            // Qwen3-0.6B BF16, one H100. §14 figures (docs/llm-sim.md): fixed 2.3 ms (vLLM TPOT 2.39 ms at
            // 16 req/s of 512/128, kvcached's H100 bench). Decode 12 us per sequence +
            // 0.062 us per context token: TPOT 2.39 -> 5.45 ms as the batch grows from ~5 to
            // ~66 sequences (the same bench at rate inf), 0.062 = 0.08 x its KV bytes per token
            // (28 x 8 x 128 x 2 x 2 B = 112 KiB) / Qwen3-8B's. Attention 0.0012 x (28 layers x
            // 16 heads) / (36 x 32). Prefill 5 us per token: an estimate (1.2 GFLOP per token at
            // ~25% of the BF16 peak), no published step time. (72 GB - 1.5 GB - ~4 GB of
            // activations) / 112 KiB / 16 -> ~36k blocks.
            "qwen3-0.6b-h100" => Some(SimConfig {
                model_name: "Qwen/Qwen3-0.6B".to_string(),
                max_model_len: 40_960,
                max_num_seqs: 256,
                max_num_batched_tokens: 8192,
                num_gpu_blocks: 36_000,
                step_fixed_us: 2_300.0,
                prefill_token_us: 5.0,
                attention_pair_us: 0.000_467,
                decode_seq_us: 12.0,
                decode_ctx_token_us: 0.062,
                ..base
            }),
            // Qwen2.5-VL-7B BF16, one H100: the text model as Qwen3-8B's preset (7.6B vs 8.2B
            // parameters, the same layer shapes but 28 layers: the same costs, a close fit) and
            // the vision encoder timed from vllm-project/vllm#41267 (vLLM 0.19.1, Qwen2.5-VL-7B
            // on an H100 80 GB: a 1080p image, 2,691 image tokens by the Qwen2-VL rule, took
            // 0.167 s of encoding): 0.167 s / 2,691 = 62 us per image token.
            "qwen2.5-vl-7b-h100" => Some(SimConfig {
                model_name: "Qwen/Qwen2.5-VL-7B-Instruct".to_string(),
                vision_token_us: 62.0,
                ..Self::one_gpu_preset("qwen3-8b-h100")?
            }),
            _ => None,
        }
    }

    /// The multi-GPU presets, roofline estimates.
    fn multi_gpu_preset(name: &str) -> Option<SimConfig> {
        let base = SimConfig::default();
        match name {
            // Llama-3.1-70B BF16 on 4 x H100 SXM, TP=4: 141 GB / 13.4 TB/s -> 10.5 ms, + all-reduce
            // and overheads -> 14 ms; 141 GFLOP/token at 4 x 495 TFLOP/s -> 71 us; attention
            // (80 layers x 64 heads vs 36 x 32, over 4 GPUs) -> 0.0013 us per pair; KV 320 KiB
            // per token (80 x 8 x 128 x 2 x 2 B) / 13.4 TB/s -> 0.0245 us per token of context;
            // (288 GB - 141 GB) / 320 KiB / 16 -> ~28k blocks.
            "llama3-70b-h100x4" => Some(SimConfig {
                model_name: "meta-llama/Llama-3.1-70B-Instruct".to_string(),
                max_model_len: 131_072,
                max_num_seqs: 256,
                max_num_batched_tokens: 8192,
                num_gpu_blocks: 28_000,
                step_fixed_us: 14_000.0,
                prefill_token_us: 71.0,
                attention_pair_us: 0.0013,
                decode_seq_us: 10.0,
                decode_ctx_token_us: 0.0245,
                ..base
            }),
            // Qwen3-32B BF16 on 2 x A100 80 GB, TP=2 (2 x 2.0 TB/s, 2 x 312 TFLOP/s):
            // 65.5 GB / 4 TB/s -> 16.4 ms, + overheads -> 20 ms; 65.5 GFLOP/token at 312 TFLOP/s
            // -> 210 us; attention (64 layers x 64 heads vs 36 x 32, A100 peak 312 vs 989
            // TFLOP/s, over 2 GPUs) -> 0.0068 us per pair; KV 256 KiB/token (64 x 8 x 128 x 2
            // x 2 B) / 4 TB/s -> 0.066 us per token of context;
            // (144 GB - 65.5 GB) / 256 KiB / 16 -> ~18.7k blocks.
            "qwen3-32b-a100x2" => Some(SimConfig {
                model_name: "Qwen/Qwen3-32B".to_string(),
                max_model_len: 40_960,
                max_num_seqs: 128,
                max_num_batched_tokens: 8192,
                num_gpu_blocks: 18_700,
                step_fixed_us: 20_000.0,
                prefill_token_us: 210.0,
                attention_pair_us: 0.0068,
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
        if !(0.0..=1.0).contains(&self.reasoning_share) {
            return Err("reasoning_share must be in [0, 1]".into());
        }
        if !(0.0..=1.0).contains(&self.tool_call_share) {
            return Err("tool_call_share must be in [0, 1]".into());
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
            ("vision_token_us", self.vision_token_us),
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
