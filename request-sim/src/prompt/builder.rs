//! The block builder: prompt text (or token ids) as a pure function of the seed, the hash ids
//! and the lengths.
//!
//! A prompt of `n` tokens for a request with hash ids `h_0 .. h_{k-1}` and block size `B` is
//! the concatenation of
//! * for every block `i` that the first `n` tokens reach: the first `min(B, n - i*B)` words of
//!   the word stream of `h_i`;
//! * if `n > k*B`: the first `n - k*B` words of the request's own tail stream (keyed by the
//!   request index).
//!
//! A word stream is an endless sequence of word indices into the [`Vocab`]:
//! * word 0 = `(key mod V + a) mod V` and word 1 = `((key / V) mod V + b) mod V`, where `V` is
//!   the vocabulary size and `a`, `b` are derived from the seed. So two keys that differ modulo
//!   `V` (in particular any two keys less than `V` apart) give streams whose **first** words
//!   differ, and two keys less than `V²` apart give streams whose first two words differ;
//! * words 2.. come from splitmix64 seeded by `(seed, key)`; each 64-bit draw yields three
//!   21-bit chunks, each mapped to a word index by a multiply-shift (`chunk * V >> 21`).
//!
//! Block streams and tail streams use different seed-derived constants, so the tail of request
//! `r` is not the block stream of hash id `r`.

use std::sync::Arc;

// SplitMix64 (its increment and finaliser), the workspace's one copy in the simulator crate.
use llm_sim::util::{fmix64 as mix64, GOLDEN};

use crate::trace::TraceRequest;

use super::vocab::Vocab;

const DOMAIN_BLOCK: u64 = 0x626c_6f63_6b5f_6964; // "block_id"
const DOMAIN_TAIL: u64 = 0x7461_696c_5f72_6571; // "tail_req"
const CHUNK_BITS: u32 = 21;
const CHUNK_MASK: u64 = (1 << CHUNK_BITS) - 1;

/// Seed-derived constants of one kind of stream (blocks or tails).
#[derive(Debug, Clone, Copy)]
struct StreamSeed {
    /// Mixed into the PRNG state of every stream of this kind.
    key: u64,
    /// Offsets added to word 0 and word 1 (mod V).
    off0: u64,
    off1: u64,
}

impl StreamSeed {
    fn new(seed: u64, domain: u64, v: u64) -> Self {
        let key = mix64(seed ^ domain);
        StreamSeed {
            key,
            off0: mix64(key ^ 1) % v,
            off1: mix64(key ^ 2) % v,
        }
    }
}

/// Builds prompts; cheap to share between producer threads (`Arc<PromptBuilder>`), holds no
/// mutable state and no cache.
#[derive(Debug, Clone)]
pub struct PromptBuilder {
    vocab: Arc<Vocab>,
    seed: u64,
    block_size: usize,
    v: u64,
    block: StreamSeed,
    tail: StreamSeed,
}

impl PromptBuilder {
    /// A builder drawing from `vocab`, reproducible from `seed`, with `block_size` tokens per
    /// hash id. `block_size == 0` means no hashed blocks: every prompt is unique to its request.
    ///
    /// # Panics
    /// If `vocab` is empty (impossible for vocabularies from [`Vocab::builtin`] or
    /// [`Vocab::from_tokenizer`]).
    pub fn new(vocab: Arc<Vocab>, seed: u64, block_size: usize) -> Self {
        assert!(
            !vocab.is_empty(),
            "PromptBuilder needs a non-empty vocabulary"
        );
        let v = vocab.len() as u64;
        PromptBuilder {
            block: StreamSeed::new(seed, DOMAIN_BLOCK, v),
            tail: StreamSeed::new(seed, DOMAIN_TAIL, v),
            vocab,
            seed,
            block_size,
            v,
        }
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Append the prompt text of exactly `n_tokens` tokens for `req` (see the module docs).
    ///
    /// Block `i` is a pure function of `(seed, hash_ids[i], length)`; a partial last block is
    /// the prefix of the full block's text; tokens beyond the hashed blocks are unique to the
    /// request (keyed by `req.index`). Every word starts with a space, so the text starts with
    /// one too (except with a SentencePiece vocabulary, whose first word goes without it). The text is only spaces and lowercase ASCII letters (no JSON escaping needed).
    pub fn write_text(&self, req: &TraceRequest, n_tokens: usize, out: &mut String) {
        out.reserve(n_tokens * self.vocab.reserve_per_token());
        let text = self.vocab.text();
        let spans = self.vocab.spans();
        // SentencePiece vocabularies: the first word goes without its space (see `Vocab`).
        let mut skip = usize::from(self.vocab.strips_first_space());
        self.for_each_word(req, n_tokens, |i| {
            let (s, e) = spans[i];
            out.push_str(&text[s as usize + skip..e as usize]);
            skip = 0;
        });
    }

    /// Like [`write_text`](Self::write_text), appending the bytes to a byte buffer (e.g. a
    /// request body being built). The text is only spaces and lowercase ASCII letters, so it
    /// can be placed inside a JSON string without escaping.
    pub fn write_text_bytes(&self, req: &TraceRequest, n_tokens: usize, out: &mut Vec<u8>) {
        out.reserve(n_tokens * self.vocab.reserve_per_token());
        let text = self.vocab.text().as_bytes();
        let spans = self.vocab.spans();
        let mut skip = usize::from(self.vocab.strips_first_space());
        self.for_each_word(req, n_tokens, |i| {
            let (s, e) = spans[i];
            out.extend_from_slice(&text[s as usize + skip..e as usize]);
            skip = 0;
        });
    }

    /// Append the token ids of the same prompt [`write_text`](Self::write_text) builds (for
    /// servers that accept token-id prompts, and for verification).
    pub fn write_token_ids(&self, req: &TraceRequest, n_tokens: usize, out: &mut Vec<u32>) {
        out.reserve(n_tokens);
        let ids = self.vocab.ids();
        self.for_each_word(req, n_tokens, |i| out.push(ids[i]));
    }

    /// The prompt text as a new string.
    pub fn text(&self, req: &TraceRequest, n_tokens: usize) -> String {
        let mut s = String::new();
        self.write_text(req, n_tokens, &mut s);
        s
    }

    /// The prompt token ids as a new vector.
    pub fn token_ids(&self, req: &TraceRequest, n_tokens: usize) -> Vec<u32> {
        let mut v = Vec::new();
        self.write_token_ids(req, n_tokens, &mut v);
        v
    }

    /// Append the text of one hashed block of `len` tokens (the first `len` words of the
    /// block stream of `hash_id`).
    pub fn write_block_text(&self, hash_id: u64, len: usize, out: &mut String) {
        out.reserve(len * self.vocab.reserve_per_token());
        let text = self.vocab.text();
        let spans = self.vocab.spans();
        self.stream(self.block, hash_id, len, &mut |i| {
            let (s, e) = spans[i];
            out.push_str(&text[s as usize..e as usize]);
        });
    }

    /// Call `f` with the word index of every token of the prompt, in order.
    #[inline]
    fn for_each_word<F: FnMut(usize)>(&self, req: &TraceRequest, n_tokens: usize, mut f: F) {
        let mut left = n_tokens;
        if self.block_size > 0 {
            for &h in &req.hash_ids {
                if left == 0 {
                    return;
                }
                let len = left.min(self.block_size);
                self.stream(self.block, h, len, &mut f);
                left -= len;
            }
        }
        if left > 0 {
            self.stream(self.tail, req.index as u64, left, &mut f);
        }
    }

    /// The first `len` word indices of the stream of `key`.
    #[inline]
    fn stream<F: FnMut(usize)>(&self, ss: StreamSeed, key: u64, len: usize, f: &mut F) {
        let v = self.v;
        if len == 0 {
            return;
        }
        f((((key % v) + ss.off0) % v) as usize);
        if len == 1 {
            return;
        }
        f(((((key / v) % v) + ss.off1) % v) as usize);
        let mut left = len - 2;
        let mut state = mix64(ss.key ^ mix64(key.wrapping_add(GOLDEN)));
        let pick = |chunk: u64| ((chunk * v) >> CHUNK_BITS) as usize;
        while left >= 3 {
            state = state.wrapping_add(GOLDEN);
            let x = mix64(state);
            f(pick(x & CHUNK_MASK));
            f(pick((x >> CHUNK_BITS) & CHUNK_MASK));
            f(pick((x >> (2 * CHUNK_BITS)) & CHUNK_MASK));
            left -= 3;
        }
        if left > 0 {
            state = state.wrapping_add(GOLDEN);
            let x = mix64(state);
            f(pick(x & CHUNK_MASK));
            if left > 1 {
                f(pick((x >> CHUNK_BITS) & CHUNK_MASK));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(index: usize, hash_ids: Vec<u64>, input_length: u32) -> TraceRequest {
        TraceRequest {
            index,
            line: index + 1,
            timestamp_ms: 0.0,
            input_length,
            output_length: 1,
            hash_ids,
            session: None,
        }
    }

    fn builder(seed: u64, block: usize) -> PromptBuilder {
        PromptBuilder::new(Arc::new(Vocab::builtin()), seed, block)
    }

    #[test]
    fn mix64_is_not_identity() {
        assert_ne!(mix64(1), 1);
        assert_ne!(mix64(1), mix64(2));
    }

    #[test]
    fn word_count_and_prefix() {
        let b = builder(7, 16);
        let r = req(3, vec![5, 6, 7], 40);
        for n in 0..60 {
            let t = b.text(&r, n);
            assert_eq!(t.split_whitespace().count(), n);
            assert_eq!(b.token_ids(&r, n).len(), n);
            let longer = b.text(&r, n + 1);
            assert!(longer.starts_with(&t));
        }
    }

    #[test]
    fn stream_chunks_are_consistent() {
        // Every length of a block is a prefix of every longer length.
        let b = builder(1, 64);
        let mut full = String::new();
        b.write_block_text(99, 64, &mut full);
        for len in 0..64 {
            let mut s = String::new();
            b.write_block_text(99, len, &mut s);
            assert!(full.starts_with(&s), "len {len}");
            assert_eq!(s.split_whitespace().count(), len);
        }
    }

    #[test]
    fn first_word_distinct_within_vocab_range() {
        let b = builder(42, 8);
        let v = b.vocab().len() as u64;
        let base = 1_000_000u64;
        let mut firsts = std::collections::HashSet::new();
        for h in base..base + v {
            let mut ids = Vec::new();
            b.stream(b.block, h, 1, &mut |i| ids.push(i));
            assert!(firsts.insert(ids[0]), "collision at hash id {h}");
        }
    }
}
