//! Seeded random garbage through the JSONL agentic readers (TraceLab, Dynamo, `dag_jsonl`):
//! the fixtures of `tests/data/traces/agent/` with bytes flipped, inserted and deleted, lines
//! repeated, dropped and swapped between formats, values replaced by odd ones (negative,
//! huge, wrong types, ids of other sessions), read detected and forced. Never a panic; every
//! failure names the input and a line (or is a whole-file error); every corpus read passes the
//! session tree's check. The Weka reader (`trace::formats::weka::parse`, one JSON object per
//! file) gets the same treatment from the fixtures of `tests/data/agents/` (plus stretches
//! repeated and whole subagent entries spliced in): its errors must also name the file, a line
//! and a JSON path (or a serde position), and every conversation it returns pass the check.
//!
//! Bounded in time (2 s; `REQUEST_SIM_GARBAGE_SECS` for longer, `REQUEST_SIM_GARBAGE_FORMAT`
//! for one reader only) so it runs in every test pass; the fuzz target
//! `fuzz/fuzz_targets/agent_trace.rs` runs the same readers coverage-guided.

use std::time::{Duration, Instant};

use request_sim::trace::formats::agents::read;
use request_sim::trace::formats::weka;
use request_sim::trace::{LoadOptions, TraceFormat};

use crate::support::{data_path, trace_fixture, Lcg};

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
    "1e308",
    "\"n\"",
    "\"s\"",
    "\"subagent\"",
    "\"async_launched\"",
    "\"completed\"",
    "\"global\"",
    "\"local\"",
    "[0,0,18446744073709551615]",
    "{\"t\":0.1,\"type\":\"subagent\",\"agent_id\":\"x\",\"requests\":[{\"t\":0,\"type\":\"n\",\"in\":1,\"out\":1,\"hash_ids\":[]}]},",
    "{\"t\":9,\"type\":\"subagent\",\"agent_id\":\"y\",\"status\":\"async_launched\",\"requests\":[{\"t\":0,\"type\":\"subagent\"}]},",
    "{\"t\":0,\"type\":\"s\",\"in\":4294967295,\"out\":0,\"hash_ids\":[1]},",
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
    "\"t\":",
    "\"type\":",
    "\"in\":",
    "\"out\":",
    "\"hash_ids\":",
    "\"block_size\":",
    "\"hash_id_scope\":",
    "\"api_time\":",
    "\"think_time\":",
    "\"agent_id\":",
    "\"duration_ms\":",
    "\"status\":",
    "\"requests\":",
    "\"tool_tokens\":",
    "\"system_tokens\":",
];

fn mutate(rng: &mut Lcg, s: &mut Vec<u8>, others: &[Vec<u8>]) {
    let len = s.len().max(1);
    let at = rng.below(len as u64) as usize;
    match rng.below(10) {
        0 => s.truncate(at),
        9 => {
            // a stretch repeated (a Weka file is one line: this stands in for repeated lines)
            let end = (at + 1 + rng.below(200) as usize).min(s.len());
            if at < end {
                let piece = s[at..end].to_vec();
                for _ in 0..=rng.below(3) {
                    s.splice(end..end, piece.iter().copied());
                }
            }
        }
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

/// Reads one garbage Weka file (`g.json`) and checks the outcome; true when it was read.
fn weka_case(bytes: &[u8]) -> bool {
    match weka::parse("g.json", bytes) {
        Ok(conv) => {
            assert_eq!(conv.check(), Ok(()));
            for a in &conv.agents {
                for r in &a.requests {
                    let p = r.origin.pointer.as_deref().unwrap_or_default();
                    assert!(r.origin.line >= 1 && p.starts_with("requests["), "{p}");
                }
            }
            true
        }
        Err(e) => {
            let m = e.to_string();
            if m == "g.json: the file is empty (no data lines)" {
                return false;
            }
            // `g.json:LINE: ` then a JSON path (`requests[2].subagent...`, a root field) or,
            // for a syntax error, serde's `at line L column C`.
            let rest = m.strip_prefix("g.json:").unwrap_or_else(|| panic!("{m}"));
            let (line, what) = rest.split_once(": ").unwrap_or_else(|| panic!("{m}"));
            let line: usize = line.parse().unwrap_or_else(|_| panic!("{m}"));
            let lines = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
            assert!((1..=lines).contains(&line), "line {line} of {lines}: {m}");
            let located = what.contains(" at line ")
                || [
                    "requests",
                    "block_size",
                    "hash_id_scope",
                    "id:",
                    "tool_tokens",
                    "system_tokens",
                ]
                .iter()
                .any(|k| what.starts_with(k));
            assert!(located, "no JSON path or position: {m}");
            false
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
    let formats = [
        TraceFormat::from_name("tracelab").unwrap(),
        TraceFormat::from_name("dynamo").unwrap(),
        TraceFormat::from_name("dag_jsonl").unwrap(),
    ];
    let mut files: Vec<(TraceFormat, Vec<u8>)> = [
        (
            "agent/tracelab.jsonl",
            TraceFormat::from_name("tracelab").unwrap(),
        ),
        (
            "agent/dynamo.jsonl",
            TraceFormat::from_name("dynamo").unwrap(),
        ),
        (
            "agent/dag.jsonl",
            TraceFormat::from_name("dag_jsonl").unwrap(),
        ),
    ]
    .iter()
    .map(|(f, fmt)| (*fmt, std::fs::read(trace_fixture(f)).unwrap()))
    .collect();
    for f in ["plain.json", "nested.json", "fanout.json"] {
        files.push((
            TraceFormat::from_name("weka").unwrap(),
            std::fs::read(data_path("agents").join(f)).unwrap(),
        ));
    }
    let all: Vec<Vec<u8>> = files.iter().map(|(_, b)| b.clone()).collect();
    // the seeds of this run: one reader's, or all (the Weka files one draw in four)
    let seeds: Vec<usize> = (0..files.len())
        .filter(|&i| only.is_none_or(|o| o == files[i].0))
        .collect();
    assert!(!seeds.is_empty(), "no fixture for {only:?}");
    let mut rng = Lcg::new(0x5eed_a6e7);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let (mut inputs, mut corpora, mut errors) = (0u64, 0u64, 0u64);
    let (mut weka_inputs, mut weka_read) = (0u64, 0u64);
    while Instant::now() < deadline {
        for _ in 0..64 {
            let pick = if only.is_none() && rng.below(4) == 0 {
                3 + rng.below(3) as usize
            } else if only.is_none() {
                rng.below(3) as usize
            } else {
                seeds[rng.below(seeds.len() as u64) as usize]
            };
            let (fmt, base) = &files[pick];
            let mut bytes = base.clone();
            for _ in 0..=rng.below(6) {
                mutate(&mut rng, &mut bytes, &all);
            }
            inputs += 1;
            if *fmt == TraceFormat::from_name("weka").unwrap() {
                weka_inputs += 1;
                if weka_case(&bytes) {
                    weka_read += 1;
                    corpora += 1;
                } else {
                    errors += 1;
                }
                continue;
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
    eprintln!(
        "agent garbage: {inputs} inputs ({weka_inputs} Weka, {weka_read} read), \
         {corpora} corpora read, {errors} errors, no panic"
    );
    assert!(inputs > 0 && errors > 0);
}
