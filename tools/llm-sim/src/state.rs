//! The state one simulated server shares between its connections (configuration, tokenizer,
//! engine handle, metrics, fault switches): what the HTTP layer (`server.rs`), the request
//! handlers (`api/`) and the built-in router (`router.rs`) all read. Its own module so that
//! the handlers need not import the server that calls them.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderValue;

use crate::config::SimConfig;
use crate::engine::EngineHandle;
use crate::faults::FaultHandle;
use crate::metrics::Metrics;
use crate::tokenize::Tokenizer;

/// State shared by all connections of one server.
pub struct AppState {
    pub cfg: SimConfig,
    /// The model name as a JSON string literal (quoted, escaped).
    pub model_json: String,
    pub tokenizer: Tokenizer,
    pub engine: EngineHandle,
    pub metrics: Arc<Metrics>,
    pub faults: FaultHandle,
    pub req_counter: AtomicU64,
    pub conn_counter: AtomicU64,
    pub id_seed: u64,
    pub started: u64,
    /// `x-inference-pod` value: `llm-sim-INDEX` (the engine's index in a cluster).
    pub pod: HeaderValue,
    /// `x-inference-port` value: the bound port.
    pub port_header: HeaderValue,
    /// When the simulated readiness delay ends.
    pub ready_at: std::time::Instant,
    /// One long request at a time is rendered and tokenized off the runtime thread, in arrival
    /// order ([`crate::api::parse_job_off_runtime`]).
    pub tokenize_turn: tokio::sync::Semaphore,
}

impl AppState {
    /// False during the simulated readiness delay (`SimConfig::ready_delay_ms`).
    pub fn is_ready(&self) -> bool {
        std::time::Instant::now() >= self.ready_at
    }

    /// Wall-clock length of a simulated timer of `ms` milliseconds (divided by the speedup).
    pub fn wall(&self, ms: u64) -> Duration {
        Duration::from_millis(ms).div_f64(self.cfg.speedup)
    }
}
