//! Engine behaviour seen from a client: exact lengths, prefix caching, batching limits, step
//! timing, cancellation, and the in-thread server.

use std::time::{Duration, Instant};

use crate::support::*;
use llm_sim::SimConfig;
use serde_json::{json, Value};

#[tokio::test]
async fn generates_exactly_max_tokens_everywhere() {
    let server = default_server().await;
    let b = server.base_url();
    for n in [1u32, 2, 7, 64, 300] {
        let s = stream(&b, "/v1/chat/completions", &chat_body("bake tomo", n, true)).await;
        assert_eq!(s.token_events().len() as u32, n, "chat stream {n}");
        assert_eq!(s.usage().unwrap()["completion_tokens"], json!(n));
        assert!(s.done());

        let s = stream(
            &b,
            "/v1/completions",
            &completion_body(json!("bake"), n, true),
        )
        .await;
        assert_eq!(s.token_events().len() as u32, n, "completion stream {n}");
        assert_eq!(s.usage().unwrap()["completion_tokens"], json!(n));

        // max_completion_tokens wins over max_tokens for chat.
        let mut body = chat_body("bake", 999, false);
        body["max_completion_tokens"] = json!(n);
        body["min_tokens"] = json!(0);
        let v: Value = post(&b, "/v1/chat/completions", &body)
            .await
            .json()
            .await
            .unwrap();
        let text = v["choices"][0]["message"]["content"].as_str().unwrap();
        assert_eq!(text.split_whitespace().count() as u32, n);
        assert_eq!(v["usage"]["completion_tokens"], json!(n));

        let v: Value = post(
            &b,
            "/generate",
            &json!({"inputs": "x", "parameters": {"max_new_tokens": n}}),
        )
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(
            v["generated_text"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .count() as u32,
            n
        );

        let s = stream(
            &b,
            "/generate_stream",
            &json!({"inputs": "x", "parameters": {"max_new_tokens": n}}),
        )
        .await;
        assert_eq!(s.token_events().len() as u32, n);
    }
    // No max_tokens: the configured default.
    let v: Value = post(&b, "/v1/completions", &json!({"prompt": "a"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["usage"]["completion_tokens"], json!(256));
    let page = metrics(&b).await;
    let expect = 5.0 * (1 + 2 + 7 + 64 + 300) as f64 + 256.0;
    assert_eq!(metric(&page, "vllm:generation_tokens_total"), expect);
    assert_eq!(metric(&page, "vllm:request_success_total"), 26.0);
    server.shutdown().await;
}

#[tokio::test]
async fn prompt_tokens_follow_the_builtin_chat_accounting() {
    let server = default_server().await;
    let b = server.base_url();
    for n in [1usize, 10, 1000] {
        let v: Value = post(
            &b,
            "/v1/chat/completions",
            &chat_body(&words(n, 3), 1, false),
        )
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(v["usage"]["prompt_tokens"], json!(n + 8));
    }
    let body = json!({"messages": [
        {"role": "system", "content": "bake tomo"},
        {"role": "user", "content": [{"type": "text", "text": "dila"}, {"type": "text", "text": "kafe"}]},
    ], "max_tokens": 1});
    let v: Value = post(&b, "/v1/chat/completions", &body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["usage"]["prompt_tokens"], json!(2 + 2 + 5 * 2 + 3));
    let v: Value = post(
        &b,
        "/v1/completions",
        &completion_body(json!(words(777, 1)), 1, false),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["usage"]["prompt_tokens"], json!(777));
    let ids: Vec<u32> = (0..123).collect();
    let v: Value = post(
        &b,
        "/v1/completions",
        &completion_body(json!(ids), 1, false),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(v["usage"]["prompt_tokens"], json!(123));
    server.shutdown().await;
}

#[tokio::test]
async fn repeated_long_prompt_hits_the_prefix_cache() {
    // Prefill of 100 us/token: 4,000 uncached tokens cost 400 ms; cached they cost ~0.
    let cfg = SimConfig {
        prefill_token_us: 100.0,
        step_fixed_us: 1000.0,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let prompt = words(4000, 11);
    let first = stream(&b, "/v1/chat/completions", &chat_body(&prompt, 4, true)).await;
    let second = stream(&b, "/v1/chat/completions", &chat_body(&prompt, 4, true)).await;
    let u1 = first.usage().unwrap();
    let u2 = second.usage().unwrap();
    assert_eq!(u1["prompt_tokens"], json!(4008));
    assert_eq!(u1["prompt_tokens_details"]["cached_tokens"], json!(0));
    // 4,008 tokens = 250 full blocks of 16 + 8.
    assert_eq!(u2["prompt_tokens_details"]["cached_tokens"], json!(4000));
    let (t1, t2) = (first.ttft(), second.ttft());
    assert!(t1 >= Duration::from_millis(400), "uncached TTFT {t1:?}");
    assert!(
        t2 * 3 < t1,
        "cached TTFT {t2:?} not much shorter than {t1:?}"
    );

    // A prompt sharing only the first 1,000 words hits the blocks of that prefix:
    // the template's 3 leading tokens + 1,000 words = 1,003 tokens -> 62 full blocks.
    let mut partial = words(1000, 11);
    partial.push_str(&words(500, 4321));
    let third = stream(&b, "/v1/chat/completions", &chat_body(&partial, 2, true)).await;
    assert_eq!(
        third.usage().unwrap()["prompt_tokens_details"]["cached_tokens"],
        json!(992)
    );

    let page = metrics(&b).await;
    assert_eq!(metric(&page, "vllm:prefix_cache_hits_total"), 4992.0);
    assert_eq!(
        metric(&page, "vllm:prefix_cache_queries_total"),
        4008.0 * 2.0 + 1508.0
    );
    assert_eq!(
        metric(&page, "vllm:prompt_tokens_total"),
        4008.0 * 2.0 + 1508.0
    );
    server.shutdown().await;
}

#[tokio::test]
async fn prefix_caching_off_never_hits() {
    let cfg = SimConfig {
        enable_prefix_caching: false,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let prompt = words(500, 0);
    for _ in 0..2 {
        let v: Value = post(
            &b,
            "/v1/completions",
            &completion_body(json!(prompt), 1, false),
        )
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(
            v["usage"]["prompt_tokens_details"]["cached_tokens"],
            json!(0)
        );
    }
    assert_eq!(
        metric(&metrics(&b).await, "vllm:prefix_cache_hits_total"),
        0.0
    );
    server.shutdown().await;
}

#[tokio::test]
async fn lru_evicts_when_the_cache_is_small() {
    // 40 blocks: two 320-token prompts (20 blocks each) fill it; a third evicts the oldest.
    let cfg = SimConfig {
        num_gpu_blocks: 42,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let cached = |v: &Value| {
        v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
    };
    let ask = |p: String| {
        let b = b.clone();
        async move {
            post(&b, "/v1/completions", &completion_body(json!(p), 1, false))
                .await
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let (p1, p2, p3) = (words(320, 1), words(320, 2), words(320, 3));
    ask(p1.clone()).await;
    ask(p2.clone()).await;
    assert_eq!(cached(&ask(p2.clone()).await), 304);
    ask(p3.clone()).await;
    // p1 was least recently used: evicted. p3 is fully there.
    assert_eq!(cached(&ask(p3.clone()).await), 304);
    assert!(cached(&ask(p1.clone()).await) < 304);
    server.shutdown().await;
}

#[tokio::test]
async fn running_sequences_never_exceed_max_num_seqs() {
    let cfg = SimConfig {
        max_num_seqs: 2,
        step_fixed_us: 2000.0,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let mut tasks = Vec::new();
    for i in 0..6 {
        let b = b.clone();
        tasks.push(tokio::spawn(async move {
            let s = stream(
                &b,
                "/v1/chat/completions",
                &chat_body(&words(10, i), 25, true),
            )
            .await;
            (s.ttft(), s.elapsed, s.token_events().len())
        }));
    }
    let mut max_running = 0.0f64;
    let mut max_waiting = 0.0f64;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let page = metrics(&b).await;
        max_running = max_running.max(metric(&page, "vllm:num_requests_running"));
        max_waiting = max_waiting.max(metric(&page, "vllm:num_requests_waiting"));
        if metric(&page, "vllm:request_success_total") >= 6.0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    assert!(results.iter().all(|r| r.2 == 25));
    assert_eq!(max_running, 2.0);
    assert!(max_waiting >= 2.0, "waiting peaked at {max_waiting}");
    // Three waves of two: the last requests start only after ~2 waves of 25 steps (>= 100 ms).
    let mut ttfts: Vec<Duration> = results.iter().map(|r| r.0).collect();
    ttfts.sort();
    assert!(ttfts[5] >= Duration::from_millis(100), "{ttfts:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn chunked_prefill_respects_the_token_budget() {
    // 64 tokens per step at >= 20 ms per step: a 640-token prompt needs 10 steps (>= 200 ms)
    // before its first token; a 10-token prompt needs one (steps long enough that a busy test
    // machine's scheduling delays of tens of ms do not blur the two).
    let cfg = SimConfig {
        max_num_batched_tokens: 64,
        step_fixed_us: 20_000.0,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let long = stream(
        &b,
        "/v1/completions",
        &completion_body(json!(words(640, 5)), 2, true),
    )
    .await;
    let short = stream(
        &b,
        "/v1/completions",
        &completion_body(json!(words(10, 9)), 2, true),
    )
    .await;
    assert!(
        long.ttft() >= Duration::from_millis(180),
        "{:?}",
        long.ttft()
    );
    assert!(
        short.ttft() < long.ttft() / 2,
        "{:?} vs {:?}",
        short.ttft(),
        long.ttft()
    );
    let steps = metric(&metrics(&b).await, "llm_sim:engine_steps_total");
    // long: 10 prefill steps + 1 decode; short: 1 + 1.
    assert_eq!(steps, 13.0);
    server.shutdown().await;
}

#[tokio::test]
async fn decode_slows_down_as_the_batch_grows() {
    // 2 ms fixed + 2 ms per decoding sequence: alone a step is 4 ms, with 8 decoding 18 ms.
    let cfg = SimConfig {
        step_fixed_us: 2000.0,
        decode_seq_us: 2000.0,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let tpot = |s: &Stream| {
        let ev = s.token_events();
        (ev[ev.len() - 1].at - ev[0].at) / (ev.len() as u32 - 1)
    };
    let alone = stream(
        &b,
        "/v1/completions",
        &completion_body(json!("a"), 30, true),
    )
    .await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let b = b.clone();
        tasks.push(tokio::spawn(async move {
            stream(
                &b,
                "/v1/completions",
                &completion_body(json!("a"), 30, true),
            )
            .await
        }));
    }
    let mut batched = Duration::ZERO;
    for t in tasks {
        batched = batched.max(tpot(&t.await.unwrap()));
    }
    let single = tpot(&alone);
    // Steps chain on their deadlines, so the mean period is 4 ms; the first and last token
    // events can each arrive up to a timer tick late.
    assert!(single >= Duration::from_micros(3500), "{single:?}");
    assert!(batched >= Duration::from_micros(17_000), "{batched:?}");
    assert!(batched > single * 5 / 2, "{batched:?} vs {single:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn client_disconnect_aborts_the_request() {
    let cfg = SimConfig {
        step_fixed_us: 5000.0,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let mut resp = post(
        &b,
        "/v1/completions",
        &completion_body(json!("a"), 10_000, true),
    )
    .await;
    let _ = resp.chunk().await.unwrap();
    drop(resp);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let page = metrics(&b).await;
        if metric(&page, "llm_sim:requests_aborted_total") == 1.0 {
            assert_eq!(metric(&page, "vllm:num_requests_running"), 0.0);
            assert!(metric(&page, "vllm:generation_tokens_total") < 10_000.0);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "request was not aborted:\n{page}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.shutdown().await;
}

#[test]
fn spawn_in_thread_serves_and_stops_on_drop() {
    let sim = llm_sim::spawn_in_thread(SimConfig::default()).unwrap();
    let url = sim.base_url();
    assert!(url.starts_with("http://127.0.0.1:"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = stream(&url, "/v1/chat/completions", &chat_body("bake", 5, true)).await;
        assert_eq!(s.token_events().len(), 5);
    });
    sim.faults().update(|f| f.error_503_rate = 1.0).unwrap();
    rt.block_on(async {
        let r = post(
            &url,
            "/v1/completions",
            &completion_body(json!("a"), 1, false),
        )
        .await;
        assert_eq!(r.status().as_u16(), 503);
    });
    drop(sim);
    let refused = rt.block_on(async {
        client()
            .get(format!("{url}/health"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_err()
    });
    assert!(refused, "server still answering after drop");
}

#[tokio::test]
async fn shutdown_ends_in_flight_streams() {
    let cfg = SimConfig {
        step_fixed_us: 5000.0,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let task = tokio::spawn(async move {
        stream(
            &b,
            "/v1/completions",
            &completion_body(json!("a"), 100_000, true),
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    tokio::time::timeout(Duration::from_secs(5), server.shutdown())
        .await
        .expect("shutdown in time");
    let s = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("stream ended")
        .unwrap();
    assert!(!s.done());
    assert!(s.token_events().len() < 100_000);
}

#[tokio::test]
async fn dropping_the_server_stops_it() {
    let server = default_server().await;
    let url = server.base_url();
    drop(server);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = client()
        .get(format!("{url}/health"))
        .timeout(Duration::from_secs(2))
        .send()
        .await;
    assert!(r.is_err(), "still answering after drop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_streams_all_complete_exactly() {
    let cfg = SimConfig {
        max_num_seqs: 512,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let c = client();
    let mut tasks = Vec::new();
    for i in 0..300usize {
        let (b, c) = (b.clone(), c.clone());
        tasks.push(tokio::spawn(async move {
            let body = chat_body(&words(50, i * 13), 20, true);
            let text = c
                .post(format!("{b}/v1/chat/completions"))
                .json(&body)
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let tokens = text.matches("\"content\":\" ").count();
            (tokens, text.ends_with("data: [DONE]\n\n"))
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), (20, true));
    }
    let page = metrics(&b).await;
    assert_eq!(metric(&page, "vllm:generation_tokens_total"), 6000.0);
    assert_eq!(metric(&page, "vllm:num_requests_running"), 0.0);
    server.shutdown().await;
}
