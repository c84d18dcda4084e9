//! Router-facing extras over real loopback sockets: `/tokenize` and `/detokenize`,
//! `POST /reset_prefix_cache`, the readiness delay, the bounded waiting queue, simulated EOS.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::support::*;
use llm_sim::SimConfig;
use serde_json::{json, Value};

#[tokio::test]
async fn tokenize_and_detokenize_in_vllm_shapes() {
    let s = default_server().await;
    let base = s.base_url();
    let w = llm_sim::vocab::builtin_words();
    let text = format!("{} {} {}", w[3], w[40], w[4000]);
    let r = post(
        &base,
        "/tokenize",
        &json!({"model": "llm-sim", "prompt": text}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["tokens"], json!([3, 40, 4000]));
    assert_eq!(v["count"], 3);
    assert_eq!(v["max_model_len"], 262_144);
    assert_eq!(v["token_strs"], Value::Null);

    // Chat: the same accounting as a chat completion (one user message = words + 8).
    let r = post(
        &base,
        "/tokenize",
        &json!({"messages": [{"role": "user", "content": text}], "return_token_strs": true}),
    )
    .await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["count"], 3 + 8);
    assert_eq!(v["token_strs"].as_array().unwrap().len(), 11);
    assert_eq!(v["token_strs"][0], "<|im_start|>");
    assert_eq!(v["token_strs"][1], "user");
    let r = post(
        &base,
        "/tokenize",
        &json!({"messages": [{"role": "user", "content": text}], "add_generation_prompt": false}),
    )
    .await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["count"], 3 + 5);
    // A chat completion reports the same prompt_tokens as /tokenize.
    let r = post(&base, "/v1/chat/completions", &chat_body(&text, 1, false)).await;
    let c: Value = r.json().await.unwrap();
    assert_eq!(c["usage"]["prompt_tokens"], 11);

    let r = post(&base, "/detokenize", &json!({"tokens": [3, 40, 4000]})).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["prompt"], text);

    // Errors as vLLM's error object.
    let r = post(
        &base,
        "/tokenize",
        &json!({"model": "other", "prompt": "a"}),
    )
    .await;
    assert_eq!(r.status(), 404);
    let r = post(&base, "/tokenize", &json!({"prompt": "a", "messages": []})).await;
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "BadRequestError");
    let r = post(&base, "/detokenize", &json!({"tokens": "x"})).await;
    assert_eq!(r.status(), 400);
    let r = client()
        .get(format!("{base}/tokenize"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    s.shutdown().await;
}

#[tokio::test]
async fn reset_prefix_cache_forgets_cached_prefixes() {
    let s = default_server().await;
    let base = s.base_url();
    let prompt = words(160, 0);
    let cached = |v: &Value| v["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64();
    let r = post(&base, "/v1/chat/completions", &chat_body(&prompt, 1, false)).await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(cached(&v), Some(0));
    let r = post(&base, "/v1/chat/completions", &chat_body(&prompt, 1, false)).await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        cached(&v),
        Some(160),
        "168 prompt tokens: 10 full blocks hit"
    );

    let r = client()
        .post(format!("{base}/reset_prefix_cache"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = post(&base, "/v1/chat/completions", &chat_body(&prompt, 1, false)).await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(cached(&v), Some(0), "the cache was emptied");

    // While a request holds blocks, the reset is refused (409) and changes nothing.
    let long = tokio::spawn({
        let base = base.clone();
        let prompt = prompt.clone();
        async move {
            post(
                &base,
                "/v1/chat/completions",
                &chat_body(&prompt, 400, false),
            )
            .await
        }
    });
    let t0 = Instant::now();
    while s.metrics().running.load(Ordering::Relaxed) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let r = client()
        .post(format!("{base}/reset_prefix_cache"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "ConflictError");
    let v: Value = long.await.unwrap().json().await.unwrap();
    assert_eq!(
        cached(&v),
        Some(160),
        "the cache survived the refused reset"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn health_is_503_until_ready() {
    let cfg = SimConfig {
        ready_delay_ms: 2_000,
        speedup: 5.0, // 400 ms of wall time
        ..SimConfig::default()
    };
    let t0 = Instant::now();
    let s = start_server(cfg).await;
    let base = s.base_url();
    let r = client().get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let r = post(
        &base,
        "/v1/completions",
        &completion_body("a".into(), 1, false),
    )
    .await;
    assert_eq!(r.status(), 503);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "ServiceUnavailableError");
    loop {
        let r = client().get(format!("{base}/health")).send().await.unwrap();
        if r.status() == 200 {
            break;
        }
        assert_eq!(r.status(), 503);
        assert!(t0.elapsed() < Duration::from_secs(10), "never became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(390),
        "ready after {waited:?}"
    );
    let r = post(
        &base,
        "/v1/completions",
        &completion_body("a".into(), 1, false),
    )
    .await;
    assert_eq!(r.status(), 200);
    s.shutdown().await;
}

#[tokio::test]
async fn bounded_waiting_queue_answers_429() {
    // One sequence at a time, slow steps: the first request runs, two wait, the rest are 429.
    let cfg = SimConfig {
        max_num_seqs: 1,
        max_waiting: Some(2),
        step_fixed_us: 20_000.0,
        ..SimConfig::default()
    };
    let s = start_server(cfg).await;
    let base = s.base_url();
    let first = tokio::spawn({
        let base = base.clone();
        async move {
            post(
                &base,
                "/v1/completions",
                &completion_body("a".into(), 10, false),
            )
            .await
        }
    });
    let t0 = Instant::now();
    while s.metrics().running.load(Ordering::Relaxed) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut waiting = Vec::new();
    for _ in 0..2 {
        let base = base.clone();
        waiting.push(tokio::spawn(async move {
            post(
                &base,
                "/v1/completions",
                &completion_body("a".into(), 2, false),
            )
            .await
        }));
    }
    while s.metrics().unscheduled.load(Ordering::Relaxed) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for _ in 0..3 {
        let r = post(
            &base,
            "/v1/completions",
            &completion_body("a".into(), 2, false),
        )
        .await;
        assert_eq!(r.status(), 429);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], "RateLimitError");
    }
    assert_eq!(first.await.unwrap().status(), 200);
    for w in waiting {
        assert_eq!(w.await.unwrap().status(), 200);
    }
    assert_eq!(s.metrics().unscheduled.load(Ordering::Relaxed), 0);
    // Room again once the queue drained.
    let r = post(
        &base,
        "/v1/completions",
        &completion_body("a".into(), 1, false),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(s.metrics().status_count(429), 3);
    s.shutdown().await;
}

#[tokio::test]
async fn eos_stops_requests_that_do_not_ask_for_exact_lengths() {
    let cfg = SimConfig {
        eos_mean_tokens: Some(20.0),
        ..SimConfig::default()
    };
    let s = start_server(cfg).await;
    let base = s.base_url();
    let (mut stops, mut lengths, mut total) = (0u64, 0u64, 0u64);
    let n = 60;
    for i in 0..n {
        let body = json!({"prompt": format!("a b {i}"), "max_tokens": 100, "stream": i % 2 == 0,
                          "stream_options": if i % 2 == 0 { json!({"include_usage": true}) } else { Value::Null }});
        let body = if i % 2 == 0 {
            body
        } else {
            json!({"prompt": format!("a b {i}"), "max_tokens": 100})
        };
        let (finish, completion) = if i % 2 == 0 {
            let st = stream(&base, "/v1/completions", &body).await;
            assert!(st.done());
            let ev = st.json_events();
            let last_tok = ev
                .iter()
                .rev()
                .find(|e| !e["choices"].as_array().unwrap().is_empty())
                .unwrap();
            let finish = last_tok["choices"][0]["finish_reason"]
                .as_str()
                .unwrap()
                .to_string();
            let usage = st.usage().unwrap();
            assert_eq!(
                usage["completion_tokens"].as_u64().unwrap() as usize,
                st.token_events().len()
            );
            (finish, usage["completion_tokens"].as_u64().unwrap())
        } else {
            let v: Value = post(&base, "/v1/completions", &body)
                .await
                .json()
                .await
                .unwrap();
            (
                v["choices"][0]["finish_reason"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                v["usage"]["completion_tokens"].as_u64().unwrap(),
            )
        };
        assert!((1..=100).contains(&completion));
        if finish == "stop" {
            stops += 1;
            assert!(completion < 100);
        } else {
            assert_eq!(finish, "length");
            assert_eq!(completion, 100);
        }
        lengths += completion;
        total += 1;
    }
    // Geometric with mean 20, capped at 100: nearly all stop; the mean is near 20.
    assert!(stops >= n - 3, "{stops} of {n} stopped");
    let mean = lengths as f64 / total as f64;
    assert!((10.0..35.0).contains(&mean), "mean length {mean}");
    // Exact lengths when asked: ignore_eos, or min_tokens = max_tokens.
    for body in [
        json!({"prompt": "a b", "max_tokens": 50, "ignore_eos": true}),
        json!({"prompt": "a b", "max_tokens": 50, "min_tokens": 50}),
    ] {
        let v: Value = post(&base, "/v1/completions", &body)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        assert_eq!(v["usage"]["completion_tokens"], 50);
    }
    // min_tokens is a floor for the drawn length.
    let v: Value = post(
        &base,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "a"}], "max_tokens": 100, "min_tokens": 90}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() >= 90);
    let page = metrics(&base).await;
    let stop = metric_with(
        &page,
        "vllm:request_success_total",
        "finished_reason=\"stop\"",
    );
    let length = metric_with(
        &page,
        "vllm:request_success_total",
        "finished_reason=\"length\"",
    );
    assert_eq!(stop + length, (n + 3) as f64);
    assert!(stop >= (n - 3) as f64, "stop {stop}");
    s.shutdown().await;
}
