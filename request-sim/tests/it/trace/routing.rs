//! `analyze --instances N --routing POLICY`: the routing what-if on generated multi-turn
//! traces, one hand-checked case and the directions the policies must take.

use llm_sim::routing::Policy;
use request_sim::analyze::{analyze, AnalyzeOptions, RoutingAnalysis, RoutingOptions};
use request_sim::report::render_analysis;
use request_sim::trace::{parse_reader, LoadOptions, Trace, TraceFormat};

/// A generic-format trace: `sessions` conversations of `turns` turns, interleaved (turn t of
/// every conversation, then turn t + 1, ...). Every prompt starts with the shared system block
/// 0; each turn resends the conversation's history and adds `grow` new blocks. Blocks of 16
/// tokens; with `session_ids`, rows carry their conversation's id.
fn conversations(sessions: u64, turns: u64, grow: u64, session_ids: bool) -> Trace {
    let mut text = String::new();
    let mut t = 0;
    let mut next_id = 1u64;
    let mut history: Vec<Vec<u64>> = vec![vec![0]; sessions as usize];
    for _ in 0..turns {
        for (s, h) in history.iter_mut().enumerate() {
            for _ in 0..grow {
                h.push(next_id);
                next_id += 1;
            }
            let ids: Vec<String> = h.iter().map(u64::to_string).collect();
            let sid = if session_ids {
                format!(r#","session_id":"conv-{s}""#)
            } else {
                String::new()
            };
            text.push_str(&format!(
                r#"{{"timestamp":{t},"input_length":{},"output_length":4,"hash_ids":[{}]{sid}}}"#,
                h.len() * 16,
                ids.join(",")
            ));
            text.push('\n');
            t += 100;
        }
    }
    let opts = LoadOptions {
        // Rows like these would be detected as Mooncake, which has no session ids.
        format: Some(TraceFormat::from_name("generic").unwrap()),
        block_size: Some(16),
        ..LoadOptions::default()
    };
    parse_reader("conversations.jsonl", text.as_bytes(), &opts).unwrap()
}

fn routing(trace: &Trace, instances: usize, capacity_tokens: u64) -> RoutingAnalysis {
    let opts = AnalyzeOptions {
        routing: Some(RoutingOptions {
            instances,
            policies: Vec::new(),
            capacity_tokens,
        }),
        ..AnalyzeOptions::default()
    };
    analyze(trace, &opts).routing.expect("routing analysis")
}

fn ratio(r: &RoutingAnalysis, p: Policy) -> f64 {
    r.policies
        .iter()
        .find(|x| x.policy == p.name())
        .map(|x| x.hit_ratio)
        .unwrap()
}

#[test]
fn hand_checked_three_conversations_on_two_instances() {
    // 3 conversations x 2 turns, 1 new block per turn, ample caches. Prompts (blocks):
    //   r0 c0 [0,1]  r1 c1 [0,2]  r2 c2 [0,3]   r3 c0 [0,1,4]  r4 c1 [0,2,5]  r5 c2 [0,3,6]
    // round-robin: 0,1,0,1,0,1. Hits (blocks of 16 tokens): r2 on 0 has [0] (1); r3 on 1
    // has [0] (1); r4 on 0: [0,2]? 2 went to 1: only [0] (1); r5 on 1: [0] (1) -> 4 blocks.
    // session: each conversation on one instance, its turn 2 hits its whole history (2 blocks
    // each = 6), and block 0 on an instance that already saw another conversation.
    let t = conversations(3, 2, 1, true);
    let r = routing(&t, 2, 1_000 * 16);
    let input = (2 * 3 + 3 * 3) * 16;
    let rr = &r.policies[0];
    assert_eq!(rr.policy, "round-robin");
    assert_eq!(rr.hit_tokens, 4 * 16);
    assert_eq!(rr.requests_per_instance, vec![3, 3]);
    assert!((rr.hit_ratio - 64.0 / f64::from(input)).abs() < 1e-12);
    let session = r.policies.iter().find(|p| p.policy == "session").unwrap();
    let shared_zero = 3 - session
        .requests_per_instance
        .iter()
        .filter(|&&k| k > 0)
        .count() as u64;
    assert_eq!(session.hit_tokens, (6 + shared_zero) * 16);
    // One cache for everything: every turn 2 hits 2 blocks, every later block 0 hits.
    assert_eq!(
        r.single_cache_hit_ratio,
        f64::from((6 + 2) * 16) / f64::from(input)
    );
    // Offline, least-loaded sees equal loads: it is round-robin.
    assert_eq!(
        ratio(&r, Policy::LeastLoaded),
        ratio(&r, Policy::RoundRobin)
    );
}

#[test]
fn affinity_beats_round_robin_on_multi_turn_traffic() {
    // 23 conversations x 8 turns over 4 instances (23 so round-robin does not keep a
    // conversation on one instance by accident), each instance's cache large enough for its
    // share: affinity keeps each history where it is cached, round-robin scatters it.
    let t = conversations(23, 8, 3, true);
    let r = routing(&t, 4, 4_000 * 16);
    let (rr, session, prefix) = (
        ratio(&r, Policy::RoundRobin),
        ratio(&r, Policy::Session),
        ratio(&r, Policy::PrefixAware),
    );
    assert!(session > rr + 0.3, "session {session} vs round-robin {rr}");
    assert!(
        prefix > rr + 0.3,
        "prefix-aware {prefix} vs round-robin {rr}"
    );
    assert!(session <= r.single_cache_hit_ratio && prefix <= r.single_cache_hit_ratio);
    for p in &r.policies {
        assert_eq!(p.requests_per_instance.iter().sum::<u64>(), 23 * 8);
    }
    // Without session ids the session policy has nothing to pin: round-robin again, while
    // prefix-aware needs none.
    let anonymous = conversations(23, 8, 3, false);
    let r2 = routing(&anonymous, 4, 4_000 * 16);
    assert_eq!(ratio(&r2, Policy::Session), ratio(&r2, Policy::RoundRobin));
    assert_eq!(ratio(&r2, Policy::PrefixAware), prefix);
    // Tiny caches: everyone's history is evicted before its next turn; affinity cannot help.
    let r3 = routing(&t, 4, 4 * 16);
    assert!(ratio(&r3, Policy::Session) < 0.1);
    let text = render_analysis(&analyze(
        &t,
        &AnalyzeOptions {
            routing: Some(RoutingOptions {
                instances: 4,
                policies: vec![Policy::Session],
                capacity_tokens: 64_000,
            }),
            ..AnalyzeOptions::default()
        },
    ));
    assert!(
        text.contains("Routing what-if: 4 instances, 64,000 tokens of prefix cache each"),
        "{text}"
    );
    assert!(text.contains("session "), "{text}");
    assert!(!text.contains("round-robin "), "{text}");
}
