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
//! Blocks also have **branches**: a new conversation that shares more than its first block
//! with an earlier request, on a prefix not many conversations share (an edited turn, a second
//! question on the same document), joins that request's session, as a chat UI keeps a branch
//! in its conversation and a Bailian trace links it into its chain. One shared block is what
//! every conversation behind the same short system prompt has, so it is never a branch; a
//! longer prefix is *common* (a long system prompt) once [`COMMON_AFTER`] different full
//! blocks have followed it, and a conversation sharing only a common prefix starts its own
//! session. The rule is online (a streamed replay uses it), so the first conversations through
//! a long prefix that turns out common join each other: at most `COMMON_AFTER` of them per
//! such prefix. In the Mooncake conversation trace's first 15 minutes, 2,016 conversations are
//! 1,899 sessions this way; drawn onto 4 instances by session, their prefix sharing costs
//! 0.01 pp of hit ratio instead of 1.5 pp (`docs/transform.md`).
//!
//! Memory: one entry per registered request and a turn counter per session. `idle_ms` bounds it
//! for endless inputs: a session that has had no turn for longer is over, as a real session ends
//! (a later request that extends it starts a new session), and its entries are dropped at the
//! next sweep (one per `idle_ms` of log time).

use rustc_hash::FxHashMap;

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
    /// Requests that joined a session as a branch (`assign_or`).
    branches: usize,
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
        self.assign_or(named, prefixes, key, time_ms, None)
    }

    /// [`Self::assign`], with `branch_of`: the session an unnamed request joins when it
    /// extends no earlier content (a branch, see the module doc) and that session is not over.
    pub fn assign_or(
        &mut self,
        named: Option<&str>,
        prefixes: &[u64],
        key: Option<u64>,
        time_ms: f64,
        branch_of: Option<u64>,
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
                // Over when idle too long, whether or not a sweep has dropped it yet.
                let alive = |s: &u64| {
                    self.live.get(s).is_some_and(|l| {
                        self.idle_ms.is_none_or(|idle| time_ms - l.last_ms <= idle)
                    })
                };
                let parent = prefixes
                    .iter()
                    .rev()
                    .find_map(|h| self.by_content.get(h).copied())
                    .filter(alive);
                let s = match parent.or_else(|| branch_of.filter(alive)) {
                    Some(s) => {
                        if parent.is_none() {
                            self.branches += 1;
                        }
                        s
                    }
                    None => self.new_session(),
                };
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

    /// Requests that joined a session as a branch.
    pub fn branches(&self) -> usize {
        self.branches
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

/// A block prefix is common (a system prompt: no branch joins through it) once this many
/// different full blocks have followed it. 3 keeps the Mooncake conversation trace's branches
/// (2 or 3 continuations of a prefix) and merges at most 3 conversations per common prefix;
/// 2 would split a third branch off (0.2 pp of hit ratio on 4 session-routed instances).
pub const COMMON_AFTER: u8 = 3;

/// One block prefix seen: the session of the first request that held it, and how many
/// different full blocks have followed it (up to [`COMMON_AFTER`]).
#[derive(Debug, Clone, Copy)]
struct Node {
    session: u64,
    children: u8,
}

/// Sessions inferred from hash ids (`--infer-sessions`): the full blocks of a request are its
/// content, and a branch joins the session it branched from (see the module doc).
#[derive(Debug, Default)]
pub struct BlockSessions {
    ids: SessionIds,
    /// Chain hash of every block prefix seen (what makes a registered content new, and where
    /// a branch comes from).
    nodes: FxHashMap<u64, Node>,
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
        // Every prefix of a seen chain was seen (each request adds all of its own), so the
        // seen ones are the first `shared`.
        let shared = chain
            .iter()
            .take_while(|h| self.nodes.contains_key(h))
            .count();
        // Only content this request brought: its last full block, first seen here.
        let key = (full > shared).then(|| chain[full - 1]);
        // A branch: the deepest prefix seen, of two blocks or more, is followed here by a new
        // full block, and is not common yet.
        let branch_of = (2..full)
            .contains(&shared)
            .then(|| self.nodes[&chain[shared - 1]])
            .filter(|n| n.children < COMMON_AFTER)
            .map(|n| n.session);
        let prefixes = &chain[..chain.len().saturating_sub(1)];
        let out = self.ids.assign_or(None, prefixes, key, time_ms, branch_of);
        for (k, &h) in chain.iter().enumerate().skip(shared) {
            self.nodes.insert(
                h,
                Node {
                    session: out.0,
                    children: 0,
                },
            );
            if (1..full).contains(&k) {
                if let Some(p) = self.nodes.get_mut(&chain[k - 1]) {
                    p.children = p.children.saturating_add(1).min(COMMON_AFTER);
                }
            }
        }
        out
    }

    /// Sessions found, those with more than one turn, and the requests that joined a session
    /// as a branch.
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            self.ids.sessions(),
            self.ids.multi_turn(),
            self.ids.branches(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashSet;

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
        assert_eq!(s.counts(), (4, 1, 0));
    }

    #[test]
    fn a_branch_joins_until_its_prefix_is_common() {
        let mut s = BlockSessions::default();
        // Block 4 tokens, every block full.
        assert_eq!(s.assign(&[0, 1, 2, 3], 16, 4, 0.0), (0, 1));
        // Shares [0, 1] then goes elsewhere: a branch of session 0 (its second request).
        assert_eq!(s.assign(&[0, 1, 5, 6], 16, 4, 1.0), (0, 2));
        // A third continuation of [0, 1]: still a branch.
        assert_eq!(s.assign(&[0, 1, 7], 12, 4, 2.0), (0, 3));
        // [0, 1] has been followed by three different blocks: common, a session of its own...
        assert_eq!(s.assign(&[0, 1, 8, 9], 16, 4, 3.0), (1, 1));
        // ...whose next turn extends it.
        assert_eq!(s.assign(&[0, 1, 8, 9, 10], 20, 4, 4.0), (1, 2));
        // Sharing one block is never a branch.
        assert_eq!(s.assign(&[0, 11, 12], 12, 4, 5.0), (2, 1));
        // Nor is a request with no full block of its own (a repeat of session 0's first).
        assert_eq!(s.assign(&[0, 1, 2, 3], 16, 4, 6.0), (3, 1));
        assert_eq!(s.counts(), (4, 2, 2));
    }

    #[test]
    fn a_long_shared_system_prompt_merges_at_most_common_after_conversations() {
        let mut s = BlockSessions::default();
        // 20 conversations behind a 3-block system prompt [100, 101, 102], two turns each.
        let mut firsts = Vec::new();
        for c in 0..20u64 {
            let ids = [100, 101, 102, 1000 + c, 2000 + c];
            firsts.push(s.assign(&ids, 20, 4, c as f64).0);
        }
        for c in 0..20u64 {
            let ids = [100, 101, 102, 1000 + c, 2000 + c, 3000 + c];
            assert_eq!(
                s.assign(&ids, 24, 4, 100.0 + c as f64).0,
                firsts[c as usize]
            );
        }
        let distinct: FxHashSet<u64> = firsts.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            20 - (COMMON_AFTER as usize - 1),
            "{firsts:?}"
        );
        assert_eq!(s.counts().2, COMMON_AFTER as usize - 1);
    }
}
