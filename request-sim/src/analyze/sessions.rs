//! The session facts `analyze` reports (turns, sessions, think times, Bailian parent links),
//! gathered one request at a time.

use std::collections::HashMap;
use std::sync::Arc;

use super::analysis::{ratio, Percentiles, SessionStats, ThinkTimes};
use super::chains::IdMap;
use crate::trace::model::{SessionTurn, TraceRequest};
use crate::util::percentile_sorted;

/// The session facts `analyze` reports, gathered one request at a time.
#[derive(Default)]
pub(super) struct SessionFacts {
    /// Bailian links (requests with `session`): chat id -> its session's root, sizes by root.
    bailian: Option<BailianFacts>,
    /// Session-id turns: requests per session id.
    turns: HashMap<Arc<str>, usize>,
    turn_max: u32,
    turn_roots: usize,
    /// The routing key of every request (`Sessions::key`), interned; `u32::MAX` = none.
    keys: Vec<u32>,
    key_ids: HashMap<Arc<str>, u32>,
    key_names: Vec<Arc<str>>,
    /// The trace's own gap before each later turn, seconds.
    gaps_s: Vec<f64>,
}

#[derive(Default)]
pub(super) struct BailianFacts {
    st: SessionStats,
    root_of: IdMap<i64, i64>,
    size_of: IdMap<i64, usize>,
}

impl SessionFacts {
    pub(super) fn push(&mut self, r: &TraceRequest, turn: Option<&SessionTurn>) {
        if let Some(s) = &r.session {
            let b = self.bailian.get_or_insert_with(BailianFacts::default);
            let root = if s.parent_chat_id < 0 {
                b.st.root_requests += 1;
                s.chat_id
            } else if let Some(&root) = b.root_of.get(&s.parent_chat_id) {
                root
            } else {
                b.st.orphan_requests += 1;
                s.chat_id
            };
            b.root_of.insert(s.chat_id, root);
            *b.size_of.entry(root).or_insert(0) += 1;
            b.st.max_turn = b.st.max_turn.max(s.turn);
            let kind = s.kind.as_deref().unwrap_or("unknown");
            match b.st.types.get_mut(kind) {
                Some(n) => *n += 1,
                None => {
                    b.st.types.insert(kind.to_owned(), 1);
                }
            }
        }
        let Some(t) = turn else {
            self.keys.push(u32::MAX);
            return;
        };
        match self.turns.get_mut(&t.id) {
            Some(n) => *n += 1,
            None => {
                self.turns.insert(t.id.clone(), 1);
            }
        }
        self.turn_max = self.turn_max.max(t.turn);
        self.turn_roots += usize::from(t.parent_index.is_none());
        if let Some(g) = t.trace_gap_ms {
            self.gaps_s.push(g / 1e3);
        }
        let key = t.agent.as_ref().map_or(&t.id, |a| &a.key);
        let next = self.key_names.len() as u32;
        let id = *self.key_ids.entry(key.clone()).or_insert_with(|| next);
        if id == next {
            self.key_names.push(key.clone());
        }
        self.keys.push(id);
    }

    /// Request r's routing key.
    pub(super) fn key(&self, r: usize) -> Option<&str> {
        let k = *self.keys.get(r)?;
        self.key_names.get(k as usize).map(|k| &**k)
    }

    /// Bailian links when the trace has them, else session ids, else none.
    pub(super) fn stats(&self) -> Option<SessionStats> {
        let summarise = |mut st: SessionStats, sizes: &mut dyn Iterator<Item = usize>| {
            let (mut n, mut multi, mut max, mut sum) = (0usize, 0usize, 0usize, 0u64);
            for size in sizes {
                n += 1;
                multi += usize::from(size > 1);
                max = max.max(size);
                sum += size as u64;
            }
            st.sessions = n;
            st.multi_turn_sessions = multi;
            st.max_turns_per_session = max;
            st.mean_turns_per_session = ratio(sum, n as u64);
            st
        };
        if let Some(b) = &self.bailian {
            return Some(summarise(b.st.clone(), &mut b.size_of.values().copied()));
        }
        if self.turns.is_empty() {
            return None;
        }
        let st = SessionStats {
            max_turn: self.turn_max,
            root_requests: self.turn_roots,
            ..SessionStats::default()
        };
        Some(summarise(st, &mut self.turns.values().copied()))
    }

    /// The sessions' think times (sorts the gaps in place).
    pub(super) fn think_times(&mut self, percentiles: &[f64]) -> Option<ThinkTimes> {
        if self.gaps_s.is_empty() {
            return None;
        }
        let gaps = &mut self.gaps_s;
        gaps.sort_by(f64::total_cmp);
        Some(ThinkTimes {
            turns: gaps.len(),
            mean: gaps.iter().sum::<f64>() / gaps.len() as f64,
            percentiles: Percentiles(
                percentiles
                    .iter()
                    .map(|&p| (p, percentile_sorted(gaps, p)))
                    .collect(),
            ),
        })
    }
}
