//! The integration tests of llm-sim, one binary with a module per area (a single link of the
//! dependency tree instead of one per test file). Every server listens on 127.0.0.1.

mod apis;
mod cluster;
mod engine;
mod extras;
mod faults;
mod kv_events;
mod metrics;
mod parity;
mod presets;
mod router;
mod shapes;
// Helpers shared by the modules; not every module uses every helper.
#[allow(dead_code)]
mod support;
mod tokenizer;
mod trace_cache;
mod turns;
