//! Sessions of a converted log: named by a field of the log (`--session-field`, numbered in
//! order of first appearance so no name of the log is written), or inferred: a request whose
//! messages extend an earlier request's messages (the earlier request's whole list is a strict
//! prefix of this one's) is that request's session's next turn; any other request starts a new
//! session. The rule is `trace::pipeline::session::SessionIds` (shared with `--infer-sessions` over hash
//! ids); this file makes a request's messages into the chain of hashes it compares.

use std::hash::Hasher;

use llm_common::template::ChatMessage;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::pipeline::session::SessionIds;

    #[test]
    fn a_request_that_extends_an_earlier_one_is_its_next_turn() {
        let a1 = vec![
            ChatMessage::text("system", "s"),
            ChatMessage::text("user", "hi"),
        ];
        let b1 = vec![
            ChatMessage::text("system", "s"),
            ChatMessage::text("user", "hello"),
        ];
        let mut a2 = a1.clone();
        a2.extend([
            ChatMessage::text("assistant", "yo"),
            ChatMessage::text("user", "more"),
        ]);
        let mut a3 = a2.clone();
        a3.extend([
            ChatMessage::text("assistant", "ok"),
            ChatMessage::text("user", "end"),
        ]);
        let mut ids = SessionIds::default();
        let c = |m: &[ChatMessage]| message_chain(m);
        assert_eq!(ids.assign_chain(None, &c(&a1), 0.0), (0, 1));
        assert_eq!(ids.assign_chain(None, &c(&b1), 0.0), (1, 1));
        assert_eq!(ids.assign_chain(None, &c(&a2), 0.0), (0, 2));
        // A turn may follow any earlier turn of the session, even if one was skipped in the log.
        assert_eq!(ids.assign_chain(None, &c(&a3), 0.0), (0, 3));
        // The same first request again (a retry, or another user) is a new session.
        assert_eq!(ids.assign_chain(None, &c(&a1), 0.0), (2, 1));
        assert_eq!((ids.sessions(), ids.multi_turn()), (3, 1));
        // Named sessions.
        assert_eq!(ids.assign_chain(Some("u"), &c(&a1), 0.0), (3, 1));
        assert_eq!(ids.assign_chain(Some("u"), &c(&b1), 0.0), (3, 2));
    }
}
