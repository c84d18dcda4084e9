//! The flags of run files (`--config`, docs/config.md): `RunFileArgs`, flattened first into
//! `ReplayArgs`, takes every setting out of clap's matches for the summary; the `config` and
//! `experiment` commands; the replay's keys (`crate::runfile` reads files against them).

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `request-sim experiment`.
#[derive(Debug, Clone, Args)]
pub struct ExperimentArgs {
    /// The experiment file (TOML).
    pub file: PathBuf,
    /// Directory of the experiment (default: the file's `[experiment] dir`, else
    /// results/experiment-<UTC time>).
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// `request-sim config`.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub action: ConfigAction,
}

/// What `config` does.
#[derive(Debug, Clone, Subcommand)]
pub enum ConfigAction {
    /// Print the JSON schema of a `replay --config` file (tables: the --help headings; keys:
    /// the long flags), for editors to complete and check run files.
    Schema {
        /// The schema of an experiment file (`request-sim experiment FILE`) instead.
        #[arg(long)]
        experiment: bool,
    },
}

/// The keys of a run file for `replay` (and the `client` binary): [`super::ReplayArgs`]'s flags
/// (`crate::runfile`, docs/config.md).
pub fn replay_keys() -> crate::runfile::Keys {
    crate::runfile::Keys::of(<super::ReplayArgs as clap::Args>::augment_args(
        clap::Command::new("replay"),
    ))
}

/// The run file's own flags (under the `Config file` heading, not keys of a file), and the
/// settings clap matched, for the summary.
#[derive(Debug, Clone, Default)]
pub struct RunFileArgs {
    /// `--config`: the file the settings came from (already merged into the flags).
    pub config: Option<PathBuf>,
    /// `--accept-changed-trace`.
    pub accept_changed_trace: bool,
    /// Every replay setting as matched.
    pub settings: crate::runfile::Settings,
}

/// The run file's flags as clap declares them.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = crate::runfile::keys::FILE_HEADING)]
struct RunFileFlags {
    /// Read settings from this file: TOML whose tables are the headings below ([schedule]
    /// scale-factor = 2) and whose keys are the long flags, or a run's summary.json (re-runs
    /// that run: the same settings and seed; its output paths are not re-used). Flags given
    /// on the command line win. `request-sim config schema` prints its JSON schema
    /// (docs/config.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Re-running from a summary: run even when the trace file's checksum differs from the
    /// one the summary recorded (refused without this flag).
    #[arg(long, requires = "config")]
    accept_changed_trace: bool,
}

impl clap::FromArgMatches for RunFileArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let flags = <RunFileFlags as clap::FromArgMatches>::from_arg_matches(m)?;
        Ok(RunFileArgs {
            config: flags.config,
            accept_changed_trace: flags.accept_changed_trace,
            settings: crate::runfile::Settings::from_matches(m, &replay_keys()),
        })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = RunFileArgs::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for RunFileArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        <RunFileFlags as clap::Args>::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        <RunFileFlags as clap::Args>::augment_args_for_update(cmd)
    }
}
