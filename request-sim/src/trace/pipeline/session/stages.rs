//! The session stages of the trace pipeline (`trace/pipeline/stages.rs` calls them, row by row):
//! `delay`s resolved in file order, missing Bailian turns filled in and `session_id` turns
//! linked in time order.

use std::collections::HashMap;
use std::sync::Arc;

use crate::trace::error::RowError;
use crate::trace::model::SessionTurn;
use crate::trace::row::RawRow;

/// `delay` rows (messages traces, file order): a row without a `timestamp` is at its
/// session's previous turn plus the delay.
#[derive(Default)]
pub(crate) struct Delays {
    /// Each session's latest time in file order.
    last: HashMap<String, f64>,
}

impl Delays {
    pub(crate) fn resolve(&mut self, raw: &mut RawRow) -> Result<(), RowError> {
        let Some(id) = &raw.session_id else {
            return Ok(());
        };
        if raw.timestamp_ms.is_nan() {
            let Some(prev) = self.last.get(id) else {
                return Err(RowError::Field {
                    field: "delay".into(),
                    what: format!(
                        "this is the first turn of session {id:?}: nothing to delay from (give it a `timestamp`)"
                    ),
                });
            };
            raw.timestamp_ms = prev + raw.delay_ms.unwrap_or(0.0);
        }
        self.last.insert(id.clone(), raw.timestamp_ms);
        Ok(())
    }
}

/// Missing Bailian turn numbers (time order): the parent's turn + 1, or 1 when the parent has
/// not been seen. Only earlier rows are needed, so it is a stage and not a whole-file pass.
#[derive(Default)]
pub(crate) struct Turns {
    /// The turn of every chat id seen (the latest row with that id).
    turns: HashMap<i64, u32>,
}

impl Turns {
    pub(crate) fn fill(&mut self, raw: &mut RawRow) {
        let given = raw.turn_given;
        if let Some(s) = &mut raw.session {
            if !given {
                s.turn = self
                    .turns
                    .get(&s.parent_chat_id)
                    .map_or(1, |t| t.saturating_add(1));
            }
            self.turns.insert(s.chat_id, s.turn);
        }
    }
}

/// A session's state while its turns stream past (`session_id` rows).
struct SessionState {
    key: Arc<str>,
    turn: u32,
    /// Replay index of its latest turn, when that turn is replayed.
    last_index: Option<usize>,
    last_ms: f64,
}

/// `session_id` rows (time order): the previous turn of the session is the parent when that
/// one is replayed; the think time is the row's `delay`, else the gap to the previous turn.
#[derive(Default)]
pub(crate) struct Links {
    sessions: HashMap<String, SessionState>,
}

impl Links {
    /// The turn of a row (`index`: its replay index when kept; `rebased`: its time).
    pub(crate) fn link(
        &mut self,
        raw: &RawRow,
        index: Option<usize>,
        rebased: f64,
    ) -> Option<SessionTurn> {
        let id = raw.session_id.as_ref()?;
        let turn = match self.sessions.get_mut(id) {
            Some(s) => {
                let gap = raw.delay_ms.unwrap_or(rebased - s.last_ms);
                let t = SessionTurn {
                    id: s.key.clone(),
                    turn: s.turn + 1,
                    parent_index: s.last_index,
                    trace_gap_ms: s.last_index.map(|_| gap),
                    agent: None,
                };
                s.turn += 1;
                s.last_index = index;
                s.last_ms = rebased;
                t
            }
            None => {
                let key: Arc<str> = Arc::from(id.as_str());
                self.sessions.insert(
                    id.clone(),
                    SessionState {
                        key: key.clone(),
                        turn: 1,
                        last_index: index,
                        last_ms: rebased,
                    },
                );
                SessionTurn {
                    id: key,
                    turn: 1,
                    parent_index: None,
                    trace_gap_ms: None,
                    agent: None,
                }
            }
        };
        Some(turn)
    }
}
