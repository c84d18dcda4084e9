//! Server metrics of a cluster behind a router (issue 30, "numbers that mislead"): a replay
//! against llm-sim's built-in router finds the instances' own metrics pages through the
//! router and reports each instance; an endpoint whose page holds no engine metrics is named
//! as such, with the option that lists the instances.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use request_sim::observe::{ScrapeConfig, Scraper};

use crate::support::*;

/// `n` requests 10 ms apart, a few shared prefixes (block 64).
fn write_trace(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("trace.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    for i in 0..n {
        let family = (i % 3) as u64;
        writeln!(
            f,
            r#"{{"timestamp": {}, "input_length": 120, "output_length": 4, "hash_ids": [{family}, {}]}}"#,
            i * 10,
            100 + i
        )
        .unwrap();
    }
    path
}

#[test]
fn a_replay_against_the_router_reports_each_instance() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 30);
    let cluster = Cluster::start(
        3,
        llm_sim::routing::Policy::LeastLoaded,
        llm_sim::SimConfig::default(),
    );
    let out = dir.path().join("out.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--block-size",
        "64",
        "--endpoint",
        &cluster.router,
        "--dataset-path",
        trace.to_str().unwrap(),
        "--seed",
        "7",
        "--metrics-interval",
        "100ms",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let s = &outcome.summary;
    assert_eq!(s.completed, 30);
    let srv = s.server.as_ref().expect("server section");
    // Before: the router's own page scraped as one "instance" with every figure n/a.
    assert_eq!(srv.instances.len(), 3, "{:?}", srv.instances);
    let mut finished = 0.0;
    for (i, x) in srv.instances.iter().enumerate() {
        assert_eq!(x.url, format!("http://{}/metrics", cluster.instances[i]));
        assert_eq!(x.scrapes_failed, 0);
        let n = x.requests.expect("per-instance finished requests");
        assert!(n >= 1.0, "instance {i} served {n}");
        assert!(x.request_share.is_some());
        assert!(x.ttft.as_ref().is_some_and(|h| h.count == n));
        assert!(x.prefix_queries.is_some_and(|q| q > 0.0));
        finished += n;
    }
    // The replay's requests (start-up requests came before the baseline).
    assert_eq!(finished, 30.0);
    assert_eq!(srv.cluster.requests, Some(30.0));
    // Each record is attributed to the instance that served it.
    let records = read_records(&out);
    assert!(records
        .iter()
        .all(|r| r.server.is_some_and(|st| st.instance.is_some())));
    let text = request_sim::report::render_console(s);
    assert!(text.contains("Server metrics (3 instances"), "{text}");
}

fn startup_notes(origin: &str) -> (bool, Vec<String>) {
    let started = Scraper::start(ScrapeConfig {
        urls: Vec::new(),
        origin: Some(origin.parse().unwrap()),
        origin_api_key: None,
        interval: Duration::from_millis(100),
        out: None,
        insecure: false,
    })
    .unwrap();
    let scraping = started.scraper.is_some();
    if let Some(s) = started.scraper {
        let _ = s.finish();
    }
    (scraping, started.notes)
}

#[test]
fn a_page_without_engine_metrics_is_named_with_the_way_out() {
    // A gateway's page: Prometheus, but none of the engines' names.
    let page = "# TYPE gateway_requests_total counter\ngateway_requests_total{route=\"a\"} 12\n";
    let gw = RawServer::start(Script::whole(
        "200 OK",
        "text/plain; version=0.0.4",
        page.as_bytes(),
    ));
    let (scraping, notes) = startup_notes(&gw.url("/metrics"));
    assert!(!scraping, "{notes:?}");
    assert_eq!(notes.len(), 1, "{notes:?}");
    let n = &notes[0];
    assert!(n.contains("holds no engine metrics"), "{n}");
    assert!(n.contains("--server-metrics URL,URL,..."), "{n}");
}

#[test]
fn the_router_page_leads_to_its_instances() {
    let cluster = Cluster::start(
        3,
        llm_sim::routing::Policy::RoundRobin,
        llm_sim::SimConfig::default(),
    );
    let (scraping, notes) = startup_notes(&format!("{}/metrics", cluster.router));
    assert!(scraping);
    let found = notes
        .iter()
        .find(|n| n.contains("llm-sim's built-in router (round-robin)"))
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert!(
        found.contains("scraping its 3 instance(s)' own pages instead"),
        "{found}"
    );
    let scraping = notes
        .iter()
        .find(|n| n.contains("scraping 3 endpoints"))
        .unwrap_or_else(|| panic!("{notes:?}"));
    for a in &cluster.instances {
        assert!(
            scraping.contains(&format!("http://{a}/metrics")),
            "{scraping}"
        );
    }
}

#[test]
fn instances_are_found_from_the_routers_list_of_workers() {
    // A router shaped as smg: no /metrics of its own on the API port, `GET /workers` lists
    // its workers (the raw server answers every path with the list).
    let cluster = Cluster::start(
        2,
        llm_sim::routing::Policy::RoundRobin,
        llm_sim::SimConfig::default(),
    );
    let list = format!(
        r#"{{"workers":[{}],"total":2,"stats":{{"regular_count":2}}}}"#,
        cluster
            .instances
            .iter()
            .map(|a| format!(r#"{{"id":"w","url":"http://{a}","runtime_type":"vllm","is_healthy":true,"load":0}}"#))
            .collect::<Vec<_>>()
            .join(",")
    );
    let smg = RawServer::start(Script::whole("200 OK", "application/json", list.as_bytes()));
    let (scraping, notes) = startup_notes(&smg.url("/metrics"));
    assert!(scraping, "{notes:?}");
    let found = notes
        .iter()
        .find(|n| n.contains("the endpoint is a router (smg"))
        .unwrap_or_else(|| panic!("{notes:?}"));
    assert!(found.contains("lists 2 instance(s)"), "{found}");
    let scraped = notes
        .iter()
        .find(|n| n.contains("scraping 2 endpoints"))
        .unwrap_or_else(|| panic!("{notes:?}"));
    for a in &cluster.instances {
        assert!(
            scraped.contains(&format!("http://{a}/metrics")),
            "{scraped}"
        );
    }
    // The router's list was asked for.
    assert!(smg
        .requests()
        .iter()
        .any(|r| r.head.starts_with("GET /workers ")));
}

/// `n` consecutive free TCP ports on 127.0.0.1 (the first returned).
fn free_ports(n: u16) -> u16 {
    for _ in 0..50 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        drop(l);
        if p.checked_add(n).is_none() {
            continue;
        }
        if (0..n).all(|i| std::net::TcpListener::bind(("127.0.0.1", p + i)).is_ok()) {
            return p;
        }
    }
    panic!("no {n} consecutive free ports");
}

#[test]
fn kv_events_place_each_request_on_the_instance_that_served_it() {
    // llm-sim instances publish vLLM-format KV events (instance i on port + i); its router
    // names the instance in each response, which the placement must agree with.
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 30);
    let port = free_ports(2);
    // `::` makes llm-sim bind, as vLLM does with `*` (here on the IPv6 loopback only).
    let cfg = llm_sim::SimConfig {
        kv_events_endpoint: Some(format!("tcp://[::1]:{port}")),
        ..llm_sim::SimConfig::default()
    };
    // Two instances for three prompt families: round-robin splits each family.
    let cluster = Cluster::start(2, llm_sim::routing::Policy::RoundRobin, cfg);
    let kv: Vec<String> = (0..2)
        .map(|i| format!("tcp://[::1]:{}", port + i))
        .collect();
    let out = dir.path().join("out.jsonl");
    let outcome = replay(&[
        "--quiet",
        "--block-size",
        "64",
        "--endpoint",
        &cluster.router,
        "--dataset-path",
        trace.to_str().unwrap(),
        "--metrics-interval",
        "100ms",
        "--kv-events",
        &kv.join(","),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(outcome.exit_code, 0);
    let records = read_records(&out);
    assert_eq!(records.len(), 30);
    let mut placed = 0;
    for r in &records {
        let named = r
            .served_by
            .as_ref()
            .and_then(|s| s.port)
            .expect("llm-sim names it");
        if let Some(k) = &r.kv_placement {
            placed += 1;
            assert_eq!(
                k.url,
                format!("http://{}", cluster.instances[k.instance]),
                "{k:?}"
            );
            assert_eq!(
                cluster.instances[k.instance].port(),
                named,
                "request {} placed on {k:?}, served by port {named}",
                r.index
            );
            assert!(k.votes > 0 && k.votes <= k.of);
        }
    }
    // Every request brings a block of its own (hash id 100 + i), stored where it went.
    assert_eq!(placed, 30, "placed {placed} of 30");
    let srv = outcome.summary.server.as_ref().unwrap();
    let p = srv.placement.as_ref().expect("placement section");
    assert_eq!(p.from, "kv-events");
    assert_eq!((p.placed, p.unplaced), (30, 0));
    let k = p.kv_events.as_ref().unwrap();
    assert_eq!(
        (k.named_by_response, k.agreed_with_response),
        (30, 30),
        "{k:?} {:?}",
        records
            .iter()
            .map(|r| (&r.served_by, r.kv_placement.as_ref().map(|k| k.instance)))
            .collect::<Vec<_>>()
    );
    assert_eq!(k.unreadable, 0);
    assert!(k.blocks_stored > 0);
    // The records' counts per instance are the instances' own (round-robin: 15 each).
    for (i, x) in srv.instances.iter().enumerate() {
        assert_eq!(x.records, Some(15), "instance {i}");
        assert_eq!(x.requests, Some(15.0), "instance {i}");
    }
    // The routed ideal: three caches under round-robin hit less than the one-cache ideal.
    let routed = p.routed_ideal_hit_ratio.unwrap();
    let one = srv.client.ideal_hit_ratio.unwrap();
    assert!(routed < one, "routed {routed} vs one cache {one}");
    let text = request_sim::report::render_console(&outcome.summary);
    assert!(text.contains("Requests placed (kv-events):"), "{text}");
    assert!(text.contains("30 of 30 as the response named"), "{text}");
}

/// An HTTP server on 127.0.0.1 whose answer to every GET is what `body` holds at the time
/// (`None`: it closes its port until `body` holds a page again, on the same port).
fn changing_server(body: std::sync::Arc<std::sync::Mutex<Option<String>>>) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut listener = Some(l);
        loop {
            let now = body.lock().unwrap().clone();
            match (now, listener.as_ref()) {
                (None, Some(_)) => listener = None,
                (Some(_), None) => {
                    listener = std::net::TcpListener::bind(("127.0.0.1", port)).ok();
                }
                (None, None) => std::thread::sleep(Duration::from_millis(10)),
                (Some(text), Some(l)) => {
                    l.set_nonblocking(true).unwrap();
                    match l.accept() {
                        Ok((mut s, _)) => {
                            s.set_nonblocking(false).unwrap();
                            let mut r = BufReader::new(s.try_clone().unwrap());
                            let mut line = String::new();
                            while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                                line.clear();
                            }
                            let _ = write!(
                                s,
                                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                                text.len()
                            );
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            }
        }
    });
    port
}

#[test]
fn an_instance_that_stops_answering_is_kept_as_an_outage() {
    use std::sync::{Arc, Mutex};
    let page = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n";
    let body = Arc::new(Mutex::new(Some(page.to_string())));
    let port = changing_server(body.clone());
    let started = Scraper::start(ScrapeConfig {
        urls: vec![format!("http://127.0.0.1:{port}/metrics").parse().unwrap()],
        origin: None,
        origin_api_key: None,
        interval: Duration::from_millis(100),
        out: None,
        insecure: false,
    })
    .unwrap();
    let scraper = started.scraper.expect("scraping");
    std::thread::sleep(Duration::from_millis(400));
    *body.lock().unwrap() = None;
    std::thread::sleep(Duration::from_millis(600));
    *body.lock().unwrap() = Some(page.to_string());
    std::thread::sleep(Duration::from_millis(600));
    let r = scraper.finish().unwrap();
    let inst = &r.instances[0];
    assert!(inst.failed >= 3, "{inst:?}");
    assert_eq!(inst.outages.len(), 1, "{:?}", inst.outages);
    let o = &inst.outages[0];
    let down = o.to.expect("it answered again").duration_since(o.from);
    assert!(
        down >= Duration::from_millis(300) && down <= Duration::from_millis(1500),
        "{down:?}"
    );
}

#[test]
fn the_routers_list_is_read_again_and_changes_are_kept() {
    use std::sync::{Arc, Mutex};
    let page = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n";
    let a = changing_server(Arc::new(Mutex::new(Some(page.to_string()))));
    let b = changing_server(Arc::new(Mutex::new(Some(page.to_string()))));
    let list = |ports: &[u16]| {
        format!(
            r#"{{"workers":[{}]}}"#,
            ports
                .iter()
                .map(|p| format!(r#"{{"url":"http://127.0.0.1:{p}"}}"#))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let routed = Arc::new(Mutex::new(Some(list(&[a]))));
    let router = changing_server(routed.clone());
    let started = Scraper::start(ScrapeConfig {
        urls: Vec::new(),
        origin: Some(
            format!("http://127.0.0.1:{router}/metrics")
                .parse()
                .unwrap(),
        ),
        origin_api_key: None,
        interval: Duration::from_millis(100),
        out: None,
        insecure: false,
    })
    .unwrap();
    let scraper = started.scraper.expect("scraping");
    assert_eq!(scraper.urls(), [format!("http://127.0.0.1:{a}/metrics")]);
    // b joins, then a leaves; the list is read every 2 s.
    *routed.lock().unwrap() = Some(list(&[a, b]));
    std::thread::sleep(Duration::from_millis(2600));
    *routed.lock().unwrap() = Some(list(&[b]));
    std::thread::sleep(Duration::from_millis(2200));
    let r = scraper.finish().unwrap();
    let events: Vec<(String, bool)> = r
        .membership
        .iter()
        .map(|m| (m.url.clone(), m.appeared))
        .collect();
    assert_eq!(
        events,
        [
            (format!("http://127.0.0.1:{b}/"), true),
            (format!("http://127.0.0.1:{a}/"), false)
        ]
    );
    // b was scraped from when it appeared.
    assert_eq!(r.instances.len(), 2);
    assert_eq!(r.instances[1].url, format!("http://127.0.0.1:{b}/metrics"));
    assert!(r.instances[1].ok >= 5, "{:?}", r.instances[1]);
}
