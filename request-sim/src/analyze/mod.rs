//! The analysis of a trace (`request-sim analyze`): rates, lengths, sessions, prefix-cache hit
//! ratios (`trace.rs`: the requests as compact [`Columns`], then `chains.rs`, `sessions.rs`,
//! `rates.rs`, `routing.rs`; the result types in `analysis.rs`), the same for an agent corpus (`agents.rs`), and the ideal prefix
//! cache a replay compares its hits with (`ideal.rs`). It reads traces through
//! `crate::trace`; its renderings are `crate::report` (`analysis.rs`, `against.rs`).

pub mod agents;
pub mod analysis;
mod chains;
pub mod ideal;
mod rates;
mod routing;
mod sessions;
pub mod trace;

pub use analysis::{
    Analysis, AnalyzeOptions, LengthStats, RoutingAnalysis, RoutingOptions, RoutingPoint,
};
pub use chains::ideal_prefix_hits;
pub use ideal::IdealCache;
pub use trace::{analyze, analyze_columns, read_columns, Columns};
