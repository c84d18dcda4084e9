//! A **warm trajectory start** (`--trajectory-start MIN..MAX`, what AgentX calls the agentic
//! warm-up): a user's first conversation does not start at its first request but at an instant
//! t* of its recorded wall time, a fraction drawn (seeded) in `[MIN, MAX]` of the span from its
//! first request's start to its last request's start (every agent's requests counted). What
//! the conversation had done by t* is the server's cache to warm, not load to measure:
//!
//! - every agent still live at t* (a request before it and one at or after it) sends its last
//!   request before t* first, whole (its prompt holds everything before it), as a **primer**;
//!   the primers of a conversation go out together, each waiting for nothing;
//! - the requests before t* that are not primers are left out (an agent done by t* entirely:
//!   a join of it is then already satisfied);
//! - then `--warmup-requests-per-lane N` more requests of the conversation, in trace order,
//!   continue it with no client gap;
//! - primers and those N ask for 1 output token and are **warm-up** requests: recorded (their
//!   record says `"phase": "warmup"`) and left out of the statistics;
//! - the rest is replayed as always (its recorded gaps), and measured.
//!
//! The user's later conversations start at their first request, as without the option.

use std::sync::Arc;

use llm_common::util::{hash3, unit};

use super::layout::Item;
use crate::trace::model::Conversation;

/// The warm start asked for.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrajectoryStart {
    /// The range t* is drawn in, as fractions of the conversation's recorded span.
    pub min_ratio: f64,
    pub max_ratio: f64,
    /// Warm-up requests per user after the primers.
    pub warmup_requests: usize,
}

impl TrajectoryStart {
    /// Parses `MIN..MAX` (fractions in `[0, 1]`, `MIN <= MAX`).
    pub fn parse_range(s: &str) -> Result<(f64, f64), String> {
        let bad = || {
            format!("--trajectory-start {s:?}: expected MIN..MAX, fractions of the conversation's recorded span in [0, 1] (e.g. 0.25..0.75)")
        };
        let (a, b) = s.trim().split_once("..").ok_or_else(bad)?;
        let num = |x: &str| -> Result<f64, String> {
            let v: f64 = x.trim().parse().map_err(|_| bad())?;
            (0.0..=1.0).contains(&v).then_some(v).ok_or_else(bad)
        };
        let (lo, hi) = (num(a)?, num(b)?);
        if lo > hi {
            return Err(format!("--trajectory-start {s:?}: MIN must not exceed MAX"));
        }
        Ok((lo, hi))
    }

    /// The fraction drawn for user `user`'s first conversation `conv` (a pure function of the
    /// seed, the user and the conversation).
    pub fn ratio(&self, seed: u64, user: usize, conv: &str) -> f64 {
        let h = hash3(
            seed ^ 0x7a_5a17,
            user as u64,
            llm_common::routing::session_hash(conv),
        );
        self.min_ratio + unit(h) * (self.max_ratio - self.min_ratio)
    }
}

/// What one warm start did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Warmed {
    pub(super) primers: usize,
    pub(super) warmup: usize,
    pub(super) skipped: usize,
}

impl Warmed {
    pub(super) fn add(&mut self, o: Warmed) {
        self.primers += o.primers;
        self.warmup += o.warmup;
        self.skipped += o.skipped;
    }
}

/// What becomes of one request.
#[derive(Clone, Copy, PartialEq)]
enum Fate {
    Skip,
    Warm,
    Keep,
}

/// Applies a warm start at `ratio` to conversation `conv`, whose requests (agent by agent, in
/// the corpus's order) are `items[base..]`: marks the warm-up requests, leaves out the skipped
/// ones and renumbers the waits. Returns what it did and where each request went
/// (`usize::MAX`: left out), by position in `items[base..]`.
pub(super) fn warm_start(
    conv: &Conversation,
    ratio: f64,
    extra: usize,
    items: &mut Vec<Item>,
    base: usize,
) -> (Warmed, Vec<usize>) {
    let times: Vec<f64> = conv
        .agents
        .iter()
        .flat_map(|a| a.requests.iter().map(|r| r.trace_ms))
        .collect();
    debug_assert_eq!(times.len(), items.len() - base);
    let lo = times.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = times.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let t_star = lo + ratio * (hi - lo);
    let mut fate = vec![Fate::Keep; times.len()];
    let mut primer = vec![false; times.len()];
    let mut at = 0;
    for a in &conv.agents {
        let n = a.requests.len();
        let live_from = a.requests.iter().position(|r| r.trace_ms >= t_star);
        let (skip_to, primer_at) = match live_from {
            None => (n, None),
            Some(0) => (0, None),
            Some(k) => (k - 1, Some(k - 1)),
        };
        for f in &mut fate[at..at + skip_to] {
            *f = Fate::Skip;
        }
        if let Some(p) = primer_at {
            fate[at + p] = Fate::Warm;
            primer[at + p] = true;
        }
        at += n;
    }
    let mut facts = Warmed {
        primers: fate.iter().filter(|&&f| f == Fate::Warm).count(),
        ..Warmed::default()
    };
    // The next `extra` requests in trace order (what they wait for comes earlier).
    let mut rest: Vec<usize> = (0..fate.len()).filter(|&i| fate[i] == Fate::Keep).collect();
    rest.sort_by(|&a, &b| times[a].total_cmp(&times[b]).then(a.cmp(&b)));
    for &i in rest.iter().take(extra) {
        fate[i] = Fate::Warm;
    }
    facts.warmup = fate.iter().filter(|&&f| f == Fate::Warm).count();
    facts.skipped = fate.iter().filter(|&&f| f == Fate::Skip).count();
    let head = items[base].turn.agent.clone();
    let to = renumber(items, base, &fate, &primer);
    let kept: Vec<Fate> = fate.iter().copied().filter(|&f| f != Fate::Skip).collect();
    // The conversation's facts ride on its first request: now the first one kept.
    for (i, it) in items[base..].iter_mut().enumerate() {
        let warm = kept[i] == Fate::Warm;
        let agent = it.turn.agent.as_mut().map(Arc::make_mut);
        if let Some(a) = agent {
            a.warmup = warm;
            if i == 0 {
                a.conversation_trace_ms = head.as_ref().and_then(|h| h.conversation_trace_ms);
                a.conversation_requests = Some((fate.len() - facts.skipped) as u32);
            } else {
                a.conversation_trace_ms = None;
                a.conversation_requests = None;
            }
        }
        if warm {
            it.req.output_length = 1;
            let waits = it.parent.is_some() || !it.joins.is_empty();
            it.turn.trace_gap_ms = waits.then_some(0.0);
        }
    }
    (facts, to)
}

/// Leaves out the skipped requests of `items[base..]`, renumbering the waits of those kept (a
/// wait on one left out is dropped: it was done before the start). A primer waits for
/// nothing (`primer`). Returns the new position (offset from `base`) of each request,
/// `usize::MAX` for those left out.
fn renumber(items: &mut Vec<Item>, base: usize, fate: &[Fate], primer: &[bool]) -> Vec<usize> {
    let mut to = vec![usize::MAX; fate.len()];
    let mut kept = 0;
    for (i, f) in fate.iter().enumerate() {
        if *f != Fate::Skip {
            to[i] = kept;
            kept += 1;
        }
    }
    let new = |j: usize| -> Option<usize> {
        if j < base {
            return Some(j);
        }
        // Not `then_some(base + t)`: that adds before it looks, and overflows on a left-out one.
        match to[j - base] {
            usize::MAX => None,
            t => Some(base + t),
        }
    };
    let mut i = 0;
    items.retain(|_| {
        i += 1;
        i <= base || fate[i - 1 - base] != Fate::Skip
    });
    let mut orig = (0..fate.len()).filter(|&i| fate[i] != Fate::Skip);
    for it in &mut items[base..] {
        let o = orig.next().unwrap_or(0);
        if primer[o] {
            it.parent = None;
            it.joins.clear();
        } else {
            it.parent = it.parent.and_then(new);
            it.joins = it.joins.iter().filter_map(|&j| new(j)).collect();
        }
        if it.parent.is_none() && it.joins.is_empty() {
            it.turn.trace_gap_ms = None;
        }
    }
    to
}
