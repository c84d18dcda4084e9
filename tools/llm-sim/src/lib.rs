//! llm-sim: a simulated vLLM-like inference server (OpenAI chat, completions and Responses,
//! Anthropic Messages and TGI compatible).
//!
//! Start it in-process with [`start`] (on the current tokio runtime) or [`spawn_in_thread`] (its
//! own thread and runtime), or run the `llm-sim` binary. See `docs/llm-sim.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let server = llm_sim::start(llm_sim::SimConfig::default()).await?;
//! println!("listening on {}", server.base_url());
//! server.faults().update(|f| f.error_503_rate = 0.1)?;
//! server.shutdown().await;
//! # Ok(()) }
//! ```

pub mod api;
pub mod cache;
pub mod chat_shape;
pub mod config;
pub mod engine;
pub mod error;
pub mod faults;
pub mod kv_events;
pub mod metrics;
pub mod router;
pub mod server;
pub mod state;
pub mod timing;
pub mod tokenize;
pub mod word_cache;

/// Shared with request-sim (the `llm-common` crate); re-exported under their old paths.
pub use llm_common::{routing, util, vocab};

pub use config::{FaultConfig, SimConfig, PRESETS};
pub use error::{Error, Result};
pub use faults::FaultHandle;
pub use metrics::Metrics;
pub use router::{start_router, RouterConfig, SimRouter};
pub use server::{spawn_in_thread, start, start_cluster, SimServer, SimThread};
pub use tokenize::{BUILTIN_GENERATION_PROMPT_TOKENS, BUILTIN_TOKENS_PER_MESSAGE};
