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

/// smg's virtual nodes per instance on its hash ring (`worker/hash_ring.rs`).
pub const RING_VIRTUAL_NODES: usize = 150;

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

/// A consistent-hash ring: [`RING_VIRTUAL_NODES`] points per instance, a key going to the
/// first point at or after its hash (smg's `HashRing`, placed by this module's hash rather
/// than smg's blake3 of worker URLs).
struct Ring {
    points: Vec<(u64, usize)>,
}

impl Ring {
    fn new(instances: usize) -> Ring {
        let mut points: Vec<(u64, usize)> = (0..instances)
            .flat_map(|i| {
                (0..RING_VIRTUAL_NODES).map(move |v| (text_hash(&format!("instance-{i}#{v}")), i))
            })
            .collect();
        points.sort_unstable();
        Ring { points }
    }

    fn find(&self, key: u64) -> usize {
        let at = self.points.partition_point(|&(p, _)| p < key);
        self.points
            .get(at)
            .or_else(|| self.points.first())
            .map_or(0, |&(_, i)| i)
    }
}

/// What a match in the approximate tree found.
#[derive(Clone, Copy, Debug)]
struct Match {
    /// Units (chars, or blocks) of the request on the deepest path the tree holds.
    matched: usize,
    /// Units of the request.
    units: usize,
    /// The instance owning the node the match ended on (none: nothing matched).
    tenant: Option<usize>,
}

/// A node of [`ApproxTree`]: an edge label, children by first unit, and the instances
/// ("tenants") holding it with the epoch each last touched it.
struct Node<T> {
    label: Vec<T>,
    children: Vec<(T, u32)>,
    parent: u32,
    tenants: Vec<(u32, u64)>,
    live: bool,
}

/// smg's approximate radix tree (`kv_index/src/string_tree.rs`): one tree shared by every
/// instance, each node listing the instances a routed request inserted through it. A match
/// walks as deep as any instance's text goes (into an edge's partial match too) and names the
/// node's first tenant; an insert attaches the instance to every node on its path (an
/// ancestor newly attached with epoch 0, the final node with the current epoch, as smg
/// does); eviction drops instances' least recently touched leaves until the tree's size
/// (each instance's units, summed) is at most the bound.
struct ApproxTree<T> {
    nodes: Vec<Node<T>>,
    free: Vec<u32>,
    /// Units each instance holds.
    size: Vec<usize>,
    epoch: u64,
}

impl<T: Copy + Ord> ApproxTree<T> {
    fn new(instances: usize) -> ApproxTree<T> {
        // The root holds every instance (smg inserts "" for each worker) and is never evicted.
        let root = Node {
            label: Vec::new(),
            children: Vec::new(),
            parent: 0,
            tenants: (0..instances as u32).map(|i| (i, 0)).collect(),
            live: true,
        };
        ApproxTree {
            nodes: vec![root],
            free: Vec::new(),
            size: vec![0; instances],
            epoch: 0,
        }
    }

    fn tick(&mut self) -> u64 {
        self.epoch += 1;
        self.epoch
    }

    fn child(&self, node: u32, first: T) -> Option<u32> {
        let ch = &self.nodes[node as usize].children;
        ch.binary_search_by(|(k, _)| k.cmp(&first))
            .ok()
            .map(|at| ch[at].1)
    }

    fn set_child(&mut self, node: u32, first: T, child: u32) {
        let ch = &mut self.nodes[node as usize].children;
        match ch.binary_search_by(|(k, _)| k.cmp(&first)) {
            Ok(at) => ch[at].1 = child,
            Err(at) => ch.insert(at, (first, child)),
        }
    }

    fn alloc(&mut self, node: Node<T>) -> u32 {
        match self.free.pop() {
            Some(at) => {
                self.nodes[at as usize] = node;
                at
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Attaches `tenant` to `node`: with `stamp` when given (the final node), else with 0 if
    /// it was not attached yet (an ancestor).
    fn attach(&mut self, node: u32, tenant: u32, stamp: Option<u64>) {
        let len = self.nodes[node as usize].label.len();
        let ts = &mut self.nodes[node as usize].tenants;
        match ts.iter_mut().find(|(t, _)| *t == tenant) {
            Some(e) => {
                if let Some(s) = stamp {
                    e.1 = s;
                }
            }
            None => {
                ts.push((tenant, stamp.unwrap_or(0)));
                self.size[tenant as usize] += len;
            }
        }
    }

    /// Matches `units`, lets `choose` pick the instance from the match, inserts `units` for
    /// it and returns it.
    fn match_and_insert(&mut self, units: &[T], choose: impl FnOnce(Match) -> usize) -> usize {
        let mut node = 0u32;
        let mut at = 0usize;
        let mut path: Vec<u32> = Vec::new();
        let mut ended = 0u32;
        let mut partial = 0usize;
        while let Some(&first) = units.get(at) {
            let Some(c) = self.child(node, first) else {
                break;
            };
            let label = &self.nodes[c as usize].label;
            let shared = label
                .iter()
                .zip(&units[at..])
                .take_while(|(a, b)| a == b)
                .count();
            ended = c;
            if shared == label.len() {
                at += shared;
                path.push(c);
                node = c;
            } else {
                partial = shared;
                break;
            }
        }
        let tenant = self.nodes[ended as usize]
            .tenants
            .first()
            .map(|&(t, _)| t as usize);
        let found = Match {
            matched: at + partial,
            units: units.len(),
            tenant: if at + partial == 0 { None } else { tenant },
        };
        let pick = choose(found).min(self.size.len() - 1);
        let t = pick as u32;
        for &p in &path {
            self.attach(p, t, None);
        }
        let now = self.tick();
        if at == units.len() {
            self.attach(node, t, Some(now));
        } else {
            self.insert_from(node, &units[at..], t, now);
        }
        pick
    }

    /// Inserts `rest` below `node` for `tenant` (splitting an edge where `rest` leaves it).
    fn insert_from(&mut self, mut node: u32, mut rest: &[T], tenant: u32, now: u64) {
        while let Some(&first) = rest.first() {
            let Some(c) = self.child(node, first) else {
                let leaf = self.alloc(Node {
                    label: rest.to_vec(),
                    children: Vec::new(),
                    parent: node,
                    tenants: vec![(tenant, now)],
                    live: true,
                });
                self.size[tenant as usize] += rest.len();
                self.set_child(node, first, leaf);
                return;
            };
            let label_len = self.nodes[c as usize].label.len();
            let shared = self.nodes[c as usize]
                .label
                .iter()
                .zip(rest)
                .take_while(|(a, b)| a == b)
                .count();
            let next = if shared < label_len {
                // Split c: its first `shared` units become a new node holding c's tenants.
                let tail = self.nodes[c as usize].label.split_off(shared);
                let head = std::mem::replace(&mut self.nodes[c as usize].label, tail);
                let tail_first = self.nodes[c as usize].label[0];
                let tenants = self.nodes[c as usize].tenants.clone();
                let mid = self.alloc(Node {
                    label: head,
                    children: vec![(tail_first, c)],
                    parent: node,
                    tenants,
                    live: true,
                });
                self.nodes[c as usize].parent = mid;
                self.set_child(node, first, mid);
                mid
            } else {
                c
            };
            rest = &rest[shared..];
            self.attach(next, tenant, rest.is_empty().then_some(now));
            node = next;
        }
    }

    /// Whether `tenant` holds a child of `node`.
    fn held_below(&self, node: u32, tenant: u32) -> bool {
        self.nodes[node as usize].children.iter().any(|&(_, c)| {
            self.nodes[c as usize]
                .tenants
                .iter()
                .any(|&(t, _)| t == tenant)
        })
    }

    /// Drops the least recently touched (instance, leaf) pairs until the tree holds at most
    /// `max` units (summed over instances).
    fn evict(&mut self, max: usize) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut total: usize = self.size.iter().sum();
        if total <= max {
            return;
        }
        let mut heap = BinaryHeap::new();
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            if !n.live {
                continue;
            }
            for &(t, stamp) in &n.tenants {
                if !self.held_below(i as u32, t) {
                    heap.push(Reverse((stamp, i as u32, t)));
                }
            }
        }
        while total > max {
            let Some(Reverse((_, i, t))) = heap.pop() else {
                break;
            };
            let node = &self.nodes[i as usize];
            if !node.live || !node.tenants.iter().any(|&(x, _)| x == t) || self.held_below(i, t) {
                continue;
            }
            let len = node.label.len();
            let parent = node.parent;
            self.nodes[i as usize].tenants.retain(|&(x, _)| x != t);
            self.size[t as usize] = self.size[t as usize].saturating_sub(len);
            total = total.saturating_sub(len);
            let node = &self.nodes[i as usize];
            if node.tenants.is_empty() && node.children.is_empty() {
                let first = node.label[0];
                self.nodes[i as usize].live = false;
                self.nodes[i as usize].label = Vec::new();
                let ch = &mut self.nodes[parent as usize].children;
                if let Ok(at) = ch.binary_search_by(|(k, _)| k.cmp(&first)) {
                    ch.remove(at);
                }
                self.free.push(i);
            }
            if parent != 0 && !self.held_below(parent, t) {
                if let Some(&(_, stamp)) = self.nodes[parent as usize]
                    .tenants
                    .iter()
                    .find(|&&(x, _)| x == t)
                {
                    heap.push(Reverse((stamp, parent, t)));
                }
            }
        }
    }

    #[cfg(test)]
    fn held(&self) -> &[usize] {
        &self.size
    }
}

/// A fixed 64-bit hash of a text (FNV-1a over its bytes, then mixed): ring keys and points.
pub fn text_hash(text: &str) -> u64 {
    session_hash(text)
}

/// A fixed 64-bit hash of a session key (FNV-1a, then mixed): the same key goes to the same
/// instance in every run and in request-sim's analysis.
pub fn session_hash(key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix64(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(r: &mut Router, session: Option<&str>, blocks: &[u64], loads: &[u64]) -> usize {
        r.route(
            &RouteRequest {
                session,
                blocks,
                ..Default::default()
            },
            loads,
        )
    }

    #[test]
    fn names_round_trip() {
        for p in Policy::KNOWN {
            assert_eq!(p.name().parse::<Policy>(), Ok(p));
        }
        for p in Policy::SMG {
            assert_eq!(p.smg_name().unwrap().parse::<Policy>(), Ok(p));
        }
        assert_eq!("round_robin".parse::<Policy>(), Ok(Policy::RoundRobin));
        assert_eq!("cache_aware".parse::<Policy>(), Ok(Policy::CacheAware));
        assert!("cache-aware"
            .parse::<Policy>()
            .unwrap_err()
            .contains("prefix-aware"));
    }

    #[test]
    fn round_robin_and_least_loaded() {
        let mut r = Router::new(Policy::RoundRobin, 3, 0);
        let got: Vec<usize> = (0..5).map(|_| route(&mut r, None, &[], &[])).collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1]);
        let mut r = Router::new(Policy::LeastLoaded, 3, 0);
        assert_eq!(route(&mut r, None, &[], &[4, 1, 2]), 1);
        // Equal loads: round-robin order.
        let got: Vec<usize> = (0..3)
            .map(|_| route(&mut r, None, &[], &[0, 0, 0]))
            .collect();
        assert_eq!(got, vec![1, 2, 0]);
    }

    #[test]
    fn sessions_stick_and_spread() {
        let mut r = Router::new(Policy::Session, 4, 0);
        let a = route(&mut r, Some("conversation-a"), &[], &[]);
        for _ in 0..5 {
            assert_eq!(route(&mut r, Some("conversation-a"), &[], &[9, 9, 9, 9]), a);
        }
        let mut used = [false; 4];
        for k in 0..64 {
            used[route(&mut r, Some(&format!("s{k}")), &[], &[])] = true;
        }
        assert!(used.iter().all(|&u| u), "64 sessions over 4 instances");
        // No key: round-robin.
        let x = route(&mut r, None, &[], &[]);
        let y = route(&mut r, None, &[], &[]);
        assert_eq!(y, (x + 1) % 4);
    }

    #[test]
    fn prefix_aware_follows_the_longest_cached_prefix() {
        let mut r = Router::new(Policy::PrefixAware, 2, 100);
        // Cold start: each instance takes a request before prefixes count.
        assert_eq!(route(&mut r, None, &[1, 2, 3], &[0, 0]), 0);
        assert_eq!(route(&mut r, None, &[7, 8], &[0, 0]), 1);
        // Shares 2 leading blocks with what went to 0: goes there although it is busier.
        assert_eq!(route(&mut r, None, &[1, 2, 9], &[5, 0]), 0);
        assert_eq!(route(&mut r, None, &[7, 8, 4], &[0, 9]), 1);
        // No prefix anywhere: the less loaded.
        assert_eq!(route(&mut r, None, &[5], &[3, 1]), 1);
        // One hot prefix: instance 0 takes it up to its bounded share, then 1 does.
        let mut to = [0u32; 2];
        for _ in 0..40 {
            to[route(&mut r, None, &[1, 2, 3], &[0, 0])] += 1;
        }
        assert!(to[0] > to[1] && to[1] > 0, "{to:?}");
        let routed = r.routed.clone();
        let total: u64 = routed.iter().sum();
        let bound = (PREFIX_LOAD_BOUND * total as f64 / 2.0).ceil() as u64 + 1;
        assert!(
            routed.iter().all(|&c| c <= bound),
            "{routed:?} over {bound}"
        );
        // A reset forgets the index and the counts: cold again.
        r.reset();
        assert_eq!(route(&mut r, None, &[1, 2, 3], &[0, 1]), 0);
        assert_eq!(route(&mut r, None, &[1, 2, 3], &[0, 1]), 1);
    }

    /// The documented share of `prefix-aware` (module doc): between 1 / PREFIX_LOAD_BOUND and
    /// PREFIX_LOAD_BOUND times an even share of `total` requests, give or take one.
    fn share_bounds(total: u64, n: usize) -> (u64, u64) {
        let share = total as f64 / n as f64;
        let lo = (share / PREFIX_LOAD_BOUND).floor() as u64;
        let hi = (share * PREFIX_LOAD_BOUND).ceil() as u64;
        (lo.saturating_sub(1), hi + 1)
    }

    /// Issue #30: one request with its own blocks first (a calibration request), then requests
    /// that all share a first block (a system prompt): the first instance held nothing the
    /// others match, so it got 1 of 201. Every instance stays within its documented share.
    #[test]
    fn prefix_aware_keeps_every_instance_within_its_share() {
        for n in [2usize, 3, 4, 16] {
            let mut r = Router::new(Policy::PrefixAware, n, 10_000);
            route(&mut r, None, &[900, 901], &[]);
            for k in 0..(100 * n as u64) {
                route(&mut r, None, &[1, 2, 1000 + k], &[]);
            }
            let total: u64 = r.routed.iter().sum();
            let share = total as f64 / n as f64;
            for (i, &c) in r.routed.iter().enumerate() {
                let (lo, hi) = share_bounds(total, n);
                assert!(
                    (lo..=hi).contains(&c),
                    "{n} instances: instance {i} got {c} of {total} (share {share:.1}, \
                     allowed {lo}..={hi}): {:?}",
                    r.routed
                );
            }
        }
    }

    fn text_req(text: &str) -> RouteRequest<'_> {
        RouteRequest {
            text: Some(text),
            ..Default::default()
        }
    }

    fn key_req(key: Option<&str>) -> RouteRequest<'_> {
        RouteRequest {
            routing_key: key,
            ..Default::default()
        }
    }

    /// A first turn of `words` words of its own (a conversation's system prompt and question).
    fn turn(tag: &str, words: usize) -> String {
        (0..words)
            .map(|k| format!("{tag}{k}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn cache_aware_sends_a_second_turn_to_the_holder_of_the_first() {
        let mut r = Router::new(Policy::CacheAware, 3, 0);
        let a1 = turn("a", 50);
        let b1 = turn("b", 50);
        // Nothing matched: the least loaded, ties by requests routed, then index.
        assert_eq!(r.route(&text_req(&a1), &[0, 0, 0]), 0);
        assert_eq!(r.route(&text_req(&b1), &[0, 0, 0]), 1);
        assert_eq!(r.route(&text_req(&turn("c", 50)), &[0, 0, 0]), 2);
        // A's second turn repeats the first (the whole first turn is most of it): its holder,
        // although busier (3 in flight at a mean of 1 is under the spill gate).
        let a2 = format!("{a1} {} {}", turn("reply", 20), turn("q", 10));
        assert_eq!(r.route(&text_req(&a2), &[3, 0, 0]), 0);
        let b2 = format!("{b1} {}", turn("more", 30));
        assert_eq!(r.route(&text_req(&b2), &[0, 2, 0]), 1);
        // A third turn of A matches the second turn's insert, deeper still.
        let a3 = format!("{a2} {}", turn("again", 40));
        assert_eq!(r.route(&text_req(&a3), &[1, 0, 0]), 0);
    }

    #[test]
    fn cache_aware_below_the_threshold_goes_to_the_least_loaded() {
        let mut r = Router::new(Policy::CacheAware, 2, 0);
        let first = turn("a", 10);
        assert_eq!(r.route(&text_req(&first), &[0, 0]), 0);
        // Shares the 10-word head, but it is under 30% of this request's chars.
        let long = format!("{first} {}", turn("zz", 100));
        assert_eq!(r.route(&text_req(&long), &[1, 0]), 1);
        // Exactly the threshold does not pin either (smg compares match > threshold).
        let mut r = Router::with_smg(
            Policy::CacheAware,
            2,
            0,
            SmgConfig {
                cache_threshold: 0.5,
                ..SmgConfig::default()
            },
        );
        assert_eq!(r.route(&text_req("abcd"), &[0, 0]), 0);
        assert_eq!(r.route(&text_req("abcdwxyz"), &[1, 0]), 1);
        assert_eq!(r.route(&text_req("abcdwxyQ"), &[1, 2]), 1, "7 of 8 on 1");
        // No text at all: the least loaded.
        assert_eq!(r.route(&text_req(""), &[4, 3]), 1);
    }

    #[test]
    fn cache_aware_spills_past_the_gate() {
        // Margin at a mean of 7: min(64, max(4, 2 sqrt 7 = 5.3)) = 5.3.
        assert!((spill_margin(64, 7.0) - 2.0 * 7f64.sqrt()).abs() < 1e-9);
        assert_eq!(spill_margin(64, 1.0), 4.0);
        assert_eq!(spill_margin(2, 1.0), 2.0);
        assert_eq!(spill_margin(64, 10_000.0), 64.0);
        let mut r = Router::new(Policy::CacheAware, 3, 0);
        let a1 = turn("a", 40);
        assert_eq!(r.route(&text_req(&a1), &[0, 0, 0]), 0);
        let a2 = format!("{a1} {}", turn("x", 5));
        // 12 in flight on 0, mean 4: 12 > 6 and 12 > 4 + 4: the request spills to the least
        // loaded instance the gate lets through.
        assert_eq!(r.route(&text_req(&a2), &[12, 0, 0]), 1);
        // The spill target now holds the conversation: the next turn goes there...
        let a3 = format!("{a2} {}", turn("y", 5));
        assert_eq!(r.route(&text_req(&a3), &[0, 0, 0]), 1);
        // ...unless it is over the gate in turn: 1 at 12, mean 4; 0 and 2 are idle, 2 has
        // taken fewer requests.
        let a4 = format!("{a3} {}", turn("z", 5));
        assert_eq!(r.route(&text_req(&a4), &[0, 12, 0]), 2);
        // Under the gate: 6 at a mean of 2 is over 1.5 x 2 but not over 2 + 4.
        let a5 = format!("{a4} {}", turn("w", 5));
        assert_eq!(r.route(&text_req(&a5), &[0, 0, 6]), 2);
    }

    #[test]
    fn cache_aware_tree_matches_partial_edges_and_evicts_old_leaves() {
        let mut t: ApproxTree<char> = ApproxTree::new(2);
        let chars = |s: &str| s.chars().collect::<Vec<char>>();
        let mut seen = None;
        t.match_and_insert(&chars("hello world"), |m| {
            seen = Some(m);
            0
        });
        assert_eq!(seen.unwrap().matched, 0);
        t.match_and_insert(&chars("help me"), |m| {
            seen = Some(m);
            1
        });
        // "hel" is inside the edge "hello world": a partial match counts, its tenant is 0.
        let m = seen.unwrap();
        assert_eq!((m.matched, m.units, m.tenant), (3, 7, Some(0)));
        t.match_and_insert(&chars("help me now"), |m| {
            seen = Some(m);
            1
        });
        let m = seen.unwrap();
        assert_eq!((m.matched, m.tenant), (7, Some(1)));
        // Sizes: 0 holds "hello world" (11); 1 holds "hel" + "p me" + " now" (11).
        assert_eq!(t.held(), &[11, 11]);
        // Evicting to 15 units drops the least recent leaf first: 0's "lo world" (8 units).
        t.evict(15);
        assert_eq!(t.held(), &[3, 11]);
        t.match_and_insert(&chars("hello"), |m| {
            seen = Some(m);
            0
        });
        assert_eq!(seen.unwrap().matched, 3);
        // Non-ASCII text counts chars, not bytes.
        let mut t: ApproxTree<char> = ApproxTree::new(1);
        t.match_and_insert(&chars("héllo"), |_| 0);
        t.match_and_insert(&chars("hèllo"), |m| {
            seen = Some(m);
            0
        });
        assert_eq!((seen.unwrap().matched, seen.unwrap().units), (1, 5));
    }

    #[test]
    fn cache_aware_evicts_on_its_interval() {
        let smg = SmgConfig {
            max_tree_size: 100,
            eviction_interval_secs: 60,
            ..SmgConfig::default()
        };
        let mut r = Router::with_smg(Policy::CacheAware, 2, 0, smg);
        let old = turn("old", 30);
        let mut req = text_req(&old);
        assert_eq!(r.route(&req, &[0, 0]), 0);
        let other = turn("new", 30);
        req.text = Some(&other);
        req.at_secs = 10.0;
        assert_eq!(r.route(&req, &[0, 0]), 1);
        assert!(r.text_tree.held().iter().sum::<usize>() > 100);
        // At 61 s the tree is brought under 100 chars (the old conversation goes first); the
        // old conversation's second turn then finds nothing and goes to the least loaded.
        let again = format!("{old} more");
        req.text = Some(&again);
        req.at_secs = 61.0;
        assert_eq!(r.route(&req, &[0, 1]), 0);
        assert_eq!(r.next_eviction, 120.0);
    }

    #[test]
    fn cache_aware_offline_matches_blocks() {
        let mut r = Router::new(Policy::CacheAware, 2, 0);
        let req = |b: &'static [u64]| RouteRequest {
            blocks: b,
            ..Default::default()
        };
        assert_eq!(r.route(&req(&[1, 2, 3]), &[]), 0);
        assert_eq!(r.route(&req(&[7, 8]), &[]), 1);
        assert_eq!(r.route(&req(&[1, 2, 3, 4]), &[]), 0);
        assert_eq!(r.route(&req(&[7, 8, 9]), &[]), 1);
    }

    #[test]
    fn prefix_hash_keeps_a_1024_char_head_on_one_instance_and_walks_when_overloaded() {
        let mut r = Router::new(Policy::PrefixHash, 4, 0);
        let head: String = "s".repeat(1024);
        let first = r.route(&text_req(&format!("{head} question one")), &[0; 4]);
        for k in 0..20 {
            let text = format!("{head} another tail {k}");
            assert_eq!(r.route(&text_req(&text), &[0, 1, 2, 3]), first);
        }
        // Under 1024 chars the whole text is the key: different texts spread.
        let mut used = [false; 4];
        for k in 0..64 {
            used[r.route(&text_req(&format!("short {k}")), &[0; 4])] = true;
        }
        assert!(used.iter().all(|&u| u), "{used:?}");
        // The hashed instance at 20 in flight, the others at 2: mean (26 + 1) / 4 = 6.75, and
        // 20 > 6.75 x 1.25 and > 6.75 + 10: the least loaded instance takes it.
        let text = format!("{head} overloaded");
        let mut loads = [2u64, 3, 2, 1];
        loads[first] = 20;
        let least = (0..4)
            .filter(|&i| i != first)
            .min_by_key(|&i| loads[i])
            .unwrap();
        assert_eq!(r.route(&text_req(&text), &loads), least);
        // 12 is over 1.25 x the mean but within 10 of it: it stays.
        let mut loads = [2u64; 4];
        loads[first] = 12;
        assert_eq!(r.route(&text_req(&text), &loads), first);
    }

    #[test]
    fn consistent_hashing_keeps_a_key_on_one_instance() {
        for n in [2usize, 3, 5, 8] {
            let mut r = Router::new(Policy::ConsistentHashing, n, 0);
            let mut used = vec![0u32; n];
            for k in 0..(40 * n) {
                let key = format!("conversation-{k}");
                let i = r.route(&key_req(Some(&key)), &[]);
                used[i] += 1;
                let busy: Vec<u64> = (0..n as u64).map(|x| x * 7).collect();
                for _ in 0..3 {
                    assert_eq!(r.route(&key_req(Some(&key)), &busy), i);
                }
            }
            assert!(used.iter().all(|&u| u > 0), "{n}: {used:?}");
            // The ring is fixed: a new router sends a key to the same instance.
            let mut again = Router::new(Policy::ConsistentHashing, n, 0);
            let mut r = Router::new(Policy::ConsistentHashing, n, 0);
            assert_eq!(
                again.route(&key_req(Some("conversation-3")), &[]),
                r.route(&key_req(Some("conversation-3")), &[])
            );
            // Without a key: random, so every instance gets some.
            let mut used = vec![0u32; n];
            for _ in 0..(40 * n) {
                used[r.route(&key_req(None), &[])] += 1;
            }
            assert!(used.iter().all(|&u| u > 0), "{n}: {used:?}");
        }
    }

    #[test]
    fn power_of_two_picks_the_less_loaded_of_two() {
        let mut r = Router::new(Policy::PowerOfTwo, 2, 0);
        for _ in 0..50 {
            assert_eq!(r.route(&RouteRequest::default(), &[5, 1]), 1);
        }
        let mut r = Router::new(Policy::PowerOfTwo, 3, 0);
        let mut to = [0u32; 3];
        for _ in 0..600 {
            to[r.route(&RouteRequest::default(), &[0, 5, 9])] += 1;
        }
        // The busiest never wins a pair; the idlest wins every pair it is in (2 of 3).
        assert_eq!(to[2], 0, "{to:?}");
        assert!((350..=450).contains(&to[0]), "{to:?}");
        let mut r = Router::new(Policy::PowerOfTwo, 1, 0);
        assert_eq!(r.route(&RouteRequest::default(), &[3]), 0);
    }

    #[test]
    fn random_and_round_robin_spread() {
        let mut r = Router::new(Policy::Random, 4, 0);
        let mut to = [0u32; 4];
        for _ in 0..4000 {
            to[r.route(&RouteRequest::default(), &[])] += 1;
        }
        assert!(to.iter().all(|&c| (850..=1150).contains(&c)), "{to:?}");
        let mut r = Router::new("round_robin".parse().unwrap(), 3, 0);
        let got: Vec<usize> = (0..4)
            .map(|_| r.route(&RouteRequest::default(), &[]))
            .collect();
        assert_eq!(got, vec![0, 1, 2, 0]);
    }

    #[test]
    fn index_is_an_lru_with_prefixes_outliving_tails() {
        let mut ix = PrefixIndex::new(2, 3);
        ix.record(0, &[1, 2, 3], &[16, 16, 8]);
        assert_eq!(ix.matched(0, &[1, 2, 3, 4]), 3);
        assert_eq!(ix.matched(1, &[1]), 0);
        assert_eq!(ix.stored(0, 3), Some(8));
        // One more block evicts the least recent: the tail 3.
        ix.record(0, &[9], &[16]);
        assert_eq!(ix.matched(0, &[1, 2, 3]), 2);
        ix.record(0, &[1, 2], &[4, 20]);
        assert_eq!(ix.stored(0, 2), Some(20));
        assert_eq!(ix.stored(0, 1), Some(16));
        let empty = PrefixIndex::new(1, 0);
        assert_eq!(empty.matched(0, &[1]), 0);
    }
}
