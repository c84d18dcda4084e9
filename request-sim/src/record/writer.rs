//! The record writer: one thread that appends each record to the JSONL file as it arrives and
//! feeds it to the summary's accumulator ([`crate::stats::Accumulator`]); [`write_records`]
//! writes a whole file at once.
//!
//! Records are written line by line with a single `write` per batch of lines: the thread takes
//! every record waiting, writes them, then rests [`PACE`] before it looks again, so a crash
//! loses at most the records of the last [`PACE`], and a SIGKILL leaves at most a partial last
//! line.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};

use super::Record;

/// A finished request: its record and its inter-token latencies (always passed for the
/// summary; written into the record only with `--record-itl`).
pub struct Finished {
    pub record: Record,
    pub itl_ms: Vec<f64>,
    /// A sent request's prefix blocks, for the trace-ideal hit ratio over the requests the
    /// server processed ([`crate::stats::ideal`]); `None` for a request never sent.
    pub blocks: Option<SentBlocks>,
}

/// The prefix blocks of a sent request and its place in the send order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentBlocks {
    /// Send sequence number: 0, 1, 2, … over the run's sent requests, in send order.
    pub seq: u64,
    pub input_length: u32,
    /// The trace's hash ids (empty when it has none), as the trace keeps them: handed over
    /// without a copy, produced by the writer thread's ideal cache, off the send path.
    pub hash_ids: crate::trace::model::BlockIds,
}

/// Handle to the writer thread, which owns the state `S` its sink updates (the summary's
/// accumulator) and hands it back from [`RecordWriter::finish`].
pub struct RecordWriter<S = ()> {
    tx: Option<Sender<Finished>>,
    handle: Option<JoinHandle<io::Result<(WriterStats, S)>>>,
}

/// What the writer did.
#[derive(Debug, Clone, Default)]
pub struct WriterStats {
    pub written: usize,
    pub path: Option<PathBuf>,
}

const FLUSH_BYTES: usize = 256 << 10;

/// The writer's rest between batches. Woken per record, it cost every finished request a
/// futex wake on the I/O thread that sent it, two context switches and a `write` (12,000
/// of each in a 160 req/s agent replay, `scripts/bench-agents.sh`); resting between batches
/// bounds its wake-ups to ~50 a second whatever the rate. Records, progress and the live
/// metrics page trail by at most this; the end of a run waits at most this for the last ones.
pub const PACE: std::time::Duration = std::time::Duration::from_millis(20);

/// A change made to every record before it is written (see [`RecordWriter::spawn_annotated`]).
pub type Annotate = Box<dyn FnMut(&mut Record, Option<&SentBlocks>) + Send>;

impl<S: Send + 'static> RecordWriter<S> {
    /// Create (truncate) `path` and start the writer. `sink` sees every record (in arrival
    /// order) together with `state`, which [`RecordWriter::finish`] returns.
    pub fn spawn(
        path: Option<&Path>,
        record_itl: bool,
        state: S,
        sink: impl FnMut(&mut S, &Finished) + Send + 'static,
    ) -> io::Result<(Self, Sender<Finished>)> {
        Self::spawn_annotated(path, record_itl, None, state, sink)
    }

    /// [`RecordWriter::spawn`] with `annotate` run on every record, on the writer's thread
    /// (off the sending path), before it is written and seen by `sink`.
    pub fn spawn_annotated(
        path: Option<&Path>,
        record_itl: bool,
        mut annotate: Option<Annotate>,
        mut state: S,
        mut sink: impl FnMut(&mut S, &Finished) + Send + 'static,
    ) -> io::Result<(Self, Sender<Finished>)> {
        let file = match path {
            Some(p) => {
                if let Some(dir) = p.parent() {
                    if !dir.as_os_str().is_empty() {
                        std::fs::create_dir_all(dir)?;
                    }
                }
                Some(File::create(p)?)
            }
            None => None,
        };
        let (tx, rx) = crossbeam_channel::unbounded::<Finished>();
        let path = path.map(Path::to_path_buf);
        let handle = std::thread::Builder::new()
            .name("record-writer".into())
            .spawn(move || {
                let mut see = |f: &Finished| sink(&mut state, f);
                let stats = writer_loop(file, path, rx, record_itl, &mut annotate, &mut see)?;
                Ok((stats, state))
            })?;
        Ok((
            RecordWriter {
                tx: Some(tx.clone()),
                handle: Some(handle),
            },
            tx,
        ))
    }

    /// Wait until every sender is dropped and all records are written; returns what was
    /// written and the sink's state.
    pub fn finish(mut self) -> io::Result<(WriterStats, S)> {
        self.tx.take();
        match self.handle.take() {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("record writer thread panicked"))),
            None => Err(io::Error::other("record writer already finished")),
        }
    }
}

fn writer_loop(
    mut file: Option<File>,
    path: Option<PathBuf>,
    rx: Receiver<Finished>,
    record_itl: bool,
    annotate: &mut Option<Annotate>,
    sink: &mut dyn FnMut(&Finished),
) -> io::Result<WriterStats> {
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_BYTES * 2);
    let mut written = 0usize;
    let mut first_error: Option<io::Error> = None;
    let write_out =
        |buf: &mut Vec<u8>, file: &mut Option<File>, first_error: &mut Option<io::Error>| {
            if let Some(f) = file.as_mut() {
                if first_error.is_none() {
                    if let Err(e) = f.write_all(buf) {
                        *first_error = Some(e);
                    }
                }
            }
            buf.clear();
        };
    while let Ok(mut fin) = rx.recv() {
        loop {
            if let Some(a) = annotate.as_mut() {
                a(&mut fin.record, fin.blocks.as_ref());
            }
            sink(&fin);
            if file.is_some() {
                if record_itl {
                    fin.record.itl_ms = Some(std::mem::take(&mut fin.itl_ms));
                }
                write_line(&mut buf, &fin.record)?;
            }
            written += 1;
            if buf.len() >= FLUSH_BYTES {
                write_out(&mut buf, &mut file, &mut first_error);
            }
            match rx.try_recv() {
                Ok(next) => fin = next,
                Err(_) => break,
            }
        }
        write_out(&mut buf, &mut file, &mut first_error);
        // Records that come meanwhile wait in the channel: no sender wakes this thread
        // while it rests (a blocking `recv` would be woken by each).
        std::thread::sleep(PACE);
    }
    write_out(&mut buf, &mut file, &mut first_error);
    if let Some(f) = file.as_mut() {
        f.flush()?;
        f.sync_data().ok();
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(WriterStats { written, path }),
    }
}

/// One record as a JSONL line.
fn write_line(out: &mut impl Write, record: &Record) -> io::Result<()> {
    serde_json::to_writer(&mut *out, record).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

/// Write `records` as one records JSONL file (in the order given), e.g. merged shards.
pub fn write_records(path: &Path, records: &[Record]) -> crate::Result<()> {
    let write = || -> io::Result<()> {
        let mut w = io::BufWriter::new(File::create(path)?);
        for r in records {
            write_line(&mut w, r)?;
        }
        w.flush()
    };
    write().map_err(|e| crate::Error::write(path, e))
}
