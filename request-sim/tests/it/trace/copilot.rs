//! The GitHub Copilot coding-agent trace (`trace/formats/copilot.rs`): detection of a `date=`
//! partition and of one shard, a handwritten session checked value by value (gaps, parallel
//! calls, prefixes, compaction, the shared system prefix), the generated fixture
//! (`scripts/gen-copilot.py`) checked against its own JSON, and bad rows, one `file:line`
//! error each.

use std::path::PathBuf;

use request_sim::analyze::agents::{analyze_agents, AgentAnalyzeOptions};
use request_sim::trace::detect_format;
use request_sim::trace::formats::agents::agent_format;
use request_sim::trace::formats::copilot::{load, Reader};
use request_sim::trace::model::{Corpus, GapRule, HashScope};
use request_sim::trace::{LoadOptions, TraceFormat};
use serde_json::{json, Value};

use crate::support::data_path;

fn partition() -> PathBuf {
    data_path("copilot/date=2026-06-01")
}

/// A segment of `message_metadata`.
fn seg(kind: &str, id: u64, n: u32) -> Value {
    json!({"type": kind, "role": "user", "sequenceId": id, "token_len": n})
}

fn call(id: &str, at: &str, ms: f64, model: &str, prompt: i64, segs: Vec<Value>) -> Value {
    json!({
        "message_id": id, "timestamp": at, "duration_ms": ms, "initiator_type": "agent",
        "model": model, "result": "Success", "status_code": "OK",
        "tokens": {"total": prompt + 10, "prompt": prompt, "completion": 10, "cached": 0,
                   "cached_pct": 0.0},
        "message_metadata": segs,
    })
}

/// Two turns: c1 (1 s) asks for tools (500 ms), c2 follows at 1.5 s (2 s), c2b runs beside
/// it from 1.6 s; turn 2's c3 (at 10 s, no offset: UTC) is compacted.
fn session(id: &str, model: &str) -> Value {
    let (s, u) = (seg("System", 0, 130), seg("UserMessage", 1, 70));
    let c1 = call(
        "c1",
        "2026-06-01T10:00:00.000Z",
        1000.0,
        model,
        200,
        vec![s.clone(), u.clone()],
    );
    let c2 = call(
        "c2",
        "2026-06-01T10:00:01.500Z",
        2000.0,
        model,
        333,
        vec![
            s.clone(),
            u.clone(),
            seg("AssistantMessage", 2, 30),
            seg("ToolResult", 3, 100),
        ],
    );
    let c2b = call(
        "c2b",
        "2026-06-01T10:00:01.600Z",
        800.0,
        model,
        220,
        vec![s.clone(), u, seg("SubTask", 2, 20)],
    );
    let c3 = call(
        "c3",
        "2026-06-01T10:00:10",
        500.0,
        model,
        150,
        vec![s, seg("Summary", 1, 20)],
    );
    let batch = json!({"timestamp": "2026-06-01T10:00:01.000Z", "duration_ms": 500.0,
        "auto_continue": true, "result": "Success", "request_id": "c1",
        "function_calls": [{"name": "read_file", "status": 1, "duration_ms": 480.0}]});
    json!({"session_id": id, "date": "2026-06-01", "turns": [
        {"turn_id": "t1", "llm_calls": [c1, c2b, c2], "tool_batches": [batch]},
        {"turn_id": "t2", "llm_calls": [c3], "tool_batches": []},
    ]})
}

fn read(name: &str, lines: &[Value]) -> Result<Corpus, String> {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut r = Reader::new(&LoadOptions::default());
    r.read(name, text.as_bytes()).map_err(|e| e.to_string())?;
    r.finish(name).map(|(c, _)| c).map_err(|e| e.to_string())
}

#[test]
fn copilot_detects_a_partition_a_shard_and_a_line() {
    let dir = partition();
    assert_eq!(
        agent_format(&dir, None),
        Some(TraceFormat::from_name("copilot").unwrap())
    );
    for shard in ["shard-0000.jsonl", "shard-0001.jsonl.gz"] {
        assert_eq!(
            agent_format(&dir.join(shard), None),
            Some(TraceFormat::from_name("copilot").unwrap())
        );
    }
    let line = session("s", "Model A").to_string();
    assert_eq!(
        detect_format(&line).unwrap(),
        TraceFormat::from_name("copilot").unwrap()
    );
    // `turns` without `llm_calls` stays AIPerf dag_jsonl
    let dag = r#"{"session_id": "s", "turns": [{"messages": []}]}"#;
    assert_eq!(
        detect_format(dag).unwrap(),
        TraceFormat::from_name("dag_jsonl").unwrap()
    );
}

#[test]
fn copilot_session_gaps_parallel_calls_and_prefixes() {
    let c = read("s.jsonl", &[session("s1", "Model A")]).unwrap();
    let s = &c.conversations[0];
    assert_eq!(
        (&*s.id, s.block_size, s.hash_scope),
        ("s1", 64, HashScope::Global)
    );
    assert_eq!(s.system_tokens, Some(130));
    let main = &s.agents[0].requests;
    let gaps: Vec<(f64, GapRule)> = main.iter().map(|r| (r.gap.ms, r.gap.rule)).collect();
    // c2: c1's completion + its tool batch; c3 (next turn): 10 s − c2's end at 3.5 s
    assert_eq!(
        gaps,
        [
            (0.0, GapRule::First),
            (500.0, GapRule::ToolTime),
            (6500.0, GapRule::StartMinusServer)
        ]
    );
    assert_eq!(
        main.iter().map(|r| r.trace_ms).collect::<Vec<_>>(),
        [0.0, 1500.0, 10000.0]
    );
    assert_eq!(
        main.iter().map(|r| r.input_length).collect::<Vec<_>>(),
        [200, 333, 150]
    );
    assert_eq!(main[1].server_ms, Some(2000.0));
    // c2b overlaps c2: a background subagent after c1, 600 ms after its end
    let p = &s.agents[1];
    let link = p.parent.as_ref().unwrap();
    assert_eq!(
        (&*p.id, link.after, link.spawn_offset_ms, link.join),
        ("p2", 0, 600.0, None)
    );
    assert_eq!(
        (p.requests[0].gap.ms, p.requests[0].gap.rule),
        (600.0, GapRule::Spawn)
    );
    assert_eq!(p.requests[0].trace_ms, 1600.0);
    // ids: c1 = system blocks [0, 1] + [2, 3]; c2 shares its 200 segment tokens (3 blocks),
    // the 3 template tokens are its own; c2b shares System + UserMessage with c2; c3 is
    // compacted (150 < 333): the system blocks, then fresh
    assert_eq!(main[0].hash_ids, [0, 1, 2, 3]);
    assert_eq!(main[1].hash_ids, [0, 1, 2, 4, 5, 6]);
    assert_eq!(p.requests[0].hash_ids, [0, 1, 2, 7]);
    assert_eq!(main[2].hash_ids, [0, 1, 8]);
}

#[test]
fn copilot_system_prefix_is_shared_by_the_sessions_of_a_model() {
    let lines = [
        session("a", "Model A"),
        session("b", "Model A"),
        session("c", "Model B"),
    ];
    let c = read("s.jsonl", &lines).unwrap();
    let first = |i: usize| c.conversations[i].agents[0].requests[0].hash_ids.clone();
    assert_eq!(first(0), [0, 1, 2, 3]);
    // the same model: the 2 whole system blocks again, the rest fresh (session a used 0..=8)
    assert_eq!(first(1), [0, 1, 9, 10]);
    // another model with a system segment of the same size: its own blocks
    assert_eq!(first(2), [16, 17, 18, 19]);
}

#[test]
fn copilot_partition_reads_every_shard_in_order() {
    let (corpus, counts) = load(&partition(), &LoadOptions::default()).unwrap();
    assert_eq!(corpus.conversations.len(), 12);
    let sources: Vec<bool> = corpus
        .conversations
        .iter()
        .map(|c| c.source.ends_with(".gz"))
        .collect();
    assert_eq!(sources, [[false; 8].as_slice(), &[true; 4]].concat());
    assert_eq!(
        (counts.sessions, counts.calls, corpus.requests()),
        (12, 75, 75)
    );
    assert_eq!(counts.not_success, [("UserCancel".to_owned(), 4)]);
    // 8 parallel calls (6 beside the main chain, 2 beside a session's first call: serialized),
    // 4 compactions (as the generator made them); the
    // generator adds 0, 3 or 7 template tokens: segments short of `prompt`, counted
    let c = &counts;
    assert_eq!(
        (
            c.parallel,
            c.serialized,
            c.compactions,
            c.short_segments,
            c.short_tokens,
            c.long_segments
        ),
        (6, 2, 4, 33, 163, 0)
    );
    let models: std::collections::BTreeSet<&str> = corpus
        .conversations
        .iter()
        .flat_map(|c| &c.agents)
        .flat_map(|a| &a.requests)
        .filter_map(|r| r.model.as_deref())
        .collect();
    assert!(models.len() >= 4, "{models:?}");
}

#[test]
fn copilot_fixture_matches_its_json() {
    let (corpus, _) = load(&partition(), &LoadOptions::default()).unwrap();
    let text = std::fs::read_to_string(partition().join("shard-0000.jsonl")).unwrap();
    let mut tool_gaps = 0;
    for (conv, line) in corpus.conversations.iter().zip(text.lines()) {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(&*conv.id, v["session_id"].as_str().unwrap());
        let calls: Vec<&Value> = v["turns"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["llm_calls"].as_array().unwrap())
            .collect();
        let mut prompts: Vec<u32> = calls
            .iter()
            .map(|c| c["tokens"]["prompt"].as_u64().unwrap() as u32)
            .collect();
        let reqs: Vec<_> = conv.agents.iter().flat_map(|a| &a.requests).collect();
        for r in &reqs {
            assert_eq!(r.hash_ids.len(), (r.input_length as usize).div_ceil(64));
        }
        let mut lengths: Vec<u32> = reqs.iter().map(|r| r.input_length).collect();
        prompts.sort_unstable();
        lengths.sort_unstable();
        assert_eq!(
            lengths, prompts,
            "one request per call, prompt lengths exact"
        );
        // in the generator a call starts exactly at its predecessor's end + its tool batch
        let main = &conv.agents[0].requests;
        for w in main.windows(2) {
            if w[1].gap.rule == GapRule::ToolTime {
                let end = w[0].trace_ms + w[0].server_ms.unwrap();
                assert_eq!(w[1].trace_ms, end + w[1].gap.ms);
                tool_gaps += 1;
            }
        }
    }
    // 14 of the 8 plain-shard sessions' main-chain calls follow a tool batch
    assert_eq!(tool_gaps, 14);
}

#[test]
fn copilot_bad_rows_are_one_file_line_error_each() {
    let good = session("ok", "Model A");
    let bad = |edit: &dyn Fn(&mut Value)| {
        let mut v = session("bad", "Model A");
        edit(&mut v);
        read("bad.jsonl", &[good.clone(), v]).unwrap_err()
    };
    let e = bad(&|v| v["turns"][0]["tool_batches"][0]["request_id"] = json!("nope"));
    assert!(e.starts_with("bad.jsonl:2: "), "{e}");
    assert!(
        e.contains("turns[0].tool_batches[0].request_id") && e.contains("names no LLM call"),
        "{e}"
    );
    let e = bad(&|v| {
        let turns = v["turns"].as_array_mut().unwrap();
        turns.swap(0, 1);
    });
    assert!(
        e.starts_with("bad.jsonl:2: ") && e.contains("turns[1].llm_calls[0].timestamp"),
        "{e}"
    );
    assert!(e.contains("time order"), "{e}");
    let e = bad(&|v| v["turns"][0]["llm_calls"][0]["tokens"]["prompt"] = json!(-5));
    assert!(
        e.starts_with("bad.jsonl:2: ") && e.contains("turns[0].llm_calls[0].tokens.prompt"),
        "{e}"
    );
    for field in ["completion", "cached"] {
        let e = bad(&|v| v["turns"][0]["llm_calls"][2]["tokens"][field] = json!(-1));
        assert!(
            e.starts_with("bad.jsonl:2: ")
                && e.contains(&format!("turns[0].llm_calls[2].tokens.{field}")),
            "{e}"
        );
    }
    let e = bad(&|v| v["turns"][0]["tool_batches"][0]["duration_ms"] = json!(-500.0));
    assert!(
        e.starts_with("bad.jsonl:2: ") && e.contains("turns[0].tool_batches[0].duration_ms"),
        "{e}"
    );
    // calls of a turn going back before the previous turn's start
    let e = bad(&|v| v["turns"][1]["llm_calls"][0]["timestamp"] = json!("2026-06-01T09:59:00Z"));
    assert!(
        e.starts_with("bad.jsonl:2: ")
            && e.contains("turns[1].llm_calls[0].timestamp")
            && e.contains("time order"),
        "{e}"
    );
    let e = bad(&|v| v["turns"][0]["llm_calls"][1]["timestamp"] = json!("yesterday"));
    assert!(
        e.starts_with("bad.jsonl:2: ") && e.contains("ISO-8601"),
        "{e}"
    );
}

#[test]
fn copilot_cut_or_damaged_lines_are_errors_not_panics() {
    let text = std::fs::read_to_string(partition().join("shard-0000.jsonl")).unwrap();
    let line = text.lines().next().unwrap();
    let read_bytes = |bytes: &[u8]| {
        let mut r = Reader::new(&LoadOptions::default());
        r.read("cut.jsonl", bytes).map_err(|e| e.to_string())
    };
    let mut errors = 0;
    for cut in (1..line.len()).step_by(7) {
        let e = read_bytes(&line.as_bytes()[..cut]).unwrap_err();
        assert!(e.starts_with("cut.jsonl:1: "), "{e}");
        errors += 1;
    }
    // a digit, a quote or a bracket replaced by another character, everywhere
    for at in (0..line.len()).step_by(11) {
        for b in [b'x', b'-', b'}', b'9'] {
            let mut bytes = line.as_bytes().to_vec();
            bytes[at] = b;
            if let Err(e) = read_bytes(&bytes) {
                assert!(e.starts_with("cut.jsonl:1: "), "{e}");
            }
        }
    }
    // every cut is an error on line 1 (the line is 2,711 bytes)
    assert!(errors > 100, "{errors}");
}

/// `analyze` of the fixture: production's cached share (Σ `tokens.cached` / Σ
/// `tokens.prompt`, summed here from the JSON of both shards) next to the ideal hit ratio of
/// the rebuilt prefixes, the segment rule's counts and the cancelled calls.
#[test]
fn copilot_analyze_reports_production_next_to_the_rebuilt_ideal() {
    use std::io::Read;
    let (corpus, counts) = load(&partition(), &LoadOptions::default()).unwrap();
    let a = analyze_agents(&corpus, &AgentAnalyzeOptions::default());
    let p = a.production.as_ref().expect("a production section");
    let mut text = std::fs::read_to_string(partition().join("shard-0000.jsonl")).unwrap();
    let gz = std::fs::File::open(partition().join("shard-0001.jsonl.gz")).unwrap();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .unwrap();
    let (mut prompt, mut cached, mut cancels) = (0u64, 0u64, 0usize);
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        for c in v["turns"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["llm_calls"].as_array().unwrap())
        {
            prompt += c["tokens"]["prompt"].as_u64().unwrap();
            cached += c["tokens"]["cached"].as_u64().unwrap();
            cancels += usize::from(c["result"] == "UserCancel");
        }
    }
    assert_eq!((p.prompt_tokens, p.cached_tokens), (prompt, cached));
    assert_eq!(p.cached_share, cached as f64 / prompt as f64);
    assert_eq!(p.rebuilt_ideal_hit_ratio, a.ideal_hit_ratio);
    assert!(
        (p.rebuilt_minus_production_pp - 100.0 * (a.ideal_hit_ratio - p.cached_share)).abs() < 1e-9
    );
    assert_eq!(
        (p.segments_short, p.segments_short_tokens, p.segments_over),
        (
            counts.short_segments,
            counts.short_tokens,
            counts.long_segments
        )
    );
    assert_eq!(p.not_success.get("UserCancel"), Some(&cancels));
    // global ids: the shared-prefix ratio is the same chains
    assert_eq!(a.ideal_hit_ratio_shared_prefix, a.ideal_hit_ratio);
    // dense ids: the cache keyed by id (a bitset) hits exactly as the one keyed by chains
    assert!(corpus.dense_ids.is_some());
    let chains = analyze_agents(
        &corpus,
        &AgentAnalyzeOptions {
            keyed_by_chain: true,
            ..AgentAnalyzeOptions::default()
        },
    );
    assert_eq!(chains.ideal_hit_ratio, a.ideal_hit_ratio);
    // the ideal replays the rebuilt prefixes: every call shares with the call before it, so
    // far more than the system blocks hit
    assert!(a.ideal_hit_ratio > 0.5, "{}", a.ideal_hit_ratio);
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["production"]["segments_short"], 33);
    assert_eq!(json["production"]["not_success"]["UserCancel"], cancels);
}
