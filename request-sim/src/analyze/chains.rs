//! The prefix chains of a trace's prompts as one trie of blocks, and the prefix-cache hits
//! they give: an infinite cache, every LRU size of a sweep in one pass (stack distances over a
//! Fenwick tree), and the per-request ideal hits a replay compares with. The definition of a
//! hit is in `trace.rs`'s module doc.

use super::analysis::{ratio, LruPoint, PrefixCacheStats};
use crate::trace::model::Trace;

pub(super) type IdMap<K, V> = rustc_hash::FxHashMap<K, V>;
pub(super) type IdSet<K> = rustc_hash::FxHashSet<K>;

/// Prefix-chain structure of a trace: every request's blocks as dense node ids of a trie keyed
/// by (parent node, hash id), so equal ids at equal positions after equal prefixes are one node.
pub(super) struct Chains {
    /// Node ids of all requests, concatenated.
    pub(super) nodes: Vec<u32>,
    /// `nodes[offsets[r]..offsets[r+1]]` are request r's blocks.
    pub(super) offsets: Vec<usize>,
    /// Each request's input length (its blocks' token counts follow from it).
    pub(super) inputs: Vec<u32>,
    pub(super) block: u64,
    pub(super) node_count: usize,
}

/// Token counts of a request's blocks: `block` each, the last one the rest of the input.
pub(super) fn block_tokens(
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
pub(super) struct ChainsBuilder {
    pub(super) nodes: Vec<u32>,
    pub(super) offsets: Vec<usize>,
    pub(super) inputs: Vec<u32>,
    /// (parent node, hash id) -> node.
    pub(super) trie: IdMap<(u32, u64), u32>,
}

impl ChainsBuilder {
    pub(super) fn new() -> ChainsBuilder {
        ChainsBuilder {
            nodes: Vec::new(),
            offsets: vec![0],
            inputs: Vec::new(),
            trie: IdMap::default(),
        }
    }

    pub(super) fn push(&mut self, hash_ids: &[u64], input_length: u32) {
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

    pub(super) fn finish(self, block_size: usize) -> Chains {
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
    pub(super) fn build(trace: &Trace) -> Chains {
        let mut b = ChainsBuilder::new();
        let total: usize = trace.requests.iter().map(|r| r.hash_ids.len()).sum();
        b.nodes.reserve(total);
        // Shared blocks make the distinct count much smaller than `total`; the map grows as needed.
        b.trie.reserve(total / 4);
        for r in &trace.requests {
            b.push(&r.hash_ids.ids(), r.input_length);
        }
        b.finish(trace.block_size)
    }

    /// Request r's block nodes and their token counts.
    pub(super) fn request(
        &self,
        r: usize,
    ) -> (
        &[u32],
        impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + Clone,
    ) {
        let nodes = &self.nodes[self.offsets[r]..self.offsets[r + 1]];
        (nodes, block_tokens(self.inputs[r], self.block, nodes.len()))
    }

    pub(super) fn requests(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Infinite cache: per-request hit tokens and total fully hit blocks.
    pub(super) fn infinite(&self) -> (Vec<u32>, u64) {
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
    pub(super) fn lru_sweep(&self, caps: &[u64]) -> Vec<(u64, u64)> {
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
    pub(super) fn lru(&self, capacity: usize) -> (u64, u64) {
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
pub(super) struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    pub(super) fn new(n: usize) -> Fenwick {
        Fenwick {
            tree: vec![0; n + 1],
        }
    }

    pub(super) fn add(&mut self, mut i: usize) {
        while i < self.tree.len() {
            self.tree[i] += 1;
            i += i & i.wrapping_neg();
        }
    }

    /// Clears a mark set by `add(i)`.
    pub(super) fn remove(&mut self, mut i: usize) {
        while i < self.tree.len() {
            self.tree[i] -= 1;
            i += i & i.wrapping_neg();
        }
    }

    /// Number of marks at positions `1..=i`.
    pub(super) fn prefix(&self, mut i: usize) -> u64 {
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
pub(super) fn match_prefix(
    nodes: &[u32],
    tokens: impl Iterator<Item = u32>,
    stored: &[u32],
) -> (u64, u64) {
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

pub(super) fn default_sweep(footprint_tokens: u64) -> Vec<u64> {
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

/// The cache facts of a trace's chains: the infinite cache and the LRU sweep.
pub(super) struct Caches {
    pub(super) prefix_cache: PrefixCacheStats,
    pub(super) lru_sweep: Vec<LruPoint>,
}

impl Caches {
    /// `sizes`: LRU sizes in tokens; empty = [`default_sweep`] of the trace's footprint.
    pub(super) fn of(chains: &Chains, requests: usize, sizes: &[u64]) -> Caches {
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
        let sizes = if sizes.is_empty() {
            default_sweep(footprint_tokens)
        } else {
            sizes.to_vec()
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
        Caches {
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
        }
    }
}
