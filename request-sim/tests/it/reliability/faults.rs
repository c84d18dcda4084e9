//! Fault accounting against llm-sim's fault switches on 127.0.0.1: with 20% of requests failing
//! in one fault mode, 2,000 requests replayed give 2,000 records (one per index), exactly the
//! injected number of failures with the right error kind, counts that add up in the summary, and
//! summary metrics computed over the successes only.
//!
//! The expected number of faults is computed with llm-sim's own `plan_for` over request numbers
//! 0..2000: the fault draw is a pure function of (seed, request number), so the count does not
//! depend on the order in which requests reach the server, only on every request reaching it
//! exactly once (no calibration request, no retries).

use std::path::Path;

use crate::support::*;
use llm_sim::faults::plan_for;
use llm_sim::FaultConfig;
use request_sim::record::{Record, Status, TokenSource};
use request_sim::stats::Metric;
use request_sim::stats::Summary;

const N: usize = 2_000;
/// Trace span: 2,000 requests in 5 s (400 requests/s).
const SPAN_MS: f64 = 5_000.0;
/// Output tokens per request.
const OUT: u32 = 4;

struct Run {
    records: Vec<Record>,
    summary: Summary,
    exit_code: i32,
    injected: usize,
}

/// Replay N requests against a simulator with `faults`, `extra` flags added.
fn run_with(
    dir: &Path,
    faults: FaultConfig,
    injected: impl Fn(&llm_sim::faults::FaultPlan) -> bool,
    extra: &[&str],
) -> Run {
    let injected = (0..N as u64)
        .filter(|&n| injected(&plan_for(&faults, n)))
        .count();
    // 20% +- a few percent of 2,000.
    assert!(
        injected == 0 || (330..=470).contains(&injected),
        "{injected}"
    );
    let sim = faulty_sim(faults);
    let trace = write_trace(dir, "trace.jsonl", N, SPAN_MS, 16, OUT);
    let mut args = base_args(&sim.base_url(), &trace, dir);
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = replay(&strs(&args));
    let records = read_records(&dir.join("records.jsonl"));
    let summary = read_summary_file(&dir.join("records.jsonl.summary.json"));
    // The file holds the returned summary (floats may differ in the last bit after JSON).
    assert_eq!(summary.status, out.summary.status);
    assert_eq!(summary.errors, out.summary.errors);
    assert_eq!(
        summary.latency[Metric::Ttft].count,
        out.summary.latency[Metric::Ttft].count
    );
    // Before the clock starts, and before bursts the pool is too small for, the replayer opens
    // keep-alive connections with cheap `GET /v1/models` requests, which the simulator answers
    // (and counts) too.
    let warmup_gets = summary
        .run
        .internals
        .startup
        .as_ref()
        .map_or(0, |s| s.connections);
    assert!(warmup_gets >= 1, "connections are opened before the start");
    // A warm-up GET before a burst that the slow accept holds past its 2 s limit is given up
    // before the server ever counts it: those GETs reached the server at most once each.
    let burst_gets = summary
        .run
        .internals
        .dispatch
        .as_ref()
        .map_or(0, |d| d.warm_gets as usize);
    let generation = sim_requests(&sim) - warmup_gets;
    assert!(
        (N..=N + burst_gets).contains(&generation),
        "every request reached the server exactly once: {generation} requests beyond the \
         {warmup_gets} start-up GETs, with {burst_gets} burst GETs sent, for {N}"
    );
    Run {
        records,
        summary,
        exit_code: out.exit_code,
        injected,
    }
}

/// Generation requests the simulator saw (every answered status).
fn sim_requests(sim: &llm_sim::SimThread) -> usize {
    let m = sim.metrics();
    [200u16, 400, 404, 405, 413, 422, 429, 500, 503]
        .iter()
        .map(|&s| m.status_count(s) as usize)
        .sum()
}

/// The invariants every run must keep, whatever the fault.
fn check_accounting(r: &Run, failed_status: Status) {
    assert_eq!(r.records.len(), N, "one record per scheduled request");
    assert_one_record_per_index(&r.records, N);
    let s = &r.summary;
    assert_eq!(s.scheduled, N);
    assert_eq!(s.run.outcome.never_sent, 0);
    assert_eq!(
        s.run.outcome.stop_reason.map(|r| r.as_str()),
        Some("completed")
    );
    assert_eq!(r.exit_code, 0);
    assert!(s.counts_add_up);
    assert_eq!(s.status.total, N);
    let rows: usize = s.status.rows().iter().map(|(_, n)| n).sum();
    assert_eq!(rows, N, "status rows add up: {:?}", s.status);

    let count = |st: Status| r.records.iter().filter(|x| x.status == st).count();
    assert_eq!(
        count(failed_status),
        r.injected,
        "{failed_status:?} records"
    );
    assert_eq!(count(Status::Ok), N - r.injected, "every other request ok");
    assert_eq!(s.status.ok, N - r.injected);
    assert_eq!(s.completed, N - r.injected);
    assert_eq!(s.failed, r.injected);
    assert_eq!(
        s.errors.values().sum::<usize>(),
        r.injected,
        "errors by kind: {:?}",
        s.errors
    );
    for x in r.records.iter().filter(|x| x.status != Status::Ok) {
        assert!(x.error.as_deref().is_some_and(|e| !e.is_empty()), "{x:?}");
    }

    // Metrics over the successes only.
    let ok: Vec<&Record> = r
        .records
        .iter()
        .filter(|x| x.status == Status::Ok)
        .collect();
    assert_eq!(
        s.total_input_tokens,
        ok.iter().map(|x| u64::from(x.input_length)).sum::<u64>()
    );
    assert_eq!(
        s.total_output_tokens,
        ok.iter()
            .map(|x| u64::from(x.output_tokens.unwrap()))
            .sum::<u64>()
    );
    let ttft: Vec<f64> = ok.iter().map(|x| x.ttft_ms.unwrap()).collect();
    let e2el: Vec<f64> = ok.iter().map(|x| x.e2e_ms.unwrap()).collect();
    // vLLM's TPOT: (E2EL - TTFT) / (output tokens - 1), for more than one output token.
    let tpot: Vec<f64> = ok
        .iter()
        .filter(|x| x.output_tokens.unwrap() > 1)
        .map(|x| (x.e2e_ms.unwrap() - x.ttft_ms.unwrap()) / f64::from(x.output_tokens.unwrap() - 1))
        .collect();
    assert_eq!(s.latency[Metric::Ttft].count as usize, ok.len());
    assert_eq!(s.latency[Metric::E2el].count as usize, ok.len());
    assert_eq!(s.latency[Metric::Tpot].count as usize, tpot.len());
    assert!(
        (s.latency[Metric::Ttft].mean - mean(&ttft)).abs() < 1e-6,
        "{} vs {}",
        s.latency[Metric::Ttft].mean,
        mean(&ttft)
    );
    assert!((s.latency[Metric::E2el].mean - mean(&e2el)).abs() < 1e-6);
    assert!((s.latency[Metric::Tpot].mean - mean(&tpot)).abs() < 1e-6);
    let max_ttft = ttft.iter().cloned().fold(f64::MIN, f64::max);
    assert!((s.latency[Metric::Ttft].max - max_ttft).abs() < 1e-9);
}

fn http_error_mode(status: u16) {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultConfig {
        seed: 11,
        error_500_rate: if status == 500 { 0.2 } else { 0.0 },
        error_429_rate: if status == 429 { 0.2 } else { 0.0 },
        error_503_rate: if status == 503 { 0.2 } else { 0.0 },
        ..FaultConfig::default()
    };
    let r = run_with(dir.path(), faults, |p| p.status == Some(status), &[]);
    check_accounting(&r, Status::HttpError);
    for x in r.records.iter().filter(|x| x.status == Status::HttpError) {
        assert_eq!(x.http_status, Some(status));
        let e = x.error.as_deref().unwrap();
        assert!(
            e.starts_with(&format!("HTTP {status}: Simulated fault")),
            "{e}"
        );
        assert!(e.len() <= 600);
        assert_eq!((x.ttft_ms, x.output_tokens, x.chunks), (None, None, 0));
    }
    assert_eq!(
        r.summary.errors.get(&format!("http_error:{status}")),
        Some(&r.injected),
        "{:?}",
        r.summary.errors
    );
}

#[test]
fn http_500_at_20_percent() {
    http_error_mode(500);
}

#[test]
fn http_429_at_20_percent() {
    http_error_mode(429);
}

#[test]
fn http_503_at_20_percent() {
    http_error_mode(503);
}

#[test]
fn reset_mid_stream_is_a_connect_error() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultConfig {
        seed: 12,
        reset_rate: 0.2,
        ..FaultConfig::default()
    };
    let r = run_with(dir.path(), faults, |p| p.reset, &[]);
    check_accounting(&r, Status::ConnectError);
    for x in r
        .records
        .iter()
        .filter(|x| x.status == Status::ConnectError)
    {
        assert_eq!(
            x.http_status,
            Some(200),
            "the head arrived before the reset"
        );
        // Cut before the end (a reset may also discard the bytes still in flight).
        assert!(x.chunks <= OUT, "reset inside the stream: {x:?}");
    }
}

#[test]
fn stall_is_a_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultConfig {
        seed: 13,
        stall_rate: 0.2,
        stall_ms: 20_000,
        ..FaultConfig::default()
    };
    let r = run_with(dir.path(), faults, |p| p.stall, &["--request-timeout", "4"]);
    check_accounting(&r, Status::Timeout);
    for x in r.records.iter().filter(|x| x.status == Status::Timeout) {
        assert_eq!(
            x.error.as_deref(),
            Some("no complete response within 4.0 s")
        );
        // Stalled before the end: at most the role chunk and OUT - 1 tokens arrived.
        assert!(x.chunks <= OUT, "{x:?}");
    }
}

#[test]
fn malformed_chunk_is_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultConfig {
        seed: 14,
        malformed_rate: 0.2,
        ..FaultConfig::default()
    };
    let r = run_with(dir.path(), faults, |p| p.malformed, &[]);
    check_accounting(&r, Status::ProtocolError);
    for x in r
        .records
        .iter()
        .filter(|x| x.status == Status::ProtocolError)
    {
        let e = x.error.as_deref().unwrap();
        assert!(e.starts_with("malformed SSE JSON"), "{e}");
    }
}

#[test]
fn missing_usage_is_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultConfig {
        seed: 15,
        missing_usage_rate: 0.2,
        ..FaultConfig::default()
    };
    let r = run_with(dir.path(), faults, |p| p.missing_usage, &[]);
    check_accounting(&r, Status::ProtocolError);
    for x in r
        .records
        .iter()
        .filter(|x| x.status == Status::ProtocolError)
    {
        assert!(x.error.as_deref().unwrap().contains("no usage"), "{x:?}");
        // The stream itself was complete: OUT tokens after the role preamble (no token).
        assert_eq!(x.chunks, OUT, "{x:?}");
    }
}

#[test]
fn missing_usage_allowed_counts_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultConfig {
        seed: 15,
        missing_usage_rate: 0.2,
        ..FaultConfig::default()
    };
    let injected = (0..N as u64)
        .filter(|&n| plan_for(&faults, n).missing_usage)
        .count();
    let r = run_with(dir.path(), faults, |_| false, &["--allow-missing-usage"]);
    // Nothing fails: every record is ok.
    check_accounting(&Run { injected: 0, ..r }, Status::ProtocolError);
    let r_records = read_records(&dir.path().join("records.jsonl"));
    let from_chunks: Vec<&Record> = r_records
        .iter()
        .filter(|x| x.output_tokens_source == Some(TokenSource::Chunks))
        .collect();
    assert_eq!(from_chunks.len(), injected);
    for x in from_chunks {
        assert_eq!(
            (x.status, x.output_tokens, x.prompt_tokens),
            (Status::Ok, Some(OUT), None)
        );
    }
    let s = read_summary_file(&dir.path().join("records.jsonl.summary.json"));
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains(&format!("SERVER GAVE NO USAGE for {injected} of {N}"))),
        "a loud warning about missing usage: {:?}",
        s.warnings
    );
}

#[test]
fn slow_accept_delays_but_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let faults = FaultConfig {
        seed: 16,
        slow_accept_rate: 0.2,
        slow_accept_ms: 300,
        ..FaultConfig::default()
    };
    // Connections, not requests, are delayed: nothing fails.
    let r = run_with(dir.path(), faults, |_| false, &[]);
    check_accounting(&r, Status::Timeout);
    assert_eq!(r.summary.status.ok, N);
}
