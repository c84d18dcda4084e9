//! The trace-ideal prefix-cache hits of a replay, computed request by request as the trace
//! streams past (the definition of `docs/traces.md`, "Prefix-cache hit ratio": an unbounded
//! cache, matching stops at the first miss, a shorter cached block counts its own tokens).
//!
//! `analyze` builds an exact trie of the whole trace ([`super::analyze`]). A replay of a
//! stream cannot hold the trace, so this keeps one entry per distinct prefix block, keyed by a
//! 64-bit hash of the block's whole chain (its hash id and every id before it): memory is
//! O(distinct blocks), not O(requests), and it stops (answers `None`) once the trace has more
//! than [`IdealCache::MAX_BLOCKS`] distinct blocks, so its memory is bounded whatever the
//! trace's length. Two different chains share a key with probability about n²/2⁶⁵ (10⁻⁸ at
//! the cap), far below what a ratio printed to 0.1% can show.

use rustc_hash::FxHashMap;

use crate::trace::model::TraceRequest;

/// An unbounded prefix cache over the requests seen so far, in replay order.
#[derive(Debug, Clone)]
pub struct IdealCache {
    /// Chain hash of a block → tokens it held when cached (the most any request used).
    stored: FxHashMap<u64, u32>,
    block: u64,
    cap: usize,
    full: bool,
}

impl IdealCache {
    /// Distinct prefix blocks tracked at most: the map then takes about 18 MB (2²⁰ buckets of
    /// 17 bytes), where it stays. The conversation trace has ~183,000.
    pub const MAX_BLOCKS: usize = 900_000;

    /// A cache for blocks of `block_size` tokens that gives up beyond `max_blocks` distinct
    /// blocks.
    pub fn new(block_size: usize, max_blocks: usize) -> IdealCache {
        IdealCache {
            stored: FxHashMap::default(),
            block: block_size.max(1) as u64,
            cap: max_blocks,
            full: false,
        }
    }

    /// Tokens of `req` an unbounded cache that has seen every earlier request would hit; then
    /// its blocks are cached. `None` once the cache holds more than its cap of distinct blocks
    /// (the hits of later requests would be undercounted).
    pub fn hits(&mut self, req: &TraceRequest) -> Option<u32> {
        self.hits_of(&req.hash_ids.ids(), req.input_length)
    }

    /// [`IdealCache::hits`] of a request of `input_length` tokens with these `hash_ids`.
    pub fn hits_of(&mut self, hash_ids: &[u64], input_length: u32) -> Option<u32> {
        if self.full {
            return None;
        }
        let (mut key, mut hit, mut matching) = (0u64, 0u64, true);
        for (i, &id) in hash_ids.iter().enumerate() {
            key = llm_common::util::mix64(key.rotate_left(23) ^ id);
            // Block i holds `block` tokens, the last one the rest of the input.
            let left = u64::from(input_length).saturating_sub(i as u64 * self.block);
            let cur = left.min(self.block) as u32;
            let have = self.stored.entry(key).or_insert(0);
            if matching {
                if *have == 0 {
                    matching = false;
                } else {
                    hit += u64::from((*have).min(cur));
                    matching = *have >= cur;
                }
            }
            *have = (*have).max(cur.max(1));
        }
        if self.stored.len() > self.cap {
            self.full = true;
            self.stored = FxHashMap::default();
        }
        Some(u32::try_from(hit).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::ideal_prefix_hits;
    use crate::trace::{parse_reader, LoadOptions};

    #[test]
    fn equals_the_whole_trace_analysis() {
        // Shared prefixes, partial last blocks that grow, a repeated id at another position.
        let text = "\
{\"timestamp\": 0, \"input_length\": 1200, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}
{\"timestamp\": 1, \"input_length\": 1500, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}
{\"timestamp\": 2, \"input_length\": 700, \"output_length\": 1, \"hash_ids\": [1, 9]}
{\"timestamp\": 3, \"input_length\": 1536, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}
{\"timestamp\": 4, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [2, 1]}
{\"timestamp\": 5, \"input_length\": 100, \"output_length\": 1, \"hash_ids\": [1]}
{\"timestamp\": 6, \"input_length\": 3000, \"output_length\": 1, \"hash_ids\": [1, 2]}
";
        let t = parse_reader("t", text.as_bytes(), &LoadOptions::default()).unwrap();
        let want = ideal_prefix_hits(&t);
        let mut c = IdealCache::new(t.block_size, IdealCache::MAX_BLOCKS);
        let got: Vec<u32> = t.requests.iter().map(|r| c.hits(r).unwrap()).collect();
        assert_eq!(got, want);
        assert_eq!(got, vec![0, 1024 + 176, 512, 1500, 0, 100, 1024]);
    }

    #[test]
    fn gives_up_beyond_its_cap() {
        let req = |i: u64| TraceRequest {
            model: None,
            reasoning: Default::default(),
            images: None,
            index: i as usize,
            line: 1,
            timestamp_ms: 0.0,
            input_length: 1024,
            output_length: 1,
            hash_ids: vec![i, i + 1].into(),
            session: None,
        };
        let mut c = IdealCache::new(512, 5);
        assert_eq!(c.hits(&req(0)), Some(0));
        assert_eq!(c.hits(&req(0)), Some(1024));
        assert_eq!(c.hits(&req(10)), Some(0)); // 4 blocks
        assert_eq!(c.hits(&req(20)), Some(0)); // 6 > 5: full after this one
        assert_eq!(c.hits(&req(0)), None);
    }
}
