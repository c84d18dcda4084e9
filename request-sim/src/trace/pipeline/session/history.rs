//! `--live-history`: where, in each later turn of a `messages` trace, the recorded answers of
//! its earlier turns are, so the replay can put the server's real answers there.
//!
//! A turn's `messages` carry the whole conversation: its parent's prompt (the parent's
//! `messages`), the parent's answer, then what came after it (tool results, the next user
//! message). The parent's answer is the run of `assistant` messages right after the parent's
//! prompt in the child's history (none: the answer is inserted there). The same holds for
//! every earlier turn of the replayed session, each at the length of its own prompt.

use std::ops::Range;

use serde_json::Value;

use crate::trace::error::{RowError, TraceError};
use crate::trace::model::Trace;

/// One recorded answer inside a turn's `messages`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerSpan {
    /// Whose answer: 1 = the parent turn's, 2 = the grandparent's, ...
    pub depth: u32,
    /// The recorded answer's messages (indexes into the turn's `messages`); empty when the
    /// history has no assistant message there.
    pub messages: Range<usize>,
}

/// The messages of request `index` (a `messages` row, not a `text_input` one).
fn messages_of(trace: &Trace, index: usize) -> Option<&[Value]> {
    let chat = trace.chat(index)?;
    if chat.text_input.is_some() {
        return None;
    }
    chat.messages.as_array().map(Vec::as_slice)
}

/// For every request of `trace` (by index), the recorded answers of its earlier turns in
/// the replayed slice, in message order. A turn whose `messages` do not start with its
/// parent's is an error on the turn's line: live history needs whole conversations. In an
/// agent corpus (`dag_jsonl`) that ends the history instead: a spawned subagent starts empty
/// (its first request's parent is the request it follows, not its history), and a
/// `message_array_with_responses` turn is sent as written.
pub fn answer_spans(trace: &Trace, path: &str) -> Result<Vec<Vec<AnswerSpan>>, TraceError> {
    let n = trace.requests.len();
    let mut spans = vec![Vec::new(); n];
    for (index, slot) in spans.iter_mut().enumerate() {
        let Some(own) = messages_of(trace, index) else {
            continue;
        };
        let mut newer_start = own.len() + 1;
        let mut depth = 0;
        let mut cur = index;
        let agentic = trace.sessions.get(index).is_some_and(|t| t.agent.is_some());
        while let Some(parent) = trace.sessions.get(cur).and_then(|t| t.parent_index) {
            depth += 1;
            let Some(prompt) = messages_of(trace, parent) else {
                break;
            };
            if agentic && !own.starts_with(prompt) {
                break;
            }
            if depth == 1 && !own.starts_with(prompt) {
                let line = trace.requests[index].line;
                let parent_line = trace.requests[parent].line;
                return Err(TraceError::Row {
                    path: path.to_owned(),
                    line,
                    error: RowError::Field {
                        field: "messages".into(),
                        what: format!(
                            "--live-history: this turn's messages do not start with those of its parent turn (line {parent_line}); live history needs every turn to carry the whole conversation so far"
                        ),
                    },
                });
            }
            let at = prompt.len();
            if at > own.len() {
                break;
            }
            let run = own[at..]
                .iter()
                .take_while(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .count();
            // An earlier answer never overlaps a later one (turns that repeat their parent's
            // prompt unchanged have no answer of their own to replace).
            if at + run <= newer_start && at < newer_start {
                slot.push(AnswerSpan {
                    depth,
                    messages: at..at + run,
                });
                newer_start = at;
            }
            cur = parent;
        }
        slot.reverse();
    }
    Ok(spans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{parse_reader, LoadOptions};

    fn load(text: &str) -> Trace {
        parse_reader("t.jsonl", text.as_bytes(), &LoadOptions::default()).unwrap()
    }

    #[test]
    fn spans_of_every_earlier_answer() {
        let t = load(
            r#"{"session_id": "s", "timestamp": 0, "messages": [{"role": "user", "content": "a"}]}
{"session_id": "s", "delay": 1, "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "A"}, {"role": "user", "content": "b"}]}
{"session_id": "s", "delay": 1, "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "A"}, {"role": "user", "content": "b"}, {"role": "user", "content": "c"}]}
{"session_id": "u", "timestamp": 5, "messages": [{"role": "user", "content": "x"}]}
"#,
        );
        let s = answer_spans(&t, "t.jsonl").unwrap();
        assert_eq!(s[0], vec![]);
        assert_eq!(
            s[1],
            vec![AnswerSpan {
                depth: 1,
                messages: 1..2
            }]
        );
        // Turn 3: the grandparent's answer at 1, the parent's (not recorded) inserted at 3.
        assert_eq!(
            s[2],
            vec![
                AnswerSpan {
                    depth: 2,
                    messages: 1..2
                },
                AnswerSpan {
                    depth: 1,
                    messages: 3..3
                }
            ]
        );
        assert_eq!(s[3], vec![]);
    }

    #[test]
    fn history_that_does_not_continue_its_parent_is_an_error() {
        let t = load(
            r#"{"session_id": "s", "timestamp": 0, "messages": [{"role": "user", "content": "a"}]}
{"session_id": "s", "delay": 1, "messages": [{"role": "user", "content": "b"}]}
"#,
        );
        let e = answer_spans(&t, "t.jsonl").unwrap_err().to_string();
        assert!(
            e.starts_with("t.jsonl:2: field `messages`: --live-history: this turn's messages do not start with those of its parent turn (line 1)"),
            "{e}"
        );
    }
}
