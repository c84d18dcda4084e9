//! `--model-map` at start-up (part of phase 3): the trace's models counted (a whole trace's
//! requests, or a streamed trace read once more, beginning to end), the served models listed
//! for `auto`, and the map resolved into the lookup every body and record uses
//! ([`SentModels`]). A trace model the map misses stops the run here, before anything is sent.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::calibrate::fetch_models;
use super::load::Loaded;
use super::note::note;
use super::server::Server;
use crate::backend::{ModelMap, SentModels};
use crate::config::{ReplayConfig, TraceSource};
use crate::trace::{TraceRequest, TraceStream};
use crate::{Error, Result};

/// The lookup of `--model-map` (`None` without it), `base` being the model of requests the
/// map does not name (`--model-name`, else the server's first).
pub(super) fn resolve(
    cfg: &ReplayConfig,
    trace: &Loaded,
    server: &Server,
    base: &str,
) -> Result<Option<Arc<SentModels>>> {
    let Some(map) = &cfg.target.model_map else {
        return Ok(None);
    };
    let (counts, unnamed) = trace_models(cfg, trace)?;
    let served = match map {
        ModelMap::Auto if cfg.requests.dry_run => {
            return Err(Error::config(
                "--model-map auto reads the served models from GET /v1/models, and a dry run asks the server nothing; give the map (`A=x,B=y`) instead",
            ))
        }
        ModelMap::Auto => server
            .rt
            .block_on(fetch_models(&server.client, &server.ep))?,
        ModelMap::Pairs { .. } => Vec::new(),
    };
    let sent = map
        .resolve(&counts, base, &served)
        .map_err(|e| Error::config(format!("{}: {e}", trace.name)))?;
    let unused = map.unused(&counts);
    if !unused.is_empty() {
        note(format!(
            "--model-map: {} names no request: {}",
            trace.name,
            unused.join(", ")
        ));
    }
    let pairs: Vec<String> = sent
        .pairs()
        .iter()
        .map(|(t, s)| {
            let n = counts.iter().find(|(m, _)| m == t).map_or(0, |(_, n)| *n);
            format!("{t} ({n}) → {s}")
        })
        .collect();
    note(format!(
        "--model-map: {}{}",
        if pairs.is_empty() {
            "the trace names no model".to_string()
        } else {
            pairs.join(", ")
        },
        if unnamed > 0 {
            format!("; {unnamed} requests naming no model → {}", sent.sent(None))
        } else {
            String::new()
        }
    ));
    Ok(Some(Arc::new(sent)))
}

/// Each trace model and its requests.
type ModelCounts = Vec<(Arc<str>, usize)>;

/// The trace's models with their requests (sorted by name), and the requests naming none: a
/// whole trace's, or a streamed trace's read once through (its slice and reshaping applied).
fn trace_models(cfg: &ReplayConfig, trace: &Loaded) -> Result<(ModelCounts, usize)> {
    let mut by: BTreeMap<Arc<str>, usize> = BTreeMap::new();
    let mut unnamed = 0usize;
    let mut add = |r: &TraceRequest| match &r.model {
        Some(m) => *by.entry(m.clone()).or_insert(0) += 1,
        None => unnamed += 1,
    };
    match (&trace.whole, &cfg.trace.source) {
        (Some(w), _) => w.requests.iter().for_each(&mut add),
        (None, TraceSource::File(p)) if p.as_os_str() == "-" => {
            return Err(Error::config(
                "--model-map counts the trace's models before the run (a first read of the trace), and standard input cannot be read twice: give the trace as a file",
            ))
        }
        (None, TraceSource::File(p)) => {
            let stream = TraceStream::open(p, &cfg.trace.load, cfg.trace.reorder)?;
            for planned in stream {
                add(&planned?.req);
            }
        }
        // The built-in demo trace names no model.
        (None, TraceSource::BuiltinDemo) => {}
    }
    Ok((by.into_iter().collect(), unnamed))
}
