//! Reading a trace row by row in file order: capped lines, the format detected (or forced) from
//! the first data line, every row parsed and validated. The whole-trace loader ([`super::load`])
//! and the streaming reader ([`super::stream`]) both read through [`RowReader`].

use std::io::BufRead;

use super::lines::{read_line_capped, LineRead};
use super::registry::{self, detect_format};
use super::unit::{CsvRows, Reader, RowIter};
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::{TraceFormat, TraceStats};
use crate::trace::options::{LoadOptions, DEFAULT_MAX_LINE_BYTES};
use crate::trace::row::RawRow;

/// How many invalid-row messages [`TraceStats::invalid_examples`] keeps.
const MAX_INVALID_EXAMPLES: usize = 5;

/// The rows of one trace input, parsed one at a time.
pub(crate) struct RowReader<B> {
    name: String,
    input: B,
    compression: Option<&'static str>,
    cap: usize,
    skip_invalid: bool,
    drop_failed: bool,
    buf: Vec<u8>,
    /// Lines read so far (the 1-based number of the last one).
    line: usize,
    saw_data: bool,
    format: Option<TraceFormat>,
    /// The header of a CSV format, once read.
    csv: Option<CsvRows>,
    /// `rows`, `skipped_invalid`, `invalid_examples`, `failed_requests` and `dropped_failed`
    /// (the file-level counts).
    stats: TraceStats,
    /// Rows generated rather than read (a ServeGen workload): their "line" is their number.
    generated: Option<RowIter>,
    /// The hash block size the input names (a Parquet file's `block_size`), if any.
    block_hint: Option<usize>,
}

impl RowReader<Box<dyn BufRead + Send>> {
    /// Rows made by a format's reader from a whole input (a generated workload, a columnar
    /// file) rather than read line by line; their "line" is their number.
    pub(crate) fn generated(
        name: &str,
        format: TraceFormat,
        rows: RowIter,
        opts: &LoadOptions,
    ) -> Self {
        let empty: Box<dyn BufRead + Send> = Box::new(std::io::empty());
        let mut reader = RowReader::new(name, empty, None, opts);
        reader.format = Some(format);
        reader.generated = Some(rows);
        reader
    }
}

impl<B: BufRead> RowReader<B> {
    pub(crate) fn new(
        name: &str,
        input: B,
        compression: Option<&'static str>,
        opts: &LoadOptions,
    ) -> RowReader<B> {
        RowReader {
            name: name.to_owned(),
            input,
            compression,
            cap: opts.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES),
            skip_invalid: opts.skip_invalid,
            drop_failed: opts.drop_failed,
            buf: Vec::with_capacity(8 << 10),
            line: 0,
            saw_data: false,
            format: opts.format,
            csv: None,
            stats: TraceStats::default(),
            generated: None,
            block_hint: None,
        }
    }

    /// The hash block size the input names, used when `--block-size` is not given.
    pub(crate) fn block_hint(&self) -> Option<usize> {
        self.block_hint
    }

    pub(crate) fn set_block_hint(&mut self, block: Option<usize>) {
        self.block_hint = block;
    }

    /// The name errors are reported under.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The format, once forced or detected.
    pub(crate) fn format(&self) -> Option<TraceFormat> {
        self.format
    }

    /// The file-level counts so far (`rows`, `skipped_invalid`, `invalid_examples`).
    pub(crate) fn stats(&self) -> &TraceStats {
        &self.stats
    }

    /// An error on line `line`.
    pub(crate) fn row_error(&self, line: usize, error: RowError) -> TraceError {
        TraceError::Row {
            path: self.name.clone(),
            line,
            error,
        }
    }

    /// The next valid row and its 1-based line, `None` at the end of the input.
    pub(crate) fn next_row(&mut self) -> Result<Option<(usize, RawRow)>, TraceError> {
        if let Some(rows) = &mut self.generated {
            let Some(row) = rows.next().transpose()? else {
                return Ok(None);
            };
            self.saw_data = true;
            self.line += 1;
            self.stats.rows += 1;
            return Ok(Some((self.line, row)));
        }
        loop {
            let kind =
                read_line_capped(&mut self.input, &mut self.buf, self.cap).map_err(|error| {
                    TraceError::Read {
                        path: self.name.clone(),
                        line: self.line,
                        compression: self.compression,
                        error,
                    }
                })?;
            let first = self.line == 0;
            self.line += 1;
            let line = self.line;
            let text = match kind {
                LineRead::Eof => {
                    self.line -= 1;
                    return Ok(None);
                }
                LineRead::TooLong => Err(RowError::TooLong { limit: self.cap }),
                LineRead::Line => decode(&self.buf, first),
            };
            if matches!(text, Ok(t) if t.trim().is_empty()) {
                continue;
            }
            self.saw_data = true;
            // The text borrows the buffer; parse it before the next read.
            let parsed = match text {
                Ok(t) => parse(t, &mut self.format, &mut self.csv),
                Err(e) => Err(Bad {
                    error: e,
                    fatal: false,
                }),
            };
            match parsed {
                Ok(Some(raw)) => {
                    self.stats.rows += 1;
                    let failure = self.format.is_some_and(|f| f.info().zero_output_is_failure);
                    if failure && raw.output_length == 0 {
                        self.stats.failed_requests += 1;
                        if self.drop_failed {
                            self.stats.dropped_failed += 1;
                            continue;
                        }
                    }
                    return Ok(Some((line, raw)));
                }
                Ok(None) => {}
                Err(Bad { error, fatal: true }) => return Err(self.row_error(line, error)),
                Err(Bad { error, .. }) => self.invalid(line, error)?,
            }
        }
    }

    /// A malformed data row: fatal, or counted with `skip_invalid`.
    fn invalid(&mut self, line: usize, error: RowError) -> Result<(), TraceError> {
        let err = self.row_error(line, error);
        if !self.skip_invalid {
            return Err(err);
        }
        self.stats.rows += 1;
        self.stats.skipped_invalid += 1;
        if self.stats.invalid_examples.len() < MAX_INVALID_EXAMPLES {
            self.stats.invalid_examples.push(err.to_string());
        }
        Ok(())
    }

    /// Why the input gave no request: empty, only invalid rows, a header without rows.
    pub(crate) fn no_rows_error(&self) -> TraceError {
        if !self.saw_data {
            return TraceError::Empty {
                path: self.name.clone(),
            };
        }
        let stats = &self.stats;
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
        } else if self.stats.dropped_failed > 0 {
            format!(
                "all {} rows are failed requests, dropped by --drop-failed",
                self.stats.dropped_failed
            )
        } else if self.csv.is_some() {
            "the CSV file has a header but no data rows".to_owned()
        } else {
            "no data rows".to_owned()
        };
        TraceError::NoRequests {
            path: self.name.clone(),
            reason,
        }
    }
}

/// Why a line gave no row.
struct Bad {
    error: RowError,
    /// A bad CSV header: fatal even with skip_invalid (no row could be read correctly).
    fatal: bool,
}

/// One non-blank line: detect the format on the first one, then parse it in that format.
/// `Ok(None)` for the CSV header line.
fn parse(
    text: &str,
    format: &mut Option<TraceFormat>,
    csv: &mut Option<CsvRows>,
) -> Result<Option<RawRow>, Bad> {
    let invalid = |error| Bad {
        error,
        fatal: false,
    };
    let f = match *format {
        Some(f) => f,
        None => {
            let f = detect_format(text).map_err(invalid)?;
            *format = Some(f);
            f
        }
    };
    let fatal = |error| Bad { error, fatal: true };
    let parsed = match &registry::format_of(f).read {
        Reader::Lines(parse_line) => parse_line(text),
        Reader::Csv(header) => match csv {
            Some(rows) => rows(text),
            None => {
                // The first data line of a CSV file is its header.
                *csv = Some(header(text).map_err(fatal)?);
                return Ok(None);
            }
        },
        Reader::Corpus { .. } => return Err(fatal(RowError::Agentic(f.name()))),
        Reader::File(_) | Reader::Dir(_) => {
            return Err(fatal(RowError::Undetectable(format!(
                "a {} trace is not read line by line: {}",
                f.name(),
                f.info().about
            ))))
        }
    };
    parsed.map(Some).map_err(invalid)
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
