//! `analyze` of an agent corpus: its shape (conversations, requests, subagents and how deep
//! they nest, joined or background), its client gaps (their distribution and how many a cap
//! would cut), its trace-ideal prefix-cache hit ratio with conversations' blocks private and
//! with the system prompt + tools shared across conversations, and the load a population of
//! `--users` concurrent users implies; for a trace that recorded production's cache
//! (Copilot `tokens.cached`), production's cached share next to the ideal of the prefixes
//! request-sim rebuilt, and how many calls' segments missed their prompt length.
//!
//! Memory: the ideal cache keeps one entry per distinct block chain. In a corpus of `global`
//! ids the system prefix is never keyed apart, so both ratios walk the same chains and one map
//! serves both; when every id names one block after one prefix (`Corpus::dense_ids`: Copilot)
//! a block is keyed by its id alone, one bit each (a day of 1.4M calls: ~10 MB instead of
//! gigabytes of chain keys). Requests' ids are produced one request at a time from the
//! corpus's shared prefix storage (`trace::model::BlockIds`).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::analysis::{length_stats, LengthStats};
use crate::trace::model::{Agent, AgentRequest, Conversation, Corpus, HashScope, Production};
use crate::util::percentile_sorted;

/// What to compute.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentAnalyzeOptions {
    /// Gaps longer than this (ms) are counted as capped (`--max-idle-gap`); `None`: no cap.
    pub max_idle_gap_ms: Option<f64>,
    /// The population to size (`--users`); `None`: no concurrency estimate.
    pub users: Option<usize>,
    /// Percentiles of the distributions; empty = 50, 90, 99.
    pub percentiles: Vec<f64>,
    /// Key the ideal cache by block chains even when the corpus's ids are dense (the tests
    /// compare both).
    pub keyed_by_chain: bool,
}

impl Default for AgentAnalyzeOptions {
    fn default() -> Self {
        AgentAnalyzeOptions {
            max_idle_gap_ms: None,
            users: None,
            percentiles: vec![50.0, 90.0, 99.0],
            keyed_by_chain: false,
        }
    }
}

/// A distribution of milliseconds.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct MsStats {
    pub count: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

fn ms_stats(mut v: Vec<f64>) -> MsStats {
    if v.is_empty() {
        return MsStats::default();
    }
    v.sort_by(f64::total_cmp);
    MsStats {
        count: v.len(),
        mean_ms: v.iter().sum::<f64>() / v.len() as f64,
        p50_ms: percentile_sorted(&v, 50.0),
        p99_ms: percentile_sorted(&v, 99.0),
        max_ms: v[v.len() - 1],
    }
}

/// The client gaps between consecutive requests of an agent (not a subagent's spawn offset,
/// not the first request of a conversation).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GapStats {
    #[serde(flatten)]
    pub ms: MsStats,
    /// The cap asked for (`--max-idle-gap`, ms) and how many gaps are longer.
    pub cap_ms: Option<f64>,
    pub over_cap: usize,
    /// Gaps per rule that made them (`start_minus_server`, `after_join`, `delay`, ...).
    pub rules: BTreeMap<String, usize>,
}

/// The load of `users` concurrent users, each working through conversations one after the
/// other, from the trace's own times (recorded server times and gaps).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsersLoad {
    pub users: usize,
    /// Requests in flight on average: `users × (Σ server time / Σ conversation wall time)`.
    pub mean_in_flight: f64,
    /// The most requests one conversation had in flight at once, times `users`: an upper bound
    /// of the peak.
    pub peak_in_flight_bound: usize,
    /// Requests per second: `users × (requests / Σ conversation wall time)`.
    pub request_rate_per_s: f64,
    /// Conversations per second the population starts.
    pub conversation_rate_per_s: f64,
}

/// Everything `analyze` reports for an agent corpus; serialises to one JSON object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentAnalysis {
    pub conversations: usize,
    pub requests: usize,
    pub requests_per_conversation: LengthStats,
    /// Agents that are not a conversation's main agent.
    pub subagents: usize,
    /// Subagents their parent waits for, and the others (background).
    pub joined_subagents: usize,
    pub background_subagents: usize,
    pub conversations_with_subagents: usize,
    /// The deepest subagent (1 = spawned by a main agent), and agents per depth.
    pub max_depth: usize,
    pub agents_per_depth: Vec<usize>,
    pub input_length: LengthStats,
    pub output_length: LengthStats,
    pub gaps: GapStats,
    /// A subagent's start after the parent's request it follows.
    pub spawn_offsets: MsStats,
    /// Wall time of each conversation in the trace: its last recorded completion (or start).
    pub conversation_wall: MsStats,
    /// Trace-ideal prefix-cache hit ratio (infinite cache, tokens), each conversation's
    /// blocks its own for `local` ids.
    pub ideal_hit_ratio: f64,
    /// The same with the system prompt + tools blocks shared by conversations whose prompts
    /// start with as many such tokens (`--share-system-prefix`).
    pub ideal_hit_ratio_shared_prefix: f64,
    /// Requests whose prompt is given as messages (no hash ids: outside the hit ratios).
    pub message_requests: usize,
    /// The load of `--users` (`None` without it, or when the trace records no server times).
    pub users: Option<UsersLoad>,
    /// What production recorded (Copilot), next to the ideal of the rebuilt prefixes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub production: Option<ProductionCache>,
}

/// Production's prefix cache as the trace recorded it (`tokens.cached` over `tokens.prompt`)
/// next to the trace-ideal hit ratio of the prefixes request-sim built from the segments, and
/// the calls whose segments missed `tokens.prompt` (the rule: `docs/traces.md`, Copilot).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProductionCache {
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// Σ cached / Σ prompt: production's cached share.
    pub cached_share: f64,
    /// The ideal (infinite cache) hit ratio of the rebuilt prefixes (`ideal_hit_ratio`), and
    /// it minus production's share (percentage points; below 0: the rebuilt trace reuses less
    /// than production did).
    pub rebuilt_ideal_hit_ratio: f64,
    pub rebuilt_minus_production_pp: f64,
    /// Calls whose segments add up to less than `prompt` (template tokens: the difference is
    /// a final unshared segment), and those tokens.
    pub segments_short: usize,
    pub segments_short_tokens: u64,
    /// Calls whose segments add up to more than `prompt` (truncation: cut at `prompt`), and
    /// the tokens cut.
    pub segments_over: usize,
    pub segments_over_tokens: u64,
    /// Calls whose result is not `Success` (`UserCancel`, ...): kept and sent in full.
    pub not_success: BTreeMap<String, usize>,
}

impl ProductionCache {
    fn of(p: &Production, ideal: f64) -> ProductionCache {
        ProductionCache {
            prompt_tokens: p.prompt_tokens,
            cached_tokens: p.cached_tokens,
            cached_share: p.cached_share(),
            rebuilt_ideal_hit_ratio: ideal,
            rebuilt_minus_production_pp: 100.0 * (ideal - p.cached_share()),
            segments_short: p.segments_short,
            segments_short_tokens: p.segments_short_tokens,
            segments_over: p.segments_over,
            segments_over_tokens: p.segments_over_tokens,
            not_success: p.not_success.clone(),
        }
    }
}

/// FNV-style mixing of a chain of ids (an infinite cache remembers chains, not single ids).
fn mix(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15
}

/// Analyses `corpus`.
pub fn analyze_agents(corpus: &Corpus, opts: &AgentAnalyzeOptions) -> AgentAnalysis {
    let pcts = if opts.percentiles.is_empty() {
        vec![50.0, 90.0, 99.0]
    } else {
        opts.percentiles.clone()
    };
    let mut shape = Shape::default();
    let all_global = corpus
        .conversations
        .iter()
        .all(|c| c.hash_scope == HashScope::Global);
    let mut hits = Hits {
        all_global,
        dense: corpus
            .dense_ids
            .filter(|_| all_global && !opts.keyed_by_chain)
            .and_then(|n| usize::try_from(n.div_ceil(64)).ok())
            .map(|words| vec![0u64; words]),
        ..Hits::default()
    };
    for (ci, c) in corpus.conversations.iter().enumerate() {
        shape.add(c);
        hits.add(ci, c);
    }
    let requests = corpus.requests();
    let conversations = corpus.conversations.len();
    let users = opts
        .users
        .and_then(|n| shape.users_load(n, requests, conversations));
    let ideal = hits.ratio(hits.hit_private);
    let production = corpus
        .production
        .as_ref()
        .map(|p| ProductionCache::of(p, ideal));
    let all = || {
        corpus
            .conversations
            .iter()
            .flat_map(|c| &c.agents)
            .flat_map(|a| &a.requests)
    };
    AgentAnalysis {
        conversations,
        requests,
        requests_per_conversation: length_stats(shape.per_conv.into_iter(), &pcts),
        subagents: shape.joined + shape.background,
        joined_subagents: shape.joined,
        background_subagents: shape.background,
        conversations_with_subagents: shape.with_sub,
        max_depth: shape.depth_counts.len().saturating_sub(1),
        agents_per_depth: shape.depth_counts,
        input_length: length_stats(all().map(|r| r.input_length), &pcts),
        output_length: length_stats(all().map(|r| r.output_length), &pcts),
        gaps: GapStats {
            over_cap: opts
                .max_idle_gap_ms
                .map_or(0, |cap| shape.gaps.iter().filter(|&&g| g > cap).count()),
            cap_ms: opts.max_idle_gap_ms,
            ms: ms_stats(shape.gaps),
            rules: shape.rules,
        },
        spawn_offsets: ms_stats(shape.offsets),
        conversation_wall: ms_stats(shape.walls),
        ideal_hit_ratio: ideal,
        ideal_hit_ratio_shared_prefix: hits.ratio(hits.hit_shared),
        message_requests: hits.message_requests,
        users,
        production,
    }
}

/// The shape of the conversations, their gaps and their times, summed over the corpus.
#[derive(Default)]
struct Shape {
    /// Agents per depth (0: the main agents).
    depth_counts: Vec<usize>,
    joined: usize,
    background: usize,
    with_sub: usize,
    /// The client gaps after an agent's first request, and the rules that made them.
    gaps: Vec<f64>,
    rules: BTreeMap<String, usize>,
    offsets: Vec<f64>,
    walls: Vec<f64>,
    per_conv: Vec<u32>,
    /// Recorded server time, and the most requests one conversation had in flight at once.
    busy_ms: f64,
    peak: usize,
}

impl Shape {
    /// Adds conversation `c`.
    fn add(&mut self, c: &Conversation) {
        self.per_conv.push(c.requests() as u32);
        if c.agents.len() > 1 {
            self.with_sub += 1;
        }
        let mut wall = 0f64;
        let mut intervals: Vec<(f64, f64)> = Vec::new();
        for (ai, a) in c.agents.iter().enumerate() {
            self.agent(c, ai);
            for (k, r) in a.requests.iter().enumerate() {
                if k > 0 {
                    self.gaps.push(r.gap.ms);
                    *self.rules.entry(r.gap.rule.name().to_owned()).or_insert(0) += 1;
                }
                let end = r.trace_ms + r.server_ms.unwrap_or(0.0);
                wall = wall.max(end);
                if let Some(s) = r.server_ms {
                    self.busy_ms += s;
                    intervals.push((r.trace_ms, end));
                }
            }
        }
        self.walls.push(wall);
        self.peak = self.peak.max(max_overlap(&mut intervals));
    }

    /// Counts agent `ai` of `c`: its depth, and for a subagent its join and spawn offset.
    fn agent(&mut self, c: &Conversation, ai: usize) {
        let mut d = 0;
        let mut cur = ai;
        while let Some(l) = &c.agents[cur].parent {
            cur = l.agent;
            d += 1;
        }
        if self.depth_counts.len() <= d {
            self.depth_counts.resize(d + 1, 0);
        }
        self.depth_counts[d] += 1;
        if let Some(l) = &c.agents[ai].parent {
            if l.join.is_some() {
                self.joined += 1;
            } else {
                self.background += 1;
            }
            self.offsets.push(l.spawn_offset_ms);
        }
    }

    /// The load of `n` users (none when the trace records no wall or server time).
    fn users_load(&self, n: usize, requests: usize, conversations: usize) -> Option<UsersLoad> {
        let total_wall: f64 = self.walls.iter().sum();
        (total_wall > 0.0 && self.busy_ms > 0.0).then(|| UsersLoad {
            users: n,
            mean_in_flight: n as f64 * self.busy_ms / total_wall,
            peak_in_flight_bound: n * self.peak,
            request_rate_per_s: n as f64 * requests as f64 / (total_wall / 1e3),
            conversation_rate_per_s: n as f64 * conversations as f64 / (total_wall / 1e3),
        })
    }
}

/// The trace-ideal prefix cache (infinite, tokens): with each conversation's blocks private
/// (`local` ids) and with the system prompt + tools blocks shared.
#[derive(Default)]
struct Hits {
    /// Chain key of a block → the most tokens a request put in it (as the replay's
    /// [`super::IdealCache`]: a cached block shorter than the request's counts its own tokens,
    /// and matching stops there).
    seen_private: HashMap<u64, u64>,
    seen_shared: HashMap<u64, u64>,
    input_tokens: u64,
    hit_private: u64,
    hit_shared: u64,
    /// Requests given as messages (no hash ids: outside the hit ratios).
    message_requests: usize,
    /// One request's ids, produced from the corpus's storage (reused).
    ids: Vec<u64>,
    /// Every conversation's ids are `global`: no system prefix is keyed apart.
    all_global: bool,
    /// Dense ids (`Corpus::dense_ids`, with `all_global`): one bit per id, set once a request
    /// held the block whole.
    dense: Option<Vec<u64>>,
}

impl Hits {
    /// Sends conversation `ci` (`c`) through the cache: every request in trace order within
    /// the conversation.
    fn add(&mut self, ci: usize, c: &Conversation) {
        let mut order: Vec<(f64, usize, usize)> = Vec::new();
        for (ai, a) in c.agents.iter().enumerate() {
            for (k, r) in a.requests.iter().enumerate() {
                order.push((r.trace_ms, ai, k));
            }
        }
        order.sort_by(|x, y| x.0.total_cmp(&y.0).then((x.1, x.2).cmp(&(y.1, y.2))));
        for (_, ai, k) in order {
            self.request(ci, c, &c.agents[ai], k);
        }
    }

    /// Request `k` of agent `a` of conversation `ci` (`c`).
    fn request(&mut self, ci: usize, c: &Conversation, a: &Agent, k: usize) {
        let r = &a.requests[k];
        if r.messages.is_some() {
            self.message_requests += 1;
            return;
        }
        let block = c.block_size.max(1) as u64;
        self.input_tokens += u64::from(r.input_length);
        if self.dense.is_some() {
            self.dense_request(r, block);
            return;
        }
        let sys = match (a.system_tokens, a.tool_tokens) {
            (None, None) if a.is_main() => {
                c.system_tokens.unwrap_or(0) + c.tool_tokens.unwrap_or(0)
            }
            (s, t) => s.unwrap_or(0) + t.unwrap_or(0),
        };
        let shared_blocks = u64::from(sys) / block;
        let ns = match c.hash_scope {
            HashScope::Local => ci as u64 + 1,
            HashScope::Global => 0,
        };
        let shared = shared_blocks > 0 && c.hash_scope == HashScope::Local;
        let mut hp = ns;
        // with the prefix shared, its blocks are keyed by its token count, not by the
        // conversation; the blocks after it are the conversation's again
        let mut hs = if shared {
            mix(u64::MAX, u64::from(sys))
        } else {
            ns
        };
        let (mut private_hit, mut shared_hit) = (true, true);
        // a prefix cache: a block hits only after whole hits, as far as its cached tokens go;
        // every block is stored
        let step = |seen: &mut HashMap<u64, u64>, key: u64, tokens: u64, matching: &mut bool| {
            let have = seen.entry(key).or_insert(0);
            let hit = if *matching { (*have).min(tokens) } else { 0 };
            *matching &= *have > 0 && *have >= tokens;
            *have = (*have).max(tokens.max(1));
            hit
        };
        let input = u64::from(r.input_length);
        let mut ids = std::mem::take(&mut self.ids);
        ids.clear();
        r.hash_ids.extend_into(&mut ids, usize::MAX);
        for (i, &id) in ids.iter().enumerate() {
            let i = i as u64;
            let tokens = input.saturating_sub(i * block).min(block);
            hp = mix(hp, id);
            let hit = step(&mut self.seen_private, hp, tokens, &mut private_hit);
            self.hit_private += hit;
            if self.all_global {
                // the same chains as the private ones (see the module's note on memory)
                self.hit_shared += hit;
                continue;
            }
            hs = match (shared, i.cmp(&shared_blocks)) {
                (true, std::cmp::Ordering::Less) => mix(hs, i),
                (true, _) => mix(mix(hs, ns), id),
                (false, _) => mix(hs, id),
            };
            self.hit_shared += step(&mut self.seen_shared, hs, tokens, &mut shared_hit);
        }
        self.ids = ids;
    }

    /// [`Hits::request`] in a corpus of dense ids: a block is keyed by its id (always preceded
    /// by the same ids, so the chain adds nothing). A whole block seen is a bit; a partial
    /// block's id is in its one request only, so it is never looked up again and not stored.
    /// The same hits as the chain keys: a hit takes the request's tokens of a block cached
    /// whole, and matching stops at the first miss.
    fn dense_request(&mut self, r: &AgentRequest, block: u64) {
        let Some(seen) = self.dense.as_mut() else {
            return;
        };
        let input = u64::from(r.input_length);
        let mut ids = std::mem::take(&mut self.ids);
        ids.clear();
        r.hash_ids.extend_into(&mut ids, usize::MAX);
        let (mut matching, mut hit) = (true, 0u64);
        for (i, &id) in ids.iter().enumerate() {
            let tokens = input.saturating_sub(i as u64 * block).min(block);
            let bit = 1u64 << (id % 64);
            let Some(word) = usize::try_from(id / 64).ok().and_then(|w| seen.get_mut(w)) else {
                matching = false;
                continue;
            };
            if matching && *word & bit != 0 {
                hit += tokens;
            } else {
                matching = false;
            }
            if tokens == block {
                *word |= bit;
            }
        }
        self.hit_private += hit;
        self.hit_shared += hit;
        self.ids = ids;
    }

    /// `hit` tokens of every input token (0 without any).
    fn ratio(&self, hit: u64) -> f64 {
        if self.input_tokens == 0 {
            0.0
        } else {
            hit as f64 / self.input_tokens as f64
        }
    }
}

/// The most intervals overlapping at one instant (ends are exclusive).
fn max_overlap(intervals: &mut [(f64, f64)]) -> usize {
    let mut events: Vec<(f64, i32)> = Vec::with_capacity(intervals.len() * 2);
    for &(s, e) in intervals.iter() {
        events.push((s, 1));
        events.push((e.max(s), -1));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut best) = (0i32, 0i32);
    for (_, d) in events {
        cur += d;
        best = best.max(cur);
    }
    best as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::IdealCache;
    use crate::trace::formats::weka;
    use crate::trace::pipeline::plan::{plan, PlanOptions};
    use crate::trace::TraceFormat;

    /// Issue #41: a partial last block reused by a longer prompt hit whole in `analyze`
    /// (32 of 56 tokens, 57.14%) where the replay's ideal (and the same rows as a flat trace)
    /// counts only the tokens the cached block held: 16 + 8 of 56, 42.86%.
    #[test]
    fn a_partial_last_block_hits_only_its_cached_tokens() {
        let text = r#"{"id":"c","block_size":16,"requests":[
            {"t":0.0,"type":"s","in":24,"out":2,"hash_ids":[1,2],"api_time":1.0,"think_time":0.0},
            {"t":2.0,"type":"s","in":32,"out":2,"hash_ids":[1,2],"api_time":1.0,"think_time":1.0}]}"#;
        let corpus = Corpus {
            conversations: vec![weka::parse("c.json", text.as_bytes()).unwrap()],
            notes: Vec::new(),
            ..Corpus::default()
        };
        let a = analyze_agents(&corpus, &AgentAnalyzeOptions::default());
        assert_eq!(format!("{:.2}", 100.0 * a.ideal_hit_ratio), "42.86");
        // The replay's trace-ideal over the same corpus laid out.
        let (t, _) = plan(
            &corpus,
            TraceFormat::from_name("weka").unwrap(),
            &PlanOptions::default(),
        )
        .unwrap();
        let mut cache = IdealCache::new(t.block_size, IdealCache::MAX_BLOCKS);
        let hit: u32 = t.requests.iter().map(|r| cache.hits(r).unwrap()).sum();
        let input: u32 = t.requests.iter().map(|r| r.input_length).sum();
        assert_eq!((hit, input), (24, 56));
        assert_eq!(a.ideal_hit_ratio, f64::from(hit) / f64::from(input));
    }
}
