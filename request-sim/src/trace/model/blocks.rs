//! The hash ids of an agent request as a corpus keeps them ([`BlockIds`]): a list as read, or
//! **shared prefix storage**, a prefix of another request's ids plus a range of fresh ids.
//!
//! An agent's prompt is mostly its predecessor's: a day of the Copilot trace has 1.3M calls of
//! ~68k tokens, 1.4 billion hash ids (11 GB as lists) of which all but a few percent repeat
//! the call before. Stored as "the first `k` ids of the predecessor, then `n` ids from
//! `start`", a call costs one small node whatever its length; the ids are produced when a
//! request is laid out or analysed ([`BlockIds::extend_into`], [`BlockIds::to_vec`]).
//! Chains can be as long as a session; expansion and drop walk them without recursion.
//!
//! A corpus read from per-request lists (Weka) is stored the same way: each request keeps the
//! prefix it shares with its predecessor as a node ([`BlockIds::sharing`]) and its new ids as
//! a list. A laid-out request keeps its conversation's ids renamed into its namespace
//! ([`BlockIds::renamed`], [`Rename`]) as one more node, so a population of any number of
//! users holds no list per request: the ids are produced when its prompt is built.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// A request's hash ids: a list, or a prefix of other ids plus a run of fresh ones.
#[derive(Clone)]
pub enum BlockIds {
    /// Ids as a reader gave them (shared: a laid-out request renames its corpus request's
    /// list without a copy).
    List(Arc<[u64]>),
    /// The first `prefix_len` ids of `prefix`, then `fresh` ids counting up from `start`.
    Extend(Arc<Extend>),
    /// Other ids, each renamed by a [`Rename`].
    Renamed(Arc<(BlockIds, Rename)>),
}

/// How a layout renames a conversation's ids (`trace/pipeline/plan/layout.rs`): the blocks
/// wholly inside the shared tools + system prompt are keyed by those sizes and their position,
/// the others are namespaced per conversation (and repeat pass) or kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rename {
    /// The namespace of the conversation's own ids (`None`: kept as they are).
    pub space: Option<u64>,
    /// Blocks keyed as the shared tools + system prompt, and the key of their sizes.
    pub shared_blocks: usize,
    pub sizes: u64,
}

impl Rename {
    /// Id `id` at block `i`, renamed.
    pub fn apply(&self, i: usize, id: u64) -> u64 {
        if i < self.shared_blocks {
            return llm_common::util::hash3(0x5a5e_d000, self.sizes, i as u64);
        }
        match self.space {
            Some(s) => llm_common::util::hash3(s, id, 0x1d),
            None => id,
        }
    }

    fn is_identity(&self) -> bool {
        self.space.is_none() && self.shared_blocks == 0
    }
}

/// A prefix of other ids plus a run of fresh ones (see [`BlockIds::Extend`]).
pub struct Extend {
    prefix: BlockIds,
    prefix_len: usize,
    tail: Tail,
}

/// What follows an [`Extend`]'s prefix: ids counting up, or ids as a reader gave them (a Weka
/// request's new blocks past what it shares with its predecessor).
enum Tail {
    Range { start: u64, n: usize },
    List(Box<[u64]>),
}

impl Tail {
    fn len(&self) -> usize {
        match self {
            Tail::Range { n, .. } => *n,
            Tail::List(v) => v.len(),
        }
    }

    /// Appends the first `k` ids to `out`.
    fn extend_into(&self, out: &mut Vec<u64>, k: usize) {
        match self {
            Tail::Range { start, .. } => out.extend(*start..*start + k as u64),
            Tail::List(v) => out.extend_from_slice(&v[..k]),
        }
    }
}

/// A request shares its predecessor's ids through a prefix node only when at least this many
/// ids are shared (fewer cost less as a list).
const MIN_SHARED: usize = 8;

impl Default for BlockIds {
    fn default() -> Self {
        BlockIds::List(Arc::from([]))
    }
}

impl FromIterator<u64> for BlockIds {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        BlockIds::List(iter.into_iter().collect())
    }
}

impl From<Vec<u64>> for BlockIds {
    fn from(v: Vec<u64>) -> Self {
        BlockIds::List(v.into())
    }
}

impl BlockIds {
    /// The first `prefix_len` ids of `prefix` (at most its length), then `fresh` ids from
    /// `start` on.
    pub fn extend(prefix: &BlockIds, prefix_len: usize, start: u64, fresh: usize) -> BlockIds {
        let prefix_len = prefix_len.min(prefix.len());
        let prefix = if prefix_len == 0 {
            BlockIds::default()
        } else {
            prefix.clone()
        };
        BlockIds::Extend(Arc::new(Extend {
            prefix,
            prefix_len,
            tail: Tail::Range { start, n: fresh },
        }))
    }

    /// `ids` (a request's ids as read) stored as the longest prefix they share with its
    /// predecessor's (`prev`, whose ids are `prev_ids`) plus the rest as a list: an agent's
    /// prompt is mostly its predecessor's, so a corpus read this way keeps each request's new
    /// blocks only.
    pub fn sharing(prev: &BlockIds, prev_ids: &[u64], ids: Vec<u64>) -> BlockIds {
        let k = prev_ids
            .iter()
            .zip(&ids)
            .take_while(|(a, b)| a == b)
            .count()
            .min(prev.len());
        if k < MIN_SHARED {
            return BlockIds::List(ids.into());
        }
        BlockIds::Extend(Arc::new(Extend {
            prefix: prev.clone(),
            prefix_len: k,
            tail: Tail::List(ids[k..].into()),
        }))
    }

    /// `n` ids counting up from `start`.
    pub fn range(start: u64, n: usize) -> BlockIds {
        BlockIds::extend(&BlockIds::default(), 0, start, n)
    }

    /// How many ids.
    pub fn len(&self) -> usize {
        match self {
            BlockIds::List(v) => v.len(),
            BlockIds::Extend(e) => e.prefix_len + e.tail.len(),
            BlockIds::Renamed(r) => r.0.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the first `n` ids (at most all) to `out`.
    pub fn extend_into(&self, out: &mut Vec<u64>, n: usize) {
        let mut n = n.min(self.len());
        let mut runs: Vec<(&Tail, usize)> = Vec::new();
        let mut cur = self;
        while n > 0 {
            match cur {
                BlockIds::List(v) => {
                    out.extend_from_slice(&v[..n]);
                    break;
                }
                BlockIds::Renamed(r) => {
                    let from = out.len();
                    r.0.extend_into(out, n);
                    for (i, h) in out[from..].iter_mut().enumerate() {
                        *h = r.1.apply(i, *h);
                    }
                    break;
                }
                BlockIds::Extend(e) => {
                    let p = n.min(e.prefix_len);
                    if n > p {
                        runs.push((&e.tail, n - p));
                    }
                    n = p;
                    cur = &e.prefix;
                }
            }
        }
        for (tail, k) in runs.into_iter().rev() {
            tail.extend_into(out, k);
        }
    }

    /// `ids`, each renamed by `rename` (kept as they are when it renames nothing).
    pub fn renamed(ids: &BlockIds, rename: Rename) -> BlockIds {
        if rename.is_identity() || ids.is_empty() {
            return ids.clone();
        }
        BlockIds::Renamed(Arc::new((ids.clone(), rename)))
    }

    /// The ids as a slice: borrowed from a list, expanded from shared storage.
    pub fn ids(&self) -> Cow<'_, [u64]> {
        match self {
            BlockIds::List(v) => Cow::Borrowed(&v[..]),
            _ => Cow::Owned(self.to_vec()),
        }
    }

    /// Every id, as a list.
    pub fn to_vec(&self) -> Vec<u64> {
        let mut v = Vec::with_capacity(self.len());
        self.extend_into(&mut v, usize::MAX);
        v
    }

    /// The first `n` ids (all when there are fewer).
    pub fn truncated(&self, n: usize) -> BlockIds {
        match self {
            _ if n >= self.len() => self.clone(),
            BlockIds::List(v) => BlockIds::List(v[..n].into()),
            BlockIds::Renamed(r) => BlockIds::Renamed(Arc::new((r.0.truncated(n), r.1))),
            BlockIds::Extend(e) if n <= e.prefix_len => e.prefix.truncated(n),
            BlockIds::Extend(e) => BlockIds::Extend(Arc::new(Extend {
                prefix: e.prefix.clone(),
                prefix_len: e.prefix_len,
                tail: match &e.tail {
                    Tail::Range { start, .. } => Tail::Range {
                        start: *start,
                        n: n - e.prefix_len,
                    },
                    Tail::List(v) => Tail::List(v[..n - e.prefix_len].into()),
                },
            })),
        }
    }

    /// Each id mapped by `f`, as a list.
    pub fn map(&self, f: impl FnMut(u64) -> u64) -> BlockIds {
        BlockIds::List(self.to_vec().into_iter().map(f).collect())
    }
}

impl Drop for Extend {
    /// Drops a chain of prefixes one node at a time (a session-long chain would overflow the
    /// stack as a recursive drop).
    fn drop(&mut self) {
        let mut next = std::mem::take(&mut self.prefix);
        while let BlockIds::Extend(arc) = next {
            match Arc::try_unwrap(arc) {
                Ok(mut e) => next = std::mem::take(&mut e.prefix),
                Err(_) => break,
            }
        }
    }
}

impl fmt::Debug for BlockIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.to_vec()).finish()
    }
}

impl PartialEq for BlockIds {
    fn eq(&self, other: &BlockIds) -> bool {
        self.len() == other.len() && self.to_vec() == other.to_vec()
    }
}

impl Eq for BlockIds {}

impl PartialEq<[u64]> for BlockIds {
    fn eq(&self, other: &[u64]) -> bool {
        self.len() == other.len() && self.to_vec() == other
    }
}

impl<const N: usize> PartialEq<[u64; N]> for BlockIds {
    fn eq(&self, other: &[u64; N]) -> bool {
        *self == other[..]
    }
}

impl PartialEq<Vec<u64>> for BlockIds {
    fn eq(&self, other: &Vec<u64>) -> bool {
        *self == other[..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_ranges_truncation_and_deep_chains() {
        let sys = BlockIds::range(0, 2);
        let a = BlockIds::extend(&sys, 2, 10, 3);
        assert_eq!(a, [0, 1, 10, 11, 12]);
        let b = BlockIds::extend(&a, 4, 20, 2);
        assert_eq!(b, [0, 1, 10, 11, 20, 21]);
        assert_eq!(b.len(), 6);
        assert_eq!(b.truncated(3), [0, 1, 10]);
        assert_eq!(b.truncated(5), [0, 1, 10, 11, 20]);
        let mut out = vec![7];
        b.extend_into(&mut out, 4);
        assert_eq!(out, [7, 0, 1, 10, 11]);
        let l = BlockIds::from(vec![5, 6, 7]);
        assert_eq!(BlockIds::extend(&l, 9, 1, 1), [5, 6, 7, 1]);
        assert_eq!(l.map(|h| h + 1), vec![6, 7, 8]);
        // a chain of 200,000 calls, each its predecessor plus one id: no recursion
        let mut c = BlockIds::default();
        for k in 0..200_000u64 {
            c = BlockIds::extend(&c, c.len(), k, 1);
        }
        assert_eq!(c.len(), 200_000);
        assert_eq!(c.to_vec()[199_999], 199_999);
        drop(c);
    }

    #[test]
    fn a_request_shares_its_predecessors_prefix() {
        let first: Vec<u64> = (100..120).collect();
        let a = BlockIds::from(first.clone());
        let mut second = first[..15].to_vec();
        second.extend([7, 8, 9]);
        let b = BlockIds::sharing(&a, &first, second.clone());
        assert!(matches!(&b, BlockIds::Extend(e) if e.prefix_len == 15 && e.tail.len() == 3));
        assert_eq!(b, second);
        assert_eq!(b.truncated(16), second[..16]);
        assert_eq!(b.truncated(4), second[..4]);
        // fewer than MIN_SHARED ids in common: a plain list
        let c = BlockIds::sharing(&b, &second, vec![100, 101, 5]);
        assert!(matches!(c, BlockIds::List(_)));
        assert_eq!(c, [100, 101, 5]);
    }

    #[test]
    fn renamed_ids_are_renamed_when_produced() {
        let first: Vec<u64> = (100..120).collect();
        let a = BlockIds::from(first.clone());
        let b = BlockIds::sharing(&a, &first, (100..125).collect());
        let rename = Rename {
            space: Some(9),
            shared_blocks: 2,
            sizes: 77,
        };
        let r = BlockIds::renamed(&b, rename);
        let want: Vec<u64> = (100..125)
            .enumerate()
            .map(|(i, h)| rename.apply(i, h))
            .collect();
        assert_eq!(r.len(), 25);
        assert_eq!(r, want);
        assert_eq!(r.truncated(3), want[..3]);
        assert_ne!(want[0], 100);
        assert_eq!(
            want[0],
            Rename {
                space: None,
                ..rename
            }
            .apply(0, 555)
        );
        // renaming nothing keeps the ids
        assert!(matches!(
            BlockIds::renamed(&b, Rename::default()),
            BlockIds::Extend(_)
        ));
    }
}
