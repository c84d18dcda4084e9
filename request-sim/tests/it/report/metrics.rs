//! The summary agrees with vLLM's definitions recomputed independently from the JSONL.

use std::io::Write;

use request_sim::stats::Metric;
use request_sim::stats::Percentiles;

use crate::support::{base_record, mean, np_percentile, synthetic, write_jsonl};
use request_sim::record::{read_records, Record, Status};
use request_sim::report::{render_compare, render_console};
use request_sim::stats::{report_from_records, Accumulator, ReportConfig, RunInfo, Slo, Summary};

fn std(v: &[f64]) -> f64 {
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len().max(1) as f64).sqrt()
}

fn close(a: f64, b: f64, what: &str) {
    let tol = 1e-9 * a.abs().max(b.abs()).max(1.0);
    assert!(
        (a - b).abs() <= tol,
        "{what}: summary {a} vs independent {b}"
    );
}

fn slo() -> Slo {
    Slo::parse(&["ttft:200".into(), "tpot:20".into(), "e2el:1500".into()]).unwrap()
}

fn cfg() -> ReportConfig {
    ReportConfig {
        percentiles: Percentiles::new(vec![25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9]).unwrap(),
        slo: slo(),
        window: None,
    }
}

#[test]
fn summary_matches_independent_vllm_computation() {
    let mut recs = synthetic(600, 7);
    // vLLM's peak output tokens/s counts a token per chunk; request-sim calls it unknown when
    // several tokens came in one piece (their times are not known): one token per chunk here.
    for r in recs.iter_mut().filter(|r| r.chunks == 1) {
        r.output_tokens = r.output_tokens.map(|o| o.min(1));
        r.tpot_ms = None;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    write_jsonl(&path, &recs);
    let s = report_from_records(&path, &cfg(), None).unwrap();

    // Independent computation, vLLM's calculate_metrics written out.
    let ok: Vec<&Record> = recs.iter().filter(|r| r.status == Status::Ok).collect();
    let ttfts: Vec<f64> = ok.iter().map(|r| r.ttft_ms.unwrap()).collect();
    let e2els: Vec<f64> = ok.iter().map(|r| r.e2e_ms.unwrap()).collect();
    let outs: Vec<u32> = ok.iter().map(|r| r.output_tokens.unwrap()).collect();
    let mut tpots = Vec::new();
    let mut all_tpots = Vec::new();
    for (r, out) in ok.iter().zip(&outs) {
        // An output in one piece has no TPOT (request-sim's one departure from vLLM: unknown,
        // not 0).
        let t = if *out > 1 && r.chunks > 1 {
            let t = (r.e2e_ms.unwrap() - r.ttft_ms.unwrap()) / (*out as f64 - 1.0);
            tpots.push(t);
            t
        } else {
            0.0
        };
        all_tpots.push(t);
    }
    let itls: Vec<f64> = ok.iter().flat_map(|r| r.itl_ms.clone().unwrap()).collect();
    let first = recs
        .iter()
        .filter_map(|r| r.sent_ms)
        .fold(f64::MAX, f64::min);
    let last = recs
        .iter()
        .filter_map(|r| Some(r.sent_ms? + r.done_ms.or(r.e2e_ms)?))
        .fold(f64::MIN, f64::max);
    let duration = (last - first) / 1000.0;
    let total_in: u64 = ok.iter().map(|r| r.input_length as u64).sum();
    let total_out: u64 = outs.iter().map(|x| *x as u64).sum();
    let good = ok
        .iter()
        .zip(&all_tpots)
        .filter(|(r, t)| r.ttft_ms.unwrap() <= 200.0 && **t <= 20.0 && r.e2e_ms.unwrap() <= 1500.0)
        .count();

    assert_eq!(s.completed, ok.len());
    let sent_not_ok = recs
        .iter()
        .filter(|r| r.sent_ms.is_some() && r.status != Status::Ok)
        .count();
    assert_eq!(s.failed, sent_not_ok);
    assert!(
        s.failed > 0 && good > 0 && good < ok.len(),
        "test data exercises goodput"
    );
    close(s.duration_s, duration, "duration");
    assert_eq!(s.total_input_tokens, total_in);
    assert_eq!(s.total_output_tokens, total_out);
    close(
        s.request_throughput,
        ok.len() as f64 / duration,
        "request_throughput",
    );
    close(
        s.output_throughput,
        total_out as f64 / duration,
        "output_throughput",
    );
    close(
        s.total_token_throughput,
        (total_in + total_out) as f64 / duration,
        "total_token_throughput",
    );
    assert_eq!(s.good_requests, Some(good));
    close(
        s.request_goodput.unwrap(),
        good as f64 / duration,
        "goodput",
    );

    for (name, vals, m) in [
        ("ttft", &ttfts, &s.latency[Metric::Ttft]),
        ("tpot", &tpots, &s.latency[Metric::Tpot]),
        ("itl", &itls, &s.latency[Metric::Itl]),
        ("e2el", &e2els, &s.latency[Metric::E2el]),
    ] {
        assert_eq!(m.count as usize, vals.len(), "{name} count");
        close(m.mean, mean(vals), &format!("mean {name}"));
        close(m.std, std(vals), &format!("std {name}"));
        close(
            m.median,
            np_percentile(vals, 50.0),
            &format!("median {name}"),
        );
        for p in [25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9] {
            close(
                m.percentile(p).unwrap(),
                np_percentile(vals, p),
                &format!("p{p} {name}"),
            );
        }
    }

    // vLLM's peak concurrency and peak output tokens per 1-s bucket.
    let base = ok
        .iter()
        .map(|r| r.sent_ms.unwrap())
        .fold(f64::MAX, f64::min);
    let max_end = ok
        .iter()
        .map(|r| r.sent_ms.unwrap() + r.e2e_ms.unwrap())
        .fold(0.0, f64::max);
    let secs = ((max_end - base) / 1000.0).ceil() as usize + 1;
    let mut tok = vec![0u64; secs];
    let mut conc = vec![0u64; secs];
    for r in &ok {
        let st = r.sent_ms.unwrap();
        let mut t = st + r.ttft_ms.unwrap();
        tok[((t - base) / 1000.0) as usize] += 1;
        for g in r.itl_ms.as_ref().unwrap() {
            t += g;
            tok[((t - base) / 1000.0) as usize] += 1;
        }
        let a = ((st - base) / 1000.0) as usize;
        let b = ((st + r.e2e_ms.unwrap() - base) / 1000.0) as usize;
        for c in conc.iter_mut().take(b + 1).skip(a) {
            *c += 1;
        }
    }
    assert_eq!(s.max_concurrent_requests, *conc.iter().max().unwrap());
    let peak = *tok.iter().max().unwrap() as f64;
    // Buckets are aligned to the first successful send to 1 ms: allow a token or two.
    let got = s
        .max_output_tokens_per_s
        .expect("every chunk time is in the records");
    assert!((got - peak).abs() <= 2.0, "peak tok/s {got} vs {peak}");

    // Replayer extras.
    assert_eq!(s.status.total, recs.len());
    assert_eq!(s.scheduled, recs.len());
    assert!(s.counts_add_up);
    assert_eq!(
        s.status.ok
            + s.status.http_error
            + s.status.timeout
            + s.status.connect_error
            + s.status.protocol_error
            + s.status.cancelled
            + s.status.dry_run,
        s.status.total
    );
    assert_eq!(s.status.not_sent, 1);
    assert!(s.errors["http_error:503"] > 0);
    assert!(s.errors["timeout"] > 0);
    let drifts: Vec<f64> = recs.iter().filter_map(|r| r.drift_ms).collect();
    close(s.drift.p99_ms, np_percentile(&drifts, 99.0), "drift p99");
    close(
        s.drift.max_ms,
        drifts.iter().cloned().fold(0.0, f64::max),
        "drift max",
    );
    let with_usage: Vec<&Record> = recs.iter().filter(|r| r.prompt_tokens.is_some()).collect();
    assert_eq!(s.token_exactness.with_usage, with_usage.len());
    assert_eq!(
        s.token_exactness.exact,
        with_usage
            .iter()
            .filter(|r| r.prompt_tokens == Some(r.input_length))
            .count()
    );
    let pt: u64 = with_usage
        .iter()
        .map(|r| r.prompt_tokens.unwrap() as u64)
        .sum();
    let ct: u64 = with_usage
        .iter()
        .map(|r| r.cached_tokens.unwrap() as u64)
        .sum();
    close(
        s.cache.hit_ratio.unwrap(),
        ct as f64 / pt as f64,
        "cache ratio",
    );
    assert!(s.output_tokens_source.chunks > 0);
    assert!(s.warnings.iter().any(|w| w.contains("NO USAGE")));
}

#[test]
fn streaming_accumulator_equals_report_from_jsonl() {
    // The engine passes ITL separately and may not keep it in the record.
    let recs = synthetic(300, 11);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    write_jsonl(&path, &recs);
    let mut info = RunInfo::new();
    info.outcome.scheduled = recs.len();
    info.seed = Some(42);
    let mut acc = Accumulator::new(&cfg());
    // Completion order differs from send order.
    for r in recs.iter().rev() {
        let itl = r.itl_ms.clone().unwrap_or_default();
        let mut slim = r.clone();
        slim.itl_ms = None;
        acc.add(&slim, &itl);
    }
    let live = acc.finish(&info);
    let again = report_from_records(&path, &cfg(), Some(info)).unwrap();
    assert_eq!(live, again);

    // JSON round trip, with vLLM's keys.
    let json = serde_json::to_string_pretty(&live).unwrap();
    for key in [
        "\"completed\"",
        "\"failed\"",
        "\"duration_s\"",
        "\"total_input_tokens\"",
        "\"total_output_tokens\"",
        "\"request_throughput\"",
        "\"request_goodput\"",
        "\"output_throughput\"",
        "\"total_token_throughput\"",
        "\"max_output_tokens_per_s\"",
        "\"max_concurrent_requests\"",
        "\"mean_ttft_ms\"",
        "\"median_tpot_ms\"",
        "\"std_itl_ms\"",
        "\"p99_e2el_ms\"",
        "\"p99.9_ttft_ms\"",
        "\"p50_ms\"",
    ] {
        assert!(json.contains(key), "missing {key}");
    }
    assert!(!json.contains("NaN") && !json.contains("null,\n  \"mean"));
    let back: Summary = serde_json::from_str(&json).unwrap();
    // serde_json parses floats to within an ulp: compare the trees with a tolerance.
    assert_json_close(
        &serde_json::to_value(&back).unwrap(),
        &serde_json::to_value(&live).unwrap(),
        "",
    );
    assert_eq!(back.latency[Metric::Itl].percentiles.len(), 7);
    assert_eq!(back.percentiles, live.percentiles);
}

fn assert_json_close(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value::*;
    match (a, b) {
        (Number(x), Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(1.0),
                "{at}: {x} vs {y}"
            );
        }
        (Object(x), Object(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: keys differ");
            for (k, v) in x {
                assert_json_close(v, &y[k], &format!("{at}.{k}"));
            }
        }
        (Array(x), Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}");
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                assert_json_close(p, q, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

#[test]
fn percentile_interpolation_cases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.jsonl");
    // TTFT values 10, 20, 30, 40 -> numpy: p50 = 25, p25 = 17.5, p99 = 39.7, p0 = 10.
    let recs: Vec<Record> = [40.0, 10.0, 30.0, 20.0]
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut r = base_record(i);
            r.sent_ms = Some(i as f64);
            r.drift_ms = Some(0.0);
            r.ttft_ms = Some(*t);
            r.e2e_ms = Some(*t);
            r.output_tokens = Some(1);
            r.chunks = 1;
            r
        })
        .collect();
    write_jsonl(&path, &recs);
    let cfg = ReportConfig {
        percentiles: Percentiles::new(vec![0.001, 25.0, 50.0, 99.0, 100.0]).unwrap(),
        ..ReportConfig::default()
    };
    let s = report_from_records(&path, &cfg, None).unwrap();
    let t = &s.latency[Metric::Ttft];
    assert!((t.percentile(0.001).unwrap() - 10.0).abs() < 0.01);
    assert_eq!(t.percentile(25.0), Some(17.5));
    assert_eq!(t.percentile(50.0), Some(25.0));
    assert!((t.percentile(99.0).unwrap() - 39.7).abs() < 1e-12);
    assert_eq!(t.percentile(100.0), Some(40.0));
    assert_eq!(t.median, 25.0);
    assert!((t.std - 125f64.sqrt()).abs() < 1e-12);
    // No request had more than one token: TPOT is empty and reported as zeros.
    assert_eq!(s.latency[Metric::Tpot].count, 0);
    assert_eq!(s.latency[Metric::Tpot].mean, 0.0);
    assert!(s.request_goodput.is_none());
    // A single value: every percentile is that value.
    let one = report_from_records(
        &{
            let p = dir.path().join("one.jsonl");
            write_jsonl(&p, &recs[..1]);
            p
        },
        &cfg,
        None,
    )
    .unwrap();
    assert_eq!(one.latency[Metric::Ttft].percentile(99.0), Some(40.0));
}

#[test]
fn partial_last_line_is_tolerated_and_reported() {
    let recs = synthetic(20, 3);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.jsonl");
    write_jsonl(&path, &recs);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    let next = serde_json::to_string(&recs[0]).unwrap();
    write!(f, "{}", &next[..next.len() / 2]).unwrap();
    drop(f);
    let (read, st) = read_records(&path).unwrap();
    assert_eq!(read.len(), 20);
    assert_eq!(st.partial_last_line, Some(21));
    let s = report_from_records(&path, &ReportConfig::default(), None).unwrap();
    assert!(s.warnings.iter().any(|w| w.contains("line 21")));

    // A bad line in the middle is an error naming file:line.
    let bad = dir.path().join("bad.jsonl");
    let mut text = String::new();
    for (i, r) in recs.iter().enumerate() {
        if i == 4 {
            text.push_str("{not json}\n");
        }
        text.push_str(&serde_json::to_string(r).unwrap());
        text.push('\n');
    }
    std::fs::write(&bad, text).unwrap();
    let e = read_records(&bad).unwrap_err().to_string();
    assert!(e.contains("bad.jsonl:5:"), "{e}");
}

#[test]
fn zero_completed_gives_zeros_not_nan() {
    let mut recs = Vec::new();
    for i in 0..3 {
        let mut r = base_record(i);
        r.status = Status::ConnectError;
        r.sent_ms = Some(i as f64 * 10.0);
        r.drift_ms = Some(0.1);
        r.error = Some("connection refused".into());
        recs.push(r);
    }
    let mut acc = Accumulator::new(&cfg());
    for r in &recs {
        acc.add(r, &[]);
    }
    let mut info = RunInfo::new();
    info.outcome.scheduled = 4;
    let s = acc.finish(&info);
    assert_eq!(s.completed, 0);
    assert_eq!(s.failed, 3);
    assert_eq!(s.duration_s, 0.0);
    assert_eq!(s.request_throughput, 0.0);
    assert_eq!(s.request_goodput, Some(0.0));
    assert_eq!(s.latency[Metric::Ttft].mean, 0.0);
    assert_eq!(s.latency[Metric::Ttft].percentile(99.0), Some(0.0));
    assert!(!s.counts_add_up);
    assert!(s.warnings.iter().any(|w| w.contains("missing")));
    let json = serde_json::to_string(&s).unwrap();
    assert!(!json.contains("NaN"));
    let text = render_console(&s);
    assert!(text.contains("connect_error"));
    // An empty accumulator too.
    let empty = Accumulator::new(&ReportConfig::default()).finish(&RunInfo::new());
    assert_eq!(empty.completed, 0);
    render_console(&empty);
}

#[test]
fn console_has_vllm_shape() {
    let recs = synthetic(200, 5);
    let mut acc = Accumulator::new(&cfg());
    for r in &recs {
        acc.add(r, r.itl_ms.as_deref().unwrap_or(&[]));
    }
    let mut info = RunInfo::new();
    info.outcome.scheduled = recs.len();
    info.seed = Some(1234);
    let s = acc.finish(&info);
    let text = render_console(&s);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "============ Serving Benchmark Result ============"
    );
    assert!(lines[1].starts_with(&format!(
        "{:<40} {:<10}",
        "Successful requests:", s.completed
    )));
    assert!(text.contains(&format!(
        "{:<40} {:<10.2}\n",
        "Request goodput (req/s):",
        s.request_goodput.unwrap()
    )));
    for h in [
        "---------------Time to First Token----------------",
        "-----Time per Output Token (excl. 1st token)------",
        "---------------Inter-token Latency----------------",
        "----------------End-to-end Latency----------------",
    ] {
        assert!(lines.contains(&h), "missing section {h}");
    }
    assert!(text.contains(&format!(
        "{:<40} {:<10.2}",
        "P99 TTFT (ms):",
        s.latency[Metric::Ttft].percentile(99.0).unwrap()
    )));
    assert!(text.contains("P99.9 ITL (ms):"));
    assert!(text.contains("Send drift") && text.contains("Prefix cache"));
    assert!(text.contains("Token exactness") && text.contains("Seed:"));
    assert!(lines.contains(&"=".repeat(50).as_str()));

    let mut other = s.clone();
    other.request_throughput *= 1.1;
    other.latency[Metric::Ttft].mean *= 0.5;
    let cmp = render_compare(&s, &other);
    assert!(cmp.contains("+10.0%"), "{cmp}");
    assert!(cmp.contains("-50.0%"), "{cmp}");
}

#[test]
fn print_console_example() {
    // `cargo test --test it print_console_example -- --nocapture` shows the table.
    let recs = synthetic(400, 21);
    let mut acc = Accumulator::new(&cfg());
    for r in &recs {
        acc.add(r, r.itl_ms.as_deref().unwrap_or(&[]));
    }
    let mut info = RunInfo::new();
    info.outcome.scheduled = recs.len();
    info.seed = Some(7);
    info.prompts.ideal_cache_hit_ratio = Some(0.5);
    let s = acc.finish(&info);
    println!("{}", render_console(&s));
    let mut b = s.clone();
    b.request_throughput *= 0.9;
    b.latency[Metric::Ttft].percentiles[5].1 *= 1.3;
    println!("{}", render_compare(&s, &b));
}

#[test]
fn drift_above_1ms_at_normal_priority_is_a_warning() {
    let recs = synthetic(200, 5);
    let p99 = {
        let mut acc = Accumulator::new(&cfg());
        recs.iter().for_each(|r| acc.add(r, &[]));
        acc.finish(&RunInfo::new()).drift.p99_ms
    };
    let run = |policy: &str| {
        let mut info = RunInfo::new();
        info.internals.realtime = Some(request_sim::schedule::RealtimeReport {
            mode: request_sim::schedule::RealtimeMode::Auto,
            policy: serde_json::from_value(serde_json::json!(policy)).unwrap(),
            reason: (policy == "normal").then(|| "SCHED_FIFO not permitted".to_string()),
            ..Default::default()
        });
        let mut acc = Accumulator::new(&cfg());
        recs.iter().for_each(|r| acc.add(r, &[]));
        acc.finish(&info)
    };
    assert!(
        p99 > 1.0,
        "the synthetic run has 2% of sends 2-5 ms late: p99 {p99}"
    );
    let normal = run("normal");
    let fifo = run("fifo");
    let warned = |s: &request_sim::stats::Summary| {
        s.warnings
            .iter()
            .any(|w| w.contains("send drift p99") && w.contains("SCHED_FIFO not permitted"))
    };
    assert_eq!(warned(&normal), p99 > 1.0, "p99 {p99}");
    assert!(!warned(&fifo));
    // No run information (re-summarising a JSONL file): nothing to say about scheduling.
    let mut acc = Accumulator::new(&cfg());
    recs.iter().for_each(|r| acc.add(r, &[]));
    assert!(!warned(&acc.finish(&RunInfo::new())));
}
