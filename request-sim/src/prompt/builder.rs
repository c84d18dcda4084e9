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
//!
//! With a [`Corpus`] (`--prompt-corpus`), a block (or tail) of `len` tokens is instead
//! * the first [`KEYED_WORDS`] words of its word stream (so different keys still differ from
//!   the first token, exactly as above);
//! * the longest window of whole corpus units, from the unit `mix(seed, key) mod units` on,
//!   whose tokens fit in the rest (wrapping at the end of the corpus);
//! * the stream's next words for the last few tokens (fewer than the next unit's tokens).
//!
//! Still a pure function of `(seed, key, len)`; a shorter block is the longer one's prefix up
//! to its last whole unit.

use std::ops::Range;
use std::sync::Arc;

// SplitMix64 (its increment and finaliser), the workspace's one copy in the simulator crate.
use llm_common::util::{fmix64 as mix64, GOLDEN};

use crate::trace::TraceRequest;

use super::corpus::Corpus;
use super::vocab::Vocab;

const DOMAIN_BLOCK: u64 = 0x626c_6f63_6b5f_6964; // "block_id"
const DOMAIN_TAIL: u64 = 0x7461_696c_5f72_6571; // "tail_req"
const DOMAIN_CORPUS: u64 = 0x636f_7270_7573_5f70; // "corpus_p"
const CHUNK_BITS: u32 = 21;
const CHUNK_MASK: u64 = (1 << CHUNK_BITS) - 1;

/// With a corpus, every block (and tail) starts with this many words of its word stream, so
/// that different hash ids differ from their first token as with word prompts; the corpus
/// window follows.
pub const KEYED_WORDS: usize = 2;

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

/// One run of a prompt's tokens: a vocabulary word (one token), or consecutive corpus units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Word `i` of the [`Vocab`].
    Word(usize),
    /// Units `start..end` of the [`Corpus`].
    Units(Range<u32>),
}

/// Builds prompts; cheap to share between producer threads (`Arc<PromptBuilder>`), holds no
/// mutable state and no cache.
#[derive(Debug, Clone)]
pub struct PromptBuilder {
    vocab: Arc<Vocab>,
    corpus: Option<Arc<Corpus>>,
    seed: u64,
    block_size: usize,
    v: u64,
    block: StreamSeed,
    tail: StreamSeed,
    reserve_per_token: usize,
}

impl PromptBuilder {
    /// A builder drawing from `vocab`, reproducible from `seed`, with `block_size` tokens per
    /// hash id. `block_size == 0` means no hashed blocks: every prompt is unique to its request.
    ///
    /// # Panics
    /// If `vocab` is empty (impossible for vocabularies from [`Vocab::builtin`] or
    /// [`Vocab::from_tokenizer`]).
    pub fn new(vocab: Arc<Vocab>, seed: u64, block_size: usize) -> Self {
        Self::with_corpus(vocab, None, seed, block_size)
    }

    /// Like [`new`](Self::new), with blocks made of `corpus` text when given: each block (and
    /// tail) is [`KEYED_WORDS`] words of its word stream, then the longest window of whole
    /// corpus units that fits, starting at a unit chosen by the seed and the hash id, then the
    /// few words of its stream that complete the exact count.
    pub fn with_corpus(
        vocab: Arc<Vocab>,
        corpus: Option<Arc<Corpus>>,
        seed: u64,
        block_size: usize,
    ) -> Self {
        assert!(
            !vocab.is_empty(),
            "PromptBuilder needs a non-empty vocabulary"
        );
        let v = vocab.len() as u64;
        let reserve_per_token = corpus
            .as_ref()
            .map_or(0, |c| c.reserve_per_token())
            .max(vocab.reserve_per_token());
        PromptBuilder {
            block: StreamSeed::new(seed, DOMAIN_BLOCK, v),
            tail: StreamSeed::new(seed, DOMAIN_TAIL, v),
            vocab,
            corpus,
            seed,
            block_size,
            v,
            reserve_per_token,
        }
    }

    pub fn vocab(&self) -> &Arc<Vocab> {
        &self.vocab
    }

    /// The corpus blocks are made of (`--prompt-corpus`), if any.
    pub fn corpus(&self) -> Option<&Arc<Corpus>> {
        self.corpus.as_ref()
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
    /// the prefix of the full block's text (with a corpus: up to its last whole unit); tokens
    /// beyond the hashed blocks are unique to the request (keyed by `req.index`). Every word
    /// and unit starts with a space, so the text starts with one too (except with a
    /// SentencePiece vocabulary, whose first word goes without it). Word prompts are only
    /// spaces and lowercase ASCII letters; corpus text can hold any character (escape it).
    pub fn write_text(&self, req: &TraceRequest, n_tokens: usize, out: &mut String) {
        out.reserve(n_tokens * self.reserve_per_token);
        // SentencePiece vocabularies: the first word goes without its space (see `Vocab`).
        let mut skip = usize::from(self.vocab.strips_first_space());
        self.for_each_piece(req, n_tokens, |p| {
            out.push_str(&self.piece_text(p)[skip..]);
            skip = 0;
        });
    }

    /// Like [`write_text`](Self::write_text), appending the bytes to a byte buffer (e.g. a
    /// request body being built).
    pub fn write_text_bytes(&self, req: &TraceRequest, n_tokens: usize, out: &mut Vec<u8>) {
        out.reserve(n_tokens * self.reserve_per_token);
        let mut skip = usize::from(self.vocab.strips_first_space());
        self.for_each_piece(req, n_tokens, |p| {
            out.extend_from_slice(&self.piece_text(p).as_bytes()[skip..]);
            skip = 0;
        });
    }

    /// Append the token ids of the same prompt [`write_text`](Self::write_text) builds (for
    /// servers that accept token-id prompts, and for verification).
    pub fn write_token_ids(&self, req: &TraceRequest, n_tokens: usize, out: &mut Vec<u32>) {
        self.write_token_ids_of(&req.hash_ids.ids(), req.index, n_tokens, out)
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

    /// Append the text of one hashed block of `len` tokens.
    pub fn write_block_text(&self, hash_id: u64, len: usize, out: &mut String) {
        out.reserve(len * self.reserve_per_token);
        self.run(self.block, hash_id, len, &mut |p| {
            out.push_str(self.piece_text(p))
        });
    }

    /// Tokens of the prompt of `n_tokens` tokens for `req` that are corpus text (the rest are
    /// words of the vocabulary): 0 without a corpus.
    pub fn corpus_tokens(&self, req: &TraceRequest, n_tokens: usize) -> usize {
        let Some(c) = &self.corpus else { return 0 };
        let mut n = 0;
        self.for_each_piece(req, n_tokens, |p| {
            if let Piece::Units(r) = p {
                n += c.ids_of(r).len();
            }
        });
        n
    }

    /// Where the prompt of `n_tokens` tokens for `req` can be cut into texts that tokenize on
    /// their own to the same tokens: the `(byte offset, token offset)` of the start of every
    /// word and corpus unit, in order (the first is `(0, 0)`), then the end of the text.
    pub fn cut_points(&self, req: &TraceRequest, n_tokens: usize) -> Vec<(usize, usize)> {
        let mut out = Vec::with_capacity(n_tokens + 1);
        let (mut bytes, mut tokens) = (0usize, 0usize);
        let mut skip = usize::from(self.vocab.strips_first_space());
        self.for_each_piece(req, n_tokens, |p| match p {
            Piece::Word(i) => {
                out.push((bytes, tokens));
                bytes += self.vocab.word(i).len() - skip;
                tokens += 1;
                skip = 0;
            }
            Piece::Units(r) => {
                let Some(c) = &self.corpus else { return };
                for u in r {
                    out.push((bytes, tokens));
                    bytes += c.unit_bytes(u) - skip;
                    tokens += c.unit_tokens(u);
                    skip = 0;
                }
            }
        });
        out.push((bytes, tokens));
        out
    }

    #[inline]
    fn piece_text(&self, p: Piece) -> &str {
        match p {
            Piece::Word(i) => self.vocab.word(i),
            Piece::Units(r) => match &self.corpus {
                Some(c) => c.text_of(r),
                None => "",
            },
        }
    }

    /// Call `f` with every piece of the prompt, in order.
    #[inline]
    pub fn for_each_piece<F: FnMut(Piece)>(&self, req: &TraceRequest, n_tokens: usize, f: F) {
        self.for_each_piece_of(&req.hash_ids.ids(), req.index, n_tokens, f)
    }

    /// The token ids [`write_token_ids`](Self::write_token_ids) gives the request of index
    /// `index` with these hash ids (the record writer's view of a sent request).
    pub fn write_token_ids_of(
        &self,
        hash_ids: &[u64],
        index: usize,
        n_tokens: usize,
        out: &mut Vec<u32>,
    ) {
        out.reserve(n_tokens);
        let ids = self.vocab.ids();
        self.for_each_piece_of(hash_ids, index, n_tokens, |p| match p {
            Piece::Word(i) => out.push(ids[i]),
            Piece::Units(r) => {
                if let Some(c) = &self.corpus {
                    out.extend_from_slice(c.ids_of(r))
                }
            }
        });
    }

    #[inline]
    fn for_each_piece_of<F: FnMut(Piece)>(
        &self,
        hash_ids: &[u64],
        index: usize,
        n_tokens: usize,
        mut f: F,
    ) {
        let mut left = n_tokens;
        if self.block_size > 0 {
            for &h in hash_ids {
                if left == 0 {
                    return;
                }
                let len = left.min(self.block_size);
                self.run(self.block, h, len, &mut f);
                left -= len;
            }
        }
        if left > 0 {
            self.run(self.tail, index as u64, left, &mut f);
        }
    }

    /// The `len` tokens of the block (or tail) keyed by `key`: its word stream, or with a
    /// corpus, its keyed words, a corpus window and the words that complete it.
    #[inline]
    fn run<F: FnMut(Piece)>(&self, ss: StreamSeed, key: u64, len: usize, f: &mut F) {
        let Some(c) = &self.corpus else {
            self.stream(ss, key, len, &mut |i| f(Piece::Word(i)));
            return;
        };
        let keyed = len.min(KEYED_WORDS);
        self.stream(ss, key, keyed, &mut |i| f(Piece::Word(i)));
        let need = len - keyed;
        if need == 0 {
            return;
        }
        let start = mix64(ss.key ^ DOMAIN_CORPUS ^ mix64(key.wrapping_add(GOLDEN)));
        let start = (start % c.units() as u64) as u32;
        let got = c.window(start, need, &mut |r| f(Piece::Units(r)));
        let fill = need - got;
        if fill > 0 {
            // The stream's next words: the same block always completes the same way.
            let mut k = 0;
            self.stream(ss, key, keyed + fill, &mut |i| {
                if k >= keyed {
                    f(Piece::Word(i));
                }
                k += 1;
            });
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
    use crate::trace::test_request as req;

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
