//! Every trace format's reader, one file each, and what they share.
//!
//! - Flat formats, one line → one row (`row::RawRow`): `mooncake.rs`, `bailian.rs`, `azure.rs`
//!   (also Azure 2024), `burstgpt.rs`, `generic.rs`, `messages.rs` (AIPerf-style chat rows).
//!   Each imports only `trace::model`, `trace::row`, `trace::error` and `fields.rs` (the
//!   shared field checks). `rows.rs` reads capped lines (plain, gzip, zstd, bzip2) and calls
//!   the format's parser; `detect.rs` picks a format from the first data line; `lines.rs`
//!   reads one capped line.
//! - Agent corpora, read whole into a `trace::model::Corpus`: `weka.rs` (JSON files or a
//!   directory), and the JSONL ones `tracelab.rs`, `dynamo.rs`, `dag.rs`, which
//!   `agent_jsonl.rs` reads line by line and dispatches; `copilot.rs` (GitHub Copilot
//!   sessions, a `date=` directory of shards, read one line at a time); `agents.rs` picks and
//!   loads one.
//! - Synthesized: `servegen.rs` (a ServeGen directory of arrival patterns and length PMFs,
//!   generated row by row, fed to the same pipeline through `rows.rs`).
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
pub mod detect;
pub(crate) mod dynamo;
pub(crate) mod fields;
pub(crate) mod generic;
pub(crate) mod images;
pub(crate) mod lines;
pub mod log;
pub(crate) mod messages;
pub(crate) mod mooncake;
pub(crate) mod reasoning_fields;
pub(crate) mod rows;
pub(crate) mod servegen;
pub(crate) mod tracelab;
pub mod weka;
pub mod weka_write;
pub mod write;
