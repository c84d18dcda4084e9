//! The whole trace: the [pipeline](super::pipeline) in its `Whole` mode, collected into one
//! [`Trace`] — every row read before the first is released (so time order is a stable sort of
//! the file), every row judged by the slice — plus the passes that need the whole file:
//!
//! - Bailian parent chains: a row's parent may come later in the file (or in time), the
//!   session is named after the root of the chain, a chain may loop (an error), and a parent
//!   that is nowhere in the file makes an orphan. None of this is known before the last row.
//! - The sessions over the kept requests: the turns that the slice cut from sessions that keep
//!   others (`cut_turns`, `cut_sessions`), counted over every row of the file.
//!
//! Missing Bailian turn numbers need only the rows before them in time, so they are filled in
//! by a stage of the pipeline, not here.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::Arc;

use super::error::{RowError, TraceError};
use super::pipeline::{Mode, Out, Pipeline, Released, ReorderWindow};
use super::row::LoadOptions;
use super::rows::{buffered, RowReader};
use super::session::{SessionStats, SessionTurn, Sessions};
use super::{SessionInfo, Trace};

/// Loads a trace file (plain or gzip-compressed, detected by magic bytes). The path `-` reads
/// standard input (named `<stdin>` in messages).
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Trace, TraceError> {
    if path.as_os_str() == "-" {
        return parse_reader("<stdin>", std::io::stdin(), opts);
    }
    let name = path.display().to_string();
    if path.is_dir() {
        return Err(TraceError::Open {
            path: name,
            error: std::io::Error::other("is a directory"),
        });
    }
    let file = File::open(path).map_err(|error| TraceError::Open {
        path: name.clone(),
        error,
    })?;
    parse_reader(&name, file, opts)
}

/// Parses a trace from any reader; `name` is used in error messages (`name:line: ...`).
/// Gzip input is detected by its magic bytes and decompressed.
pub fn parse_reader<R: Read + Send>(
    name: &str,
    reader: R,
    opts: &LoadOptions,
) -> Result<Trace, TraceError> {
    opts.check(name)?;
    let (input, gzip) = buffered(name, reader)?;
    let rows = RowReader::new(name, input, gzip, opts);
    let mut pipeline = Pipeline::new(rows, opts, ReorderWindow::default(), Mode::Whole);
    pipeline.start(opts.block_size)?;
    collect(pipeline)
}

/// Every row of `pipeline` (in `Whole` mode, started) in time order, then the whole-file
/// passes: the trace.
pub(crate) fn collect<B: BufRead>(mut pipeline: Pipeline<B>) -> Result<Trace, TraceError> {
    let mut rows = Vec::new();
    while let Some(r) = pipeline.next_released()? {
        rows.push(r);
    }
    let linked = if rows.iter().any(|r| session_of(r).is_some()) {
        bailian_turns(pipeline.rows.name(), &rows)?
    } else {
        session_id_turns(&mut rows)
    };
    if pipeline.kept() == 0 {
        return Err(pipeline.nothing_kept());
    }
    let sessions = linked.over_kept();
    let mut requests = Vec::with_capacity(pipeline.kept());
    let mut chats = Vec::with_capacity(pipeline.kept());
    for r in rows {
        if let Out::Kept(p) = r.out {
            requests.push(p.req);
            chats.push(p.chat);
        }
    }
    // The chat requests of messages rows, by replay index (empty when there are none).
    if chats.iter().all(Option::is_none) {
        chats = Vec::new();
    }
    Ok(Trace {
        format: pipeline.format(),
        block_size: pipeline.block_size(),
        requests,
        stats: pipeline.stats(),
        sessions,
        chats,
    })
}

/// The Bailian session facts of a released row.
fn session_of(r: &Released) -> Option<&SessionInfo> {
    match &r.out {
        Out::Kept(p) => p.req.session.as_ref(),
        Out::Dropped(raw) => raw.session.as_ref(),
    }
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
fn session_id_turns(rows: &mut [Released]) -> Linked {
    let mut linked = Linked {
        turns: Vec::new(),
        dropped: Vec::new(),
        orphans: 0,
    };
    for r in rows {
        match &mut r.out {
            Out::Kept(p) => linked.turns.push(p.turn.take()),
            Out::Dropped(raw) => linked
                .dropped
                .extend(raw.session_id.as_deref().map(Arc::from)),
        }
    }
    linked
}

/// Bailian rows: a chain of `parent_chat_id` links is one session, named after its root's
/// `chat_id` (rows in time order; a duplicate chat id names its earliest row). A chain that
/// loops is an error naming a line of the loop.
fn bailian_turns(name: &str, rows: &[Released]) -> Result<Linked, TraceError> {
    let mut by_chat: HashMap<i64, usize> = HashMap::new();
    for (pos, row) in rows.iter().enumerate() {
        if let Some(s) = session_of(row) {
            by_chat.entry(s.chat_id).or_insert(pos);
        }
    }
    let parent_of = |pos: usize| -> Option<usize> {
        let s = session_of(&rows[pos])?;
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
        if matches!(row.out, Out::Kept(_)) {
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
        let turn = session_of(row).and_then(|s| {
            let r = session_of(&rows[root[pos]])?;
            let parent = parent_of(pos);
            linked.orphans += usize::from(s.parent_chat_id >= 0 && parent.is_none());
            let parent_index = parent.and_then(|p| index_of[p]);
            Some(SessionTurn {
                id: Arc::from(r.chat_id.to_string()),
                turn: s.turn,
                parent_index,
                trace_gap_ms: parent_index.and(parent.map(|p| row.rebased_ms - rows[p].rebased_ms)),
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
    rows: &[Released],
    parent_of: &dyn Fn(usize) -> Option<usize>,
) -> Result<Vec<usize>, TraceError> {
    // State 1 = on the current walk (seen again = a cycle), 2 = done.
    let mut root = vec![usize::MAX; rows.len()];
    let mut state = vec![0u8; rows.len()];
    let mut walk = Vec::new();
    for start in 0..rows.len() {
        if session_of(&rows[start]).is_none() || state[start] == 2 {
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
                    .map(|&p| session_of(&rows[p]).map_or(String::new(), |s| s.chat_id.to_string()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{TraceFormat, TraceStats};

    fn parse(text: &str, opts: &LoadOptions) -> Result<Trace, TraceError> {
        parse_reader("t.jsonl", text.as_bytes(), opts)
    }

    #[test]
    fn rules_and_counts() {
        let text = "\
{\"timestamp\": 100, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [1]}
{\"timestamp\": 100, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": [1, 2, 3]}

{\"timestamp\": 50, \"input_length\": 512, \"output_length\": 5, \"hash_ids\": [4]}
";
        let t = parse(text, &LoadOptions::default()).unwrap();
        assert_eq!(t.format, TraceFormat::Mooncake);
        assert_eq!(t.block_size, 512);
        let lines: Vec<usize> = t.requests.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![4, 1, 2]);
        let ts: Vec<f64> = t.requests.iter().map(|r| r.timestamp_ms).collect();
        assert_eq!(ts, vec![0.0, 50.0, 50.0]);
        assert_eq!(t.requests[2].hash_ids, vec![1]);
        assert_eq!(
            t.stats,
            TraceStats {
                rows: 3,
                input_beyond_blocks: 1,
                surplus_hash_ids: 1,
                repeated_timestamps: 1,
                decreasing_timestamps: 1,
                reordered: 1,
                zero_output_length: 1,
                ..Default::default()
            }
        );
    }
}
