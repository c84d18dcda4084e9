//! Hash ids of a prompt's token blocks, the way Mooncake and Bailian traces were made: the
//! prompt's tokens cut into blocks of `block_size` (the last one may be shorter), each block
//! hashed together with the hash of the block before it (a chained hash: equal hashes mean
//! equal prefixes, not just equal blocks), and the hashes numbered in order of first appearance.
//!
//! The hash is SipHash-1-3 keyed with the salt (`--salt`, random by default). Only the
//! numbers are written, never a hash, so the trace holds nothing a dictionary of known prompts
//! could be hashed and matched against; the salt makes even the internal hashes of one run
//! unrelated to another's. Memory: one map entry (16 bytes and the map's overhead) per
//! distinct block of the whole log, whatever its length in rows; with `--forget-after W`, per
//! distinct block of the last W to 2W of log time (two generations of the map: a block not
//! seen for that long is forgotten, and numbered anew if it comes back).

use std::hash::Hasher;

use rustc_hash::FxHashMap;
use siphasher::sip::SipHasher13;

/// The salted chained hash and the numbering of its values.
#[derive(Debug)]
pub struct BlockIds {
    key: (u64, u64),
    block: usize,
    /// Hashes numbered (or seen again) in the current generation.
    ids: FxHashMap<u64, u64>,
    /// The generation before (only with `forget_after_ms`).
    old: FxHashMap<u64, u64>,
    /// The next number.
    next: u64,
    /// A generation's length in log time (`None`: one generation, nothing forgotten).
    forget_after_ms: Option<f64>,
    /// When the current generation began (log time, ms).
    generation_ms: Option<f64>,
}

impl BlockIds {
    /// Blocks of `block_size` tokens, hashed with `salt` (any string; its SipHash is the key).
    pub fn new(salt: &[u8], block_size: usize) -> BlockIds {
        let half = |k: u64| {
            let mut h = SipHasher13::new_with_keys(k, !k);
            h.write(salt);
            h.finish()
        };
        BlockIds {
            key: (half(0x5eed), half(0xb10c)),
            block: block_size.max(1),
            ids: FxHashMap::default(),
            old: FxHashMap::default(),
            next: 0,
            forget_after_ms: None,
            generation_ms: None,
        }
    }

    /// Forget a block not seen for `ms` of log time (at least; at most twice that).
    pub fn forget_after(mut self, ms: Option<f64>) -> BlockIds {
        self.forget_after_ms = ms;
        self
    }

    /// The chained hashes of `tokens`' blocks (the salt's, not yet numbered).
    pub fn chain(&self, tokens: &[u32]) -> Vec<u64> {
        let mut prev = 0u64;
        tokens
            .chunks(self.block)
            .map(|chunk| {
                let mut h = SipHasher13::new_with_keys(self.key.0, self.key.1);
                h.write_u64(prev);
                h.write_usize(chunk.len());
                for &t in chunk {
                    h.write_u32(t);
                }
                prev = h.finish();
                prev
            })
            .collect()
    }

    /// The hash ids of a chain at log time `time_ms`, numbering hashes not seen before (0, 1,
    /// 2, … in order of first appearance).
    pub fn number(&mut self, chain: &[u64], time_ms: f64) -> Vec<u64> {
        if let Some(w) = self.forget_after_ms {
            let start = *self.generation_ms.get_or_insert(time_ms);
            if time_ms - start >= w {
                // Whatever the old generation still holds was not seen for a whole generation.
                self.old = std::mem::take(&mut self.ids);
                self.generation_ms = Some(time_ms);
            }
        }
        chain
            .iter()
            .map(|&h| {
                if let Some(&id) = self.ids.get(&h) {
                    return id;
                }
                let id = match self.old.remove(&h) {
                    Some(id) => id,
                    None => {
                        self.next += 1;
                        self.next - 1
                    }
                };
                self.ids.insert(h, id);
                id
            })
            .collect()
    }

    /// Distinct blocks numbered so far (a forgotten block that came back counts again).
    pub fn distinct(&self) -> usize {
        self.next as usize
    }

    /// Blocks held now (what memory grows with).
    pub fn held(&self) -> usize {
        self.ids.len() + self.old.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_ids_mean_equal_prefixes() {
        let mut b = BlockIds::new(b"salt", 2);
        let a = b.chain(&[1, 2, 3, 4, 5]);
        let ids = b.number(&a, 0.0);
        assert_eq!(ids, vec![0, 1, 2]);
        // Same first block, different second: the chain differs from there on.
        let c = b.chain(&[1, 2, 9, 4, 5]);
        assert_eq!(b.number(&c, 0.0), vec![0, 3, 4]);
        // The same block after a different prefix is a different id.
        let d = b.chain(&[3, 4]);
        assert_eq!(b.number(&d, 0.0), vec![5]);
        // A shorter last block is not the longer one.
        let e = b.chain(&[1, 2, 3]);
        assert_eq!(b.number(&e, 0.0), vec![0, 6]);
        assert_eq!(b.distinct(), 7);
    }

    #[test]
    fn forgotten_blocks_are_numbered_anew() {
        let mut b = BlockIds::new(b"salt", 2).forget_after(Some(10.0));
        let a = b.chain(&[1, 2, 3, 4]);
        let x = b.chain(&[5, 6]);
        assert_eq!(b.number(&a, 0.0), vec![0, 1]);
        // Seen again within the window: kept (it moves into the new generation).
        assert_eq!(b.number(&a, 12.0), vec![0, 1]);
        assert_eq!(b.number(&x, 15.0), vec![2]);
        // `a`, last seen at 12, stays in the generation that ends at 25, and is dropped at the
        // next turn-over (36): it comes back with new numbers.
        assert_eq!(b.number(&x, 25.0), vec![2]);
        assert_eq!(b.number(&a, 36.0), vec![3, 4]);
        assert_eq!((b.distinct(), b.held()), (5, 3));
    }

    #[test]
    fn the_salt_changes_every_hash() {
        let x = BlockIds::new(b"one", 4).chain(&[1, 2, 3, 4]);
        let y = BlockIds::new(b"two", 4).chain(&[1, 2, 3, 4]);
        let z = BlockIds::new(b"one", 4).chain(&[1, 2, 3, 4]);
        assert_ne!(x, y);
        assert_eq!(x, z);
    }
}
