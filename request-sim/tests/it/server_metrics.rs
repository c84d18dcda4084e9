//! Server-metrics scraping during a replay (docs/server-metrics.md): four llm-sim instances
//! behind a round-robin TCP proxy on 127.0.0.1, scraped together; the scraped counters against
//! the simulators' own, the client's cached_tokens against the server's hit ratio, shares per
//! instance; dead and hanging metrics endpoints that must not hold the run up.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::support::*;

/// `n` requests 10 ms apart over a few shared prefixes (block 64): later requests of a family
/// extend an earlier one's hash ids.
fn write_trace(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("trace.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    let mut next = 100u64;
    for i in 0..n {
        let family = (i % 5) as u64;
        let mut ids = vec![family, 10 + family];
        for _ in 0..(1 + i % 3) {
            ids.push(next);
            next += 1;
        }
        let input = ids.len() as u32 * 64 - (i as u32 % 40);
        writeln!(
            f,
            r#"{{"timestamp": {}, "input_length": {input}, "output_length": {}, "hash_ids": {ids:?}}}"#,
            i * 10,
            2 + i % 7
        )
        .unwrap();
    }
    path
}

/// A TCP proxy on 127.0.0.1 that sends each new connection to the next backend in turn (with
/// servers that close every connection after one answer, that is one request each).
struct Proxy {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    fn start(backends: Vec<std::net::SocketAddr>) -> Proxy {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                let next = Arc::new(AtomicUsize::new(0));
                loop {
                    let (mut conn, _) = tokio::select! {
                        _ = &mut stopped => break,
                        c = listener.accept() => c.unwrap(),
                    };
                    let to = backends[next.fetch_add(1, Ordering::Relaxed) % backends.len()];
                    tokio::spawn(async move {
                        if let Ok(mut up) = tokio::net::TcpStream::connect(to).await {
                            let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
                        }
                    });
                }
            });
        });
        Proxy {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn four_instances_scraped_together_match_their_own_counters() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 120);
    let sims: Vec<llm_sim::SimThread> = (0..4)
        .map(|i| {
            start_sim(llm_sim::SimConfig {
                engine_index: i,
                no_keep_alive: true,
                ..llm_sim::SimConfig::default()
            })
        })
        .collect();
    let proxy = Proxy::start(sims.iter().map(|s| s.addr).collect());
    let urls: Vec<String> = sims.iter().map(|s| s.base_url()).collect();
    let urls = urls.join(",");
    let endpoint = format!("http://{}", proxy.addr);
    let out = dir.path().join("out.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--block-size",
        "64",
        "--endpoint",
        &endpoint,
        "--dataset-path",
        trace.to_str().unwrap(),
        "--scale-factor",
        "2",
        "--seed",
        "7",
        "--server-metrics",
        &urls,
        "--metrics-interval",
        "100ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let s = &outcome.summary;
    assert_eq!(s.completed, 120);
    let srv = s.server.as_ref().expect("server section");
    assert_eq!(srv.instances.len(), 4);
    assert_eq!(srv.interval_ms, 100.0);

    // Every sample is in server_metrics.jsonl, on the run's clock, per instance.
    let samples = read_json_lines(&dir.path().join("out.jsonl.server_metrics.jsonl"));
    assert_eq!(samples.len() as u64, srv.samples);
    for (i, sim) in sims.iter().enumerate() {
        let mine: Vec<&serde_json::Value> = samples
            .iter()
            .filter(|v| v["instance"] == i as u64)
            .collect();
        // 0.6 s of run at 100 ms plus the start-up and final rounds.
        assert!(mine.len() >= 5, "instance {i}: {} samples", mine.len());
        assert!(mine.iter().all(|v| v["ok"] == true));
        assert!(
            mine[0]["t_ms"].as_f64().unwrap() < 0.0,
            "baseline before the clock"
        );
        let ts: Vec<f64> = mine.iter().map(|v| v["t_ms"].as_f64().unwrap()).collect();
        assert!(ts.windows(2).all(|w| w[0] < w[1]), "{ts:?}");
        assert_eq!(mine[0]["url"], format!("{}/metrics", sim.base_url()));
        assert_eq!(mine[0]["engine"], "vllm");
        // The last scrape is the simulator's own counters.
        let m = sim.metrics();
        let last = mine.last().unwrap();
        let hits = m.prefix_hits.load(Ordering::Relaxed) as f64;
        let queries = m.prefix_queries.load(Ordering::Relaxed) as f64;
        assert_eq!(last["prefix_hits"].as_f64(), Some(hits), "instance {i}");
        assert_eq!(
            last["prefix_queries"].as_f64(),
            Some(queries),
            "instance {i}"
        );
        // The summary's ratio is the counters' delta over the run.
        let first = mine[0];
        let dh = hits - first["prefix_hits"].as_f64().unwrap();
        let dq = queries - first["prefix_queries"].as_f64().unwrap();
        let x = &srv.instances[i];
        assert_eq!(x.prefix_hits, Some(dh));
        assert_eq!(x.prefix_queries, Some(dq));
        assert_eq!(x.prefix_hit_ratio, Some(dh / dq));
        assert_eq!(x.scrapes_failed, 0);
        assert_eq!(x.scrapes_ok, mine.len() as u64);
        // Round robin over connections, one request each: about a quarter per instance.
        let share = x.request_share.unwrap();
        assert!((0.2..=0.3).contains(&share), "instance {i} share {share}");
        assert!(x.ttft.as_ref().unwrap().count > 0.0);
    }
    let c = &srv.cluster;
    assert_eq!(c.requests, Some(120.0), "server-side finished requests");
    assert_eq!(c.ttft.as_ref().unwrap().count, 120.0);
    let shares: f64 = srv.instances.iter().map(|x| x.request_share.unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-9);
    // The server's hit ratio and the client's cached_tokens agree within 0.5 pp.
    let server = c.prefix_hit_ratio.unwrap();
    let client = srv.client.cached_tokens_ratio.unwrap();
    assert!(server > 0.2, "shared prefixes must hit: {server}");
    assert!(
        (server - client).abs() < 0.005,
        "server {server} client {client}"
    );
    assert_eq!(srv.client.completed, 120);
    assert!(c.running_peak.unwrap() >= 1.0);
    assert!(c.kv_usage_peak.unwrap() > 0.0);
    // The console shows the section.
    let text = request_sim::report::render_console(s);
    assert!(
        text.contains("Server metrics (4 instances, every 100 ms)"),
        "{text}"
    );
    assert!(text.contains("Server prefix-cache hit ratio (%):"));

    // Each record names the instance that served it (llm-sim's x-inference-pod/port) and
    // carries that instance's state at its nearest sample; per instance, the client's count
    // of answers equals the server's own count of finished requests.
    let records = read_records(&out);
    let mut answered = [0u64; 4];
    for r in &records {
        let by = r.served_by.clone().expect("llm-sim names itself");
        let i = sims
            .iter()
            .position(|sim| Some(sim.addr.port()) == by.port)
            .unwrap_or_else(|| panic!("{by:?} is none of the simulators"));
        assert_eq!(by.pod.as_deref(), Some(format!("llm-sim-{i}").as_str()));
        answered[i] += 1;
        let st = r.server.expect("the server's state at send");
        assert_eq!((st.instance, st.instances), (Some(i), 1), "{r:?}");
        let at = r.sent_ms.unwrap() + st.dt_ms;
        let sample = samples
            .iter()
            .find(|v| v["instance"] == i as u64 && (v["t_ms"].as_f64().unwrap() - at).abs() < 0.01)
            .unwrap_or_else(|| panic!("no sample of instance {i} at {at} ms"));
        assert_eq!(sample["waiting"].as_f64(), st.waiting);
        assert_eq!(sample["running"].as_f64(), st.running);
    }
    for (i, x) in srv.instances.iter().enumerate() {
        assert_eq!(x.requests, Some(answered[i] as f64), "instance {i}");
    }

    // The result files (written later, from the records) find the samples beside the records
    // and draw one line per instance, keyed by its address.
    let res = dir.path().join("res");
    let files = request_sim::report::write_result_dir(&res, s, &out).unwrap();
    assert!(
        files.contains(&res.join("server_over_time.png")),
        "{files:?}"
    );
    let svg = std::fs::read_to_string(res.join("server_over_time.svg")).unwrap();
    assert!(svg.contains("Server metrics over the run (4 instances"));
    for (i, sim) in sims.iter().enumerate() {
        assert!(svg.contains(&format!("{i}: {}", sim.addr)), "instance {i}");
    }
    // report.html has the server section, a row per instance and the servers' chart.
    let html = std::fs::read_to_string(res.join("report.html")).unwrap();
    assert!(html.contains("<h3>Server metrics (4 instances, every 100 ms)</h3>"));
    let hit = format!("{:.2}", c.prefix_hit_ratio.unwrap() * 100.0);
    assert!(html.contains(&format!(
        "<tr><th>Server prefix-cache hit ratio (%)</th><td>{hit}</td></tr>"
    )));
    for (i, x) in srv.instances.iter().enumerate() {
        // The server's share / the records' (each response named its instance); the page
        // escapes the slash.
        let share = format!(
            "{:.2}&#x2f;{:.2}",
            x.request_share.unwrap() * 100.0,
            x.record_share.unwrap() * 100.0
        );
        let row = format!("<tr><td class=\"num\">{i}</td><td class=\"num\">{share}</td>");
        assert!(
            html.contains(&row),
            "{row} not in {}",
            &html[html.find("<th>inst").unwrap_or(0)..][..600.min(html.len())]
        );
    }
    assert!(html.contains(
        "<figure id=\"server_over_time\"><img alt=\"server_over_time\" src=\"data:image/"
    ));
    assert!(!html.contains("http://"));
}

#[test]
fn dead_and_hanging_metrics_endpoints_are_counted_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 40);
    let sim = default_sim();
    // A port nobody listens on, and a listener that accepts and never answers.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let hang = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let hang_url = format!("http://{}/metrics", hang.local_addr().unwrap());
    let dead_url = format!("http://{dead}");
    let urls = format!("{},{dead_url},{hang_url}", sim.base_url());
    let out = dir.path().join("out.jsonl");
    let res = dir.path().join("res");
    let outcome = replay(&[
        "--quiet",
        "--block-size",
        "64",
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--scale-factor",
        "0.25",
        "--server-metrics",
        &urls,
        "--metrics-interval",
        "0.2",
        "-o",
        out.to_str().unwrap(),
        "--result-dir",
        res.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let s = &outcome.summary;
    assert_eq!(s.completed, 40);
    let srv = s.server.as_ref().unwrap();
    assert_eq!(srv.instances.len(), 3);
    let [live, dead_i, hang_i] = &srv.instances[..] else {
        unreachable!()
    };
    assert_eq!(live.scrapes_failed, 0);
    assert!(live.scrapes_ok >= 6, "{live:?}");
    assert_eq!(dead_i.scrapes_ok, 0);
    assert!(dead_i.scrapes_failed >= 6, "{dead_i:?}");
    assert_eq!(hang_i.scrapes_ok, 0);
    // About 1.6 s of run; each hanging scrape times out after 1 s and missed ticks are
    // skipped, so at most one failure per second of the run (plus the start-up and final
    // rounds), however slow a loaded machine makes the run.
    let wall = s.run.outcome.wall_time_s.unwrap();
    assert!(
        hang_i.scrapes_failed >= 2 && hang_i.scrapes_failed as f64 <= wall.ceil() + 2.0,
        "{hang_i:?} over {wall:.1} s"
    );
    assert!(hang_i
        .first_error
        .as_deref()
        .unwrap()
        .contains("no answer within"));
    assert_eq!(live.requests, Some(40.0));
    assert_eq!(srv.cluster.requests, Some(40.0));
    assert_eq!(live.request_share, Some(1.0));
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("scrapes of instance 1") && w.contains(&dead_url)),
        "{:?}",
        s.warnings
    );
    // The sending path did not notice.
    assert!(s.drift.p99_ms < 50.0, "{:?}", s.drift);
    // In the result dir.
    let samples = read_json_lines(&res.join("server_metrics.jsonl"));
    assert!(samples
        .iter()
        .any(|v| v["instance"] == 1 && v["ok"] == false && v["error"].is_string()));
    drop(hang);
}

#[test]
fn interval_below_100ms_is_refused_and_the_origin_is_scraped_by_default() {
    let argv = config;
    let e = argv(&["--metrics-interval", "50ms"]).unwrap_err();
    assert!(e.to_string().contains("below the minimum of 100 ms"), "{e}");
    assert!(argv(&["--metrics-interval", "0.05"]).is_err());
    assert!(argv(&["--metrics-interval", "soon"]).is_err());
    let c = argv(&["--metrics-interval", "250ms"]).unwrap();
    assert_eq!(
        c.validity.server_metrics.unwrap().interval,
        std::time::Duration::from_millis(250)
    );
    assert!(argv(&["--no-server-metrics"])
        .unwrap()
        .validity
        .server_metrics
        .is_none());
    let e = argv(&["--server-metrics", "ftp://x/metrics"]).unwrap_err();
    assert!(e.to_string().contains("http"), "{e}");

    // Built-in simulator, no flags: its origin answers /metrics and is scraped.
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 20);
    let out = dir.path().join("o.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--block-size",
        "64",
        "--dataset-path",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let srv = outcome.summary.server.unwrap();
    assert_eq!(srv.instances.len(), 1);
    assert_eq!(srv.cluster.requests, Some(20.0));
    assert_eq!(srv.interval_ms, 1000.0);
}

#[test]
fn records_carry_the_queue_at_send_and_strict_fails_an_invalid_run() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 60);
    // One sequence at a time: requests queue up.
    let sim = start_sim(llm_sim::SimConfig {
        max_num_seqs: 1,
        ..llm_sim::SimConfig::default()
    });
    let out = dir.path().join("out.jsonl");
    let run = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "--quiet",
            "--block-size",
            "64",
            "--endpoint",
            sim.base_url().leak(),
            "--dataset-path",
            trace.to_str().unwrap(),
            "--scale-factor",
            "4",
            "--metrics-interval",
            "100ms",
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        replay(&args)
    };
    let outcome = run(&out, &["--strict", "--max-drift-ms", "1000"]);
    assert_eq!(outcome.exit_code, 0, "{:?}", outcome.summary.invalid);
    assert!(outcome.summary.invalid.is_empty());
    let records = read_records(&out);
    assert_eq!(records.len(), 60);
    let samples = read_json_lines(&dir.path().join("out.jsonl.server_metrics.jsonl"));
    let mut queued = 0;
    for r in &records {
        let s = r.server.expect("every sent request has the server's state");
        assert_eq!(s.instances, 1);
        assert!(s.dt_ms.abs() <= 500.0, "{s:?}");
        // It is the sample at sent_ms + dt_ms in server_metrics.jsonl.
        let at = r.sent_ms.unwrap() + s.dt_ms;
        let sample = samples
            .iter()
            .find(|v| (v["t_ms"].as_f64().unwrap() - at).abs() < 0.01)
            .unwrap_or_else(|| panic!("no sample at {at} ms for {r:?}"));
        assert_eq!(sample["waiting"].as_f64(), s.waiting);
        assert_eq!(sample["running"].as_f64(), s.running);
        // No nearer sample exists on the other side of the send.
        let nearest = samples
            .iter()
            .map(|v| (v["t_ms"].as_f64().unwrap() - r.sent_ms.unwrap()).abs())
            .fold(f64::INFINITY, f64::min);
        assert!(
            s.dt_ms.abs() <= nearest + 0.01 || s.dt_ms < 0.0,
            "{s:?} {nearest}"
        );
        if s.waiting.unwrap() >= 1.0 {
            queued += 1;
        }
    }
    assert!(queued > 0, "requests sent while others waited");
    let srv = outcome.summary.server.as_ref().unwrap();
    assert!(srv.cluster.waiting_peak.unwrap() >= 1.0);
    assert!(srv.cluster.queue.as_ref().unwrap().mean_ms.unwrap() > 0.0);

    // Drift p99 above --max-drift-ms: flagged loudly, exit 4 with --strict.
    let out2 = dir.path().join("out2.jsonl");
    let outcome = run(&out2, &["--strict", "--max-drift-ms", "0"]);
    assert_eq!(outcome.exit_code, 4);
    assert!(outcome.summary.invalid[0].contains("send drift p99"));
    let text = request_sim::report::render_console(&outcome.summary);
    assert!(text.contains("RUN INVALID: send drift p99"), "{text}");
}

#[test]
fn sweep_finds_where_one_sequence_at_a_time_stops_keeping_up() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 40);
    // One sequence at a time, ~1 ms per step: about 150 requests/s at most; the trace offers
    // ~100/s at scale 1.
    let sim = start_sim(llm_sim::SimConfig {
        max_num_seqs: 1,
        ..llm_sim::SimConfig::default()
    });
    let sweep_dir = dir.path().join("sweep");
    let argv = [
        "--scale-factors",
        "0.25,4",
        "--sweep-dir",
        sweep_dir.to_str().unwrap(),
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--block-size",
        "64",
        "--seed",
        "11",
        "--quiet",
    ];
    let (code, r) = sweep(&argv);
    assert_eq!(code, 0);
    assert_eq!(r.points.len(), 2);
    let (low, high) = (&r.points[0], &r.points[1]);
    assert_eq!((low.scale_factor, high.scale_factor), (0.25, 4.0));
    assert_ne!(low.seed, high.seed, "a fresh seed per point");
    assert!(low.cache_reset, "llm-sim answers POST /reset_prefix_cache");
    assert_eq!((low.completed, low.scheduled), (40, 40));
    // Offered: 40 requests over 0.39 s of trace, times the scale factor.
    assert!(
        (low.offered_rps - 40.0 / 0.39 * 0.25).abs() < 1e-6,
        "{low:?}"
    );
    assert!(low.request_throughput >= 0.9 * low.offered_rps, "{low:?}");
    assert!(high.request_throughput < 0.9 * high.offered_rps, "{high:?}");
    assert_eq!(r.capacity_scale_factor, Some(0.25));
    assert!(
        r.answer.starts_with("capacity: scale 0.25 "),
        "{}",
        r.answer
    );
    assert!(r.answer.contains("scale 4 fell short"), "{}", r.answer);
    assert!(sweep_dir.join("sweep.png").is_file());
    let svg = std::fs::read_to_string(sweep_dir.join("sweep.svg")).unwrap();
    for panel in [
        "Served vs offered",
        "TTFT vs offered",
        "TPOT vs offered",
        "Send drift p99 vs offered",
        "TPOT p50",
        "--max-drift-ms 5",
    ] {
        assert!(svg.contains(panel), "sweep.svg has no {panel:?}");
    }
    for p in &r.points {
        let d = Path::new(&p.dir);
        assert!(d.join("records.jsonl").is_file());
        assert!(d.join("summary.json").is_file());
        assert!(d.join("server_metrics.jsonl").is_file());
        assert!(d.join("report.html").is_file());
        assert!(p.server_hit_ratio.is_some());
    }
    // The sweep's page: the answer, a row per point linking to its page, the chart embedded.
    let html = std::fs::read_to_string(sweep_dir.join("report.html")).unwrap();
    assert!(html.contains("<p class=\"answer\">capacity: scale 0.25 ("));
    for p in &r.points {
        let f = p.scale_factor;
        assert!(
            html.contains(&format!("<a href=\"scale-{f}&#x2f;report.html\">")),
            "link to scale {f}"
        );
        assert!(html.contains(&format!("<td class=\"num\">{:.2}</td>", p.offered_rps)));
    }
    assert_eq!(html.matches("src=\"data:image/").count(), 1);
    assert!(!html.contains("http://"));
}

#[test]
fn search_brackets_the_capacity_of_one_sequence_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    // 30 requests 50 ms apart (20.7 requests/s at scale 1), 4 output tokens each.
    let trace = dir.path().join("trace.jsonl");
    let lines: Vec<String> = (0..30)
        .map(|i| {
            format!(
                r#"{{"timestamp": {}, "input_length": 64, "output_length": 4, "hash_ids": [{i}]}}"#,
                i * 50
            )
        })
        .collect();
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    // One sequence at a time, 5 ms per engine step: a request holds the engine ~20 ms, so
    // the server carries ~50 requests/s, about scale 2.4; above it requests queue and TTFT
    // grows past the SLO.
    let sim = start_sim(llm_sim::SimConfig {
        max_num_seqs: 1,
        step_fixed_us: 5_000.0,
        ..llm_sim::SimConfig::default()
    });
    let sweep_dir = dir.path().join("search");
    let (code, r) = sweep(&[
        "--sweep-dir",
        sweep_dir.to_str().unwrap(),
        "--max-points",
        "7",
        "--tolerance",
        "0.1",
        "--endpoint",
        &sim.base_url(),
        "--dataset-path",
        trace.to_str().unwrap(),
        "--block-size",
        "64",
        "--goodput",
        "ttft:30",
        "--target",
        "0.9",
        "--seed",
        "5",
        "--quiet",
    ]);
    assert_eq!(code, 0);
    let s = r.search.clone().expect("a search");
    assert!(r.points.len() <= 7, "{} points", r.points.len());
    assert_eq!(
        r.points[0].scale_factor, 1.0,
        "the search starts at scale 1"
    );
    let (lo, hi) = (
        s.lo.expect("a point carried"),
        s.hi.expect("a point fell short"),
    );
    assert!(lo < hi);
    assert!(s.converged || r.points.len() == 7, "{s:?}");
    if s.converged {
        assert!(hi <= lo * 1.1 + 1e-9, "{s:?}");
    }
    // The bracket's ends are points, judged as the search says; every point lower than lo
    // was carried and every point from hi up fell short.
    for p in &r.points {
        let good = p.good_fraction.unwrap();
        if p.scale_factor <= lo {
            assert!(good >= 0.9, "{p:?}");
        } else if p.scale_factor >= hi {
            assert!(good < 0.9, "{p:?}");
        }
        assert!(Path::new(&p.dir).join("report.html").is_file());
    }
    assert_eq!(r.capacity_scale_factor, Some(lo));
    let seeds: std::collections::HashSet<u64> = r.points.iter().map(|p| p.seed).collect();
    assert_eq!(seeds.len(), r.points.len(), "a fresh seed per point");
    assert!(r.points.iter().all(|p| p.cache_reset));
    // The capacity measured at the lowest point: one request at a time, each holding the
    // engine for one step per output token (the prefill step yields the first), the step's
    // length read from the time between tokens (TTFT would add the HTTP round trip).
    let low = r
        .points
        .iter()
        .min_by(|a, b| a.scale_factor.total_cmp(&b.scale_factor))
        .unwrap();
    let recs = read_records(&Path::new(&low.dir).join("records.jsonl"));
    let service_s = recs
        .iter()
        .map(|r| r.tpot_ms.unwrap() * f64::from(r.output_tokens.unwrap()))
        .sum::<f64>()
        / recs.len() as f64
        / 1e3;
    let capacity = 1.0 / (service_s * low.offered_rps / low.scale_factor);
    eprintln!(
        "search: bracket [{lo}, {hi}), capacity from the service time ~{capacity:.2} ({:.1} ms)",
        service_s * 1e3
    );
    // Wide enough for a loaded machine (steps stretch unevenly between points); a search
    // that converged on the wrong side of the knee is off by a factor of 2 or more.
    assert!(
        lo <= capacity * 1.3 && hi >= capacity * 0.7,
        "bracket [{lo}, {hi}) vs capacity ~{capacity:.2} (service {:.1} ms)",
        service_s * 1e3
    );
    assert!(
        r.answer.contains(&format!("search bracket [{lo}, {hi})")),
        "{}",
        r.answer
    );
}

#[test]
fn every_sweep_point_has_a_default_request_limit() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), request_sim::sweep::DEFAULT_POINT_REQUESTS + 30);
    let sweep_dir = dir.path().join("sweep");
    let (code, r) = sweep(&[
        "--sweep-dir",
        sweep_dir.to_str().unwrap(),
        "--scale-factors",
        "40,80",
        "--dataset-path",
        trace.to_str().unwrap(),
        "--block-size",
        "64",
        "--dry-run",
        "--quiet",
    ]);
    assert_eq!(code, 0);
    assert_eq!(r.points.len(), 2);
    for p in &r.points {
        assert_eq!(
            p.scheduled,
            request_sim::sweep::DEFAULT_POINT_REQUESTS,
            "{p:?}"
        );
    }
    // The offered rate is the limited slice's: 2000 requests 10 ms apart, times 40.
    let rate = 2000.0 / 19.99 * 40.0;
    assert!(
        (r.points[0].offered_rps - rate).abs() < 1e-6,
        "{:?}",
        r.points[0]
    );
}

#[test]
fn sweep_search_flags_are_checked() {
    let parse = |args: &[&str]| {
        let mut argv = vec!["--sweep-dir", "/nonexistent/x"];
        argv.extend_from_slice(args);
        try_sweep_args(&argv)
    };
    assert!(parse(&["--scale-factors", "1,2", "--search", "1,2"]).is_err());
    for (args, msg) in [
        (&["--search", "4,1"][..], "--search takes LO,HI"),
        (&["--search", "1"][..], "--search takes LO,HI"),
        (
            &["--tolerance", "0"][..],
            "--tolerance must be a positive fraction",
        ),
        (
            &["--max-points", "0"][..],
            "--max-points must be at least 1",
        ),
    ] {
        let e = request_sim::sweep::sweep(parse(args).unwrap()).unwrap_err();
        assert!(e.to_string().contains(msg), "{args:?}: {e}");
    }
}

/// Flags a sweep would ignore or that would overwrite a point are refused before anything
/// runs.
#[test]
fn sweep_refuses_flags_it_cannot_honour() {
    let parse = |args: &[&str]| {
        let mut argv = vec!["--sweep-dir", "/nonexistent/x"];
        argv.extend_from_slice(args);
        try_sweep_args(&argv).unwrap()
    };
    for (args, msg) in [
        (
            &["--scale-factors", "2,2"][..],
            "--scale-factors: scale 2 is given twice",
        ),
        (
            &["--scale-factors", "1,2", "--scale-factor", "3"][..],
            "--scale-factor is set per point by the sweep",
        ),
        (
            &["--scale-factors", "1,2", "--result-dir", "x"][..],
            "--result-dir is set per point by the sweep",
        ),
        (
            &["--scale-factors", "1,2", "--output-path", "x.jsonl"][..],
            "--output-path is set per point by the sweep",
        ),
        (
            &["--scale-factors", "1,2", "--summary-path", "x.json"][..],
            "--summary-path is set per point by the sweep",
        ),
    ] {
        let e = request_sim::sweep::sweep(parse(args)).unwrap_err();
        assert!(e.to_string().contains(msg), "{args:?}: {e}");
    }
}

#[test]
fn sweep_answer_with_an_slo_target() {
    use request_sim::sweep::{answer, SweepPoint};
    let p = |f: f64, good: f64| SweepPoint {
        scale_factor: f,
        offered_rps: 10.0 * f,
        request_throughput: 10.0 * f,
        good_fraction: Some(good),
        ..SweepPoint::default()
    };
    let slo = Some("ttft <= 2000 ms");
    let pts = [p(4.0, 0.5), p(1.0, 0.99), p(2.0, 0.96)];
    let (cap, text) = answer(&pts, slo, 0.95);
    assert_eq!(cap, Some(2.0));
    assert!(text.contains("scale 2 (20.00 req/s offered"), "{text}");
    assert!(
        text.contains("95% of requests within ttft <= 2000 ms"),
        "{text}"
    );
    assert!(text.contains("scale 4 fell short (50.0% good)"), "{text}");
    // A dip is the limit, even if a higher point recovers.
    let (cap, _) = answer(&[p(1.0, 0.9), p(2.0, 0.99)], slo, 0.95);
    assert_eq!(cap, None);
    let (cap, text) = answer(&[p(1.0, 0.99), p(2.0, 0.99)], slo, 0.95);
    assert_eq!(cap, Some(2.0));
    assert!(text.contains("sweep further"), "{text}");
}
