//! The built-in router (`--router`): each policy's choices seen through the instances' identity
//! headers, streaming through the front port, prefix-cache hits following prefix-aware routing,
//! the router's counters and cache reset, and the command line.

use std::io::{BufRead, BufReader};

use crate::support::*;
use llm_sim::routing::Policy;
use llm_sim::{RouterConfig, SimConfig, SimRouter, SimServer};
use serde_json::{json, Value};

async fn cluster(n: usize, policy: Policy, cfg: SimConfig) -> (Vec<SimServer>, SimRouter) {
    let servers = llm_sim::start_cluster(cfg, n).await.unwrap();
    let router = llm_sim::start_router(&servers, RouterConfig::new(policy))
        .await
        .unwrap();
    (servers, router)
}

/// Sends a non-streaming chat request through `base` with optional headers; returns the pod
/// index that served it and the response body.
async fn chat(base: &str, body: &Value, headers: &[(&str, &str)]) -> (usize, Value) {
    let mut rb = client()
        .post(format!("{base}/v1/chat/completions"))
        .json(body);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let r = rb.send().await.unwrap();
    assert_eq!(r.status(), 200);
    let pod = r.headers()["x-inference-pod"].to_str().unwrap().to_string();
    let idx = pod.strip_prefix("llm-sim-").unwrap().parse().unwrap();
    (idx, r.json().await.unwrap())
}

#[tokio::test]
async fn round_robin_cycles_and_counts() {
    let (servers, router) = cluster(3, Policy::RoundRobin, SimConfig::default()).await;
    let b = router.base_url();
    let mut got = Vec::new();
    for k in 0..6 {
        got.push(chat(&b, &chat_body(&words(10, k), 2, false), &[]).await.0);
    }
    assert_eq!(got, vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(router.routed(), vec![2, 2, 2]);
    let page = metrics(&b).await;
    for i in 0..3 {
        let label = format!("instance=\"{i}\"");
        assert_eq!(
            metric_with(&page, "llm_sim:router_requests_total", &label),
            2.0
        );
        assert_eq!(metric_with(&page, "llm_sim:router_in_flight", &label), 0.0);
    }
    // Each instance served its two: its own counters say so.
    for s in &servers {
        let p = metrics(&s.base_url()).await;
        assert_eq!(metric(&p, "vllm:request_success_total"), 2.0);
    }
    router.shutdown().await;
}

#[tokio::test]
async fn sessions_stick_by_header_or_user_field() {
    let (_servers, router) = cluster(4, Policy::Session, SimConfig::default()).await;
    let b = router.base_url();
    let body = chat_body("bake tomo", 1, false);
    let (a, _) = chat(&b, &body, &[("x-session-id", "alpha")]).await;
    for _ in 0..4 {
        assert_eq!(chat(&b, &body, &[("x-session-id", "alpha")]).await.0, a);
    }
    let mut with_user = body.clone();
    with_user["user"] = json!("alpha");
    // The same key in the OpenAI `user` field goes to the same instance ...
    assert_eq!(chat(&b, &with_user, &[]).await.0, a);
    // ... and the header wins over the field.
    let mut pods = std::collections::HashSet::new();
    for k in 0..32 {
        let key = format!("s{k}");
        pods.insert(chat(&b, &with_user, &[("x-session-id", &key)]).await.0);
    }
    assert_eq!(pods.len(), 4, "32 sessions over 4 instances: {pods:?}");
    router.shutdown().await;
}

#[tokio::test]
async fn least_loaded_avoids_the_busy_instance() {
    // 10 ms steps: a 200-token stream keeps instance 0 busy for 2 s.
    let cfg = SimConfig {
        step_fixed_us: 10_000.0,
        ..SimConfig::default()
    };
    let (_servers, router) = cluster(2, Policy::LeastLoaded, cfg).await;
    let b = router.base_url();
    let long = {
        let b = b.clone();
        tokio::spawn(async move {
            stream(
                &b,
                "/v1/chat/completions",
                &chat_body("bake tomo", 200, true),
            )
            .await
        })
    };
    // Wait until the long request is in flight on instance 0.
    let mut busy = 0.0;
    for _ in 0..200 {
        busy = metric_with(
            &metrics(&b).await,
            "llm_sim:router_in_flight",
            "instance=\"0\"",
        );
        if busy == 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(busy, 1.0);
    // Round-robin would alternate 1, 0, 1; least-loaded keeps off the busy instance 0.
    for _ in 0..3 {
        assert_eq!(chat(&b, &chat_body("bake", 1, false), &[]).await.0, 1);
    }
    let s = long.await.unwrap();
    assert_eq!(s.token_events().len(), 200);
    assert!(s.done());
    router.shutdown().await;
}

#[tokio::test]
async fn prefix_aware_sends_shared_prefixes_where_they_are_cached() {
    let (servers, router) = cluster(4, Policy::PrefixAware, SimConfig::default()).await;
    let b = router.base_url();
    let mut firsts = Vec::new();
    // Four conversations with distinct 400-word histories, then a second turn of each.
    for k in 0..4 {
        let (i, v) = chat(&b, &chat_body(&words(400, 1000 * k), 1, false), &[]).await;
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        firsts.push(i);
    }
    let spread: std::collections::HashSet<_> = firsts.iter().collect();
    assert_eq!(spread.len(), 4, "idle instances share the load: {firsts:?}");
    for k in (0..4).rev() {
        let turn2 = format!("{} {}", words(400, 1000 * k), words(50, 77));
        let (i, v) = chat(&b, &chat_body(&turn2, 1, false), &[]).await;
        assert_eq!(i, firsts[k], "turn 2 of conversation {k}");
        let cached = v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap();
        assert!(cached >= 384, "cached {cached}");
    }
    // A reset through the router empties every instance and its index: the next turn is
    // routed as new (no cached prefix anywhere) and hits nothing.
    let r = post(&b, "/reset_prefix_cache", &json!({})).await;
    assert_eq!(r.status(), 200);
    for s in &servers {
        assert!(s.cached_block_hashes().await.is_empty());
    }
    let (_, v) = chat(&b, &chat_body(&words(400, 0), 1, false), &[]).await;
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    router.shutdown().await;
}

/// Issue #30: one chat request first (a client's calibration request), then conversations that
/// all share a system prompt. The first request's instance held no block of the system prompt;
/// it got nothing more (1 / 99 / 101 of 201). Every instance stays within its documented share
/// (docs/llm-sim.md: between 1 / 1.5 and 1.5 times an even share, give or take one).
#[tokio::test]
async fn prefix_aware_starves_no_instance_after_a_first_odd_request() {
    let (_servers, router) = cluster(3, Policy::PrefixAware, SimConfig::default()).await;
    let b = router.base_url();
    chat(&b, &chat_body("bake tomo dila", 1, false), &[]).await;
    let system = words(64, 4000);
    for k in 0..60 {
        let prompt = format!("{system} {}", words(40, 97 * k));
        chat(&b, &chat_body(&prompt, 1, false), &[]).await;
    }
    let routed = router.routed();
    let total: u64 = routed.iter().sum();
    assert_eq!(total, 61);
    eprintln!("prefix-aware per-instance after a first odd request: {routed:?}");
    let share = total as f64 / 3.0;
    let bound = llm_sim::routing::PREFIX_LOAD_BOUND;
    let lo = (share / bound).floor() as u64 - 1;
    let hi = (share * bound).ceil() as u64 + 1;
    assert!(
        routed.iter().all(|c| (lo..=hi).contains(c)),
        "per-instance {routed:?}, allowed {lo}..={hi} each"
    );
    router.shutdown().await;
}

#[tokio::test]
async fn streams_and_other_routes_go_through_the_front_port() {
    let (_servers, router) = cluster(2, Policy::RoundRobin, SimConfig::default()).await;
    let b = router.base_url();
    let s = stream(&b, "/v1/chat/completions", &chat_body("bake tomo", 7, true)).await;
    assert_eq!(s.status, 200);
    assert_eq!(s.token_events().len(), 7);
    assert_eq!(s.usage().unwrap()["completion_tokens"], 7);
    assert!(s.done());
    let s = stream(
        &b,
        "/generate_stream",
        &json!({"inputs": "bake", "parameters": {"max_new_tokens": 3}}),
    )
    .await;
    assert_eq!(s.token_events().len(), 3);
    let health = client().get(format!("{b}/health")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let models: Value = client()
        .get(format!("{b}/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "llm-sim");
    let bad = post(
        &b,
        "/v1/completions",
        &json!({"prompt": "a", "max_tokens": 0}),
    )
    .await;
    assert_eq!(bad.status(), 400);
    assert_eq!(
        metric(&metrics(&b).await, "llm_sim:router_rejected_total"),
        1.0
    );
    assert_eq!(router.routed(), vec![1, 1]);
    router.shutdown().await;
}

/// Issue 30: a client pointed at the router finds the instances' own metrics pages, from
/// `GET /instances` or from the router's `/metrics`.
#[tokio::test]
async fn the_router_lists_its_instances() {
    let (servers, router) = cluster(3, Policy::LeastLoaded, SimConfig::default()).await;
    let b = router.base_url();
    let v: Value = client()
        .get(format!("{b}/instances"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["policy"], "least-loaded");
    let list = v["instances"].as_array().unwrap();
    assert_eq!(list.len(), 3);
    for (i, s) in servers.iter().enumerate() {
        assert_eq!(list[i]["index"], i);
        assert_eq!(list[i]["pod"], format!("llm-sim-{i}"));
        assert_eq!(list[i]["url"], s.base_url());
        assert_eq!(list[i]["metrics_url"], format!("{}/metrics", s.base_url()));
        // Each URL serves that instance's own engine metrics.
        let r = client()
            .get(list[i]["metrics_url"].as_str().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.headers()["x-inference-pod"],
            format!("llm-sim-{i}").as_str()
        );
        assert!(r
            .text()
            .await
            .unwrap()
            .contains("vllm:num_requests_running"));
    }
    let page = metrics(&b).await;
    for (i, s) in servers.iter().enumerate() {
        let label = format!("url=\"{}\"", s.base_url());
        assert_eq!(
            metric_with(&page, "llm_sim:router_instance_info", &label),
            1.0
        );
        assert!(page.contains(&format!("instance=\"{i}\",pod=\"llm-sim-{i}\",{label}")));
    }
    router.shutdown().await;
}

#[test]
fn command_line_router() {
    let mut child = spawn_binary(&["--port", "0", "--instances", "2", "--router", "session"]);
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut router_line = String::new();
    for _ in 0..3 {
        let l = lines.next().unwrap().unwrap();
        if l.contains("router") {
            router_line = l;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        router_line
            .contains("router (session, what-if studies only) listening on http://127.0.0.1:")
            && router_line.contains("2 instance(s)"),
        "{router_line}"
    );
    let out = run_binary_to_end(&["--router", "no-such-policy"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("prefix-aware") && err.contains("cache_aware"),
        "{err}"
    );
    let out = run_binary_to_end(&["--router", "cache_aware", "--cache-threshold", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cache-threshold"));
}

/// A multi-turn conversation through smg's `cache_aware` on real sockets: each conversation's
/// later turns go where its first turn went (the router's tree holds the first turn's text),
/// and its prefix cache hits them.
#[tokio::test]
async fn cache_aware_keeps_conversations_where_their_text_is() {
    let (servers, router) = cluster(3, Policy::CacheAware, SimConfig::default()).await;
    let b = router.base_url();
    let mut homes = Vec::new();
    for c in 0..3 {
        let sys = words(60, 1000 * (c + 1));
        let mut messages = vec![json!({"role": "system", "content": sys})];
        let mut home = None;
        for t in 0..3 {
            messages.push(json!({"role": "user", "content": words(8, 100 * t + 7 * c)}));
            let body = json!({"model": "llm-sim", "messages": messages, "max_tokens": 4});
            let (i, v) = chat(&b, &body, &[]).await;
            match home {
                None => home = Some(i),
                Some(h) => assert_eq!(i, h, "conversation {c} turn {t}"),
            }
            let reply = v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string();
            messages.push(json!({"role": "assistant", "content": reply}));
        }
        homes.push(home.unwrap());
    }
    // Three first turns, nothing matched, equal loads: one each (smg's min-load tie-break).
    homes.sort_unstable();
    assert_eq!(homes, vec![0, 1, 2]);
    assert_eq!(router.routed(), vec![3, 3, 3]);
    for s in &servers {
        let p = metrics(&s.base_url()).await;
        assert!(metric(&p, "vllm:prefix_cache_hits_total") > 0.0);
    }
    let v: Value = client()
        .get(format!("{b}/instances"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["policy"], "cache_aware");
    router.shutdown().await;
}

/// smg's `consistent_hashing` on real sockets: `X-SMG-Routing-Key` keeps a key on one instance;
/// without it, the `authorization` header is the key.
#[tokio::test]
async fn consistent_hashing_follows_the_routing_key_header() {
    let (_servers, router) = cluster(4, Policy::ConsistentHashing, SimConfig::default()).await;
    let b = router.base_url();
    let mut used = [false; 4];
    for k in 0..24 {
        let key = format!("conversation-{k}");
        let (first, _) = chat(
            &b,
            &chat_body(&words(10, k), 2, false),
            &[("x-smg-routing-key", &key)],
        )
        .await;
        used[first] = true;
        for r in 0..2 {
            let body = chat_body(&words(10, 50 + r), 2, false);
            assert_eq!(
                chat(&b, &body, &[("x-smg-routing-key", &key)]).await.0,
                first
            );
        }
    }
    assert!(used.iter().filter(|&&u| u).count() >= 3, "{used:?}");
    let (a, _) = chat(
        &b,
        &chat_body("hi", 2, false),
        &[("authorization", "Bearer k1")],
    )
    .await;
    for _ in 0..4 {
        let (i, _) = chat(
            &b,
            &chat_body("hello", 2, false),
            &[("authorization", "Bearer k1")],
        )
        .await;
        assert_eq!(i, a);
    }
    router.shutdown().await;
}
