//! The summary's agent section (agent corpora), from the records' agent fields
//! (`conversation`, `agent`, `joins`, `join_wait_ms`, `conversation_trace_ms`) and the layout's
//! facts ([`PlanFacts`]).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::samples::percentile_sorted;
use crate::analyze::IdealCache;
use crate::record::{Record, Status};
use crate::trace::pipeline::plan::PlanFacts;
use crate::trace::TraceRequest;

/// Agent conversations of a run (present when records carry `conversation`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentSummary {
    /// Conversations with at least one record, and those whose every request has an ok record
    /// (a conversation cut by the time limit is not completed).
    pub conversations: usize,
    pub conversations_completed: usize,
    /// Records per conversation: mean and max.
    pub mean_requests_per_conversation: f64,
    pub max_requests_per_conversation: usize,
    /// Subagents with at least one request sent, and joins waited for (Σ `joins`).
    pub subagents_spawned: usize,
    pub subagents_joined: usize,
    /// Completed conversations: first send → last completion (s), p50 and p99, and the same
    /// conversations' own wall time in the trace (with `--max-idle-gap`, with the gaps capped
    /// as the replay plays them: `plan/layout.rs`).
    pub wall_time_p50_s: Option<f64>,
    pub wall_time_p99_s: Option<f64>,
    pub trace_wall_time_p50_s: Option<f64>,
    pub trace_wall_time_p99_s: Option<f64>,
    /// Time requests waited for the subagents they join past their predecessor's completion:
    /// total (s), mean and max per joining request (ms).
    pub join_wait_total_s: f64,
    pub mean_join_wait_ms: Option<f64>,
    pub max_join_wait_ms: Option<f64>,
    /// Client gap applied before the requests released after another's completion (ms, mean).
    pub mean_client_gap_ms: Option<f64>,
    /// Requests not sent (cut by a stop or the time limit while waiting).
    pub requests_not_sent: usize,
    /// Records whose trace call did not succeed, by the trace's result (`trace_result`:
    /// Copilot `UserCancel`, ...); they were sent in full.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub trace_results: std::collections::BTreeMap<String, usize>,
    /// Server-reported prefix-cache hit ratio over these records (Σ cached / Σ prompt tokens),
    /// and the trace-ideal (infinite cache) ratio of the run, when known.
    pub server_hit_ratio: Option<f64>,
    pub ideal_hit_ratio: Option<f64>,
    /// The trace-ideal ratio for the routing the run got: each sent request, in send order,
    /// against an unbounded cache of the instance that served it (`served_by`), over the
    /// instances that served (computed at the end of a run, not by `report`).
    pub routed_ideal_hit_ratio: Option<f64>,
    pub instances_served: Option<usize>,
    /// How the corpus was laid out (absent when re-summarising records).
    pub layout: Option<PlanFacts>,
}

#[derive(Debug, Clone, Default)]
struct Conv {
    records: usize,
    all_ok: bool,
    first_send: Option<f64>,
    last_end: Option<f64>,
    trace_ms: Option<f64>,
    /// The conversation's requests, from its first record (`None`: unknown, trust the records).
    expected: Option<u32>,
}

/// Collects [`AgentSummary`] one record at a time.
#[derive(Debug, Clone, Default)]
pub struct AgentAcc {
    by_conv: HashMap<String, Conv>,
    subagents: HashSet<(String, String)>,
    joins: usize,
    join_wait: (f64, usize, f64),
    gap: (f64, usize),
    not_sent: usize,
    trace_results: std::collections::BTreeMap<String, usize>,
    cache: (u64, u64),
}

impl AgentAcc {
    pub fn add(&mut self, rec: &Record) {
        let Some(conv) = &rec.conversation else {
            return;
        };
        let c = self.by_conv.entry(conv.clone()).or_insert(Conv {
            all_ok: true,
            ..Conv::default()
        });
        c.records += 1;
        c.all_ok &= rec.status == Status::Ok;
        c.trace_ms = c.trace_ms.or(rec.conversation_trace_ms);
        c.expected = c.expected.or(rec.conversation_requests);
        match rec.sent_ms {
            Some(sent) => {
                c.first_send = Some(c.first_send.map_or(sent, |f| f.min(sent)));
                let end = sent + rec.done_ms.or(rec.e2e_ms).unwrap_or(0.0);
                c.last_end = Some(c.last_end.map_or(end, |l| l.max(end)));
                if let Some(a) = rec.agent.as_deref().filter(|a| *a != "main") {
                    self.subagents.insert((conv.clone(), a.to_owned()));
                }
            }
            None => self.not_sent += 1,
        }
        if let Some(r) = &rec.trace_result {
            *self.trace_results.entry(r.clone()).or_insert(0) += 1;
        }
        self.joins += rec.joins.unwrap_or(0) as usize;
        if let Some(w) = rec.join_wait_ms {
            self.join_wait.0 += w;
            self.join_wait.1 += 1;
            self.join_wait.2 = self.join_wait.2.max(w);
        }
        if let Some(g) = rec.think_ms {
            self.gap.0 += g;
            self.gap.1 += 1;
        }
        if let (Some(p), Some(c)) = (rec.prompt_tokens, rec.cached_tokens) {
            self.cache.0 += u64::from(p);
            self.cache.1 += u64::from(c);
        }
    }

    /// The section (`None` without agent records); `layout`, `ideal`: the run's facts.
    pub fn finish(self, layout: Option<&PlanFacts>, ideal: Option<f64>) -> Option<AgentSummary> {
        if self.by_conv.is_empty() {
            return None;
        }
        let n = self.by_conv.len();
        // Completed: every request of the conversation has an ok record (a conversation the
        // time limit cut has fewer records than requests).
        let done: Vec<&Conv> = self
            .by_conv
            .values()
            .filter(|c| c.all_ok && c.expected.is_none_or(|n| c.records >= n as usize))
            .collect();
        let mut wall: Vec<f64> = done
            .iter()
            .filter_map(|c| Some((c.last_end? - c.first_send?) / 1e3))
            .collect();
        let mut trace: Vec<f64> = done
            .iter()
            .filter_map(|c| c.trace_ms)
            .map(|ms| ms / 1e3)
            .collect();
        wall.sort_by(f64::total_cmp);
        trace.sort_by(f64::total_cmp);
        let pct = |v: &[f64], p: f64| (!v.is_empty()).then(|| percentile_sorted(v, p));
        let requests: usize = self.by_conv.values().map(|c| c.records).sum();
        let mean = |(sum, k): (f64, usize)| (k > 0).then(|| sum / k as f64);
        Some(AgentSummary {
            conversations: n,
            conversations_completed: done.len(),
            mean_requests_per_conversation: requests as f64 / n as f64,
            max_requests_per_conversation: self
                .by_conv
                .values()
                .map(|c| c.records)
                .max()
                .unwrap_or(0),
            subagents_spawned: self.subagents.len(),
            subagents_joined: self.joins,
            wall_time_p50_s: pct(&wall, 50.0),
            wall_time_p99_s: pct(&wall, 99.0),
            trace_wall_time_p50_s: pct(&trace, 50.0),
            trace_wall_time_p99_s: pct(&trace, 99.0),
            join_wait_total_s: self.join_wait.0 / 1e3,
            mean_join_wait_ms: mean((self.join_wait.0, self.join_wait.1)),
            max_join_wait_ms: (self.join_wait.1 > 0).then_some(self.join_wait.2),
            mean_client_gap_ms: mean(self.gap),
            requests_not_sent: self.not_sent,
            trace_results: self.trace_results,
            server_hit_ratio: (self.cache.0 > 0).then(|| self.cache.1 as f64 / self.cache.0 as f64),
            ideal_hit_ratio: ideal,
            routed_ideal_hit_ratio: None,
            instances_served: None,
            layout: layout.cloned(),
        })
    }
}

/// The trace-ideal prefix-cache hit ratio for the routing a run got, and the instances that
/// served: every sent request in send order against an unbounded cache of the instance that
/// answered it (`served_by`, else `kv_placement`; one cache when neither says), hits as the trace-ideal
/// counts them (`docs/traces.md`). `request(i)`: the trace request of record index `i`.
pub fn routed_ideal_hit_ratio<'a>(
    records: &[Record],
    block_size: usize,
    request: impl Fn(usize) -> Option<&'a TraceRequest>,
) -> Option<(f64, usize)> {
    // The requests the server processed (as `stats::ideal` counts them).
    let processed = |r: &&Record| {
        r.sent_ms.is_some()
            && (matches!(r.status, Status::Ok | Status::DryRun) || r.ttft_ms.is_some())
    };
    let mut sent: Vec<&Record> = records.iter().filter(processed).collect();
    sent.sort_by(|a, b| {
        a.sent_ms
            .unwrap_or(0.0)
            .total_cmp(&b.sent_ms.unwrap_or(0.0))
    });
    let mut caches: HashMap<(Option<String>, Option<u16>), IdealCache> = HashMap::new();
    let (mut hit, mut total) = (0u64, 0u64);
    for r in sent {
        let Some(req) = request(r.index) else {
            continue;
        };
        // The instance the response named, else the one its KV placement found.
        let key = match (&r.served_by, &r.kv_placement) {
            (Some(s), _) => (s.pod.clone(), s.port),
            (None, Some(k)) => (Some(k.url.clone()), None),
            (None, None) => (None, None),
        };
        let cache = caches
            .entry(key)
            .or_insert_with(|| IdealCache::new(block_size, IdealCache::MAX_BLOCKS));
        hit += u64::from(cache.hits(req)?);
        total += u64::from(req.input_length);
    }
    (total > 0).then(|| (hit as f64 / total as f64, caches.len()))
}
