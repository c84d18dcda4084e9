//! Every fault switch, through the FaultHandle, the admin endpoint and the command line.

use std::time::Duration;

use crate::support::*;
use llm_sim::{FaultConfig, SimConfig};
use serde_json::{json, Value};

/// A server with its faults set by `update`, and its base URL.
async fn faulty(update: impl FnOnce(&mut FaultConfig)) -> (llm_sim::SimServer, String) {
    let s = default_server().await;
    s.faults().update(update).unwrap();
    let b = s.base_url();
    (s, b)
}

#[tokio::test]
async fn error_statuses() {
    let s = default_server().await;
    let b = s.base_url();
    for (code, kind) in [
        (500u16, "InternalServerError"),
        (429, "RateLimitError"),
        (503, "ServiceUnavailableError"),
    ] {
        s.faults()
            .set(FaultConfig {
                error_500_rate: if code == 500 { 1.0 } else { 0.0 },
                error_429_rate: if code == 429 { 1.0 } else { 0.0 },
                error_503_rate: if code == 503 { 1.0 } else { 0.0 },
                ..FaultConfig::default()
            })
            .unwrap();
        let r = post(&b, "/v1/chat/completions", &chat_body("a", 3, true)).await;
        assert_eq!(r.status().as_u16(), code);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], kind);
        assert_eq!(v["error"]["code"], json!(code));
        let r = post(&b, "/generate", &json!({"inputs": "a"})).await;
        assert_eq!(r.status().as_u16(), code);
        let v: Value = r.json().await.unwrap();
        assert!(v["error"].is_string());
    }
    s.faults().clear();
    let r = post(
        &b,
        "/v1/completions",
        &completion_body(json!("a"), 1, false),
    )
    .await;
    assert_eq!(r.status().as_u16(), 200);
    let page = metrics(&b).await;
    assert_eq!(
        metric_with(&page, "llm_sim:faults_injected_total", "error_status"),
        6.0
    );
    assert_eq!(
        metric_with(&page, "llm_sim:http_responses_total", "status=\"429\""),
        2.0
    );
    // Failed requests never reach the engine.
    assert_eq!(metric(&page, "vllm:request_success_total"), 1.0);
    s.shutdown().await;
}

async fn statuses(seed: u64, n: usize) -> Vec<u16> {
    let cfg = SimConfig {
        faults: FaultConfig {
            seed,
            error_500_rate: 0.2,
            error_503_rate: 0.2,
            ..FaultConfig::default()
        },
        ..SimConfig::default()
    };
    let s = start_server(cfg).await;
    let mut out = Vec::new();
    for _ in 0..n {
        let r = post(
            &s.base_url(),
            "/v1/completions",
            &completion_body(json!("a"), 1, false),
        )
        .await;
        out.push(r.status().as_u16());
    }
    s.shutdown().await;
    out
}

#[tokio::test]
async fn fractional_rates_are_deterministic_per_seed() {
    let a = statuses(42, 60).await;
    let b = statuses(42, 60).await;
    let c = statuses(43, 60).await;
    assert_eq!(a, b);
    assert_ne!(a, c);
    let errors = a.iter().filter(|&&s| s != 200).count();
    assert!((12..=36).contains(&errors), "{errors} errors of 60: {a:?}");
    assert!(a.contains(&500) && a.contains(&503) && a.contains(&200));
}

#[tokio::test]
async fn reset_mid_stream() {
    let (s, b) = faulty(|f| f.reset_rate = 1.0).await;
    let st = stream(&b, "/v1/chat/completions", &chat_body("a", 20, true)).await;
    assert_eq!(st.status, 200);
    assert!(
        st.body_error.is_some(),
        "stream ended cleanly: {:?}",
        st.events
    );
    let n = st.token_events().len();
    assert!((1..20).contains(&n), "{n} tokens before the reset");
    assert!(!st.done());
    assert!(st.usage().is_none());
    // Non-streaming: the body is cut off.
    let r = post(
        &b,
        "/v1/completions",
        &completion_body(json!("a"), 20, false),
    )
    .await;
    assert!(r.bytes().await.is_err());
    assert_eq!(
        metric_with(&metrics(&b).await, "llm_sim:faults_injected_total", "reset"),
        2.0
    );
    s.shutdown().await;
}

#[tokio::test]
async fn stalled_stream() {
    let (s, b) = faulty(|f| {
        f.stall_rate = 1.0;
        f.stall_ms = 400;
    })
    .await;
    let st = stream(
        &b,
        "/v1/completions",
        &completion_body(json!("a"), 10, true),
    )
    .await;
    assert!(st.done());
    assert_eq!(st.token_events().len(), 10);
    let gap = st
        .events
        .windows(2)
        .map(|w| w[1].at - w[0].at)
        .max()
        .unwrap();
    assert!(gap >= Duration::from_millis(400), "largest gap {gap:?}");
    // The stall sits between two tokens, not before the first one.
    assert!(st.ttft() < Duration::from_millis(300));
    s.shutdown().await;
}

#[tokio::test]
async fn malformed_chunk() {
    let (s, b) = faulty(|f| f.malformed_rate = 1.0).await;
    let st = stream(&b, "/v1/chat/completions", &chat_body("a", 10, true)).await;
    let broken: Vec<_> = st
        .events
        .iter()
        .filter(|e| e.data != "[DONE]" && e.json().is_none())
        .collect();
    assert_eq!(broken.len(), 1, "{:?}", st.events);
    assert!(broken[0].data.starts_with('{'));
    assert_eq!(st.token_events().len(), 10);
    assert!(st.done());
    let r = post(
        &b,
        "/v1/completions",
        &completion_body(json!("a"), 5, false),
    )
    .await;
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().await.unwrap();
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
    s.shutdown().await;
}

#[tokio::test]
async fn missing_usage() {
    let (s, b) = faulty(|f| f.missing_usage_rate = 1.0).await;
    let st = stream(&b, "/v1/chat/completions", &chat_body("a", 4, true)).await;
    assert!(st.done());
    assert_eq!(st.token_events().len(), 4);
    assert!(st.usage().is_none());
    assert!(st
        .json_events()
        .iter()
        .all(|v| !v["choices"].as_array().unwrap().is_empty()));
    let v: Value = post(
        &b,
        "/v1/completions",
        &completion_body(json!("a"), 4, false),
    )
    .await
    .json()
    .await
    .unwrap();
    assert!(v.get("usage").is_none());
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    s.shutdown().await;
}

#[tokio::test]
async fn slow_accept() {
    let (s, b) = faulty(|f| {
        f.slow_accept_rate = 1.0;
        f.slow_accept_ms = 400;
    })
    .await;
    let start = std::time::Instant::now();
    let st = stream(&b, "/v1/completions", &completion_body(json!("a"), 2, true)).await;
    assert!(st.done());
    assert!(start.elapsed() >= Duration::from_millis(400));
    assert!(st.ttft() >= Duration::from_millis(400));
    assert_eq!(
        metric_with(
            &metrics(&b).await,
            "llm_sim:faults_injected_total",
            "slow_accept"
        ),
        2.0
    );
    s.shutdown().await;
}

#[tokio::test]
async fn admin_endpoint() {
    let s = default_server().await;
    let b = s.base_url();
    let c = client();
    let r = c
        .post(format!("{b}/admin/faults"))
        .json(&json!({"error_429_rate": 1.0, "seed": 9}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error_429_rate"], json!(1.0));
    assert_eq!(s.faults().get().seed, 9);
    let r = post(
        &b,
        "/v1/completions",
        &completion_body(json!("a"), 1, false),
    )
    .await;
    assert_eq!(r.status().as_u16(), 429);
    let got: Value = c
        .get(format!("{b}/admin/faults"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["error_429_rate"], json!(1.0));
    assert_eq!(got["reset_rate"], json!(0.0));
    for bad in [
        json!({"reset_rate": 2.0}),
        json!({"bogus": 1}),
        json!([1]),
        json!({"stall_ms": -1}),
    ] {
        let r = c
            .post(format!("{b}/admin/faults"))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 400, "{bad}");
    }
    assert_eq!(s.faults().get().error_429_rate, 1.0);
    let r = c
        .post(format!("{b}/admin/faults"))
        .json(&json!({"reset": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(s.faults().get().is_off());
    assert_eq!(s.faults().get().seed, 9);
    let r = post(
        &b,
        "/v1/completions",
        &completion_body(json!("a"), 1, false),
    )
    .await;
    assert_eq!(r.status().as_u16(), 200);
    s.shutdown().await;
}

#[tokio::test]
async fn command_line_flags() {
    let (mut child, url) = run_binary(&[
        "--fault-503-rate",
        "1",
        "--model-name",
        "m1",
        "--max-num-seqs",
        "3",
    ]);
    assert!(url.starts_with("http://127.0.0.1:"));
    let mut body = completion_body(json!("a"), 1, false);
    body["model"] = json!("m1");
    let r = post(&url, "/v1/completions", &body).await;
    assert_eq!(r.status().as_u16(), 503);
    let models: Value = client()
        .get(format!("{url}/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "m1");
    let _ = child.kill();
    let _ = child.wait();

    let out = run_binary_to_end(&["--preset", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run_binary_to_end(&["--fault-reset-rate", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("reset_rate"));
}
