//! The hash ids of an agent request as a corpus keeps them ([`BlockIds`]): a list as read, or
//! **shared prefix storage**, a prefix of another request's ids plus a range of fresh ids.
//!
//! An agent's prompt is mostly its predecessor's: a day of the Copilot trace has 1.3M calls of
//! ~68k tokens, 1.4 billion hash ids (11 GB as lists) of which all but a few percent repeat
//! the call before. Stored as "the first `k` ids of the predecessor, then `n` ids from
//! `start`", a call costs one small node whatever its length; the ids are produced when a
//! request is laid out or analysed ([`BlockIds::extend_into`], [`BlockIds::to_vec`]).
//! Chains can be as long as a session; expansion and drop walk them without recursion.

use std::fmt;
use std::sync::Arc;

/// A request's hash ids: a list, or a prefix of other ids plus a run of fresh ones.
#[derive(Clone)]
pub enum BlockIds {
    /// Ids as a reader gave them.
    List(Vec<u64>),
    /// The first `prefix_len` ids of `prefix`, then `fresh` ids counting up from `start`.
    Extend(Arc<Extend>),
}

/// A prefix of other ids plus a run of fresh ones (see [`BlockIds::Extend`]).
pub struct Extend {
    prefix: BlockIds,
    prefix_len: usize,
    start: u64,
    fresh: usize,
}

impl Default for BlockIds {
    fn default() -> Self {
        BlockIds::List(Vec::new())
    }
}

impl From<Vec<u64>> for BlockIds {
    fn from(v: Vec<u64>) -> Self {
        BlockIds::List(v)
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
            start,
            fresh,
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
            BlockIds::Extend(e) => e.prefix_len + e.fresh,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the first `n` ids (at most all) to `out`.
    pub fn extend_into(&self, out: &mut Vec<u64>, n: usize) {
        let mut n = n.min(self.len());
        let mut runs: Vec<(u64, usize)> = Vec::new();
        let mut cur = self;
        while n > 0 {
            match cur {
                BlockIds::List(v) => {
                    out.extend_from_slice(&v[..n]);
                    break;
                }
                BlockIds::Extend(e) => {
                    let p = n.min(e.prefix_len);
                    if n > p {
                        runs.push((e.start, n - p));
                    }
                    n = p;
                    cur = &e.prefix;
                }
            }
        }
        for (start, k) in runs.into_iter().rev() {
            out.extend(start..start + k as u64);
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
            BlockIds::List(v) => BlockIds::List(v[..n].to_vec()),
            BlockIds::Extend(e) if n <= e.prefix_len => e.prefix.truncated(n),
            BlockIds::Extend(e) => {
                BlockIds::extend(&e.prefix, e.prefix_len, e.start, n - e.prefix_len)
            }
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
}
