//! Streaming a trace for replay: the [pipeline](super::pipeline) in its `Stream` mode, rows
//! read in file order and released in time order through a bounded reorder window, so a trace
//! of any length replays in memory independent of it (docs/scale-out.md, "Streaming traces").
//!
//! - The window holds rows until the newest row read is more than `ms` later than theirs, or
//!   until it holds more than `rows` rows; then the earliest goes out. Rows out of time order
//!   within it are sorted (stably: equal times keep file order, as the whole-trace sort does)
//!   and counted (`reordered`). A row earlier than one already released is a `file:line` error
//!   that says by how much and which flags cover it.
//! - Every rule of `docs/traces.md` applies, by the same pipeline as [`super::load`]; reading
//!   stops where the slice ends.
//! - Bailian traces link turns through `parent_chat_id` over the whole file (a map of every
//!   chat id): they are loaded whole ([`TraceStream::into_whole`]).
//!
//! - A row error (a bad row, a read error, a row beyond the window) ends the stream there. The
//!   valid rows read before it and still held in the window are not lost: [`TraceStream::cut`]
//!   gives them, so a replay counts them as never sent.
//!
//! [`Planned`] is one request as the replay pipeline takes it; a whole [`Trace`] in memory is
//! turned into the same items by [`planned`].

use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::load::collect;
use super::stages::{Mode, Out, Pipeline, Planned, ReorderWindow};
use crate::trace::error::{RowError, TraceError};
use crate::trace::formats::open::{open_reader, open_rows, Opened};
use crate::trace::formats::rows::RowReader;
use crate::trace::model::{Trace, TraceFormat, TraceStats};
use crate::trace::options::LoadOptions;

/// The requests of a whole trace in memory, in replay order, as the items a stream gives.
pub fn planned(trace: Arc<Trace>) -> impl Iterator<Item = Planned> + Send {
    (0..trace.requests.len()).map(move |i| Planned {
        req: trace.requests[i].clone(),
        turn: trace.sessions.get(i).cloned(),
        chat: trace.chats.get(i).cloned().flatten(),
        ideal_hit: None,
    })
}

/// A trace read row by row and released in time order; an iterator of [`Planned`] requests.
pub struct TraceStream {
    pipeline: Pipeline<Box<dyn BufRead + Send>>,
    opts: LoadOptions,
    done: bool,
    shared: Arc<Mutex<TraceStats>>,
}

impl TraceStream {
    /// Opens a trace file (plain, gzip, zstd or bzip2, by its magic bytes; Parquet; a ServeGen
    /// directory; `-` is standard input) and reads up to its first row, so the format is known.
    pub fn open(
        path: &Path,
        opts: &LoadOptions,
        window: ReorderWindow,
    ) -> Result<TraceStream, TraceError> {
        TraceStream::check(&path.display().to_string(), opts, window)?;
        TraceStream::over(open_rows(path, opts)?, opts, window)
    }

    /// A stream over any reader; `name` is used in error messages.
    pub fn from_reader<R: Read + Send + 'static>(
        name: &str,
        reader: R,
        opts: &LoadOptions,
        window: ReorderWindow,
    ) -> Result<TraceStream, TraceError> {
        TraceStream::check(name, opts, window)?;
        match open_reader(name, reader, opts)? {
            Opened::Rows(rows) => TraceStream::over(*rows, opts, window),
            Opened::Corpus(_, format) => Err(TraceError::Row {
                path: name.to_owned(),
                line: 1,
                error: RowError::Agentic(format.name()),
            }),
        }
    }

    /// The stream of rows already opened (the front door's [`Opened::Rows`]).
    pub(crate) fn from_rows(
        rows: RowReader<Box<dyn BufRead + Send>>,
        opts: &LoadOptions,
        window: ReorderWindow,
    ) -> Result<TraceStream, TraceError> {
        TraceStream::check(rows.name(), opts, window)?;
        TraceStream::over(rows, opts, window)
    }

    /// The options and the reorder window, checked before anything is read.
    fn check(name: &str, opts: &LoadOptions, window: ReorderWindow) -> Result<(), TraceError> {
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
        Ok(())
    }

    /// The stream of `rows` through the pipeline.
    fn over(
        rows: RowReader<Box<dyn BufRead + Send>>,
        opts: &LoadOptions,
        window: ReorderWindow,
    ) -> Result<TraceStream, TraceError> {
        let mut pipeline = Pipeline::new(rows, opts, window, Mode::Stream);
        pipeline.start(opts.block_size)?;
        Ok(TraceStream {
            pipeline,
            opts: opts.clone(),
            done: false,
            shared: Arc::new(Mutex::new(TraceStats::default())),
        })
    }

    pub fn format(&self) -> TraceFormat {
        self.pipeline.format()
    }

    /// Tokens per hash id.
    pub fn block_size(&self) -> usize {
        self.pipeline.block_size()
    }

    /// The name errors are reported under (the path, `<stdin>`).
    pub fn name(&self) -> &str {
        self.pipeline.rows.name()
    }

    /// True when the trace must be loaded whole (Bailian parent links, or a reshaping that
    /// moves rows by more than a reorder window: `--retime`, `--max-idle-gap`, the scales).
    pub fn needs_whole(&self) -> bool {
        self.whole_reason().is_some()
    }

    /// Why the trace must be loaded whole, if it must: its format links rows anywhere in the
    /// file, or a reshaping moves rows by more than a reorder window.
    pub fn whole_reason(&self) -> Option<String> {
        if self.format().needs_whole_file() {
            Some(format!("{} parent chains", self.format().name()))
        } else if self.opts.reshape.needs_whole() {
            Some("--retime, --max-idle-gap, --prefix-scale or --prompt-scale".into())
        } else {
            None
        }
    }

    /// The whole trace, from the rows not yet read (call it before taking any request).
    pub fn into_whole(mut self) -> Result<Trace, TraceError> {
        let empty: Box<dyn BufRead + Send> = Box::new(std::io::empty());
        let rows = RowReader::new("", empty, None, &self.opts);
        let idle = Pipeline::new(rows, &self.opts, ReorderWindow::default(), Mode::Stream);
        let mut pipeline = std::mem::replace(&mut self.pipeline, idle);
        pipeline.make_whole();
        collect(pipeline)
    }

    /// Ends the stream where it is (after an error, or when its reader gives up on it): the
    /// requests of the rows read but not yet released, those held in the reorder window, in
    /// time order with their replay indexes, as the slice would have kept them. They are valid
    /// requests of the slice that will never be sent. Empty at the end of the file or of the
    /// slice (nothing is held then).
    pub fn cut(&mut self) -> Vec<Planned> {
        self.done = true;
        let mut held = Vec::new();
        while let Some(r) = self.pipeline.next_held() {
            if let Out::Kept(p) = r.out {
                held.push(p);
            }
        }
        self.publish();
        held
    }

    /// Where the counts of the rows read go when the stream ends (or is dropped): the
    /// consistency counts of `docs/traces.md`, `reordered`, and `partial` when reading stopped
    /// before the end of the file.
    pub fn stats_handle(&self) -> Arc<Mutex<TraceStats>> {
        self.shared.clone()
    }

    fn publish(&mut self) {
        *self.shared.lock().unwrap_or_else(|p| p.into_inner()) = self.pipeline.stats();
    }

    fn advance(&mut self) -> Result<Option<Planned>, TraceError> {
        if self.needs_whole() {
            return Err(TraceError::Options {
                path: self.name().to_owned(),
                what: format!(
                    "{} needs the whole file: load it whole",
                    self.whole_reason().unwrap_or_default()
                ),
            });
        }
        while let Some(r) = self.pipeline.next_released()? {
            if let Out::Kept(p) = r.out {
                return Ok(Some(p));
            }
        }
        if self.pipeline.stopped() || self.pipeline.kept() > 0 {
            Ok(None)
        } else {
            Err(self.pipeline.nothing_kept())
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
        if self.pipeline.stopped() || !matches!(r, Ok(Some(_))) {
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
    fn the_rows_held_when_a_bad_row_ends_the_stream_are_cut_not_lost() {
        let mut text = String::new();
        for t in 0..10 {
            text.push_str(&row(f64::from(t) * 100.0, Some("s")));
        }
        text.push_str("{\"timestamp\": \n");
        let window = ReorderWindow {
            ms: 350.0,
            rows: 100,
        };
        let mut s = stream(&text, &LoadOptions::default(), window);
        let sent: Vec<Planned> = s.by_ref().map_while(Result::ok).collect();
        // Rows more than 350 ms before the newest (900 ms) had left the window.
        assert_eq!(sent.len(), 6);
        assert!(s.next().is_none(), "the stream ends at its error");
        let cut = s.cut();
        let idx: Vec<usize> = cut.iter().map(|p| p.req.index).collect();
        assert_eq!(idx, vec![6, 7, 8, 9]);
        assert!(cut.iter().all(|p| p.turn.is_some()));
        assert!(s.cut().is_empty(), "taken once");
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
