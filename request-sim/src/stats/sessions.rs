//! The summary's sessions section, from the records' session fields.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{Record, Status};
use crate::schedule::ThinkTime;

/// Sessions of a run (present when records carry `session_id`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionSummary {
    /// Sessions with at least one record.
    pub sessions: usize,
    /// Records per session.
    pub mean_turns: f64,
    pub max_turns: usize,
    /// First send → last completion of a session, seconds (sessions with a sent request).
    pub mean_duration_s: f64,
    pub max_duration_s: f64,
    /// Mean TTFT of ok first turns (no parent) and of ok later turns: the prefix-cache effect.
    pub mean_ttft_first_turn_ms: Option<f64>,
    pub mean_ttft_later_turns_ms: Option<f64>,
    /// `--timing closed`: mean and max `session_wait_ms` of the turns released after their
    /// parent (waiting for the answer plus the think time).
    pub mean_session_wait_ms: Option<f64>,
    pub max_session_wait_ms: Option<f64>,
    /// Turns not sent: cut by a stop/time limit or skipped after a failed parent.
    pub turns_not_sent: usize,
    /// `--timing` (`open`/`closed`), from the run (absent when re-summarising records).
    pub timing: Option<crate::schedule::Timing>,
    /// `--think-time`: `trace` or `fixed` (then `think_time_fixed_ms`).
    pub think_time: Option<String>,
    pub think_time_fixed_ms: Option<f64>,
    /// `--live-history`.
    pub live_history: bool,
    /// Think time actually applied (`think_ms` of the closed-loop turns released after their
    /// parent): mean and max, ms.
    pub mean_think_ms: Option<f64>,
    pub max_think_ms: Option<f64>,
    /// Turns of the run's sessions that slicing (`--start-ms/--end-ms/--max-requests`) left
    /// out, and the sessions that lost them (never scheduled, so without records).
    pub cut_turns: usize,
    pub cut_sessions: usize,
}

/// A run's session settings and slicing facts (from its configuration and trace, not its
/// records), reported in the sessions section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionRun {
    pub timing: crate::schedule::Timing,
    pub think_time: Option<crate::schedule::ThinkTime>,
    pub live_history: bool,
    pub cut_turns: usize,
    pub cut_sessions: usize,
}

#[derive(Debug, Clone, Default)]
struct Span {
    turns: usize,
    first_send: Option<f64>,
    last_end: Option<f64>,
}

/// Collects [`SessionSummary`] one record at a time.
#[derive(Debug, Clone, Default)]
pub struct SessionAcc {
    /// Ordered by id, so the sums over sessions (the mean duration) are the same for the same
    /// records in every run (a hashed map summed them in a random order: the last digits moved).
    by_id: BTreeMap<String, Span>,
    ttft_first: (f64, usize),
    ttft_later: (f64, usize),
    wait: (f64, usize, f64),
    think: (f64, usize, f64),
    not_sent: usize,
}

impl SessionAcc {
    pub fn add(&mut self, rec: &Record) {
        let Some(id) = &rec.session_id else {
            return;
        };
        let span = self.by_id.entry(id.clone()).or_default();
        span.turns += 1;
        match rec.sent_ms {
            Some(sent) => {
                span.first_send = Some(span.first_send.map_or(sent, |f: f64| f.min(sent)));
                let end = sent + rec.done_ms.or(rec.e2e_ms).unwrap_or(0.0);
                span.last_end = Some(span.last_end.map_or(end, |l: f64| l.max(end)));
            }
            None => self.not_sent += 1,
        }
        if rec.status == Status::Ok {
            if let Some(t) = rec.ttft_ms {
                let slot = if rec.parent_index.is_none() {
                    &mut self.ttft_first
                } else {
                    &mut self.ttft_later
                };
                slot.0 += t;
                slot.1 += 1;
            }
        }
        if let Some(w) = rec.session_wait_ms {
            self.wait.0 += w;
            self.wait.1 += 1;
            self.wait.2 = self.wait.2.max(w);
        }
        if let Some(t) = rec.think_ms {
            self.think.0 += t;
            self.think.1 += 1;
            self.think.2 = self.think.2.max(t);
        }
    }

    /// The section (`None` without session records); `run`: the run's settings, when known.
    pub fn finish(self, run: Option<&SessionRun>) -> Option<SessionSummary> {
        if self.by_id.is_empty() {
            return None;
        }
        let n = self.by_id.len();
        let turns: usize = self.by_id.values().map(|s| s.turns).sum();
        let durations: Vec<f64> = self
            .by_id
            .values()
            .filter_map(|s| Some((s.last_end? - s.first_send?) / 1e3))
            .collect();
        let mean = |(sum, k): (f64, usize)| (k > 0).then(|| sum / k as f64);
        Some(SessionSummary {
            sessions: n,
            mean_turns: turns as f64 / n as f64,
            max_turns: self.by_id.values().map(|s| s.turns).max().unwrap_or(0),
            mean_duration_s: if durations.is_empty() {
                0.0
            } else {
                durations.iter().sum::<f64>() / durations.len() as f64
            },
            max_duration_s: durations.iter().copied().fold(0.0, f64::max),
            mean_ttft_first_turn_ms: mean(self.ttft_first),
            mean_ttft_later_turns_ms: mean(self.ttft_later),
            mean_session_wait_ms: mean((self.wait.0, self.wait.1)),
            max_session_wait_ms: (self.wait.1 > 0).then_some(self.wait.2),
            turns_not_sent: self.not_sent,
            timing: run.map(|r| r.timing),
            think_time: run.and_then(|r| r.think_time).map(|t| {
                match t {
                    ThinkTime::Trace => "trace",
                    ThinkTime::FixedMs(_) => "fixed",
                }
                .to_string()
            }),
            think_time_fixed_ms: run.and_then(|r| match r.think_time {
                Some(ThinkTime::FixedMs(ms)) => Some(ms),
                _ => None,
            }),
            live_history: run.is_some_and(|r| r.live_history),
            mean_think_ms: mean((self.think.0, self.think.1)),
            max_think_ms: (self.think.1 > 0).then_some(self.think.2),
            cut_turns: run.map_or(0, |r| r.cut_turns),
            cut_sessions: run.map_or(0, |r| r.cut_sessions),
        })
    }
}
