//! The session passes that need the whole trace (`trace/pipeline/load.rs` runs them on the collected
//! pipeline): Bailian parent chains (a parent may come later in the file, the session is named
//! after the chain's root, a chain may loop, a parent that is nowhere in the file makes an
//! orphan), and the sessions over the kept requests with the turns the slice cut from them.

use std::collections::HashMap;
use std::sync::Arc;

use crate::trace::error::{RowError, TraceError};
use crate::trace::model::{SessionInfo, SessionStats, SessionTurn, Sessions};

/// What the whole-trace session passes need of one row (rows in time order).
pub(crate) struct RowSession<'a> {
    /// 1-based line in the source file.
    pub(crate) line: usize,
    /// Trace time rebased to the first row (before slicing).
    pub(crate) rebased_ms: f64,
    /// The slice kept the row.
    pub(crate) kept: bool,
    /// A Bailian row's chat ids.
    pub(crate) bailian: Option<&'a SessionInfo>,
    /// A kept `session_id` row: the turn the pipeline linked.
    pub(crate) turn: Option<SessionTurn>,
    /// A dropped `session_id` row: its session.
    pub(crate) session_id: Option<&'a str>,
}

/// The sessions of a whole trace over its kept requests; an error when a Bailian parent chain
/// loops.
pub(crate) fn whole_trace(name: &str, rows: Vec<RowSession>) -> Result<Sessions, TraceError> {
    let linked = if rows.iter().any(|r| r.bailian.is_some()) {
        bailian_turns(name, &rows)?
    } else {
        session_id_turns(rows)
    };
    Ok(linked.over_kept())
}

/// The sessions of a whole trace before they are counted over the kept requests.
struct Linked {
    /// The turn of every kept request, by replay index.
    turns: Vec<Option<SessionTurn>>,
    /// The session of every row the slice dropped.
    dropped: Vec<Arc<str>>,
    /// Turns whose parent chat is not in the trace.
    orphans: usize,
}

impl Linked {
    /// Sessions over the kept requests: the cut turns counted, per session.
    fn over_kept(self) -> Sessions {
        let mut stats = SessionStats {
            orphans: self.orphans,
            ..Default::default()
        };
        if self.turns.iter().all(Option::is_none) {
            return Sessions {
                turns: Vec::new(),
                stats,
                cut: Vec::new(),
            };
        }
        let mut turns_per_session: HashMap<&Arc<str>, usize> = HashMap::new();
        for t in self.turns.iter().flatten() {
            *turns_per_session.entry(&t.id).or_default() += 1;
        }
        let mut cut: HashMap<&Arc<str>, usize> = HashMap::new();
        for id in &self.dropped {
            if turns_per_session.contains_key(id) {
                stats.cut_turns += 1;
                *cut.entry(id).or_default() += 1;
            }
        }
        stats.cut_sessions = cut.len();
        let mut cut: Vec<(Arc<str>, usize)> =
            cut.into_iter().map(|(id, n)| (id.clone(), n)).collect();
        cut.sort();
        stats.sessions = turns_per_session.len();
        stats.turns = turns_per_session.values().sum();
        stats.max_turns = turns_per_session.values().copied().max().unwrap_or(0);
        Sessions {
            turns: self.turns,
            stats,
            cut,
        }
    }
}

/// `session_id` rows: the pipeline linked the kept ones; the dropped ones are named by their
/// `session_id`.
fn session_id_turns(rows: Vec<RowSession>) -> Linked {
    let mut linked = Linked {
        turns: Vec::new(),
        dropped: Vec::new(),
        orphans: 0,
    };
    for r in rows {
        if r.kept {
            linked.turns.push(r.turn);
        } else {
            linked.dropped.extend(r.session_id.map(Arc::from));
        }
    }
    linked
}

/// Bailian rows: a chain of `parent_chat_id` links is one session, named after its root's
/// `chat_id` (rows in time order; a duplicate chat id names its earliest row). A chain that
/// loops is an error naming a line of the loop.
fn bailian_turns(name: &str, rows: &[RowSession]) -> Result<Linked, TraceError> {
    let mut by_chat: HashMap<i64, usize> = HashMap::new();
    for (pos, row) in rows.iter().enumerate() {
        if let Some(s) = row.bailian {
            by_chat.entry(s.chat_id).or_insert(pos);
        }
    }
    let parent_of = |pos: usize| -> Option<usize> {
        let s = rows[pos].bailian?;
        if s.parent_chat_id < 0 {
            return None;
        }
        by_chat.get(&s.parent_chat_id).copied()
    };
    let root = chain_roots(name, rows, &parent_of)?;
    // Replay index of every row the slice kept.
    let mut index_of = vec![None; rows.len()];
    let mut kept = 0;
    for (pos, row) in rows.iter().enumerate() {
        if row.kept {
            index_of[pos] = Some(kept);
            kept += 1;
        }
    }
    let mut linked = Linked {
        turns: Vec::with_capacity(kept),
        dropped: Vec::new(),
        orphans: 0,
    };
    for (pos, row) in rows.iter().enumerate() {
        let turn = row.bailian.and_then(|s| {
            let r = rows[root[pos]].bailian?;
            let parent = parent_of(pos);
            linked.orphans += usize::from(s.parent_chat_id >= 0 && parent.is_none());
            let parent_index = parent.and_then(|p| index_of[p]);
            Some(SessionTurn {
                id: Arc::from(r.chat_id.to_string()),
                turn: s.turn,
                parent_index,
                trace_gap_ms: parent_index.and(parent.map(|p| row.rebased_ms - rows[p].rebased_ms)),
                agent: None,
            })
        });
        match (index_of[pos], turn) {
            (Some(_), turn) => linked.turns.push(turn),
            (None, Some(turn)) => linked.dropped.push(turn.id),
            (None, None) => {}
        }
    }
    Ok(linked)
}

/// The root of every row's parent chain (`usize::MAX` for a row without a session); an
/// error on a line of a chain that loops back on itself.
fn chain_roots(
    name: &str,
    rows: &[RowSession],
    parent_of: &dyn Fn(usize) -> Option<usize>,
) -> Result<Vec<usize>, TraceError> {
    // State 1 = on the current walk (seen again = a cycle), 2 = done.
    let mut root = vec![usize::MAX; rows.len()];
    let mut state = vec![0u8; rows.len()];
    let mut walk = Vec::new();
    for start in 0..rows.len() {
        if rows[start].bailian.is_none() || state[start] == 2 {
            continue;
        }
        walk.clear();
        let mut cur = start;
        let r = loop {
            if state[cur] == 2 {
                break root[cur];
            }
            if state[cur] == 1 {
                let chain: Vec<String> = walk
                    .iter()
                    .skip_while(|&&p| p != cur)
                    .chain(std::iter::once(&cur))
                    .map(|&p| {
                        rows[p]
                            .bailian
                            .map_or(String::new(), |s| s.chat_id.to_string())
                    })
                    .collect();
                return Err(TraceError::Row {
                    path: name.to_owned(),
                    line: rows[cur].line,
                    error: RowError::Field {
                        field: "parent_chat_id".into(),
                        what: format!(
                            "the parent chain loops back on itself (chat ids {})",
                            chain.join(" -> ")
                        ),
                    },
                });
            }
            state[cur] = 1;
            walk.push(cur);
            match parent_of(cur) {
                Some(p) => cur = p,
                None => break cur,
            }
        };
        for &p in &walk {
            state[p] = 2;
            root[p] = r;
        }
    }
    Ok(root)
}
