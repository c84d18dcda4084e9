//! `--metrics-port`: the client's live Prometheus page, scraped over a real socket while a
//! replay against llm-sim runs and during the linger after it, checked against the records;
//! and the refusals (a port in use, a bad port or host) before anything is sent.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_sim::FaultConfig;
use request_sim::observe::{parse, Page};
use request_sim::record::{Record, Status};

use crate::support::{
    base_args, client_config, config, faulty_sim, read_records, replay, strs, try_replay,
    try_replay_args, write_trace, RawServer, Script,
};

/// A port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// `GET /metrics` over a plain socket: the status line and the body, or `None` when nothing
/// listens.
fn scrape(addr: SocketAddr) -> Option<(String, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    Some((head.to_string(), body.to_string()))
}

/// A page's samples of `name`, keyed by the label `key` (the bucket bound, the status).
fn by_label(page: &Page, name: &str, key: &str) -> BTreeMap<String, f64> {
    page.samples(name)
        .map(|s| (s.labels.get(key).cloned().unwrap_or_default(), s.value))
        .collect()
}

/// The one sample of `name` (panics when missing).
fn value(page: &Page, name: &str) -> f64 {
    let all: Vec<f64> = page.samples(name).map(|s| s.value).collect();
    assert_eq!(all.len(), 1, "{name}: {all:?}");
    all[0]
}

/// vLLM's bucket bounds of `name` from llm-sim's vLLM fixture.
fn vllm_bounds(name: &str) -> Vec<f64> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tools/llm-sim/tests/fixtures/vllm_metrics.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let list = v["histograms"][name]
        .as_array()
        .unwrap_or_else(|| panic!("{name}"));
    list.iter().map(|x| x.as_f64().unwrap()).collect()
}

/// Checks histogram `name` of `page` against the values (seconds) the records give: vLLM's
/// bounds (`vllm` names the fixture's histogram), the count, and every cumulative bucket.
fn check_histogram(page: &Page, name: &str, vllm: Option<&str>, values: &[f64]) {
    let buckets = by_label(page, &format!("{name}_bucket"), "le");
    let mut bounds: Vec<f64> = buckets
        .keys()
        .filter(|k| *k != "+Inf")
        .map(|k| k.parse().unwrap())
        .collect();
    bounds.sort_by(f64::total_cmp);
    if let Some(v) = vllm {
        assert_eq!(bounds, vllm_bounds(v), "{name}: bounds are vLLM's {v}");
    }
    assert_eq!(
        value(page, &format!("{name}_count")),
        values.len() as f64,
        "{name}"
    );
    assert_eq!(buckets["+Inf"], values.len() as f64, "{name} +Inf");
    for (le, n) in &buckets {
        if le == "+Inf" {
            continue;
        }
        let b: f64 = le.parse().unwrap();
        let want = values.iter().filter(|v| **v <= b).count() as f64;
        assert_eq!(*n, want, "{name} bucket le={le}");
    }
}

#[test]
fn the_page_scraped_during_and_after_a_replay_matches_its_records() {
    let dir = tempfile::tempdir().unwrap();
    // 5% answered 500: the status counters must tell them apart.
    let sim = faulty_sim(FaultConfig {
        seed: 3,
        error_500_rate: 0.05,
        ..FaultConfig::default()
    });
    let n = 60;
    let trace = write_trace(dir.path(), "t.jsonl", n, 2_000.0, 64, 24);
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    let port_s = port.to_string();
    args.extend(
        [
            "--record-itl",
            "--metrics-port",
            &port_s,
            "--metrics-run-id",
            "it-run",
            "--metrics-linger",
            "1.5",
        ]
        .map(String::from),
    );
    // Scrape every 50 ms on a thread of its own until the replay has returned.
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let scraper = std::thread::spawn(move || {
        let mut pages = Vec::new();
        while !done2.load(Ordering::SeqCst) {
            if let Some(p) = scrape(addr) {
                pages.push((Instant::now(), p));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        pages
    });
    let outcome = replay(&strs(&args));
    let returned = Instant::now();
    done.store(true, Ordering::SeqCst);
    let pages = scraper.join().unwrap();
    assert_eq!(outcome.exit_code, 0);
    // After the linger the port is closed.
    assert!(scrape(addr).is_none(), "still served after the linger");

    let records = read_records(&dir.path().join("records.jsonl"));
    assert_eq!(records.len(), n);
    let ok: Vec<&Record> = records.iter().filter(|r| r.status == Status::Ok).collect();
    let http_errors = records
        .iter()
        .filter(|r| r.status == Status::HttpError)
        .count();
    assert!(http_errors > 0 && !ok.is_empty(), "{http_errors} errors");

    let parsed: Vec<(Instant, String, Page)> = pages
        .into_iter()
        .map(|(t, (head, body))| {
            let page = parse(&body).unwrap_or_else(|e| panic!("{e:?}\n{body}"));
            (t, head, page)
        })
        .collect();
    assert!(parsed.len() > 20, "{} pages", parsed.len());
    for (_, head, _) in &parsed {
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.to_lowercase().contains("application/openmetrics-text"),
            "{head}"
        );
    }
    // During the run: pages with part of the trace scheduled and requests in flight.
    let scheduled = |p: &Page| value(p, "request_sim:requests_scheduled_total");
    assert!(parsed
        .iter()
        .any(|(_, _, p)| scheduled(p) > 0.0 && scheduled(p) < n as f64));
    assert!(parsed
        .iter()
        .any(|(_, _, p)| value(p, "request_sim:requests_in_flight") > 0.0));
    // After it (the linger, just before the replay returned): the final values.
    let (t_last, _, last) = parsed.last().unwrap();
    assert!(returned.duration_since(*t_last) < Duration::from_millis(1500));
    let status = by_label(last, "request_sim:requests_total", "status");
    assert_eq!(status["ok"], ok.len() as f64);
    assert_eq!(status["http_error"], http_errors as f64);
    for s in ["timeout", "connect_error", "protocol_error", "cancelled"] {
        assert_eq!(status[s], 0.0, "{s}");
    }
    assert_eq!(scheduled(last), n as f64);
    assert_eq!(value(last, "request_sim:requests_sent_total"), n as f64);
    assert_eq!(value(last, "request_sim:requests_in_flight"), 0.0);
    let secs = |f: fn(&Record) -> Option<f64>| -> Vec<f64> {
        ok.iter().filter_map(|r| f(r)).map(|v| v / 1e3).collect()
    };
    let ttft = secs(|r| r.ttft_ms);
    assert_eq!(ttft.len(), ok.len());
    check_histogram(
        last,
        "request_sim:time_to_first_token_seconds",
        Some("vllm:time_to_first_token_seconds"),
        &ttft,
    );
    check_histogram(
        last,
        "request_sim:e2e_request_latency_seconds",
        Some("vllm:e2e_request_latency_seconds"),
        &secs(|r| r.e2e_ms),
    );
    check_histogram(
        last,
        "request_sim:request_time_per_output_token_seconds",
        Some("vllm:request_time_per_output_token_seconds"),
        &secs(|r| r.tpot_ms),
    );
    let itl: Vec<f64> = ok
        .iter()
        .flat_map(|r| r.itl_ms.clone().unwrap_or_default())
        .map(|v| v / 1e3)
        .collect();
    assert!(!itl.is_empty());
    check_histogram(
        last,
        "request_sim:inter_token_latency_seconds",
        Some("vllm:inter_token_latency_seconds"),
        &itl,
    );
    let drift: Vec<f64> = records
        .iter()
        .filter_map(|r| r.drift_ms)
        .map(|v| v / 1e3)
        .collect();
    check_histogram(last, "request_sim:send_drift_seconds", None, &drift);
    let out_tokens: u32 = ok.iter().map(|r| r.output_tokens.unwrap_or(r.chunks)).sum();
    assert_eq!(
        value(last, "request_sim:generation_tokens_total"),
        out_tokens as f64
    );
    let thinking: u32 = ok.iter().filter_map(|r| r.reasoning_tokens).sum();
    assert_eq!(
        value(last, "request_sim:reasoning_tokens_total"),
        thinking as f64
    );
    let calls: u32 = ok.iter().filter_map(|r| r.tool_calls).sum();
    assert_eq!(value(last, "request_sim:tool_calls_total"), calls as f64);
    let in_tokens: u32 = ok.iter().map(|r| r.input_length).sum();
    assert_eq!(
        value(last, "request_sim:prompt_tokens_total"),
        in_tokens as f64
    );
    check_dashboard(last, sim.addr);
    // Every series carries the run's labels.
    for f in &last.families {
        for s in &f.samples {
            assert_eq!(
                s.labels.get("run_id").map(String::as_str),
                Some("it-run"),
                "{}",
                s.name
            );
            assert_eq!(
                s.labels.get("shard").map(String::as_str),
                Some("0/1"),
                "{}",
                s.name
            );
            assert_eq!(
                s.labels.get("api").map(String::as_str),
                Some("openai-chat"),
                "{}",
                s.name
            );
        }
    }
}

#[test]
fn a_metrics_port_in_use_stops_the_run_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let server = RawServer::start(Script::whole("200 OK", "application/json", b"{}"));
    let trace = write_trace(dir.path(), "t.jsonl", 5, 100.0, 16, 4);
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let mut args = base_args(&server.url(""), &trace, dir.path());
    args.extend(["--metrics-port", &port].map(String::from));
    let err = try_replay(&strs(&args)).unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "--metrics-port {port}: cannot listen on 127.0.0.1:{port}"
        )),
        "{err}"
    );
    assert!(server.generation_requests().is_empty());
}

#[test]
fn bad_metrics_flags_are_refused_with_the_flag_named() {
    for bad in ["abc", "70000", "1.5", ""] {
        let err = try_replay_args(&["--metrics-port", bad])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--metrics-port"), "{bad}: {err}");
    }
    let err = config(&["--metrics-port", "9400", "--metrics-host", "not-an-ip"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--metrics-host \"not-an-ip\": not an IP address"),
        "{err}"
    );
    let err = config(&["--metrics-port", "9400", "--metrics-linger=-2"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("--metrics-linger"), "{err}");
    // The host needs the port.
    let err = try_replay_args(&["--metrics-host", "0.0.0.0"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("--metrics-port"), "{err}");
    // The `client` drop-in shares the flags.
    let cfg = client_config(&["--metrics-port", "9401"]);
    let lm = cfg
        .output
        .live_metrics
        .expect("client takes --metrics-port");
    assert_eq!(lm.addr.to_string(), "127.0.0.1:9401");
}

/// Every metric the Grafana board of `deploy/` queries is served: the `request_sim:*` names on
/// the client's page, the `vllm:*` ones on llm-sim's (which serves vLLM's names).
fn check_dashboard(client: &Page, sim: SocketAddr) {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana-dashboard.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let dash: serde_json::Value = serde_json::from_str(&text).unwrap();
    let (_, body) = scrape(sim).expect("llm-sim's /metrics");
    let server = parse(&body).unwrap();
    let mut names = std::collections::BTreeSet::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for (i, _) in expr.match_indices(':') {
                let start = expr[..i]
                    .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(0, |j| j + 1);
                let end = expr[i + 1..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(expr.len(), |j| i + 1 + j);
                names.insert(expr[start..end].to_string());
            }
        }
    }
    let names: Vec<String> = names.into_iter().filter(|n| n.contains(':')).collect();
    assert!(names.len() >= 15, "{names:?}");
    for n in &names {
        let page = if n.starts_with("request_sim:") {
            client
        } else {
            &server
        };
        assert!(
            page.samples(n).next().is_some(),
            "the dashboard queries {n}, not served"
        );
    }
}

#[test]
fn each_sweep_point_serves_its_own_run_on_the_same_port() {
    let dir = tempfile::tempdir().unwrap();
    let sim = crate::support::default_sim();
    let trace = write_trace(dir.path(), "t.jsonl", 20, 1_000.0, 16, 4);
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    // The last page seen of each run_id.
    let scraper = std::thread::spawn(move || {
        let mut last: BTreeMap<String, Page> = BTreeMap::new();
        while !done2.load(Ordering::SeqCst) {
            if let Some(page) = scrape(addr).and_then(|(_, body)| parse(&body).ok()) {
                let run = page
                    .samples("request_sim:requests_sent_total")
                    .next()
                    .and_then(|s| s.labels.get("run_id").cloned());
                if let Some(run) = run {
                    last.insert(run, page);
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        last
    });
    let sweep_dir = dir.path().join("sweep");
    let (code, r) = crate::support::sweep(&[
        "--sweep-dir",
        sweep_dir.to_str().unwrap(),
        "--scale-factors",
        "1,2",
        "--endpoint",
        &sim.base_url(),
        "--model-name",
        "llm-sim",
        "--chat-overhead",
        "0",
        "--no-server-tokenize",
        "--allow-inexact-prompts",
        "--no-server-metrics",
        "--dataset-path",
        trace.to_str().unwrap(),
        "--no-pin",
        "--quiet",
        "--metrics-port",
        &port.to_string(),
        "--metrics-linger",
        "0.5",
    ]);
    done.store(true, Ordering::SeqCst);
    let last = scraper.join().unwrap();
    assert_eq!(code, 0);
    assert_eq!(r.points.len(), 2);
    // Two runs on the one port, each ending with all 20 requests ok.
    assert_eq!(last.len(), 2, "{:?}", last.keys().collect::<Vec<_>>());
    for (run, page) in &last {
        let ok = by_label(page, "request_sim:requests_total", "status")["ok"];
        assert_eq!(ok, 20.0, "run {run}");
    }
}
