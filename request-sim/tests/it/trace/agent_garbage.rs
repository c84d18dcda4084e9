//! Seeded random garbage through the JSONL agentic readers (TraceLab, Dynamo, `dag_jsonl`):
//! the fixtures of `tests/data/traces/agent/` with bytes flipped, inserted and deleted, lines
//! repeated, dropped and swapped between formats, values replaced by odd ones (negative,
//! huge, wrong types, ids of other sessions), read detected and forced. Never a panic; every
//! failure names the input and a line (or is a whole-file error); every corpus read passes the
//! session tree's check.
//!
//! Bounded in time (2 s; `REQUEST_SIM_GARBAGE_SECS` for longer, `REQUEST_SIM_GARBAGE_FORMAT`
//! for one reader only) so it runs in every test pass; the fuzz target
//! `fuzz/fuzz_targets/agent_trace.rs` runs the same readers coverage-guided.

use std::time::{Duration, Instant};

use request_sim::trace::agent::jsonl::read;
use request_sim::trace::{LoadOptions, TraceFormat};

use crate::support::{trace_fixture, Lcg};

/// Values spliced into lines.
const SPLICES: &[&str] = &[
    "-1",
    "0",
    "1e309",
    "18446744073709551616",
    "null",
    "true",
    "\"\"",
    "\"x\"",
    "[]",
    "{}",
    "[{}]",
    "\"2026-13-45T99:00:00Z\"",
    "\"root\"",
    "\"critic\"",
    "\"run42:planner\"",
    "\"claude:s1\"",
    "{\"children\":[\"root\"],\"join_at\":1}",
    "{\"child\":\"root\"}",
    "\"dynamo.request.trace.v2\"",
    "\"tool_end\"",
    "\"request_end\"",
    "4294967296",
    "-0.5",
    "\"\\ud800\"",
    "\u{1f600}",
    ",",
    ":",
    "}",
    "{",
    "]",
    "[",
];

/// Keys whose values get replaced.
const KEYS: &[&str] = &[
    "\"session_id\":",
    "\"round_index\":",
    "\"input_tokens_total\":",
    "\"prefix_tokens\":",
    "\"output_tokens\":",
    "\"timestamp\":",
    "\"tool_wall_latency_ms\":",
    "\"trajectory_id\":",
    "\"parent_trajectory_id\":",
    "\"request_received_ms\":",
    "\"total_time_ms\":",
    "\"trace_block_size\":",
    "\"input_length\":",
    "\"input_sequence_hashes\":",
    "\"schema\":",
    "\"event_type\":",
    "\"turns\":",
    "\"messages\":",
    "\"spawns\":",
    "\"forks\":",
    "\"join_at\":",
    "\"delay\":",
    "\"max_tokens\":",
    "\"context_mode\":",
    "\"role\":",
];

fn mutate(rng: &mut Lcg, s: &mut Vec<u8>, others: &[Vec<u8>]) {
    let len = s.len().max(1);
    let at = rng.below(len as u64) as usize;
    match rng.below(9) {
        0 => s.truncate(at),
        1 => {
            if let Some(b) = s.get_mut(at) {
                *b ^= 1 << rng.below(8);
            }
        }
        2 => {
            let end = (at + 1 + rng.below(60) as usize).min(s.len());
            if at < end {
                s.drain(at..end);
            }
        }
        3 => {
            let piece = SPLICES[rng.below(SPLICES.len() as u64) as usize];
            let at = at.min(s.len());
            s.splice(at..at, piece.bytes());
        }
        4 | 5 => {
            // a value replaced: the bytes after a key up to the next , or }
            let text = String::from_utf8_lossy(s).into_owned();
            let key = KEYS[rng.below(KEYS.len() as u64) as usize];
            let hits: Vec<usize> = text
                .match_indices(key)
                .map(|(i, _)| i + key.len())
                .collect();
            if let Some(&from) = hits.get(rng.below(hits.len().max(1) as u64) as usize) {
                let end = text[from..]
                    .find([',', '}'])
                    .map_or(text.len(), |e| from + e);
                let piece = SPLICES[rng.below(SPLICES.len() as u64) as usize];
                let mut out = text[..from].to_owned();
                out.push_str(piece);
                out.push_str(&text[end..]);
                *s = out.into_bytes();
            }
        }
        6 => {
            // lines: one repeated, dropped or moved
            let mut lines: Vec<Vec<u8>> = s.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            let n = lines.len() as u64;
            let i = rng.below(n) as usize;
            match rng.below(3) {
                0 => {
                    let l = lines[i].clone();
                    lines.insert(rng.below(n) as usize, l);
                }
                1 => {
                    lines.remove(i);
                }
                _ => {
                    let j = rng.below(n) as usize;
                    lines.swap(i, j);
                }
            }
            *s = lines.join(&b'\n');
        }
        7 => {
            // a line of another format
            let other = &others[rng.below(others.len() as u64) as usize];
            let line = other.split(|&b| b == b'\n').next().unwrap_or(&[]).to_vec();
            let at = at.min(s.len());
            let mut piece = line;
            piece.push(b'\n');
            s.splice(at..at, piece);
        }
        _ => {
            let n = rng.below(32) as usize;
            let at = at.min(s.len());
            let junk: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
            s.splice(at..at, junk);
        }
    }
}

#[test]
fn garbage_never_panics() {
    let secs: f64 = std::env::var("REQUEST_SIM_GARBAGE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let only = std::env::var("REQUEST_SIM_GARBAGE_FORMAT")
        .ok()
        .and_then(|n| TraceFormat::from_name(&n));
    let formats = [TraceFormat::Tracelab, TraceFormat::Dynamo, TraceFormat::Dag];
    let files: Vec<(TraceFormat, Vec<u8>)> = [
        ("agent/tracelab.jsonl", TraceFormat::Tracelab),
        ("agent/dynamo.jsonl", TraceFormat::Dynamo),
        ("agent/dag.jsonl", TraceFormat::Dag),
    ]
    .iter()
    .map(|(f, fmt)| (*fmt, std::fs::read(trace_fixture(f)).unwrap()))
    .collect();
    let all: Vec<Vec<u8>> = files.iter().map(|(_, b)| b.clone()).collect();
    let mut rng = Lcg::new(0x5eed_a6e7);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let (mut inputs, mut corpora, mut errors) = (0u64, 0u64, 0u64);
    while Instant::now() < deadline {
        for _ in 0..64 {
            let (fmt, base) = &files[rng.below(3) as usize];
            if only.is_some_and(|o| o != *fmt) {
                continue;
            }
            let mut bytes = base.clone();
            for _ in 0..=rng.below(6) {
                mutate(&mut rng, &mut bytes, &all);
            }
            let forced = match rng.below(4) {
                0 => None,
                1 => Some(*fmt),
                _ => Some(formats[rng.below(3) as usize]),
            };
            let opts = LoadOptions {
                format: only.or(forced),
                block_size: [None, Some(1), Some(4), Some(64)][rng.below(4) as usize],
                max_line_bytes: Some(4096),
                ..LoadOptions::default()
            };
            inputs += 1;
            match read("g.jsonl", bytes.as_slice(), &opts) {
                Ok(c) => {
                    corpora += 1;
                    assert!(!c.conversations.is_empty());
                    for conv in &c.conversations {
                        assert_eq!(conv.check(), Ok(()));
                    }
                }
                Err(e) => {
                    errors += 1;
                    let m = e.to_string();
                    assert!(m.starts_with("g.jsonl:"), "{m}");
                }
            }
        }
    }
    eprintln!("agent garbage: {inputs} inputs, {corpora} corpora read, {errors} errors, no panic");
    assert!(inputs > 0 && errors > 0);
}
