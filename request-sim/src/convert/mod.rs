//! `request-sim convert LOG -o TRACE`: a request log (OpenAI-format, LiteLLM, OpenTelemetry
//! GenAI spans, or a `messages` trace; read by `trace::formats::log`) made into an anonymized trace in
//! the generic JSONL format (`docs/convert.md`):
//!
//! `{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...], "session_id": "k"}`
//!
//! - `input_length`: the prompt's tokens as the target model's server counts them (`count.rs`:
//!   the chat template over messages and tools, then the tokenizer; or the server's
//!   `/tokenize`);
//! - `output_length`: the response's usage (or its text, counted);
//! - `hash_ids`: the salted chained hash of the prompt's token blocks, numbered in order of first
//!   appearance (`blocks.rs`);
//! - `session_id`: a number, from `--session-field` or inferred (`sessions.rs`);
//! - `timestamp`: milliseconds from the first request of the log.
//!
//! No text of the log is written to the trace (and no session name, and no hash: numbers only);
//! `--keep-text FILE` writes a `messages` trace with the text beside it, for the user's own use.
//!
//! Streaming: lines are read in batches of [`BATCH`], counted in parallel (the chat template
//! and the tokenizer are the cost), then put in start-time order within `--reorder-window`
//! (`reorder.rs`: a log written as requests complete is out of start order), and numbered
//! (blocks, sessions) and written in that order. What is kept across
//! rows is one entry per distinct block (hash → id, 16 bytes plus the map's overhead) and one
//! per request for session inference (its messages' hash → session, 16 bytes), plus a counter
//! of turns per session (4 bytes): no text, so a 10 GB log converts in memory proportional to
//! its requests and distinct blocks, not its bytes.

mod blocks;
mod count;
mod reorder;
mod sessions;

use std::io::Write;
use std::path::PathBuf;

use rayon::prelude::*;
use serde::Serialize;
use serde_json::Value;

use crate::prompt::chat_messages;
use crate::trace::formats::log::{self, LogFields, LogRow, LogShape, Output, TimeFormat};
use crate::trace::{RowError, TraceError};
use crate::util::OutputFile;
use crate::{Error, Result};

pub use crate::trace::pipeline::session::SessionIds;
pub use blocks::BlockIds;
pub use count::Counter;
pub use sessions::message_chain;

/// Requests counted at once (in parallel) before they are numbered and written in order.
pub const BATCH: usize = 256;
/// Skipped rows whose reasons the report keeps.
pub const MAX_EXAMPLES: usize = 5;
/// Default tokens per hash id (the generic format's default, so the trace replays without
/// `--block-size`).
pub const DEFAULT_BLOCK_SIZE: usize = 512;

/// What `convert` is asked to do.
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    pub input: PathBuf,
    pub output: PathBuf,
    pub shape: Option<LogShape>,
    pub fields: LogFields,
    pub time_format: Option<TimeFormat>,
    pub block_size: usize,
    /// `None`: a random salt, never written.
    pub salt: Option<String>,
    pub keep_text: Option<PathBuf>,
    /// `--forget-after`: sessions idle and blocks unseen for this long (log time, ms) are
    /// forgotten, which bounds memory on an endless log (`None`: exact, nothing forgotten).
    pub forget_after_ms: Option<f64>,
    /// `--reorder-window`: requests are written in start-time order; one may start up to this
    /// long (log time, ms) before the newest start read (a log written at completion).
    pub reorder_window_ms: f64,
}

/// Default `--reorder-window`, seconds: longer than most requests take (a log written at
/// completion is out of start order by up to its longest request).
pub const DEFAULT_REORDER_WINDOW_S: f64 = 600.0;

/// What a conversion found: the report printed at its end (and `--json`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConvertReport {
    pub input: String,
    pub output: String,
    pub log_format: String,
    pub time_format: String,
    pub counted_by: String,
    /// Data lines of the log (blank lines not counted).
    pub lines_read: usize,
    /// Requests read (an OpenTelemetry line may hold several, or none).
    pub requests_read: usize,
    pub converted: usize,
    /// Lines and requests skipped as bad: `skipped_lines` (lines that could not be read as a
    /// request: not JSON, no time, ...) plus the requests read that could not be counted, so
    /// `requests_read = converted + skipped - skipped_lines`.
    pub skipped: usize,
    pub skipped_lines: usize,
    /// The first few reasons, `file:line: why`.
    pub skipped_examples: Vec<String>,
    /// OpenTelemetry spans without `gen_ai.input.messages` (not requests).
    pub spans_passed_over: usize,
    pub sessions: usize,
    pub multi_turn_sessions: usize,
    /// Sessions from `--session-field` (or the `messages` trace's `session_id`), not inferred.
    pub sessions_named: usize,
    /// `--forget-after` (seconds), when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forget_after_s: Option<f64>,
    /// Blocks and session entries held at the end (what memory grows with).
    pub blocks_held: usize,
    pub session_entries_held: usize,
    /// Time of the first request, ms (since the epoch for absolute forms).
    pub first_time_ms: f64,
    /// Last minus first request time, seconds.
    pub span_s: f64,
    /// Requests that start earlier than one before them in the log (written in start order).
    pub out_of_order: usize,
    /// `--reorder-window` (seconds).
    pub reorder_window_s: f64,
    /// The most requests held at once to put them in start order.
    pub reorder_held_max: usize,
    pub block_size: usize,
    pub distinct_blocks: usize,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Requests whose output length was counted from the response text (no usage in the log).
    pub output_from_text: usize,
    /// Why the log was not read to its end (a damaged file: `file: read error after line N`),
    /// when it was not; the requests converted before it are written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
}

/// One request counted: everything the ordered stage needs, no text.
struct Counted {
    input_length: u32,
    output_length: u32,
    from_text: bool,
    blocks: Vec<u64>,
    messages: Vec<u64>,
}

/// Counts one request (run in parallel).
fn count_row(
    row: &LogRow,
    counter: &Counter,
    ids: &BlockIds,
) -> std::result::Result<Counted, String> {
    let chat = chat_messages(&row.messages).ok_or_else(|| {
        "a message has content that is not text (an image?) or no `role`: its tokens cannot be \
         counted here"
            .to_owned()
    })?;
    let tokens = counter.prompt_ids(&row.messages, &chat, row.tools.as_ref())?;
    if tokens.is_empty() {
        return Err("the prompt renders to no tokens".into());
    }
    let input_length = u32::try_from(tokens.len())
        .ok()
        .filter(|&n| u64::from(n) <= crate::trace::MAX_LENGTH_TOKENS)
        .ok_or_else(|| {
            format!(
                "the prompt has {} tokens, more than a trace row may",
                tokens.len()
            )
        })?;
    let (output_length, from_text) = match &row.output {
        Output::Tokens(n) => (*n, false),
        Output::Text(t) => (counter.text_tokens(t)?, true),
    };
    Ok(Counted {
        input_length,
        output_length,
        from_text,
        blocks: ids.chain(&tokens),
        messages: message_chain(&chat),
    })
}

/// A row of the anonymized trace.
#[derive(Serialize)]
struct TraceRow<'a> {
    timestamp: f64,
    input_length: u32,
    output_length: u32,
    hash_ids: &'a [u64],
    session_id: String,
}

/// A row of the `--keep-text` messages trace.
#[derive(Serialize)]
struct TextRow<'a> {
    timestamp: f64,
    session_id: String,
    messages: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a Value>,
    output_length: u32,
}

/// An item of a batch: a request with its line, or a line that gave none.
enum Item {
    Row(usize, LogRow),
    Bad(usize, RowError),
}

/// A random salt (the std hasher's per-process random keys; never written anywhere).
fn random_salt() -> Vec<u8> {
    use std::hash::{BuildHasher, Hasher};
    let mut out = Vec::with_capacity(16);
    for i in 0..2u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        out.extend_from_slice(&h.finish().to_le_bytes());
    }
    out
}

/// The outputs must not be the log, nor each other: refused before anything is read (writing
/// `-o LOG` would destroy the log).
pub fn check_paths(opts: &ConvertOptions) -> Result<()> {
    let log = &opts.input;
    crate::util::refuse_input_as_output(&opts.output, "-o", log, "log")?;
    if let Some(text) = &opts.keep_text {
        crate::util::refuse_input_as_output(text, "--keep-text", log, "log")?;
        if text == &opts.output || crate::util::same_file(text, &opts.output) {
            return Err(Error::config(format!(
                "{}: --keep-text must differ from -o (the text trace would overwrite the trace)",
                text.display()
            )));
        }
    }
    Ok(())
}

/// Milliseconds to three decimals (microseconds), as written.
fn round_ms(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// Converts `opts.input` into `opts.output` (and `--keep-text`), counting with `counter`: the
/// log is read in batches (`read_batch`), each batch counted in parallel (`count_batch`),
/// then numbered and written in log order (`Ordered`).
///
/// The outputs are written whole or not at all ([`OutputFile`]): on an error (nothing
/// converted, a write error) files already at their paths are left as they were. A log that
/// cannot be read to its end (a damaged compressed file) keeps what was converted before the
/// damage: the outputs are written, and the read error is returned beside the report (whose
/// `stopped_by` says it) for the caller to fail with.
pub fn convert(
    opts: &ConvertOptions,
    counter: &Counter,
) -> Result<(ConvertReport, Option<TraceError>)> {
    check_paths(opts)?;
    let mut reader = log::open(
        &opts.input,
        opts.shape,
        opts.fields.clone(),
        opts.time_format,
    )?;
    let mut ordered = Ordered::open(opts, reader.name().to_owned(), counter)?;
    let mut batch: Vec<Item> = Vec::with_capacity(BATCH);
    loop {
        // On a read error the batch holds the lines read before it: they are converted too.
        let read = read_batch(&mut reader, &mut batch);
        let counted = count_batch(&batch, counter, &ordered.ids);
        for (item, c) in batch.drain(..).zip(counted) {
            ordered.take(item, c)?;
        }
        match read {
            Ok(false) => {}
            Ok(true) => return ordered.finish(&reader).map(|rep| (rep, None)),
            Err(e) => return ordered.finish_cut(&reader, e),
        }
    }
}

/// The log reader [`log::open`] gives.
type Reader = log::LogReader<Box<dyn std::io::BufRead + Send>>;

/// Fills `batch` (emptied first) with up to [`BATCH`] items; true when the log is at its end.
/// On a read error, `batch` keeps the items read before it.
fn read_batch(reader: &mut Reader, batch: &mut Vec<Item>) -> Result<bool, TraceError> {
    batch.clear();
    while batch.len() < BATCH {
        match reader.next_line()? {
            None => return Ok(true),
            Some((line, Ok(rows))) => {
                batch.extend(rows.into_iter().map(|r| Item::Row(line, r)));
            }
            Some((line, Err(e))) => batch.push(Item::Bad(line, e)),
        }
    }
    Ok(false)
}

/// Counts every request of `batch` (in parallel when `counter` allows); a bad line's reason
/// is its error.
fn count_batch(
    batch: &[Item],
    counter: &Counter,
    ids: &BlockIds,
) -> Vec<std::result::Result<Counted, String>> {
    let work = |item: &Item| match item {
        Item::Row(_, row) => count_row(row, counter, ids),
        Item::Bad(_, e) => Err(e.to_string()),
    };
    if counter.parallel() {
        batch.par_iter().map(work).collect()
    } else {
        batch.iter().map(work).collect()
    }
}

/// A counted request held until its turn in start-time order: no text unless `--keep-text`.
struct Held {
    session: Option<String>,
    counted: Counted,
    /// Its messages and tools, for `--keep-text`.
    text: Option<(Value, Option<Value>)>,
}

/// The ordered stage of a conversion: takes the counted requests in log order, puts them in
/// start-time order (`reorder.rs`), numbers their blocks and sessions (in that order), writes
/// their rows, and keeps the report.
struct Ordered<'a> {
    opts: &'a ConvertOptions,
    /// The log's name, as the reader gives it (`<stdin>` for `-`).
    name: String,
    ids: BlockIds,
    sessions: SessionIds,
    order: reorder::StartOrder<Held>,
    out: OutputFile,
    /// The `--keep-text` messages trace.
    text_out: Option<OutputFile>,
    rep: ConvertReport,
    /// Time of the first request written (timestamps are relative to it).
    first: Option<f64>,
    latest: f64,
    earliest: f64,
    line_buf: Vec<u8>,
}

impl<'a> Ordered<'a> {
    /// The salt (`--salt`, or random), the block and session numbering, and the output files
    /// created.
    fn open(opts: &'a ConvertOptions, name: String, counter: &Counter) -> Result<Ordered<'a>> {
        let salt = match &opts.salt {
            Some(s) => s.as_bytes().to_vec(),
            None => random_salt(),
        };
        let ids = BlockIds::new(&salt, opts.block_size).forget_after(opts.forget_after_ms);
        let sessions = SessionIds::with_idle(opts.forget_after_ms);
        let out = OutputFile::create(&opts.output)?;
        let text_out = opts
            .keep_text
            .as_deref()
            .map(OutputFile::create)
            .transpose()?;
        let rep = ConvertReport {
            input: name.clone(),
            output: opts.output.display().to_string(),
            counted_by: counter.describe(),
            block_size: opts.block_size,
            reorder_window_s: opts.reorder_window_ms / 1e3,
            ..ConvertReport::default()
        };
        Ok(Ordered {
            opts,
            name,
            ids,
            sessions,
            order: reorder::StartOrder::new(opts.reorder_window_ms),
            out,
            text_out,
            rep,
            first: None,
            latest: f64::NEG_INFINITY,
            earliest: f64::INFINITY,
            line_buf: Vec::with_capacity(4096),
        })
    }

    /// One item of a batch and its count: written, or counted as skipped with its reason.
    fn take(&mut self, item: Item, c: std::result::Result<Counted, String>) -> Result<()> {
        let line = match &item {
            Item::Row(l, _) | Item::Bad(l, _) => *l,
        };
        if matches!(item, Item::Row(..)) {
            self.rep.requests_read += 1;
        }
        let c = match c {
            Ok(c) => c,
            Err(why) => {
                self.rep.skipped += 1;
                if matches!(item, Item::Bad(..)) {
                    self.rep.skipped_lines += 1;
                }
                if self.rep.skipped_examples.len() < MAX_EXAMPLES {
                    let name = &self.name;
                    self.rep
                        .skipped_examples
                        .push(format!("{name}:{line}: {why}"));
                }
                return Ok(());
            }
        };
        let Item::Row(_, row) = item else {
            return Ok(());
        };
        self.hold(line, row, c)
    }

    /// A counted request held for its turn in start order; those whose turn has come written.
    fn hold(&mut self, line: usize, row: LogRow, c: Counted) -> Result<()> {
        let time = row.time_ms;
        if time < self.latest {
            self.rep.out_of_order += 1;
        }
        self.latest = self.latest.max(time);
        self.earliest = self.earliest.min(time);
        let held = Held {
            session: row.session,
            counted: c,
            text: self
                .opts
                .keep_text
                .is_some()
                .then_some((row.messages, row.tools)),
        };
        if let Err(late) = self.order.push(time, held) {
            return Err(self.too_late(line, time, late));
        }
        self.rep.reorder_held_max = self.rep.reorder_held_max.max(self.order.held());
        self.release(false)
    }

    /// A request that starts before one already written: the window was too narrow.
    fn too_late(&self, line: usize, time: f64, late: reorder::TooLate) -> Error {
        let behind_s = (late.newest_ms - time) / 1e3;
        let what = format!(
            "this request starts {behind_s:.3} s before the latest start read and {:.3} s before \
             a request already written: the log is out of start-time order by more than \
             --reorder-window {} s; raise --reorder-window to at least {}",
            (late.written_ms - time) / 1e3,
            self.opts.reorder_window_ms / 1e3,
            behind_s.floor() + 1.0
        );
        TraceError::Row {
            path: self.name.clone(),
            line,
            error: RowError::Json(what),
        }
        .into()
    }

    /// Writes the held requests whose turn has come (`all`: every one, at the end).
    fn release(&mut self, all: bool) -> Result<()> {
        while let Some((time, held)) = self.order.pop(all) {
            self.write(time, &held)?;
        }
        Ok(())
    }

    /// A counted request in start order: its session and hash ids numbered, its trace row
    /// (and text row) written, its tokens added to the report.
    fn write(&mut self, time_ms: f64, held: &Held) -> Result<()> {
        let c = &held.counted;
        let base = *self.first.get_or_insert(time_ms);
        let (session, _turn) =
            self.sessions
                .assign_chain(held.session.as_deref(), &c.messages, time_ms);
        let hash_ids = self.ids.number(&c.blocks, time_ms);
        let timestamp = round_ms(time_ms - base);
        self.line_buf.clear();
        serde_json::to_writer(
            &mut self.line_buf,
            &TraceRow {
                timestamp,
                input_length: c.input_length,
                output_length: c.output_length,
                hash_ids: &hash_ids,
                session_id: session.to_string(),
            },
        )
        .map_err(|e| Error::internal(format!("cannot serialise a trace row: {e}")))?;
        self.line_buf.push(b'\n');
        self.out
            .write_all(&self.line_buf)
            .map_err(|e| Error::write(&self.opts.output, e))?;
        self.write_text(held, timestamp, session.to_string())?;
        self.rep.converted += 1;
        self.rep.input_tokens += u64::from(c.input_length);
        self.rep.output_tokens += u64::from(c.output_length);
        self.rep.output_from_text += usize::from(c.from_text);
        Ok(())
    }

    /// The request's row of the `--keep-text` messages trace, when asked for.
    fn write_text(&mut self, held: &Held, timestamp: f64, session_id: String) -> Result<()> {
        let (Some(w), Some(path), Some((messages, tools))) = (
            self.text_out.as_mut(),
            self.opts.keep_text.as_deref(),
            held.text.as_ref(),
        ) else {
            return Ok(());
        };
        self.line_buf.clear();
        serde_json::to_writer(
            &mut self.line_buf,
            &TextRow {
                timestamp,
                session_id,
                messages,
                tools: tools.as_ref(),
                output_length: held.counted.output_length,
            },
        )
        .map_err(|e| Error::internal(format!("cannot serialise a text row: {e}")))?;
        self.line_buf.push(b'\n');
        w.write_all(&self.line_buf)
            .map_err(|e| Error::write(path, e))
    }

    /// The report completed from the reader and the numbering, the files put in place; with
    /// nothing converted, no file written (those already there left as they were) and the
    /// error saying why.
    fn finish(mut self, reader: &Reader) -> Result<ConvertReport> {
        self.release(true)?;
        self.complete_report(reader);
        if self.rep.converted == 0 {
            return Err(nothing_converted(self.name, &self.rep));
        }
        self.commit()
    }

    /// The log could not be read past a line (`e`): what was converted before it is written,
    /// and the report says where the conversion stopped; with nothing converted, the error
    /// alone.
    fn finish_cut(
        mut self,
        reader: &Reader,
        e: TraceError,
    ) -> Result<(ConvertReport, Option<TraceError>)> {
        self.release(true)?;
        self.complete_report(reader);
        if self.rep.converted == 0 {
            return Err(e.into());
        }
        self.rep.stopped_by = Some(e.to_string());
        Ok((self.commit()?, Some(e)))
    }

    /// The report's facts of the whole read: the reader's counts and the numbering's.
    fn complete_report(&mut self, reader: &Reader) {
        let (opts, rep) = (self.opts, &mut self.rep);
        rep.lines_read = reader.lines_read;
        rep.spans_passed_over = reader.spans_passed_over;
        rep.log_format = reader.shape().map_or("none", LogShape::name).to_owned();
        rep.time_format = reader.time().describe();
        rep.sessions = self.sessions.sessions();
        rep.multi_turn_sessions = self.sessions.multi_turn();
        rep.sessions_named = self.sessions.named();
        rep.forget_after_s = opts.forget_after_ms.map(|ms| ms / 1e3);
        rep.blocks_held = self.ids.held();
        let (contents, live) = self.sessions.held();
        rep.session_entries_held = contents + live;
        rep.distinct_blocks = self.ids.distinct();
        if let Some(f) = self.first {
            rep.first_time_ms = f;
            rep.span_s = (self.latest - self.earliest) / 1000.0;
        }
    }

    /// The trace (and the text trace) renamed into place.
    fn commit(self) -> Result<ConvertReport> {
        self.out.commit()?;
        if let Some(w) = self.text_out {
            w.commit()?;
        }
        Ok(self.rep)
    }
}

/// Why a log gave no request: empty, every request skipped, or no line holding one.
fn nothing_converted(name: String, rep: &ConvertReport) -> Error {
    if rep.lines_read == 0 {
        return TraceError::Empty { path: name }.into();
    }
    let reason = if rep.skipped > 0 {
        format!(
            "all {} requests were skipped; first: {}",
            rep.skipped,
            rep.skipped_examples.join("; ")
        )
    } else {
        format!(
            "no line holds a request ({} OpenTelemetry spans without gen_ai.input.messages)",
            rep.spans_passed_over
        )
    };
    TraceError::NoRequests { path: name, reason }.into()
}

/// The report as text (before the `analyze` of the result).
pub fn render_report(r: &ConvertReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "Converted {} -> {}", r.input, r.output);
    let _ = writeln!(s, "  log format:          {}", r.log_format);
    let _ = writeln!(s, "  time format:         {}", r.time_format);
    let _ = writeln!(s, "  tokens counted by:   {}", r.counted_by);
    let _ = writeln!(s, "  lines read:          {}", r.lines_read);
    let _ = writeln!(s, "  requests read:       {}", r.requests_read);
    let _ = writeln!(s, "  converted:           {}", r.converted);
    let _ = writeln!(
        s,
        "  skipped:             {} ({} of the requests read, {} lines not read as a request)",
        r.skipped,
        r.skipped - r.skipped_lines,
        r.skipped_lines
    );
    for e in &r.skipped_examples {
        let _ = writeln!(s, "    {e}");
    }
    if let Some(why) = &r.stopped_by {
        let _ = writeln!(
            s,
            "  STOPPED EARLY:       {why}: the {} requests of the lines before it are converted and written; the rest of the log is not",
            r.converted
        );
    }
    if r.spans_passed_over > 0 {
        let _ = writeln!(
            s,
            "  spans passed over:   {} (no gen_ai.input.messages: not requests)",
            r.spans_passed_over
        );
    }
    let how = if r.sessions_named > 0 {
        format!("{} named by the log", r.sessions_named)
    } else {
        "inferred: a request that extends an earlier one's messages is its next turn".into()
    };
    let _ = writeln!(
        s,
        "  sessions:            {} ({} with more than one turn; {how})",
        r.sessions, r.multi_turn_sessions
    );
    if let Some(w) = r.forget_after_s {
        let _ = writeln!(
            s,
            "  --forget-after {w} s: a turn more than {w} s after its session's last one started a new session, a block unseen for {w}-{} s was numbered anew; at the end {} blocks and {} session entries held",
            2.0 * w, r.blocks_held, r.session_entries_held
        );
    }
    let _ = writeln!(s, "  time span:           {:.3} s", r.span_s);
    if r.out_of_order > 0 {
        let _ = writeln!(
            s,
            "  out of order:        {} requests start earlier than one before them in the log: written in start-time order (--reorder-window {} s; at most {} requests held)",
            r.out_of_order, r.reorder_window_s, r.reorder_held_max
        );
    }
    let _ = writeln!(
        s,
        "  tokens:              {} input, {} output{}",
        r.input_tokens,
        r.output_tokens,
        if r.output_from_text > 0 {
            format!(
                " ({} output lengths counted from the response text)",
                r.output_from_text
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "  hash ids:            {} distinct blocks of {} tokens (salted chained hash; no text, no hash written)",
        r.distinct_blocks, r.block_size
    );
    if r.block_size != DEFAULT_BLOCK_SIZE {
        let _ = writeln!(
            s,
            "  replay it with:      --block-size {} (the trace's rows do not carry it)",
            r.block_size
        );
    }
    s
}
