//! Line reading with a length cap, and compression (gzip, zstd, bzip2) told by magic bytes.

use std::io::{self, BufRead, BufReader, Cursor, Read};

use flate2::read::MultiGzDecoder;

use crate::trace::error::TraceError;

/// Result of reading one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// End of input; nothing was read.
    Eof,
    /// A line (without its `\n` / `\r\n`) is in the buffer.
    Line,
    /// The line was longer than the cap; it was consumed and discarded.
    TooLong,
}

/// The most bytes of one over-long line read to find its end (a multiple of the cap, at least
/// 1 GiB): past it the input is no line-based text (`/dev/zero`, a binary stream) and reading
/// stops with an error instead of spinning through it forever.
const MAX_DISCARD_CAPS: usize = 16;

/// Reads one line into `buf` (cleared first), never buffering more than `cap` bytes: a longer
/// line is read to its end and discarded, so the caller can report it and go on. A line with
/// no end in sight (more than `MAX_DISCARD_CAPS` caps, at least 1 GiB) is an
/// `InvalidData` error.
pub(crate) fn read_line_capped<R: BufRead + ?Sized>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<LineRead> {
    buf.clear();
    let mut any = false;
    let mut too_long = false;
    let mut discarded = 0usize;
    let discard_limit = cap.saturating_mul(MAX_DISCARD_CAPS).max(1 << 30);
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => LineRead::Eof,
                (true, true) => LineRead::TooLong,
                (true, false) => {
                    strip_cr(buf);
                    LineRead::Line
                }
            });
        }
        any = true;
        let newline = available.iter().position(|&b| b == b'\n');
        let chunk = match newline {
            Some(i) => &available[..i],
            None => available,
        };
        if !too_long {
            if buf.len() + chunk.len() > cap {
                too_long = true;
                buf.clear();
                buf.shrink_to(64 * 1024);
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let used = chunk.len() + usize::from(newline.is_some());
        reader.consume(used);
        if too_long {
            discarded = discarded.saturating_add(used);
            if discarded > discard_limit && newline.is_none() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("no line end in {discarded} bytes: this is not a line-based trace"),
                ));
            }
        }
        if newline.is_some() {
            if too_long {
                return Ok(LineRead::TooLong);
            }
            strip_cr(buf);
            return Ok(LineRead::Line);
        }
    }
}

fn strip_cr(buf: &mut Vec<u8>) {
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
}

/// Reads up to 4 bytes (the longest magic number of [`Compression`]) from `reader`, retrying
/// short reads.
pub(crate) fn peek_magic<R: Read>(reader: &mut R) -> io::Result<Vec<u8>> {
    let mut magic = [0u8; 4];
    let mut n = 0;
    while n < magic.len() {
        match reader.read(&mut magic[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(magic[..n].to_vec())
}

/// How an input is compressed, told by its first bytes (never by the file name, so standard
/// input and a mis-named file work too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    /// `1f 8b`.
    Gzip,
    /// `28 b5 2f fd` (a zstd frame).
    Zstd,
    /// `BZh` and a block size digit `1`..`9`.
    Bzip2,
}

impl Compression {
    pub(crate) fn of(magic: &[u8]) -> Compression {
        match magic {
            [0x1f, 0x8b, ..] => Compression::Gzip,
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
            [b'B', b'Z', b'h', b'1'..=b'9', ..] => Compression::Bzip2,
            _ => Compression::None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Compression::None => "plain",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Bzip2 => "bzip2",
        }
    }
}

/// Read buffer of a trace file.
const READ_BUFFER: usize = 256 << 10;

/// `reader` buffered, decompressed when it starts with the magic bytes of gzip, zstd or bzip2;
/// the compression's name when it does.
pub(crate) fn buffered<'a, R: Read + Send + 'a>(
    name: &str,
    mut reader: R,
) -> Result<(Box<dyn BufRead + Send + 'a>, Option<&'static str>), TraceError> {
    let read_error = |error| TraceError::Read {
        path: name.to_owned(),
        line: 0,
        compression: None,
        error,
    };
    let magic = peek_magic(&mut reader).map_err(read_error)?;
    let compression = Compression::of(&magic);
    let whole = Cursor::new(magic).chain(reader);
    let decoded: Box<dyn Read + Send + 'a> = match compression {
        Compression::None => {
            return Ok((Box::new(BufReader::with_capacity(READ_BUFFER, whole)), None))
        }
        Compression::Gzip => Box::new(MultiGzDecoder::new(whole)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(whole).map_err(read_error)?),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(whole)),
    };
    Ok((
        Box::new(BufReader::with_capacity(READ_BUFFER, decoded)),
        Some(compression.name()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], cap: usize) -> Vec<(LineRead, String)> {
        // A tiny buffer so lines span many fill_buf calls.
        let mut r = io::BufReader::with_capacity(3, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let k = read_line_capped(&mut r, &mut buf, cap).unwrap();
            if k == LineRead::Eof {
                return out;
            }
            out.push((k, String::from_utf8_lossy(&buf).into_owned()));
        }
    }

    #[test]
    fn splits_lines_and_caps_length() {
        let got = all(b"ab\r\n\nlong line here\nxyz", 5);
        assert_eq!(
            got,
            vec![
                (LineRead::Line, "ab".into()),
                (LineRead::Line, "".into()),
                (LineRead::TooLong, "".into()),
                (LineRead::Line, "xyz".into()),
            ]
        );
        assert_eq!(all(b"", 5), vec![]);
        assert_eq!(all(b"123456", 5), vec![(LineRead::TooLong, "".into())]);
        assert_eq!(all(b"12345\n", 5), vec![(LineRead::Line, "12345".into())]);
    }
}
