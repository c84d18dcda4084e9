//! The JSONL agentic formats (TraceLab rounds, Dynamo request traces, AIPerf `dag_jsonl`):
//! each fixture of `tests/data/traces/agent/` read into session trees, checked value by value
//! against what the file says; and broken inputs, each one `file:line` error.

use request_sim::trace::formats::agents::{load_corpus as load, read};
use request_sim::trace::model::{Corpus, GapRule, HashScope};
use request_sim::trace::{LoadOptions, TraceFormat};

use crate::support::trace_fixture;

fn fixture(name: &str) -> Corpus {
    load(
        &trace_fixture(&format!("agent/{name}")),
        &LoadOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// How many parent links lead from agent `i` to the main agent.
fn depth(c: &request_sim::trace::model::Conversation, mut i: usize) -> usize {
    let mut d = 0;
    while let Some(l) = &c.agents[i].parent {
        i = l.agent;
        d += 1;
    }
    d
}

fn ids(range: std::ops::Range<u64>) -> Vec<u64> {
    range.collect()
}

#[test]
fn tracelab_sessions_mint_ids_from_prefix_tokens() {
    let c = fixture("tracelab.jsonl");
    assert_eq!(c.conversations.len(), 2);
    let s1 = &c.conversations[0];
    assert_eq!(&*s1.id, "claude:s1");
    assert_eq!(s1.block_size, 64);
    assert_eq!(s1.hash_scope, HashScope::Local);
    // round 0's cached prefix (640 tokens from earlier sessions) is the client's system prompt
    assert_eq!(s1.system_tokens, Some(640));
    assert_eq!(s1.agents.len(), 1);
    let r = &s1.agents[0].requests;
    // ordered by round_index: lines 1, 3, 6 (round 2), 4 (round 3)
    let lines: Vec<usize> = r.iter().map(|q| q.origin.line).collect();
    assert_eq!(lines, [1, 3, 6, 4]);
    assert_eq!(
        r.iter().map(|q| q.input_length).collect::<Vec<_>>(),
        [1000, 1200, 1300, 1400]
    );
    // round 0: 16 fresh ids; round 1 shares floor(1000/64) = 15 and adds 4
    assert_eq!(r[0].hash_ids, ids(0..16));
    assert_eq!(r[1].hash_ids, [ids(0..15), ids(16..20)].concat());
    // round 2 (compacted: prefix 700) shares 10 blocks and mints 11
    assert_eq!(r[2].hash_ids, [ids(0..10), ids(20..31)].concat());
    // round 3 shares min(1300, 1300) / 64 = 20 blocks of round 2
    assert_eq!(
        r[3].hash_ids,
        [r[2].hash_ids.to_vec()[..20].to_vec(), ids(31..33)].concat()
    );
    // gaps: round 1 submitted at 4.5 s, round 0's last model event at 3 s
    assert_eq!((r[0].gap.ms, r[0].gap.rule), (0.0, GapRule::First));
    assert_eq!(
        (r[1].gap.ms, r[1].gap.rule),
        (1500.0, GapRule::StartMinusServer)
    );
    // round 2 has no timestamps: round 1's longest tool (2000 ms)
    assert_eq!((r[2].gap.ms, r[2].gap.rule), (2000.0, GapRule::ToolTime));
    // round 3: round 2 has no end, and ran no tool
    assert_eq!((r[3].gap.ms, r[3].gap.rule), (0.0, GapRule::ToolTime));
    assert_eq!(
        r.iter().map(|q| q.trace_ms).collect::<Vec<_>>(),
        [0.0, 4500.0, 7000.0, 12000.0]
    );
    assert_eq!(r[0].server_ms, Some(3000.0));
    assert_eq!(r[1].server_ms, Some(2500.0));
    assert_eq!(r[2].server_ms, None);
    assert_eq!(r[0].model.as_deref(), Some("claude-test"));
    assert_eq!(r.iter().map(|q| q.output_length).sum::<u32>(), 170);

    let s2 = &c.conversations[1];
    assert_eq!(&*s2.id, "codex:s2");
    assert_eq!(s2.system_tokens, None);
    let r = &s2.agents[0].requests;
    assert_eq!(r[0].hash_ids, ids(0..5));
    assert_eq!(r[1].hash_ids, [ids(0..4), ids(5..8)].concat());
    // the person was away 30 s (usage reports do not end a round)
    assert_eq!(
        (r[1].gap.ms, r[1].gap.rule),
        (30_000.0, GapRule::StartMinusServer)
    );
    assert_eq!(r[0].server_ms, Some(1500.0));
}

#[test]
fn tracelab_block_size_is_an_option() {
    let opts = LoadOptions {
        block_size: Some(100),
        ..LoadOptions::default()
    };
    let c = load(&trace_fixture("agent/tracelab.jsonl"), &opts).unwrap();
    let r = &c.conversations[0].agents[0].requests;
    assert_eq!(c.conversations[0].block_size, 100);
    assert_eq!(r[0].hash_ids, ids(0..10));
    // floor(1000 / 100) = 10 shared, ceil(1200 / 100) = 12 in all
    assert_eq!(r[1].hash_ids, [ids(0..10), ids(10..12)].concat());
}

#[test]
fn dynamo_trajectories_become_subagents_with_spawns_and_joins() {
    for name in ["dynamo.jsonl", "dynamo.jsonl.gz"] {
        let c = fixture(name);
        assert_eq!(c.conversations.len(), 2, "{name}");
        let conv = &c.conversations[0];
        assert_eq!(&*conv.id, "run42:planner");
        assert_eq!(conv.block_size, 4);
        assert_eq!(conv.hash_scope, HashScope::Global);
        let names: Vec<&str> = conv.agents.iter().map(|a| &*a.id).collect();
        assert_eq!(
            names,
            [
                "main",
                "run42:researcher",
                "run42:bg",
                "run42:researcher:child"
            ]
        );
        let main = &conv.agents[0];
        assert_eq!(
            main.requests
                .iter()
                .map(|r| r.origin.line)
                .collect::<Vec<_>>(),
            [1, 2, 6, 8]
        );
        assert_eq!(
            main.requests.iter().map(|r| r.trace_ms).collect::<Vec<_>>(),
            [0.0, 1500.0, 4500.0, 5600.0]
        );
        // the u64 hashes renumbered in order of first appearance, shared across agents
        assert_eq!(main.requests[3].hash_ids, [0, 1, 2, 5, 6]);
        let gaps: Vec<(f64, GapRule)> = main
            .requests
            .iter()
            .map(|r| (r.gap.ms, r.gap.rule))
            .collect();
        assert_eq!(
            gaps,
            [
                (0.0, GapRule::First),
                (500.0, GapRule::StartMinusServer),
                // waits for the researcher (ended at 4000), then 500 ms
                (500.0, GapRule::AfterJoin),
                (600.0, GapRule::StartMinusServer),
            ]
        );
        assert_eq!(main.requests[0].server_ms, Some(1000.0));
        let researcher = &conv.agents[1];
        let link = researcher.parent.as_ref().unwrap();
        assert_eq!((link.agent, link.after, link.join), (0, 1, Some(2)));
        assert_eq!(link.spawn_offset_ms, 300.0);
        assert_eq!(researcher.start_ms, 2300.0);
        assert_eq!(
            (
                researcher.requests[0].gap.ms,
                researcher.requests[0].gap.rule
            ),
            (300.0, GapRule::Spawn)
        );
        assert_eq!(researcher.requests[1].hash_ids, [3, 4]);
        // line 4 is the wrapped form {"timestamp", "event"}
        assert_eq!(researcher.requests[1].origin.line, 4);
        let bg = &conv.agents[2];
        let link = bg.parent.as_ref().unwrap();
        // the planner sent request 3 while it ran: background
        assert_eq!((link.agent, link.after, link.join), (0, 2, None));
        assert_eq!(link.spawn_offset_ms, 200.0);
        let child = &conv.agents[3];
        let link = child.parent.as_ref().unwrap();
        assert_eq!((link.agent, link.after, link.join), (1, 0, Some(1)));
        // started while the researcher's request was in flight: offset 0
        assert_eq!(link.spawn_offset_ms, 0.0);
        assert_eq!(depth(conv, 3), 2);
        // a row without agent_context is a conversation of its own
        let solo = &c.conversations[1];
        assert_eq!(&*solo.id, "solo-1");
        assert_eq!(solo.agents.len(), 1);
        assert_eq!(solo.agents[0].requests[0].hash_ids, [0]);
        assert_eq!(solo.agents[0].requests[0].origin.line, 10);
        assert_eq!(c.requests(), 9);
    }
}

#[test]
fn dag_conversations_spawn_fork_and_join() {
    let c = fixture("dag.jsonl");
    assert_eq!(c.conversations.len(), 2);
    let root = &c.conversations[0];
    assert_eq!(&*root.id, "root");
    let names: Vec<&str> = root.agents.iter().map(|a| &*a.id).collect();
    assert_eq!(
        names,
        ["main", "critic", "notes", "worker-a", "worker-b", "leaf", "leaf#2"]
    );
    let link = |i: usize| root.agents[i].parent.clone().unwrap();
    // bare spawn: joins at the next turn; its own delay is the spawn offset
    let l = link(1);
    assert_eq!(
        (l.agent, l.after, l.join, l.inherits_history),
        (0, 0, Some(1), false)
    );
    assert_eq!(l.spawn_offset_ms, 30.0);
    assert_eq!(root.agents[1].requests[0].gap.rule, GapRule::Spawn);
    // background fork: inherits the history, never joined
    let l = link(2);
    assert_eq!(
        (l.agent, l.after, l.join, l.inherits_history),
        (0, 1, None, true)
    );
    // join_at 3: the parent runs turn 2 beside the workers
    for w in [3, 4] {
        let l = link(w);
        assert_eq!((l.agent, l.after, l.join), (0, 1, Some(3)));
    }
    // the spawn template `leaf` copied under both workers: joined by A's turn 1; B has none
    let l = link(5);
    assert_eq!((l.agent, l.after, l.join), (3, 0, Some(1)));
    let l = link(6);
    assert_eq!((l.agent, l.after, l.join), (4, 0, None));
    assert_eq!(depth(root, 5), 2);
    let main = &root.agents[0].requests;
    let count = |i: usize| {
        main[i]
            .messages
            .as_ref()
            .unwrap()
            .messages
            .as_array()
            .unwrap()
            .len()
    };
    // accumulated history: every earlier turn's messages, then this turn's
    assert_eq!((0..4).map(count).collect::<Vec<_>>(), [2, 3, 4, 5]);
    assert_eq!(
        main.iter()
            .map(|r| (r.gap.ms, r.gap.rule))
            .collect::<Vec<_>>(),
        [
            (0.0, GapRule::First),
            (100.0, GapRule::Delay),
            (50.0, GapRule::Delay),
            (20.0, GapRule::Delay)
        ]
    );
    assert_eq!(
        main[2].messages.as_ref().unwrap().extra.as_ref().unwrap()["temperature"],
        0
    );
    assert_eq!(main[3].output_length, 40);
    assert_eq!(main[1].origin.to_string(), "1 (turns[1])");
    // the fork child starts from root's history through turn 1 (3 messages) plus its own
    let notes = root.agents[2].requests[0].messages.as_ref().unwrap();
    let m = notes.messages.as_array().unwrap();
    assert_eq!(m.len(), 4);
    assert_eq!(m[2]["content"], "Now split the work.");
    assert_eq!(m[3]["content"], "Take notes of the plan.");
    // a spawned child starts empty
    let leaf = root.agents[5].requests[0].messages.as_ref().unwrap();
    assert_eq!(leaf.messages.as_array().unwrap().len(), 1);
    assert!(leaf.tools.is_some());
    // message_array_with_responses: each turn as written
    let solo = &c.conversations[1];
    let r = &solo.agents[0].requests;
    let m1 = r[1].messages.as_ref().unwrap().messages.as_array().unwrap();
    assert_eq!(m1.len(), 4);
    assert_eq!((r[1].gap.ms, r[1].gap.rule), (500.0, GapRule::Delay));
    assert_eq!(c.requests(), 13);
}

#[test]
fn formats_are_detected_and_forced() {
    let opts = |f| LoadOptions {
        format: Some(f),
        ..LoadOptions::default()
    };
    for (file, f) in [
        (
            "tracelab.jsonl",
            TraceFormat::from_name("tracelab").unwrap(),
        ),
        ("dynamo.jsonl", TraceFormat::from_name("dynamo").unwrap()),
        ("dag.jsonl", TraceFormat::from_name("dag_jsonl").unwrap()),
    ] {
        let forced = load(&trace_fixture(&format!("agent/{file}")), &opts(f)).unwrap();
        assert_eq!(forced, fixture(file));
        assert_eq!(TraceFormat::from_name(f.name()), Some(f));
    }
    // a TraceLab file forced as Dynamo: the first line's missing schema, named
    let e = load(
        &trace_fixture("agent/tracelab.jsonl"),
        &opts(TraceFormat::from_name("dynamo").unwrap()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.ends_with(
            "tracelab.jsonl:1: field `schema`: missing (expected \"dynamo.request.trace.v1\")"
        ),
        "{e}"
    );
    // the row reader refuses them with a pointer to the corpus reader
    let e = request_sim::trace::load(&trace_fixture("agent/dag.jsonl"), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("dag.jsonl:1: dag_jsonl is a corpus of agent conversations"),
        "{e}"
    );
}

/// (format, file content, line at fault, message after `path:line: `).
const BAD: &[(&str, &str, usize, &str)] = &[
    // TraceLab
    ("tracelab", r#"{"session_id":"s","round_index":0,"prefix_tokens":0,"output_tokens":1}"#, 1, "missing field `input_tokens_total`"),
    ("tracelab", "{\"session_id\":\"s\",\"round_index\":0,\"input_tokens_total\":5,\"prefix_tokens\":0,\"output_tokens\":1}\n{\"session_id\":\"s\",\"round_index\":1,\"input_tokens_total\":0,\"prefix_tokens\":0,\"output_tokens\":1}", 2, "field `input_tokens_total`: must be at least 1 (an empty prompt cannot be sent), found 0"),
    ("tracelab", r#"{"session_id":"","round_index":0,"input_tokens_total":5,"prefix_tokens":0,"output_tokens":1}"#, 1, "field `session_id`: expected a non-empty string or an integer, found the string \"\""),
    ("tracelab", r#"{"session_id":"s","round_index":0,"input_tokens_total":5,"prefix_tokens":0,"output_tokens":1,"timing_events":[{"event_type":"text","timestamp":"yesterday"}]}"#, 1, "field `timing_events[0].timestamp`: not an ISO-8601 time"),
    ("tracelab", r#"{"session_id":"s","round_index":0,"input_tokens_total":5,"prefix_tokens":-1,"output_tokens":1}"#, 1, "field `prefix_tokens`: invalid value: integer `-1`, expected u64"),
    ("tracelab", r#"{"session_id":"s","round_index":0,"input_tokens_total":5,"prefix_tokens":0,"output_tokens":1,"tools":[{"tool_wall_latency_ms":-4}]}"#, 1, "field `tools[0].tool_wall_latency_ms`: must be a number of ms >= 0, found -4"),
    // Dynamo
    ("dynamo", r#"{"schema":"dynamo.request.trace.v2","event_type":"request_end"}"#, 1, "field `schema`: unknown schema \"dynamo.request.trace.v2\" (this reader knows dynamo.request.trace.v1)"),
    ("dynamo", r#"{"timestamp":1,"event":{"schema":"dynamo.request.trace.v1","event_type":"request_start"}}"#, 1, "field `event.event_type`: unknown event type \"request_start\""),
    ("dynamo", r#"{"schema":"dynamo.request.trace.v1","event_type":"request_end","request":{"output_tokens":1,"request_received_ms":5}}"#, 1, "field `request`: missing field `replay`"),
    ("dynamo", r#"{"schema":"dynamo.request.trace.v1","event_type":"request_end","request":{"output_tokens":1,"request_received_ms":5,"replay":{"trace_block_size":4,"input_length":"4","input_sequence_hashes":[1]}}}"#, 1, "field `request.replay.input_length`: expected a non-negative integer, found the string \"4\""),
    ("dynamo", "{\"schema\":\"dynamo.request.trace.v1\",\"event_type\":\"request_end\",\"request\":{\"output_tokens\":1,\"request_received_ms\":5,\"replay\":{\"trace_block_size\":4,\"input_length\":4,\"input_sequence_hashes\":[1]}}}\n{\"schema\":\"dynamo.request.trace.v1\",\"event_type\":\"request_end\",\"request\":{\"output_tokens\":1,\"request_received_ms\":5,\"replay\":{\"trace_block_size\":8,\"input_length\":4,\"input_sequence_hashes\":[1]}}}", 2, "field `request.replay.trace_block_size`: 8 differs from 4 on line 1 (one block size per file)"),
    ("dynamo", r#"{"schema":"dynamo.request.trace.v1","event_type":"request_end","agent_context":{"trajectory_id":"a","parent_trajectory_id":"ghost"},"request":{"output_tokens":1,"request_received_ms":5,"replay":{"trace_block_size":4,"input_length":4,"input_sequence_hashes":[1]}}}"#, 1, "field `agent_context.parent_trajectory_id`: names trajectory \"ghost\", which has no request_end in the file"),
    ("dynamo", "{\"schema\":\"dynamo.request.trace.v1\",\"event_type\":\"request_end\",\"agent_context\":{\"trajectory_id\":\"a\",\"parent_trajectory_id\":\"b\"},\"request\":{\"output_tokens\":1,\"request_received_ms\":5,\"replay\":{\"trace_block_size\":4,\"input_length\":4,\"input_sequence_hashes\":[1]}}}\n{\"schema\":\"dynamo.request.trace.v1\",\"event_type\":\"request_end\",\"agent_context\":{\"trajectory_id\":\"b\",\"parent_trajectory_id\":\"a\"},\"request\":{\"output_tokens\":1,\"request_received_ms\":6,\"replay\":{\"trace_block_size\":4,\"input_length\":4,\"input_sequence_hashes\":[1]}}}", 1, "field `agent_context.parent_trajectory_id`: trajectories form a cycle: a -> b -> a"),
    ("dynamo", "{\"schema\":\"dynamo.request.trace.v1\",\"event_type\":\"request_end\",\"agent_context\":{\"trajectory_id\":\"a\"},\"request\":{\"output_tokens\":1,\"request_received_ms\":5,\"replay\":{\"trace_block_size\":4,\"input_length\":4,\"input_sequence_hashes\":[1]}}}\n{\"schema\":\"dynamo.request.trace.v1\",\"event_type\":\"request_end\",\"agent_context\":{\"trajectory_id\":\"a\",\"parent_trajectory_id\":\"a\"},\"request\":{\"output_tokens\":1,\"request_received_ms\":6,\"replay\":{\"trace_block_size\":4,\"input_length\":4,\"input_sequence_hashes\":[1]}}}", 2, "field `agent_context.parent_trajectory_id`: trajectory \"a\" has parent \"a\" here but none on line 1"),
    ("dynamo", r#"{"schema":"dynamo.request.trace.v1","event_type":"tool_end"}"#, 0, "no requests to replay: no request_end records (1 other events)"),
    // dag_jsonl
    ("dag_jsonl", r#"{"session_id":"r","turns":[]}"#, 1, "field `turns`: must hold at least one turn"),
    ("dag_jsonl", r#"{"session_id":"r","turns":[{"max_tokens":3}]}"#, 1, "field `turns[0].messages`: missing (every turn sends messages)"),
    ("dag_jsonl", r#"{"session_id":"r","turns":[{"messages":[{"role":"user","content":"x"}],"max_token":3}]}"#, 1, "field `turns[0].max_token`: unknown key"),
    ("dag_jsonl", r#"{"session_id":"r","turns":[{"messages":[{"role":"user","content":"x"}],"spawns":["ghost"]}]}"#, 1, "field `turns[0].spawns[0]`: names session \"ghost\", which no line of the file declares"),
    ("dag_jsonl", "{\"session_id\":\"r\",\"turns\":[{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"spawns\":[\"a\"]}]}\n{\"session_id\":\"a\",\"turns\":[{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"spawns\":[\"b\"]}]}\n{\"session_id\":\"b\",\"turns\":[{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"spawns\":[\"a\"]}]}", 2, "field `session_id`: sessions form a cycle: a -> b -> a"),
    ("dag_jsonl", "{\"session_id\":\"r\",\"turns\":[{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}]}\n{\"session_id\":\"r\",\"turns\":[{\"messages\":[{\"role\":\"user\",\"content\":\"y\"}]}]}", 2, "field `session_id`: duplicate session id \"r\" (first on line 1)"),
    ("dag_jsonl", r#"{"session_id":"r","turns":[{"messages":[{"role":"user","content":"x"}],"spawns":[{"children":["r"],"join_at":0}]}]}"#, 1, "field `turns[0].spawns[0].join_at`: must be a turn index after this turn (0)"),
    ("dag_jsonl", r#"{"session_id":"r","turns":[{"messages":[{"role":"user","content":"x"}],"forks":["a"]},{"messages":[{"role":"user","content":"y"}]}]}"#, 1, "field `turns[0].forks[0]`: a bare fork ends its conversation"),
    ("dag_jsonl", r#"{"session_id":"r","context_mode":"stateless","turns":[{"messages":[{"role":"user","content":"x"}]}]}"#, 1, "field `context_mode`: unknown value \"stateless\""),
    ("dag_jsonl", r#"{"session_id":"start","orchestrator":true,"spawns":["a"]}"#, 1, "field `orchestrator`: orchestrator conversations"),
    ("dag_jsonl", r#"{"session_id":"r","turns":[{"messages":[{"role":"robot","content":"x"}]}]}"#, 1, "field `turns[0].messages[0].role`"),
    ("dag_jsonl", r#"{"session_id":"r","turns":[{"messages":[{"role":"user","content":"x"}],"delay":-1}]}"#, 1, "field `turns[0].delay`: must be a number of ms >= 0, found -1"),
];

#[test]
fn bad_input_is_one_error_with_file_and_line() {
    for (name, text, line, msg) in BAD {
        let format = TraceFormat::from_name(name).unwrap();
        for forced in [Some(format), None] {
            let opts = LoadOptions {
                format: forced,
                ..LoadOptions::default()
            };
            let e =
                read("bad.jsonl", text.as_bytes(), &opts).expect_err(&format!("{format:?} {text}"));
            let want = if *line == 0 {
                format!("bad.jsonl: {msg}")
            } else {
                format!("bad.jsonl:{line}: {msg}")
            };
            let got = e.to_string();
            // detection of a broken first line may choose another format; the forced read
            // must give exactly the message
            if forced.is_some() {
                assert!(
                    got.starts_with(&want),
                    "{format:?}: got {got:?}, want {want:?}"
                );
            } else {
                assert!(got.starts_with("bad.jsonl:"), "{got}");
            }
        }
    }
}

mod analyze {
    use request_sim::analyze::agents::{analyze_agents, AgentAnalyzeOptions};
    use request_sim::report::analysis::render_agent_analysis;
    use request_sim::trace::formats::agents::read;
    use request_sim::trace::{LoadOptions, TraceFormat};

    use super::fixture;

    fn opts(cap_s: f64, users: usize) -> AgentAnalyzeOptions {
        AgentAnalyzeOptions {
            max_idle_gap_ms: Some(cap_s * 1e3),
            users: Some(users),
            ..AgentAnalyzeOptions::default()
        }
    }

    #[test]
    fn dynamo_corpus_shape_gaps_hits_and_users() {
        let a = analyze_agents(&fixture("dynamo.jsonl"), &opts(0.55, 8));
        assert_eq!((a.conversations, a.requests), (2, 9));
        assert_eq!(
            (a.subagents, a.joined_subagents, a.background_subagents),
            (3, 2, 1)
        );
        assert_eq!(a.conversations_with_subagents, 1);
        assert_eq!(a.max_depth, 2);
        assert_eq!(a.agents_per_depth, [2, 2, 1]);
        // gaps between consecutive requests: main 500, 500 (after join), 600; researcher 200
        assert_eq!(a.gaps.ms.count, 4);
        assert_eq!(a.gaps.ms.max_ms, 600.0);
        assert_eq!(a.gaps.ms.p50_ms, 500.0);
        assert_eq!(a.gaps.over_cap, 1);
        assert_eq!(a.gaps.rules["after_join"], 1);
        assert_eq!(a.gaps.rules["start_minus_server"], 3);
        // hits of an infinite cache in trace order (ids shared by the whole file):
        // 8 + 4 + 12 + 4 + 16 (planner tree) + 4 (solo) = 48 of 80 tokens
        assert!(
            (a.ideal_hit_ratio - 0.6).abs() < 1e-12,
            "{}",
            a.ideal_hit_ratio
        );
        assert_eq!(a.ideal_hit_ratio_shared_prefix, a.ideal_hit_ratio);
        // walls 7200 + 50 ms, server time 6250 ms, at most 2 requests at once
        let u = a.users.as_ref().unwrap();
        assert!((u.mean_in_flight - 8.0 * 6250.0 / 7250.0).abs() < 1e-9);
        assert_eq!(u.peak_in_flight_bound, 16);
        assert!((u.request_rate_per_s - 8.0 * 9.0 / 7.25).abs() < 1e-9);
        let text = render_agent_analysis(&a, TraceFormat::from_name("dynamo").unwrap());
        for line in [
            "Subagents:                               3",
            "Max depth:                               2",
            "Gaps over 0.55 s (capped):               1",
            "Hit ratio (infinite cache):              60.00%",
            "Requests in flight (mean):               6.90",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
    }

    #[test]
    fn tracelab_hits_with_and_without_a_shared_system_prefix() {
        let a = analyze_agents(&fixture("tracelab.jsonl"), &opts(10.0, 1));
        // 15 + 10 + 20 blocks of s1 and 4 of s2 reused, 64 tokens each, of 5,600 tokens
        assert!((a.ideal_hit_ratio - 3136.0 / 5600.0).abs() < 1e-12);
        assert_eq!(a.gaps.over_cap, 1); // the 30 s away
        assert_eq!(a.max_depth, 0);
        // two sessions whose first round reuses the same 640-token client prefix: shared,
        // the second session's 10 prefix blocks hit
        let two = (0..2)
            .map(|i| {
                format!(
                    "{{\"session_id\":\"s{i}\",\"round_index\":0,\"input_tokens_total\":704,\"prefix_tokens\":640,\"output_tokens\":1}}\n"
                )
            })
            .collect::<String>();
        let c = read("two.jsonl", two.as_bytes(), &LoadOptions::default()).unwrap();
        let a = analyze_agents(&c, &AgentAnalyzeOptions::default());
        assert_eq!(a.ideal_hit_ratio, 0.0);
        assert!((a.ideal_hit_ratio_shared_prefix - 640.0 / 1408.0).abs() < 1e-12);
        assert!(a.users.is_none());
    }

    #[test]
    fn the_analyze_command_reads_every_agent_format() {
        // the Weka fixture corpus (a directory) through the command's loader
        let dir = crate::support::data_path("agents");
        let (c, f) = request_sim::trace::formats::agents::load(&dir, &LoadOptions::default())
            .unwrap()
            .unwrap();
        assert_eq!(f, TraceFormat::from_name("weka").unwrap());
        let a = analyze_agents(&c, &AgentAnalyzeOptions::default());
        assert_eq!(
            (a.conversations, a.requests, a.subagents, a.joined_subagents),
            (3, 21, 4, 3)
        );
        let out = crate::support::command(
            env!("CARGO_BIN_EXE_request-sim"),
            [
                "analyze",
                crate::support::trace_fixture("agent/dynamo.jsonl.gz")
                    .to_str()
                    .unwrap(),
                "--json",
                "--users",
                "2",
            ],
            &[],
        )
        .output()
        .unwrap();
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["subagents"], 3);
        assert_eq!(v["max_depth"], 2);
        assert_eq!(v["users"]["users"], 2);
    }

    #[test]
    fn dag_corpus_counts_messages_apart() {
        let a = analyze_agents(&fixture("dag.jsonl"), &opts(0.2, 4));
        assert_eq!((a.conversations, a.requests, a.subagents), (2, 13, 6));
        assert_eq!((a.joined_subagents, a.background_subagents), (4, 2));
        assert_eq!(a.agents_per_depth, [2, 4, 2]);
        assert_eq!(a.message_requests, 13);
        assert_eq!(a.gaps.rules["delay"], 5);
        assert_eq!(a.gaps.over_cap, 1); // solo's 500 ms
                                        // no server times: no load estimate
        assert!(a.users.is_none());
    }
}
