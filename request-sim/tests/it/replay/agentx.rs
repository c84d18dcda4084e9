//! `--scenario agentx` (InferenceX AgentX) on a corpus in SemiAnalysis' row form (one Weka
//! trace per JSONL line), generated here: the published rows read like a directory, the warm
//! trajectory start within its ratios, warm-up recorded and not measured, the cache bust (each
//! lane's conversation its own blocks from its first turn, the tools + system blocks shared),
//! the idle-gap cap, and 8 lanes against llm-sim with one record per scheduled request and the
//! stamp naming a shortened run's duration.

use std::path::{Path, PathBuf};

use crate::support::*;
use request_sim::config::ReplayConfig;
use request_sim::record::Record;
use request_sim::trace::formats::weka;
use request_sim::trace::pipeline::plan::{plan, PlanOptions, Population, TrajectoryStart};
use request_sim::trace::TraceFormat;

/// Main-agent requests per generated conversation, and their spacing (s).
const TURNS: usize = 40;
const STEP_S: f64 = 0.2;
/// Tools + system prompt: 2 + 2 blocks of 16 tokens.
const PREFIX_BLOCKS: u64 = 4;

/// One generated conversation as a row: `TURNS` main requests `STEP_S` apart, each prompt the
/// previous one plus a block (ids 1..4 the tools + system prompt), a subagent of 3 requests
/// after request 5 joined by request 6; `idle_s` more seconds of idle gap before request 20.
fn conversation_row(id: &str, idle_s: f64) -> String {
    let req = |t: f64, ids: &[u64], kind: &str| {
        format!(
            r#"{{"t":{t},"type":"{kind}","model":"m","in":{},"out":3,"hash_ids":{ids:?},"input_types":["text"],"output_types":["text"],"stop":"","api_time":0.02}}"#,
            ids.len() * 16
        )
    };
    let mut entries = Vec::new();
    let mut t = 0.0;
    for k in 0..TURNS {
        if k == 20 {
            t += idle_s;
        }
        let ids: Vec<u64> = (1..=PREFIX_BLOCKS + 1 + k as u64).collect();
        entries.push(req(t, &ids, "s"));
        if k == 5 {
            let sub: Vec<String> = (0..3)
                .map(|j| {
                    let ids: Vec<u64> = (1..=2).chain(100..=101 + j).collect();
                    req(0.03 * j as f64, &ids, "n")
                })
                .collect();
            entries.push(format!(
                r#"{{"t":{},"type":"subagent","agent_id":"sa1","subagent_type":"Explore","duration_ms":100,"status":"completed","models":["m"],"tool_tokens":32,"system_tokens":0,"requests":[{}]}}"#,
                t + 0.15,
                sub.join(",")
            ));
        }
        t += STEP_S;
    }
    format!(
        r#"{{"id":"{id}","models":["m"],"block_size":16,"hash_id_scope":"local","tool_tokens":32,"system_tokens":32,"requests":[{}]}}"#,
        entries.join(",")
    )
}

/// A corpus of `n` generated conversations in the row form, in `dir`.
fn rows_corpus(dir: &Path, n: usize, idle_s: f64) -> PathBuf {
    let rows: Vec<String> = (0..n)
        .map(|c| conversation_row(&format!("cc-{c}"), idle_s))
        .collect();
    let path = dir.join("cc-traces-weka.jsonl");
    std::fs::write(&path, rows.join("\n") + "\n").unwrap();
    path
}

fn layout(path: &Path, users: usize, trajectory: Option<TrajectoryStart>) -> PlanOut {
    let corpus = weka::load(path).unwrap();
    let (trace, facts) = plan(
        &corpus,
        TraceFormat::from_name("weka").unwrap(),
        &PlanOptions {
            population: Population::Users(users),
            seed: 7,
            max_requests: Some(users * 2 * (TURNS + 3)),
            trajectory,
            ..PlanOptions::default()
        },
    )
    .unwrap();
    PlanOut { trace, facts }
}

struct PlanOut {
    trace: request_sim::trace::Trace,
    facts: request_sim::trace::pipeline::plan::PlanFacts,
}

const AGENTX_START: TrajectoryStart = TrajectoryStart {
    min_ratio: 0.25,
    max_ratio: 0.75,
    warmup_requests: 10,
};

#[test]
fn the_published_rows_read_like_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    // The three fixture files, one per line: the same corpus.
    let files = ["fanout", "nested", "plain"];
    let rows: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(data_path(&format!("agents/{f}.json"))).unwrap())
        .map(|t| t.trim().to_owned())
        .collect();
    let path = dir.path().join("rows.jsonl");
    std::fs::write(&path, rows.join("\n") + "\n").unwrap();
    let (a, b) = (
        weka::load(&path).unwrap(),
        weka::load(&data_path("agents")).unwrap(),
    );
    assert_eq!(a.conversations.len(), 3);
    for (x, y) in a.conversations.iter().zip(&b.conversations) {
        assert_eq!(
            (&x.id, x.agents.len(), x.requests()),
            (&y.id, y.agents.len(), y.requests())
        );
        assert_eq!(
            x.agents[0].requests[1].hash_ids,
            y.agents[0].requests[1].hash_ids
        );
    }
    assert_eq!(
        &*a.conversations[1].source,
        &format!("{}:2", path.display())
    );
    // Faults name the line: a row without its id, an id twice.
    let no_id = rows[1].replacen(r#""id":"nested","#, "", 1);
    std::fs::write(&path, format!("{}\n{no_id}\n", rows[0])).unwrap();
    let e = weka::load(&path).unwrap_err().to_string();
    assert!(
        e.contains("rows.jsonl:2: id: a row without its trace `id`"),
        "{e}"
    );
    std::fs::write(&path, format!("{}\n\n{}\n", rows[0], rows[0])).unwrap();
    let e = weka::load(&path).unwrap_err().to_string();
    assert!(
        e.contains("rows.jsonl:3: id: the trace id \"fanout\" is also the id of line 1"),
        "{e}"
    );
    // A bad entry in row 2: its line and JSON path.
    let bad = rows[2].replacen(r#""type":"s""#, r#""type":"q""#, 1);
    std::fs::write(&path, format!("{}\n{bad}\n", rows[0])).unwrap();
    let e = weka::load(&path).unwrap_err().to_string();
    assert!(
        e.contains("rows.jsonl:2: requests[0]: unknown `type` \"q\""),
        "{e}"
    );
    // Fields a columnar export writes as null count as absent.
    let nulls = rows[2].replacen(
        r#""api_time":0.05"#,
        r#""api_time":null,"agent_id":null"#,
        1,
    );
    std::fs::write(&path, format!("{}\n{nulls}\n", rows[0])).unwrap();
    assert_eq!(
        weka::load(&path).unwrap().conversations[1].requests(),
        b.conversations[2].requests()
    );
}

/// The recorded times of conversation `c`'s main requests (s).
fn main_times() -> Vec<f64> {
    (0..TURNS).map(|k| k as f64 * STEP_S).collect()
}

#[test]
fn trajectory_starts_within_their_ratios_and_skip_what_came_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = rows_corpus(dir.path(), 8, 0.0);
    let out = layout(&path, 8, Some(AGENTX_START));
    let ratios = &out.facts.start_ratios;
    assert_eq!(ratios.len(), 8, "one start per lane");
    assert!(
        ratios.iter().all(|r| (0.25..=0.75).contains(r)),
        "{ratios:?}"
    );
    let spread =
        ratios.iter().copied().fold(0.0, f64::max) - ratios.iter().copied().fold(1.0, f64::min);
    assert!(spread > 0.1, "seeded draws differ: {ratios:?}");
    // Each lane's first conversation: its main agent's first profiled request is the first at
    // or after t*, its primer the one before (the subagent ends by 1.25 s: before any t*).
    let t = main_times();
    let span = t[TURNS - 1];
    for (lane, r) in ratios.iter().enumerate() {
        let conv = out.trace.sessions.turns.iter().flatten().filter_map(|s| {
            let a = s.agent.as_ref()?;
            (a.key.as_ref() == format!("user:{lane}")
                && a.agent.as_ref() == "main"
                && !a.conversation.contains('#'))
            .then_some((s.turn as usize - 1, a.warmup))
        });
        let turns: Vec<(usize, bool)> = conv.collect();
        let t_star = r * span;
        let primer = turns[0].0;
        assert!(turns[0].1, "the primer is warm-up");
        assert!(
            t[primer] < t_star && t[primer + 1] >= t_star,
            "lane {lane}: primer {primer} at t* {t_star}"
        );
        // The primer and 10 more warm up; then the rest is measured, all of it.
        let warm = turns.iter().filter(|x| x.1).count();
        assert_eq!(warm, 11.min(TURNS - primer), "lane {lane}");
        assert_eq!(
            turns.len(),
            TURNS - primer,
            "lane {lane}: the requests before the primer are left out"
        );
    }
    assert_eq!(out.facts.primers, 8);
    // Without the warm start: every conversation from its first request, nothing warm.
    let cold = layout(&path, 8, None);
    assert!(cold.facts.start_ratios.is_empty() && cold.facts.warmup_requests == 0);
}

/// The block ids of conversation `conv`'s main requests, in turn order.
fn lane_ids(out: &PlanOut, conv: &str) -> Vec<Vec<u64>> {
    let mut v: Vec<(u32, Vec<u64>)> = out
        .trace
        .sessions
        .turns
        .iter()
        .zip(&out.trace.requests)
        .filter_map(|(s, r)| {
            let s = s.as_ref()?;
            let a = s.agent.as_ref()?;
            (a.conversation.as_ref() == conv && a.agent.as_ref() == "main")
                .then(|| (s.turn, r.hash_ids.to_vec()))
        })
        .collect();
    v.sort_by_key(|x| x.0);
    v.into_iter().map(|x| x.1).collect()
}

#[test]
fn the_cache_bust_is_at_the_first_turn_and_keeps_the_rest_of_the_sharing() {
    let dir = tempfile::tempdir().unwrap();
    // One conversation, two lanes: both replay the same trajectory.
    let path = rows_corpus(dir.path(), 1, 0.0);
    let cfg = ReplayConfig::from_args(replay_args(&[
        "--dataset-path",
        path.to_str().unwrap(),
        "--scenario",
        "agentx",
        "--users",
        "2",
    ]))
    .unwrap();
    assert!(
        cfg.trace.agents.share_system_prefix,
        "the scenario sets the bust"
    );
    let corpus = weka::load(&path).unwrap();
    let opts = PlanOptions {
        population: Population::Users(2),
        seed: 7,
        max_requests: Some(2 * (TURNS + 3)),
        share_system_prefix: cfg.trace.agents.share_system_prefix,
        trajectory: cfg.trace.agents.trajectory,
        ..PlanOptions::default()
    };
    let (trace, facts) = plan(&corpus, TraceFormat::from_name("weka").unwrap(), &opts).unwrap();
    let out = PlanOut { trace, facts };
    // Lane 0 replays it as `cc-0`, lane 1 as its repeat `cc-0#1`.
    let (a, b) = (lane_ids(&out, "cc-0"), lane_ids(&out, "cc-0#1"));
    assert!(a.len() > 5 && b.len() > 5);
    let p = PREFIX_BLOCKS as usize;
    // The tools + system blocks: the same in both lanes.
    assert_eq!(a[0][..p], b[0][..p]);
    // From the first turn's first block on, each lane's own: no block of one is in the other.
    let first_turn: std::collections::HashSet<u64> =
        b.iter().flat_map(|x| x[p..].to_vec()).collect();
    assert!(a
        .iter()
        .all(|x| x[p..].iter().all(|id| !first_turn.contains(id))));
    // Within a lane every request shares its predecessor's prompt.
    for lane in [&a, &b] {
        for w in lane.windows(2) {
            assert_eq!(
                w[1][..w[0].len()],
                w[0][..],
                "a turn extends the one before"
            );
        }
    }
}

#[test]
fn the_idle_gap_cap_of_the_scenario_cuts_long_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let path = rows_corpus(dir.path(), 2, 1000.0);
    let args = |extra: &[&str]| {
        let mut v = vec![
            "--dataset-path",
            path.to_str().unwrap(),
            "--scenario",
            "agentx",
            "--users",
            "2",
        ];
        v.extend_from_slice(extra);
        ReplayConfig::from_args(replay_args(&v)).unwrap()
    };
    let cfg = args(&[]);
    assert_eq!(cfg.trace.max_idle_gap_ms, Some(300_000.0));
    let corpus = weka::load(&path).unwrap();
    let gaps = |cap: Option<f64>| {
        let opts = PlanOptions {
            population: Population::Users(2),
            seed: 7,
            max_requests: Some(2 * (TURNS + 3)),
            max_idle_gap_ms: cap,
            ..PlanOptions::default()
        };
        let (trace, facts) = plan(&corpus, TraceFormat::from_name("weka").unwrap(), &opts).unwrap();
        let longest = trace
            .sessions
            .turns
            .iter()
            .flatten()
            .filter_map(|s| s.trace_gap_ms)
            .fold(0.0, f64::max);
        (longest, facts.capped_gaps)
    };
    let (longest, capped) = gaps(cfg.trace.max_idle_gap_ms);
    assert_eq!(
        (longest, capped),
        (300_000.0, 2),
        "one 1000 s gap per conversation, cut to 300 s"
    );
    assert!(gaps(None).0 > 1_000_000.0);
    // A cap given is kept, as AgentX keeps --trace-idle-gap-cap-seconds.
    assert_eq!(
        args(&["--max-idle-gap", "60"]).trace.max_idle_gap_ms,
        Some(60_000.0)
    );
}

fn records(dir: &Path) -> Vec<Record> {
    read_records_by_index(&dir.join("records.jsonl"))
}

#[test]
fn eight_lanes_against_llm_sim_warm_up_recorded_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let path = rows_corpus(dir.path(), 8, 0.0);
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        ..Default::default()
    });
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut args = base_args(&sim.base_url(), &path, &out);
    args.extend(
        [
            "--scenario",
            "agentx",
            "--users",
            "8",
            "--time-in-secs",
            "3",
            "--grace-secs",
            "5",
            "--result-dir",
            out.join("res").to_str().unwrap(),
        ]
        .map(String::from),
    );
    // A 3 s run breaks the 900 s floor: refused, naming the rule.
    let e = try_replay(&strs(&args)).unwrap_err().to_string();
    assert!(
        e.contains("duration: --time-in-secs is 3 s, the scenario requires at least 900 s"),
        "{e}"
    );
    args.push("--scenario-override".into());
    let outcome = replay(&strs(&args));
    let s = &outcome.summary;
    let recs = records(&out);
    // Every scheduled request is one record, warm-up included.
    assert!(s.counts_add_up, "{:?}", s.warnings);
    assert_eq!(recs.len(), s.scheduled);
    assert_one_record_per_index(&recs, s.scheduled);
    // Warm-up: each lane's primer and 10 more, recorded with their phase, 1 token each.
    let warm: Vec<&Record> = recs.iter().filter(|r| r.is_warmup()).collect();
    assert_eq!(warm.len(), 8 * 11);
    assert!(warm
        .iter()
        .all(|r| r.output_length == 1 && r.status == request_sim::record::Status::Ok));
    // ... and not measured: the statistics count the others only.
    assert_eq!(s.warmup_requests, warm.len());
    assert_eq!(s.status.total, recs.len() - warm.len());
    let ok = |r: &&Record| r.status == request_sim::record::Status::Ok;
    let measured_out: u64 = recs
        .iter()
        .filter(|r| !r.is_warmup())
        .filter(ok)
        .map(|r| r.output_tokens.unwrap_or(0) as u64)
        .sum();
    assert_eq!(s.total_output_tokens, measured_out);
    assert!(measured_out > 0);
    // The stamp: the scenario, invalid, the duration named.
    let st = s
        .scenario
        .as_ref()
        .expect("the summary carries the scenario");
    assert_eq!(
        (st.scenario.as_str(), st.users, st.overridden),
        ("agentx", 8, true)
    );
    assert!(!st.submission_valid);
    assert_eq!(st.violations[0].rule, "duration");
    assert!(
        st.violations
            .iter()
            .all(|v| v.rule == "duration" || v.rule == "coverage"),
        "{:?}",
        st.violations
    );
    let text = std::fs::read_to_string(summary_path(&out.join("records.jsonl"))).unwrap();
    assert!(
        text.contains("\"submission_valid\": false") || text.contains("\"submission_valid\":false")
    );
    let console = request_sim::report::render_console(s);
    assert!(
        console.contains("Submission valid:") && console.contains("duration"),
        "{console}"
    );
    // 1 s slices of the measured run: the tokens add up to the measured output.
    assert!(s.time_slices.len() >= 2, "{:?}", s.time_slices);
    let sliced: u64 = s.time_slices.iter().map(|x| x.output_tokens).sum();
    assert_eq!(sliced, measured_out);
    assert!(s
        .time_slices
        .iter()
        .any(|x| x.per_user_output_tps.is_some_and(|v| v > 0.0)));
    // The swim lanes: every user's row, warm-up apart, subagents visible, on the page.
    assert!(recs.iter().all(|r| r.user.is_some_and(|u| u < 8)));
    let svg = std::fs::read_to_string(out.join("res/lanes.svg")).unwrap();
    for text in ["Lanes", "warm-up", "main agent", "user (lane)"] {
        assert!(svg.contains(text), "lanes.svg has no {text:?}");
    }
    let page = std::fs::read_to_string(out.join("res/report.html")).unwrap();
    assert!(page.contains("lanes"), "the run's page embeds the lanes");
    let _ = std::fs::copy(
        out.join("res/lanes.png"),
        std::env::temp_dir().join("agentx-lanes.png"),
    );
    let split = format!("{} / {}", warm.len(), s.status.total);
    assert!(
        console.contains("Warm-up / profiling requests:") && console.contains(&split),
        "{console}"
    );
}

/// `agentx profile ...`: AIPerf's command line with `--scenario agentx` by default, AIPerf's
/// result files written, warm-up apart; without `--unsafe-override` a short run is refused.
#[test]
fn the_agentx_command_line_runs_the_scenario_and_writes_aiperfs_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = rows_corpus(dir.path(), 4, 0.0);
    let sim = start_sim(llm_sim::SimConfig::default());
    let url = sim.base_url().trim_start_matches("http://").to_string();
    let art = dir.path().join("art");
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentx"))
            .args([
                "profile",
                "--model",
                "llm-sim",
                "--url",
                &url,
                "--input-file",
                path.to_str().unwrap(),
                "--custom-dataset-type",
                "weka_trace",
                "--concurrency",
                "4",
                "--benchmark-duration",
                "2",
                "--output-artifact-dir",
                art.to_str().unwrap(),
                "--ui-type",
                "none",
            ])
            .args(extra)
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap()
    };
    let refused = run(&[]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("--scenario agentx") && err.contains("duration"),
        "{err}"
    );
    let o = run(&["--unsafe-override"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = read_json(&art.join("summary.json"));
    assert_eq!(summary["scenario"]["scenario"], "agentx");
    assert_eq!(summary["scenario"]["users"], 4);
    assert_eq!(summary["scenario"]["submission_valid"], false);
    assert_eq!(summary["scenario"]["violations"][0]["rule"], "duration");
    let lines = read_json_lines(&art.join("profile_export.jsonl"));
    let phase = |p: &str| {
        lines
            .iter()
            .filter(|l| l["metadata"]["benchmark_phase"] == p)
            .count()
    };
    assert_eq!(phase("warmup"), 4 * 11);
    assert_eq!(phase("warmup") + phase("profiling"), lines.len());
    let agg = read_json(&art.join("profile_export_aiperf.json"));
    assert_eq!(
        agg["request_count"]["avg"].as_f64(),
        Some(summary["completed"].as_f64().unwrap())
    );
}

/// `sweep --users 1,2,4,8 --gpus 2` under the scenario: InferenceX's curve, total output
/// tokens/s per GPU against the median per-user output tokens/s, each point stamped, drawn.
#[test]
fn a_users_sweep_prints_and_draws_the_throughput_interactivity_curve_with_stamps() {
    let dir = tempfile::tempdir().unwrap();
    let path = rows_corpus(dir.path(), 8, 0.0);
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 16,
        // 5 ms engine steps: every answer has a time between its tokens.
        step_fixed_us: 5000.0,
        ..Default::default()
    });
    let url = sim.base_url();
    let sweep_dir = dir.path().join("sweep");
    let (code, r) = sweep(&[
        "--users",
        "1,2,4,8",
        "--gpus",
        "2",
        "--sweep-dir",
        sweep_dir.to_str().unwrap(),
        "--endpoint",
        &url,
        "--dataset-path",
        path.to_str().unwrap(),
        "--scenario",
        "agentx",
        "--scenario-override",
        "--time-in-secs",
        "1.5",
        "--seed",
        "5",
        "--quiet",
    ]);
    assert_eq!(code, 0);
    assert_eq!(r.points.len(), 4);
    for p in &r.points {
        assert_eq!(p.submission_valid, Some(false), "{p:?}");
        assert_eq!(p.violations[0], "duration");
        let per_gpu = p.output_throughput_per_gpu.unwrap();
        assert!((per_gpu - p.output_throughput / 2.0).abs() < 1e-9);
        let tpot = p.tpot_p50_ms.unwrap();
        let per_user = p.per_user_output_tps.unwrap_or_else(|| panic!("{p:?}"));
        assert!((per_user - 1000.0 / tpot).abs() < 1e-9);
    }
    let table = request_sim::sweep::render_table(&r);
    assert!(
        table.contains("throughput vs interactivity:") && table.contains("tok/s/GPU"),
        "{table}"
    );
    assert_eq!(table.matches("no (duration").count(), 4, "{table}");
    let svg = std::fs::read_to_string(sweep_dir.join("curve.svg")).unwrap();
    for text in [
        "Throughput vs interactivity",
        "output tokens/s per GPU",
        "8 users",
        "submission invalid",
    ] {
        assert!(svg.contains(text), "curve.svg has no {text:?}");
    }
    let page = std::fs::read_to_string(sweep_dir.join("report.html")).unwrap();
    assert!(page.contains("curve"), "the sweep page embeds the curve");
}
