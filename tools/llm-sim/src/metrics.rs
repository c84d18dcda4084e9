//! Counters and gauges of one server, rendered as Prometheus text on `GET /metrics` with vLLM's
//! metric names where vLLM has one (`vllm:...`) and `llm_sim:...` for the rest.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
    pub requests_finished: AtomicU64,
    pub requests_aborted: AtomicU64,
    pub preemptions: AtomicU64,
    pub engine_steps: AtomicU64,
    /// Simulated time of all steps, microseconds.
    pub engine_sim_us: AtomicU64,
    /// How late the engine woke up after its steps' deadlines, summed, microseconds.
    pub engine_lag_us: AtomicU64,
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

    pub fn count_fault(&self, kind: FaultKind) {
        self.faults[kind as usize].fetch_add(1, Relaxed);
    }

    /// Prometheus text exposition.
    pub fn render(&self, model: &str) -> String {
        let mut out = String::with_capacity(4096);
        let m = model.replace('\\', "\\\\").replace('"', "\\\"");
        let lbl = format!("model_name=\"{m}\"");
        let mut gauge = |name: &str, help: &str, v: String| {
            let _ = write!(
                out,
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
        gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            format!("{:.6}", self.kv_usage_ppm.load(Relaxed) as f64 / 1e6),
        );
        let counters: [(&str, &str, &AtomicU64); 8] = [
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
            let extra = if name == "vllm:request_success" {
                ",finished_reason=\"length\""
            } else {
                ""
            };
            let _ = write!(
                out,
                "# HELP {name}_total {help}\n# TYPE {name}_total counter\n{name}_total{{{lbl}{extra}}} {}\n",
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
        out
    }
}
