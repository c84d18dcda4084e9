//! Other tools' result files, written from a run's records and summary (`--export`), so that
//! scripts and dashboards built on those tools read a request-sim run unchanged:
//!
//! - [`aiperf`]: AIPerf 0.13's `profile_export.jsonl` (one `MetricRecordInfo` per request),
//!   with [`aiperf_aggregate`] its `profile_export_aiperf.json` and `.csv`;
//! - [`inputs`]: AIPerf's `inputs.json`, the request bodies as sent (filled while the
//!   producers build them);
//! - [`vllm`]: the JSON `vllm bench serve --save-result --save-detailed` writes.
//!
//! What only request-sim measures (send drift, prompt exactness, server samples) stays in
//! request-sim's own files (`summary.json`, the records); these files hold only the other
//! tool's names, units and layout. Field meanings: `docs/coming-from-aiperf.md`.

pub mod aiperf;
pub mod aiperf_aggregate;
pub mod common;
pub mod inputs;
pub mod vllm;
pub mod write;

pub use common::{ExportKind, VLLM_BENCH_FILE};
pub use write::write_exports;
