//! Seeded random garbage through the stream readers of every API (`backend::read_stream`,
//! the code `execute` reads a streamed answer with): valid Responses, Messages and chat
//! streams cut short, with bytes flipped, inserted and deleted, events repeated and swapped,
//! numbers and types replaced, or random bytes, split into random network chunks. Never a
//! panic; every failure a protocol error; a stream cut before its final event or made of
//! random bytes always fails; a stream that passes has consistent timings.
//!
//! Bounded in time (3 s; `REQUEST_SIM_GARBAGE_SECS` for longer) so it runs in every test pass;
//! the fuzz target `fuzz/fuzz_targets/sse_response.rs` runs the same readers for as long as it
//! is given.

use std::time::{Duration, Instant};

use request_sim::backend::{read_stream, ApiKind};
use request_sim::record::Status;

use crate::support::Lcg;

const MESSAGES: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":12,\"cache_creation_input_tokens\":1,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"h\\u00e9llo\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\"\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\"},\"usage\":{\"output_tokens\":2}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

const RESPONSES: &str = concat!(
    "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}}\n\n",
    "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"message\",\"content\":[]}}\n\n",
    "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"h\\u00e9\"}\n\n",
    "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{}\"}\n\n",
    "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"h\\u00e9\"}\n\n",
    "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":16,\"input_tokens_details\":{\"cached_tokens\":8},\"output_tokens\":2}}}\n\n",
);

const CHAT: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\n",
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":2}}\n\n",
    "data: [DONE]\n\n",
);

/// Pieces spliced into streams: other APIs' events, odd values, broken framing.
const SPLICES: &[&str] = &[
    "data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"x\"}}\n\n",
    "data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":1,\"message\":null}}}\n\n",
    "data: {\"type\":\"message_stop\"}\n\n",
    "data: {\"type\":\"response.completed\",\"response\":null}\n\n",
    "data: {\"type\":\"content_block_delta\",\"delta\":null}\n\n",
    "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":5}}\n\n",
    "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":4294967295,\"input_tokens\":4294967295,\"cache_read_input_tokens\":4294967295}}\n\n",
    "data: {\"type\":\"x.delta\",\"delta\":[1,{\"a\":null}]}\n\n",
    "data: {\"type\":7}\n\n",
    "data: [DONE]\n\n",
    "data: null\n\n",
    "data: \"\\ud800\"\n\n",
    "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":-1}}}\n\n",
    ": comment\n\n",
    "event: error\n",
    "data:",
    "\r\n\r\n",
    "\n\n\n",
    "{\"type\":",
    "\u{1f600}",
    "\u{0}\u{ff}",
];

/// One mutation of `s`.
fn mutate(rng: &mut Lcg, s: &mut Vec<u8>) {
    let len = s.len().max(1);
    let at = rng.below(len as u64) as usize;
    match rng.below(8) {
        0 => s.truncate(at),
        1 => {
            if let Some(b) = s.get_mut(at) {
                *b ^= 1 << rng.below(8);
            }
        }
        2 => s.insert(at.min(s.len()), rng.next_u32() as u8),
        3 => {
            let end = (at + 1 + rng.below(40) as usize).min(s.len());
            if at < end {
                s.drain(at..end);
            }
        }
        4 => {
            let piece = SPLICES[rng.below(SPLICES.len() as u64) as usize];
            let at = at.min(s.len());
            s.splice(at..at, piece.bytes());
        }
        5 => {
            // Repeat a stretch (events repeated, or half an event twice).
            let end = (at + 1 + rng.below(300) as usize).min(s.len());
            let copy = s.get(at..end).map(<[u8]>::to_vec).unwrap_or_default();
            s.splice(end..end, copy);
        }
        6 => {
            // Numbers and type names swapped for others.
            let text = String::from_utf8_lossy(s).into_owned();
            let swapped = match rng.below(4) {
                0 => text.replacen("\"output_tokens\":2", "\"output_tokens\":-2", 1),
                1 => text.replacen("message_stop", "message_start", 1),
                2 => text.replacen("response.completed", "response.created", 1),
                _ => text.replacen("\"text\"", "\"text\":{},\"x\"", 1),
            };
            *s = swapped.into_bytes();
        }
        _ => {
            let n = rng.below(64) as usize;
            let at = at.min(s.len());
            let junk: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
            s.splice(at..at, junk);
        }
    }
}

/// `bytes` cut into random network chunks.
fn chunks<'a>(rng: &mut Lcg, bytes: &'a [u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = (1 + rng.below(97) as usize).min(rest.len());
        let (a, b) = rest.split_at(n);
        out.push(a);
        rest = b;
    }
    out
}

/// Reads `bytes` as a `kind` stream in random chunks: `Ok` only for a consistent finished
/// answer, else the protocol error.
fn read(rng: &mut Lcg, kind: ApiKind, bytes: &[u8]) -> Result<(), String> {
    let pieces = chunks(rng, bytes);
    match read_stream(kind, pieces, Instant::now()) {
        Ok(st) => {
            assert!(st.finished && st.chunks > 0);
            assert!(st.content_chunks <= st.chunks);
            assert_eq!(st.itl_ms.len(), st.chunks as usize - 1);
            Ok(())
        }
        Err((status, e)) => {
            assert_eq!(status, Status::ProtocolError, "{e}");
            assert!(!e.is_empty());
            Err(e)
        }
    }
}

#[test]
fn garbage_streams_are_protocol_errors_never_panics() {
    let apis = [
        (ApiKind::Messages, MESSAGES, "message_stop"),
        (ApiKind::Responses, RESPONSES, "response.completed"),
        (ApiKind::Chat, CHAT, "[DONE]"),
    ];
    let mut rng = Lcg::new(0x5eed);
    // The valid streams pass, whatever the chunks.
    for (kind, text, _) in apis {
        for _ in 0..50 {
            read(&mut rng, kind, text.as_bytes()).unwrap();
        }
    }
    // `REQUEST_SIM_GARBAGE_SECS=600` for a long run by hand.
    let secs = std::env::var("REQUEST_SIM_GARBAGE_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(3.0);
    let budget = Duration::from_secs_f64(secs);
    let t = Instant::now();
    let (mut cases, mut failed) = (0u64, 0u64);
    while t.elapsed() < budget {
        for (kind, text, last) in apis {
            let valid = text.as_bytes();
            // Cut before the final event: always an error.
            let end = text.rfind(last).unwrap_or(0);
            let cut = &valid[..rng.below(end as u64 + 1) as usize];
            assert!(read(&mut rng, kind, cut).is_err(), "{kind:?} cut: {cut:?}");
            // Random bytes: always an error.
            let n = rng.below(400) as usize;
            let junk: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
            assert!(read(&mut rng, kind, &junk).is_err(), "{kind:?} junk");
            // Mutated: an error or a consistent answer, never a panic.
            let mut s = valid.to_vec();
            for _ in 0..1 + rng.below(6) {
                mutate(&mut rng, &mut s);
            }
            failed += u64::from(read(&mut rng, kind, &s).is_err());
            cases += 3;
        }
    }
    eprintln!(
        "garbage streams: {cases} cases in {:.1} s, {failed} of the mutated ones were errors",
        t.elapsed().as_secs_f64()
    );
    assert!(cases > 300, "only {cases} cases ran");
    assert!(failed > 0);
}
