//! Statistics of a run, computed from its records: what the renderings of [`crate::report`]
//! show. Nothing here formats text or writes files.
//!
//! - [`samples`]: mean / median / std / linear-interpolation percentiles (numpy semantics).
//! - [`config`]: [`ReportConfig`], what to compute.
//! - [`run_info`]: [`RunInfo`], what was run (settings, trace facts, start-up times).
//! - [`per_record`]: what one record says on its own (TPOT, end time, error kind).
//! - [`accumulator`]: the streaming [`Accumulator`] over records; [`records`]: the summary of
//!   a saved records file or of records in memory.
//! - [`summary`]: the [`Summary`] the accumulator produces; [`latency`]: its latency statistics
//!   with vLLM's flat keys.
//! - [`slo`]: goodput SLO parsing; [`sessions`]: the sessions section; [`agents`]: the agent
//!   section (agent corpora); [`models`]: the per-model rows (model fleets).
//! - [`images`]: image requests, the exactness check split into text and images.
//! - [`reasoning`]: thinking, answer and tool calls apart (reasoning models, tool calls).
//! - [`merge`]: several shards' records as one run, with each shard's send drift.
//! - [`window`]: `--measure-window` (a span of the run, or the steady span found).
//! - [`ideal`]: the trace-ideal hit ratio over the requests the server processed.
//! - [`headline`]: the headline metrics; [`inference`]: intervals, Welch's t, the bootstrap;
//!   [`repeats`]: a repeat set's intervals; [`compare`]: two runs' verdicts.
//!
//! Metric definitions: `docs/metrics.md`.

pub mod accumulator;
pub mod agents;
pub mod compare;
pub mod config;
pub mod headline;
pub mod ideal;
pub mod images;
pub mod inference;
pub mod latency;
pub mod merge;
pub mod models;
pub mod per_record;
pub mod reasoning;
pub mod records;
pub mod repeats;
pub mod run_info;
pub mod samples;
pub mod sessions;
pub mod slices;
pub mod slo;
pub mod summary;
pub mod window;

pub use accumulator::Accumulator;
pub use config::ReportConfig;
pub use latency::{Latencies, Metric};
pub use records::{no_records, report_from_records, summarize_records};
pub use run_info::{
    file_stamp, now_rfc3339, ClientCpu, PromptVerification, RunEnd, RunInfo, RunInternals,
    RunPrompts, RunServer, StartupTimes,
};
pub use samples::{parse_percentile, MetricStats, Percentiles, DEFAULT_PERCENTILES};
pub use slo::Slo;
pub use summary::Summary;
pub use window::MeasureWindow;
