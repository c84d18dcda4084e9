//! Starting llm-sim for a test: in its own thread on 127.0.0.1, stopped when dropped.

use llm_sim::{FaultConfig, SimConfig, SimThread};

/// llm-sim with `cfg`.
pub fn start_sim(cfg: SimConfig) -> SimThread {
    llm_sim::spawn_in_thread(cfg).unwrap_or_else(|e| panic!("start llm-sim: {e}"))
}

/// llm-sim with its defaults.
pub fn default_sim() -> SimThread {
    start_sim(SimConfig::default())
}

/// llm-sim with its defaults and these faults switched on from the start.
pub fn faulty_sim(faults: FaultConfig) -> SimThread {
    start_sim(SimConfig {
        faults,
        ..SimConfig::default()
    })
}
