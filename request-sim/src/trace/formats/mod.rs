//! Every trace format, one file each, and what they share.
//!
//! A format is one unit: its file declares a `registry::Format` — its facts (name, aliases,
//! block size, timestamps, rows or an agent corpus, sessions; `trace::model::FormatInfo`),
//! how its content is recognised, and its reader — and `registry.rs` lists it once
//! (`registry::ALL`, in recognition order). `open.rs` is the one front door: a path or a
//! reader is opened once, recognised from its head, and handed to its format's reader, giving
//! rows for the pipeline or an agent corpus. Nothing outside this folder names a format.
//!
//! - Row formats, one line → one row (`row::RawRow`): `mooncake.rs`, `bailian.rs`,
//!   `azure.rs` (also Azure 2024), `burstgpt.rs`, `generic.rs`, `messages.rs` (AIPerf-style
//!   chat rows); `parquet.rs` (Baseten's export and Mooncake columns, row group by row
//!   group); `servegen.rs` (a ServeGen directory, a workload generated row by row).
//!   `rows.rs` reads capped lines (plain, gzip, zstd, bzip2) and calls the format's parser;
//!   `lines.rs` reads one capped line; `fields.rs` holds the shared field checks.
//! - Agent corpora, read whole into a `trace::model::Corpus`: `weka.rs` (JSON files or a
//!   directory), `copilot.rs` (GitHub Copilot sessions, a `date=` directory of shards), and the
//!   JSONL ones `tracelab.rs`, `dynamo.rs`, `dag.rs`, whose lines `agent_jsonl.rs` collects;
//!   `agents.rs` answers "is this path an agent corpus" and loads one.
//! - `log/`: request logs (OpenAI-format, LiteLLM, OpenTelemetry GenAI spans, `messages`
//!   traces), the source `request-sim convert` makes traces from.
//! - `reasoning_fields.rs`: a row's recorded thinking length and thinking budget, under the
//!   spellings real logs use (read by `messages.rs`).
//! - `write.rs`: a trace written as JSONL (`transform`, `synthesize`, `convert`);
//!   `weka_write.rs`: an agent corpus written as a Weka directory (`transform`).

pub(crate) mod agent_fields;
pub mod agent_jsonl;
pub mod agents;
pub(crate) mod azure;
pub(crate) mod bailian;
pub(crate) mod burstgpt;
pub mod copilot;
pub(crate) mod dag;
pub(crate) mod dynamo;
pub(crate) mod fields;
pub(crate) mod generic;
pub(crate) mod images;
pub(crate) mod lines;
pub mod log;
pub(crate) mod messages;
pub(crate) mod mooncake;
pub(crate) mod open;
pub(crate) mod parquet;
pub(crate) mod reasoning_fields;
pub mod registry;
pub(crate) mod rows;
pub(crate) mod servegen;
pub(crate) mod tracelab;
pub(crate) mod unit;
pub mod weka;
pub mod weka_write;
pub mod write;
