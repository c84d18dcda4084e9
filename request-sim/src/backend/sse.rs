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

/// Reads the complete lines of `src` (the first line starts at 0; its end is searched from
/// `from`, the bytes before having been scanned already) into `event`, calling `on_event` for
/// every event they complete. Returns where the unfinished tail of `src` starts and how far it
/// was scanned (a `\r` at the very end may be the first half of `\r\n`: not scanned yet).
///
/// The first `data` line of an event stays a range of `src` (`single`) until a second one
/// comes or `src` ends: an event whose one line lies whole in `src` is never copied.
fn feed(
    event: &mut Event,
    src: &[u8],
    mut from: usize,
    limit: usize,
    on_event: &mut impl FnMut(&[u8]),
) -> Result<(usize, usize), SseError> {
    let mut start = 0;
    let mut single: Option<(usize, usize)> = None;
    let tail = loop {
        let Some(rel) = memchr::memchr2(b'\n', b'\r', &src[from..]) else {
            break (start, src.len());
        };
        let end = from + rel;
        if src[end] == b'\r' && end + 1 == src.len() {
            break (start, end);
        }
        let next = if src[end] == b'\r' && src[end + 1] == b'\n' {
            end + 2
        } else {
            end + 1
        };
        let line = &src[start..end];
        let line_start = start;
        start = next;
        from = next;
        if line.is_empty() {
            match single.take() {
                Some((a, b)) => on_event(&src[a..b]),
                None => event.dispatch(on_event),
            }
            continue;
        }
        let value = match data_value(line) {
            Some(v) => v,
            // A bare `data` line: an empty value.
            None if line == b"data" => &line[4..],
            // other fields (event:, id:, retry:) and comments (":") are ignored
            None => continue,
        };
        if !event.has_data && single.is_none() {
            // `value` ends the line: its range in `src`.
            single = Some((line_start + line.len() - value.len(), end));
            if value.len() > limit {
                return Err(SseError::Oversized { limit });
            }
            continue;
        }
        if let Some((a, b)) = single.take() {
            event.add_line(&src[a..b]);
        }
        event.add_line(value);
        // Checked for bare `data` lines too: each adds a newline to the event.
        if event.data.len() > limit {
            return Err(SseError::Oversized { limit });
        }
    };
    if let Some((a, b)) = single {
        event.add_line(&src[a..b]);
    }
    Ok(tail)
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
    ///
    /// With no partial line pending (the usual case: a server writes whole events), the lines
    /// are read from `bytes` itself, and an event of one `data` line is handed over as a slice
    /// of `bytes`: no copy. Only an unfinished tail is kept for the next push.
    pub fn push(&mut self, bytes: &[u8], mut on_event: impl FnMut(&[u8])) -> Result<(), SseError> {
        if self.buf.is_empty() {
            let (done, scanned) = feed(&mut self.event, bytes, 0, self.limit, &mut on_event)?;
            self.buf.extend_from_slice(&bytes[done..]);
            self.scanned = scanned - done;
        } else {
            self.buf.extend_from_slice(bytes);
            let (done, scanned) = feed(
                &mut self.event,
                &self.buf,
                self.scanned,
                self.limit,
                &mut on_event,
            )?;
            self.buf.drain(..done);
            self.scanned = scanned - done;
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
    fn three_pieces_give_the_same_events_as_one() {
        // Every pair of cuts: whole events read in place, tails buffered, events whose first
        // data line came in an earlier push, bare `data` lines, `\r\n` split in two.
        let s: &[u8] = b"data: a\r\n\r\ndata\ndata: b\n\nid: 1\ndata: {\"c\":1}\r\n\r\ndata: d\n\n";
        let whole = collect(&[s]);
        assert_eq!(whole, vec!["a", "\nb", "{\"c\":1}", "d"]);
        for i in 0..s.len() {
            for j in i..s.len() {
                assert_eq!(
                    collect(&[&s[..i], &s[i..j], &s[j..]]),
                    whole,
                    "cuts at {i}, {j}"
                );
            }
        }
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
