//! Reading a records JSONL file: [`RecordReader`] yields one [`Record`] per line as it reads
//! (blank lines skipped, a line cut off by a killed writer noted, any other bad line an error
//! naming `file:line`); [`read_records`] collects them.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Record;

/// What a [`RecordReader`] found besides the records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadStats {
    /// Lines read (including blank ones).
    pub lines: usize,
    pub records: usize,
    /// 1-based line number of an incomplete last line that was ignored (the writing process
    /// was killed mid-line).
    pub partial_last_line: Option<usize>,
    /// Records that carry per-chunk ITL values.
    pub with_itl: usize,
}

/// The records of a JSONL file, one per call of [`Iterator::next`]. Blank lines are skipped;
/// an unparsable last line without a trailing newline is taken as cut off by a killed process
/// and reported in [`ReadStats::partial_last_line`]; any other bad line is an error naming
/// `file:line`, after which the reader yields nothing more.
pub struct RecordReader<R> {
    reader: BufReader<R>,
    name: String,
    stats: ReadStats,
    buf: Vec<u8>,
    done: bool,
}

impl RecordReader<File> {
    /// Open `path` for reading.
    pub fn open(path: &Path) -> crate::Result<Self> {
        let file = File::open(path)
            .map_err(|e| crate::Error::io(format!("cannot open {}", path.display()), e))?;
        Ok(RecordReader::new(
            BufReader::new(file),
            &path.display().to_string(),
        ))
    }
}

impl<R: Read> RecordReader<R> {
    /// Read records from `reader`; `name` is used in error messages.
    pub fn new(reader: BufReader<R>, name: &str) -> Self {
        RecordReader {
            reader,
            name: name.to_string(),
            stats: ReadStats::default(),
            buf: Vec::new(),
            done: false,
        }
    }

    /// What was read so far (all of it once the iterator has ended).
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// The next record, `Ok(None)` at the end.
    fn read_next(&mut self) -> crate::Result<Option<Record>> {
        loop {
            // Bytes, not `read_line`: a line cut by a kill may end inside a UTF-8 character,
            // which must count as a partial last line, not as a read error.
            self.buf.clear();
            let n = self.reader.read_until(b'\n', &mut self.buf).map_err(|e| {
                crate::Error::io(
                    format!("{}:{}: read error", self.name, self.stats.lines + 1),
                    e,
                )
            })?;
            if n == 0 {
                return Ok(None);
            }
            self.stats.lines += 1;
            let complete = self.buf.ends_with(b"\n");
            let line = self.buf.trim_ascii();
            if line.is_empty() {
                continue;
            }
            return match serde_json::from_slice::<Record>(line) {
                Ok(r) => {
                    if r.itl_ms.is_some() {
                        self.stats.with_itl += 1;
                    }
                    self.stats.records += 1;
                    Ok(Some(r))
                }
                Err(_) if !complete => {
                    // Last line (no newline follows): cut off when the writer was killed.
                    self.stats.partial_last_line = Some(self.stats.lines);
                    Ok(None)
                }
                Err(e) => Err(crate::Error::report(format!(
                    "{}:{}: invalid record: {e}",
                    self.name, self.stats.lines
                ))),
            };
        }
    }
}

impl<R: Read> Iterator for RecordReader<R> {
    type Item = crate::Result<Record>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.read_next().transpose();
        if !matches!(next, Some(Ok(_))) {
            self.done = true;
        }
        next
    }
}

/// Every record of the JSONL file at `path` (see [`RecordReader`] for what is skipped and
/// what is an error), with what was read.
pub fn read_records(path: &Path) -> crate::Result<(Vec<Record>, ReadStats)> {
    collect(RecordReader::open(path)?)
}

/// [`read_records`] over any reader; `name` is used in error messages.
pub fn read_records_from<R: Read>(
    reader: BufReader<R>,
    name: &str,
) -> crate::Result<(Vec<Record>, ReadStats)> {
    collect(RecordReader::new(reader, name))
}

fn collect<R: Read>(mut reader: RecordReader<R>) -> crate::Result<(Vec<Record>, ReadStats)> {
    let records = reader.by_ref().collect::<crate::Result<Vec<Record>>>()?;
    Ok((records, reader.stats().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Status;

    fn line(index: usize) -> String {
        serde_json::to_string(&Record::new(index, index + 1, Status::Ok)).unwrap()
    }

    #[test]
    fn blank_lines_skipped_and_a_cut_last_line_noted() {
        let text = format!("{}\n\n{}\n{}", line(0), line(1), &line(2)[..20]);
        let (recs, st) = read_records_from(BufReader::new(text.as_bytes()), "t.jsonl").unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(st.lines, 4);
        assert_eq!(st.records, 2);
        assert_eq!(st.partial_last_line, Some(4));
    }

    #[test]
    fn a_bad_complete_line_names_file_and_line() {
        let text = format!("{}\nnot json\n{}\n", line(0), line(1));
        let mut reader = RecordReader::new(BufReader::new(text.as_bytes()), "t.jsonl");
        assert!(matches!(reader.next(), Some(Ok(_))));
        let e = reader.next().unwrap().unwrap_err().to_string();
        assert!(e.contains("t.jsonl:2: invalid record"), "{e}");
        assert!(reader.next().is_none());
    }
}
