//! Incremental Server-Sent Events parser.
//!
//! Bytes arrive in arbitrary pieces (an event, a UTF-8 character or a `\r\n` may be split across
//! network chunks). [`SseParser::push`] buffers them and yields the `data` payload of every
//! complete event. Only `data:` fields matter to LLM APIs; `event:`, `id:`, `retry:` and comment
//! lines are ignored. An event larger than the configured limit is an error, never unbounded
//! memory.

/// What went wrong while parsing a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("SSE event larger than {limit} bytes without an event boundary")]
    Oversized { limit: usize },
}

/// Incremental SSE parser; see the module docs.
#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Bytes of `buf` already scanned for a line end (avoids rescanning on every push).
    scanned: usize,
    event: Event,
    limit: usize,
}

/// The event being assembled: its `data` lines, joined by `\n`.
#[derive(Debug)]
struct Event {
    data: Vec<u8>,
    has_data: bool,
}

impl Event {
    /// Adds the value of one `data` line.
    #[inline]
    fn add_line(&mut self, value: &[u8]) {
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
    }

    /// Delivers the event when it has a `data` line, and starts the next one.
    #[inline]
    fn dispatch(&mut self, on_event: &mut impl FnMut(&[u8])) {
        if self.has_data {
            on_event(&self.data);
        }
        self.data.clear();
        self.has_data = false;
    }
}

/// The value of a `data:` line (one leading space dropped).
#[inline]
fn data_value(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"data:")?;
    Some(rest.strip_prefix(b" ").unwrap_or(rest))
}

impl SseParser {
    /// A parser that rejects events larger than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        SseParser {
            buf: Vec::with_capacity(1024),
            scanned: 0,
            event: Event {
                data: Vec::with_capacity(512),
                has_data: false,
            },
            limit,
        }
    }

    /// Feed bytes; call `on_event` with the data payload of every event completed by them.
    pub fn push(&mut self, bytes: &[u8], mut on_event: impl FnMut(&[u8])) -> Result<(), SseError> {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        loop {
            let Some(rel) = self.buf[self.scanned..]
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
            else {
                self.scanned = self.buf.len();
                break;
            };
            let end = self.scanned + rel;
            // A '\r' at the very end may be the first half of "\r\n": wait for more bytes.
            if self.buf[end] == b'\r' && end + 1 == self.buf.len() {
                self.scanned = end;
                break;
            }
            let next = if self.buf[end] == b'\r' && self.buf[end + 1] == b'\n' {
                end + 2
            } else {
                end + 1
            };
            let line_start = start;
            start = next;
            self.scanned = next;
            let line = &self.buf[line_start..end];
            if line.is_empty() {
                self.event.dispatch(&mut on_event);
                continue;
            }
            if let Some(value) = data_value(line) {
                self.event.add_line(value);
            } else if line == b"data" {
                self.event.add_line(b"");
            }
            // Checked for bare `data` lines too: each adds a newline to the event.
            if self.event.data.len() > self.limit {
                return Err(SseError::Oversized { limit: self.limit });
            }
            // other fields (event:, id:, retry:) and comments (":") are ignored
        }
        if start > 0 {
            self.buf.drain(..start);
            self.scanned -= start;
        }
        if self.buf.len() > self.limit {
            return Err(SseError::Oversized { limit: self.limit });
        }
        Ok(())
    }

    /// Call at end of stream: a final event not followed by a blank line is still delivered
    /// (some servers omit the last blank line).
    pub fn finish(&mut self, mut on_event: impl FnMut(&[u8])) {
        if !self.buf.is_empty() {
            let tail = std::mem::take(&mut self.buf);
            let line = tail.strip_suffix(b"\r").unwrap_or(&tail);
            if let Some(value) = data_value(line) {
                self.event.add_line(value);
            }
            self.scanned = 0;
        }
        self.event.dispatch(&mut on_event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::new(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, |d| out.push(String::from_utf8_lossy(d).into_owned()))
                .unwrap();
        }
        p.finish(|d| out.push(String::from_utf8_lossy(d).into_owned()));
        out
    }

    #[test]
    fn whole_events() {
        let s = b"data: {\"a\":1}\n\ndata: [DONE]\n\n";
        assert_eq!(collect(&[s]), vec!["{\"a\":1}", "[DONE]"]);
    }

    #[test]
    fn split_everywhere_gives_same_events() {
        let s: &[u8] = b"data: {\"x\":\"h\xc3\xa9\"}\r\n\r\n: comment\n\nevent: m\ndata: one\ndata: two\n\ndata:[DONE]\n\n";
        let whole = collect(&[s]);
        assert_eq!(whole, vec!["{\"x\":\"h\u{e9}\"}", "one\ntwo", "[DONE]"]);
        for cut in 0..s.len() {
            assert_eq!(collect(&[&s[..cut], &s[cut..]]), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = s.chunks(1).collect();
        assert_eq!(collect(&bytes), whole);
    }

    #[test]
    fn last_event_without_blank_line() {
        assert_eq!(collect(&[b"data: a\n\ndata: b"]), vec!["a", "b"]);
        assert_eq!(collect(&[b"data: a\n\ndata: b\n"]), vec!["a", "b"]);
    }

    #[test]
    fn oversized_event_is_an_error() {
        let mut p = SseParser::new(16);
        let r = p.push(b"data: 0123456789012345678901234567890", |_| {});
        assert_eq!(r, Err(SseError::Oversized { limit: 16 }));
        let mut p = SseParser::new(16);
        let r = p.push(&[b'x'; 40], |_| {});
        assert!(r.is_err());
        // Bare `data` lines add a newline each: they count towards the limit too.
        let mut p = SseParser::new(16);
        let r = p.push(&b"data\n".repeat(40), |_| {});
        assert_eq!(r, Err(SseError::Oversized { limit: 16 }));
    }
}
