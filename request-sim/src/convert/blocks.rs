//! Hash ids of a prompt's token blocks, the way Mooncake and Bailian traces were made: the
//! prompt's tokens cut into blocks of `block_size` (the last one may be shorter), each block
//! hashed together with the hash of the block before it (a chained hash: equal hashes mean
//! equal prefixes, not just equal blocks), and the hashes numbered in order of first appearance.
//!
//! The hash is SipHash-1-3 keyed with the salt (`--salt`, random by default). Only the
//! numbers are written, never a hash, so the trace holds nothing a dictionary of known prompts
//! could be hashed and matched against; the salt makes even the internal hashes of one run
//! unrelated to another's. Memory: one map entry (16 bytes and the map's overhead) per
//! distinct block of the whole log, whatever its length in rows.

use std::hash::Hasher;

use rustc_hash::FxHashMap;
use siphasher::sip::SipHasher13;

/// The salted chained hash and the numbering of its values.
#[derive(Debug)]
pub struct BlockIds {
    key: (u64, u64),
    block: usize,
    ids: FxHashMap<u64, u64>,
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
        }
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

    /// The hash ids of a chain, numbering hashes not seen before (0, 1, 2, … in order of
    /// first appearance).
    pub fn number(&mut self, chain: &[u64]) -> Vec<u64> {
        chain
            .iter()
            .map(|&h| {
                let next = self.ids.len() as u64;
                *self.ids.entry(h).or_insert(next)
            })
            .collect()
    }

    /// Distinct blocks numbered so far.
    pub fn distinct(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_ids_mean_equal_prefixes() {
        let mut b = BlockIds::new(b"salt", 2);
        let a = b.chain(&[1, 2, 3, 4, 5]);
        let ids = b.number(&a);
        assert_eq!(ids, vec![0, 1, 2]);
        // Same first block, different second: the chain differs from there on.
        let c = b.chain(&[1, 2, 9, 4, 5]);
        assert_eq!(b.number(&c), vec![0, 3, 4]);
        // The same block after a different prefix is a different id.
        let d = b.chain(&[3, 4]);
        assert_eq!(b.number(&d), vec![5]);
        // A shorter last block is not the longer one.
        let e = b.chain(&[1, 2, 3]);
        assert_eq!(b.number(&e), vec![0, 6]);
        assert_eq!(b.distinct(), 7);
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
