//! Sessions of a converted log: named by a field of the log (`--session-field`, numbered in
//! order of first appearance so no name of the log is written), or inferred: a request whose
//! messages extend an earlier request's messages (the earlier request's whole list is a strict
//! prefix of this one's) is that request's session's next turn; any other request starts a new
//! session.
//!
//! Inference compares chained hashes of the messages (hash k covers messages 0..=k), so each
//! request costs one map entry (its whole list's hash → its session), never its text. When two
//! earlier requests have the same messages (two users asking the same first question), the later
//! one wins: the continuation is given to the most recent.

use std::hash::Hasher;

use llm_common::template::ChatMessage;
use rustc_hash::FxHashMap;
use siphasher::sip::SipHasher13;

/// The chained hashes of a request's messages: element k covers messages `0..=k`.
/// Only the messages count: a conversation that gains tools on a later turn is the same
/// conversation.
pub fn message_chain(messages: &[ChatMessage]) -> Vec<u64> {
    let mut prev = 0u64;
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let mut h = SipHasher13::new_with_keys(prev, 0x7e55_10f5);
        h.write(m.role.as_bytes());
        h.write_u8(0xff);
        h.write(m.content.as_bytes());
        h.write_u8(0xff);
        if let Some(t) = &m.tool_calls {
            h.write(t.to_string().as_bytes());
        }
        h.write_u8(0xff);
        if let Some(id) = &m.tool_call_id {
            h.write(id.as_bytes());
        }
        prev = h.finish();
        out.push(prev);
    }
    out
}

/// The session of every request, in log order.
#[derive(Debug, Default)]
pub struct SessionIds {
    /// A request's whole message chain hash → its session.
    by_messages: FxHashMap<u64, u64>,
    /// `--session-field` values → session.
    by_name: FxHashMap<String, u64>,
    /// Turns so far of each session (index = session).
    turns: Vec<u32>,
}

impl SessionIds {
    /// The session (numbered from 0) and turn (from 1) of the next request.
    pub fn assign(&mut self, named: Option<&str>, chain: &[u64]) -> (u64, u32) {
        let session = match named {
            Some(name) => match self.by_name.get(name) {
                Some(&s) => s,
                None => {
                    let s = self.new_session();
                    self.by_name.insert(name.to_owned(), s);
                    s
                }
            },
            None => {
                let parent = chain[..chain.len().saturating_sub(1)]
                    .iter()
                    .rev()
                    .find_map(|h| self.by_messages.get(h).copied());
                let s = parent.unwrap_or_else(|| self.new_session());
                if let Some(&last) = chain.last() {
                    self.by_messages.insert(last, s);
                }
                s
            }
        };
        self.turns[session as usize] += 1;
        (session, self.turns[session as usize])
    }

    fn new_session(&mut self) -> u64 {
        self.turns.push(0);
        (self.turns.len() - 1) as u64
    }

    /// Sessions found.
    pub fn sessions(&self) -> usize {
        self.turns.len()
    }

    /// Sessions with more than one turn.
    pub fn multi_turn(&self) -> usize {
        self.turns.iter().filter(|&&t| t > 1).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            tool_calls: None,
            tool_call_id: None,
            name: None,
        }
    }

    #[test]
    fn a_request_that_extends_an_earlier_one_is_its_next_turn() {
        let a1 = vec![msg("system", "s"), msg("user", "hi")];
        let b1 = vec![msg("system", "s"), msg("user", "hello")];
        let mut a2 = a1.clone();
        a2.extend([msg("assistant", "yo"), msg("user", "more")]);
        let mut a3 = a2.clone();
        a3.extend([msg("assistant", "ok"), msg("user", "end")]);
        let mut ids = SessionIds::default();
        let c = |m: &[ChatMessage]| message_chain(m);
        assert_eq!(ids.assign(None, &c(&a1)), (0, 1));
        assert_eq!(ids.assign(None, &c(&b1)), (1, 1));
        assert_eq!(ids.assign(None, &c(&a2)), (0, 2));
        // A turn may follow any earlier turn of the session, even if one was skipped in the log.
        assert_eq!(ids.assign(None, &c(&a3)), (0, 3));
        // The same first request again (a retry, or another user) is a new session.
        assert_eq!(ids.assign(None, &c(&a1)), (2, 1));
        assert_eq!((ids.sessions(), ids.multi_turn()), (3, 1));
        // Named sessions.
        assert_eq!(ids.assign(Some("u"), &c(&a1)), (3, 1));
        assert_eq!(ids.assign(Some("u"), &c(&b1)), (3, 2));
    }
}
