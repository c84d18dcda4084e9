//! End-to-end replays over loopback against the built-in simulator (llm-sim), checking the
//! records, drift, usage capture and the summary; and the anchor's `client` command line.

use request_sim::schedule::SchedPolicy;
use request_sim::stats::Metric;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use request_sim::config::{Target, TimeoutRule};
use request_sim::record::{Record, Status};

use crate::support::*;

/// A mooncake-style trace: `n` requests 10 ms apart, half continuing an earlier request's
/// prefix (multi-turn), block size `block`.
fn write_trace(dir: &Path, n: usize, block: u32) -> PathBuf {
    let path = dir.join("trace.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut next = 1u64;
    let mut prev: Vec<Vec<u64>> = Vec::new();
    for i in 0..n {
        let mut ids: Vec<u64> = if i % 2 == 1 && !prev.is_empty() {
            prev[(i * 7) % prev.len()].clone()
        } else {
            vec![0]
        };
        for _ in 0..(1 + i % 3) {
            ids.push(next);
            next += 1;
        }
        let input = (ids.len() as u32 - 1) * block + 1 + (i as u32 * 13) % block;
        let output = 2 + (i as u32 % 9);
        writeln!(
            f,
            r#"{{"timestamp": {}, "input_length": {}, "output_length": {}, "hash_ids": {:?}}}"#,
            i * 10,
            input,
            output,
            ids
        )
        .unwrap();
        prev.push(ids);
    }
    path
}

/// Replay `trace` (block size 64, quiet) against the simulator at `endpoint` with
/// `--scale-factor scale`, records to `out`, plus `extra` flags.
fn replay_sim(
    endpoint: &str,
    trace: &Path,
    out: &Path,
    scale: &str,
    extra: &[&str],
) -> request_sim::run::RunOutcome {
    let mut argv = vec![
        "--endpoint",
        endpoint,
        "--dataset-path",
        trace.to_str().unwrap(),
        "--block-size",
        "64",
        "--quiet",
        "--scale-factor",
        scale,
        "-o",
        out.to_str().unwrap(),
    ];
    argv.extend_from_slice(extra);
    replay(&argv)
}

#[test]
fn replay_against_simulator_gives_one_exact_record_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 80, 64);
    let sim = default_sim();
    let out = dir.path().join("out.jsonl");
    let outcome = replay_sim(&sim.base_url(), &trace, &out, "2", &["--seed", "42"]);
    assert_eq!(outcome.exit_code, 0);

    let recs = read_records(&out);
    assert_eq!(recs.len(), 80, "one record per request");
    let mut seen: Vec<usize> = recs.iter().map(|r| r.index).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..80).collect::<Vec<_>>());
    let mut cached_any = 0;
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        assert_eq!(r.http_status, Some(200));
        // Built-in word list against the simulator: exact, chat overhead calibrated away.
        assert_eq!(r.prompt_tokens, Some(r.input_length), "request {}", r.index);
        assert_eq!(
            r.output_tokens,
            Some(r.output_length),
            "request {}",
            r.index
        );
        assert_eq!(r.scheduled_ms, r.timestamp / 2.0);
        let sent = r.sent_ms.unwrap();
        let drift = r.drift_ms.unwrap();
        assert!((sent - r.scheduled_ms - drift).abs() < 0.002);
        assert!(drift >= 0.0, "sent before its time: {r:?}");
        assert!(drift < 250.0, "drift {drift} ms");
        let ttft = r.ttft_ms.unwrap();
        let e2e = r.e2e_ms.unwrap();
        assert!(ttft > 0.0 && e2e >= ttft);
        if r.output_tokens.unwrap() > 1 {
            let tpot = r.tpot_ms.unwrap();
            let expect = (e2e - ttft) / (r.output_tokens.unwrap() as f64 - 1.0);
            assert!((tpot - expect).abs() < 0.01, "{tpot} vs {expect}");
        }
        if r.cached_tokens.unwrap_or(0) > 0 {
            cached_any += 1;
        }
    }
    assert!(
        cached_any > 20,
        "shared prefixes must hit the simulator's cache ({cached_any})"
    );

    let summary = read_json(&dir.path().join("out.jsonl.summary.json"));
    assert_eq!(summary["completed"], 80);
    assert_eq!(summary["failed"], 0);
    assert_eq!(summary["run"]["seed"], 42);
    assert_eq!(summary["run"]["chat_overhead"], 8);
    assert_eq!(outcome.summary.completed, 80);
}

#[test]
fn same_seed_same_prompts_different_seed_different_cache() {
    // Prompts are a pure function of (seed, hash ids): replaying the same trace twice with the
    // same seed hits the cache left by the first run; a new seed does not.
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 12, 64);
    let sim = default_sim();
    let run = |seed: &str, name: &str| -> Vec<Record> {
        let out = dir.path().join(name);
        replay_sim(&sim.base_url(), &trace, &out, "4", &["--seed", seed]);
        read_records(&out)
    };
    let first = run("1", "a.jsonl");
    let again = run("1", "b.jsonl");
    let other = run("2", "c.jsonl");
    let by_index = |v: &[Record]| {
        v.iter()
            .map(|r| (r.index, r.cached_tokens.unwrap_or(0)))
            .collect::<HashMap<_, _>>()
    };
    let (a, b, c) = (by_index(&first), by_index(&again), by_index(&other));
    // Request 0 is cold in the first run and warm when replayed with the same seed.
    assert_eq!(a[&0], 0);
    assert!(b[&0] > 0, "same seed must reproduce identical prompts");
    assert!(
        c[&0] == 0,
        "a new seed must not hit the previous run's cache"
    );
}

#[test]
fn dry_run_writes_records_without_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 30, 16);
    let out = dir.path().join("dry.jsonl");
    let outcome = replay(&[
        "--dataset-path",
        trace.to_str().unwrap(),
        "--dry-run",
        "-q",
        "--scale-factor",
        "100",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records(&out);
    assert_eq!(recs.len(), 30);
    assert!(recs
        .iter()
        .all(|r| r.status == Status::DryRun && r.sent_ms.is_some()));
}

#[test]
fn client_accepts_the_anchor_command_line_with_its_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 4, 512);
    let tok = dir.path().join("tokenizer.json");
    let tokc = dir.path().join("tokenizer_config.json");
    std::fs::write(&tok, "{}").unwrap();
    std::fs::write(&tokc, "{}").unwrap();
    let argv = [
        "--tokenizer",
        tok.to_str().unwrap(),
        "--tokenizer-config",
        tokc.to_str().unwrap(),
        "--endpoint",
        "http://127.0.0.1:8000/v1/chat/completions",
        "--api",
        "openai",
        "--dataset",
        "mooncake",
        "--dataset-path",
        trace.to_str().unwrap(),
        "--hash-block-size",
        "512",
        "--scale-factor",
        "1.5",
        "--num-producer",
        "4",
        "--channel-capacity",
        "256",
        "--threads",
        "8",
        "--output-path",
        "/tmp/x.jsonl",
        "--model-name",
        "qwen",
        "--ttft-slo",
        "2",
        "--tpot-slo",
        "0.05",
        "--stream",
        "--metric-percentile",
        "90,99",
        "--early-stop-error-threshold",
        "100",
        "--tracing-path",
        "/tmp/trace.log",
    ];
    let cfg = client_config(&argv);
    assert!(
        matches!(cfg.target.server, Target::Remote(ref e) if e.url.path() == "/v1/chat/completions")
    );
    assert_eq!(cfg.schedule.scale_factor, 1.5);
    assert_eq!(cfg.schedule.producers, 4);
    assert_eq!(cfg.schedule.channel_capacity, 256);
    assert_eq!(cfg.schedule.threads, 8);
    assert_eq!(cfg.trace.load.block_size, Some(512));
    assert_eq!(cfg.target.model_name.as_deref(), Some("qwen"));
    assert!(cfg.requests.stream);
    assert_eq!(&*cfg.output.report.percentiles, &[90.0, 99.0]);
    assert_eq!(
        cfg.output.summary_path,
        PathBuf::from("/tmp/x.jsonl.summary.json")
    );
    // The anchor's defaults: 60 s run, SLO-derived timeout, SLOs in seconds.
    assert_eq!(
        cfg.schedule.time_limit,
        Some(std::time::Duration::from_secs(60))
    );
    assert_eq!(
        cfg.requests.timeout,
        TimeoutRule::FromSlo {
            ttft_s: 2.0,
            tpot_s: 0.05
        }
    );
    assert_eq!(cfg.output.report.slo.ttft_ms, Some(2000.0));
    assert_eq!(cfg.output.report.slo.tpot_ms, Some(50.0));
    assert!(!cfg.notes.is_empty(), "ignored anchor flags are reported");

    // Without --stream the anchor does not stream, and short flags work.
    let cfg = client_config(&[
        "-a",
        "tgi",
        "-d",
        "mooncake",
        "--endpoint",
        "http://127.0.0.1:8000/generate",
        "--dataset-path",
        trace.to_str().unwrap(),
        "-t",
        "5",
        "-o",
        "/tmp/y.jsonl",
    ]);
    assert!(!cfg.requests.stream);
    assert_eq!(
        cfg.schedule.time_limit,
        Some(std::time::Duration::from_secs(5))
    );
    assert_eq!(
        cfg.requests.timeout,
        TimeoutRule::FromSlo {
            ttft_s: 5.0,
            tpot_s: 0.06
        }
    );
}

#[test]
fn client_binary_replays_against_the_simulator() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 20, 512);
    let sim = default_sim();
    let out = dir.path().join("log/output.jsonl");
    let status = run_program(
        CLIENT_BIN,
        &[
            "--endpoint",
            &format!("{}/v1/chat/completions", sim.base_url()),
            "--api",
            "openai",
            "--dataset",
            "mooncake",
            "--dataset-path",
            trace.to_str().unwrap(),
            "--scale-factor",
            "5",
            "--stream",
            "--output-path",
            out.to_str().unwrap(),
            "-q",
        ],
    );
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        stdout.contains("============ Serving Benchmark Result ============"),
        "{stdout}"
    );
    let recs = read_records(&out);
    assert_eq!(recs.len(), 20);
    assert!(recs
        .iter()
        .all(|r| r.status == Status::Ok && r.prompt_tokens == Some(r.input_length)));
    assert!(out.with_file_name("output.jsonl.summary.json").exists());
}

#[test]
fn replay_with_qwen3_gives_server_prompt_tokens_equal_to_input_length() {
    let Some(q) = crate::support::qwen3_or_skip("replay") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 24, 512);
    let tok = q.join("tokenizer.json");
    let tokc = q.join("tokenizer_config.json");
    // The simulator tokenizes with the same tokenizer and renders Qwen3's chat template.
    let sim = start_sim(llm_sim::SimConfig {
        tokenizer: Some(tok.clone()),
        tokenizer_config: Some(tokc.clone()),
        ..Default::default()
    });
    for (mode, extra) in [("template", true), ("calibration", false)] {
        let out = dir.path().join(format!("{mode}.jsonl"));
        let mut argv = vec![
            "--endpoint".to_string(),
            sim.base_url(),
            "--dataset-path".into(),
            trace.to_str().unwrap().into(),
            "--tokenizer".into(),
            tok.to_str().unwrap().into(),
            "-q".into(),
            "--scale-factor".into(),
            "4".into(),
            "-o".into(),
            out.to_str().unwrap().into(),
        ];
        if extra {
            argv.push("--tokenizer-config".into());
            argv.push(tokc.to_str().unwrap().into());
        }
        let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
        let outcome = replay(&refs);
        let recs = read_records(&out);
        assert_eq!(recs.len(), 24);
        for r in &recs {
            assert_eq!(r.status, Status::Ok, "{mode}: {r:?}");
            assert_eq!(
                r.prompt_tokens,
                Some(r.input_length),
                "{mode}: request {}",
                r.index
            );
        }
        assert_eq!(outcome.summary.run.prompts.chat_overhead, Some(8), "{mode}");
        let pv = outcome.summary.run.prompts.prompt_verification.unwrap();
        assert!(pv.checked > 0 && pv.exact == pv.checked, "{mode}: {pv:?}");
    }
}

#[test]
fn summary_of_a_real_run_matches_vllm_definitions_recomputed_from_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 60, 64);
    let sim = default_sim();
    let out = dir.path().join("run.jsonl");
    let s = replay_sim(
        &sim.base_url(),
        &trace,
        &out,
        "3",
        &["--record-itl", "--goodput", "ttft:30", "tpot:4"],
    )
    .summary;
    let recs = read_records(&out);
    let ok: Vec<&Record> = recs.iter().filter(|r| r.status == Status::Ok).collect();
    assert_eq!(ok.len(), 60);

    let ttft: Vec<f64> = ok.iter().map(|r| r.ttft_ms.unwrap()).collect();
    let e2el: Vec<f64> = ok.iter().map(|r| r.e2e_ms.unwrap()).collect();
    let tpot: Vec<f64> = ok
        .iter()
        .filter(|r| r.output_tokens.unwrap() > 1)
        .map(|r| (r.e2e_ms.unwrap() - r.ttft_ms.unwrap()) / (r.output_tokens.unwrap() as f64 - 1.0))
        .collect();
    let itl: Vec<f64> = ok.iter().flat_map(|r| r.itl_ms.clone().unwrap()).collect();
    // E2EL − TTFT = Σ ITL for every request.
    for r in &ok {
        let sum: f64 = r.itl_ms.as_ref().unwrap().iter().sum();
        assert!(
            (r.e2e_ms.unwrap() - r.ttft_ms.unwrap() - sum).abs() < 0.01,
            "{r:?}"
        );
    }
    let close = |a: f64, b: f64, what: &str| {
        assert!(
            (a - b).abs() <= 1e-6 * b.abs().max(1.0) + 1e-3,
            "{what}: {a} vs {b}"
        )
    };
    let lat = &s.latency;
    close(lat[Metric::Ttft].mean, mean(&ttft), "mean ttft");
    close(
        lat[Metric::Ttft].percentile(99.0).unwrap(),
        np_percentile(&ttft, 99.0),
        "p99 ttft",
    );
    close(lat[Metric::Tpot].mean, mean(&tpot), "mean tpot");
    close(
        lat[Metric::Tpot].percentile(99.0).unwrap(),
        np_percentile(&tpot, 99.0),
        "p99 tpot",
    );
    close(lat[Metric::E2el].mean, mean(&e2el), "mean e2el");
    close(
        lat[Metric::E2el].percentile(99.0).unwrap(),
        np_percentile(&e2el, 99.0),
        "p99 e2el",
    );
    close(lat[Metric::Itl].mean, mean(&itl), "mean itl");
    close(
        lat[Metric::Itl].percentile(99.0).unwrap(),
        np_percentile(&itl, 99.0),
        "p99 itl",
    );

    // Throughputs over first send → last completion.
    let first = ok
        .iter()
        .map(|r| r.sent_ms.unwrap())
        .fold(f64::MAX, f64::min);
    let last = ok
        .iter()
        .map(|r| r.sent_ms.unwrap() + r.done_ms.or(r.e2e_ms).unwrap())
        .fold(0.0, f64::max);
    let dur = (last - first) / 1e3;
    close(s.duration_s, dur, "duration");
    let out_tokens: u64 = ok.iter().map(|r| u64::from(r.output_tokens.unwrap())).sum();
    let in_tokens: u64 = ok.iter().map(|r| u64::from(r.input_length)).sum();
    close(s.request_throughput, 60.0 / dur, "request throughput");
    close(
        s.output_throughput,
        out_tokens as f64 / dur,
        "output throughput",
    );
    close(
        s.total_token_throughput,
        (in_tokens + out_tokens) as f64 / dur,
        "total token throughput",
    );
    let good = ok
        .iter()
        .filter(|r| r.ttft_ms.unwrap() <= 30.0 && r.tpot_ms.is_none_or(|t| t <= 4.0))
        .count();
    close(s.request_goodput.unwrap(), good as f64 / dur, "goodput");
}

/// `--realtime auto` raises the dispatcher and, around send times, the I/O threads to
/// SCHED_FIFO when the system permits it (and says why not otherwise); `off` never does. Both
/// open the first connections before the clock starts and lose nothing.
#[test]
fn realtime_scheduling_is_used_when_permitted_and_reported() {
    use request_sim::schedule::{Realtime, RealtimeMode};
    let permitted = Realtime::new(RealtimeMode::Auto, 10).probe().is_ok();
    let sim = default_sim();
    let modes: &[&str] = if permitted {
        &["auto", "on", "off"]
    } else {
        &["auto", "off"]
    };
    for &mode in modes {
        let dir = tempfile::tempdir().unwrap();
        let trace = write_trace(dir.path(), 40, 64);
        let out = dir.path().join("out.jsonl");
        let extra = ["--threads", "2", "--realtime", mode];
        let outcome = replay_sim(&sim.base_url(), &trace, &out, "4", &extra);
        assert_eq!(outcome.exit_code, 0, "{mode}");
        let recs = read_records(&out);
        assert_eq!(recs.len(), 40, "{mode}");
        assert!(recs.iter().all(|r| r.status == Status::Ok), "{mode}");
        let run = &outcome.summary.run;
        let rt = run.internals.realtime.clone().unwrap();
        assert_eq!(serde_json::to_value(rt.mode).unwrap(), mode);
        let startup = run.internals.startup.unwrap();
        // 40 requests 2.5 ms apart: all in the first second, one connection each.
        assert_eq!(startup.connections, 40, "{mode}");
        if mode == "auto" && permitted {
            // The simulator is on this host: only the dispatcher is raised.
            assert_eq!(rt.policy, SchedPolicy::Fifo);
            assert!(rt.same_host.is_some(), "{rt:?}");
            assert_eq!((rt.io_threads, rt.io_raises), (0, 0), "{rt:?}");
            assert_eq!(rt.keep_awake_threads, 0, "{rt:?}");
        } else if mode == "on" {
            assert_eq!(rt.policy, SchedPolicy::Fifo);
            assert!(rt.same_host.is_none(), "{rt:?}");
            assert_eq!(rt.priority, Some(10));
            assert_eq!(rt.io_threads, 2, "both runtime threads were raised");
            assert!(rt.io_raises >= 1 && rt.io_raised_s > 0.0, "{rt:?}");
            assert!(rt.reason.is_none());
            // One keep-awake thread per core the process may use.
            let cores = core_affinity::get_core_ids().map_or(0, |c| c.len());
            assert_eq!(rt.keep_awake_threads, cores, "{rt:?}");
        } else {
            assert_eq!(rt.policy, SchedPolicy::Normal, "{mode}");
            assert_eq!((rt.io_threads, rt.io_raises), (0, 0), "{mode}");
            assert_eq!(rt.keep_awake_threads, 0, "{mode}");
            assert!(rt.reason.is_some(), "{mode}: says why not");
        }
    }
    if permitted {
        // `--no-keep-awake` (with `--realtime on`: the simulator is on this host): raised as
        // before, no spinning threads.
        let dir = tempfile::tempdir().unwrap();
        let trace = write_trace(dir.path(), 10, 64);
        let out = dir.path().join("out.jsonl");
        let extra = ["--threads", "2", "--no-keep-awake", "--realtime", "on"];
        let outcome = replay_sim(&sim.base_url(), &trace, &out, "4", &extra);
        assert_eq!(outcome.exit_code, 0);
        assert_eq!(read_records(&out).len(), 10);
        let rt = outcome.summary.run.internals.realtime.clone().unwrap();
        assert_eq!(rt.policy, SchedPolicy::Fifo);
        assert!(rt.io_raises >= 1, "{rt:?}");
        assert_eq!(rt.keep_awake_threads, 0, "{rt:?}");
    }
}

/// A body not built because its request is not due within the lookahead is not "not ready in
/// time": three requests 1.5 s apart with `--lookahead-secs 0.5` are each built shortly before
/// their time and all leave on time, and `run.dispatch.not_ready` stays 0 (it counted every
/// such wait before).
#[test]
fn waiting_for_a_body_beyond_the_lookahead_is_not_counted_as_late() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let rows: String = (0..3u64)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 64, \"output_length\": 2, \"hash_ids\": [{i}]}}\n",
                i * 1500
            )
        })
        .collect();
    std::fs::write(&trace, rows).unwrap();
    let sim = default_sim();
    let out = dir.path().join("out.jsonl");
    let extra = ["--lookahead-secs", "0.5"];
    let outcome = replay_sim(&sim.base_url(), &trace, &out, "1", &extra);
    assert_eq!(outcome.exit_code, 0);
    let recs = read_records(&out);
    assert_eq!(recs.len(), 3);
    assert!(recs.iter().all(|r| r.status == Status::Ok));
    let dispatch = outcome.summary.run.internals.dispatch.unwrap();
    assert_eq!(dispatch.not_ready, 0, "{dispatch:?}");
    assert_eq!(dispatch.late_over_5ms, 0, "{dispatch:?}");
}

/// The blitz replayer's own settings (`--num-producer 32 --channel-capacity 40960`): the clock
/// waits until every request of the first burst is built (the dispatcher can only send a
/// body it has taken from a producer, so none can leave before it exists), the producers run
/// below the sending threads, and a run cut short after 1 s does not build the whole trace.
#[test]
fn blitz_settings_prefill_the_first_burst_and_build_only_what_is_due() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let mut f = std::fs::File::create(&trace).unwrap();
    // 30 requests of 6,000 tokens at t = 0, then one every 100 ms for 200 s.
    for i in 0..2030u64 {
        let ts = i.saturating_sub(29) * 100;
        let ids: Vec<u64> = (0..94).map(|b| i * 100 + b).collect();
        writeln!(
            f,
            r#"{{"timestamp": {ts}, "input_length": 6000, "output_length": 4, "hash_ids": {ids:?}}}"#
        )
        .unwrap();
    }
    drop(f);
    let sim = default_sim();
    let out = dir.path().join("out.jsonl");
    let extra = [
        "--num-producer",
        "32",
        "--channel-capacity",
        "40960",
        "--time-in-secs",
        "1",
    ];
    let outcome = replay_sim(&sim.base_url(), &trace, &out, "1", &extra);
    let run = &outcome.summary.run;
    let startup = run.internals.startup.unwrap();
    assert_eq!(startup.prefill_due, 30, "{startup:?}");
    assert_eq!(startup.prefill_built, 30, "{startup:?}");
    let producer = run.internals.producer.unwrap();
    assert_eq!(producer.threads, 32);
    if cfg!(target_os = "linux") {
        assert_eq!(
            producer.nice,
            Some(request_sim::schedule::priority::PRODUCER_NICE)
        );
    }
    // Due within the 1 s run plus the 5 s lookahead: 30 + 60, plus at most one per producer.
    assert!(
        producer.bodies <= 30 + 61 + 32,
        "built {} bodies for a 1 s run",
        producer.bodies
    );
    // The run covers the requests due in its 1 s (30 + 9 or 10), each exactly once and sent.
    let recs = read_records(&out);
    assert!((39..=40).contains(&recs.len()), "{} records", recs.len());
    assert!(recs.iter().all(|r| r.status == Status::Ok));
    let mut idx: Vec<usize> = recs.iter().map(|r| r.index).collect();
    idx.sort_unstable();
    assert_eq!(idx, (0..recs.len()).collect::<Vec<_>>());
}

/// A burst that needs more connections than the pool still holds gets them opened ahead: one
/// request at t = 0 (one connection, opened before the clock), then eight due together at
/// 1.2 s with a 1 s pool idle timeout (the first connection no longer counts): eight warm-up
/// `GET`s before that burst, none before the first request, every request answered; with
/// `--no-warm-connections` none.
#[test]
fn a_burst_bigger_than_the_pool_gets_its_connections_opened_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let rows: String = std::iter::once(0u64)
        .chain(std::iter::repeat_n(1200, 8))
        .enumerate()
        .map(|(i, ts)| {
            format!(
                "{{\"timestamp\": {ts}, \"input_length\": 64, \"output_length\": 2, \"hash_ids\": [{i}]}}\n"
            )
        })
        .collect();
    std::fs::write(&trace, rows).unwrap();
    let sim = default_sim();
    for (warm, want) in [(true, (8, 1)), (false, (0, 0))] {
        let out = dir.path().join(format!("out-{warm}.jsonl"));
        let mut extra = vec!["--pool-idle-timeout", "1"];
        if !warm {
            extra.push("--no-warm-connections");
        }
        let outcome = replay_sim(&sim.base_url(), &trace, &out, "1", &extra);
        assert_eq!(outcome.exit_code, 0);
        let recs = read_records(&out);
        assert_eq!(recs.len(), 9);
        assert!(recs.iter().all(|r| r.status == Status::Ok), "{recs:?}");
        let d = outcome.summary.run.internals.dispatch.unwrap();
        assert_eq!((d.warm_gets, d.warm_bursts), want, "warm {warm}: {d:?}");
    }
}

/// Issue #38: the trace-ideal hit ratio counts only the requests the server processed, in send
/// order; a refused request (over llm-sim's `max_model_len`, HTTP 400) neither counts nor
/// leaves blocks behind. And the role preamble of a chat stream is no token: one ITL sample per
/// gap between tokens, none of them ~0.
#[test]
fn the_ideal_hit_ratio_is_over_the_requests_the_server_processed() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    // Blocks of 512. Request 1 (4096 tokens) is refused; had it been served, request 2 would
    // hit all 4 of its blocks.
    let rows = [
        (0, 1024, "[1, 2]"),
        (50, 4096, "[1, 2, 3, 4, 5, 6, 7, 8]"),
        (600, 2048, "[1, 2, 3, 4]"),
        (1200, 1536, "[1, 2, 3]"),
    ];
    let text: String = rows
        .iter()
        .map(|(t, n, ids)| {
            format!("{{\"timestamp\": {t}, \"input_length\": {n}, \"output_length\": 6, \"hash_ids\": {ids}}}\n")
        })
        .collect();
    std::fs::write(&trace, text).unwrap();
    let sim = start_sim(llm_sim::SimConfig {
        max_model_len: 3000,
        ..llm_sim::SimConfig::default()
    });
    let out = dir.path().join("out");
    let mut args = base_args(&sim.base_url(), &trace, &out);
    args.push("--stream".into());
    let outcome = replay(&strs(&args));
    let s = &outcome.summary;
    assert_eq!(s.status.http_error, 1, "{:?}", s.status);
    // Served: 0 + 1024 + 1536 hits over 1024 + 2048 + 1536 tokens (counting the refused one:
    // 4608 / 8704).
    let ideal = s.cache.ideal_hit_ratio.unwrap();
    assert!((ideal - 2560.0 / 4608.0).abs() < 1e-9, "{ideal}");
    assert_eq!(
        (s.cache.ideal_requests, s.cache.ideal_sent),
        (Some(3), Some(4))
    );
    // Role preamble: 6 tokens, 6 token events, 5 gaps each.
    let recs = read_records(&out.join("records.jsonl"));
    for r in recs.iter().filter(|r| r.status == Status::Ok) {
        assert_eq!(r.chunks, 6, "{r:?}");
    }
    let itl = &s.latency[Metric::Itl];
    assert_eq!(
        itl.count,
        3 * 5,
        "a role chunk counted as a token adds a ~0 ms gap each"
    );
}

/// Issue #38: the server's block size is read from `vllm:cache_config_info`; a trace whose
/// blocks are no multiple of it gets a warning and the ideal at the server's block size,
/// which is what a whole-block cache (llm-sim, as vLLM) then reaches.
#[test]
fn the_servers_block_size_gives_the_ideal_it_can_reach() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    // 16-token trace blocks; each request extends the previous one by 40 tokens.
    let mut text = String::new();
    let mut ids: Vec<u64> = Vec::new();
    for i in 0..8u32 {
        let n = 40 * (i + 1);
        while (ids.len() as u32) * 16 < n {
            ids.push(ids.len() as u64 + 1);
        }
        text.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": {n}, \"output_length\": 2, \"hash_ids\": {ids:?}}}\n",
            i * 100
        ));
    }
    std::fs::write(&trace, text).unwrap();
    let sim = start_sim(llm_sim::SimConfig {
        block_size: 32,
        ..llm_sim::SimConfig::default()
    });
    let out = dir.path().join("out");
    // Completions: no chat template, so the prompt's tokens are the trace's blocks exactly.
    let mut args = base_args(&format!("{}/v1/completions", sim.base_url()), &trace, &out);
    args.retain(|a| a != "--no-server-metrics");
    args.extend(["--block-size".into(), "16".into()]);
    let s = replay(&strs(&args)).summary;
    assert_eq!(s.status.ok, 8);
    assert_eq!(s.cache.server_block_size, Some(32));
    let at_server = s.cache.ideal_hit_ratio_server_blocks.unwrap();
    let ideal = s.cache.ideal_hit_ratio.unwrap();
    assert!(at_server < ideal, "{at_server} vs {ideal}");
    let served = s.cache.hit_ratio.unwrap();
    assert!(
        (served - at_server).abs() < 1e-9,
        "server {served} vs ideal at its blocks {at_server}"
    );
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("16-token blocks do not map onto the server's 32-token")),
        "{:?}",
        s.warnings
    );
}

/// On a plain-HTTP endpoint every answered request has its receive lateness, the summary
/// gathers it, and a server on this host is said and left its cores; a lateness p99 above
/// `--max-drift-ms` makes the run invalid.
#[test]
fn receive_lateness_is_measured_and_judged_and_a_local_server_keeps_its_cores() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 30, 64);
    let sim = default_sim();
    let out = dir.path().join("out.jsonl");
    let outcome = replay_sim(&sim.base_url(), &trace, &out, "2", &[]);
    let recs = read_records(&out);
    assert_eq!(recs.len(), 30);
    for r in &recs {
        assert_eq!(r.status, Status::Ok, "{r:?}");
        let late = r
            .rx_late_ms
            .expect("a plain-HTTP answer has its receive lateness");
        assert!((0.0..1000.0).contains(&late), "{r:?}");
        // The send time is the first byte into the socket, after the request's due time.
        assert!(r.drift_ms.unwrap() >= 0.0);
        assert!(r.ttft_ms.unwrap() > 0.0);
    }
    let s = &outcome.summary;
    assert_eq!(s.rx_late.count, 30);
    let worst = recs.iter().filter_map(|r| r.rx_late_ms).fold(0.0, f64::max);
    assert!((s.rx_late.max_ms - worst).abs() < 1e-9);
    // The simulator listens on 127.0.0.1: this host.
    let rt = s
        .run
        .internals
        .realtime
        .as_ref()
        .expect("the run's scheduling");
    assert_eq!(rt.mode, request_sim::schedule::RealtimeMode::Auto);
    let same = rt.same_host.as_deref();
    assert!(same.is_some_and(|w| w.contains("127.0.0.1")), "{same:?}");
    assert_eq!(rt.io_raises, 0, "I/O threads never raised");
    assert_eq!(rt.keep_awake_threads, 0);
    assert!(
        !s.invalid.iter().any(|w| w.contains("receive lateness")),
        "{:?}",
        s.invalid
    );
    // The same run judged against 0 ms: any lateness at all is too late.
    let out0 = dir.path().join("strict.jsonl");
    let judged = replay_sim(
        &sim.base_url(),
        &trace,
        &out0,
        "2",
        &["--max-drift-ms", "0"],
    );
    assert!(
        judged
            .summary
            .invalid
            .iter()
            .any(|w| w.contains("receive lateness p99")),
        "{:?}",
        judged.summary.invalid
    );
}
