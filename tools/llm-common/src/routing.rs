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
//! Real deployments route with their own gateway (llm-d, Dynamo, a Kubernetes service); these
//! policies exist to answer "what would routing X buy on this trace?".

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
    RoundRobin,
    LeastLoaded,
    Session,
    PrefixAware,
}

impl Policy {
    /// Every policy, in the order of their names.
    pub const ALL: [Policy; 4] = [
        Policy::RoundRobin,
        Policy::LeastLoaded,
        Policy::Session,
        Policy::PrefixAware,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::RoundRobin => "round-robin",
            Policy::LeastLoaded => "least-loaded",
            Policy::Session => "session",
            Policy::PrefixAware => "prefix-aware",
        }
    }

    /// The policy of a command-line name.
    pub fn from_name(name: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == name)
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
            let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
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
    /// The session key, if the request has one.
    pub session: Option<&'a str>,
    /// Chained hashes of the prompt's blocks (used by `prefix-aware` only).
    pub blocks: &'a [u64],
}

/// The decisions of one policy over a sequence of requests.
pub struct Router {
    policy: Policy,
    instances: usize,
    cursor: usize,
    /// Requests routed to each instance so far (the `prefix-aware` bound).
    routed: Vec<u64>,
    /// The router's estimate of each instance's prefix cache (`prefix-aware` only).
    index: Option<PrefixIndex>,
}

impl Router {
    /// A router over `instances` (at least 1) instances whose prefix caches hold
    /// `capacity_blocks` blocks each.
    pub fn new(policy: Policy, instances: usize, capacity_blocks: usize) -> Router {
        let instances = instances.max(1);
        Router {
            policy,
            instances,
            cursor: 0,
            routed: vec![0; instances],
            index: (policy == Policy::PrefixAware)
                .then(|| PrefixIndex::new(instances, capacity_blocks)),
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    pub fn instances(&self) -> usize {
        self.instances
    }

    /// Forgets what the prefix index learned (the instances' caches were reset).
    pub fn reset(&mut self) {
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
            (Policy::PrefixAware, _) => {
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
        };
        self.cursor = (self.cursor + 1) % n;
        self.routed[pick] += 1;
        if let Some(ix) = &mut self.index {
            ix.record(pick, req.blocks, &[]);
        }
        pick
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
        r.route(&RouteRequest { session, blocks }, loads)
    }

    #[test]
    fn names_round_trip() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>(), Ok(p));
        }
        assert!("random"
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
