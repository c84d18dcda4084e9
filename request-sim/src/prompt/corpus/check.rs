//! Tokenizing and checking a corpus's units (steps 2 and 3 of the module docs): every distinct
//! unit tokenized once, units of the wrong shape dropped, then the units checked in corpus order
//! to re-tokenize stably across their boundaries ([`Units`]).

use std::ops::Range;

use rustc_hash::FxHashMap;

use super::spec::{CorpusStats, MAX_UNIT_BYTES, MAX_UNIT_TOKENS};
use crate::prompt::{Encoder, PromptError};

/// Consecutive units encoded together by the stability check.
const CHECK_GROUP: usize = 256;

/// Units on each side of a dropped unit checked again in the next round.
const RECHECK_SPAN: usize = 8;

/// After this many rounds, units of groups that still fail are all dropped.
const MAX_ROUNDS: usize = 8;

/// The tokenized units before the stability check.
pub(super) struct Units<'a> {
    /// Distinct unit texts (with their space) and their token ids.
    pub(super) distinct: Vec<&'a str>,
    pub(super) tokens: Vec<Vec<u32>>,
    /// The corpus as distinct-unit indices, in order (shape-dropped units left out).
    pub(super) seq: Vec<u32>,
}

impl<'a> Units<'a> {
    /// Split `text` into units, drop the words of the wrong shape, tokenize every distinct
    /// unit once with `enc` (`None`: one token per word, the built-in word list) and drop the
    /// units with no tokens or more than [`MAX_UNIT_TOKENS`].
    pub(super) fn tokenize(
        text: &'a str,
        enc: Option<&dyn Encoder>,
        strip: bool,
        stats: &mut CorpusStats,
    ) -> Result<Units<'a>, PromptError> {
        let mut index: FxHashMap<&'a str, u32> = FxHashMap::default();
        let mut distinct: Vec<&'a str> = Vec::new();
        let mut seq = Vec::new();
        // `text` holds the units back to back, each " " + word: split before every space.
        for unit in split_units(text) {
            stats.words += 1;
            if !usable_word(&unit[1..]) {
                stats.dropped_shape += 1;
                continue;
            }
            let next = distinct.len() as u32;
            let k = *index.entry(unit).or_insert_with(|| {
                distinct.push(unit);
                next
            });
            seq.push(k);
        }
        let tokens: Vec<Vec<u32>> = match enc {
            Some(enc) => {
                let texts: Vec<String> = distinct
                    .iter()
                    .map(|u| if strip { &u[1..] } else { u }.to_string())
                    .collect();
                enc.encode_many(&texts)?
            }
            // The built-in word list: one token per word (ids only identify the word).
            None => distinct
                .iter()
                .map(|u| vec![(llm_common::util::fmix64(fnv1a(u)) >> 33) as u32])
                .collect(),
        };
        let bad: Vec<bool> = tokens
            .iter()
            .map(|t| t.is_empty() || t.len() > MAX_UNIT_TOKENS)
            .collect();
        let before = seq.len();
        seq.retain(|&k| !bad[k as usize]);
        stats.dropped_shape += before - seq.len();
        Ok(Units {
            distinct,
            tokens,
            seq,
        })
    }

    /// The stability check (module docs, step 3): returns the kept sequence.
    pub(super) fn check(
        &self,
        enc: &dyn Encoder,
        strip: bool,
        stats: &mut CorpusStats,
    ) -> Result<Vec<u32>, PromptError> {
        let mut seq = self.seq.clone();
        let mut groups: Vec<Range<usize>> = (0..seq.len())
            .step_by(CHECK_GROUP)
            .map(|s| s..(s + CHECK_GROUP).min(seq.len()))
            .collect();
        for round in 1..=MAX_ROUNDS {
            stats.check_rounds = round;
            let drop = self.failing_units(enc, strip, &seq, groups, round == MAX_ROUNDS)?;
            if drop.is_empty() {
                break;
            }
            stats.dropped_unstable += drop.len();
            // Remove them, and check again around where they were (new neighbours meet).
            let mut keep = vec![true; seq.len()];
            drop.iter().for_each(|&i| keep[i] = false);
            let mut new_pos = Vec::with_capacity(drop.len());
            let mut kept = Vec::with_capacity(seq.len());
            for (i, &k) in seq.iter().enumerate() {
                if keep[i] {
                    kept.push(k);
                } else {
                    new_pos.push(kept.len());
                }
            }
            seq = kept;
            new_pos.dedup();
            groups = new_pos
                .iter()
                .map(|&p| p.saturating_sub(RECHECK_SPAN)..(p + RECHECK_SPAN).min(seq.len()))
                .filter(|r| r.len() > 1)
                .collect();
            if groups.is_empty() {
                break;
            }
        }
        // A window that reaches the end of the corpus runs on at its start: that boundary too.
        while seq.len() > 1 {
            let (last, first) = (seq[seq.len() - 1], seq[0]);
            let mut t = format!(
                "{}{}",
                self.distinct[last as usize], self.distinct[first as usize]
            );
            if strip {
                t.remove(0);
            }
            let got = enc.encode_many(&[t])?;
            let want = self.tokens[last as usize]
                .iter()
                .chain(&self.tokens[first as usize]);
            if got[0].iter().eq(want) {
                break;
            }
            seq.pop();
            stats.dropped_unstable += 1;
        }
        Ok(seq)
    }

    /// Positions (in `seq`) to drop so that every group re-tokenizes to its units' tokens: a
    /// failing group is halved until a failing pair of halves that each pass is found; the
    /// first unit of the second half is dropped (the boundary before it did not hold). With
    /// `all`, every unit of a failing group is dropped instead (the last round).
    fn failing_units(
        &self,
        enc: &dyn Encoder,
        strip: bool,
        seq: &[u32],
        mut pending: Vec<Range<usize>>,
        all: bool,
    ) -> Result<Vec<usize>, PromptError> {
        let mut drop = Vec::new();
        // Failing groups whose halves are being checked: (group, left half ok?, right ok?).
        while !pending.is_empty() {
            let texts: Vec<String> = pending
                .iter()
                .map(|r| {
                    let mut t: String = seq[r.clone()]
                        .iter()
                        .map(|&k| self.distinct[k as usize])
                        .collect();
                    if strip {
                        t.remove(0);
                    }
                    t
                })
                .collect();
            let got = enc.encode_many(&texts)?;
            let mut next = Vec::new();
            for (r, ids) in pending.into_iter().zip(got) {
                let want = seq[r.clone()]
                    .iter()
                    .flat_map(|&k| self.tokens[k as usize].iter().copied());
                if ids.iter().copied().eq(want) {
                    continue;
                }
                if all {
                    drop.extend(r);
                } else if r.len() == 2 {
                    drop.push(r.start + 1);
                } else if r.len() > 2 {
                    let mid = r.start + r.len() / 2;
                    // The boundary at `mid` is checked by a pair straddling it.
                    next.push(r.start..mid);
                    next.push(mid..r.end);
                    next.push(mid - 1..mid + 1);
                }
            }
            pending = next;
        }
        drop.sort_unstable();
        drop.dedup();
        Ok(drop)
    }
}

/// The units of `text` (a run of `" " + word` units): split before every space.
fn split_units(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let mut s = 0;
    std::iter::from_fn(move || {
        if s >= b.len() {
            return None;
        }
        let e = b[s + 1..]
            .iter()
            .position(|&c| c == b' ')
            .map_or(b.len(), |p| s + 1 + p);
        let u = &text[s..e];
        s = e;
        Some(u)
    })
}

/// A word worth keeping: short, and no control or replacement characters.
fn usable_word(w: &str) -> bool {
    w.len() <= MAX_UNIT_BYTES && !w.chars().any(|c| c.is_control() || c == '\u{FFFD}')
}

/// The FNV-1a hash of `s` (the built-in word list's token id of a unit, mixed).
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_split_before_every_space() {
        let u: Vec<&str> = split_units(" Hello, world! é").collect();
        assert_eq!(u, [" Hello,", " world!", " é"]);
        assert_eq!(split_units("").count(), 0);
    }
}
