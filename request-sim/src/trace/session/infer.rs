//! Sessions inferred from what requests hold, one rule for logs (`convert`, over messages) and
//! traces (`transform`/`replay --infer-sessions`, over hash ids): **a request whose content
//! strictly extends an earlier request's whole content is that request's session's next turn**;
//! any other request starts a new session. When several earlier requests qualify, the longest
//! one wins, and among requests with the same content the most recent (two users asking the same
//! first question: the continuation is given to the later).
//!
//! Content is a chain of hashes, element k covering units `0..=k` (messages, or blocks), so each
//! request costs one map entry (its content's hash → its session), never its text.
//!
//! Blocks need one more rule (`BlockSessions`): a trace's last hash id usually covers a partial
//! block, whose hash changes when the next turn fills it (in the Mooncake conversation trace 12
//! requests of 12,031 strictly extend an earlier request's whole id list, 3,974 extend all but its
//! last id). So a request's content is its *full* blocks (`input_length / block`), and a request
//! whose full blocks are all blocks seen before (say only a system prompt shared by everyone, its
//! own text in the partial block) is not registered: every new conversation would extend it.
//!
//! Memory: one entry per registered request and a turn counter per session. `idle_ms` bounds it
//! for endless inputs: a session that has had no turn for longer is over, as a real session ends
//! (a later request that extends it starts a new session), and its entries are dropped at the
//! next sweep (one per `idle_ms` of log time).

use rustc_hash::{FxHashMap, FxHashSet};

/// One session's state.
#[derive(Debug, Clone, Copy)]
struct Live {
    turns: u32,
    last_ms: f64,
}

/// The session of every request, in input order.
#[derive(Debug, Default)]
pub struct SessionIds {
    /// A registered request's content hash → its session.
    by_content: FxHashMap<u64, u64>,
    /// Named sessions (a field of the log) → session.
    by_name: FxHashMap<String, u64>,
    /// Sessions with state (all of them without `idle_ms`).
    live: FxHashMap<u64, Live>,
    /// Sessions numbered so far.
    next: u64,
    /// Sessions with more than one turn, counted when a second turn arrives.
    multi: usize,
    /// Forget a session after this long without a turn (`None`: never).
    idle_ms: Option<f64>,
    /// When idle sessions were last swept out (log time, ms).
    swept_ms: Option<f64>,
    /// Sessions started by a name.
    named: usize,
}

impl SessionIds {
    /// Sessions forgotten after `idle_ms` without a turn (bounded memory on endless inputs).
    pub fn with_idle(idle_ms: Option<f64>) -> SessionIds {
        SessionIds {
            idle_ms,
            ..SessionIds::default()
        }
    }

    /// The session (numbered from 0) and turn (from 1) of the next request, at `time_ms`:
    /// `named` when the input names it; else the session of the longest hash in `prefixes`
    /// (the request's content chain, without its whole content) that an earlier request
    /// registered. `key` is this request's own content, registered for later requests (`None`:
    /// nothing a later request may extend).
    pub fn assign(
        &mut self,
        named: Option<&str>,
        prefixes: &[u64],
        key: Option<u64>,
        time_ms: f64,
    ) -> (u64, u32) {
        let session = match named {
            Some(name) => match self.by_name.get(name) {
                Some(&s) => s,
                None => {
                    let s = self.new_session();
                    self.by_name.insert(name.to_owned(), s);
                    self.named += 1;
                    s
                }
            },
            None => {
                let parent = prefixes
                    .iter()
                    .rev()
                    .find_map(|h| self.by_content.get(h).copied())
                    .filter(|s| {
                        // Over when idle too long, whether or not a sweep has dropped it yet.
                        self.live.get(s).is_some_and(|l| {
                            self.idle_ms.is_none_or(|idle| time_ms - l.last_ms <= idle)
                        })
                    });
                let s = parent.unwrap_or_else(|| self.new_session());
                if let Some(k) = key {
                    self.by_content.insert(k, s);
                }
                s
            }
        };
        let live = self.live.entry(session).or_insert(Live {
            turns: 0,
            last_ms: time_ms,
        });
        live.turns += 1;
        live.last_ms = live.last_ms.max(time_ms);
        let turn = live.turns;
        if turn == 2 {
            self.multi += 1;
        }
        if let Some(idle) = self.idle_ms {
            let swept = *self.swept_ms.get_or_insert(time_ms);
            if time_ms - swept >= idle {
                self.sweep(time_ms);
            }
        }
        (session, turn)
    }

    /// The messages rule (`convert`): `chain[k]` covers messages `0..=k`; the whole list is the
    /// key, its strict prefixes are looked up.
    pub fn assign_chain(&mut self, named: Option<&str>, chain: &[u64], time_ms: f64) -> (u64, u32) {
        let prefixes = &chain[..chain.len().saturating_sub(1)];
        self.assign(named, prefixes, chain.last().copied(), time_ms)
    }

    /// Forgets the sessions idle for longer than `idle_ms` before `now_ms` (run once per
    /// `idle_ms` of log time: what is held is the sessions of the last one or two of them).
    fn sweep(&mut self, now_ms: f64) {
        self.swept_ms = Some(now_ms);
        let Some(idle) = self.idle_ms else {
            return;
        };
        let before = self.live.len();
        self.live.retain(|_, l| now_ms - l.last_ms <= idle);
        if self.live.len() == before {
            return;
        }
        let live = &self.live;
        self.by_content.retain(|_, s| live.contains_key(s));
        self.by_name.retain(|_, s| live.contains_key(s));
        self.by_content.shrink_to_fit();
        self.live.shrink_to_fit();
    }

    fn new_session(&mut self) -> u64 {
        self.next += 1;
        self.next - 1
    }

    /// Sessions found.
    pub fn sessions(&self) -> usize {
        self.next as usize
    }

    /// Sessions with more than one turn.
    pub fn multi_turn(&self) -> usize {
        self.multi
    }

    /// Sessions started by a name (`named`).
    pub fn named(&self) -> usize {
        self.named
    }

    /// Entries held now (registered contents, live sessions): what memory grows with.
    pub fn held(&self) -> (usize, usize) {
        (self.by_content.len(), self.live.len())
    }
}

/// Sessions inferred from hash ids (`--infer-sessions`): the full blocks of a request are its
/// content (see the module doc).
#[derive(Debug, Default)]
pub struct BlockSessions {
    ids: SessionIds,
    /// Chain hashes of every block prefix seen (what makes a registered content new).
    seen: FxHashSet<u64>,
}

impl BlockSessions {
    /// The session and turn of a request holding `hash_ids` over `input_length` tokens of
    /// `block` tokens per id, at `time_ms`.
    pub fn assign(
        &mut self,
        hash_ids: &[u64],
        input_length: u32,
        block: usize,
        time_ms: f64,
    ) -> (u64, u32) {
        // Chained here, so traces whose ids are not themselves chained still compare prefixes.
        let mut prev = 0x5e55_1035u64;
        let chain: Vec<u64> = hash_ids
            .iter()
            .map(|&h| {
                prev = llm_common::util::hash3(prev, h, 0x0b10c);
                prev
            })
            .collect();
        let full = (input_length as usize / block.max(1)).min(chain.len());
        // Only content this request brought: its last full block first seen here.
        let key = full
            .checked_sub(1)
            .map(|i| chain[i])
            .filter(|k| !self.seen.contains(k));
        let prefixes = &chain[..chain.len().saturating_sub(1)];
        let out = self.ids.assign(None, prefixes, key, time_ms);
        self.seen.extend(chain);
        out
    }

    /// Sessions found, and those with more than one turn.
    pub fn counts(&self) -> (usize, usize) {
        (self.ids.sessions(), self.ids.multi_turn())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_earlier_content_wins_and_the_latest_of_equals() {
        let mut ids = SessionIds::default();
        // a = [1], b = [1, 2] (extends a), c = [1] again (a new session, now the latest [1]).
        assert_eq!(ids.assign_chain(None, &[1], 0.0), (0, 1));
        assert_eq!(ids.assign_chain(None, &[1, 2], 1.0), (0, 2));
        assert_eq!(ids.assign_chain(None, &[1], 2.0), (1, 1));
        assert_eq!(ids.assign_chain(None, &[1, 3], 3.0), (1, 2));
        // [1, 2, 4] extends [1, 2] (longer than [1]).
        assert_eq!(ids.assign_chain(None, &[1, 2, 4], 4.0), (0, 3));
        assert_eq!((ids.sessions(), ids.multi_turn()), (2, 2));
    }

    #[test]
    fn idle_sessions_are_forgotten() {
        let mut ids = SessionIds::with_idle(Some(10.0));
        assert_eq!(ids.assign_chain(None, &[1], 0.0), (0, 1));
        assert_eq!(ids.assign_chain(None, &[1, 2], 5.0), (0, 2));
        // Idle for 11 > 10: over, though not swept yet (the last sweep was at 0... 5).
        assert_eq!(ids.assign_chain(None, &[1, 2, 3], 16.0), (1, 1));
        // The sweep at 16 dropped session 0; session 1 stays until it is idle.
        assert_eq!(ids.held(), (1, 1));
        assert_eq!(ids.assign_chain(None, &[1, 2, 3, 4], 20.0), (1, 2));
        assert_eq!(ids.assign_chain(None, &[9], 40.0), (2, 1));
        assert_eq!(ids.held(), (1, 1));
    }

    #[test]
    fn a_partial_last_block_does_not_hide_the_next_turn() {
        let mut s = BlockSessions::default();
        // Block 4 tokens. A: 2 full blocks + a partial one. B (another conversation, same first
        // block). A's next turn fills A's partial block (new id 9) and goes on.
        assert_eq!(s.assign(&[0, 1, 2], 10, 4, 0.0), (0, 1));
        assert_eq!(s.assign(&[0, 5, 6], 10, 4, 1.0), (1, 1));
        assert_eq!(s.assign(&[0, 1, 9, 10], 14, 4, 2.0), (0, 2));
        // A request whose only full block is the shared one registers nothing...
        assert_eq!(s.assign(&[0, 7], 6, 4, 3.0), (2, 1));
        // ...so a new conversation starting with that block is not its next turn.
        assert_eq!(s.assign(&[0, 8, 11], 10, 4, 4.0), (3, 1));
        assert_eq!(s.counts(), (4, 1));
    }
}
