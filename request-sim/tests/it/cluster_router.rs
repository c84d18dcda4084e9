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
