//! A corpus laid out as the whole trace a replay takes: a **population** of conversations
//! (`--users N`: N users, each working through conversations one after the other;
//! `--session-rate R`: conversations starting at Poisson arrivals; neither: every conversation
//! at most once, whatever `--time-in-secs`, all starting at once, or, for a corpus whose
//! conversations carry their recorded start (Copilot), each at its recorded start's offset from
//! the corpus's earliest, `--time-in-secs` leaving out those that start after it), each request
//! with its session links for the release gate (`schedule/sessions.rs`).
//!
//! - Conversations are taken in a seeded order (the same `--seed`, the same order). With
//!   `--users N` the next conversation of that order goes to the user whose previous one ends
//!   earliest on the lower-bound clock below (dealt before the run, so a run is reproducible
//!   and a shard keeps whole users); a user's next conversation waits for every request of the
//!   previous one. With `--users` or `--session-rate`, past the end of the corpus the order
//!   repeats, each repeat a new conversation (`<id>#<pass>`, its own hash ids). How many are
//!   laid out: with `--time-in-secs`, until every user (or the arrivals) pass the limit on the
//!   lower bound below; with `--max-requests`, whole conversations up to that many requests;
//!   else each conversation once. Without a population flag the corpus never repeats: each
//!   conversation once, `--max-requests` cutting it short.
//! - Each request's trace time is a **lower bound** of its release: its dependencies' lower
//!   bounds plus its client gap, as if the server answered in no time. The gate releases it at
//!   the latest completion it waits for plus its gap, which is never earlier, so the trace
//!   time only decides when the dispatcher hands the request to its waiting task (and the
//!   order the bodies are built in).
//! - A request waits for: its predecessor in its agent (a subagent's first request: the
//!   parent's request it follows), the last request of each subagent it joins, and (the first
//!   request of a user's later conversation) the last request of every agent of the user's
//!   previous conversation.
//! - Hash ids: `local` scope ids are namespaced per conversation (and repeat pass); `global`
//!   ids are kept (a repeat pass namespaces them). With `share_system_prefix` the blocks wholly
//!   inside an agent's `tool_tokens + system_tokens` are keyed by those two counts and the
//!   block's position instead, so conversations whose agents declare the same prompt sizes
//!   share them (real agents of one client version send the same tools and system prompt).
//! - `max_idle_gap_ms` caps every client gap (the number capped is counted).
//! - With a time limit, a conversation's requests whose lower bound is at or past it are left
//!   out as soon as it is laid out (counted): the gate cannot release them before the run
//!   ends, and what a request waits for is never later than itself, so what is kept never
//!   waits for what is left out. Memory then follows what the run can send, not users ×
//!   conversation length, and with the ids kept as the corpus stores them
//!   ([`crate::trace::model::BlockIds::renamed`]) a request costs a few hundred bytes.
//!
//! This file deals the conversations out (which starts when, and after what) and puts the
//! requests in replay order; `plan/layout.rs` lays one conversation out.

use std::collections::HashMap;
use std::sync::Arc;

use llm_common::util::{hash3, mix64, unit};

use self::layout::{drop_past, lay_out, Item, Rules, Slot};
use crate::trace::model::{
    Conversation, Corpus, SessionStats, Sessions, Trace, TraceFormat, TraceStats,
};

mod amplify;
mod cap;
mod layout;
mod sample;
mod scale;
mod trajectory;

pub use self::amplify::amplify_conversations;
pub use self::cap::{cap_inputs, Capped};
pub use self::sample::sample_conversations;
pub use self::scale::{scale_prompts, Scales};
pub use self::trajectory::TrajectoryStart;

/// At most this many requests are laid out (a population with near-zero gaps and a time limit
/// would otherwise grow without end).
pub const MAX_PLANNED_REQUESTS: usize = 2_000_000;

/// How the conversations of a corpus start.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Population {
    /// Every conversation once, all starting at the beginning.
    #[default]
    All,
    /// `--users N`: N concurrent users, each taking its next conversation when the previous
    /// one ended.
    Users(usize),
    /// `--session-rate R`: conversations start at Poisson arrivals, R per second.
    Rate(f64),
}

/// How a corpus is laid out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanOptions {
    pub population: Population,
    /// Seeds the conversation order and the arrivals.
    pub seed: u64,
    /// `--max-idle-gap`: client gaps longer than this are cut to it (ms).
    pub max_idle_gap_ms: Option<f64>,
    /// Share the tools + system prompt blocks across conversations (off by default).
    pub share_system_prefix: bool,
    /// `--time-in-secs` (ms): how far the population is laid out.
    pub time_limit_ms: Option<f64>,
    /// `--max-requests`: whole conversations up to this many requests.
    pub max_requests: Option<usize>,
    /// `--trajectory-start` (with `--users`): each user's first conversation starts warm
    /// (`plan/trajectory.rs`).
    pub trajectory: Option<TrajectoryStart>,
}

/// What the layout did, for the summary.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlanFacts {
    /// Conversations in the corpus.
    pub corpus_conversations: usize,
    /// Conversations laid out (repeats included).
    pub conversations: usize,
    /// Subagents laid out.
    pub subagents: usize,
    /// Subagents some parent request joins.
    pub joined_subagents: usize,
    /// Requests laid out.
    pub requests: usize,
    /// `--users`, when given.
    pub users: Option<usize>,
    /// `--session-rate`, when given.
    pub session_rate: Option<f64>,
    /// `--max-idle-gap` (ms) and the gaps it cut.
    pub max_idle_gap_ms: Option<f64>,
    pub capped_gaps: usize,
    /// The tools + system blocks are shared across conversations.
    pub share_system_prefix: bool,
    /// `--max-input-length`, and the prompts it cut ([`cap_inputs`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_length: Option<u32>,
    #[serde(default)]
    pub capped_inputs: usize,
    /// `--sample-sessions`, and the conversations it left out ([`sample_conversations`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_sessions: Option<f64>,
    #[serde(default)]
    pub sampled_out: usize,
    /// `--prefix-scale` and `--prompt-scale`, and the prompts they scaled ([`scale_prompts`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_scale: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_scale: Option<f64>,
    #[serde(default)]
    pub scaled_prompts: usize,
    /// `--amplify`, and the conversations its copies added ([`amplify_conversations`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amplify: Option<f64>,
    #[serde(default)]
    pub amplified: usize,
    /// Without a population flag on a corpus with recorded starts (Copilot): conversations
    /// start at their recorded offsets; this many of them in the first second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_starts: Option<usize>,
    /// Conversations left out because their recorded start is past `--time-in-secs`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub starting_after_limit: usize,
    /// Requests of the conversations laid out left out because they cannot start before
    /// `--time-in-secs`: their lower bound is past it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub past_limit: usize,
    /// `--trajectory-start`: the range, and per user the fraction of its first
    /// conversation's recorded span it started at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory: Option<TrajectoryStart>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub start_ratios: Vec<f64>,
    /// Warm-up requests laid out (primers included), primers, and the requests before the
    /// starts left out.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup_requests: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub primers: usize,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped_before_start: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Lays `corpus` out as a whole trace (requests in replay order, with their sessions).
pub fn plan(
    corpus: &Corpus,
    format: TraceFormat,
    opts: &PlanOptions,
) -> Result<(Trace, PlanFacts), String> {
    let n = corpus.conversations.len();
    if n == 0 {
        return Err("the corpus has no conversations".into());
    }
    let block_size = one_block_size(corpus)?;
    let mut order = seeded_order(n, opts.seed);
    let mut facts = PlanFacts::of_options(n, opts);
    let mut items: Vec<Item> = Vec::new();
    let mut starts = Starts::new(opts.population);
    if opts.population == Population::All {
        starts.recorded = recorded_offsets(corpus, opts.max_idle_gap_ms);
        if let Some(at) = &starts.recorded {
            // the earliest first, so `--max-requests` keeps the start of the corpus
            order.sort_by(|&a, &b| at[a].total_cmp(&at[b]).then(a.cmp(&b)));
            facts.recorded_starts = Some(at.iter().filter(|&&t| t < 1000.0).count());
        }
    }
    let rules = Rules {
        max_idle_gap_ms: opts.max_idle_gap_ms,
        share_system_prefix: opts.share_system_prefix,
    };
    let limit = opts.time_limit_ms;
    let mut warmed = trajectory::Warmed::default();
    // No population flag: every conversation at most once (a time limit bounds the run, it
    // does not repeat the corpus; all would start at once).
    let once =
        opts.population == Population::All || (limit.is_none() && opts.max_requests.is_none());
    for j in 0.. {
        if once && j >= n {
            break;
        }
        let conv = &corpus.conversations[order[j % n]];
        if opts
            .max_requests
            .is_some_and(|m| j > 0 && items.len() + conv.requests() > m)
            || items.len() + conv.requests() > MAX_PLANNED_REQUESTS
        {
            break;
        }
        let (start_ms, prior, user) = starts.next(j, order[j % n], opts);
        // Users: the earliest user is past the limit, so all are; arrivals and recorded
        // starts (in start order): past it.
        if limit.is_some_and(|l| start_ms >= l) {
            facts.starting_after_limit = starts.recorded.as_ref().map_or(0, |_| n - j);
            break;
        }
        // A user's first conversation (its previous one: none) starts warm.
        let warm = match (opts.trajectory, user) {
            (Some(t), Some(u)) if prior.is_empty() && j < starts.user_end.len() => {
                let r = t.ratio(opts.seed, u, &conv.id);
                facts.start_ratios.push(r);
                Some((r, t.warmup_requests))
            }
            _ => None,
        };
        let slot = Slot {
            pass: j / n,
            start_ms,
            prior,
            user,
        };
        let base = items.len();
        let mut warm_start = |items: &mut Vec<Item>, base: usize| {
            let (ratio, extra) = warm.unwrap_or_default();
            let (w, to) = trajectory::warm_start(conv, ratio, extra, items, base);
            warmed.add(w);
            to
        };
        let rewrite: Option<layout::Rewrite<'_>> = match warm {
            Some(_) => Some(&mut warm_start),
            None => None,
        };
        let mut ends = lay_out(
            conv,
            slot,
            &rules,
            &mut items,
            &mut facts.capped_gaps,
            rewrite,
        )?;
        if let Some(l) = limit {
            facts.past_limit += drop_past(&mut items, base, l, &mut ends.1);
        }
        if let Some(u) = user {
            starts.user_end[u] = ends;
        }
        facts.count(conv);
    }
    facts.requests = items.len();
    facts.warmup_requests = warmed.warmup;
    facts.primers = warmed.primers;
    facts.skipped_before_start = warmed.skipped;
    Ok((into_trace(items, format, block_size), facts))
}

/// Descriptors a run keeps for what is not a request's connection (records, logs, the
/// server's metrics, the runtime).
const FD_HEADROOM: u64 = 256;

impl PlanFacts {
    /// Conversations whose first request is released at t = 0: every one laid out without a
    /// population flag, one per user with `--users`, one with `--session-rate`.
    pub fn starting_at_once(&self) -> usize {
        match (self.users, self.session_rate, self.recorded_starts) {
            (Some(u), _, _) => u.min(self.conversations),
            (_, Some(_), _) => self.conversations.min(1),
            (_, _, Some(first_second)) => first_second,
            _ => self.conversations,
        }
    }

    /// Refuses a population that starts more conversations at once than the client can open
    /// connections for (`open_files`: the process's open-file limit, `ulimit -n`).
    pub fn check_client_can_start(&self, open_files: Option<u64>) -> Result<(), String> {
        let Some(limit) = open_files else {
            return Ok(());
        };
        let at_once = self.starting_at_once();
        let room = limit.saturating_sub(FD_HEADROOM);
        if (at_once as u64) <= room {
            return Ok(());
        }
        let how = match self.users {
            Some(u) => format!("--users {u} starts {at_once} conversations at once"),
            None => format!(
                "without --users or --session-rate its {at_once} conversations all start at once"
            ),
        };
        Err(format!(
            "{how}, each needing its own connection, and this process may open {limit} files (ulimit -n; {FD_HEADROOM} kept for the run): spread them with --users N or --session-rate R (N at most {room}), or raise ulimit -n"
        ))
    }
}

/// `--users N` against the open-file limit, from the flags alone (before the corpus is read or
/// laid out): N users start N conversations at once, each on its own connection.
pub fn check_users_fit(users: usize, open_files: Option<u64>) -> Result<(), String> {
    let Some(limit) = open_files else {
        return Ok(());
    };
    let room = limit.saturating_sub(FD_HEADROOM);
    if users as u64 <= room {
        return Ok(());
    }
    Err(format!(
        "--users {users} starts {users} conversations at once, each needing its own connection, and this process may open {limit} files (ulimit -n; {FD_HEADROOM} kept for the run): give --users at most {room}, or --session-rate R, or raise ulimit -n"
    ))
}

/// The process's soft open-file limit (`ulimit -n`), when it has one (read from
/// `/proc/self/limits`; none elsewhere, or when unlimited).
pub fn open_file_limit() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The corpus's block size: every conversation's.
fn one_block_size(corpus: &Corpus) -> Result<usize, String> {
    let first = &corpus.conversations[0];
    match corpus
        .conversations
        .iter()
        .find(|c| c.block_size != first.block_size)
    {
        None => Ok(first.block_size),
        Some(c) => Err(format!(
            "{}: block size {} differs from the corpus's {} ({}); replay one block size at a time",
            c.source, c.block_size, first.block_size, first.source
        )),
    }
}

impl PlanFacts {
    /// The facts of a layout of a corpus of `n` conversations with `opts`, before it is made.
    fn of_options(n: usize, opts: &PlanOptions) -> PlanFacts {
        PlanFacts {
            corpus_conversations: n,
            users: match opts.population {
                Population::Users(u) => Some(u),
                _ => None,
            },
            session_rate: match opts.population {
                Population::Rate(r) => Some(r),
                _ => None,
            },
            max_idle_gap_ms: opts.max_idle_gap_ms,
            share_system_prefix: opts.share_system_prefix,
            trajectory: opts.trajectory,
            ..PlanFacts::default()
        }
    }

    /// Counts conversation `conv`, laid out.
    fn count(&mut self, conv: &Conversation) {
        self.conversations += 1;
        self.subagents += conv.agents.len() - 1;
        self.joined_subagents += conv
            .agents
            .iter()
            .filter(|a| a.parent.as_ref().is_some_and(|l| l.join.is_some()))
            .count();
    }
}

/// Where the population's conversations start.
struct Starts {
    population: Population,
    /// Per user: the lower bound of the previous conversation's end and its last requests.
    user_end: Vec<(f64, Vec<usize>)>,
    arrival_ms: f64,
    /// Without a population flag: each conversation's recorded start, as an offset from the
    /// corpus's earliest (ms), when every conversation has one.
    recorded: Option<Vec<f64>>,
}

/// Each conversation's recorded start as an offset from the earliest (ms); `None` unless every
/// conversation has one. `--max-idle-gap` caps the idle time between two consecutive starts as
/// it caps every client gap, so a corpus spread over a day does not replay for a day.
fn recorded_offsets(corpus: &Corpus, max_gap_ms: Option<f64>) -> Option<Vec<f64>> {
    let at: Option<Vec<f64>> = corpus
        .conversations
        .iter()
        .map(|c| c.recorded_start_ms)
        .collect();
    let at = at?;
    let origin = at.iter().copied().fold(f64::INFINITY, f64::min);
    let mut at: Vec<f64> = at.iter().map(|t| (t - origin).max(0.0)).collect();
    if let Some(cap) = max_gap_ms {
        let mut by_start: Vec<usize> = (0..at.len()).collect();
        by_start.sort_by(|&a, &b| at[a].total_cmp(&at[b]).then(a.cmp(&b)));
        let (mut prev, mut prev_capped) = (0.0, 0.0);
        for i in by_start {
            let t = at[i];
            at[i] = prev_capped + (t - prev).min(cap);
            (prev, prev_capped) = (t, at[i]);
        }
    }
    Some(at)
}

impl Starts {
    fn new(population: Population) -> Starts {
        let users = match population {
            Population::Users(u) => u.max(1),
            _ => 1,
        };
        Starts {
            population,
            user_end: vec![(0.0, Vec::new()); users],
            arrival_ms: 0.0,
            recorded: None,
        }
    }

    /// The start (lower bound) of the `j`th conversation laid out (`conv` in the corpus), what
    /// it waits for, and its user.
    fn next(
        &mut self,
        j: usize,
        conv: usize,
        opts: &PlanOptions,
    ) -> (f64, Vec<usize>, Option<usize>) {
        match self.population {
            Population::All => {
                let at = self.recorded.as_ref().and_then(|r| r.get(conv).copied());
                (at.unwrap_or(0.0), Vec::new(), None)
            }
            Population::Users(_) => {
                // The user with the earliest end takes it (dealt in turn while all are at 0).
                let ends = &self.user_end;
                let u = (0..ends.len())
                    .min_by(|&a, &b| ends[a].0.total_cmp(&ends[b].0).then(a.cmp(&b)))
                    .unwrap_or(0);
                let (end, prior) = std::mem::take(&mut self.user_end[u]);
                (end, prior, Some(u))
            }
            Population::Rate(r) => {
                if j > 0 {
                    let u = unit(hash3(opts.seed, 0x5e55_1011, j as u64));
                    self.arrival_ms += -(1.0 - u).ln() / r * 1e3;
                }
                (self.arrival_ms, Vec::new(), None)
            }
        }
    }
}

/// A permutation of `0..n` from `seed` (Fisher–Yates on the workspace's SplitMix64).
fn seeded_order(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (mix64(seed ^ mix64(i as u64)) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// The items in replay order (stably by lower bound), their waits as replay indexes.
fn into_trace(mut items: Vec<Item>, format: TraceFormat, block_size: usize) -> Trace {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| items[a].lower_ms.total_cmp(&items[b].lower_ms));
    let mut pos = vec![0usize; items.len()];
    for (p, &i) in order.iter().enumerate() {
        pos[i] = p;
    }
    let mut stats = SessionStats::default();
    let mut sessions_seen: HashMap<Arc<str>, usize> = HashMap::new();
    for it in &mut items {
        it.turn.parent_index = it.parent.map(|p| pos[p]);
        if let Some(a) = it.turn.agent.as_mut() {
            let a = Arc::make_mut(a);
            a.joins = it.joins.iter().map(|&j| pos[j]).collect();
            a.prior = it.prior.iter().map(|&j| pos[j]).collect();
        }
        *sessions_seen.entry(it.turn.id.clone()).or_default() += 1;
    }
    stats.sessions = sessions_seen.len();
    stats.turns = items.len();
    stats.max_turns = sessions_seen.values().copied().max().unwrap_or(0);
    let mut slots: Vec<Option<Item>> = items.into_iter().map(Some).collect();
    let mut requests = Vec::with_capacity(slots.len());
    let mut turns = Vec::with_capacity(slots.len());
    let mut chats = Vec::with_capacity(slots.len());
    for (p, &i) in order.iter().enumerate() {
        let Some(mut it) = slots[i].take() else {
            continue;
        };
        it.req.index = p;
        it.req.timestamp_ms = it.lower_ms;
        requests.push(it.req);
        turns.push(Some(it.turn));
        chats.push(it.chat);
    }
    let any_chat = chats.iter().any(Option::is_some);
    Trace {
        format,
        block_size,
        stats: TraceStats {
            rows: requests.len(),
            ..TraceStats::default()
        },
        requests,
        sessions: Sessions {
            turns,
            stats,
            cut: Vec::new(),
        },
        chats: if any_chat { chats } else { Vec::new() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::formats::weka;
    use crate::trace::model::TraceRequest;

    /// A conversation: a main agent (3 requests, 20 s gaps) with one joined subagent (2
    /// requests) after its first request; tools + system = 2 blocks of 16.
    fn conv(id: &str) -> Conversation {
        let r = |t: f64, ids: &str, think: f64| {
            format!(
                r#"{{"t":{t},"type":"s","in":48,"out":2,"hash_ids":[{ids}],"api_time":1.0,"think_time":{think}}}"#
            )
        };
        let text = format!(
            r#"{{"id":"{id}","block_size":16,"tool_tokens":16,"system_tokens":16,"requests":[{},{{"t":9.0,"type":"subagent","agent_id":"a","duration_ms":7000,"tool_tokens":16,"system_tokens":16,"requests":[{},{}]}},{},{}]}}"#,
            r(0.0, "1,2,3", 0.0),
            r(0.0, "1,2,9", 0.0),
            r(5.0, "1,2,9", 4.0),
            r(10.0, "1,2,3", 20.0),
            r(31.0, "1,2,3", 20.0),
        );
        weka::parse(&format!("{id}.json"), text.as_bytes()).unwrap()
    }

    fn corpus() -> Corpus {
        Corpus {
            conversations: vec![conv("c1"), conv("c2")],
            notes: Vec::new(),
            ..Corpus::default()
        }
    }

    #[test]
    fn every_conversation_once_with_its_links() {
        let (t, facts) = plan(
            &corpus(),
            TraceFormat::from_name("weka").unwrap(),
            &PlanOptions::default(),
        )
        .unwrap();
        assert_eq!(
            (facts.conversations, facts.requests, facts.joined_subagents),
            (2, 10, 2)
        );
        assert_eq!(t.requests.len(), 10);
        // Replay order is by lower bound, and every wait points at an earlier-or-equal bound.
        for (i, r) in t.requests.iter().enumerate() {
            assert_eq!(r.index, i);
            let turn = t.sessions.get(i).unwrap();
            for w in turn.waits() {
                assert!(
                    t.requests[w].timestamp_ms <= r.timestamp_ms,
                    "{i} waits for {w}"
                );
            }
        }
        let joining: Vec<_> = t
            .sessions
            .turns
            .iter()
            .flatten()
            .filter(|s| !s.agent.as_ref().unwrap().joins.is_empty())
            .collect();
        assert_eq!(joining.len(), 2);
        for j in joining {
            let a = j.agent.as_ref().unwrap();
            assert_eq!(&*a.agent, "main");
            assert_eq!(j.turn, 2);
            let sub = t.sessions.get(a.joins[0]).unwrap();
            assert_eq!(sub.id.to_string(), format!("{}::sa:a", a.conversation));
            assert_eq!(sub.turn, 2);
            // after_join: 10 s − max(0 + 1 s, subagent end 9 s) = 1 s.
            assert_eq!(j.trace_gap_ms, Some(1000.0));
        }
        // Local ids: the two conversations' id 1 are different blocks; the lower bound of a
        // main second request: 0 + spawn 1 s + 4 s (subagent) + 1 s gap = 6 s.
        let firsts: Vec<&TraceRequest> = t
            .requests
            .iter()
            .filter(|r| t.sessions.get(r.index).unwrap().parent_index.is_none())
            .collect();
        assert_eq!(firsts.len(), 2);
        assert_ne!(firsts[0].hash_ids.ids()[0], firsts[1].hash_ids.ids()[0]);
        let second = t
            .requests
            .iter()
            .find(|r| {
                t.sessions
                    .get(r.index)
                    .unwrap()
                    .agent
                    .as_ref()
                    .unwrap()
                    .joins
                    .len()
                    == 1
            })
            .unwrap();
        assert_eq!(second.timestamp_ms, 6000.0);
    }

    #[test]
    fn shared_prefix_users_rate_and_cap() {
        let opts = PlanOptions {
            share_system_prefix: true,
            ..PlanOptions::default()
        };
        let (t, _) = plan(&corpus(), TraceFormat::from_name("weka").unwrap(), &opts).unwrap();
        let firsts: Vec<&TraceRequest> = t
            .requests
            .iter()
            .filter(|r| t.sessions.get(r.index).unwrap().parent_index.is_none())
            .collect();
        // 32 prompt tokens of tools + system = 2 shared blocks; the third stays private.
        assert_eq!(firsts[0].hash_ids.ids()[..2], firsts[1].hash_ids.ids()[..2]);
        assert_ne!(firsts[0].hash_ids.ids()[2], firsts[1].hash_ids.ids()[2]);

        // One user: the second conversation waits for every agent's last request of the first.
        let users = PlanOptions {
            population: Population::Users(1),
            max_idle_gap_ms: Some(5000.0),
            ..PlanOptions::default()
        };
        let (t, facts) = plan(&corpus(), TraceFormat::from_name("weka").unwrap(), &users).unwrap();
        assert_eq!(facts.capped_gaps, 2, "the 20 s gap of each conversation");
        let later = t
            .sessions
            .turns
            .iter()
            .flatten()
            .find(|s| !s.agent.as_ref().unwrap().prior.is_empty())
            .unwrap();
        assert_eq!(later.agent.as_ref().unwrap().prior.len(), 2);
        assert!(t
            .sessions
            .turns
            .iter()
            .flatten()
            .all(|s| s.trace_gap_ms.is_none_or(|g| g <= 5000.0)));
        assert!(t.sessions.key(0).unwrap().starts_with("user:"));

        // Arrivals over 10 s at 1/s, repeats of the corpus laid out as new conversations.
        let rate = PlanOptions {
            population: Population::Rate(1.0),
            time_limit_ms: Some(10_000.0),
            seed: 3,
            ..PlanOptions::default()
        };
        let (t, facts) = plan(&corpus(), TraceFormat::from_name("weka").unwrap(), &rate).unwrap();
        assert!(facts.conversations > 2, "{facts:?}");
        assert!(t.sessions.turns.iter().flatten().any(|s| s
            .agent
            .as_ref()
            .unwrap()
            .conversation
            .contains('#')));
        // The same seed lays out the same population.
        assert_eq!(
            plan(&corpus(), TraceFormat::from_name("weka").unwrap(), &rate)
                .unwrap()
                .0
                .requests,
            t.requests
        );
    }

    /// Issue #41: a TraceLab sample of 2 conversations replayed with `--time-in-secs 60` and
    /// no population flag was laid out as 210,526 conversations (2,000,000 requests) all
    /// starting at once; without a population flag the corpus is laid out once, whatever the
    /// time limit or `--max-requests`.
    #[test]
    fn no_population_flag_never_repeats_the_corpus() {
        for (time_limit_ms, max_requests) in [(Some(60_000.0), None), (None, Some(1_000))] {
            let opts = PlanOptions {
                time_limit_ms,
                max_requests,
                max_idle_gap_ms: Some(1000.0),
                ..PlanOptions::default()
            };
            let (t, facts) =
                plan(&corpus(), TraceFormat::from_name("weka").unwrap(), &opts).unwrap();
            assert_eq!((facts.conversations, facts.requests), (2, 10), "{opts:?}");
            assert_eq!(t.requests.len(), 10);
            assert_eq!(facts.starting_at_once(), 2);
        }
    }

    /// A time limit lays out only the requests that can start before it: the same requests,
    /// ids and waits as the whole layout's first ones, the rest counted as left out. (Memory
    /// followed users × conversation length: a 10,000-user run with `-t 5` laid out 746,000
    /// requests to send 52,000.)
    #[test]
    fn a_time_limit_lays_out_only_what_can_start_before_it() {
        let weka = TraceFormat::from_name("weka").unwrap();
        let (whole, all) = plan(&corpus(), weka, &PlanOptions::default()).unwrap();
        let limit = 25_000.0;
        let opts = PlanOptions {
            time_limit_ms: Some(limit),
            ..PlanOptions::default()
        };
        let (t, facts) = plan(&corpus(), weka, &opts).unwrap();
        let before = whole.requests.iter().filter(|r| r.timestamp_ms < limit);
        let kept = before.count();
        assert!(kept > 0 && kept < whole.requests.len(), "{kept}");
        assert_eq!((t.requests.len(), facts.requests), (kept, kept));
        assert_eq!(facts.past_limit, all.requests - kept);
        assert_eq!(t.sessions.turns.len(), kept);
        for (i, r) in t.requests.iter().enumerate() {
            let w = &whole.requests[i];
            assert_eq!(
                (r.timestamp_ms, &r.hash_ids, r.input_length),
                (w.timestamp_ms, &w.hash_ids, w.input_length)
            );
            let (a, b) = (t.sessions.get(i).unwrap(), whole.sessions.get(i).unwrap());
            assert_eq!(a.waits().collect::<Vec<_>>(), b.waits().collect::<Vec<_>>());
            assert!(a.waits().all(|w| w < kept));
        }
        // With users the population repeats the corpus until every user is past the limit.
        let users = PlanOptions {
            population: Population::Users(3),
            time_limit_ms: Some(limit),
            ..PlanOptions::default()
        };
        let (t, facts) = plan(&corpus(), weka, &users).unwrap();
        assert!(t.requests.iter().all(|r| r.timestamp_ms < limit));
        assert!(facts.past_limit > 0);
    }

    /// A population that starts more conversations at once than the client can open
    /// connections for is refused, saying how to spread it.
    #[test]
    fn a_population_past_the_open_file_limit_is_refused() {
        let all = PlanFacts {
            conversations: 5000,
            ..PlanFacts::default()
        };
        let e = all.check_client_can_start(Some(1024)).unwrap_err();
        assert!(
            e.contains("5000 conversations all start at once") && e.contains("--users N"),
            "{e}"
        );
        assert!(all.check_client_can_start(Some(65536)).is_ok());
        assert!(all.check_client_can_start(None).is_ok());
        let users = PlanFacts {
            conversations: 5000,
            users: Some(900),
            ..PlanFacts::default()
        };
        assert!(users.check_client_can_start(Some(1024)).is_err());
        let rate = PlanFacts {
            session_rate: Some(50.0),
            ..all
        };
        assert!(rate.check_client_can_start(Some(1024)).is_ok());
        if cfg!(target_os = "linux") {
            assert!(open_file_limit().is_some_and(|n| n > 0));
        }
    }
}
