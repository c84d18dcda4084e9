//! `transform` of an agent corpus (`docs/transform.md`, "Agent corpora"): the reshaped corpus
//! written as a Weka directory replays to the same requests as the original replayed with the
//! same reshaping flags — the same prompt lengths, outputs, hash ids (so the same prefix
//! sharing), models, parents, joins, client gaps and laid-out times — for the Copilot fixture
//! (parallel calls, compactions) and the Weka fixture (joined, background and nested
//! subagents); and an output never goes over or into its input.

use std::path::Path;

use request_sim::trace::formats::agents;
use request_sim::trace::pipeline::plan::{plan, PlanOptions};
use request_sim::trace::{LoadOptions, Reshape, Trace};

use crate::support::*;

/// The corpus at `path` reshaped by `reshape` (as a replay does) and laid out.
fn planned(path: &Path, reshape: &Reshape) -> Trace {
    let opts = LoadOptions {
        reshape: reshape.clone(),
        ..LoadOptions::default()
    };
    let (mut corpus, format) = agents::load(path, &opts).unwrap().unwrap();
    request_sim::run::reshape_corpus(reshape, false, "t", &mut corpus).unwrap();
    // The written Weka corpus does not carry a Copilot session's recorded start (the trace's
    // absolute times are not kept, docs/transform.md): both are laid out without them.
    for c in corpus.conversations.iter_mut() {
        c.recorded_start_ms = None;
    }
    plan(&corpus, format, &PlanOptions::default()).unwrap().0
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(1.0)
}

/// The two layouts send the same requests, in the same order, at the same times.
fn assert_same_requests(a: &Trace, b: &Trace) {
    assert_eq!(a.requests.len(), b.requests.len());
    for (x, y) in a.requests.iter().zip(&b.requests) {
        let at = format!("request {}", x.index);
        assert_eq!(
            (x.input_length, x.output_length, &x.hash_ids, &x.model),
            (y.input_length, y.output_length, &y.hash_ids, &y.model),
            "{at}"
        );
        assert!(
            close(x.timestamp_ms, y.timestamp_ms),
            "{at}: {} vs {}",
            x.timestamp_ms,
            y.timestamp_ms
        );
        let (s, t) = (
            a.sessions.get(x.index).unwrap(),
            b.sessions.get(y.index).unwrap(),
        );
        assert_eq!(
            (&s.id, s.turn, s.parent_index),
            (&t.id, t.turn, t.parent_index),
            "{at}"
        );
        let (g, h) = (s.trace_gap_ms.unwrap_or(0.0), t.trace_gap_ms.unwrap_or(0.0));
        assert!(close(g, h), "{at}: gap {g} vs {h}");
        let (p, q) = (s.agent.as_ref().unwrap(), t.agent.as_ref().unwrap());
        assert_eq!(
            (&p.agent, &p.joins, &p.prior),
            (&q.agent, &q.joins, &q.prior),
            "{at}"
        );
    }
}

/// `transform SRC -o OUT FLAGS`, then both layouts compared.
fn round_trip(src: &Path, flags: &[&str], reshape: Reshape) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("corpus");
    let mut args = vec![
        "transform",
        src.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend(flags);
    let o = run_bin(&args, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("as a Weka directory"), "{err}");
    let a = planned(src, &reshape);
    let b = planned(&out, &Reshape::default());
    assert_same_requests(&a, &b);
    a.requests.len()
}

#[test]
fn a_reshaped_copilot_corpus_replays_to_the_same_requests() {
    let src = data_path("copilot/date=2026-06-01");
    // As read (no flag): the written corpus is the same corpus.
    assert_eq!(round_trip(&src, &[], Reshape::default()), 75);
    let flags = [
        "--max-input-length",
        "3000",
        "--sample-sessions",
        "0.7",
        "--prompt-scale",
        "1.5",
        "--amplify",
        "2",
        "--seed",
        "3",
    ];
    let reshape = Reshape {
        max_input_length: Some(3000),
        sample_sessions: Some(0.7),
        prompt_scale: Some(1.5),
        amplify: Some(2.0),
        seed: 3,
        ..Reshape::default()
    };
    let n = round_trip(&src, &flags, reshape.clone());
    let a = planned(&src, &reshape);
    assert!(
        n > 75 && a.requests.iter().all(|r| r.input_length <= 3000),
        "{n}"
    );
}

#[test]
fn joined_background_and_nested_subagents_survive_the_round_trip() {
    let src = data_path("agents");
    let n = round_trip(&src, &[], Reshape::default());
    let flags = ["--prefix-scale", "2", "--max-input-length", "2000"];
    let reshape = Reshape {
        prefix_scale: Some(2.0),
        max_input_length: Some(2000),
        ..Reshape::default()
    };
    assert_eq!(round_trip(&src, &flags, reshape), n);
}

#[test]
fn an_agent_corpus_is_never_written_over_or_into_its_input() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in");
    copy_dir(&data_path("agents"), &src);
    let before = dir_bytes(&src);
    let inside = src.join("out");
    for out in [&src, &inside] {
        let o = run_bin(
            &[
                "transform",
                src.to_str().unwrap(),
                "-o",
                out.to_str().unwrap(),
            ],
            &[],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(err.contains("lies inside it"), "{err}");
    }
    // A directory that has files is not written into either.
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep.txt"), "x").unwrap();
    let o = run_bin(
        &[
            "transform",
            src.to_str().unwrap(),
            "-o",
            full.to_str().unwrap(),
        ],
        &[],
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("exists and is not empty"));
    assert_eq!(std::fs::read_to_string(full.join("keep.txt")).unwrap(), "x");
    assert_eq!(dir_bytes(&src), before);
    assert!(!inside.exists());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

fn dir_bytes(d: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}
