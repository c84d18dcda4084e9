//! A run as a file: `--config FILE` on every command that runs a replay, a run's own summary
//! as such a file (re-running it), and experiments of several runs in one file.
//!
//! The data flow: the file is [`read`] into values with their lines; [`argv`] turns them into
//! command-line words, checked by each flag's own value parser, placed before the user's own
//! words (so the command line wins); clap parses the whole; [`settings`] takes every flag's
//! resolved value from clap's matches back out, into the summary's `rerun` section. The keys
//! are clap's own flags ([`keys`]): a new flag is a new key, in the schema ([`schema`]) too.
//! [`experiment`] runs the points of an experiment file.

pub mod argv;
pub mod experiment;
pub mod keys;
pub mod read;
pub mod schema;
pub mod settings;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::Command;

pub use keys::{Key, Keys};
pub use settings::{trace_file, Rerun, Settings, TraceFile};

use crate::{Error, Result};

/// The summary's section that makes it a run file.
pub const RERUN: &str = "rerun";

/// `argv` of `request-sim SUBCOMMAND ...` with the words of `--config FILE` put in (see
/// [`expand`]); other subcommands, and command lines clap refuses, unchanged.
pub fn expand_cli(cli: &Command, argv: Vec<OsString>) -> Result<Vec<OsString>> {
    let sub = argv
        .get(1)
        .and_then(|s| s.to_str())
        .and_then(|s| cli.find_subcommand(s));
    match sub {
        Some(sub) if sub.get_arguments().any(|a| a.get_id() == "config") => expand(sub, argv, 2),
        _ => Ok(argv),
    }
}

/// `argv` with the words of its `--config FILE` inserted at `at` (after the program's name, and
/// the subcommand's), before the user's own: of a flag given on the command line the file's
/// value is dropped. A command line clap refuses is returned unchanged, for clap to say why.
pub fn expand(command: &Command, argv: Vec<OsString>, at: usize) -> Result<Vec<OsString>> {
    let at = at.min(argv.len());
    let user = command
        .clone()
        .no_binary_name(true)
        .try_get_matches_from(&argv[at..]);
    let m = match user {
        Ok(m) => m,
        // `--help`, `--version`: no file needed.
        Err(e) if !e.use_stderr() => return Ok(argv),
        // A flag that needs one the file gives (`--metrics-host` with the file's
        // `metrics-port`): read what there is; the whole is checked once merged.
        Err(_) => match command
            .clone()
            .no_binary_name(true)
            .ignore_errors(true)
            .try_get_matches_from(&argv[at..])
        {
            Ok(m) => m,
            Err(_) => return Ok(argv),
        },
    };
    let Some(path) = m.get_one::<PathBuf>("config").cloned() else {
        return Ok(argv);
    };
    let given: BTreeSet<String> = m
        .ids()
        .filter(|id| m.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.to_string())
        .collect();
    let keys = Keys::of(command.clone());
    let doc = read::read(&path)?;
    let frags = match doc.root.get(RERUN) {
        Some(rerun) => {
            let tables = rerun
                .get("settings")
                .ok_or_else(|| doc.error(rerun.line, "`rerun` without its `settings`"))?;
            let frags = argv::fragments(&doc, tables, &keys, &[])?;
            let dataset = m.get_one::<PathBuf>("dataset_path").cloned();
            check_rerun(&path, dataset, m.get_flag("accept_changed_trace"))?;
            rerun_fragments(&keys, frags)
        }
        // A summary of a version that did not write its settings.
        None if doc.root.get("run").is_some() && doc.root.get("scheduled").is_some() => {
            return Err(doc.error(
                0,
                "a summary without its `rerun` section (written by a request-sim that did not record every setting): it cannot be re-run",
            ))
        }
        None => argv::fragments(&doc, &doc.root, &keys, &[])?,
    };
    let frags = argv::without_given(&keys, frags, &given);
    let mut out = argv[..at].to_vec();
    out.extend(argv::words(&frags));
    out.extend_from_slice(&argv[at..]);
    Ok(out)
}

/// A summary's settings less those that name where the first run wrote (the output table's
/// paths: a re-run writes its own files, never over the run it re-runs), `--start-at` (an
/// instant already past), and the values that are their flag's default (the same when not
/// given; given, a default such as `--metrics-host`'s would need the flag it goes with).
fn rerun_fragments(keys: &Keys, frags: Vec<argv::Fragment>) -> Vec<argv::Fragment> {
    frags
        .into_iter()
        .filter(|f| {
            keys.by_id(&f.id).is_none_or(|k| {
                !(k.table == "output" && k.path) && k.long != "start-at" && !is_default(k, f)
            })
        })
        .collect()
}

/// A fragment's values are its flag's defaults (numbers compared as numbers: `5.0` is `5`).
fn is_default(k: &Key, f: &argv::Fragment) -> bool {
    let prefix = format!("--{}=", k.long);
    let values: Vec<String> = f
        .words
        .iter()
        .filter_map(|w| w.to_str()?.strip_prefix(&prefix).map(String::from))
        .collect();
    let same = |a: &str, b: &str| {
        a == b || matches!((a.parse::<f64>(), b.parse::<f64>()), (Ok(x), Ok(y)) if x == y)
    };
    values.len() == f.words.len()
        && values.len() == k.defaults.len()
        && values.iter().zip(&k.defaults).all(|(v, d)| same(v, d))
}

/// Before a re-run from `summary`: a different tool version is said; a trace whose checksum
/// is not the summary's is refused (`accept`: said, and run).
fn check_rerun(summary: &Path, dataset: Option<PathBuf>, accept: bool) -> Result<()> {
    let text = std::fs::read_to_string(summary)
        .map_err(|e| Error::io(format!("--config {}", summary.display()), e))?;
    #[derive(serde::Deserialize)]
    struct Section {
        rerun: Rerun,
    }
    let s: Section = serde_json::from_str(&text)
        .map_err(|e| Error::config(format!("{}: its `rerun` section: {e}", summary.display())))?;
    let r = s.rerun;
    let ours = env!("CARGO_PKG_VERSION");
    if r.tool_version != ours {
        eprintln!(
            "request-sim: note: {} was run by request-sim {}, this is {ours}: the same settings, but prompts and timing may differ where the tool changed",
            summary.display(),
            if r.tool_version.is_empty() { "(unknown)" } else { &r.tool_version }
        );
    }
    let recorded_path = r
        .settings
        .get("dataset-path")
        .and_then(|v| v.as_str())
        .map(PathBuf::from);
    let Some(path) = dataset.or(recorded_path) else {
        return Ok(());
    };
    let now = trace_file(&path);
    let changed = match (&r.trace, &now) {
        (Some(was), Some(is)) if was.xxh3_64 == is.xxh3_64 => return Ok(()),
        (Some(was), Some(is)) => format!(
            "the trace {} is not the one the run read: checksum {} ({} bytes), the summary says {} ({} bytes, {})",
            path.display(), is.xxh3_64, is.bytes, was.xxh3_64, was.bytes, was.path
        ),
        (Some(was), None) => format!(
            "the trace {} cannot be read to check it against the run's ({}, checksum {})",
            path.display(), was.path, was.xxh3_64
        ),
        // The run read standard input or the built-in trace: nothing to compare.
        (None, _) => return Ok(()),
    };
    if accept {
        eprintln!("request-sim: warning: {changed} (--accept-changed-trace: running anyway)");
        return Ok(());
    }
    Err(Error::config(format!(
        "{}: {changed}; nothing was sent. Pass --accept-changed-trace to run it on this trace",
        summary.display()
    )))
}
