//! A streamed answer read as its bytes arrive ([`StreamReader`]): SSE events into the
//! [`ResponseState`], then the end-of-stream checks; [`read_stream`] reads a whole one without
//! the network.

use std::time::Instant;

use super::api::ApiKind;
use super::sse;
use super::state::{ProtocolError, ResponseState};
use super::status::Status;

/// Largest SSE event / error body we keep.
pub(super) const MAX_EVENT_BYTES: usize = 8 << 20;

/// Reads a streamed answer as its bytes arrive: the SSE events into the [`ResponseState`], then
/// the end-of-stream checks (the API's final event seen, some token carried). Every way it
/// fails is a [`Status::ProtocolError`].
pub struct StreamReader {
    kind: ApiKind,
    parser: sse::SseParser,
    proto: Result<(), ProtocolError>,
}

impl StreamReader {
    pub fn new(kind: ApiKind) -> StreamReader {
        StreamReader {
            kind,
            parser: sse::SseParser::new(MAX_EVENT_BYTES),
            proto: Ok(()),
        }
    }

    /// The bytes of one network chunk, received at `now`.
    pub fn push(
        &mut self,
        chunk: &[u8],
        state: &mut ResponseState,
        now: Instant,
    ) -> Result<(), (Status, String)> {
        let (kind, proto) = (self.kind, &mut self.proto);
        self.parser
            .push(chunk, |data| {
                if proto.is_ok() {
                    *proto = state.on_event(kind, data, now);
                }
            })
            .map_err(|e| (Status::ProtocolError, e.to_string()))?;
        self.proto.clone().map_err(|e| (Status::ProtocolError, e.0))
    }

    /// The end of the stream, at `now`.
    pub fn finish(
        mut self,
        state: &mut ResponseState,
        now: Instant,
    ) -> Result<(), (Status, String)> {
        let (kind, proto) = (self.kind, &mut self.proto);
        self.parser.finish(|data| {
            if proto.is_ok() {
                *proto = state.on_event(kind, data, now);
            }
        });
        self.proto.map_err(|e| (Status::ProtocolError, e.0))?;
        if !state.finished {
            return Err((Status::ProtocolError, self.kind.stream_end().to_string()));
        }
        if state.chunks == 0 {
            return Err((
                Status::ProtocolError,
                "stream carried no tokens".to_string(),
            ));
        }
        Ok(())
    }
}

/// A whole streamed answer read from `chunks` (as they came off the network, all at `now`)
/// the way [`execute`](super::execute) reads one, without the network: for tests and fuzzing.
pub fn read_stream<'a>(
    kind: ApiKind,
    chunks: impl IntoIterator<Item = &'a [u8]>,
    now: Instant,
) -> Result<ResponseState, (Status, String)> {
    let mut state = ResponseState::default();
    let mut reader = StreamReader::new(kind);
    for c in chunks {
        reader.push(c, &mut state, now)?;
    }
    reader.finish(&mut state, now)?;
    Ok(state)
}
