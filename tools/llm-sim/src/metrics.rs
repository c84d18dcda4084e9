//! Counters and gauges of one server, rendered as Prometheus text on `GET /metrics` with vLLM's
//! metric names where vLLM has one (`vllm:...`) and `llm_sim:...` for the rest.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use llm_common::buckets::{
    ITERATION_TOKEN_BUCKETS, ITL_BUCKETS, REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS,
};

use crate::config::SimConfig;

/// 1-2-5 bounds up to 5e9; token-count histograms render those up to `max_model_len`, as vLLM's
/// `build_1_2_5_buckets(max_model_len)` does.
const ONE_TWO_FIVE: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5,
    5e5, 1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8, 5e8, 1e9, 2e9, 5e9,
];

/// One Prometheus histogram: per-bucket (not cumulative) counts, a sum and a count.
#[derive(Debug)]
pub struct Hist {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Hist {
    fn new(bounds: &'static [f64]) -> Self {
        Hist {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|&b| v <= b) {
            self.counts[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }

    /// Writes `_bucket`/`_sum`/`_count` lines; `limit` hides bounds above it (the cumulative
    /// counts stay exact because no observation exceeds it).
    fn render(&self, out: &mut String, name: &str, help: &str, lbl: &str, limit: f64) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cum += c;
            if *b <= limit {
                let _ = writeln!(out, "{name}_bucket{{{lbl},le=\"{b:?}\"}} {cum}");
            }
        }
        let _ = writeln!(out, "{name}_bucket{{{lbl},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{lbl}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{lbl}}} {}", self.count);
    }
}

/// The request-level histograms of vLLM V1, fed by the engine.
#[derive(Debug)]
pub struct Histograms {
    pub ttft: Hist,
    pub itl: Hist,
    /// Per request: its mean time per output token after the first.
    pub request_tpot: Hist,
    pub e2e: Hist,
    pub queue: Hist,
    pub prefill: Hist,
    pub decode: Hist,
    pub inference: Hist,
    pub prompt_tokens: Hist,
    pub generation_tokens: Hist,
    pub iteration_tokens: Hist,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            ttft: Hist::new(TTFT_BUCKETS),
            itl: Hist::new(ITL_BUCKETS),
            request_tpot: Hist::new(ITL_BUCKETS),
            e2e: Hist::new(REQUEST_LATENCY_BUCKETS),
            queue: Hist::new(REQUEST_LATENCY_BUCKETS),
            prefill: Hist::new(REQUEST_LATENCY_BUCKETS),
            decode: Hist::new(REQUEST_LATENCY_BUCKETS),
            inference: Hist::new(REQUEST_LATENCY_BUCKETS),
            prompt_tokens: Hist::new(ONE_TWO_FIVE),
            generation_tokens: Hist::new(ONE_TWO_FIVE),
            iteration_tokens: Hist::new(ITERATION_TOKEN_BUCKETS),
        }
    }
}

/// Timestamps of one finished request, seconds relative to its arrival at the engine.
#[derive(Clone, Copy, Debug)]
pub struct RequestTimes {
    pub scheduled: f64,
    pub first_token: f64,
    pub last_token: f64,
    pub finished: f64,
    pub prompt_tokens: u32,
    pub generation_tokens: u32,
}

/// HTTP statuses counted individually; anything else lands in "other".
pub const STATUSES: [u16; 10] = [200, 400, 401, 404, 405, 413, 422, 429, 500, 503];

/// Fault kinds counted in `llm_sim:faults_injected_total{kind=...}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    Status,
    Reset,
    Stall,
    Malformed,
    MissingUsage,
    SlowAccept,
}

const FAULT_NAMES: [&str; 6] = [
    "error_status",
    "reset",
    "stall",
    "malformed",
    "missing_usage",
    "slow_accept",
];

#[derive(Debug, Default)]
pub struct Metrics {
    pub running: AtomicU64,
    pub waiting: AtomicU64,
    /// KV cache usage in parts per million.
    pub kv_usage_ppm: AtomicU64,
    pub prefix_queries: AtomicU64,
    pub prefix_hits: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub generation_tokens: AtomicU64,
    /// Requests that ended at their length limit (`finished_reason="length"`).
    pub requests_finished: AtomicU64,
    /// Requests that ended by a simulated EOS (`finished_reason="stop"`).
    pub requests_stopped: AtomicU64,
    /// Requests handed to the engine and not yet scheduled (the bounded waiting queue).
    pub unscheduled: AtomicU64,
    /// KV event batches published (`--kv-events-endpoint`).
    pub kv_event_batches: AtomicU64,
    pub requests_aborted: AtomicU64,
    pub preemptions: AtomicU64,
    pub engine_steps: AtomicU64,
    /// Simulated time of all steps, microseconds.
    pub engine_sim_us: AtomicU64,
    /// How late the engine woke up after its steps' deadlines, summed, microseconds.
    pub engine_lag_us: AtomicU64,
    /// Request-level histograms (one lock taken by the engine per token batch and per render).
    pub hist: Mutex<Histograms>,
    http_status: [AtomicU64; STATUSES.len() + 1],
    faults: [AtomicU64; FAULT_NAMES.len()],
}

impl Metrics {
    pub fn count_status(&self, status: u16) {
        let i = STATUSES
            .iter()
            .position(|&s| s == status)
            .unwrap_or(STATUSES.len());
        self.http_status[i].fetch_add(1, Relaxed);
    }

    pub fn status_count(&self, status: u16) -> u64 {
        let i = STATUSES
            .iter()
            .position(|&s| s == status)
            .unwrap_or(STATUSES.len());
        self.http_status[i].load(Relaxed)
    }

    /// Records a request that finished normally (vLLM observes only those).
    pub fn observe_finished(&self, t: &RequestTimes) {
        let Ok(mut h) = self.hist.lock() else {
            return;
        };
        h.ttft.observe(t.first_token);
        h.e2e.observe(t.finished);
        h.queue.observe(t.scheduled);
        h.prefill.observe(t.first_token - t.scheduled);
        h.decode.observe(t.last_token - t.first_token);
        h.inference.observe(t.last_token - t.scheduled);
        h.prompt_tokens.observe(f64::from(t.prompt_tokens));
        h.generation_tokens.observe(f64::from(t.generation_tokens));
        if t.generation_tokens > 1 {
            h.request_tpot
                .observe((t.last_token - t.first_token) / f64::from(t.generation_tokens - 1));
        }
    }

    pub fn count_fault(&self, kind: FaultKind) {
        self.faults[kind as usize].fetch_add(1, Relaxed);
    }

    /// Prometheus text exposition, every sample labelled with the model and this engine's index
    /// (vLLM's `engine` label; several engines in one process each render their own).
    pub fn render(&self, cfg: &SimConfig, engine: usize) -> String {
        let mut out = String::with_capacity(16384);
        let m = cfg.model_name.replace('\\', "\\\\").replace('"', "\\\"");
        let lbl = format!("model_name=\"{m}\",engine=\"{engine}\"");
        self.render_gauges(&mut out, cfg, &lbl);
        self.render_counters(&mut out, &lbl);
        self.render_histograms(&mut out, cfg, &lbl);
        self.render_responses_and_faults(&mut out, &lbl);
        out
    }

    /// Scheduler and KV-cache gauges, and `cache_config_info`.
    fn render_gauges(&self, out: &mut String, cfg: &SimConfig, lbl: &str) {
        let mut gauge = |name: &str, help: &str, v: String| {
            let _ = write!(
                *out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name}{{{lbl}}} {v}\n"
            );
        };
        gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            self.running.load(Relaxed).to_string(),
        );
        gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            self.waiting.load(Relaxed).to_string(),
        );
        let usage = format!("{:.6}", self.kv_usage_ppm.load(Relaxed) as f64 / 1e6);
        gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            usage.clone(),
        );
        gauge(
            "vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage (older name of kv_cache_usage_perc).",
            usage,
        );
        gauge(
            "llm_sim:speedup",
            "Simulated seconds per wall-clock second (--speedup): every time on this page is simulated.",
            cfg.speedup.to_string(),
        );
        let _ = write!(
            out,
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig.\n# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{block_size=\"{}\",cache_dtype=\"auto\",enable_prefix_caching=\"{}\",engine=\"{}\",num_cpu_blocks=\"None\",num_gpu_blocks=\"{}\"}} 1.0\n",
            cfg.block_size,
            if cfg.enable_prefix_caching { "True" } else { "False" },
            cfg.engine_index,
            cfg.num_gpu_blocks,
        );
    }

    /// vLLM's counters and llm-sim's own engine counters.
    fn render_counters(&self, out: &mut String, lbl: &str) {
        let counters: [(&str, &str, &AtomicU64); 10] = [
            (
                "vllm:gpu_prefix_cache_queries",
                "GPU prefix cache queries, in terms of number of queried tokens (older name).",
                &self.prefix_queries,
            ),
            (
                "vllm:gpu_prefix_cache_hits",
                "GPU prefix cache hits, in terms of number of cached tokens (older name).",
                &self.prefix_hits,
            ),
            (
                "vllm:prefix_cache_queries",
                "Prefix cache queries, in terms of number of queried tokens.",
                &self.prefix_queries,
            ),
            (
                "vllm:prefix_cache_hits",
                "Prefix cache hits, in terms of number of cached tokens.",
                &self.prefix_hits,
            ),
            (
                "vllm:prompt_tokens",
                "Number of prefill tokens processed.",
                &self.prompt_tokens,
            ),
            (
                "vllm:generation_tokens",
                "Number of generation tokens processed.",
                &self.generation_tokens,
            ),
            (
                "vllm:num_preemptions",
                "Cumulative number of preemptions from the engine.",
                &self.preemptions,
            ),
            (
                "llm_sim:requests_aborted",
                "Requests cancelled by the client or cut off by shutdown.",
                &self.requests_aborted,
            ),
            (
                "llm_sim:engine_steps",
                "Engine steps executed.",
                &self.engine_steps,
            ),
            (
                "vllm:request_success",
                "Count of successfully processed requests.",
                &self.requests_finished,
            ),
        ];
        for (name, help, v) in counters {
            if name == "vllm:request_success" {
                let _ = write!(
                    out,
                    "# HELP {name}_total {help}\n# TYPE {name}_total counter\n{name}_total{{{lbl},finished_reason=\"length\"}} {}\n{name}_total{{{lbl},finished_reason=\"stop\"}} {}\n{name}_total{{{lbl},finished_reason=\"abort\"}} {}\n",
                    v.load(Relaxed),
                    self.requests_stopped.load(Relaxed),
                    self.requests_aborted.load(Relaxed)
                );
                continue;
            }
            let _ = write!(
                out,
                "# HELP {name}_total {help}\n# TYPE {name}_total counter\n{name}_total{{{lbl}}} {}\n",
                v.load(Relaxed)
            );
        }
        for (name, help, v) in [
            (
                "llm_sim:engine_step_seconds_total",
                "Simulated time of all engine steps.",
                &self.engine_sim_us,
            ),
            (
                "llm_sim:engine_lag_seconds_total",
                "Sum over steps of how late the engine woke after the step's deadline (timer granularity and CPU contention).",
                &self.engine_lag_us,
            ),
        ] {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{{lbl}}} {:.6}\n",
                v.load(Relaxed) as f64 / 1e6
            );
        }
    }

    /// vLLM's request-level and per-step histograms.
    fn render_histograms(&self, out: &mut String, cfg: &SimConfig, lbl: &str) {
        if let Ok(h) = self.hist.lock() {
            let tokens_limit = f64::from(cfg.max_model_len);
            let all = f64::INFINITY;
            for (hist, name, help, limit) in [
                (
                    &h.ttft,
                    "vllm:time_to_first_token_seconds",
                    "Histogram of time to first token in seconds.",
                    all,
                ),
                (
                    &h.itl,
                    "vllm:inter_token_latency_seconds",
                    "Histogram of inter-token latency in seconds.",
                    all,
                ),
                (
                    &h.itl,
                    "vllm:time_per_output_token_seconds",
                    "Histogram of time per output token in seconds (older name of inter_token_latency_seconds, per token as in vLLM <= 0.10).",
                    all,
                ),
                (
                    &h.request_tpot,
                    "vllm:request_time_per_output_token_seconds",
                    "Histogram of time_per_output_token_seconds per request.",
                    all,
                ),
                (
                    &h.e2e,
                    "vllm:e2e_request_latency_seconds",
                    "Histogram of e2e request latency in seconds.",
                    all,
                ),
                (
                    &h.queue,
                    "vllm:request_queue_time_seconds",
                    "Histogram of time spent in WAITING phase for request.",
                    all,
                ),
                (
                    &h.inference,
                    "vllm:request_inference_time_seconds",
                    "Histogram of time spent in RUNNING phase for request.",
                    all,
                ),
                (
                    &h.prefill,
                    "vllm:request_prefill_time_seconds",
                    "Histogram of time spent in PREFILL phase for request.",
                    all,
                ),
                (
                    &h.decode,
                    "vllm:request_decode_time_seconds",
                    "Histogram of time spent in DECODE phase for request.",
                    all,
                ),
                (
                    &h.prompt_tokens,
                    "vllm:request_prompt_tokens",
                    "Number of prefill tokens processed.",
                    tokens_limit,
                ),
                (
                    &h.generation_tokens,
                    "vllm:request_generation_tokens",
                    "Number of generation tokens processed.",
                    tokens_limit,
                ),
                (
                    &h.iteration_tokens,
                    "vllm:iteration_tokens_total",
                    "Histogram of number of tokens per engine_step.",
                    all,
                ),
            ] {
                hist.render(out, name, help, lbl, limit);
            }
        }
    }

    /// `llm_sim:http_responses_total{status}` and `llm_sim:faults_injected_total{kind}`.
    fn render_responses_and_faults(&self, out: &mut String, lbl: &str) {
        let _ = writeln!(
            out,
            "# HELP llm_sim:http_responses_total HTTP responses by status code.\n# TYPE llm_sim:http_responses_total counter"
        );
        for (i, s) in STATUSES.iter().enumerate() {
            let _ = writeln!(
                out,
                "llm_sim:http_responses_total{{{lbl},status=\"{s}\"}} {}",
                self.http_status[i].load(Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "llm_sim:http_responses_total{{{lbl},status=\"other\"}} {}",
            self.http_status[STATUSES.len()].load(Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP llm_sim:faults_injected_total Faults injected by kind.\n# TYPE llm_sim:faults_injected_total counter"
        );
        for (i, k) in FAULT_NAMES.iter().enumerate() {
            let _ = writeln!(
                out,
                "llm_sim:faults_injected_total{{{lbl},kind=\"{k}\"}} {}",
                self.faults[i].load(Relaxed)
            );
        }
    }
}
