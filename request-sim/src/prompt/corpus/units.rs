//! [`Corpus`]: the kept units of a corpus (their text and tokens, back to back), loaded once at
//! start-up ([`Corpus::load`]: read, tokenize, check) and cut into prompt windows by the
//! builder.

use std::ops::Range;
use std::time::Instant;

use super::check::Units;
use super::read::read_documents;
use super::spec::{corpus_error, CorpusSpec, CorpusStats};
use crate::prompt::{Encoder, PromptError};

/// The units of a corpus, ready to be cut into prompt windows. Immutable; shared by every
/// producer thread through the builder.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Every unit's text, in order (each starts with its space).
    text: String,
    /// Byte start of unit `i`; `starts[units]` is `text.len()`.
    starts: Vec<u32>,
    /// Token offset of unit `i` in `ids`; `cum[units]` is the number of tokens.
    cum: Vec<u32>,
    /// Every unit's token ids, in order.
    ids: Vec<u32>,
    stats: CorpusStats,
}

impl Corpus {
    /// Read `spec`, tokenize and check its units with `enc` (`None`: the built-in word list,
    /// which counts one token per whitespace-separated word). `strip_first_space`: the
    /// vocabulary is SentencePiece-style (see [`crate::prompt::Vocab::strips_first_space`]), so a text
    /// that starts with a unit starts without its space.
    pub fn load(
        spec: &CorpusSpec,
        enc: Option<&dyn Encoder>,
        strip_first_space: bool,
    ) -> Result<Corpus, PromptError> {
        let t = Instant::now();
        let read = read_documents(spec)?;
        let read_ms = ms(t);
        let mut stats = CorpusStats {
            path: spec.path.display().to_string(),
            format: read.format,
            documents: read.documents,
            words: 0,
            truncated: read.truncated,
            units: 0,
            tokens: 0,
            distinct_units: 0,
            dropped_shape: 0,
            dropped_unstable: 0,
            check_rounds: 0,
            read_ms,
            tokenize_ms: 0.0,
            check_ms: 0.0,
        };
        let t = Instant::now();
        let units = Units::tokenize(&read.text, enc, strip_first_space, &mut stats)?;
        stats.tokenize_ms = ms(t);
        let t = Instant::now();
        let seq = match enc {
            Some(enc) => units.check(enc, strip_first_space, &mut stats)?,
            None => units.seq.clone(),
        };
        stats.check_ms = ms(t);
        let corpus = Corpus::from_units(&units, &seq, stats);
        if corpus.units() == 0 {
            return Err(corpus_error(
                &spec.path,
                "no usable text (every word was dropped, or the file holds no text)",
            ));
        }
        Ok(corpus)
    }

    /// The units `seq` (indices of `units`' distinct units, in order) back to back, with
    /// their counts added to `stats`.
    fn from_units(units: &Units, seq: &[u32], mut stats: CorpusStats) -> Corpus {
        let mut text = String::new();
        let mut starts = Vec::with_capacity(seq.len() + 1);
        let mut cum = Vec::with_capacity(seq.len() + 1);
        let mut ids = Vec::new();
        let mut seen = vec![false; units.distinct.len()];
        for &k in seq {
            starts.push(text.len() as u32);
            cum.push(ids.len() as u32);
            text.push_str(units.distinct[k as usize]);
            ids.extend_from_slice(&units.tokens[k as usize]);
            seen[k as usize] = true;
        }
        starts.push(text.len() as u32);
        cum.push(ids.len() as u32);
        stats.units = seq.len();
        stats.tokens = ids.len();
        stats.distinct_units = seen.iter().filter(|&&s| s).count();
        Corpus {
            text,
            starts,
            cum,
            ids,
            stats,
        }
    }

    /// Number of units.
    pub fn units(&self) -> usize {
        self.starts.len() - 1
    }

    /// Number of tokens of all units.
    pub fn tokens(&self) -> usize {
        self.ids.len()
    }

    /// What was read and kept.
    pub fn stats(&self) -> &CorpusStats {
        &self.stats
    }

    /// Bytes worth reserving per token of corpus text.
    pub fn reserve_per_token(&self) -> usize {
        self.text.len().div_ceil(self.ids.len().max(1)) + 1
    }

    /// Text of units `r`.
    #[inline]
    pub(crate) fn text_of(&self, r: Range<u32>) -> &str {
        &self.text[self.starts[r.start as usize] as usize..self.starts[r.end as usize] as usize]
    }

    /// Token ids of units `r`.
    #[inline]
    pub(crate) fn ids_of(&self, r: Range<u32>) -> &[u32] {
        &self.ids[self.cum[r.start as usize] as usize..self.cum[r.end as usize] as usize]
    }

    /// Tokens of unit `i`.
    #[inline]
    pub(crate) fn unit_tokens(&self, i: u32) -> usize {
        (self.cum[i as usize + 1] - self.cum[i as usize]) as usize
    }

    /// Bytes of unit `i`.
    #[inline]
    pub(crate) fn unit_bytes(&self, i: u32) -> usize {
        (self.starts[i as usize + 1] - self.starts[i as usize]) as usize
    }

    /// The longest run of whole units from unit `start` on (wrapping at the end of the corpus)
    /// with at most `need` tokens, as one or more ranges handed to `f`; returns its tokens
    /// (`need` minus less than the next unit's tokens, so at most [`MAX_UNIT_TOKENS`] - 1 short).
    #[inline]
    pub(crate) fn window<F: FnMut(Range<u32>)>(&self, start: u32, need: usize, f: &mut F) -> usize {
        let m = self.units();
        let mut p = start as usize % m;
        let mut got = 0usize;
        loop {
            let left = need - got;
            let base = self.cum[p] as usize;
            // Last unit boundary q >= p with cum[q] - cum[p] <= left.
            let q = p + self.cum[p..=m].partition_point(|&c| c as usize - base <= left) - 1;
            if q > p {
                f(p as u32..q as u32);
                got += self.cum[q] as usize - base;
            }
            if q < m || got == need {
                return got;
            }
            p = 0; // the window runs on at the start of the corpus
        }
    }
}

/// Milliseconds since `t`.
fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::spec::fixture as data;
    use super::*;
    use crate::prompt::{CorpusSpec, PromptBuilder, Vocab, MAX_UNIT_TOKENS};
    use crate::trace::test_request as req;

    /// The built-in word list: one token per whitespace-separated word, as llm-sim counts.
    fn builtin_builder(block: usize) -> PromptBuilder {
        let c = Corpus::load(&CorpusSpec::new(data("txt")), None, false).unwrap();
        assert_eq!(c.stats().dropped_unstable, 0);
        PromptBuilder::with_corpus(Arc::new(Vocab::builtin()), Some(Arc::new(c)), 9, block)
    }

    #[test]
    fn builtin_corpus_prompts_have_exact_word_counts_and_share_blocks() {
        let b = builtin_builder(16);
        for n in [0usize, 1, 2, 3, 17, 40, 100, 1500] {
            let r = req(n, vec![3, 4, 5], n as u32);
            let t = b.text(&r, n);
            assert_eq!(t.split_whitespace().count(), n, "{n}: {t}");
            assert_eq!(b.token_ids(&r, n).len(), n);
            assert_eq!(b.cut_points(&r, n).last(), Some(&(t.len(), n)));
        }
        // Same hash id, same block, whatever else the request holds.
        let a = b.text(&req(1, vec![7, 8], 32), 32);
        let c = b.text(&req(2, vec![7, 9], 40), 40);
        assert_eq!(
            a.split_whitespace().take(16).collect::<Vec<_>>(),
            c.split_whitespace().take(16).collect::<Vec<_>>()
        );
        let (a2, c2) = (a.split_whitespace().nth(16), c.split_whitespace().nth(16));
        assert_ne!(a2, c2, "blocks 8 and 9 start differently");
        // Most of a block is corpus text.
        let r = req(0, (0..64).collect(), 1024);
        assert!(b.corpus_tokens(&r, 1024) > 1024 * 8 / 10);
    }

    #[test]
    fn a_partial_block_is_the_full_block_up_to_its_last_unit() {
        let b = builtin_builder(512);
        let mut full = String::new();
        b.write_block_text(77, 512, &mut full);
        for len in [3usize, 10, 200, 511] {
            let mut part = String::new();
            b.write_block_text(77, len, &mut part);
            let common = full
                .split_whitespace()
                .zip(part.split_whitespace())
                .take_while(|(a, b)| a == b)
                .count();
            assert!(
                common + MAX_UNIT_TOKENS > len,
                "len {len}: {common} in common"
            );
        }
    }

    #[test]
    fn windows_wrap_and_fill_exactly() {
        let c = Corpus::load(
            &CorpusSpec {
                max_bytes: 200,
                ..CorpusSpec::new(data("txt/a.txt"))
            },
            None,
            false,
        )
        .unwrap();
        let m = c.units() as u32;
        for need in [0usize, 1, 5, 100, 1000] {
            let mut got = 0;
            let mut ranges = Vec::new();
            let n = c.window(m - 2, need, &mut |r| {
                got += c.ids_of(r.clone()).len();
                ranges.push(r)
            });
            assert_eq!((n, got), (need, need), "{ranges:?}");
        }
    }
}
