//! The simulated KV cache: a pool of fixed-size token blocks with a vLLM-style prefix cache.
//!
//! Each full block of a sequence has a hash chained over its parent's hash and its own token
//! ids, so equal hashes mean equal prefixes. Computed full blocks are registered under their
//! hash; a block whose reference count drops to zero stays cached (and can be hit again) until
//! it is evicted, least recently freed first. Blocks that never got a hash are handed out before
//! any cached block.

use std::collections::{BTreeSet, HashMap};

use crate::kv_events::KvEvent;
use crate::util::mix64;

/// Hash of a full block of `tokens` whose parent block hashed to `parent` (0 for the first).
pub fn block_hash(parent: u64, tokens: &[u32]) -> u64 {
    let mut h = mix64(parent ^ 0x5851_F42D_4C95_7F2D);
    for &t in tokens {
        h = mix64(h ^ u64::from(t));
    }
    h
}

/// Appends the hashes of the full blocks of `tokens` beyond the `hashes.len()` already known.
pub fn extend_block_hashes(hashes: &mut Vec<u64>, tokens: &[u32], block_size: usize) {
    let full = tokens.len() / block_size;
    while hashes.len() < full {
        let i = hashes.len();
        let parent = if i == 0 { 0 } else { hashes[i - 1] };
        hashes.push(block_hash(
            parent,
            &tokens[i * block_size..(i + 1) * block_size],
        ));
    }
}

#[derive(Clone, Copy, Debug)]
struct Block {
    ref_cnt: u32,
    hash: Option<u64>,
    /// Key in the free set while `ref_cnt == 0`.
    free_key: u64,
}

/// The block pool of one engine.
pub struct BlockPool {
    blocks: Vec<Block>,
    /// Free blocks ordered by eviction priority: (stamp, id); unhashed blocks have stamp 0.
    free: BTreeSet<(u64, u32)>,
    cached: HashMap<u64, u32>,
    clock: u64,
    caching: bool,
    /// KV events since the last `take_events` (`None`: not recorded).
    events: Option<Vec<KvEvent>>,
}

impl BlockPool {
    pub fn new(num_blocks: u32, caching: bool) -> Self {
        BlockPool {
            blocks: vec![
                Block {
                    ref_cnt: 0,
                    hash: None,
                    free_key: 0
                };
                num_blocks as usize
            ],
            free: (0..num_blocks).map(|i| (0u64, i)).collect(),
            cached: HashMap::new(),
            clock: 0,
            caching,
            events: None,
        }
    }

    /// Records KV events (`BlockRemoved` on eviction, `AllBlocksCleared` on reset; the engine
    /// adds `BlockStored` through `note_stored`) from now on.
    pub fn record_events(&mut self) {
        self.events.get_or_insert_with(Vec::new);
    }

    /// True when KV events are recorded.
    pub fn records_events(&self) -> bool {
        self.events.is_some()
    }

    /// Records newly cached blocks (their hashes, in chain order) when events are recorded.
    pub fn note_stored(&mut self, event: KvEvent) {
        if let Some(ev) = &mut self.events {
            ev.push(event);
        }
    }

    /// The events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<KvEvent> {
        match &mut self.events {
            Some(ev) => std::mem::take(ev),
            None => Vec::new(),
        }
    }

    /// Hashes of every cached block (in use or free), sorted.
    pub fn cached_hashes(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.cached.keys().copied().collect();
        v.sort_unstable();
        v
    }

    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    pub fn num_free(&self) -> usize {
        self.free.len()
    }

    /// Fraction of blocks in use by sequences.
    pub fn usage(&self) -> f64 {
        if self.blocks.is_empty() {
            0.0
        } else {
            1.0 - self.free.len() as f64 / self.blocks.len() as f64
        }
    }

    /// Number of leading `hashes` that are cached, and how many of those sit in the free set.
    pub fn lookup(&self, hashes: &[u64]) -> (usize, usize) {
        if !self.caching {
            return (0, 0);
        }
        let mut n = 0;
        let mut free = 0;
        for h in hashes {
            match self.cached.get(h) {
                Some(&b) => {
                    n += 1;
                    if self.blocks[b as usize].ref_cnt == 0 {
                        free += 1;
                    }
                }
                None => break,
            }
        }
        (n, free)
    }

    /// Takes a reference on the cached blocks of the first `n` hashes (found by `lookup`).
    pub fn acquire_cached(&mut self, hashes: &[u64], out: &mut Vec<u32>) {
        for h in hashes {
            let Some(&b) = self.cached.get(h) else {
                // `lookup` said it is there; if not, stop (the caller recomputes the rest).
                break;
            };
            let blk = &mut self.blocks[b as usize];
            if blk.ref_cnt == 0 {
                self.free.remove(&(blk.free_key, b));
            }
            blk.ref_cnt += 1;
            out.push(b);
        }
    }

    /// Allocates `n` fresh blocks (evicting cached ones as needed), or none if too few are free.
    pub fn allocate(&mut self, n: usize, out: &mut Vec<u32>) -> bool {
        if self.free.len() < n {
            return false;
        }
        for _ in 0..n {
            let Some((_, b)) = self.free.pop_first() else {
                return false;
            };
            let blk = &mut self.blocks[b as usize];
            if let Some(h) = blk.hash.take() {
                if self.cached.get(&h) == Some(&b) {
                    self.cached.remove(&h);
                    if let Some(ev) = &mut self.events {
                        match ev.last_mut() {
                            Some(KvEvent::BlockRemoved { block_hashes }) => block_hashes.push(h),
                            _ => ev.push(KvEvent::BlockRemoved {
                                block_hashes: vec![h],
                            }),
                        }
                    }
                }
            }
            blk.ref_cnt = 1;
            out.push(b);
        }
        true
    }

    /// Registers a computed full block under its hash (first writer wins); true if the block
    /// is newly cached.
    pub fn register(&mut self, block: u32, hash: u64) -> bool {
        if !self.caching {
            return false;
        }
        let blk = &mut self.blocks[block as usize];
        if blk.hash.is_some() {
            return false;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = self.cached.entry(hash) {
            e.insert(block);
            blk.hash = Some(hash);
            true
        } else {
            false
        }
    }

    /// Forgets every cached block (vLLM's `reset_prefix_cache`). Refused (false, nothing
    /// changed) while any block is held by a sequence, as vLLM refuses it.
    pub fn reset(&mut self) -> bool {
        if self.free.len() != self.blocks.len() {
            return false;
        }
        self.cached.clear();
        self.free.clear();
        if let Some(ev) = &mut self.events {
            ev.push(KvEvent::AllBlocksCleared);
        }
        for (i, b) in self.blocks.iter_mut().enumerate() {
            b.hash = None;
            b.free_key = 0;
            self.free.insert((0, i as u32));
        }
        true
    }

    /// Drops one reference on each block, the last ones first, so a sequence's tail is evicted
    /// before its head.
    pub fn release(&mut self, blocks: &[u32]) {
        for &b in blocks.iter().rev() {
            let blk = &mut self.blocks[b as usize];
            if blk.ref_cnt == 0 {
                continue;
            }
            blk.ref_cnt -= 1;
            if blk.ref_cnt == 0 {
                let key = if blk.hash.is_some() {
                    self.clock += 1;
                    self.clock
                } else {
                    0
                };
                blk.free_key = key;
                self.free.insert((key, b));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_chain_depends_on_prefix() {
        let a: Vec<u32> = (0..32).collect();
        let mut b = a.clone();
        b[3] = 99;
        let mut ha = Vec::new();
        let mut hb = Vec::new();
        extend_block_hashes(&mut ha, &a, 16);
        extend_block_hashes(&mut hb, &b, 16);
        assert_eq!(ha.len(), 2);
        assert_ne!(ha[0], hb[0]);
        // Same second block, different first block: different chain hash.
        assert_ne!(ha[1], hb[1]);
        let mut partial = Vec::new();
        extend_block_hashes(&mut partial, &a[..31], 16);
        assert_eq!(partial, ha[..1]);
    }

    #[test]
    fn cached_blocks_survive_release_and_lru_evicts_oldest() {
        let mut pool = BlockPool::new(4, true);
        let mut blocks = Vec::new();
        assert!(pool.allocate(2, &mut blocks));
        pool.register(blocks[0], 11);
        pool.register(blocks[1], 12);
        pool.release(&blocks);
        assert_eq!(pool.num_free(), 4);
        assert_eq!(pool.lookup(&[11, 12, 13]), (2, 2));
        // Allocating the two unhashed blocks keeps the cache intact.
        let mut other = Vec::new();
        assert!(pool.allocate(2, &mut other));
        assert_eq!(pool.lookup(&[11, 12]), (2, 2));
        // One more evicts the least recently freed cached block: the tail (12) went first.
        let mut third = Vec::new();
        assert!(pool.allocate(1, &mut third));
        assert_eq!(pool.lookup(&[11, 12]), (1, 1));
        assert!(!pool.allocate(2, &mut third));
        let mut hit = Vec::new();
        pool.acquire_cached(&[11], &mut hit);
        assert_eq!(hit.len(), 1);
        assert_eq!(pool.num_free(), 0);
        assert_eq!(pool.lookup(&[11]), (1, 0));
    }

    #[test]
    fn reset_forgets_cached_blocks_only_when_idle() {
        let mut pool = BlockPool::new(4, true);
        let mut held = Vec::new();
        assert!(pool.allocate(1, &mut held));
        pool.register(held[0], 7);
        assert!(!pool.reset(), "a block is in use");
        assert_eq!(pool.lookup(&[7]), (1, 0));
        pool.release(&held);
        assert!(pool.reset());
        assert_eq!(pool.lookup(&[7]), (0, 0));
        assert_eq!(pool.num_free(), 4);
    }

    #[test]
    fn caching_off_never_hits() {
        let mut pool = BlockPool::new(2, false);
        let mut b = Vec::new();
        assert!(pool.allocate(1, &mut b));
        pool.register(b[0], 5);
        pool.release(&b);
        assert_eq!(pool.lookup(&[5]), (0, 0));
    }
}
