//! The SSE parser and the per-API response interpretation (chat, completions, TGI, Responses,
//! Messages), on arbitrary bytes split into arbitrary network chunks. Never a panic; events
//! must not depend on where chunks are cut; the stream reader `execute` uses
//! (`backend::read_stream`) either accepts a consistent finished answer or fails with a
//! protocol error.
#![no_main]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use request_sim::backend::sse::SseParser;
use request_sim::backend::{read_stream, ApiKind, ResponseState};
use request_sim::record::Status;

const KINDS: [ApiKind; 6] = [
    ApiKind::Chat,
    ApiKind::Completions,
    ApiKind::TgiGenerate,
    ApiKind::TgiGenerateStream,
    ApiKind::Responses,
    ApiKind::Messages,
];
const LIMIT: usize = 512;

/// Events of `input` fed in pieces cut at the given lengths (cycled), or the parser's error.
fn events(input: &[u8], cuts: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut p = SseParser::new(LIMIT);
    let mut out = Vec::new();
    let mut rest = input;
    let mut i = 0;
    while !rest.is_empty() {
        let n = match cuts.get(i % cuts.len().max(1)) {
            Some(&c) => usize::from(c).max(1).min(rest.len()),
            None => rest.len(),
        };
        i += 1;
        let (piece, tail) = rest.split_at(n);
        rest = tail;
        p.push(piece, |d| out.push(d.to_vec()))
            .map_err(|e| e.to_string())?;
    }
    p.finish(|d| out.push(d.to_vec()));
    Ok(out)
}

/// `FUZZ_API=responses|messages|chat|completions|tgi|tgi_stream`: fuzz that API only (the
/// first input byte then picks nothing), so a run's whole time goes to one parser.
fn forced_kind() -> Option<ApiKind> {
    static KIND: OnceLock<Option<ApiKind>> = OnceLock::new();
    *KIND.get_or_init(|| {
        let name = std::env::var("FUZZ_API").ok()?;
        let names = [
            "chat",
            "completions",
            "tgi",
            "tgi_stream",
            "responses",
            "messages",
        ];
        let i = names.iter().position(|n| *n == name)?;
        Some(KINDS[i])
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let kind = forced_kind().unwrap_or(KINDS[usize::from(data[0]) % KINDS.len()]);
    let ncuts = usize::from(data[1] % 8).min(data.len() - 2);
    let (cuts, input) = data[2..].split_at(ncuts);

    let whole = events(input, &[]);
    let split = events(input, cuts);
    if let (Ok(a), Ok(b)) = (&whole, &split) {
        assert_eq!(a, b, "events depend on chunk boundaries");
    }
    if let Ok(evs) = &whole {
        for e in evs {
            // push() rejects events over the limit; finish() may join the last (bounded) line.
            assert!(
                e.len() <= 2 * LIMIT + 1,
                "event over the limit: {}",
                e.len()
            );
        }
    }

    let t0 = Instant::now();
    if let Ok(evs) = split {
        let mut st = ResponseState::default();
        for (i, e) in evs.iter().enumerate() {
            let now = t0 + Duration::from_micros(i as u64);
            if st.on_event(kind, e, now).is_err() {
                break;
            }
        }
        assert!(st.content_chunks <= st.chunks);
        assert_eq!(st.itl_ms.len(), (st.chunks as usize).saturating_sub(1));
    }
    let mut st = ResponseState::default();
    let _ = st.on_body(kind, input, t0);

    // The whole stream as `execute` reads it, cut at the same places.
    let mut pieces = Vec::new();
    let mut rest = input;
    let mut i = 0;
    while !rest.is_empty() {
        let n = cuts
            .get(i % cuts.len().max(1))
            .map_or(rest.len(), |&c| usize::from(c).max(1).min(rest.len()));
        i += 1;
        let (piece, tail) = rest.split_at(n);
        pieces.push(piece);
        rest = tail;
    }
    match read_stream(kind, pieces, t0) {
        Ok(st) => {
            assert!(st.finished && st.chunks > 0);
            assert!(st.content_chunks <= st.chunks);
        }
        Err((status, e)) => assert!(status == Status::ProtocolError && !e.is_empty(), "{e}"),
    }
});
