//! The JSONL agent formats (TraceLab, Dynamo, `dag_jsonl`) replayed against llm-sim, one
//! fixture each, checked from the records: one record per scheduled request, all answered, no
//! request before its predecessor's completion plus its client gap, no joining request before
//! the subagents it joins finished, subagents under their own session ids.

use std::path::Path;

use crate::support::*;
use request_sim::record::{Record, Status};
use request_sim::trace::pipeline::plan::{plan, PlanOptions};
use request_sim::trace::LoadOptions;

/// When a record's request completed (ms on the run's clock).
fn done_ms(r: &Record) -> f64 {
    r.sent_ms.unwrap() + r.done_ms.or(r.e2e_ms).unwrap()
}

/// Replays fixture `name` with gaps capped at 50 ms; returns the records and the number of
/// joins checked.
fn replay_fixture(name: &str, dir: &Path) -> (Vec<Record>, usize) {
    let path = trace_fixture(&format!("agent/{name}"));
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let mut args = base_args(&sim.base_url(), &path, dir);
    args.extend(["--max-idle-gap".to_string(), "0.05".to_string()]);
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0, "{name}");
    let recs = read_records_by_index(&dir.join("records.jsonl"));
    // The layout the run used (same corpus, seed and cap).
    let (corpus, format) =
        request_sim::trace::formats::agents::load(&path, &LoadOptions::default())
            .unwrap()
            .unwrap();
    let (trace, _) = plan(
        &corpus,
        format,
        &PlanOptions {
            seed: 7,
            max_idle_gap_ms: Some(50.0),
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        recs.len(),
        trace.requests.len(),
        "{name}: records = scheduled"
    );
    assert_eq!(trace.requests.len(), corpus.requests(), "{name}");
    assert_one_record_per_index(&recs, trace.requests.len());
    let mut joins = 0;
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{name}: {r:?}");
        let turn = trace.sessions.get(r.index).unwrap();
        assert_record_names_its_agent(r, turn);
        let agent = turn.agent.as_ref().unwrap();
        let sent = r.sent_ms.unwrap();
        let gap = turn.trace_gap_ms.unwrap_or(0.0);
        assert!(gap <= 50.0 + 1e-9, "{name}: the cap holds");
        if let Some(p) = r.parent_index {
            assert!(
                sent + 0.002 >= done_ms(&recs[p]) + gap,
                "{name}: request {} sent at {sent} ms before its predecessor {p} ended + {gap} ms",
                r.index
            );
        }
        for &j in agent.joins.iter() {
            joins += 1;
            assert!(
                sent + 0.002 >= done_ms(&recs[j]) + gap,
                "{name}: request {} sent before the subagent request {j} it joins ended",
                r.index
            );
        }
    }
    (recs, joins)
}

#[test]
fn tracelab_fixture_replays_closed_loop() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, joins) = replay_fixture("tracelab.jsonl", dir.path());
    assert_eq!((recs.len(), joins), (6, 0));
    // the minted ids give the trace's prompt lengths
    let mut inputs: Vec<u32> = recs.iter().map(|r| r.input_length).collect();
    inputs.sort();
    assert_eq!(inputs, [300, 400, 1000, 1200, 1300, 1400]);
}

#[test]
fn dynamo_fixture_replays_subagents_and_joins() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, joins) = replay_fixture("dynamo.jsonl", dir.path());
    // the planner's request 2 joins the researcher, the researcher's request 1 its child
    assert_eq!((recs.len(), joins), (9, 2));
    let agents: std::collections::BTreeSet<&str> =
        recs.iter().filter_map(|r| r.agent.as_deref()).collect();
    assert_eq!(
        agents.into_iter().collect::<Vec<_>>(),
        [
            "main",
            "run42:bg",
            "run42:researcher",
            "run42:researcher:child"
        ]
    );
}

#[test]
fn dag_fixture_replays_messages_with_spawns_and_joins() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, joins) = replay_fixture("dag.jsonl", dir.path());
    // critic joined by root turn 1, both workers by turn 3, leaf by worker-a's turn 1
    assert_eq!((recs.len(), joins), (13, 4));
}

#[test]
fn dag_live_history_threads_answers_into_turns_and_forks_not_spawns() {
    let server = RawServer::start(Script::sse(&[
        chat_chunk("ANSWER").as_bytes(),
        chat_usage_done(5, 1).as_bytes(),
    ]));
    let dir = tempfile::tempdir().unwrap();
    let path = trace_fixture("agent/dag.jsonl");
    let mut args = base_args(&server.url("/v1/chat/completions"), &path, dir.path());
    args.extend(
        [
            "--live-history",
            "--timing",
            "closed",
            "--max-idle-gap",
            "0.05",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0);
    let bodies: Vec<Vec<serde_json::Value>> = server
        .generation_requests()
        .iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            v["messages"].as_array().unwrap().clone()
        })
        .collect();
    assert_eq!(bodies.len(), 13);
    // the body whose last message is `last`, as (role, content) pairs
    let body = |last: &str| -> Vec<(String, String)> {
        let b = bodies
            .iter()
            .find(|m| m.last().unwrap()["content"] == last)
            .unwrap_or_else(|| panic!("no body ends with {last:?}"));
        b.iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_owned(),
                    m["content"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    };
    let pair = |r: &str, c: &str| (r.to_owned(), c.to_owned());
    // root's turn 1: its history with turn 0's live answer in place
    assert_eq!(
        body("Now split the work."),
        [
            pair("system", "You are a planner."),
            pair("user", "Plan the refactor."),
            pair("assistant", "ANSWER"),
            pair("user", "Now split the work."),
        ]
    );
    // the fork child inherits root's history through turn 1, both answers threaded in
    assert_eq!(
        body("Take notes of the plan."),
        [
            pair("system", "You are a planner."),
            pair("user", "Plan the refactor."),
            pair("assistant", "ANSWER"),
            pair("user", "Now split the work."),
            pair("assistant", "ANSWER"),
            pair("user", "Take notes of the plan."),
        ]
    );
    // a spawned subagent starts empty; its own later turn gets its own answer
    assert_eq!(
        body("Find flaws."),
        [
            pair("system", "You are a critic."),
            pair("user", "Find flaws.")
        ]
    );
    assert_eq!(
        body("Finish part A."),
        [
            pair("system", "You are worker A."),
            pair("user", "Do part A."),
            pair("assistant", "ANSWER"),
            pair("user", "Finish part A."),
        ]
    );
    // message_array_with_responses: sent as written, except that --live-history puts the live
    // answer in place of the recorded one where a turn repeats its previous turn (as for a
    // `messages` trace)
    assert_eq!(
        body("Bye."),
        [
            pair("system", "Be brief."),
            pair("user", "Hello."),
            pair("assistant", "ANSWER"),
            pair("user", "Bye."),
        ]
    );
}

/// Issue #41: the TraceLab sample replayed with `--time-in-secs 60 --max-idle-gap 1` and no
/// `--users`/`--session-rate` was laid out as 210,526 conversations and 2,000,000 requests, all
/// starting at once. The time limit bounds the run: the corpus is sent once.
#[test]
fn a_time_limit_without_a_population_flag_sends_the_corpus_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace_fixture("agent/tracelab.jsonl");
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let mut args = base_args(&sim.base_url(), &path, dir.path());
    args.extend(
        ["--time-in-secs", "60", "--max-idle-gap", "1"]
            .iter()
            .map(|s| s.to_string()),
    );
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&dir.path().join("records.jsonl"));
    assert_eq!(recs.len(), 6, "records = the corpus's requests");
    assert_one_record_per_index(&recs, 6);
    assert!(recs.iter().all(|r| r.status == Status::Ok));
    let convs: std::collections::BTreeSet<&str> = recs
        .iter()
        .filter_map(|r| r.conversation.as_deref())
        .collect();
    assert_eq!(convs.len(), 2, "{convs:?}");
}

/// Issue #41: `--max-input-length` was refused on agent corpora, so a corpus with prompts over
/// a model's context could not be replayed. It cuts the longer prompts (counted in the
/// summary), each conversation still a prefix chain, and every request is sent.
#[test]
fn max_input_length_cuts_an_agent_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace_fixture("agent/tracelab.jsonl");
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let mut args = base_args(&sim.base_url(), &path, dir.path());
    args.extend(
        ["--max-input-length", "1100", "--max-idle-gap", "0.05"]
            .iter()
            .map(|s| s.to_string()),
    );
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&dir.path().join("records.jsonl"));
    assert_eq!(recs.len(), 6);
    assert!(recs.iter().all(|r| r.status == Status::Ok));
    let mut inputs: Vec<u32> = recs.iter().map(|r| r.input_length).collect();
    inputs.sort();
    assert_eq!(inputs, [300, 400, 1000, 1100, 1100, 1100]);
    let layout = outcome.summary.agents.unwrap().layout.unwrap();
    assert_eq!(
        (layout.max_input_length, layout.capped_inputs),
        (Some(1100), 3)
    );
}

/// Issue #41: in an agent run cut by `--time-in-secs`, the trace-ideal hit ratio (the run's and
/// the agent section's) is over the requests the server processed, in send order, never over
/// the turns the limit left unsent.
#[test]
fn a_cut_agent_run_ideal_counts_only_the_requests_sent() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace_fixture("agent/tracelab.jsonl");
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let mut args = base_args(&sim.base_url(), &path, dir.path());
    args.extend(
        ["--time-in-secs", "3", "--max-idle-gap", "5"]
            .iter()
            .map(|s| s.to_string()),
    );
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0);
    let s = outcome.summary;
    let recs = read_records_by_index(&dir.path().join("records.jsonl"));
    let mut sent: Vec<&Record> = recs.iter().filter(|r| r.sent_ms.is_some()).collect();
    // The 3 turns that cannot start before the limit are left out as the corpus is laid out
    // (counted in the layout), not laid out and then never sent.
    let layout = s.agents.as_ref().unwrap().layout.as_ref().unwrap();
    assert_eq!(
        (
            sent.len(),
            recs.len(),
            layout.past_limit,
            s.run.outcome.never_sent
        ),
        (3, 3, 3, 0),
        "the limit leaves out 3 of the 6 turns"
    );
    sent.sort_by(|a, b| a.sent_ms.unwrap().total_cmp(&b.sent_ms.unwrap()));
    let (corpus, format) =
        request_sim::trace::formats::agents::load(&path, &LoadOptions::default())
            .unwrap()
            .unwrap();
    let opts = PlanOptions {
        seed: 7,
        max_idle_gap_ms: Some(5000.0),
        ..PlanOptions::default()
    };
    let (trace, _) = plan(&corpus, format, &opts).unwrap();
    let mut cache = request_sim::analyze::IdealCache::new(trace.block_size, 1 << 20);
    let (mut hit, mut input) = (0u64, 0u64);
    for r in &sent {
        let req = &trace.requests[r.index];
        hit += u64::from(cache.hits(req).unwrap());
        input += u64::from(req.input_length);
    }
    let want = hit as f64 / input as f64;
    assert_eq!(s.cache.ideal_sent, Some(sent.len() as u64));
    assert!((s.cache.ideal_hit_ratio.unwrap() - want).abs() < 1e-12);
    let a = s.agents.unwrap();
    assert!((a.ideal_hit_ratio.unwrap() - want).abs() < 1e-12);
    assert!((a.routed_ideal_hit_ratio.unwrap() - want).abs() < 1e-12);
}

/// Issue #41: `--prefix-scale` and `--prompt-scale` were refused on agent corpora. They scale
/// every prompt by the flat trace's rule (each id the same copies wherever it appears), so
/// the conversations stay prefix chains, and every request is sent at its scaled length.
#[test]
fn prompt_and_prefix_scale_reshape_an_agent_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let path = trace_fixture("agent/tracelab.jsonl");
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let mut args = base_args(&sim.base_url(), &path, dir.path());
    args.extend(
        [
            "--prefix-scale",
            "2",
            "--prompt-scale",
            "0.5",
            "--max-idle-gap",
            "0.05",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records_by_index(&dir.path().join("records.jsonl"));
    assert_eq!(recs.len(), 6);
    assert!(recs.iter().all(|r| r.status == Status::Ok));
    let (mut corpus, format) =
        request_sim::trace::formats::agents::load(&path, &LoadOptions::default())
            .unwrap()
            .unwrap();
    let s = request_sim::trace::pipeline::plan::Scales {
        prefix: 2.0,
        prompt: 0.5,
        seed: 7,
    };
    assert_eq!(
        request_sim::trace::pipeline::plan::scale_prompts(&mut corpus, s),
        (6, 0)
    );
    let opts = PlanOptions {
        seed: 7,
        max_idle_gap_ms: Some(50.0),
        ..PlanOptions::default()
    };
    let (trace, _) = plan(&corpus, format, &opts).unwrap();
    for r in &recs {
        assert_eq!(r.input_length, trace.requests[r.index].input_length);
    }
    // The claude conversation's shared blocks doubled: its first prompt (1,000 tokens) grows.
    let mut inputs: Vec<u32> = recs.iter().map(|r| r.input_length).collect();
    inputs.sort();
    assert!(*inputs.last().unwrap() > 1400, "{inputs:?}");
    let layout = outcome.summary.agents.unwrap().layout.unwrap();
    assert_eq!(
        (
            layout.prefix_scale,
            layout.prompt_scale,
            layout.scaled_prompts
        ),
        (Some(2.0), Some(0.5), 6)
    );
}
