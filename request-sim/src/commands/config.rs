//! `config`: what run files are (`config schema`: their JSON schema).

use crate::cli::{ConfigAction, ConfigArgs};
use crate::Result;

/// `config schema [--experiment]`: the schema of a `replay --config` file (or of an experiment
/// file) on standard output.
pub fn config(args: ConfigArgs) -> Result<u8> {
    match args.action {
        ConfigAction::Schema { experiment } => {
            let schema = if experiment {
                crate::runfile::schema::experiment_schema(&crate::cli::replay_keys())
            } else {
                crate::runfile::schema::replay_schema(&crate::cli::replay_keys())
            };
            let text = serde_json::to_string_pretty(&schema)
                .map_err(|e| crate::Error::internal(format!("the schema: {e}")))?;
            crate::util::print_stdout(&format!("{text}\n"))?;
            Ok(0)
        }
    }
}
