//! Loading a trace: open (gzip or plain), read capped lines, detect or force the format, parse
//! and validate every row, then apply the consistency rules of `docs/traces.md`: normalise hash
//! ids, stable-sort by time, rebase to 0, slice by time and count, assign replay indices.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;
use std::sync::Arc;

use flate2::read::MultiGzDecoder;

use super::detect::detect_format;
use super::error::{RowError, TraceError};
use super::lines::{is_gzip, peek_magic, read_line_capped, LineRead};
use super::session::{SessionStats, SessionTurn, Sessions};
use super::{azure, bailian, generic, messages, mooncake};
use super::{ChatPayload, SessionInfo, Trace, TraceFormat, TraceRequest, TraceStats};

pub use super::fields::MAX_LENGTH_TOKENS;

/// Longest accepted line (64 MiB) unless [`LoadOptions::max_line_bytes`] says otherwise.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;

/// How many invalid-row messages [`TraceStats::invalid_examples`] keeps.
const MAX_INVALID_EXAMPLES: usize = 5;

/// How to load a trace. `Default` detects the format, uses its block size, stops at the first
/// invalid row and keeps every request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadOptions {
    /// Force a format instead of detecting it from the first data line (`--dataset`).
    pub format: Option<TraceFormat>,
    /// Tokens per hash id; `None` = the format's default (mooncake/generic 512, bailian 16).
    pub block_size: Option<usize>,
    /// Skip malformed rows (counted in `stats.skipped_invalid`) instead of failing.
    pub skip_invalid: bool,
    /// Keep requests at rebased trace time `>= start_ms` (ms).
    pub start_ms: Option<f64>,
    /// Keep requests at rebased trace time `< end_ms` (ms).
    pub end_ms: Option<f64>,
    /// Keep at most this many requests (the first ones in replay order, after slicing).
    pub max_requests: Option<usize>,
    /// Longest accepted line in bytes; `None` = [`DEFAULT_MAX_LINE_BYTES`].
    pub max_line_bytes: Option<usize>,
}

/// One parsed, validated row before the trace-level rules.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawRow {
    /// Milliseconds, not yet rebased (absolute for Azure).
    pub timestamp_ms: f64,
    pub input_length: u32,
    pub output_length: u32,
    /// `None`: the row carries no hash ids (Azure, generic without them).
    pub hash_ids: Option<Vec<u64>>,
    pub session: Option<SessionInfo>,
    /// False when `session.turn` is a placeholder to fill in from the parent chain.
    pub turn_given: bool,
    /// `session_id` of a messages or generic row.
    pub session_id: Option<String>,
    /// `delay` of a messages row (ms after the previous turn of its session).
    pub delay_ms: Option<f64>,
    /// The chat request of a messages row.
    pub chat: Option<ChatPayload>,
}

/// Loads a trace file (plain or gzip-compressed, detected by magic bytes). The path `-` reads
/// standard input (named `<stdin>` in messages).
pub fn load(path: &Path, opts: &LoadOptions) -> Result<Trace, TraceError> {
    if path.as_os_str() == "-" {
        return parse_reader("<stdin>", std::io::stdin().lock(), opts);
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
pub fn parse_reader<R: Read>(
    name: &str,
    mut reader: R,
    opts: &LoadOptions,
) -> Result<Trace, TraceError> {
    check_options(name, opts)?;
    let magic = peek_magic(&mut reader).map_err(|error| TraceError::Read {
        path: name.to_owned(),
        line: 0,
        gzip: false,
        error,
    })?;
    let gzip = is_gzip(&magic);
    let whole = Cursor::new(magic).chain(reader);
    if gzip {
        let input = BufReader::with_capacity(256 << 10, MultiGzDecoder::new(whole));
        parse_buffered(name, input, true, opts)
    } else {
        parse_buffered(
            name,
            BufReader::with_capacity(256 << 10, whole),
            false,
            opts,
        )
    }
}

fn check_options(name: &str, opts: &LoadOptions) -> Result<(), TraceError> {
    let bad = |what: String| {
        Err(TraceError::Options {
            path: name.to_owned(),
            what,
        })
    };
    if opts.block_size == Some(0) {
        return bad("block size must be at least 1".into());
    }
    if opts.max_requests == Some(0) {
        return bad("max requests must be at least 1".into());
    }
    if opts.max_line_bytes == Some(0) {
        return bad("max line bytes must be at least 1".into());
    }
    if let Some(s) = opts.start_ms {
        if !s.is_finite() || s < 0.0 {
            return bad(format!("start ms must be a finite number >= 0, got {s}"));
        }
    }
    if let Some(e) = opts.end_ms {
        if e.is_nan() || e <= 0.0 {
            return bad(format!("end ms must be a number > 0, got {e}"));
        }
    }
    if let (Some(s), Some(e)) = (opts.start_ms, opts.end_ms) {
        if s >= e {
            return bad(format!("start ms ({s}) must be before end ms ({e})"));
        }
    }
    Ok(())
}

struct Row {
    line: usize,
    raw: RawRow,
    flags: Flags,
    /// Session link, set after sorting; `parent` is a position in the sorted rows.
    link: Option<Link>,
}

struct Link {
    id: Arc<str>,
    turn: u32,
    parent: Option<usize>,
    gap_ms: Option<f64>,
}

#[derive(Default, Clone, Copy)]
struct Flags {
    /// Position in replay order before slicing.
    pos: usize,
    input_beyond_blocks: bool,
    surplus_hash_ids: bool,
    repeated_timestamp: bool,
    decreasing_timestamp: bool,
}

/// State while reading lines.
struct Reader<'a> {
    name: &'a str,
    opts: &'a LoadOptions,
    format: Option<TraceFormat>,
    azure: Option<azure::Header>,
    rows: Vec<Row>,
    stats: TraceStats,
}

impl Reader<'_> {
    fn row_error(&self, line: usize, error: RowError) -> TraceError {
        TraceError::Row {
            path: self.name.to_owned(),
            line,
            error,
        }
    }

    /// A malformed data row: fatal, or counted with `skip_invalid`.
    fn invalid(&mut self, line: usize, error: RowError) -> Result<(), TraceError> {
        let err = self.row_error(line, error);
        if !self.opts.skip_invalid {
            return Err(err);
        }
        self.stats.rows += 1;
        self.stats.skipped_invalid += 1;
        if self.stats.invalid_examples.len() < MAX_INVALID_EXAMPLES {
            self.stats.invalid_examples.push(err.to_string());
        }
        Ok(())
    }

    /// Handles one non-blank line (or the error reading it).
    fn line(&mut self, line: usize, text: Result<&str, RowError>) -> Result<(), TraceError> {
        let text = match text {
            Ok(t) => t,
            Err(e) => return self.invalid(line, e),
        };
        let format = match self.format {
            Some(f) => f,
            None => match detect_format(text) {
                Ok(f) => {
                    self.format = Some(f);
                    f
                }
                Err(e) => return self.invalid(line, e),
            },
        };
        let parsed = match format {
            TraceFormat::Mooncake => mooncake::parse_line(text),
            TraceFormat::Bailian => bailian::parse_line(text),
            TraceFormat::Generic => generic::parse_line(text),
            TraceFormat::Messages => messages::parse_line(text),
            TraceFormat::Azure => match &self.azure {
                Some(h) => azure::parse_row(h, text),
                None => {
                    // The first data line of a CSV file is its header; a bad header is fatal
                    // even with skip_invalid (no row could be read correctly).
                    let h = azure::parse_header(text).map_err(|e| self.row_error(line, e))?;
                    self.azure = Some(h);
                    return Ok(());
                }
            },
        };
        match parsed {
            Ok(raw) => {
                self.stats.rows += 1;
                self.rows.push(Row {
                    line,
                    raw,
                    flags: Flags::default(),
                    link: None,
                });
                Ok(())
            }
            Err(e) => self.invalid(line, e),
        }
    }
}

fn decode(buf: &[u8], first: bool) -> Result<&str, RowError> {
    let text = std::str::from_utf8(buf).map_err(|e| RowError::NotUtf8 {
        column: e.valid_up_to() + 1,
    })?;
    Ok(if first {
        text.strip_prefix('\u{feff}').unwrap_or(text)
    } else {
        text
    })
}

fn parse_buffered<B: BufRead>(
    name: &str,
    mut input: B,
    gzip: bool,
    opts: &LoadOptions,
) -> Result<Trace, TraceError> {
    let cap = opts.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES);
    let mut reader = Reader {
        name,
        opts,
        format: opts.format,
        azure: None,
        rows: Vec::new(),
        stats: TraceStats::default(),
    };
    let mut buf = Vec::with_capacity(8 << 10);
    let mut line = 0usize;
    let mut saw_data = false;
    loop {
        let kind =
            read_line_capped(&mut input, &mut buf, cap).map_err(|error| TraceError::Read {
                path: name.to_owned(),
                line,
                gzip,
                error,
            })?;
        let text = match kind {
            LineRead::Eof => break,
            LineRead::TooLong => Err(RowError::TooLong { limit: cap }),
            LineRead::Line => decode(&buf, line == 0),
        };
        line += 1;
        if matches!(text, Ok(t) if t.trim().is_empty()) {
            continue;
        }
        saw_data = true;
        reader.line(line, text)?;
    }
    if !saw_data {
        return Err(TraceError::Empty {
            path: name.to_owned(),
        });
    }
    let Reader {
        format,
        azure,
        rows,
        stats,
        ..
    } = reader;
    if rows.is_empty() {
        let reason = if stats.skipped_invalid > 0 {
            format!(
                "all {} data rows are invalid (skipped); first: {}",
                stats.skipped_invalid,
                stats
                    .invalid_examples
                    .first()
                    .map(String::as_str)
                    .unwrap_or("")
            )
        } else if azure.is_some() {
            "the CSV file has a header but no data rows".to_owned()
        } else {
            "no data rows".to_owned()
        };
        return Err(TraceError::NoRequests {
            path: name.to_owned(),
            reason,
        });
    }
    // Rows exist, so a format was detected or forced.
    let format = format.unwrap_or(TraceFormat::Generic);
    finish(name, format, rows, stats, opts)
}

/// Applies the trace-level rules (see `docs/traces.md`).
fn finish(
    name: &str,
    format: TraceFormat,
    mut rows: Vec<Row>,
    mut stats: TraceStats,
    opts: &LoadOptions,
) -> Result<Trace, TraceError> {
    let block = opts.block_size.unwrap_or(format.default_block_size());
    resolve_delays(name, &mut rows)?;

    // File-order properties and hash id normalisation.
    let mut prev: Option<f64> = None;
    for row in &mut rows {
        let t = row.raw.timestamp_ms;
        if let Some(p) = prev {
            row.flags.repeated_timestamp = t == p;
            row.flags.decreasing_timestamp = t < p;
        }
        prev = Some(t);
        if let Some(ids) = &mut row.raw.hash_ids {
            let needed = (row.raw.input_length as usize).div_ceil(block);
            if ids.len() < needed {
                row.flags.input_beyond_blocks = true;
            } else if ids.len() > needed {
                row.flags.surplus_hash_ids = true;
                ids.truncate(needed);
            }
        }
    }

    // Replay order: stable sort by time (rows with equal times keep file order), rebase to 0.
    rows.sort_by(|a, b| a.raw.timestamp_ms.total_cmp(&b.raw.timestamp_ms));
    let t0 = rows[0].raw.timestamp_ms;
    for row in &mut rows {
        row.raw.timestamp_ms -= t0;
    }
    let span_ms = rows[rows.len() - 1].raw.timestamp_ms;

    // Missing Bailian turn numbers: parent's turn + 1 (1 when the parent is not in the trace).
    if rows
        .iter()
        .any(|r| r.raw.session.is_some() && !r.raw.turn_given)
    {
        let mut turns: HashMap<i64, u32> = HashMap::new();
        for row in &mut rows {
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

    link_sessions(name, &mut rows)?;
    let ids_before: Vec<Option<Arc<str>>> = rows
        .iter()
        .map(|r| r.link.as_ref().map(|l| l.id.clone()))
        .collect();
    let count_before = rows.len();
    let mut orphans = 0;
    for (pos, row) in rows.iter_mut().enumerate() {
        row.flags.pos = pos;
        if let (Some(s), Some(l)) = (&row.raw.session, &row.link) {
            orphans += usize::from(s.parent_chat_id >= 0 && l.parent.is_none());
        }
    }

    // Time window [start, end) on the rebased time, then rebase to the first kept request.
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
        for row in &mut rows {
            row.raw.timestamp_ms -= t1;
        }
    }
    if let Some(max) = opts.max_requests {
        if rows.len() > max {
            stats.over_max_requests = rows.len() - max;
            rows.truncate(max);
        }
    }

    // Sessions over the kept requests: parents that were sliced away are dropped, cut turns
    // counted.
    let mut new_index = vec![None; count_before];
    for (index, row) in rows.iter().enumerate() {
        new_index[row.flags.pos] = Some(index);
    }
    let mut session_stats = SessionStats {
        orphans,
        ..Default::default()
    };
    let mut turns_per_session: HashMap<Arc<str>, usize> = HashMap::new();
    let mut turns = Vec::new();
    let mut cut_by_session = Vec::new();
    let mut chats = Vec::new();
    if rows.iter().any(|r| r.link.is_some()) {
        turns = rows
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
        for (pos, id) in ids_before.iter().enumerate() {
            if let Some(id) = id {
                if new_index[pos].is_none() && turns_per_session.contains_key(id) {
                    session_stats.cut_turns += 1;
                    *cut.entry(id).or_default() += 1;
                }
            }
        }
        session_stats.cut_sessions = cut.len();
        cut_by_session = cut.into_iter().map(|(id, n)| (id.clone(), n)).collect();
        cut_by_session.sort();
        session_stats.sessions = turns_per_session.len();
        session_stats.turns = turns_per_session.values().sum();
        session_stats.max_turns = turns_per_session.values().copied().max().unwrap_or(0);
    }
    if rows.iter().any(|r| r.raw.chat.is_some()) {
        chats = rows
            .iter_mut()
            .map(|r| r.raw.chat.take().map(Arc::new))
            .collect();
    }

    // Counts over the kept requests.
    let mut requests = Vec::with_capacity(rows.len());
    for (index, row) in rows.into_iter().enumerate() {
        let f = row.flags;
        stats.input_beyond_blocks += usize::from(f.input_beyond_blocks);
        stats.surplus_hash_ids += usize::from(f.surplus_hash_ids);
        stats.repeated_timestamps += usize::from(f.repeated_timestamp);
        stats.decreasing_timestamps += usize::from(f.decreasing_timestamp);
        stats.zero_output_length += usize::from(row.raw.output_length == 0);
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
    Ok(Trace {
        format,
        block_size: block,
        requests,
        stats,
        sessions: Sessions {
            turns,
            stats: session_stats,
            cut: cut_by_session,
        },
        chats,
    })
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
                zero_output_length: 1,
                ..Default::default()
            }
        );
    }
}
