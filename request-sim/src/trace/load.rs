//! Loading a trace: open (gzip or plain), read capped lines, detect or force the format, parse
//! and validate every row, then apply the consistency rules of `docs/traces.md`: normalise hash
//! ids, stable-sort by time, rebase to 0, slice by time and count, assign replay indices.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::Arc;

use super::error::{RowError, TraceError};
use super::row::{normalise_hash_ids, LoadOptions, RawRow, RowFlags};
use super::rows::{buffered, RowReader};
use super::session::{SessionStats, SessionTurn, Sessions};
use super::{ChatPayload, Trace, TraceFormat, TraceRequest, TraceStats};

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
    load_rows(RowReader::new(name, input, gzip, opts), Vec::new(), opts)
}

/// Reads every remaining row of `reader` after `first` (rows already read), then applies the
/// trace-level rules.
pub(crate) fn load_rows<B: BufRead>(
    mut reader: RowReader<B>,
    first: Vec<(usize, RawRow)>,
    opts: &LoadOptions,
) -> Result<Trace, TraceError> {
    let mut rows: Vec<Row> = first.into_iter().map(Row::new).collect();
    while let Some(r) = reader.next_row()? {
        rows.push(Row::new(r));
    }
    if rows.is_empty() {
        return Err(reader.no_rows_error());
    }
    // Rows exist, so a format was detected or forced.
    let format = reader.format().unwrap_or(TraceFormat::Generic);
    finish(reader.name(), format, rows, reader.stats().clone(), opts)
}

struct Row {
    line: usize,
    raw: RawRow,
    flags: RowFlags,
    /// Position in replay order before slicing.
    pos: usize,
    /// Session link, set after sorting; `parent` is a position in the sorted rows.
    link: Option<Link>,
}

struct Link {
    id: Arc<str>,
    turn: u32,
    parent: Option<usize>,
    gap_ms: Option<f64>,
}

impl Row {
    fn new((line, raw): (usize, RawRow)) -> Row {
        Row {
            line,
            raw,
            flags: RowFlags::default(),
            pos: 0,
            link: None,
        }
    }
}

/// Applies the trace-level rules (see `docs/traces.md`): file-order flags and hash ids, replay
/// order, session links, slicing, then the sessions and counts over the kept requests.
fn finish(
    name: &str,
    format: TraceFormat,
    mut rows: Vec<Row>,
    mut stats: TraceStats,
    opts: &LoadOptions,
) -> Result<Trace, TraceError> {
    let block = opts.block_size.unwrap_or(format.default_block_size());
    resolve_delays(name, &mut rows)?;
    mark_file_order(&mut rows, block);
    let span_ms = sort_and_rebase(&mut rows);
    fill_missing_turns(&mut rows);
    link_sessions(name, &mut rows)?;
    let before = SessionsBefore::record(&mut rows);
    slice(name, &mut rows, opts, span_ms, &mut stats)?;
    let sessions = before.over_kept(&rows);
    let chats = take_chats(&mut rows);
    let requests = into_requests(rows, &mut stats);
    Ok(Trace {
        format,
        block_size: block,
        requests,
        stats,
        sessions,
        chats,
    })
}

/// File-order properties (repeated, decreasing, reordered timestamps) and hash id
/// normalisation.
fn mark_file_order(rows: &mut [Row], block: usize) {
    let mut prev: Option<f64> = None;
    let mut newest = f64::NEG_INFINITY;
    for row in rows {
        let t = row.raw.timestamp_ms;
        if let Some(p) = prev {
            row.flags.repeated_timestamp = t == p;
            row.flags.decreasing_timestamp = t < p;
        }
        row.flags.reordered = t < newest;
        newest = newest.max(t);
        prev = Some(t);
        (row.flags.input_beyond_blocks, row.flags.surplus_hash_ids) =
            normalise_hash_ids(&mut row.raw, block);
    }
}

/// Replay order: stable sort by time (rows with equal times keep file order), rebase to 0.
/// Returns the trace's span (ms).
fn sort_and_rebase(rows: &mut [Row]) -> f64 {
    rows.sort_by(|a, b| a.raw.timestamp_ms.total_cmp(&b.raw.timestamp_ms));
    let t0 = rows[0].raw.timestamp_ms;
    for row in rows.iter_mut() {
        row.raw.timestamp_ms -= t0;
    }
    rows[rows.len() - 1].raw.timestamp_ms
}

/// Missing Bailian turn numbers: parent's turn + 1 (1 when the parent is not in the trace).
fn fill_missing_turns(rows: &mut [Row]) {
    if !rows
        .iter()
        .any(|r| r.raw.session.is_some() && !r.raw.turn_given)
    {
        return;
    }
    let mut turns: HashMap<i64, u32> = HashMap::new();
    for row in rows {
        let given = row.raw.turn_given;
        if let Some(s) = &mut row.raw.session {
            if !given {
                s.turn = turns
                    .get(&s.parent_chat_id)
                    .map_or(1, |t| t.saturating_add(1));
            }
            turns.insert(s.chat_id, s.turn);
        }
    }
}

/// Time window [start, end) on the rebased time, then rebase to the first kept request; then
/// at most `max_requests`. The dropped requests are counted in `stats`.
fn slice(
    name: &str,
    rows: &mut Vec<Row>,
    opts: &LoadOptions,
    span_ms: f64,
    stats: &mut TraceStats,
) -> Result<(), TraceError> {
    if opts.start_ms.is_some() || opts.end_ms.is_some() {
        let start = opts.start_ms.unwrap_or(0.0);
        let end = opts.end_ms.unwrap_or(f64::INFINITY);
        let before = rows.len();
        rows.retain(|r| r.raw.timestamp_ms >= start && r.raw.timestamp_ms < end);
        stats.outside_time_window = before - rows.len();
        if rows.is_empty() {
            return Err(TraceError::NoRequests {
                path: name.to_owned(),
                reason: format!(
                    "no request in the time window [{start}, {end}) ms; the trace spans 0 to {span_ms} ms"
                ),
            });
        }
        let t1 = rows[0].raw.timestamp_ms;
        for row in rows.iter_mut() {
            row.raw.timestamp_ms -= t1;
        }
    }
    if let Some(max) = opts.max_requests {
        if rows.len() > max {
            stats.over_max_requests = rows.len() - max;
            rows.truncate(max);
        }
    }
    Ok(())
}

/// The session of every row in replay order before slicing, to count the turns slicing cuts.
struct SessionsBefore {
    ids: Vec<Option<Arc<str>>>,
    /// Turns whose parent chat is not in the trace.
    orphans: usize,
}

impl SessionsBefore {
    /// Numbers the rows in replay order (`pos`) and notes their sessions.
    fn record(rows: &mut [Row]) -> SessionsBefore {
        let ids = rows
            .iter()
            .map(|r| r.link.as_ref().map(|l| l.id.clone()))
            .collect();
        let mut orphans = 0;
        for (pos, row) in rows.iter_mut().enumerate() {
            row.pos = pos;
            if let (Some(s), Some(l)) = (&row.raw.session, &row.link) {
                orphans += usize::from(s.parent_chat_id >= 0 && l.parent.is_none());
            }
        }
        SessionsBefore { ids, orphans }
    }

    /// Sessions over the kept `rows`: parents that were sliced away are dropped, cut turns
    /// counted.
    fn over_kept(self, rows: &[Row]) -> Sessions {
        let mut stats = SessionStats {
            orphans: self.orphans,
            ..Default::default()
        };
        if !rows.iter().any(|r| r.link.is_some()) {
            return Sessions {
                turns: Vec::new(),
                stats,
                cut: Vec::new(),
            };
        }
        let mut new_index = vec![None; self.ids.len()];
        for (index, row) in rows.iter().enumerate() {
            new_index[row.pos] = Some(index);
        }
        let mut turns_per_session: HashMap<Arc<str>, usize> = HashMap::new();
        let turns = rows
            .iter()
            .map(|r| {
                r.link.as_ref().map(|l| {
                    *turns_per_session.entry(l.id.clone()).or_default() += 1;
                    let parent_index = l.parent.and_then(|p| new_index[p]);
                    SessionTurn {
                        id: l.id.clone(),
                        turn: l.turn,
                        parent_index,
                        trace_gap_ms: parent_index.and(l.gap_ms),
                    }
                })
            })
            .collect();
        let mut cut: HashMap<&Arc<str>, usize> = HashMap::new();
        for (pos, id) in self.ids.iter().enumerate() {
            if let Some(id) = id {
                if new_index[pos].is_none() && turns_per_session.contains_key(id) {
                    stats.cut_turns += 1;
                    *cut.entry(id).or_default() += 1;
                }
            }
        }
        stats.cut_sessions = cut.len();
        let mut cut: Vec<(Arc<str>, usize)> =
            cut.into_iter().map(|(id, n)| (id.clone(), n)).collect();
        cut.sort();
        stats.sessions = turns_per_session.len();
        stats.turns = turns_per_session.values().sum();
        stats.max_turns = turns_per_session.values().copied().max().unwrap_or(0);
        Sessions { turns, stats, cut }
    }
}

/// The chat requests of messages rows, by replay index (empty when there are none).
fn take_chats(rows: &mut [Row]) -> Vec<Option<Arc<ChatPayload>>> {
    if !rows.iter().any(|r| r.raw.chat.is_some()) {
        return Vec::new();
    }
    rows.iter_mut()
        .map(|r| r.raw.chat.take().map(Arc::new))
        .collect()
}

/// The kept rows as requests in replay order, their flags counted in `stats`.
fn into_requests(rows: Vec<Row>, stats: &mut TraceStats) -> Vec<TraceRequest> {
    let mut requests = Vec::with_capacity(rows.len());
    for (index, row) in rows.into_iter().enumerate() {
        row.flags.count_kept(row.raw.output_length, stats);
        requests.push(TraceRequest {
            index,
            line: row.line,
            timestamp_ms: row.raw.timestamp_ms,
            input_length: row.raw.input_length,
            output_length: row.raw.output_length,
            hash_ids: row.raw.hash_ids.unwrap_or_default(),
            session: row.raw.session,
        });
    }
    requests
}

/// `delay` rows (messages traces): the trace time is the previous turn's (in file order) plus
/// the delay when the row has no `timestamp`.
fn resolve_delays(name: &str, rows: &mut [Row]) -> Result<(), TraceError> {
    if !rows.iter().any(|r| r.raw.delay_ms.is_some()) {
        return Ok(());
    }
    let mut last: HashMap<String, f64> = HashMap::new();
    for row in rows.iter_mut() {
        let Some(id) = &row.raw.session_id else {
            continue;
        };
        if row.raw.timestamp_ms.is_nan() {
            let delay = row.raw.delay_ms.unwrap_or(0.0);
            match last.get(id) {
                Some(prev) => row.raw.timestamp_ms = prev + delay,
                None => {
                    return Err(TraceError::Row {
                        path: name.to_owned(),
                        line: row.line,
                        error: RowError::Field {
                            field: "delay".into(),
                            what: format!(
                                "this is the first turn of session {id:?}: nothing to delay from (give it a `timestamp`)"
                            ),
                        },
                    })
                }
            }
        }
        last.insert(id.clone(), row.raw.timestamp_ms);
    }
    Ok(())
}

/// Sets every row's session link (rows are sorted by time): Bailian parent chains, or shared
/// `session_id`s. A `parent_chat_id` cycle is an error naming a line of the cycle.
fn link_sessions(name: &str, rows: &mut [Row]) -> Result<(), TraceError> {
    if rows.iter().any(|r| r.raw.session.is_some()) {
        let mut by_chat: HashMap<i64, usize> = HashMap::new();
        for (pos, row) in rows.iter().enumerate() {
            if let Some(s) = &row.raw.session {
                by_chat.entry(s.chat_id).or_insert(pos);
            }
        }
        let parent_of = |pos: usize| -> Option<usize> {
            let s = rows[pos].raw.session.as_ref()?;
            if s.parent_chat_id < 0 {
                return None;
            }
            by_chat.get(&s.parent_chat_id).copied()
        };
        // Root of every chain; state 1 = on the current walk (seen again = a cycle), 2 = done.
        let mut root = vec![usize::MAX; rows.len()];
        let mut state = vec![0u8; rows.len()];
        let mut walk = Vec::new();
        for start in 0..rows.len() {
            if rows[start].raw.session.is_none() || state[start] == 2 {
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
                                .raw
                                .session
                                .as_ref()
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
        let links: Vec<Option<Link>> = (0..rows.len())
            .map(|pos| {
                let s = rows[pos].raw.session.as_ref()?;
                let r = rows[root[pos]].raw.session.as_ref()?;
                let parent = parent_of(pos);
                Some(Link {
                    id: Arc::from(r.chat_id.to_string()),
                    turn: s.turn,
                    parent,
                    gap_ms: parent.map(|p| rows[pos].raw.timestamp_ms - rows[p].raw.timestamp_ms),
                })
            })
            .collect();
        for (row, link) in rows.iter_mut().zip(links) {
            row.link = link;
        }
        return Ok(());
    }
    if rows.iter().any(|r| r.raw.session_id.is_some()) {
        let mut last: HashMap<String, (usize, u32, Arc<str>)> = HashMap::new();
        for pos in 0..rows.len() {
            let Some(id) = rows[pos].raw.session_id.clone() else {
                continue;
            };
            let t = rows[pos].raw.timestamp_ms;
            let link = match last.get(&id) {
                Some((p, turn, key)) => Link {
                    id: key.clone(),
                    turn: turn + 1,
                    parent: Some(*p),
                    gap_ms: Some(
                        rows[pos]
                            .raw
                            .delay_ms
                            .unwrap_or(t - rows[*p].raw.timestamp_ms),
                    ),
                },
                None => Link {
                    id: Arc::from(id.as_str()),
                    turn: 1,
                    parent: None,
                    gap_ms: None,
                },
            };
            last.insert(id, (pos, link.turn, link.id.clone()));
            rows[pos].link = Some(link);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
