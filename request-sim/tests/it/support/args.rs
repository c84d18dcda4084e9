//! Command lines as the tests write them, parsed by the real parser: the only place (besides
//! the parser's own tests) where the tests call `try_parse_from` or build a `ReplayConfig`, so a
//! change of the settings' shape is absorbed here.

use std::path::Path;

use clap::Parser;
use request_sim::cli::{Cli, Command, ReplayArgs, SweepArgs};
use request_sim::compat::blitz::{self, ClientCli};
use request_sim::config::ReplayConfig;

/// `request-sim ARGS...` (the subcommand first) through the real command line.
fn parse(args: &[&str]) -> Result<Command, clap::Error> {
    let argv = std::iter::once("request-sim").chain(args.iter().copied());
    Cli::try_parse_from(argv).map(|cli| cli.command)
}

/// The flags of `request-sim replay ARGS...`; panics when the command line does not parse.
pub fn replay_args(args: &[&str]) -> ReplayArgs {
    match parse(&[&["replay"], args].concat()) {
        Ok(Command::Replay(a)) => *a,
        Ok(_) => unreachable!("replay parses as replay"),
        Err(e) => panic!("request-sim replay {args:?}: {e}"),
    }
}

/// The flags of `request-sim replay ARGS...`, or the parser's refusal.
pub fn try_replay_args(args: &[&str]) -> Result<ReplayArgs, clap::Error> {
    match parse(&[&["replay"], args].concat())? {
        Command::Replay(a) => Ok(*a),
        _ => unreachable!("replay parses as replay"),
    }
}

/// The validated settings of `request-sim replay ARGS...` (the command line must parse; the
/// validation's refusal is returned).
pub fn config(args: &[&str]) -> request_sim::Result<ReplayConfig> {
    ReplayConfig::from_args(replay_args(args))
}

/// The validated settings of the `client` binary's command line `client ARGS...` (the
/// blitz-serving trace-replayer's flags and defaults); panics on any refusal.
pub fn client_config(args: &[&str]) -> ReplayConfig {
    let argv = std::iter::once("client").chain(args.iter().copied());
    let cli = ClientCli::try_parse_from(argv).unwrap_or_else(|e| panic!("client {args:?}: {e}"));
    blitz::config(cli.args).unwrap_or_else(|e| panic!("client {args:?}: {e}"))
}

/// The flags of `request-sim sweep ARGS...`, or the parser's refusal.
pub fn try_sweep_args(args: &[&str]) -> Result<SweepArgs, clap::Error> {
    match parse(&[&["sweep"], args].concat())? {
        Command::Sweep(a) => Ok(*a),
        _ => unreachable!("sweep parses as sweep"),
    }
}

/// The flags of `request-sim sweep ARGS...`; panics when the command line does not parse.
pub fn sweep_args(args: &[&str]) -> SweepArgs {
    try_sweep_args(args).unwrap_or_else(|e| panic!("request-sim sweep {args:?}: {e}"))
}

/// Common flags of a replay against `endpoint` writing into `dir` (`records.jsonl`, replaced
/// when there: `--overwrite`): no start-up calls to the server (model name and chat overhead
/// given), quiet, fixed seed, no core pinning, no server-side tokenizing or metrics scraping
/// (the tests count every request the server saw).
pub fn base_args(endpoint: &str, trace: &Path, dir: &Path) -> Vec<String> {
    vec![
        "--endpoint".into(),
        endpoint.into(),
        "--model-name".into(),
        "llm-sim".into(),
        "--chat-overhead".into(),
        "0".into(),
        // Only generation requests reach the server (the tests count them).
        "--no-server-tokenize".into(),
        // ... and no `GET /version` to learn whether the built-in words are exact.
        "--allow-inexact-prompts".into(),
        "--dataset-path".into(),
        trace.display().to_string(),
        "--output-path".into(),
        dir.join("records.jsonl").display().to_string(),
        // Tests run again into their directory: each run replaces the last one's records.
        "--overwrite".into(),
        "--quiet".into(),
        "--seed".into(),
        "7".into(),
        "--no-pin".into(),
        "--threads".into(),
        "2".into(),
        // These tests count every request the server saw; scraping /metrics would add some.
        "--no-server-metrics".into(),
    ]
}

/// The `&str`s of owned arguments.
pub fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
