//! Agent corpora over loopback: a Weka corpus with fan-out, joins and a background subagent
//! replayed against llm-sim, checked from the records: no request before its predecessor's
//! completion plus its client gap, no joining request before its subagents finished, the
//! background subagent blocking nothing, subagents under their own session ids, one record
//! per scheduled request.

use std::path::Path;

use crate::support::*;
use request_sim::record::{Record, Status};
use request_sim::trace::formats::weka;
use request_sim::trace::pipeline::plan::{plan, PlanOptions, Population};
use request_sim::trace::TraceFormat;

/// When a record's request completed (ms on the run's clock).
fn done_ms(r: &Record) -> f64 {
    r.sent_ms.unwrap() + r.done_ms.or(r.e2e_ms).unwrap()
}

fn corpus_dir() -> std::path::PathBuf {
    data_path("agents")
}

fn replay_corpus(dir: &Path, extra: &[&str]) -> (Vec<Record>, request_sim::run::RunOutcome) {
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let mut args = base_args(&sim.base_url(), &corpus_dir(), dir);
    args.extend(extra.iter().map(|s| s.to_string()));
    let outcome = replay(&strs(&args));
    (read_records_by_index(&dir.join("records.jsonl")), outcome)
}

#[test]
fn subagents_fan_out_join_and_run_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, outcome) = replay_corpus(dir.path(), &[]);
    assert_eq!(outcome.exit_code, 0);
    // The layout the run used (same corpus, same seed): which requests each one waits for.
    let corpus = weka::load(&corpus_dir()).unwrap();
    let (trace, facts) = plan(
        &corpus,
        TraceFormat::from_name("weka").unwrap(),
        &PlanOptions {
            seed: 7,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(facts.conversations, 3);
    assert_eq!(facts.subagents, 4);
    assert_eq!(facts.joined_subagents, 3);
    assert_eq!(
        recs.len(),
        trace.requests.len(),
        "one record per scheduled request"
    );
    assert_one_record_per_index(&recs, trace.requests.len());
    let mut joined = 0;
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        let turn = trace.sessions.get(r.index).unwrap();
        assert_record_names_its_agent(r, turn);
        let agent = turn.agent.as_ref().unwrap();
        assert_eq!(r.session_id.as_deref(), Some(&*turn.id));
        let sent = r.sent_ms.unwrap();
        let gap = turn.trace_gap_ms.unwrap_or(0.0);
        if let Some(p) = r.parent_index {
            assert_eq!(turn.parent_index, Some(p));
            let think = r
                .think_ms
                .expect("a released request records its client gap");
            assert!((think - gap).abs() < 0.01, "{r:?}: gap {gap}");
            assert!(
                sent + 0.002 >= done_ms(&recs[p]) + gap,
                "request {} sent at {sent} ms before its predecessor {p} ended + {gap} ms",
                r.index
            );
        }
        for &j in agent.joins.iter() {
            joined += 1;
            assert!(
                sent + 0.002 >= done_ms(&recs[j]) + gap,
                "request {} sent at {sent} ms before the subagent request {j} it joins ended",
                r.index
            );
        }
        if !agent.joins.is_empty() {
            assert_eq!(r.joins, Some(agent.joins.len() as u32), "{r:?}");
            assert!(r.join_wait_ms.is_some(), "{r:?}");
        }
    }
    assert_eq!(joined, 3, "the joins of the corpus were checked");
    // The background subagent of `fanout` blocked nothing: the main agent's last request went
    // out before the background's last request completed, and nothing waits for it.
    let of = |agent: &str| -> Vec<&Record> {
        recs.iter()
            .filter(|r| {
                r.conversation.as_deref() == Some("fanout") && r.agent.as_deref() == Some(agent)
            })
            .collect()
    };
    let (main, bg) = (of("main"), of("bg"));
    assert_eq!((main.len(), bg.len()), (4, 3));
    let bg_last = bg.iter().map(|r| r.index).max().unwrap();
    assert!(trace
        .sessions
        .turns
        .iter()
        .flatten()
        .all(|t| t.waits().all(|w| w != bg_last)));
    let main_last_sent = main.iter().map(|r| r.sent_ms.unwrap()).fold(0.0, f64::max);
    assert!(
        main_last_sent < done_ms(bg.iter().find(|r| r.index == bg_last).unwrap()),
        "the main agent finished while its background subagent still ran"
    );
    // The summary's agent section.
    let summary = read_summary_file(&summary_path(&dir.path().join("records.jsonl")));
    let a = summary.agents.expect("an agent section");
    assert_eq!((a.conversations, a.conversations_completed), (3, 3));
    assert_eq!((a.subagents_spawned, a.subagents_joined), (4, 3));
    assert!(a.wall_time_p50_s.is_some() && a.trace_wall_time_p50_s.is_some());
    // One instance: the routed ideal is the run's own trace-ideal over the requests sent.
    assert_eq!(a.instances_served, Some(1));
    let (routed, ideal) = (
        a.routed_ideal_hit_ratio.unwrap(),
        a.ideal_hit_ratio.unwrap(),
    );
    assert!(
        routed > 0.3 && (routed - ideal).abs() < 0.02,
        "{routed} vs {ideal}"
    );
}

#[test]
fn users_take_conversations_one_after_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, outcome) = replay_corpus(dir.path(), &["--users", "1", "--max-idle-gap", "0.05"]);
    assert_eq!(outcome.exit_code, 0);
    let corpus = weka::load(&corpus_dir()).unwrap();
    let (trace, facts) = plan(
        &corpus,
        TraceFormat::from_name("weka").unwrap(),
        &PlanOptions {
            seed: 7,
            population: Population::Users(1),
            max_idle_gap_ms: Some(50.0),
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(recs.len(), trace.requests.len());
    assert!(facts.capped_gaps > 0);
    // One user: a conversation starts only after every request of the one before it ended.
    let mut spans: Vec<(String, f64, f64)> = Vec::new();
    for conv in ["fanout", "plain", "nested"] {
        let rs: Vec<&Record> = recs
            .iter()
            .filter(|r| r.conversation.as_deref() == Some(conv))
            .collect();
        assert!(rs.iter().all(|r| r.status == Status::Ok));
        assert!(rs
            .iter()
            .all(|r| r.think_ms.is_none_or(|t| t <= 50.0 + 1e-6)));
        let first = rs
            .iter()
            .map(|r| r.sent_ms.unwrap())
            .fold(f64::MAX, f64::min);
        let last = rs.iter().map(|r| done_ms(r)).fold(0.0, f64::max);
        spans.push((conv.to_string(), first, last));
    }
    spans.sort_by(|a, b| a.1.total_cmp(&b.1));
    for w in spans.windows(2) {
        assert!(w[1].1 + 0.002 >= w[0].2, "{spans:?}");
    }
    let summary = read_summary_file(&summary_path(&dir.path().join("records.jsonl")));
    let layout = summary.agents.unwrap().layout.unwrap();
    assert_eq!(
        (layout.users, layout.max_idle_gap_ms),
        (Some(1), Some(50.0))
    );
}

#[test]
fn agent_flags_need_an_agent_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_fixture("mooncake.jsonl");
    let mut args = base_args("http://127.0.0.1:9", &trace, dir.path());
    args.extend(["--users".to_string(), "2".to_string()]);
    let err = config(&strs(&args)).unwrap_err().to_string();
    assert!(err.contains("--users needs an agent corpus"), "{err}");
}

/// Issue #39 defect 8: `--timing closed --think-time 100` on an agent corpus was accepted and
/// ignored (the summary said "think time trace"): a fixed think time is refused; `trace`, what
/// a corpus uses, is accepted.
#[test]
fn a_fixed_think_time_is_refused_for_an_agent_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = base_args("http://127.0.0.1:9", &corpus_dir(), dir.path());
    args.extend(["--timing", "closed", "--think-time"].map(String::from));
    let mut fixed = args.clone();
    fixed.push("100".into());
    let err = config(&strs(&fixed)).unwrap_err().to_string();
    assert!(
        err.contains("--think-time with an agent corpus")
            && err.contains("the trace's own client gaps"),
        "{err}"
    );
    args.push("trace".into());
    assert!(config(&strs(&args)).is_ok());
}

/// `sweep --users 1,2` of the fixture corpus against a fresh llm-sim with a 5 s TTFT SLO,
/// into `sweep_dir`, with `extra` flags.
fn sweep_users(sweep_dir: &Path, extra: &[&str]) -> (u8, request_sim::sweep::SweepResult) {
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let url = sim.base_url();
    let corpus = corpus_dir();
    let mut args = vec![
        "--users",
        "1,2",
        "--sweep-dir",
        sweep_dir.to_str().unwrap(),
        "--endpoint",
        &url,
        "--dataset-path",
        corpus.to_str().unwrap(),
        "--goodput",
        "ttft:5000",
        "--seed",
        "5",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    sweep(&args)
}

#[test]
fn sweep_over_users_answers_how_many_users_fit() {
    let dir = tempfile::tempdir().unwrap();
    let sweep_dir = dir.path().join("sweep");
    let (code, r) = sweep_users(
        &sweep_dir,
        &["--time-in-secs", "2", "--max-idle-gap", "0.02"],
    );
    assert_eq!(code, 0);
    assert_eq!(r.points.len(), 2);
    assert_eq!(
        r.points.iter().map(|p| p.users).collect::<Vec<_>>(),
        vec![Some(1), Some(2)]
    );
    for p in &r.points {
        assert!(p.completed > 0 && p.good_fraction.is_some(), "{p:?}");
        assert!(Path::new(&p.dir).join("records.jsonl").exists());
    }
    assert!(r.answer.contains("users"), "{}", r.answer);
    assert!(r.capacity_users.is_some() || r.answer.contains("below"));
    let table = request_sim::sweep::render_table(&r);
    assert!(
        table.contains("1 usr") && table.contains("2 usr"),
        "{table}"
    );
    assert!(sweep_dir.join("sweep.png").is_file());
    // The chart's x axis is the number of users, not a rate.
    let svg = std::fs::read_to_string(sweep_dir.join("sweep.svg")).unwrap();
    for text in ["Served vs users", "TTFT vs users", "concurrent users"] {
        assert!(svg.contains(text), "sweep.svg has no {text:?}");
    }
    assert!(!svg.contains("served = offered"), "no rate diagonal");
}

/// Issue #39 (found by scripts/doc-commands.sh): a `dag_jsonl` file against an llm-sim without
/// a tokenizer was refused ("prompts cannot have the trace's token counts: built-in word
/// list ...") although every dag turn is sent as its messages, so no prompt is built from
/// the word list; like a `messages` trace, it replays.
#[test]
fn a_dag_trace_replays_against_a_server_without_a_vocabulary_listing() {
    let sim = start_sim(llm_sim::SimConfig::default());
    let url = sim.base_url();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dag.jsonl");
    let (code, _, stderr) = run_cli(
        [
            "replay",
            "--endpoint",
            &url,
            "--dataset-path",
            trace_fixture("agent/dag.jsonl").to_str().unwrap(),
            "--max-idle-gap",
            "0.02",
            "--output-path",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let recs = read_records_by_index(&out);
    assert_eq!(recs.len(), 13, "{stderr}");
    assert!(recs.iter().all(|r| r.status == Status::Ok), "{stderr}");
}

/// Issue #39: without --time-in-secs and --max-requests, a users point ran 300 s of repeated
/// conversations (up to 2,000 requests), so a sweep of a small corpus took minutes a point.
/// It replays the corpus once, repeated only as far as gives every user a conversation (the
/// test corpus: 3 conversations, 21 requests; 4 users take two passes), and says so.
#[test]
fn a_users_sweep_point_replays_the_corpus_once_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let sweep_dir = dir.path().join("sweep");
    let started = std::time::Instant::now();
    let (code, _, stderr) = run_cli(
        [
            "sweep",
            "--users",
            "1,4",
            "--sweep-dir",
            sweep_dir.to_str().unwrap(),
            "--dataset-path",
            corpus_dir().to_str().unwrap(),
            "--dry-run",
            "--max-idle-gap",
            "0.02",
            "--quiet",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("every point replays the corpus once (3 conversations, 21 requests"),
        "{stderr}"
    );
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    for (users, want) in [(1, 21), (4, 42)] {
        let recs = read_records_by_index(&sweep_dir.join(format!("users-{users}/records.jsonl")));
        assert_eq!(recs.len(), want, "{users} users");
        assert!(
            recs.iter().all(|r| r.status != Status::Cancelled),
            "{users} users: the time limit cut none"
        );
    }
}

/// Requests the time limit cuts (a conversation still running at the end) are neither good nor
/// bad: a fast server carries every point of a users sweep even when `--time-in-secs` cuts
/// conversations short.
#[test]
fn a_users_sweep_does_not_count_cut_requests_against_the_slo() {
    let dir = tempfile::tempdir().unwrap();
    let sweep_dir = dir.path().join("sweep");
    let (code, r) = sweep_users(&sweep_dir, &["--time-in-secs", "0.5"]);
    assert_eq!(code, 0);
    for p in &r.points {
        let recs = read_records_by_index(&Path::new(&p.dir).join("records.jsonl"));
        let cut = recs
            .iter()
            .filter(|r| r.status == Status::Cancelled)
            .count();
        assert!(cut > 0, "the time limit cut no request: {p:?}");
        assert_eq!(p.good_fraction, Some(1.0), "{p:?}");
        // A sent request the run cut says when the cut came.
        for r in recs.iter().filter(|r| r.status == Status::Cancelled) {
            assert_eq!(r.sent_ms.is_some(), r.cut_ms.is_some(), "{r:?}");
        }
    }
    assert_eq!(r.capacity_users, Some(2), "{}", r.answer);
}

/// `sweep --users USERS` of the test corpus, a dry run of at most 0.5 s a point, with `extra`
/// flags, into `sweep/` of a new temporary directory: the directory, the sweep directory's
/// path, the exit code and stderr.
fn users_sweep(
    users: &str,
    extra: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let sweep_dir = dir.path().join("sweep");
    let corpus = corpus_dir();
    let mut argv = vec![
        "sweep",
        "--users",
        users,
        "--sweep-dir",
        sweep_dir.to_str().unwrap(),
        "--dataset-path",
        corpus.to_str().unwrap(),
        "--dry-run",
        "--time-in-secs",
        "0.5",
        "--quiet",
    ];
    argv.extend_from_slice(extra);
    let (code, _, stderr) = run_cli(argv, &[]);
    (dir, sweep_dir, code, stderr)
}

/// Issue #39, defect 3: `sweep --users 1,1` would run both points into `users-1/`, the second
/// overwriting the first. Like `--scale-factors 1,1`, it is refused before anything runs, and
/// no point directory is made.
#[test]
fn a_users_sweep_refuses_a_number_given_twice() {
    let (_dir, sweep_dir, code, stderr) = users_sweep("1,2,1", &["--max-idle-gap", "0.02"]);
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("--users: 1 is given twice") && stderr.contains("users-1"),
        "{stderr}"
    );
    assert!(!sweep_dir.join("users-1").exists());
}

/// Issue #39: a `sweep --users` refused by the replay's checks (here a fixed --think-time,
/// which an agent corpus refuses) left an empty sweep directory behind; it makes none.
#[test]
fn a_refused_users_sweep_leaves_no_sweep_directory() {
    let (_dir, sweep_dir, code, stderr) = users_sweep("1,2", &["--think-time", "100"]);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("--think-time"), "{stderr}");
    assert!(!sweep_dir.exists(), "{stderr}");
}

/// A one-agent corpus whose three requests are 2 s of think time apart (0.05 s each on the
/// server): 4.15 s of trace wall time, 0.35 s with the gaps capped at 0.1 s.
fn write_long_gap_corpus(dir: &Path) -> std::path::PathBuf {
    let corpus = dir.join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    let req = |t: f64, ids: &str, think: f64| {
        format!(
            r#"{{"t":{t},"type":"s","model":"m","in":128,"out":4,"hash_ids":[{ids}],"input_types":["text"],"output_types":["text"],"stop":"","api_time":0.05,"think_time":{think}}}"#
        )
    };
    let text = format!(
        r#"{{"id":"long","models":["m"],"block_size":16,"hash_id_scope":"local","requests":[{},{},{}]}}"#,
        req(0.0, "1,2,3,4,5,6,7,8", 0.0),
        req(2.05, "1,2,3,4,5,6,7,9", 2.0),
        req(4.1, "1,2,3,4,5,6,7,10", 2.0)
    );
    std::fs::write(corpus.join("long.json"), text).unwrap();
    corpus
}

/// The conversation's trace wall time the layout puts on its first request.
fn planned_trace_ms(corpus: &Path, cap_ms: Option<f64>) -> f64 {
    let (trace, facts) = plan(
        &weka::load(corpus).unwrap(),
        TraceFormat::from_name("weka").unwrap(),
        &PlanOptions {
            max_idle_gap_ms: cap_ms,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    assert_eq!(facts.capped_gaps, if cap_ms.is_some() { 2 } else { 0 });
    let turn = trace.sessions.get(trace.requests[0].index).unwrap();
    turn.agent.as_ref().unwrap().conversation_trace_ms.unwrap()
}

/// Issue #39 defect 10: the agent summary's "Trace wall time" was the uncapped recorded time
/// beside a run whose gaps `--max-idle-gap` capped (4.15 s against a 0.35 s run). With the cap
/// it is the trace's wall time with the same capped gaps, and its label says so.
#[test]
fn trace_wall_time_uses_the_capped_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = write_long_gap_corpus(dir.path());
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    let uncapped = planned_trace_ms(&corpus, None);
    assert!(close(uncapped, 4150.0), "{uncapped}");
    let capped = planned_trace_ms(&corpus, Some(100.0));
    assert!(close(capped, 350.0), "{capped}");
    // The replay's summary.
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut args = base_args(&sim.base_url(), &corpus, &out);
    args.extend(["--max-idle-gap", "0.1"].map(String::from));
    let outcome = replay(&strs(&args));
    assert_eq!(outcome.exit_code, 0);
    let summary = read_summary_file(&summary_path(&out.join("records.jsonl")));
    let a = summary.agents.as_ref().expect("an agent section");
    assert_eq!(a.conversations_completed, 1);
    let t = a.trace_wall_time_p50_s.unwrap();
    assert!((t - 0.35).abs() < 1e-6, "trace wall time {t} s");
    let text = request_sim::report::console::render_console(&summary);
    assert!(
        text.contains("Trace wall time, gaps ≤ 0.1 s, p50 / p99 (s):"),
        "{text}"
    );
}

/// Issue #41: `--sample-sessions` was refused on agent corpora. It keeps whole conversations
/// (seeded by `--seed`), sends every request of those kept, and counts those left out.
#[test]
fn sample_sessions_keeps_whole_conversations_of_an_agent_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, outcome) = replay_corpus(
        dir.path(),
        &["--sample-sessions", "0.5", "--max-idle-gap", "0.02"],
    );
    assert_eq!(outcome.exit_code, 0);
    let mut corpus = weka::load(&corpus_dir()).unwrap();
    let out =
        request_sim::trace::pipeline::plan::sample_conversations(&mut corpus, 0.5, 7).unwrap();
    let layout = outcome.summary.agents.unwrap().layout.unwrap();
    assert_eq!(
        (
            layout.sampled_out,
            layout.conversations,
            layout.corpus_conversations
        ),
        (out, corpus.conversations.len(), 3)
    );
    assert!(out > 0 && out < 3, "{out}");
    assert_eq!(recs.len(), corpus.requests());
    assert!(recs.iter().all(|r| r.status == Status::Ok));
    let kept: std::collections::BTreeSet<String> = corpus
        .conversations
        .iter()
        .map(|c| c.id.to_string())
        .collect();
    let sent: std::collections::BTreeSet<String> =
        recs.iter().filter_map(|r| r.conversation.clone()).collect();
    assert_eq!(sent, kept);
}

/// Issue #41: `--amplify` was refused on agent corpora. `--amplify 2` replays every
/// conversation twice, the copy `<id>@1` with its own sessions and hash ids.
#[test]
fn amplify_copies_every_conversation_of_an_agent_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let (recs, outcome) = replay_corpus(dir.path(), &["--amplify", "2", "--max-idle-gap", "0.02"]);
    assert_eq!(outcome.exit_code, 0);
    let corpus = weka::load(&corpus_dir()).unwrap();
    assert_eq!(recs.len(), 2 * corpus.requests());
    assert!(recs.iter().all(|r| r.status == Status::Ok));
    let convs: std::collections::BTreeSet<String> =
        recs.iter().filter_map(|r| r.conversation.clone()).collect();
    assert_eq!(convs.len(), 6);
    assert_eq!(convs.iter().filter(|c| c.ends_with("@1")).count(), 3);
    let layout = outcome.summary.agents.unwrap().layout.unwrap();
    assert_eq!(
        (
            layout.amplify,
            layout.amplified,
            layout.corpus_conversations
        ),
        (Some(2.0), 3, 3)
    );
}

/// Issue #41: a population that starts more conversations at once than the client may open
/// connections for (`ulimit -n`) is refused before the run, saying how to spread it; a dry
/// run, which opens none, goes ahead.
#[test]
fn a_population_past_the_open_file_limit_is_refused_with_how_to_spread_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let run = |extra: &str| {
        let script = format!(
            "ulimit -n 300 && exec \"$0\" replay --dataset-path \"$1\" --amplify 20 --output-path \"$2\" --quiet {extra}"
        );
        std::process::Command::new("sh")
            .args(["-c", &script, BIN])
            .arg(corpus_dir())
            .arg(&out)
            .output()
            .unwrap()
    };
    let o = run("");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains("its 60 conversations all start at once")
            && stderr.contains("may open 300 files")
            && stderr.contains("--users N or --session-rate R (N at most 44)"),
        "{stderr}"
    );
    let o = run("--dry-run");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `--users N` past the open-file limit is refused from the flags, before the corpus is read
/// or laid out (it used to be refused after the whole layout: 45 s and 15 GB at 25,000 users).
#[test]
fn users_past_the_open_file_limit_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let script = "ulimit -n 300 && exec \"$0\" replay --dataset-path \"$1\" --users 100000 --output-path \"$2\" --quiet";
    let t = std::time::Instant::now();
    let o = std::process::Command::new("sh")
        .args(["-c", script, BIN])
        .arg(corpus_dir())
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--users 100000 starts 100000 conversations at once")
            && stderr.contains("give --users at most 44"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("agent corpus"),
        "refused before reading it: {stderr}"
    );
    assert!(t.elapsed().as_secs_f64() < 10.0, "{:?}", t.elapsed());
}
