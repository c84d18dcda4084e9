//! Run files: `--config FILE` (TOML, or a run's own summary.json) merged under the command
//! line, the summary's `rerun` section, the checked-in example and schema, experiments.

mod config;
mod experiment;
mod rerun;
