//! Model fleets over loopback (`--model-map`): the 12-session Copilot fixture (5 trace models)
//! mapped onto the two names one llm-sim cluster serves (2 instances behind its session
//! router): every record names the served model its trace model maps to, and the summary's
//! per-model rows add up to its totals. A model the server does not serve gets vLLM's 404,
//! recorded as an error with that status; a trace model the map misses is refused before
//! anything is sent.

use std::collections::HashMap;

use crate::support::*;
use request_sim::record::{Record, Status};
use request_sim::stats::models::ModelRow;
use request_sim::stats::Summary;

fn fixture() -> std::path::PathBuf {
    data_path("copilot/date=2026-06-01")
}

fn sim_cfg() -> llm_sim::SimConfig {
    llm_sim::SimConfig {
        model_name: "qwen3-8b".into(),
        model_aliases: vec!["llama-70b".into()],
        block_size: 16,
        ..Default::default()
    }
}

/// Replays the fixture against `endpoint` with `--model-map map`: the records and summary.
fn replay_mapped(endpoint: &str, map: &str, dir: &std::path::Path) -> (Vec<Record>, Summary) {
    let mut args = base_args(endpoint, &fixture(), dir);
    args.extend(
        [
            "--model-map",
            map,
            "--max-idle-gap",
            "0.05",
            "--session-header",
            "x-session-id",
        ]
        .map(String::from),
    );
    let outcome = replay(&strs(&args));
    let recs = read_records_by_index(&dir.join("records.jsonl"));
    (recs, outcome.summary)
}

/// Each list of rows adds up to the summary's totals.
fn assert_rows_add_up(rows: &[ModelRow], s: &Summary) {
    let sum = |f: fn(&ModelRow) -> u64| rows.iter().map(f).sum::<u64>();
    assert_eq!(sum(|r| r.requests as u64), s.status.total as u64);
    assert_eq!(sum(|r| r.ok as u64), s.status.ok as u64);
    assert_eq!(sum(|r| r.errors as u64), s.status.error_share().0 as u64);
    assert_eq!(sum(|r| r.input_tokens), s.total_input_tokens);
    assert_eq!(sum(|r| r.output_tokens), s.total_output_tokens);
    assert_eq!(sum(|r| r.prompt_tokens), s.cache.prompt_tokens);
    assert_eq!(sum(|r| r.cached_tokens), s.cache.cached_tokens);
}

#[test]
fn trace_models_are_sent_as_the_mapped_served_models() {
    let cluster = Cluster::start(2, llm_sim::routing::Policy::Session, sim_cfg());
    let dir = tempfile::tempdir().unwrap();
    let map = "Model A=qwen3-8b,Model B=llama-70b,Model C=qwen3-8b,*=llama-70b";
    let (recs, s) = replay_mapped(&cluster.router, map, dir.path());
    let want: HashMap<&str, &str> = [
        ("Model A", "qwen3-8b"),
        ("Model B", "llama-70b"),
        ("Model C", "qwen3-8b"),
        ("Model D", "llama-70b"),
        ("Model E", "llama-70b"),
    ]
    .into();
    assert_eq!(recs.len(), 75);
    let mut seen = HashMap::new();
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        let t = r
            .trace_model
            .as_deref()
            .expect("a Copilot call names its model");
        assert_eq!(r.model.as_deref(), Some(want[t]), "record {}", r.index);
        *seen.entry(t).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 5, "{seen:?}");
    let m = s.models.as_ref().expect("per-model rows");
    let served: Vec<&str> = m.served.iter().map(|r| r.model.as_str()).collect();
    assert_eq!(served, ["llama-70b", "qwen3-8b"]);
    assert_rows_add_up(&m.served, &s);
    assert_rows_add_up(&m.trace, &s);
    for row in &m.trace {
        assert_eq!(row.requests, seen[row.model.as_str()], "{row:?}");
        assert_eq!(row.sent_as.as_deref(), Some(want[row.model.as_str()]));
    }
    assert!(m.served.iter().all(|r| r.cached_tokens > 0), "{m:?}");
}

#[test]
fn a_model_the_server_does_not_serve_gets_its_404() {
    let sim = start_sim(sim_cfg());
    let dir = tempfile::tempdir().unwrap();
    let (recs, s) = replay_mapped(&sim.base_url(), "Model E=nope,*=qwen3-8b", dir.path());
    let (mut e, mut ok) = (0, 0);
    for r in &recs {
        if r.trace_model.as_deref() == Some("Model E") {
            assert_eq!(r.model.as_deref(), Some("nope"));
            assert_eq!((r.status, r.http_status), (Status::HttpError, Some(404)));
            let err = r.error.as_deref().unwrap_or_default();
            assert!(err.contains("The model `nope` does not exist"), "{err}");
            e += 1;
        } else {
            assert_eq!(
                (r.status, r.model.as_deref()),
                (Status::Ok, Some("qwen3-8b"))
            );
            ok += 1;
        }
    }
    assert_eq!((e, ok), (14, 61));
    let m = s.models.as_ref().unwrap();
    let nope = m.served.iter().find(|r| r.model == "nope").unwrap();
    assert_eq!((nope.requests, nope.ok, nope.errors), (14, 0, 14));
    assert_eq!(s.errors.get("http_error:404"), Some(&14));
    assert_rows_add_up(&m.served, &s);
}

#[test]
fn a_trace_model_the_map_misses_is_refused_before_anything_is_sent() {
    let sim = start_sim(sim_cfg());
    let dir = tempfile::tempdir().unwrap();
    let mut args = base_args(&sim.base_url(), &fixture(), dir.path());
    args.extend(["--model-map", "Model A=qwen3-8b,Model E=llama-70b"].map(String::from));
    let err = try_replay(&strs(&args)).unwrap_err().to_string();
    assert!(
        err.contains(r#"does not map 3 trace model(s): "Model B" (20 requests), "Model C" (4 requests), "Model D" (4 requests)"#),
        "{err}"
    );
    assert!(!dir.path().join("records.jsonl").exists());
    let finished = sim
        .metrics()
        .requests_finished
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(finished, 0);
}

#[test]
fn auto_spreads_the_trace_models_over_the_served_ones_by_share() {
    let sim = start_sim(sim_cfg());
    let dir = tempfile::tempdir().unwrap();
    let (recs, s) = replay_mapped(&sim.base_url(), "auto", dir.path());
    // Requests: A 33, B 20, E 14, C 4, D 4; served in /v1/models order: qwen3-8b, llama-70b.
    // A → qwen3-8b (33); B → llama-70b (20); E → llama-70b (34); C → qwen3-8b (37);
    // D → llama-70b (38).
    let want: HashMap<&str, &str> = [
        ("Model A", "qwen3-8b"),
        ("Model B", "llama-70b"),
        ("Model C", "qwen3-8b"),
        ("Model D", "llama-70b"),
        ("Model E", "llama-70b"),
    ]
    .into();
    for r in &recs {
        let t = r.trace_model.as_deref().unwrap();
        assert_eq!(r.model.as_deref(), Some(want[t]), "record {}", r.index);
    }
    let m = s.models.as_ref().unwrap();
    let rows: Vec<(&str, usize)> = m.served.iter().map(|r| (&*r.model, r.requests)).collect();
    assert_eq!(rows, [("llama-70b", 38), ("qwen3-8b", 37)]);
}

#[test]
fn a_streamed_burstgpt_trace_is_mapped_by_its_model_column() {
    let sim = start_sim(sim_cfg());
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("burst.csv");
    let mut csv =
        String::from("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n");
    for i in 0..12 {
        let model = if i % 3 == 0 { "GPT-4" } else { "ChatGPT" };
        csv.push_str(&format!(
            "{},{model},{},4,0,Conversation log\n",
            i as f64 * 0.01,
            40 + i
        ));
    }
    std::fs::write(&trace, csv).unwrap();
    let base = base_args(&sim.base_url(), &trace, dir.path());
    // A map that misses GPT-4: refused before anything is sent (the stream read once first).
    let mut args = base.clone();
    args.extend(["--model-map", "ChatGPT=qwen3-8b"].map(String::from));
    let err = try_replay(&strs(&args)).unwrap_err().to_string();
    assert!(
        err.contains(r#"does not map 1 trace model(s): "GPT-4" (4 requests)"#),
        "{err}"
    );
    let mut args = base;
    args.extend(["--model-map", "ChatGPT=qwen3-8b,GPT-4=llama-70b"].map(String::from));
    let outcome = replay(&strs(&args));
    let recs = read_records_by_index(&dir.path().join("records.jsonl"));
    assert_eq!(recs.len(), 12);
    for r in &recs {
        let want = if r.index % 3 == 0 {
            ("GPT-4", "llama-70b")
        } else {
            ("ChatGPT", "qwen3-8b")
        };
        assert_eq!(
            (r.trace_model.as_deref(), r.model.as_deref()),
            (Some(want.0), Some(want.1))
        );
        assert_eq!(r.status, Status::Ok);
    }
    let m = outcome.summary.models.as_ref().unwrap();
    let rows: Vec<(&str, usize)> = m.served.iter().map(|r| (&*r.model, r.requests)).collect();
    assert_eq!(rows, [("llama-70b", 4), ("qwen3-8b", 8)]);
}
