//! The analysis of a trace (`request-sim analyze`): rates, lengths, sessions, prefix-cache hit
//! ratios (`trace.rs`), the same for an agent corpus (`agents.rs`), and the ideal prefix
//! cache a replay compares its hits with (`ideal.rs`). It reads traces through
//! `crate::trace`; its renderings are `crate::report` (`analysis.rs`, `against.rs`).

pub mod agents;
pub mod ideal;
pub mod trace;

pub use ideal::IdealCache;
pub use trace::{
    analyze, ideal_prefix_hits, Analysis, AnalyzeOptions, RoutingAnalysis, RoutingOptions,
    RoutingPoint,
};
