//! What request-sim (the replay engine) and llm-sim (the simulated server) both need, so the
//! engine does not depend on the simulator:
//!
//! - [`util`]: deterministic hashing (SplitMix64) and a thread with its own tokio runtime;
//! - [`vocab`]: the built-in vocabulary (request-sim's prompt words, llm-sim's tokenizer);
//! - [`template`]: chat messages and `tools` as vLLM hands them to a chat template, and the
//!   template's Python-compatible `tojson`;
//! - [`routing`]: the routing policies of llm-sim's router and request-sim's offline analysis;
//! - [`buckets`]: vLLM V1's histogram bucket bounds (llm-sim's `/metrics`, request-sim's live
//!   client metrics);
//! - [`vision`]: the image token rule per model family and image sizes read from headers;
//! - [`kv_events`]: vLLM's KV cache events on the wire (llm-sim publishes them, request-sim
//!   reads real vLLM's).

pub mod buckets;
pub mod kv_events;
pub mod routing;
pub mod template;
pub mod util;
pub mod vision;
pub mod vocab;
