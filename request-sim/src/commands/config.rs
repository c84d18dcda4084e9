//! `config`: what run files are (`config schema`: their JSON schema).

use crate::cli::{ConfigAction, ConfigArgs};
use crate::Result;

/// `config schema`: the schema of a `replay --config` file on standard output.
pub fn config(args: ConfigArgs) -> Result<u8> {
    match args.action {
        ConfigAction::Schema => {
            let text = serde_json::to_string_pretty(&crate::runfile::schema::replay_schema())
                .map_err(|e| crate::Error::internal(format!("the schema: {e}")))?;
            crate::util::print_stdout(&format!("{text}\n"))?;
            Ok(0)
        }
    }
}
