//! Streaming a trace for replay: rows are read in file order and released in time order
//! through a bounded reorder window, so a trace of any length replays in memory independent of
//! it (docs/scale-out.md, "Streaming traces").
//!
//! - The window holds rows until the newest row read is more than `ms` later than theirs, or
//!   until it holds more than `rows` rows; then the earliest goes out. Rows out of time order
//!   within it are sorted (stably: equal times keep file order, as the whole-trace sort does)
//!   and counted (`reordered`). A row earlier than one already released is a `file:line` error
//!   that says by how much and which flags cover it.
//! - Every rule of `docs/traces.md` applies as in [`super::load`]: hash ids normalised, the
//!   first released row is time 0, `start_ms..end_ms` then `max_requests` slice it (reading stops
//!   where the slice ends), indexes are assigned in release order, `session_id` turns are linked
//!   to the previous turn of their session (state per session, not per row), `delay` rows are
//!   resolved in file order.
//! - Bailian traces link turns through `parent_chat_id` over the whole file (a map of every
//!   chat id): they are loaded whole ([`TraceStream::into_whole`]).
//!
//! [`Planned`] is one request as the replay pipeline takes it; a whole [`Trace`] in memory is
//! turned into the same items by [`planned`].

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::error::{RowError, TraceError};
use super::load::load_rows;
use super::row::{normalise_hash_ids, LoadOptions, RawRow, RowFlags};
use super::rows::{buffered, RowReader};
use super::session::SessionTurn;
use super::{ChatPayload, Trace, TraceFormat, TraceRequest, TraceStats};

/// One request as the replay pipeline takes it: the trace row (replay index, rebased time),
/// its session turn, its chat request, and its trace-ideal prefix-cache hits.
#[derive(Debug, Clone)]
pub struct Planned {
    pub req: TraceRequest,
    pub turn: Option<SessionTurn>,
    pub chat: Option<Arc<ChatPayload>>,
    /// Prompt tokens an unbounded prefix cache would hit on this request after every earlier
    /// request of the trace (all shards'); `None` when not tracked (see [`super::IdealCache`]).
    pub ideal_hit: Option<u32>,
}

/// The requests of a whole trace in memory, in replay order, as the items a stream gives.
pub fn planned(trace: Arc<Trace>) -> impl Iterator<Item = Planned> + Send {
    (0..trace.requests.len()).map(move |i| Planned {
        req: trace.requests[i].clone(),
        turn: trace.sessions.get(i).cloned(),
        chat: trace.chats.get(i).cloned().flatten(),
        ideal_hit: None,
    })
}

/// How far out of time order a streamed trace's rows may be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReorderWindow {
    /// Trace milliseconds (`--reorder-window-ms`).
    pub ms: f64,
    /// Rows held at most (`--reorder-window-rows`).
    pub rows: usize,
}

impl Default for ReorderWindow {
    fn default() -> Self {
        ReorderWindow {
            ms: 10_000.0,
            rows: 65_536,
        }
    }
}

/// A row in the reorder window.
struct Held {
    ts: f64,
    /// File order (ties keep it).
    seq: u64,
    line: usize,
    raw: RawRow,
    flags: RowFlags,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    /// Reversed, so the max-heap pops the earliest (time, file order) first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .ts
            .total_cmp(&self.ts)
            .then_with(|| other.seq.cmp(&self.seq))
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

/// A trace read row by row and released in time order; an iterator of [`Planned`] requests.
pub struct TraceStream {
    rows: RowReader<Box<dyn BufRead + Send>>,
    opts: LoadOptions,
    window: ReorderWindow,
    format: TraceFormat,
    block: usize,
    /// The row read to detect the format, not yet in the window.
    first: Option<(usize, RawRow)>,
    heap: BinaryHeap<Held>,
    seq: u64,
    /// Latest time read so far, and its line.
    newest: Option<(f64, usize)>,
    /// The previous row's time in file order.
    prev_ms: Option<f64>,
    /// Time and line of the latest row released.
    released: Option<(f64, usize)>,
    /// Time 0 (the first row released) and the first kept row's rebased time.
    t0: Option<f64>,
    t1: Option<f64>,
    /// Requests kept (the next replay index).
    kept: usize,
    /// Latest rebased time released (for the empty-window message).
    span_ms: f64,
    /// `delay` rows: each session's latest time in file order (messages traces).
    delays: HashMap<String, f64>,
    sessions: HashMap<String, SessionState>,
    stats: TraceStats,
    eof: bool,
    done: bool,
    shared: Arc<Mutex<TraceStats>>,
}

impl TraceStream {
    /// Opens a trace file (plain or gzip, by its magic bytes; `-` is standard input) and reads
    /// up to its first row, so the format is known.
    pub fn open(
        path: &Path,
        opts: &LoadOptions,
        window: ReorderWindow,
    ) -> Result<TraceStream, TraceError> {
        if path.as_os_str() == "-" {
            return TraceStream::from_reader("<stdin>", std::io::stdin(), opts, window);
        }
        let name = path.display().to_string();
        let open_err = |error| TraceError::Open {
            path: name.clone(),
            error,
        };
        if path.is_dir() {
            return Err(open_err(std::io::Error::other("is a directory")));
        }
        let file = std::fs::File::open(path).map_err(open_err)?;
        TraceStream::from_reader(&name, file, opts, window)
    }

    /// A stream over any reader; `name` is used in error messages.
    pub fn from_reader<R: Read + Send + 'static>(
        name: &str,
        reader: R,
        opts: &LoadOptions,
        window: ReorderWindow,
    ) -> Result<TraceStream, TraceError> {
        opts.check(name)?;
        if !(window.ms.is_finite() && window.ms >= 0.0) || window.rows == 0 {
            return Err(TraceError::Options {
                path: name.to_owned(),
                what: format!(
                    "the reorder window must be >= 0 ms and at least 1 row, got {} ms and {} rows",
                    window.ms, window.rows
                ),
            });
        }
        let (input, gzip) = buffered(name, reader)?;
        let mut rows = RowReader::new(name, input, gzip, opts);
        let first = rows.next_row()?;
        if first.is_none() {
            return Err(rows.no_rows_error());
        }
        let format = rows.format().unwrap_or(TraceFormat::Generic);
        Ok(TraceStream {
            rows,
            opts: opts.clone(),
            window,
            format,
            block: opts.block_size.unwrap_or(format.default_block_size()),
            first,
            heap: BinaryHeap::new(),
            seq: 0,
            newest: None,
            prev_ms: None,
            released: None,
            t0: None,
            t1: None,
            kept: 0,
            span_ms: 0.0,
            delays: HashMap::new(),
            sessions: HashMap::new(),
            stats: TraceStats::default(),
            eof: false,
            done: false,
            shared: Arc::new(Mutex::new(TraceStats::default())),
        })
    }

    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// Tokens per hash id.
    pub fn block_size(&self) -> usize {
        self.block
    }

    /// The name errors are reported under (the path, `<stdin>`).
    pub fn name(&self) -> &str {
        self.rows.name()
    }

    /// True when the trace must be loaded whole (Bailian parent links).
    pub fn needs_whole(&self) -> bool {
        self.format == TraceFormat::Bailian
    }

    /// The whole trace, from the rows not yet read (call it before taking any request).
    pub fn into_whole(mut self) -> Result<Trace, TraceError> {
        let first: Vec<_> = self.first.take().into_iter().collect();
        let empty: Box<dyn BufRead + Send> = Box::new(std::io::empty());
        let rows = std::mem::replace(&mut self.rows, RowReader::new("", empty, false, &self.opts));
        load_rows(rows, first, &self.opts)
    }

    /// Where the counts of the rows read go when the stream ends (or is dropped): the
    /// consistency counts of `docs/traces.md`, `reordered`, and `partial` when reading stopped
    /// before the end of the file.
    pub fn stats_handle(&self) -> Arc<Mutex<TraceStats>> {
        self.shared.clone()
    }

    fn publish(&mut self) {
        let file = self.rows.stats();
        let mut st = self.stats.clone();
        st.rows = file.rows;
        st.skipped_invalid = file.skipped_invalid;
        st.invalid_examples = file.invalid_examples.clone();
        st.partial = !self.eof;
        *self.shared.lock().unwrap_or_else(|p| p.into_inner()) = st;
    }

    /// The next row in file order, its `delay` resolved.
    fn read_row(&mut self) -> Result<Option<(usize, RawRow)>, TraceError> {
        let Some((line, mut raw)) = (match self.first.take() {
            Some(r) => Some(r),
            None => self.rows.next_row()?,
        }) else {
            return Ok(None);
        };
        if self.format == TraceFormat::Messages {
            if let Some(id) = &raw.session_id {
                if raw.timestamp_ms.is_nan() {
                    let Some(prev) = self.delays.get(id) else {
                        return Err(self.rows.row_error(
                            line,
                            RowError::Field {
                                field: "delay".into(),
                                what: format!(
                                    "this is the first turn of session {id:?}: nothing to delay from (give it a `timestamp`)"
                                ),
                            },
                        ));
                    };
                    raw.timestamp_ms = prev + raw.delay_ms.unwrap_or(0.0);
                }
                self.delays.insert(id.clone(), raw.timestamp_ms);
            }
        }
        Ok(Some((line, raw)))
    }

    /// Put a row into the window; an error when it is earlier than a row already released.
    fn push(&mut self, line: usize, mut raw: RawRow) -> Result<(), TraceError> {
        let ts = raw.timestamp_ms;
        if let Some((out_ms, out_line)) = self.released {
            if ts < out_ms {
                let (newest_ms, newest_line) = self.newest.unwrap_or((out_ms, out_line));
                return Err(self.rows.row_error(
                    line,
                    RowError::Field {
                        field: "timestamp".into(),
                        what: format!(
                            "{ts} ms is out of time order by {} ms: line {out_line} ({out_ms} ms) had already left the reorder \
                             window ({} ms, {} rows; the newest row read was line {newest_line} at {newest_ms} ms); \
                             raise --reorder-window-ms to at least {} (or --reorder-window-rows if the window was full), or sort the trace by time",
                            newest_ms - ts,
                            self.window.ms,
                            self.window.rows,
                            (newest_ms - ts).ceil()
                        ),
                    },
                ));
            }
        }
        let mut flags = RowFlags::default();
        if let Some(p) = self.prev_ms {
            flags.repeated_timestamp = ts == p;
            flags.decreasing_timestamp = ts < p;
        }
        self.prev_ms = Some(ts);
        match self.newest {
            Some((n, _)) if n > ts => flags.reordered = true,
            Some((n, _)) if n == ts => {}
            _ => self.newest = Some((ts, line)),
        }
        (flags.input_beyond_blocks, flags.surplus_hash_ids) =
            normalise_hash_ids(&mut raw, self.block);
        self.heap.push(Held {
            ts,
            seq: self.seq,
            line,
            raw,
            flags,
        });
        self.seq += 1;
        Ok(())
    }

    /// The earliest row, when the window lets it go.
    fn pop_ready(&mut self) -> Option<Held> {
        let top = self.heap.peek()?;
        let newest = self.newest.map_or(top.ts, |n| n.0);
        let go = self.eof || self.heap.len() > self.window.rows || newest - top.ts > self.window.ms;
        go.then(|| self.heap.pop()).flatten()
    }

    /// The slice ends: the rows still held (and `also` more) are dropped by it and counted.
    fn end_slice(&mut self, by_time: bool, also: usize) {
        let dropped = self.heap.len() + also;
        if by_time {
            self.stats.outside_time_window += dropped;
        } else {
            self.stats.over_max_requests += dropped;
        }
        self.heap.clear();
        self.done = true;
    }

    /// A row leaving the window: rebased, sliced, linked into its session. `None` when the
    /// slice drops it (or ends).
    fn release(&mut self, h: Held) -> Option<Planned> {
        self.released = Some((h.ts, h.line));
        let t0 = *self.t0.get_or_insert(h.ts);
        let rebased = h.ts - t0;
        self.span_ms = rebased;
        if self.opts.end_ms.is_some_and(|e| rebased >= e) {
            self.end_slice(true, 1);
            return None;
        }
        let keep = self.opts.start_ms.is_none_or(|s| rebased >= s);
        let index = keep.then_some(self.kept);
        let turn = self.link(&h, index, rebased);
        if !keep {
            self.stats.outside_time_window += 1;
            return None;
        }
        let t1 = *self.t1.get_or_insert(rebased);
        self.kept += 1;
        h.flags.count_kept(h.raw.output_length, &mut self.stats);
        if self.opts.max_requests.is_some_and(|m| self.kept >= m) {
            self.end_slice(false, 0);
        }
        let raw = h.raw;
        Some(Planned {
            req: TraceRequest {
                index: self.kept - 1,
                line: h.line,
                timestamp_ms: rebased - t1,
                input_length: raw.input_length,
                output_length: raw.output_length,
                hash_ids: raw.hash_ids.unwrap_or_default(),
                session: raw.session,
            },
            turn,
            chat: raw.chat.map(Arc::new),
            ideal_hit: None,
        })
    }

    /// The turn of a `session_id` row: the previous turn of its session (in time order) is its
    /// parent when that one is replayed.
    fn link(&mut self, h: &Held, index: Option<usize>, rebased: f64) -> Option<SessionTurn> {
        let id = h.raw.session_id.as_ref()?;
        let turn = match self.sessions.get_mut(id) {
            Some(s) => {
                let gap = h.raw.delay_ms.unwrap_or(rebased - s.last_ms);
                let t = SessionTurn {
                    id: s.key.clone(),
                    turn: s.turn + 1,
                    parent_index: s.last_index,
                    trace_gap_ms: s.last_index.map(|_| gap),
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
                }
            }
        };
        Some(turn)
    }

    fn advance(&mut self) -> Result<Option<Planned>, TraceError> {
        if self.needs_whole() {
            return Err(TraceError::Options {
                path: self.name().to_owned(),
                what: "a bailian trace links turns over the whole file: load it whole".into(),
            });
        }
        loop {
            while let Some(h) = self.pop_ready() {
                if let Some(p) = self.release(h) {
                    return Ok(Some(p));
                }
                if self.done {
                    return Ok(None);
                }
            }
            if self.eof {
                return if self.kept > 0 {
                    Ok(None)
                } else {
                    Err(self.nothing_kept())
                };
            }
            match self.read_row()? {
                Some((line, raw)) => self.push(line, raw)?,
                None => self.eof = true,
            }
        }
    }

    /// The error when the whole input gave no request to replay.
    fn nothing_kept(&self) -> TraceError {
        if self.released.is_none() {
            return self.rows.no_rows_error();
        }
        let start = self.opts.start_ms.unwrap_or(0.0);
        let end = self.opts.end_ms.unwrap_or(f64::INFINITY);
        TraceError::NoRequests {
            path: self.name().to_owned(),
            reason: format!(
                "no request in the time window [{start}, {end}) ms; the trace spans 0 to {} ms",
                self.span_ms
            ),
        }
    }
}

impl Iterator for TraceStream {
    type Item = Result<Planned, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.advance();
        if self.done || !matches!(r, Ok(Some(_))) {
            self.done = true;
            self.publish();
        }
        r.transpose()
    }
}

impl Drop for TraceStream {
    fn drop(&mut self) {
        self.publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse_reader;

    fn stream(text: &str, opts: &LoadOptions, window: ReorderWindow) -> TraceStream {
        TraceStream::from_reader(
            "t.jsonl",
            std::io::Cursor::new(text.to_owned()),
            opts,
            window,
        )
        .unwrap()
    }

    fn all(text: &str, opts: &LoadOptions, window: ReorderWindow) -> Vec<Planned> {
        stream(text, opts, window).map(Result::unwrap).collect()
    }

    fn row(t: f64, session: Option<&str>) -> String {
        let s = session.map_or(String::new(), |s| format!(", \"session_id\": \"{s}\""));
        format!(
            "{{\"timestamp\": {t}, \"input_length\": 600, \"output_length\": 2, \"hash_ids\": [1, 2]{s}}}\n"
        )
    }

    #[test]
    fn same_requests_as_the_whole_trace_loader() {
        // Out of order by up to 30 ms, repeated times, sessions, slicing both ends.
        let ts = [
            5.0, 0.0, 20.0, 20.0, 10.0, 40.0, 35.0, 60.0, 50.0, 70.0, 90.0, 65.0,
        ];
        let text: String = ts
            .iter()
            .enumerate()
            .map(|(i, &t)| row(t, (i % 3 != 0).then(|| ["a", "b"][i % 2])))
            .collect();
        let window = ReorderWindow { ms: 30.0, rows: 4 };
        for opts in [
            LoadOptions::default(),
            LoadOptions {
                start_ms: Some(10.0),
                end_ms: Some(70.0),
                ..Default::default()
            },
            LoadOptions {
                start_ms: Some(5.0),
                max_requests: Some(4),
                ..Default::default()
            },
        ] {
            let whole = parse_reader("t.jsonl", text.as_bytes(), &opts).unwrap();
            let mut s = stream(&text, &opts, window);
            let got: Vec<Planned> = s.by_ref().map(Result::unwrap).collect();
            let want: Vec<Planned> = planned(Arc::new(whole.clone())).collect();
            assert_eq!(got.len(), want.len(), "{opts:?}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.req, w.req, "{opts:?}");
                assert_eq!(g.turn, w.turn, "{opts:?}");
            }
            drop(s);
            let st = whole.stats;
            let h = stream(&text, &opts, window);
            let handle = h.stats_handle();
            h.for_each(drop);
            let sst = handle.lock().unwrap().clone();
            assert_eq!(sst.reordered, st.reordered, "{opts:?}");
            assert_eq!(sst.decreasing_timestamps, st.decreasing_timestamps);
            assert_eq!(sst.repeated_timestamps, st.repeated_timestamps);
            assert_eq!(sst.input_beyond_blocks, st.input_beyond_blocks);
            if opts.max_requests.is_none() {
                assert_eq!(sst.outside_time_window, st.outside_time_window, "{opts:?}");
            }
        }
    }

    #[test]
    fn a_row_beyond_the_window_is_an_error_on_its_line() {
        let mut text = String::new();
        for t in [0.0, 100.0, 200.0, 300.0, 120.0] {
            text.push_str(&row(t, None));
        }
        let window = ReorderWindow {
            ms: 50.0,
            rows: 100,
        };
        let got: Vec<_> = stream(&text, &LoadOptions::default(), window).collect();
        let err = got.iter().find_map(|r| r.as_ref().err()).unwrap();
        let msg = err.to_string();
        assert_eq!(err.line(), Some(5), "{msg}");
        assert!(
            msg.starts_with("t.jsonl:5: field `timestamp`: 120 ms is out of time order by 180 ms"),
            "{msg}"
        );
        assert!(
            msg.contains("raise --reorder-window-ms to at least 180"),
            "{msg}"
        );
        // Within a window of 200 ms it is reordered.
        let ok = all(
            &text,
            &LoadOptions::default(),
            ReorderWindow {
                ms: 200.0,
                rows: 100,
            },
        );
        let ts: Vec<f64> = ok.iter().map(|p| p.req.timestamp_ms).collect();
        assert_eq!(ts, vec![0.0, 100.0, 120.0, 200.0, 300.0]);
        // A window of 1 row cannot hold it either.
        let got: Vec<_> = stream(
            &text,
            &LoadOptions::default(),
            ReorderWindow { ms: 1e9, rows: 1 },
        )
        .collect();
        assert!(got.iter().any(|r| r.is_err()));
    }

    #[test]
    fn bailian_is_loaded_whole() {
        let text = "{\"chat_id\": 1, \"parent_chat_id\": -1, \"timestamp\": 0.5, \"input_length\": 20, \"output_length\": 2, \"hash_ids\": [1]}\n\
                    {\"chat_id\": 2, \"parent_chat_id\": 1, \"timestamp\": 1.5, \"input_length\": 40, \"output_length\": 2, \"hash_ids\": [1, 2, 3]}\n";
        let s = stream(text, &LoadOptions::default(), ReorderWindow::default());
        assert!(s.needs_whole());
        let t = s.into_whole().unwrap();
        assert_eq!(t.requests.len(), 2);
        assert_eq!(t.sessions.get(1).unwrap().parent_index, Some(0));
    }
}
