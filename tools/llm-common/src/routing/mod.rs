//! Request routing across the instances of a cluster, for what-if studies: the policies of
//! llm-sim's built-in router (`--router`) and of request-sim's offline twin (`request-sim
//! analyze --instances N --routing POLICY`). One implementation serves both, so the two agree
//! by construction wherever the decision does not depend on live load.
//!
//! - `round-robin`: instances in turn.
//! - `least-loaded`: the instance with the fewest requests in flight (waiting + running);
//!   ties go to the next one in round-robin order (so with equal loads, as offline, it is
//!   round-robin).
//! - `session`: the session key (a header or the OpenAI `user` field online, the trace's
//!   session id offline) hashed to an instance, so a conversation stays on one instance;
//!   requests without a key go round-robin.
//! - `prefix-aware`: the instance whose prefix cache holds the longest run of the request's
//!   leading blocks, as the router's own index estimates it (every instance's blocks as an LRU
//!   of its capacity, fed with the blocks of the requests routed to it, as llm-d's approximate
//!   prefix scorer does); ties go to the least loaded, then round-robin. Three guards keep
//!   every instance within its share when every request shares a first block (a system
//!   prompt): an instance that has received nothing yet takes the next request; an instance
//!   under 1 / [`PREFIX_LOAD_BOUND`] of its share of the requests routed so far takes the next
//!   request (without it, an instance whose first request held nothing the others match — a
//!   client's calibration request — never won a match again and got 1 of 201); otherwise only
//!   instances under [`PREFIX_LOAD_BOUND`] times their share compete. So each instance
//!   receives between 1 / [`PREFIX_LOAD_BOUND`] and [`PREFIX_LOAD_BOUND`] times an even share
//!   of the requests, give or take one (counts the router keeps itself, so offline and online
//!   agree).
//!
//! The smg policies (`cache_aware`, `prefix_hash`, `consistent_hashing`, `power_of_two`,
//! `round_robin`, `random`, spelled as the Shepherd Model Gateway spells them) follow that
//! gateway's HTTP routing, so that llm-sim behind its own router predicts a cluster behind smg;
//! see [`SmgConfig`] for their thresholds and docs/llm-sim.md for what follows smg's code and
//! what is approximated. They read the request text (smg's routing text, [`RouteRequest::text`])
//! where smg does; offline, without text, `cache_aware` and `prefix_hash` work on the block
//! hashes instead (the way smg's gRPC path works on token ids).
//!
//! Real deployments route with their own gateway (llm-d, Dynamo, smg, a Kubernetes service);
//! these policies exist to answer "what would routing X buy on this trace?".

use std::num::NonZeroUsize;

use lru::LruCache;

use crate::util::mix64;

/// `prefix-aware` routes only to instances that have received at most this many times their
/// share of the requests so far (+ 1): without a bound, one prefix every request shares (a
/// system prompt) would send all traffic to the instance that saw it first (consistent
/// hashing with bounded loads, Mirrokni, Thorup and Zadimoghaddam 2018, applied to prefixes).
pub const PREFIX_LOAD_BOUND: f64 = 1.5;

/// A routing policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// `round-robin`, also smg's `round_robin` (the same rule: instances in turn).
    RoundRobin,
    LeastLoaded,
    Session,
    PrefixAware,
    /// smg's `cache_aware` (HTTP: an approximate radix tree over the request text).
    CacheAware,
    /// smg's `prefix_hash`: the request's head hashed onto a ring, bounded load.
    PrefixHash,
    /// smg's `consistent_hashing`: the routing key on a ring, random without one.
    ConsistentHashing,
    /// smg's `power_of_two`: the less loaded of two random instances.
    PowerOfTwo,
    /// smg's `random`.
    Random,
}

impl Policy {
    /// The block-based policies: the offline analysis's default set (`request-sim analyze
    /// --routing` without a policy), in the order of their names.
    pub const ALL: [Policy; 4] = [
        Policy::RoundRobin,
        Policy::LeastLoaded,
        Policy::Session,
        Policy::PrefixAware,
    ];

    /// The policies named as smg names them (`round_robin` is [`Policy::RoundRobin`]).
    pub const SMG: [Policy; 6] = [
        Policy::CacheAware,
        Policy::PrefixHash,
        Policy::ConsistentHashing,
        Policy::PowerOfTwo,
        Policy::RoundRobin,
        Policy::Random,
    ];

    /// Every policy.
    pub const KNOWN: [Policy; 9] = [
        Policy::RoundRobin,
        Policy::LeastLoaded,
        Policy::Session,
        Policy::PrefixAware,
        Policy::CacheAware,
        Policy::PrefixHash,
        Policy::ConsistentHashing,
        Policy::PowerOfTwo,
        Policy::Random,
    ];

    /// The command-line name (`round-robin` for [`Policy::RoundRobin`], which also answers to
    /// `round_robin`).
    pub fn name(self) -> &'static str {
        match self {
            Policy::RoundRobin => "round-robin",
            Policy::LeastLoaded => "least-loaded",
            Policy::Session => "session",
            Policy::PrefixAware => "prefix-aware",
            Policy::CacheAware => "cache_aware",
            Policy::PrefixHash => "prefix_hash",
            Policy::ConsistentHashing => "consistent_hashing",
            Policy::PowerOfTwo => "power_of_two",
            Policy::Random => "random",
        }
    }

    /// smg's name of the policy, if smg has it.
    pub fn smg_name(self) -> Option<&'static str> {
        match self {
            Policy::RoundRobin => Some("round_robin"),
            Policy::CacheAware
            | Policy::PrefixHash
            | Policy::ConsistentHashing
            | Policy::PowerOfTwo
            | Policy::Random => Some(self.name()),
            Policy::LeastLoaded | Policy::Session | Policy::PrefixAware => None,
        }
    }

    /// The policy of a command-line name (llm-sim's or smg's).
    pub fn from_name(name: &str) -> Option<Policy> {
        Policy::KNOWN
            .into_iter()
            .find(|p| p.name() == name || p.smg_name() == Some(name))
    }

    /// The policy routes on the request text (smg's routing text) when it has one.
    pub fn needs_text(self) -> bool {
        matches!(self, Policy::CacheAware | Policy::PrefixHash)
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> Result<Policy, String> {
        Policy::from_name(s).ok_or_else(|| {
            let mut names: Vec<&str> = Policy::KNOWN.iter().map(|p| p.name()).collect();
            names.push("round_robin");
            format!("unknown routing policy `{s}` (known: {})", names.join(", "))
        })
    }
}

/// Per-instance LRU sets of cached blocks: what a prefix-aware router believes each instance's
/// prefix cache holds, and what request-sim's offline analysis counts hits against. Blocks are
/// chained hashes (equal hash = equal prefix up to and including the block); each carries a
/// value (request-sim: the tokens the block held when cached).
pub struct PrefixIndex {
    caches: Vec<Option<LruCache<u64, u32>>>,
}

impl PrefixIndex {
    /// `instances` empty caches of `capacity_blocks` blocks each (0: nothing is ever cached).
    pub fn new(instances: usize, capacity_blocks: usize) -> PrefixIndex {
        PrefixIndex {
            caches: (0..instances)
                .map(|_| NonZeroUsize::new(capacity_blocks).map(LruCache::new))
                .collect(),
        }
    }

    /// How many leading `blocks` instance `i` holds (without touching their recency).
    pub fn matched(&self, i: usize, blocks: &[u64]) -> usize {
        match self.caches.get(i).and_then(Option::as_ref) {
            Some(c) => blocks.iter().take_while(|b| c.contains(b)).count(),
            None => 0,
        }
    }

    /// The value stored with `block` on instance `i`, if it is cached.
    pub fn stored(&self, i: usize, block: u64) -> Option<u32> {
        self.caches
            .get(i)
            .and_then(Option::as_ref)
            .and_then(|c| c.peek(&block).copied())
    }

    /// Instance `i` now holds `blocks` (most recently used; the first block most recent of all,
    /// so a prefix outlives its tails, as an engine frees a sequence's blocks tail first).
    /// `values[k]` goes with `blocks[k]`, kept as the maximum of the old and new value.
    pub fn record(&mut self, i: usize, blocks: &[u64], values: &[u32]) {
        let Some(Some(c)) = self.caches.get_mut(i) else {
            return;
        };
        for (k, &b) in blocks.iter().enumerate().rev() {
            let v = values.get(k).copied().unwrap_or(0);
            match c.get_mut(&b) {
                Some(old) => *old = (*old).max(v),
                None => {
                    c.put(b, v);
                }
            }
        }
    }

    /// Forgets every block (after the instances' caches were reset).
    pub fn clear(&mut self) {
        for c in self.caches.iter_mut().flatten() {
            c.clear();
        }
    }
}

/// What a policy looks at in a request.
#[derive(Clone, Copy, Debug, Default)]
pub struct RouteRequest<'a> {
    /// The session key, if the request has one (`session`).
    pub session: Option<&'a str>,
    /// Chained hashes of the prompt's blocks (`prefix-aware`; `cache_aware` and `prefix_hash`
    /// when there is no text).
    pub blocks: &'a [u64],
    /// The text smg routes an HTTP request on (`cache_aware`, `prefix_hash`): a chat request's
    /// message contents joined by spaces, a completion's prompt (see llm-sim's router).
    pub text: Option<&'a str>,
    /// smg's routing key (`consistent_hashing`): the first routing-key header present, else
    /// the `authorization`, `x-forwarded-for` or `cookie` header.
    pub routing_key: Option<&'a str>,
    /// When the request arrived, in seconds since the router started (`cache_aware`'s
    /// periodic tree eviction).
    pub at_secs: f64,
}

/// The thresholds of the smg policies, named and defaulted as `smg launch` names and
/// defaults them (smg 1.13).
#[derive(Clone, Debug, PartialEq)]
pub struct SmgConfig {
    /// `--cache-threshold`: `cache_aware` pins a request to the instance holding its longest
    /// match when matched chars / request chars exceeds this.
    pub cache_threshold: f64,
    /// `--balance-abs-threshold`: the spill gate's absolute part (requests over the mean),
    /// capped at the in-flight count's natural swing (see [`spill_margin`]).
    pub balance_abs_threshold: u64,
    /// `--balance-rel-threshold`: the spill gate's relative part (a multiple of the mean).
    pub balance_rel_threshold: f64,
    /// `--max-tree-size`: the approximate tree's size bound (chars, or blocks offline) that
    /// each eviction brings it under.
    pub max_tree_size: usize,
    /// `--eviction-interval-secs`: how often the tree is evicted (0: never).
    pub eviction_interval_secs: u64,
    /// `--prefix-token-count`: `prefix_hash` hashes this many tokens; an untokenized (HTTP)
    /// request four times as many characters.
    pub prefix_token_count: usize,
    /// `--prefix-hash-load-factor`: `prefix_hash` leaves the hashed instance when its load
    /// exceeds the mean (incoming request included) times this...
    pub prefix_hash_load_factor: f64,
    /// `--prefix-hash-balance-abs-threshold`: ...and the mean by this many requests.
    pub prefix_hash_balance_abs_threshold: u64,
    /// Seed of `random`, `power_of_two` and `consistent_hashing` without a key.
    pub seed: u64,
}

impl Default for SmgConfig {
    fn default() -> SmgConfig {
        SmgConfig {
            cache_threshold: 0.3,
            balance_abs_threshold: 64,
            balance_rel_threshold: 1.5,
            max_tree_size: 1 << 26,
            eviction_interval_secs: 60,
            prefix_token_count: 256,
            prefix_hash_load_factor: 1.25,
            prefix_hash_balance_abs_threshold: 10,
            seed: 0x5eed,
        }
    }
}

/// Block size (tokens) the offline `prefix_hash` assumes to turn `--prefix-token-count` into
/// blocks (smg's and vLLM's default page size).
pub const OFFLINE_BLOCK_TOKENS: usize = 16;

/// The spill gate's absolute margin at a fleet mean of `mean` in-flight requests: `abs`, capped
/// at two standard deviations of a Poisson count at that mean (2 sqrt(mean)), the cap never
/// under 4 (smg 1.13 `--balance-abs-threshold`: "capped at the in-flight count's natural swing
/// at the pool's current mean (two standard deviations, never under four unless this value is
/// lower)").
pub fn spill_margin(abs: u64, mean: f64) -> f64 {
    let swing = (2.0 * mean.max(0.0).sqrt()).max(4.0);
    (abs as f64).min(swing)
}

/// The decisions of one policy over a sequence of requests.
pub struct Router {
    policy: Policy,
    instances: usize,
    cursor: usize,
    /// Requests routed to each instance so far (the `prefix-aware` bound; smg's
    /// `processed` count, its min-load tie-break).
    routed: Vec<u64>,
    /// The router's estimate of each instance's prefix cache (`prefix-aware` only).
    index: Option<PrefixIndex>,
    smg: SmgConfig,
    rng: u64,
    /// `cache_aware`'s approximate trees: over chars (requests with text) and over blocks
    /// (requests without, offline).
    text_tree: ApproxTree<char>,
    block_tree: ApproxTree<u64>,
    /// When `cache_aware` next evicts (seconds since the start).
    next_eviction: f64,
    /// The ring of `prefix_hash` and `consistent_hashing`.
    ring: Option<Ring>,
}

impl Router {
    /// A router over `instances` (at least 1) instances whose prefix caches hold
    /// `capacity_blocks` blocks each, the smg policies with smg's defaults.
    pub fn new(policy: Policy, instances: usize, capacity_blocks: usize) -> Router {
        Router::with_smg(policy, instances, capacity_blocks, SmgConfig::default())
    }

    /// [`Router::new`] with the smg policies' thresholds `smg`.
    pub fn with_smg(
        policy: Policy,
        instances: usize,
        capacity_blocks: usize,
        smg: SmgConfig,
    ) -> Router {
        let instances = instances.max(1);
        Router {
            policy,
            instances,
            cursor: 0,
            routed: vec![0; instances],
            index: (policy == Policy::PrefixAware)
                .then(|| PrefixIndex::new(instances, capacity_blocks)),
            rng: smg.seed,
            next_eviction: smg.eviction_interval_secs as f64,
            smg,
            text_tree: ApproxTree::new(instances),
            block_tree: ApproxTree::new(instances),
            ring: matches!(policy, Policy::PrefixHash | Policy::ConsistentHashing)
                .then(|| Ring::new(instances)),
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    pub fn instances(&self) -> usize {
        self.instances
    }

    /// Requests routed to each instance so far.
    pub fn routed(&self) -> &[u64] {
        &self.routed
    }

    /// The instances' prefix caches were reset: `prefix-aware` forgets what its index learned
    /// and its counts. The smg policies keep their state, as smg does (it never learns of an
    /// engine's cache reset).
    pub fn reset(&mut self) {
        if self.policy.smg_name().is_some() && self.policy != Policy::RoundRobin {
            return;
        }
        if let Some(ix) = &mut self.index {
            ix.clear();
        }
        self.routed.iter_mut().for_each(|c| *c = 0);
    }

    /// The instance for `req`, given each instance's load (requests in flight; missing
    /// entries count as 0). The request's blocks are then recorded as cached on it.
    pub fn route(&mut self, req: &RouteRequest<'_>, loads: &[u64]) -> usize {
        let n = self.instances;
        let load = |i: usize| loads.get(i).copied().unwrap_or(0);
        let pick = match (self.policy, req.session) {
            (Policy::Session, Some(key)) => (session_hash(key) % n as u64) as usize,
            (Policy::RoundRobin, _) | (Policy::Session, None) => self.cursor % n,
            (Policy::LeastLoaded, _) => self.least_loaded(|_| true, load),
            (Policy::PrefixAware, _) => self.prefix_aware(req, load),
            (Policy::CacheAware, _) => self.cache_aware(req, load),
            (Policy::PrefixHash, _) => self.prefix_hash(req, load),
            (Policy::ConsistentHashing, _) => match (req.routing_key, &self.ring) {
                (Some(key), Some(ring)) => ring.find(text_hash(key)),
                _ => self.random(n),
            },
            (Policy::PowerOfTwo, _) => {
                if n == 1 {
                    0
                } else {
                    let a = self.random(n);
                    let b = (a + 1 + self.random(n - 1)) % n;
                    if load(a) <= load(b) {
                        a
                    } else {
                        b
                    }
                }
            }
            (Policy::Random, _) => self.random(n),
        };
        self.cursor = (self.cursor + 1) % n;
        self.routed[pick] += 1;
        if let Some(ix) = &mut self.index {
            ix.record(pick, req.blocks, &[]);
        }
        pick
    }

    fn prefix_aware(&self, req: &RouteRequest<'_>, load: impl Fn(usize) -> u64) -> usize {
        let n = self.instances;
        // Bounded load: only instances that have not taken more than their share
        // (PREFIX_LOAD_BOUND x the mean, + 1) of the requests routed so far compete.
        let total: u64 = self.routed.iter().sum();
        let bound = (PREFIX_LOAD_BOUND * (total + 1) as f64 / n as f64).ceil() as u64;
        // An instance under 1 / PREFIX_LOAD_BOUND of its share takes the next request
        // (otherwise an instance holding none of a shared first block stays idle).
        let floor = ((total + 1) as f64 / (PREFIX_LOAD_BOUND * n as f64)).floor() as u64;
        // An instance that has received nothing yet takes the next request first
        // (otherwise a shared first block keeps it idle for good).
        let cold = self.routed.contains(&0);
        let starved = self.routed.iter().any(|&c| c < floor);
        let open = |i: usize| {
            if cold {
                self.routed[i] == 0
            } else if starved {
                self.routed[i] < floor
            } else {
                self.routed[i] < bound.max(1)
            }
        };
        let matched: Vec<usize> = match &self.index {
            Some(ix) => (0..n)
                .map(|i| {
                    if open(i) {
                        ix.matched(i, req.blocks)
                    } else {
                        0
                    }
                })
                .collect(),
            None => vec![0; n],
        };
        let best = (0..n).filter(|&i| open(i)).map(|i| matched[i]).max();
        match best {
            Some(best) => self.least_loaded(|i| open(i) && matched[i] == best, load),
            None => self.least_loaded(|_| true, load),
        }
    }

    /// smg's `cache_aware` over HTTP (`policies/cache_aware.rs`, `select_worker_with_text`,
    /// and `kv_index/src/string_tree.rs`): match the text in the shared tree; a match share over
    /// `cache_threshold` goes to the instance holding the deepest matched node unless the spill
    /// gate stops it, anything else to the least-loaded instance; the text is then inserted for
    /// the chosen instance.
    fn cache_aware(&mut self, req: &RouteRequest<'_>, load: impl Fn(usize) -> u64) -> usize {
        let n = self.instances;
        let interval = self.smg.eviction_interval_secs as f64;
        if interval > 0.0 && req.at_secs >= self.next_eviction {
            self.text_tree.evict(self.smg.max_tree_size);
            self.block_tree.evict(self.smg.max_tree_size);
            self.next_eviction = ((req.at_secs / interval).floor() + 1.0) * interval;
        }
        let mean = (0..n).map(&load).sum::<u64>() as f64 / n as f64;
        let margin = spill_margin(self.smg.balance_abs_threshold, mean);
        let rel = self.smg.balance_rel_threshold;
        let gated = |i: usize| {
            let l = load(i) as f64;
            l > mean * rel && l > mean + margin
        };
        let threshold = self.smg.cache_threshold;
        let routed = &self.routed;
        let min_load = |eligible: &dyn Fn(usize) -> bool| {
            (0..n)
                .filter(|&i| eligible(i))
                .min_by_key(|&i| (load(i), routed[i], i))
        };
        let choose = |m: Match| -> usize {
            let share = if m.units == 0 {
                0.0
            } else {
                m.matched as f64 / m.units as f64
            };
            match m.tenant {
                Some(t) if share > threshold && !gated(t) => t,
                // A spill: the least loaded of the instances the gate lets through.
                Some(_) if share > threshold => min_load(&|i| !gated(i))
                    .or_else(|| min_load(&|_| true))
                    .unwrap_or(0),
                _ => min_load(&|_| true).unwrap_or(0),
            }
        };
        match req.text {
            Some(text) => {
                let units: Vec<char> = text.chars().collect();
                self.text_tree.match_and_insert(&units, choose)
            }
            None => self.block_tree.match_and_insert(req.blocks, choose),
        }
    }

    /// smg's `prefix_hash` (`policies/prefix_hash.rs`, smg 1.13's help for its flags): the
    /// first `4 x prefix_token_count` chars of the text (offline: the chained hash of the block
    /// holding the `prefix_token_count`-th token) hashed onto the ring; an overloaded instance
    /// (load over the mean x load factor and over the mean + abs threshold, the mean counting
    /// the incoming request) sends the request to the least loaded instance that is not.
    fn prefix_hash(&mut self, req: &RouteRequest<'_>, load: impl Fn(usize) -> u64) -> usize {
        let n = self.instances;
        let key = match req.text {
            Some(text) => {
                let chars = 4 * self.smg.prefix_token_count;
                let end = text
                    .char_indices()
                    .nth(chars)
                    .map_or(text.len(), |(b, _)| b);
                text_hash(&text[..end])
            }
            None => {
                let k = (self.smg.prefix_token_count / OFFLINE_BLOCK_TOKENS).max(1);
                match req.blocks.get(..k.min(req.blocks.len())) {
                    Some([.., last]) => mix64(*last),
                    _ => text_hash(""),
                }
            }
        };
        let Some(ring) = &self.ring else {
            return 0;
        };
        let initial = ring.find(key);
        let total: u64 = (0..n).map(&load).sum();
        if total == 0 {
            return initial;
        }
        let avg = (total + 1) as f64 / n as f64;
        let factor = self.smg.prefix_hash_load_factor;
        let abs = self.smg.prefix_hash_balance_abs_threshold as f64;
        let overloaded = |i: usize| {
            let l = load(i) as f64;
            l > avg * factor && l > avg + abs
        };
        if !overloaded(initial) {
            return initial;
        }
        (0..n)
            .filter(|&i| !overloaded(i))
            .min_by_key(|&i| load(i))
            .unwrap_or(initial)
    }

    /// A uniform draw from 0..n (splitmix64).
    fn random(&mut self, n: usize) -> usize {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        (mix64(self.rng) % n.max(1) as u64) as usize
    }

    /// Among the instances `eligible` admits, the one with the lowest load; ties go to the
    /// first at or after the round-robin cursor.
    fn least_loaded(&self, eligible: impl Fn(usize) -> bool, load: impl Fn(usize) -> u64) -> usize {
        let n = self.instances;
        (0..n)
            .map(|k| (self.cursor + k) % n)
            .filter(|&i| eligible(i))
            .min_by_key(|&i| load(i))
            .unwrap_or(self.cursor % n)
    }
}

mod tree;
use tree::*;
pub use tree::{session_hash, text_hash, RING_VIRTUAL_NODES};

#[cfg(test)]
mod tests;
