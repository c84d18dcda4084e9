//! Cluster mode: `--instances N` engines in one process, each with its own identity header,
//! KV cache and metrics; `speedup` shortens steps in wall time but not in simulated time.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::support::*;
use llm_sim::SimConfig;

#[tokio::test]
async fn instances_are_independent_and_say_who_they_are() {
    let servers = llm_sim::start_cluster(SimConfig::default(), 3)
        .await
        .unwrap();
    assert_eq!(servers.len(), 3);
    let prompt = words(200, 0);
    for (i, s) in servers.iter().enumerate() {
        let r = post(
            &s.base_url(),
            "/v1/chat/completions",
            &chat_body(&prompt, 2, false),
        )
        .await;
        assert_eq!(r.status(), 200);
        let pod = r.headers()["x-inference-pod"].to_str().unwrap().to_string();
        let port = r.headers()["x-inference-port"]
            .to_str()
            .unwrap()
            .to_string();
        assert_eq!(pod, format!("llm-sim-{i}"));
        assert_eq!(port, s.addr.port().to_string());
    }
    // Instance 0 sees the same prompt again: only it has the prefix cached.
    let r = post(
        &servers[0].base_url(),
        "/v1/chat/completions",
        &chat_body(&prompt, 2, false),
    )
    .await;
    assert_eq!(r.status(), 200);
    let hits: Vec<u64> = servers
        .iter()
        .map(|s| s.metrics().prefix_hits.load(Ordering::Relaxed))
        .collect();
    assert!(
        hits[0] >= 192,
        "instance 0 reused its cached prefix: {hits:?}"
    );
    assert_eq!(
        &hits[1..],
        &[0, 0],
        "other instances have their own caches: {hits:?}"
    );
    let reqs: Vec<f64> = {
        let mut v = Vec::new();
        for s in &servers {
            v.push(metric(
                &metrics(&s.base_url()).await,
                "vllm:prompt_tokens_total",
            ));
        }
        v
    };
    assert!(
        reqs[0] > reqs[1] && (reqs[1] - reqs[2]).abs() < 1e-9,
        "{reqs:?}"
    );
    for s in servers {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn cluster_ports_are_consecutive_from_the_base() {
    // Find a free port, then ask for it and the next one.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = probe.local_addr().unwrap().port();
    drop(probe);
    let cfg = SimConfig {
        port: base,
        ..SimConfig::default()
    };
    match llm_sim::start_cluster(cfg, 2).await {
        Ok(servers) => {
            assert_eq!(servers[0].addr.port(), base);
            assert_eq!(servers[1].addr.port(), base + 1);
            for s in servers {
                s.shutdown().await;
            }
        }
        // base+1 may be taken by someone else on a shared machine; the error must say which.
        Err(e) => assert!(format!("{e:#}").contains("instance 1"), "{e:#}"),
    }
    let cfg = SimConfig {
        port: 65_535,
        ..SimConfig::default()
    };
    let e = llm_sim::start_cluster(cfg, 2).await.err().unwrap();
    assert!(format!("{e:#}").contains("65536"), "{e:#}");
}

#[tokio::test]
async fn speedup_shortens_wall_time_not_simulated_time() {
    // 20 decode steps of 20 ms each: 400 ms simulated, 40 ms of wall time at 10x.
    let cfg = SimConfig {
        step_fixed_us: 20_000.0,
        speedup: 10.0,
        ..SimConfig::default()
    };
    let s = start_server(cfg).await;
    let t0 = Instant::now();
    let r = post(
        &s.base_url(),
        "/v1/completions",
        &completion_body("a".into(), 20, false),
    )
    .await;
    assert_eq!(r.status(), 200);
    let wall = t0.elapsed();
    let sim_us = s.metrics().engine_sim_us.load(Ordering::Relaxed);
    assert!(sim_us >= 400_000, "simulated time {sim_us} us");
    assert!(
        wall.as_millis() < 300,
        "wall {wall:?} for 400 ms simulated at 10x"
    );
    assert!(wall.as_millis() >= 35, "wall {wall:?} too short for 40 ms");
    // The server's histograms are in simulated time: 20 steps of 20 ms, the first at TTFT.
    let page = metrics(&s.base_url()).await;
    let e2e = metric(&page, "vllm:e2e_request_latency_seconds_sum");
    assert!((0.4..0.45).contains(&e2e), "e2e {e2e} s simulated");
    let ttft = metric(&page, "vllm:time_to_first_token_seconds_sum");
    assert!((0.02..0.03).contains(&ttft), "TTFT {ttft} s simulated");
    let tpot = metric(&page, "vllm:request_time_per_output_token_seconds_sum");
    assert!((tpot - 0.02).abs() < 1e-3, "TPOT {tpot} s simulated");
    // ... and the page says so, for a client that compares them with its wall clock.
    assert_eq!(metric(&page, "llm_sim:speedup"), 10.0);
    s.shutdown().await;

    let bad = SimConfig {
        speedup: 0.0,
        ..SimConfig::default()
    };
    let e = llm_sim::start(bad).await.err().unwrap();
    assert!(format!("{e:#}").contains("speedup"), "{e:#}");
}
