//! Trace analysis: what a user checks before replaying (`request-sim analyze TRACE`).
//!
//! Everything is computed from the trace's requests in replay order (rebased times, normalised
//! hash ids) held as [`Columns`], a few numbers per request: `request-sim analyze` streams
//! them from the file ([`read_columns`]), so a trace of millions of rows needs no more memory
//! than that; [`analyze`] takes a loaded [`Trace`]. One pass, plus one for all LRU sizes.
//!
//! ## Prefix-cache hit ratio (definition)
//!
//! A request's prompt is the chain of blocks `b0, b1, ..., b(n-1)` (one per hash id, `block_size`
//! tokens each except the last, which holds the rest of `input_length`; tokens beyond the hashed
//! blocks are unique to the request). Block `i` is a **hit** when the whole chain `b0..=bi` was
//! part of an earlier request's prompt (same ids at the same positions) and still is in the
//! cache; matching stops at the first miss, as in vLLM/SGLang prefix caching. The hit ratio is
//!
//! `Σ tokens of hit blocks ÷ Σ input_length` over all requests,
//!
//! where a hit block counts its token count in the current request (`block_size`, or fewer for
//! the last partial block). If the cached copy of a block is shorter than this request needs
//! (an earlier request's partial last block), its cached tokens count and the match ends there.
//! The block ratio (`fully hit blocks ÷ hashed blocks`) is reported too.
//! The infinite cache never evicts; the LRU cache holds a given number of tokens
//! (`capacity / block_size` whole blocks) and evicts the least recently used block. A request
//! touches its blocks from last to first, so a prefix is always more recent than its tails and
//! tails are evicted first (as vLLM frees blocks in reverse order). All LRU sizes are computed
//! in one pass from LRU stack distances, so a finer sweep costs nothing extra.
//!
//! ## Routing what-if (`--instances N --routing POLICY`)
//!
//! N instances, each with its own LRU prefix cache of the given capacity; every request goes to
//! the instance a routing policy picks (`llm_common::routing`, the same code as llm-sim's built-in
//! router, so an online run through `llm-sim --router` chooses alike), and its hits are counted
//! against that instance's cache only, with the definition above. `least-loaded` sees no load
//! offline (all equal) and so goes round-robin; `session` uses the trace's session ids (the id
//! request-sim sends as `user` with `--session-user`) and sends requests without one
//! round-robin. A row "one cache of N × capacity" gives the ceiling: what a single cache of
//! the cluster's total size would hit.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use serde::ser::SerializeMap;
use serde::Serialize;

use llm_common::routing::{Policy, PrefixIndex, RouteRequest, Router};

use crate::trace::error::TraceError;
use crate::trace::model::{SessionTurn, Trace, TraceFormat, TraceRequest, TraceStats};
use crate::trace::options::LoadOptions;
use crate::trace::pipeline::{ReorderWindow, TraceStream};
use crate::util::percentile_sorted;

/// What to compute.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalyzeOptions {
    /// LRU cache sizes to simulate, in tokens; empty = a default sweep of powers of two from
    /// 16 Ki tokens up to the first size that holds every distinct block of the trace.
    pub cache_sizes_tokens: Vec<u64>,
    /// Percentiles of the length distributions; empty = 50, 90, 99.
    pub percentiles: Vec<f64>,
    /// Width of the request-rate series buckets in seconds (default 60). Widened automatically
    /// so that the series has at most [`MAX_RATE_POINTS`] points.
    pub rate_bucket_s: f64,
    /// The routing what-if, when asked.
    pub routing: Option<RoutingOptions>,
}

/// What the routing what-if simulates.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingOptions {
    /// Instances, each with its own prefix cache (at least 1).
    pub instances: usize,
    /// Policies to compare; empty = all of them.
    pub policies: Vec<Policy>,
    /// Prefix-cache capacity of one instance, tokens (whole blocks of the trace's block size).
    pub capacity_tokens: u64,
}

/// Most points in [`Analysis::rate_series`].
pub const MAX_RATE_POINTS: usize = 10_000;

impl Default for AnalyzeOptions {
    fn default() -> Self {
        AnalyzeOptions {
            cache_sizes_tokens: Vec::new(),
            percentiles: Vec::new(),
            rate_bucket_s: 60.0,
            routing: None,
        }
    }
}

/// Percentiles as `{"p50": v, "p90": v, ...}` in the requested order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Percentiles(pub Vec<(f64, f64)>);

impl Percentiles {
    /// The value at percentile `p`, if it was computed.
    pub fn get(&self, p: f64) -> Option<f64> {
        self.0.iter().find(|(q, _)| *q == p).map(|&(_, v)| v)
    }
}

impl Serialize for Percentiles {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (p, v) in &self.0 {
            m.serialize_entry(&format!("p{p}"), v)?;
        }
        m.end()
    }
}

/// Distribution of a token count over the requests.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LengthStats {
    pub mean: f64,
    pub min: u64,
    pub max: u64,
    pub total: u64,
    /// Linear interpolation at index `p/100 * (n-1)` of the sorted values.
    pub percentiles: Percentiles,
    /// Every request's value, ascending (for the length plots; not in the JSON output).
    #[serde(skip)]
    pub sorted: Vec<u32>,
}

/// Sessions and turns (Bailian traces).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SessionStats {
    /// Conversations: requests linked through `parent_chat_id` count as one.
    pub sessions: usize,
    /// Sessions with more than one request.
    pub multi_turn_sessions: usize,
    /// Requests per session.
    pub mean_turns_per_session: f64,
    pub max_turns_per_session: usize,
    /// Largest `turn` value in the trace.
    pub max_turn: u32,
    /// Requests with `parent_chat_id` -1.
    pub root_requests: usize,
    /// Requests whose parent is not an earlier request of the trace (cut off by the trace
    /// window or slicing); each starts its own session here.
    pub orphan_requests: usize,
    /// Requests per `type` (text/search/image/file; `unknown` when absent).
    pub types: BTreeMap<String, usize>,
}

/// The think times of a trace's sessions, seconds.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ThinkTimes {
    /// Later turns (with a parent in the trace).
    pub turns: usize,
    pub mean: f64,
    pub percentiles: Percentiles,
}

/// Trace-ideal prefix-cache hit ratio with an infinite cache (see the module docs).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct PrefixCacheStats {
    pub hit_tokens: u64,
    pub input_tokens: u64,
    /// `hit_tokens / input_tokens`.
    pub hit_ratio: f64,
    pub hit_blocks: u64,
    /// Hashed blocks over all requests.
    pub blocks: u64,
    /// `hit_blocks / blocks`.
    pub block_hit_ratio: f64,
    /// Token hit ratio over the second half of the requests (replay order) only, with the
    /// cache warmed by the first half: shows how much of the gap to a steady-state figure is
    /// the cold start of the trace window.
    pub warm_hit_ratio: f64,
    /// Tokens an infinite cache ends up holding: distinct prefix blocks × block size.
    pub footprint_tokens: u64,
}

/// One LRU cache size of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LruPoint {
    pub capacity_tokens: u64,
    /// `capacity_tokens / block_size` (whole blocks).
    pub capacity_blocks: u64,
    pub hit_tokens: u64,
    pub hit_ratio: f64,
    pub block_hit_ratio: f64,
}

/// One bucket of the request-rate series.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RatePoint {
    /// Bucket start, seconds of trace time.
    pub start_s: f64,
    pub requests: u64,
    /// `requests / bucket_s` (the last bucket may be partly past the end of the trace).
    pub rate_per_s: f64,
}

/// Request rate over trace time.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct RateSeries {
    pub bucket_s: f64,
    pub points: Vec<RatePoint>,
}

/// Everything `analyze` reports. Serialises to one JSON object (`--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub format: TraceFormat,
    pub block_size: usize,
    pub requests: usize,
    /// Last request time − first request time.
    pub duration_s: f64,
    /// `requests / duration_s` (`None` when all requests share one timestamp).
    pub mean_rate_per_s: Option<f64>,
    /// Most requests in one 1-s window `[k, k+1)` s of trace time.
    pub peak_rate_per_s: u64,
    /// Start of that window (the first one when several tie).
    pub peak_rate_at_s: f64,
    /// Distinct timestamps (traces with coarse timestamps send requests in bursts).
    pub distinct_timestamps: usize,
    /// Most requests sharing one timestamp (the largest burst sent at once).
    pub max_requests_per_timestamp: usize,
    /// Coefficient of variation of the gaps between consecutive requests (1 for Poisson
    /// arrivals, more for burstier ones); `None` with fewer than three requests.
    pub burstiness: Option<f64>,
    /// The sessions' think times (the gap before each later turn, seconds): mean and
    /// percentiles; `None` without sessions.
    pub think_time_s: Option<ThinkTimes>,
    pub input_length: LengthStats,
    pub output_length: LengthStats,
    /// Requests that carry at least one hash id.
    pub requests_with_hash_ids: usize,
    pub distinct_hash_ids: usize,
    /// Distinct chains `b0..=bi` (= distinct cacheable blocks).
    pub distinct_prefix_blocks: usize,
    pub sessions: Option<SessionStats>,
    pub prefix_cache: PrefixCacheStats,
    pub lru_sweep: Vec<LruPoint>,
    pub rate_series: RateSeries,
    /// The loader's counts (rules applied, skipped rows).
    pub trace_stats: TraceStats,
    /// The routing what-if (`--instances`), when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<RoutingAnalysis>,
}

/// The routing what-if: per-instance prefix caches under each policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoutingAnalysis {
    pub instances: usize,
    /// Per instance.
    pub capacity_tokens: u64,
    /// Per instance, `capacity_tokens / block_size`.
    pub capacity_blocks: u64,
    pub policies: Vec<RoutingPoint>,
    /// One shared LRU cache of `instances × capacity` for all requests: a reference, not a
    /// bound (split caches can keep hits one LRU evicts); the bound of any policy is the
    /// infinite cache, `prefix_cache.hit_ratio`.
    pub single_cache_hit_ratio: f64,
}

/// One policy of the routing what-if.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoutingPoint {
    pub policy: String,
    pub hit_tokens: u64,
    /// `hit_tokens / Σ input_length`.
    pub hit_ratio: f64,
    pub block_hit_ratio: f64,
    /// Requests each instance received.
    pub requests_per_instance: Vec<u64>,
    /// Input tokens each instance received.
    pub input_tokens_per_instance: Vec<u64>,
}

// ---------------------------------------------------------------------------------------------

pub(crate) fn length_stats(values: impl Iterator<Item = u32>, percentiles: &[f64]) -> LengthStats {
    let mut v: Vec<f64> = values.map(f64::from).collect();
    if v.is_empty() {
        return LengthStats::default();
    }
    v.sort_by(f64::total_cmp);
    let total: f64 = v.iter().sum();
    LengthStats {
        mean: total / v.len() as f64,
        min: v[0] as u64,
        max: v[v.len() - 1] as u64,
        total: total as u64,
        percentiles: Percentiles(
            percentiles
                .iter()
                .map(|&p| (p, percentile_sorted(&v, p)))
                .collect(),
        ),
        sorted: v.iter().map(|&x| x as u32).collect(),
    }
}

// Trace ids are not attacker-chosen network input, so SipHash's flooding resistance is not
// worth its cost here (it was half of the analysis time): rustc-hash's fast integer hasher.
type IdMap<K, V> = rustc_hash::FxHashMap<K, V>;
type IdSet<K> = rustc_hash::FxHashSet<K>;

/// Prefix-chain structure of a trace: every request's blocks as dense node ids of a trie keyed
/// by (parent node, hash id), so equal ids at equal positions after equal prefixes are one node.
struct Chains {
    /// Node ids of all requests, concatenated.
    nodes: Vec<u32>,
    /// `nodes[offsets[r]..offsets[r+1]]` are request r's blocks.
    offsets: Vec<usize>,
    /// Each request's input length (its blocks' token counts follow from it).
    inputs: Vec<u32>,
    block: u64,
    node_count: usize,
}

/// Token counts of a request's blocks: `block` each, the last one the rest of the input.
fn block_tokens(
    input: u32,
    block: u64,
    n: usize,
) -> impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + Clone {
    (0..n).map(move |i| {
        let left = u64::from(input).saturating_sub(i as u64 * block);
        // <= input_length, a u32.
        left.min(block) as u32
    })
}

/// [`Chains`] built one request at a time (replay order).
struct ChainsBuilder {
    nodes: Vec<u32>,
    offsets: Vec<usize>,
    inputs: Vec<u32>,
    /// (parent node, hash id) -> node.
    trie: IdMap<(u32, u64), u32>,
}

impl ChainsBuilder {
    fn new() -> ChainsBuilder {
        ChainsBuilder {
            nodes: Vec::new(),
            offsets: vec![0],
            inputs: Vec::new(),
            trie: IdMap::default(),
        }
    }

    fn push(&mut self, hash_ids: &[u64], input_length: u32) {
        let mut parent = u32::MAX;
        for &id in hash_ids {
            let next = self.trie.len() as u32;
            let node = *self.trie.entry((parent, id)).or_insert(next);
            self.nodes.push(node);
            parent = node;
        }
        self.offsets.push(self.nodes.len());
        self.inputs.push(input_length);
    }

    fn finish(self, block_size: usize) -> Chains {
        Chains {
            node_count: self.trie.len(),
            nodes: self.nodes,
            offsets: self.offsets,
            inputs: self.inputs,
            block: block_size.max(1) as u64,
        }
    }
}

impl Chains {
    fn build(trace: &Trace) -> Chains {
        let mut b = ChainsBuilder::new();
        let total: usize = trace.requests.iter().map(|r| r.hash_ids.len()).sum();
        b.nodes.reserve(total);
        // Shared blocks make the distinct count much smaller than `total`; the map grows as needed.
        b.trie.reserve(total / 4);
        for r in &trace.requests {
            b.push(&r.hash_ids, r.input_length);
        }
        b.finish(trace.block_size)
    }

    /// Request r's block nodes and their token counts.
    fn request(
        &self,
        r: usize,
    ) -> (
        &[u32],
        impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + Clone,
    ) {
        let nodes = &self.nodes[self.offsets[r]..self.offsets[r + 1]];
        (nodes, block_tokens(self.inputs[r], self.block, nodes.len()))
    }

    fn requests(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Infinite cache: per-request hit tokens and total fully hit blocks.
    fn infinite(&self) -> (Vec<u32>, u64) {
        // Tokens each block held when cached (the most seen so far); 0 = never seen.
        let mut stored = vec![0u32; self.node_count];
        let mut hits = Vec::with_capacity(self.requests());
        let mut hit_blocks = 0u64;
        for r in 0..self.requests() {
            let (nodes, tokens) = self.request(r);
            let (t, b) = match_prefix(nodes, tokens.clone(), &stored);
            hits.push(u32::try_from(t).unwrap_or(u32::MAX));
            hit_blocks += b;
            for (&n, cur) in nodes.iter().zip(tokens) {
                let s = &mut stored[n as usize];
                *s = (*s).max(cur.max(1));
            }
        }
        (hits, hit_blocks)
    }

    /// LRU caches of every capacity in `caps` (blocks, ascending) in one pass: total hit tokens
    /// and fully hit blocks per capacity.
    ///
    /// Every request touches all its blocks whatever the capacity, so the recency order (the
    /// LRU stack) is the same for every capacity and a cache of C blocks holds exactly the C
    /// most recent blocks (Mattson et al., 1970). A block hits in a cache of C blocks iff its
    /// stack distance — the number of distinct blocks used since its last use, counted with a
    /// Fenwick tree over use times — is below C; a chain hits up to the first block whose
    /// distance (or any earlier block's) reaches C. A cached block's length is the longest any
    /// earlier request used (as for the infinite cache).
    fn lru_sweep(&self, caps: &[u64]) -> Vec<(u64, u64)> {
        let mut uses = Fenwick::new(self.nodes.len());
        // Use time (1-based) of each block's last use; 0 = never used.
        let mut last = vec![0usize; self.node_count];
        let mut stored = vec![0u32; self.node_count];
        let (mut distinct, mut time) = (0u64, 0usize);
        // Hits bucketed by the first capacity index at which they occur.
        let mut tok = vec![0u64; caps.len() + 1];
        let mut blk = vec![0u64; caps.len() + 1];
        for r in 0..self.requests() {
            let (nodes, tokens) = self.request(r);
            let mut depth = 0u64;
            for (&x, cur) in nodes.iter().zip(tokens.clone()) {
                let x = x as usize;
                if last[x] == 0 {
                    break;
                }
                // Distinct blocks used after x's last use = x's 0-based LRU position.
                let distance = distinct - uses.prefix(last[x]);
                depth = depth.max(distance);
                let j = caps.partition_point(|&c| c <= depth);
                let have = stored[x];
                tok[j] += u64::from(have.min(cur));
                if have < cur {
                    break;
                }
                blk[j] += 1;
            }
            for (&x, cur) in nodes.iter().zip(tokens).rev() {
                let x = x as usize;
                time += 1;
                if last[x] == 0 {
                    distinct += 1;
                } else {
                    uses.remove(last[x]);
                }
                uses.add(time);
                last[x] = time;
                stored[x] = stored[x].max(cur.max(1));
            }
        }
        let (mut t, mut b) = (0u64, 0u64);
        (0..caps.len())
            .map(|j| {
                t += tok[j];
                b += blk[j];
                (t, b)
            })
            .collect()
    }

    /// Direct simulation of one LRU cache of `capacity` blocks (the test oracle for
    /// [`Chains::lru_sweep`]): total hit tokens and fully hit blocks.
    #[cfg(test)]
    fn lru(&self, capacity: usize) -> (u64, u64) {
        let n = self.node_count;
        // Recency list as a vector of nodes, most recent first (slow but obviously right).
        let mut order: Vec<usize> = Vec::new();
        let mut stored = vec![0u32; n];
        let (mut hit_tokens, mut hit_blocks) = (0u64, 0u64);
        for r in 0..self.requests() {
            let (nodes, tokens) = self.request(r);
            for (&x, cur) in nodes.iter().zip(tokens.clone()) {
                let x = x as usize;
                if !order.contains(&x) {
                    break;
                }
                hit_tokens += u64::from(stored[x].min(cur));
                if stored[x] < cur {
                    break;
                }
                hit_blocks += 1;
            }
            for (&x, cur) in nodes.iter().zip(tokens).rev() {
                let x = x as usize;
                order.retain(|&y| y != x);
                order.insert(0, x);
                stored[x] = stored[x].max(cur.max(1));
            }
            order.truncate(capacity);
        }
        (hit_tokens, hit_blocks)
    }
}

/// Fenwick (binary indexed) tree of 0/1 marks over positions `1..=n`.
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick {
            tree: vec![0; n + 1],
        }
    }

    fn add(&mut self, mut i: usize) {
        while i < self.tree.len() {
            self.tree[i] += 1;
            i += i & i.wrapping_neg();
        }
    }

    /// Clears a mark set by `add(i)`.
    fn remove(&mut self, mut i: usize) {
        while i < self.tree.len() {
            self.tree[i] -= 1;
            i += i & i.wrapping_neg();
        }
    }

    /// Number of marks at positions `1..=i`.
    fn prefix(&self, mut i: usize) -> u64 {
        let mut sum = 0u64;
        while i > 0 {
            sum += u64::from(self.tree[i]);
            i &= i - 1;
        }
        sum
    }
}

/// Leading hit tokens and fully hit blocks of one request, given the tokens each block holds in
/// the cache (`stored`, 0 = not cached). A block cached with fewer tokens than this request
/// needs (an earlier partial last block) hits those tokens and ends the match.
fn match_prefix(nodes: &[u32], tokens: impl Iterator<Item = u32>, stored: &[u32]) -> (u64, u64) {
    let (mut hit_tokens, mut hit_blocks) = (0u64, 0u64);
    for (&n, cur) in nodes.iter().zip(tokens) {
        let have = stored[n as usize];
        if have == 0 {
            break;
        }
        hit_tokens += u64::from(have.min(cur));
        if have < cur {
            break;
        }
        hit_blocks += 1;
    }
    (hit_tokens, hit_blocks)
}

/// Trace-ideal prefix-cache hits per request (tokens, infinite cache, replay order): what a
/// server with an unbounded prefix cache would report as cached tokens. See the module docs.
pub fn ideal_prefix_hits(trace: &Trace) -> Vec<u32> {
    Chains::build(trace).infinite().0
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn default_sweep(footprint_tokens: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut s: u64 = 16 << 10;
    loop {
        sizes.push(s);
        if s >= footprint_tokens || s >= 1 << 50 {
            return sizes;
        }
        s *= 2;
    }
}

/// The session facts `analyze` reports, gathered one request at a time.
#[derive(Default)]
struct SessionFacts {
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
struct BailianFacts {
    st: SessionStats,
    root_of: IdMap<i64, i64>,
    size_of: IdMap<i64, usize>,
}

impl SessionFacts {
    fn push(&mut self, r: &TraceRequest, turn: Option<&SessionTurn>) {
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
    fn key(&self, r: usize) -> Option<&str> {
        let k = *self.keys.get(r)?;
        self.key_names.get(k as usize).map(|k| &**k)
    }

    /// Bailian links when the trace has them, else session ids, else none.
    fn stats(&self) -> Option<SessionStats> {
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
    fn think_times(&mut self, percentiles: &[f64]) -> Option<ThinkTimes> {
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

/// Coefficient of variation of the gaps between consecutive (sorted) times.
fn burstiness(times_s: &[f64]) -> Option<f64> {
    if times_s.len() < 3 {
        return None;
    }
    let gaps: Vec<f64> = times_s.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    if mean <= 0.0 {
        return None;
    }
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
    Some(var.sqrt() / mean)
}

fn rate_series(times_s: &[f64], duration_s: f64, bucket_s: f64) -> RateSeries {
    let mut bucket = if bucket_s.is_finite() && bucket_s > 0.0 {
        bucket_s
    } else {
        60.0
    };
    while duration_s / bucket >= MAX_RATE_POINTS as f64 {
        bucket *= 2.0;
    }
    let first = times_s.first().copied().unwrap_or(0.0);
    let n = ((duration_s / bucket).floor() as usize + 1).min(MAX_RATE_POINTS);
    let mut counts = vec![0u64; n];
    for &t in times_s {
        let i = (((t - first) / bucket).floor().max(0.0) as usize).min(n - 1);
        counts[i] += 1;
    }
    RateSeries {
        bucket_s: bucket,
        points: counts
            .into_iter()
            .enumerate()
            .map(|(i, c)| RatePoint {
                start_s: i as f64 * bucket,
                requests: c,
                rate_per_s: c as f64 / bucket,
            })
            .collect(),
    }
}

/// Hits of every request when each goes to the instance `route` picks, each instance an LRU of
/// `capacity_blocks` blocks: (hit tokens, fully hit blocks, requests and input tokens per
/// instance).
fn routed_hits(
    chains: &Chains,
    instances: usize,
    capacity_blocks: usize,
    mut route: impl FnMut(usize, &[u64]) -> usize,
) -> (u64, u64, Vec<u64>, Vec<u64>) {
    let mut index = PrefixIndex::new(instances, capacity_blocks);
    let (mut hit_tokens, mut hit_blocks) = (0u64, 0u64);
    let mut per_instance = vec![0u64; instances];
    let mut input_per_instance = vec![0u64; instances];
    let mut blocks: Vec<u64> = Vec::new();
    let mut tokens: Vec<u32> = Vec::new();
    let mut stored: Vec<u32> = Vec::new();
    for r in 0..chains.requests() {
        let (nodes, toks) = chains.request(r);
        blocks.clear();
        blocks.extend(nodes.iter().map(|&x| u64::from(x)));
        tokens.clear();
        tokens.extend(toks);
        // A cached block holds at least one token (as in `Chains::infinite`).
        stored.clear();
        stored.extend(tokens.iter().map(|&t| t.max(1)));
        let i = route(r, &blocks);
        per_instance[i] += 1;
        input_per_instance[i] += u64::from(chains.inputs[r]);
        for (&b, &cur) in blocks.iter().zip(&tokens) {
            let Some(have) = index.stored(i, b) else {
                break;
            };
            hit_tokens += u64::from(have.min(cur));
            if have < cur {
                break;
            }
            hit_blocks += 1;
        }
        index.record(i, &blocks, &stored);
    }
    (hit_tokens, hit_blocks, per_instance, input_per_instance)
}

/// The routing what-if of `opts` (see the module docs).
fn routing_analysis(
    chains: &Chains,
    sessions: &SessionFacts,
    opts: &RoutingOptions,
) -> RoutingAnalysis {
    let n = opts.instances.max(1);
    let block = chains.block;
    let capacity_blocks = opts.capacity_tokens / block;
    let cap = usize::try_from(capacity_blocks).unwrap_or(usize::MAX);
    let input_tokens: u64 = chains.inputs.iter().map(|&x| u64::from(x)).sum();
    let blocks = chains.nodes.len() as u64;
    let policies = if opts.policies.is_empty() {
        Policy::ALL.to_vec()
    } else {
        opts.policies.clone()
    };
    let points = policies
        .iter()
        .map(|&policy| {
            let mut router = Router::new(policy, n, cap);
            let (hit_tokens, hit_blocks, per, input) = routed_hits(chains, n, cap, |r, b| {
                let session = sessions.key(r);
                router.route(&RouteRequest { session, blocks: b }, &[])
            });
            RoutingPoint {
                policy: policy.name().to_owned(),
                hit_tokens,
                hit_ratio: ratio(hit_tokens, input_tokens),
                block_hit_ratio: ratio(hit_blocks, blocks),
                requests_per_instance: per,
                input_tokens_per_instance: input,
            }
        })
        .collect();
    let (single, _, _, _) = routed_hits(chains, 1, cap.saturating_mul(n), |_, _| 0);
    RoutingAnalysis {
        instances: n,
        capacity_tokens: opts.capacity_tokens,
        capacity_blocks,
        policies: points,
        single_cache_hit_ratio: ratio(single, input_tokens),
    }
}

/// The requests of a trace as `analyze` needs them, in replay order: a few numbers per request
/// and its blocks as nodes of one trie, about 30 bytes a request plus 4 a block (a loaded row
/// takes some 600 while the trace loads), so that a trace of millions of rows is analysed as
/// it streams ([`Columns::push`] one request at a time) rather than loaded whole.
pub struct Columns {
    format: TraceFormat,
    block_size: usize,
    times_ms: Vec<f64>,
    outputs: Vec<u32>,
    chains: ChainsBuilder,
    distinct_ids: IdSet<u64>,
    with_ids: usize,
    sessions: SessionFacts,
    /// The loader's counts (set once the trace is read).
    pub stats: TraceStats,
}

impl Columns {
    pub fn new(format: TraceFormat, block_size: usize) -> Columns {
        Columns {
            format,
            block_size,
            times_ms: Vec::new(),
            outputs: Vec::new(),
            chains: ChainsBuilder::new(),
            distinct_ids: IdSet::default(),
            with_ids: 0,
            sessions: SessionFacts::default(),
            stats: TraceStats::default(),
        }
    }

    /// The next request in replay order, with its session turn.
    pub fn push(&mut self, r: &TraceRequest, turn: Option<&SessionTurn>) {
        self.times_ms.push(r.timestamp_ms);
        self.outputs.push(r.output_length);
        self.chains.push(&r.hash_ids, r.input_length);
        self.distinct_ids.extend(r.hash_ids.iter().copied());
        self.with_ids += usize::from(!r.hash_ids.is_empty());
        self.sessions.push(r, turn);
    }

    /// A loaded trace's requests.
    pub fn from_trace(trace: &Trace) -> Columns {
        let mut c = Columns::new(trace.format, trace.block_size);
        let total: usize = trace.requests.iter().map(|r| r.hash_ids.len()).sum();
        c.chains.nodes.reserve(total);
        for r in &trace.requests {
            c.push(r, trace.sessions.get(r.index));
        }
        c.stats = trace.stats.clone();
        c
    }
}

/// The requests of the trace at `path` as [`Columns`]: streamed through the pipeline a replay
/// streams with (its default reorder window), so memory grows with the columns only; loaded
/// whole when the trace needs it (Bailian parent links), when a file turns out to be out of
/// time order by more than the window (the whole load sorts it), and from stdin (`-`, which
/// cannot be read twice).
pub fn read_columns(path: &Path, opts: &LoadOptions) -> Result<Columns, TraceError> {
    if path == Path::new("-") {
        return Ok(Columns::from_trace(&crate::trace::load(path, opts)?));
    }
    let stream = TraceStream::open(path, opts, ReorderWindow::default())?;
    if stream.needs_whole() {
        return Ok(Columns::from_trace(&stream.into_whole()?));
    }
    let mut cols = Columns::new(stream.format(), stream.block_size());
    let stats = stream.stats_handle();
    for p in stream {
        match p {
            Ok(p) => cols.push(&p.req, p.turn.as_ref()),
            Err(e) if e.is_out_of_order() => {
                return Ok(Columns::from_trace(&crate::trace::load(path, opts)?));
            }
            Err(e) => return Err(e),
        }
    }
    cols.stats = stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(cols)
}

/// Analyses a loaded trace.
pub fn analyze(trace: &Trace, opts: &AnalyzeOptions) -> Analysis {
    analyze_columns(Columns::from_trace(trace), opts)
}

/// Analyses a trace's requests (see [`Columns`]).
pub fn analyze_columns(cols: Columns, opts: &AnalyzeOptions) -> Analysis {
    let Columns {
        format,
        block_size,
        times_ms,
        outputs,
        chains,
        distinct_ids,
        with_ids,
        mut sessions,
        stats,
    } = cols;
    let requests = times_ms.len();
    let distinct_hash_ids = distinct_ids.len();
    drop(distinct_ids);
    let percentiles: Vec<f64> = if opts.percentiles.is_empty() {
        vec![50.0, 90.0, 99.0]
    } else {
        opts.percentiles.clone()
    };

    // Timing. Requests are in replay order, but do not rely on it.
    let mut times_s: Vec<f64> = times_ms.iter().map(|t| t / 1000.0).collect();
    drop(times_ms);
    times_s.sort_by(f64::total_cmp);
    let (first, last) = match (times_s.first(), times_s.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => (0.0, 0.0),
    };
    let duration_s = last - first;
    let mean_rate_per_s = (duration_s > 0.0).then(|| requests as f64 / duration_s);
    let (mut distinct_timestamps, mut max_same) = (0usize, 0usize);
    let mut i = 0;
    while i < times_s.len() {
        let j = i + times_s[i..]
            .iter()
            .take_while(|&&t| t == times_s[i])
            .count();
        distinct_timestamps += 1;
        max_same = max_same.max(j - i);
        i = j;
    }
    let (mut peak, mut peak_at) = (0u64, 0.0);
    let mut i = 0;
    while i < times_s.len() {
        let w = ((times_s[i] - first).floor()).max(0.0);
        let mut j = i;
        while j < times_s.len() && ((times_s[j] - first).floor()).max(0.0) == w {
            j += 1;
        }
        if (j - i) as u64 > peak {
            peak = (j - i) as u64;
            peak_at = w;
        }
        i = j;
    }

    // Blocks and caches.
    let chains = chains.finish(block_size);
    let (hits, hit_blocks) = chains.infinite();
    let hit_tokens: u64 = hits.iter().map(|&h| u64::from(h)).sum();
    let input_tokens: u64 = chains.inputs.iter().map(|&x| u64::from(x)).sum();
    let half = requests / 2;
    let warm_hit: u64 = hits[half..].iter().map(|&h| u64::from(h)).sum();
    let warm_input: u64 = chains.inputs[half..].iter().map(|&x| u64::from(x)).sum();
    drop(hits);
    let blocks = chains.nodes.len() as u64;
    let block = chains.block;
    let footprint_tokens = chains.node_count as u64 * block;
    let sizes = if opts.cache_sizes_tokens.is_empty() {
        default_sweep(footprint_tokens)
    } else {
        opts.cache_sizes_tokens.clone()
    };
    let capacities: Vec<u64> = sizes.iter().map(|&t| t / block).collect();
    let mut sorted = capacities.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let swept = chains.lru_sweep(&sorted);
    let lru_sweep = sizes
        .iter()
        .zip(&capacities)
        .map(|(&capacity_tokens, &capacity_blocks)| {
            let (h, hb) = swept[sorted.partition_point(|&c| c < capacity_blocks)];
            LruPoint {
                capacity_tokens,
                capacity_blocks,
                hit_tokens: h,
                hit_ratio: ratio(h, input_tokens),
                block_hit_ratio: ratio(hb, blocks),
            }
        })
        .collect();

    Analysis {
        format,
        block_size,
        requests,
        duration_s,
        mean_rate_per_s,
        peak_rate_per_s: peak,
        peak_rate_at_s: peak_at,
        distinct_timestamps,
        max_requests_per_timestamp: max_same,
        burstiness: burstiness(&times_s),
        think_time_s: sessions.think_times(&percentiles),
        input_length: length_stats(chains.inputs.iter().copied(), &percentiles),
        output_length: length_stats(outputs.into_iter(), &percentiles),
        requests_with_hash_ids: with_ids,
        distinct_hash_ids,
        distinct_prefix_blocks: chains.node_count,
        sessions: sessions.stats(),
        prefix_cache: PrefixCacheStats {
            hit_tokens,
            input_tokens,
            hit_ratio: ratio(hit_tokens, input_tokens),
            hit_blocks,
            blocks,
            block_hit_ratio: ratio(hit_blocks, blocks),
            warm_hit_ratio: ratio(warm_hit, warm_input),
            footprint_tokens,
        },
        lru_sweep,
        rate_series: rate_series(&times_s, duration_s, opts.rate_bucket_s),
        trace_stats: stats,
        routing: opts
            .routing
            .as_ref()
            .map(|o| routing_analysis(&chains, &sessions, o)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceRequest;

    fn trace(block: usize, reqs: &[(f64, u32, &[u64])]) -> Trace {
        Trace {
            format: TraceFormat::Mooncake,
            block_size: block,
            requests: reqs
                .iter()
                .enumerate()
                .map(|(i, &(t, input, ids))| TraceRequest {
                    index: i,
                    line: i + 1,
                    timestamp_ms: t,
                    input_length: input,
                    output_length: 1,
                    hash_ids: ids.to_vec(),
                    session: None,
                })
                .collect(),
            stats: TraceStats::default(),
            sessions: Default::default(),
            chats: Vec::new(),
        }
    }

    #[test]
    fn format_names_round_trip() {
        for f in TraceFormat::ALL {
            assert_eq!(TraceFormat::from_name(f.name()), Some(f));
            assert_eq!(serde_json::to_value(f).unwrap(), f.name());
        }
        assert_eq!(
            TraceFormat::from_name("Mooncake"),
            Some(TraceFormat::Mooncake)
        );
        assert_eq!(TraceFormat::from_name("sharegpt"), None);
    }

    #[test]
    fn infinite_cache_counts_chain_prefixes() {
        // block 10. r0: [1,2] 15 tokens (10 + 5). r1: [1,2,3] 30 tokens.
        // r2: [9,2] : 9 misses, so 2 (at a different chain) misses too. r3: [1,5]: hits 1.
        let t = trace(
            10,
            &[
                (0.0, 15, &[1, 2]),
                (1.0, 30, &[1, 2, 3]),
                (2.0, 20, &[9, 2]),
                (3.0, 12, &[1, 5]),
            ],
        );
        // r1: (1) hits 10; (1,2) was cached with 5 tokens (r0's partial last block), so it hits 5
        // tokens and ends the match.
        assert_eq!(ideal_prefix_hits(&t), vec![0, 15, 0, 10]);
        let a = analyze(&t, &AnalyzeOptions::default());
        assert_eq!(a.prefix_cache.hit_tokens, 25);
        assert_eq!(a.prefix_cache.input_tokens, 77);
        assert_eq!(a.prefix_cache.hit_blocks, 2);
        assert_eq!(a.prefix_cache.blocks, 9);
        assert_eq!(a.distinct_hash_ids, 5);
        assert_eq!(a.distinct_prefix_blocks, 6); // (1) (1,2) (1,2,3) (9) (9,2) (1,5)
        assert_eq!(a.prefix_cache.footprint_tokens, 60);
    }

    #[test]
    fn lru_evicts_least_recent_tails_first() {
        // block 1, capacity 2 blocks.
        // r0 [1,2,3]: miss; cache keeps the two most recent = (1),(1,2).
        // r1 [1,2,3]: hits (1),(1,2) then (1,2,3) misses -> 2 hits.
        // r2 [4]: miss; cache now (4) and (1) [(1,2) evicted as least recent].
        // r3 [1,2]: hits (1) only.
        let t = trace(
            1,
            &[
                (0.0, 3, &[1, 2, 3]),
                (1.0, 3, &[1, 2, 3]),
                (2.0, 1, &[4]),
                (3.0, 2, &[1, 2]),
            ],
        );
        let opts = AnalyzeOptions {
            cache_sizes_tokens: vec![0, 2, 100],
            ..Default::default()
        };
        let a = analyze(&t, &opts);
        let hits: Vec<u64> = a.lru_sweep.iter().map(|p| p.hit_tokens).collect();
        assert_eq!(hits, vec![0, 3, 3 + 2]);
        assert_eq!(a.lru_sweep[1].capacity_blocks, 2);
        assert_eq!(a.prefix_cache.hit_tokens, 5);
    }

    #[test]
    fn one_pass_sweep_equals_direct_lru_simulation() {
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rnd = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut evicting_rounds = 0;
        for round in 0..200 {
            // Small id alphabets so chains are shared, diverge and repeat; random lengths so
            // partial blocks, missing tails and surplus ids all occur.
            let block = 1 + rnd(4) as usize;
            let alphabet = 2 + rnd(6);
            let reqs: Vec<(f64, u32, Vec<u64>)> = (0..(1 + rnd(40)))
                .map(|i| {
                    let n = rnd(7) as usize;
                    let ids: Vec<u64> = (0..n).map(|_| rnd(alphabet)).collect();
                    let input = 1 + rnd((n * block + 3) as u64) as u32;
                    (i as f64, input, ids)
                })
                .collect();
            let refs: Vec<(f64, u32, &[u64])> = reqs
                .iter()
                .map(|(t, i, ids)| (*t, *i, ids.as_slice()))
                .collect();
            let t = trace(block, &refs);
            let chains = Chains::build(&t);
            let caps: Vec<u64> = (0..=chains.node_count as u64 + 2).collect();
            let swept = chains.lru_sweep(&caps);
            for (&c, &got) in caps.iter().zip(&swept) {
                assert_eq!(got, chains.lru(c as usize), "round {round}, capacity {c}");
            }
            let (hits, hit_blocks) = chains.infinite();
            let inf = (hits.iter().map(|&h| u64::from(h)).sum::<u64>(), hit_blocks);
            assert_eq!(*swept.last().unwrap(), inf, "round {round}");
            // Rounds where eviction matters: some capacity hits less than infinite, but not 0.
            if swept.iter().any(|&(h, _)| h > 0 && h < inf.0) {
                evicting_rounds += 1;
            }
        }
        assert!(evicting_rounds > 50, "{evicting_rounds}");
    }

    #[test]
    fn rates_and_lengths() {
        let t = trace(
            512,
            &[
                (0.0, 100, &[]),
                (200.0, 200, &[]),
                (900.0, 300, &[]),
                (1000.0, 400, &[]),
                (61_500.0, 500, &[]),
            ],
        );
        let a = analyze(&t, &AnalyzeOptions::default());
        assert_eq!(a.requests, 5);
        assert_eq!(a.duration_s, 61.5);
        assert!((a.mean_rate_per_s.unwrap() - 5.0 / 61.5).abs() < 1e-12);
        assert_eq!((a.peak_rate_per_s, a.peak_rate_at_s), (3, 0.0));
        assert_eq!(a.input_length.mean, 300.0);
        assert_eq!(a.input_length.percentiles.get(50.0), Some(300.0));
        assert_eq!(a.input_length.percentiles.get(90.0), Some(460.0));
        assert_eq!(a.input_length.max, 500);
        assert_eq!(a.rate_series.bucket_s, 60.0);
        let counts: Vec<u64> = a.rate_series.points.iter().map(|p| p.requests).collect();
        assert_eq!(counts, vec![4, 1]);
        assert_eq!(a.prefix_cache.hit_ratio, 0.0);
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["input_length"]["percentiles"]["p90"], 460.0);
        let text = crate::report::render_analysis(&a);
        assert!(text.contains("Requests:"), "{text}");
        assert!(
            text.contains("Peak request rate (req/s, 1-s window):   3 (at 0 s)\n"),
            "{text}"
        );
    }

    #[test]
    fn empty_trace_does_not_panic() {
        let t = trace(16, &[]);
        let a = analyze(&t, &AnalyzeOptions::default());
        assert_eq!(a.requests, 0);
        let _ = crate::report::render_analysis(&a);
    }
}
