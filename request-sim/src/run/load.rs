//! Phase 1: the trace as this run replays it (this shard's share, outputs capped) and the
//! prefix-cache hit ratio a perfect cache would reach on it.

use std::sync::Arc;

use super::note;
use crate::config::{ReplayConfig, TraceSource};
use crate::trace::history::{self, AnswerSpan};
use crate::trace::{self, Trace, TraceRequest};
use crate::{Error, Result};

/// The built-in demo trace (mooncake format, 200 requests over ~19 s, block 512).
pub const DEMO_TRACE: &str = include_str!("../../data/demo_trace.jsonl");

/// The trace as this run replays it.
pub(super) struct Loaded {
    pub(super) trace: Trace,
    /// This run's requests (this shard's share, outputs capped), in send order.
    pub(super) requests: Arc<Vec<TraceRequest>>,
    /// Prefix-cache hit ratio a perfect cache would reach on them.
    pub(super) ideal_ratio: Option<f64>,
    pub(super) name: String,
    /// `--live-history`: the recorded answers of earlier turns in each request's messages.
    pub(super) answer_spans: Option<Arc<Vec<Vec<AnswerSpan>>>>,
    /// Turns of this run's sessions that slicing left out, and the sessions they belong to.
    pub(super) cut: (usize, usize),
}

/// Load the trace the config names.
pub fn load_trace(cfg: &ReplayConfig) -> Result<Trace> {
    Ok(match &cfg.trace {
        TraceSource::File(p) => trace::load(p, &cfg.load)?,
        TraceSource::BuiltinDemo => {
            trace::parse_reader("<built-in demo trace>", DEMO_TRACE.as_bytes(), &cfg.load)?
        }
    })
}

/// Load the trace, take this shard's share, cap outputs, and say what will be replayed.
pub(super) fn run(cfg: &ReplayConfig) -> Result<Loaded> {
    let trace = load_trace(cfg)?;
    let mut requests = trace.requests.clone();
    if let Some(shard) = cfg.shard {
        let all = requests.len();
        requests = trace::shard::select(requests, &trace.sessions, shard);
        note(format!(
            "shard {}/{}: {} of the trace's {all} requests (record indexes are the trace's)",
            shard.index,
            shard.count,
            requests.len()
        ));
    }
    if let Some(cap) = cfg.max_output_tokens {
        for r in &mut requests {
            r.output_length = r.output_length.min(cap);
        }
    }
    let ideal_ratio = ideal_ratio(&trace, &requests);
    let name = match &cfg.trace {
        TraceSource::File(p) => p.display().to_string(),
        TraceSource::BuiltinDemo => "<built-in demo trace>".to_string(),
    };
    let span_s = requests.last().map(|r| r.timestamp_ms / 1e3).unwrap_or(0.0);
    note(format!(
        "trace {name}: {} requests over {:.1} s ({:?}, block {}), replayed in {:.1} s at scale {}",
        requests.len(),
        span_s,
        trace.format,
        trace.block_size,
        span_s / cfg.scale_factor,
        cfg.scale_factor
    ));
    let answer_spans = live_history(cfg, &trace, &name)?;
    let cut = cut_turns(cfg, &trace);
    Ok(Loaded {
        trace,
        requests: Arc::new(requests),
        ideal_ratio,
        name,
        answer_spans,
        cut,
    })
}

/// Turns of this run's sessions (this shard's with `--shard`) that `--start-ms/--end-ms/
/// --max-requests` left out, said at start-up when there are any.
fn cut_turns(cfg: &ReplayConfig, trace: &Trace) -> (usize, usize) {
    let cut = trace.sessions.cut_in(|id| match cfg.shard {
        Some(s) => trace::shard::owner(Some(id), 0, s.count) == s.index,
        None => true,
    });
    if cut.0 > 0 {
        note(format!(
            "sessions: the slice (--start-ms/--end-ms/--max-requests) cut {} turns of {} sessions{}; a turn whose parent was cut starts its part of the session",
            cut.0,
            cut.1,
            if cfg.shard.is_some() { " on this shard" } else { "" }
        ));
    }
    cut
}

/// `--live-history`: only for a messages trace; where each turn's earlier answers are.
fn live_history(
    cfg: &ReplayConfig,
    trace: &Trace,
    name: &str,
) -> Result<Option<Arc<Vec<Vec<AnswerSpan>>>>> {
    if !cfg.sessions.live_history {
        return Ok(None);
    }
    let has_messages = trace.chats.iter().flatten().any(|c| c.text_input.is_none());
    if !has_messages {
        return Err(Error::config(format!(
            "--live-history needs a messages trace (rows with `messages` whose assistant turns it replaces); {name} is a {} trace without any",
            trace.format.name()
        )));
    }
    let spans = history::answer_spans(trace, name)?;
    let turns = spans.iter().filter(|s| !s.is_empty()).count();
    note(format!(
        "--live-history: {turns} turns will carry the server's answers to their earlier turns"
    ));
    Ok(Some(Arc::new(spans)))
}

/// Hit ratio of an infinite prefix cache over `requests` (none without hash ids).
fn ideal_ratio(trace: &Trace, requests: &[TraceRequest]) -> Option<f64> {
    let hits: u64 = trace::analyze::ideal_prefix_hits(trace)
        .iter()
        .map(|&h| u64::from(h))
        .sum();
    let total: u64 = requests.iter().map(|r| u64::from(r.input_length)).sum();
    (total > 0 && !requests.iter().all(|r| r.hash_ids.is_empty()))
        .then(|| hits as f64 / total as f64)
}
