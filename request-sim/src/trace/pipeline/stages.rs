//! The trace pipeline: the one implementation of the trace rules of `docs/traces.md`. Rows go
//! through it one at a time, as stages in this order:
//!
//! | stage | order of the rows | what it does |
//! |---|---|---|
//! | read (`RowReader`) | file | capped lines, format, one `RawRow` per data line |
//! | [`Delays`] (`session/`) | file | a `delay` row's time: its session's previous turn plus the delay |
//! | [`FileOrder`] | file | repeated / decreasing / reordered times flagged, hash ids normalised |
//! | [`Copies`] (`reshape.rs`) | file | `--max-input-length`, `--sample-sessions`, `--amplify` (a row becomes 0..N rows) |
//! | [`Reorder`] | file → time | a window that releases the earliest row (stable: ties keep file order) |
//! | [`Reshape::finish`] (`reshape.rs`) | time, whole trace | at the end of the file: `--retime`, `--max-idle-gap`, `--prefix-scale`, `--prompt-scale` |
//! | rebase | time | the first row released is time 0 |
//! | [`Turns`] (`session/`) | time | a Bailian row without `turn`: its parent's turn + 1 |
//! | [`Slice`] | time | `start_ms..end_ms`, then `max_requests`; replay indexes |
//! | [`Links`] (`session/`) | time | a `session_id` row's turn, parent and think time |
//!
//! Each stage is a small struct with its own state, called from [`Pipeline::read`] (file
//! order) or [`Pipeline::release`] (time order). What comes out is a [`Released`] row: the
//! [`Planned`] request when the slice keeps it, else the row it dropped.
//!
//! The pipeline runs in one of two [`Mode`]s: a streamed replay ([`super::TraceStream`]) holds
//! rows in a bounded window and stops reading where the slice ends; the whole trace
//! ([`super::load`]) holds every row until the end of the file (the window is unbounded, so
//! time order is a stable sort of the whole file) and judges every row, then adds the passes
//! that need the whole file (Bailian parent chains).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::BufRead;
use std::sync::Arc;

use super::reshape::Copies;
use super::session::{Delays, Links, Turns};
use crate::trace::error::{RowError, TraceError};
use crate::trace::formats::registry::fallback;
use crate::trace::formats::rows::RowReader;
use crate::trace::model::{ChatPayload, SessionTurn, TraceFormat, TraceRequest, TraceStats};
use crate::trace::options::{LoadOptions, Reshape};
use crate::trace::row::{normalise_hash_ids, RawRow, RowFlags};

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

impl ReorderWindow {
    /// No bound: every row is held until the end of the file (the whole trace).
    const WHOLE: ReorderWindow = ReorderWindow {
        ms: f64::INFINITY,
        rows: usize::MAX,
    };
}

/// How the pipeline reads and ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A streamed replay: a bounded window; reading stops where the slice ends, and the rows
    /// still held then are counted as dropped by whatever ended it.
    Stream,
    /// The whole trace: every row is read before the first is released, every row is judged by
    /// the slice (so the counts cover the whole file), and a row error found by a stage after
    /// reading (a `delay` without an earlier turn) is reported once every line has been read.
    Whole,
}

/// A row out of the pipeline, in time order.
pub(crate) struct Released {
    /// 1-based line in the source file.
    pub(crate) line: usize,
    /// Trace time after the rebase to the first row (before the slice's own rebase).
    pub(crate) rebased_ms: f64,
    pub(crate) out: Out,
}

/// What became of a released row.
pub(crate) enum Out {
    /// The slice keeps it: a request.
    Kept(Planned),
    /// The slice drops it (before `start_ms`, from `end_ms` on, beyond `max_requests`).
    Dropped(RawRow),
}

/// The trace rules over the rows of one input (see the module doc for the stages).
pub(crate) struct Pipeline<B> {
    pub(crate) rows: RowReader<B>,
    mode: Mode,
    format: TraceFormat,
    block: usize,
    /// The row read to detect the format, not yet through the stages.
    first: Option<(usize, RawRow)>,
    delays: Delays,
    file_order: FileOrder,
    copies: Copies,
    /// The whole-trace reshaping, run once at the end of the file (`Whole` mode).
    reshape: Option<Reshape>,
    reorder: Reorder,
    /// Time 0: the first row released.
    t0: Option<f64>,
    turns: Turns,
    slice: Slice,
    links: Links,
    /// `Whole` mode: the first row error a stage found, reported at the end of the file.
    deferred: Option<TraceError>,
    /// The counts of the rules (the reader keeps the file-level ones).
    stats: TraceStats,
    eof: bool,
    /// The slice ended the stream (`Stream` mode).
    stopped: bool,
}

impl<B: BufRead> Pipeline<B> {
    /// A pipeline over `rows`, which has not been read yet.
    pub(crate) fn new(
        rows: RowReader<B>,
        opts: &LoadOptions,
        window: ReorderWindow,
        mode: Mode,
    ) -> Pipeline<B> {
        let window = match mode {
            Mode::Stream => window,
            Mode::Whole => ReorderWindow::WHOLE,
        };
        let format = rows.format().unwrap_or_else(fallback);
        Pipeline {
            rows,
            mode,
            format,
            block: 1,
            first: None,
            delays: Delays::default(),
            file_order: FileOrder::default(),
            copies: Copies::new(&opts.reshape),
            reshape: opts.reshape.needs_whole().then(|| opts.reshape.clone()),
            reorder: Reorder::new(window),
            t0: None,
            turns: Turns::default(),
            slice: Slice::new(opts),
            links: Links::default(),
            deferred: None,
            stats: TraceStats::default(),
            eof: false,
            stopped: false,
        }
    }

    /// Reads up to the first row, so the format (and its block size) is known; an error when
    /// the input has no row.
    pub(crate) fn start(&mut self, block_size: Option<usize>) -> Result<(), TraceError> {
        self.first = self.rows.next_row()?;
        if self.first.is_none() {
            return Err(self.rows.no_rows_error());
        }
        // A row was read, so a format was detected or forced.
        self.format = self.rows.format().unwrap_or_else(fallback);
        self.block = block_size
            .or(self.rows.block_hint())
            .unwrap_or(self.format.default_block_size());
        self.file_order.block = self.block;
        Ok(())
    }

    /// From here on, the whole trace (call it before any row is released).
    pub(crate) fn make_whole(&mut self) {
        self.mode = Mode::Whole;
        self.reorder.window = ReorderWindow::WHOLE;
    }

    pub(crate) fn format(&self) -> TraceFormat {
        self.format
    }

    pub(crate) fn block_size(&self) -> usize {
        self.block
    }

    /// Requests kept so far.
    pub(crate) fn kept(&self) -> usize {
        self.slice.kept
    }

    /// True when the slice ended the stream before the input did.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped
    }

    /// The counts so far: the reader's file-level ones and the rules'; `partial` while the end
    /// of the input has not been reached.
    pub(crate) fn stats(&self) -> TraceStats {
        let file = self.rows.stats();
        let mut st = self.stats.clone();
        st.rows = file.rows;
        st.skipped_invalid = file.skipped_invalid;
        st.invalid_examples = file.invalid_examples.clone();
        st.failed_requests = file.failed_requests;
        st.dropped_failed = file.dropped_failed;
        st.partial = !self.eof;
        st
    }

    /// The next row out of the pipeline, kept or dropped; `None` when it has ended.
    pub(crate) fn next_released(&mut self) -> Result<Option<Released>, TraceError> {
        loop {
            if self.stopped {
                return Ok(None);
            }
            let newest = self.file_order.newest.map(|n| n.0);
            if self.eof && self.mode == Mode::Whole {
                if let Some(r) = self.reshape.take() {
                    self.reorder.reshape(&r, self.block, &mut self.stats);
                }
            }
            if let Some(h) = self.reorder.pop_ready(newest, self.eof) {
                return Ok(Some(self.release(h)));
            }
            if self.eof {
                return Ok(None);
            }
            self.read()?;
        }
    }

    /// After a row error ended the reading (`Stream` mode): the earliest of the rows read before
    /// it and still held in the window, through the time-order stages (the slice keeps it or
    /// drops it, as it would have); `None` when none is left or the slice has ended.
    pub(crate) fn next_held(&mut self) -> Option<Released> {
        if self.stopped {
            return None;
        }
        let h = self.reorder.pop_ready(None, true)?;
        Some(self.release(h))
    }

    /// The file-order stages: one row read, its `delay` resolved, flagged, into the window.
    fn read(&mut self) -> Result<(), TraceError> {
        let next = match self.first.take() {
            Some(r) => Some(r),
            None => self.rows.next_row()?,
        };
        let Some((line, mut raw)) = next else {
            self.eof = true;
            return self.deferred.take().map_or(Ok(()), Err);
        };
        if self.format.info().has_delays {
            if let Err(e) = self.delays.resolve(&mut raw) {
                let e = self.rows.row_error(line, e);
                match self.mode {
                    Mode::Stream => return Err(e),
                    Mode::Whole => {
                        self.deferred.get_or_insert(e);
                    }
                }
            }
        }
        let ts = raw.timestamp_ms;
        self.reorder
            .check(ts, self.file_order.newest)
            .map_err(|e| self.rows.row_error(line, e))?;
        let flags = self.file_order.mark(line, &mut raw);
        if self.copies.idle() {
            self.reorder.push(line, raw, flags);
            return Ok(());
        }
        let rows = self
            .copies
            .expand(line, raw, self.block, &mut self.stats)
            .map_err(|e| self.rows.row_error(line, e))?;
        for r in rows {
            self.reorder.push(line, r, flags);
        }
        Ok(())
    }

    /// The time-order stages: a row leaving the window rebased, its turn filled in, judged by
    /// the slice, linked into its session.
    fn release(&mut self, mut h: Held) -> Released {
        let t0 = *self.t0.get_or_insert(h.ts);
        let rebased = h.ts - t0;
        self.turns.fill(&mut h.raw);
        let (line, mut raw) = (h.line, h.raw);
        let dropped = move |raw| Released {
            line,
            rebased_ms: rebased,
            out: Out::Dropped(raw),
        };
        let (index, timestamp_ms) = match self.slice.judge(rebased) {
            Verdict::Keep {
                index,
                timestamp_ms,
            } => (index, timestamp_ms),
            Verdict::Before => {
                self.links.link(&raw, None, rebased);
                self.stats.outside_time_window += 1;
                return dropped(raw);
            }
            Verdict::After => {
                self.stats.outside_time_window += 1;
                self.stop(|st, n| st.outside_time_window += n);
                return dropped(raw);
            }
            Verdict::OverMax => {
                self.stats.over_max_requests += 1;
                return dropped(raw);
            }
        };
        let turn = self.links.link(&raw, Some(index), rebased);
        h.flags.count_kept(raw.output_length, &mut self.stats);
        if self.slice.full() {
            self.stop(|st, n| st.over_max_requests += n);
        }
        let req = TraceRequest {
            index,
            line,
            timestamp_ms,
            input_length: raw.input_length,
            output_length: raw.output_length,
            hash_ids: raw.hash_ids.take().unwrap_or_default().into(),
            session: raw.session.take(),
            reasoning: raw.reasoning,
            model: raw.model.take(),
            images: crate::trace::formats::images::resolve(raw.images.take(), line),
        };
        Released {
            line,
            rebased_ms: rebased,
            out: Out::Kept(Planned {
                req,
                turn,
                chat: raw.chat.take().map(|c| Arc::new(*c)),
                ideal_hit: None,
            }),
        }
    }

    /// `Stream` mode: the slice has ended, so reading stops; the rows still held are dropped
    /// and counted by `count`.
    fn stop(&mut self, count: impl FnOnce(&mut TraceStats, usize)) {
        if self.mode == Mode::Stream {
            count(&mut self.stats, self.reorder.drop_held());
            self.stopped = true;
        }
    }

    /// The error when the whole input gave no request to replay.
    pub(crate) fn nothing_kept(&self) -> TraceError {
        if self.reorder.released.is_none() {
            return self.rows.no_rows_error();
        }
        let start = self.slice.start.unwrap_or(0.0);
        let end = self.slice.end.unwrap_or(f64::INFINITY);
        TraceError::NoRequests {
            path: self.rows.name().to_owned(),
            reason: format!(
                "no request in the time window [{start}, {end}) ms; the trace spans 0 to {} ms",
                self.slice.span_ms
            ),
        }
    }
}

/// File-order facts of a row (repeated, decreasing, reordered timestamps) and its hash ids
/// normalised to the block size.
#[derive(Default)]
struct FileOrder {
    block: usize,
    /// The previous row's time.
    prev_ms: Option<f64>,
    /// Latest time read so far, and its line.
    newest: Option<(f64, usize)>,
}

impl FileOrder {
    fn mark(&mut self, line: usize, raw: &mut RawRow) -> RowFlags {
        let ts = raw.timestamp_ms;
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
            normalise_hash_ids(raw, self.block.max(1));
        flags
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

/// File order to time order: rows are held until the newest row read is more than `ms`
/// later than theirs, or until the window holds more than `rows` rows; then the earliest goes.
///
/// Unbounded (the whole trace), the rows are kept in a plain list and sorted once at the end of
/// the file, which gives the same order as the heap and costs less.
struct Reorder {
    window: ReorderWindow,
    heap: BinaryHeap<Held>,
    /// Unbounded: every row, latest first once sorted.
    all: Vec<Held>,
    sorted: bool,
    seq: u64,
    /// Time and line of the latest row released.
    released: Option<(f64, usize)>,
}

impl Reorder {
    fn new(window: ReorderWindow) -> Reorder {
        Reorder {
            window,
            heap: BinaryHeap::new(),
            all: Vec::new(),
            sorted: false,
            seq: 0,
            released: None,
        }
    }

    /// An error when a row at `ts` is earlier than one already released (`newest`: the latest
    /// row read before it).
    fn check(&self, ts: f64, newest: Option<(f64, usize)>) -> Result<(), RowError> {
        let Some((out_ms, out_line)) = self.released else {
            return Ok(());
        };
        if ts >= out_ms {
            return Ok(());
        }
        let (newest_ms, newest_line) = newest.unwrap_or((out_ms, out_line));
        Err(RowError::OutOfOrder(format!(
                "{ts} ms is out of time order by {} ms: line {out_line} ({out_ms} ms) had already left the reorder \
                 window ({} ms, {} rows; the newest row read was line {newest_line} at {newest_ms} ms); \
                 raise --reorder-window-ms to at least {} (or --reorder-window-rows if the window was full), or sort the trace by time",
                newest_ms - ts,
                self.window.ms,
                self.window.rows,
                (newest_ms - ts).ceil()
        )))
    }

    /// True when every row is held until the end of the file.
    fn unbounded(&self) -> bool {
        self.window == ReorderWindow::WHOLE
    }

    fn push(&mut self, line: usize, raw: RawRow, flags: RowFlags) {
        let held = Held {
            ts: raw.timestamp_ms,
            seq: self.seq,
            line,
            raw,
            flags,
        };
        if self.unbounded() {
            self.all.push(held);
        } else {
            self.heap.push(held);
        }
        self.seq += 1;
    }

    /// The earliest row, when the window lets it go (`newest_ms`: the latest time read).
    fn pop_ready(&mut self, newest_ms: Option<f64>, eof: bool) -> Option<Held> {
        if self.unbounded() {
            if !eof {
                return None;
            }
            if !self.sorted {
                // `Held`'s order is reversed (the earliest row is the greatest): sorted, the
                // earliest is last. (time, file order) is unique, so unstable is stable here.
                self.all.sort_unstable();
                self.sorted = true;
            }
            let h = self.all.pop()?;
            self.released = Some((h.ts, h.line));
            return Some(h);
        }
        let top = self.heap.peek()?;
        let newest = newest_ms.unwrap_or(top.ts);
        let go = eof || self.heap.len() > self.window.rows || newest - top.ts > self.window.ms;
        let h = go.then(|| self.heap.pop()).flatten()?;
        self.released = Some((h.ts, h.line));
        Some(h)
    }

    /// The whole-trace reshaping over every row held (unbounded window, end of the file): the
    /// rows in time order, their times changed in place, then sorted again when popped.
    fn reshape(&mut self, r: &Reshape, block: usize, stats: &mut TraceStats) {
        self.all.sort_unstable();
        let mut rows: Vec<&mut RawRow> = self.all.iter_mut().rev().map(|h| &mut h.raw).collect();
        r.finish(&mut rows, block, stats);
        for h in &mut self.all {
            h.ts = h.raw.timestamp_ms;
        }
        self.sorted = false;
    }

    /// Drops the rows held; how many there were.
    fn drop_held(&mut self) -> usize {
        let n = self.heap.len();
        self.heap.clear();
        n
    }
}

/// What the slice does with a row.
enum Verdict {
    /// Kept: its replay index and its time rebased to the first kept row.
    Keep { index: usize, timestamp_ms: f64 },
    /// Before `start_ms`.
    Before,
    /// At or after `end_ms`.
    After,
    /// In the time window, beyond `max_requests`.
    OverMax,
}

/// The time window `start_ms..end_ms` on the rebased time, then at most `max_requests`;
/// replay indexes in release order; kept rows rebased to the first kept one.
struct Slice {
    start: Option<f64>,
    end: Option<f64>,
    max: Option<usize>,
    kept: usize,
    /// The first kept row's rebased time.
    t1: Option<f64>,
    /// Latest rebased time judged (for the empty-window message).
    span_ms: f64,
}

impl Slice {
    fn new(opts: &LoadOptions) -> Slice {
        Slice {
            start: opts.start_ms,
            end: opts.end_ms,
            max: opts.max_requests,
            kept: 0,
            t1: None,
            span_ms: 0.0,
        }
    }

    fn judge(&mut self, rebased: f64) -> Verdict {
        self.span_ms = rebased;
        if self.end.is_some_and(|e| rebased >= e) {
            return Verdict::After;
        }
        if !self.start.is_none_or(|s| rebased >= s) {
            return Verdict::Before;
        }
        if self.full() {
            return Verdict::OverMax;
        }
        let t1 = *self.t1.get_or_insert(rebased);
        self.kept += 1;
        Verdict::Keep {
            index: self.kept - 1,
            timestamp_ms: rebased - t1,
        }
    }

    /// True when `max_requests` are kept.
    fn full(&self) -> bool {
        self.max.is_some_and(|m| self.kept >= m)
    }
}
