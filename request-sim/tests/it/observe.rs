//! The Prometheus parser and the engine-neutral view on canned `/metrics` pages written from the
//! documented metric names of vLLM (V1 and older aliases), SGLang, llama.cpp and TGI.

use request_sim::observe::{parse, Engine, Kind, ServerView, Window};

fn vllm_v1(queries: f64, hits: f64, ttft_sum: f64, ttft_count: f64) -> String {
    format!(
        r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="qwen3-8b"}} 7.0
vllm:num_requests_running{{engine="1",model_name="qwen3-8b"}} 5.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="qwen3-8b"}} 3.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="qwen3-8b"}} 0.25
vllm:kv_cache_usage_perc{{engine="1",model_name="qwen3-8b"}} 0.5
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{{engine="0",model_name="qwen3-8b"}} {queries}
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{{engine="0",model_name="qwen3-8b"}} {hits}
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{{engine="0",model_name="qwen3-8b"}} 2.0
# TYPE vllm:request_success counter
vllm:request_success_total{{engine="0",finished_reason="stop",model_name="qwen3-8b"}} 10.0
vllm:request_success_total{{engine="0",finished_reason="length",model_name="qwen3-8b"}} 4.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="qwen3-8b"}} 1.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="qwen3-8b"}} {ttft_count}
vllm:time_to_first_token_seconds_count{{engine="0",model_name="qwen3-8b"}} {ttft_count}
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="qwen3-8b"}} {ttft_sum}
# TYPE python_gc_objects_collected counter
python_gc_objects_collected_total{{generation="0"}} 123.0
"#
    )
}

#[test]
fn vllm_v1_page_reads_into_the_view() {
    let page = parse(&vllm_v1(1000.0, 400.0, 3.0, 12.0)).unwrap();
    let ttft = page.family("vllm:time_to_first_token_seconds").unwrap();
    assert_eq!(ttft.kind, Kind::Histogram);
    assert_eq!(ttft.samples.len(), 4);
    assert_eq!(
        page.family("vllm:num_requests_running")
            .unwrap()
            .help
            .as_deref(),
        Some("Number of requests in model execution batches.")
    );
    // Unknown families stay raw.
    let gc = page.family("python_gc_objects_collected").unwrap();
    assert_eq!(gc.kind, Kind::Counter);
    assert_eq!(gc.samples[0].labels["generation"], "0");
    let v = ServerView::of(&page);
    assert_eq!(v.engine, Engine::Vllm);
    assert_eq!(v.running, Some(12.0));
    assert_eq!(v.waiting, Some(3.0));
    assert_eq!(v.kv_usage, Some(0.5));
    assert_eq!(v.prefix_queries, Some(1000.0));
    assert_eq!(v.prefix_hits, Some(400.0));
    assert_eq!(v.preemptions, Some(2.0));
    assert_eq!(v.requests_done, Some(14.0));
    assert_eq!(v.ttft.unwrap().count, 12.0);
}

#[test]
fn window_uses_counter_and_histogram_deltas() {
    let a = ServerView::of(&parse(&vllm_v1(1000.0, 400.0, 3.0, 12.0)).unwrap());
    let b = ServerView::of(&parse(&vllm_v1(3000.0, 1900.0, 5.5, 22.0)).unwrap());
    let w = Window::between(&a, &b);
    assert_eq!(w.prefix_queries, Some(2000.0));
    assert_eq!(w.prefix_hits, Some(1500.0));
    assert_eq!(w.hit_ratio(), Some(0.75));
    // (5.5 - 3.0) s over 10 requests = 250 ms.
    assert!((w.ttft_mean_ms.unwrap() - 250.0).abs() < 1e-9);
    assert_eq!(w.preemptions, Some(0.0));
    // A restart (counters went down) counts from zero, never negative.
    let w = Window::between(&b, &a);
    assert_eq!(w.prefix_hits, Some(400.0));
}

#[test]
fn older_vllm_aliases_are_read() {
    let page = parse(
        r#"# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.125
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{model_name="m"} 80
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="m"} 20
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_sum{model_name="m"} 4.0
vllm:e2e_request_latency_seconds_count{model_name="m"} 2
"#,
    )
    .unwrap();
    let v = ServerView::of(&page);
    assert_eq!(v.kv_usage, Some(0.125));
    assert_eq!(v.prefix_queries, Some(80.0));
    assert_eq!(v.prefix_hits, Some(20.0));
    assert_eq!(v.e2e.unwrap().sum, 4.0);
    assert_eq!(v.running, None);
}

#[test]
fn sglang_page() {
    let page = parse(
        r#"# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",model_name="m"} 2.0e+06
sglang:cached_tokens_total{cache_source="host",model_name="m"} 32198
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.28
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} 0.007507552643049313
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 4.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 1.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{model_name="m"} 2.3518979474117756e+06
sglang:time_to_first_token_seconds_bucket{le="0.001",model_name="m"} 0.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 2.0e+05
sglang:time_to_first_token_seconds_count{model_name="m"} 2.0e+05
"#,
    )
    .unwrap();
    let v = ServerView::of(&page);
    assert_eq!(v.engine, Engine::Sglang);
    assert_eq!(v.running, Some(4.0));
    assert_eq!(v.waiting, Some(1.0));
    assert_eq!(v.kv_usage, Some(0.28));
    assert_eq!(v.prefix_hits, Some(2_032_198.0));
    assert_eq!(v.prefix_queries, Some(8_128_902.0));
    assert_eq!(v.generation_tokens, Some(7_557_572.0));
    assert_eq!(v.ttft.unwrap().count, 200_000.0);
    // The gauge SGLang computes itself stays available raw.
    assert_eq!(
        page.family("sglang:cache_hit_rate").unwrap().kind,
        Kind::Gauge
    );
}

#[test]
fn llamacpp_page() {
    let page = parse(
        r#"# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 512
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 128
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.0625
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
"#,
    )
    .unwrap();
    let v = ServerView::of(&page);
    assert_eq!(v.engine, Engine::LlamaCpp);
    assert_eq!(v.running, Some(2.0));
    assert_eq!(v.waiting, Some(1.0));
    assert_eq!(v.kv_usage, Some(0.0625));
    assert_eq!(v.prompt_tokens, Some(512.0));
    assert_eq!(v.generation_tokens, Some(128.0));
    assert_eq!(v.prefix_hits, None);
}

#[test]
fn tgi_page() {
    let page = parse(
        r#"# TYPE tgi_queue_size gauge
tgi_queue_size 6
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 16
# TYPE tgi_request_success counter
tgi_request_success 40
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{le="0.5"} 30
tgi_request_queue_duration_bucket{le="+Inf"} 40
tgi_request_queue_duration_sum 8
tgi_request_queue_duration_count 40
"#,
    )
    .unwrap();
    let v = ServerView::of(&page);
    assert_eq!(v.engine, Engine::Tgi);
    assert_eq!(v.waiting, Some(6.0));
    assert_eq!(v.running, Some(16.0));
    assert_eq!(v.requests_done, Some(40.0));
    assert_eq!(v.queue.unwrap().sum, 8.0);
}

#[test]
fn escapes_special_values_and_timestamps() {
    let page =
        parse("raw_metric{path=\"a\\\"b\\\\c\\nd\",x=\"1,2}\"} NaN 1700000000000\nraw_inf +Inf\n")
            .unwrap();
    let s = &page.family("raw_metric").unwrap().samples[0];
    assert_eq!(s.labels["path"], "a\"b\\c\nd");
    assert_eq!(s.labels["x"], "1,2}");
    assert!(s.value.is_nan());
    assert_eq!(page.family("raw_inf").unwrap().kind, Kind::Untyped);
    assert_eq!(page.sum("raw_inf"), Some(f64::INFINITY));
    assert_eq!(ServerView::of(&page).engine, Engine::Unknown);
}

#[test]
fn bad_lines_name_their_line() {
    let err = parse("# TYPE a gauge\na 1\na{x=\"1\" 2\n").unwrap_err();
    assert_eq!(err.line, 3);
    assert!(err.to_string().contains("/metrics line 3"), "{err}");
    let err = parse("ok 1\nb not_a_number\n").unwrap_err();
    assert_eq!(err.line, 2);
    assert!(err.message.contains("not_a_number"), "{err}");
}

#[test]
fn histogram_deltas_and_quantiles_follow_prometheus() {
    let page = |c1: u64, c2: u64, c3: u64, sum: f64| {
        format!(
            "# TYPE vllm:e2e_request_latency_seconds histogram\n\
             vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"0.5\"}} {c1}\n\
             vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"1.0\"}} {c2}\n\
             vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"2.0\"}} {c3}\n\
             vllm:e2e_request_latency_seconds_bucket{{engine=\"0\",le=\"+Inf\"}} {c3}\n\
             vllm:e2e_request_latency_seconds_sum{{engine=\"0\"}} {sum}\n\
             vllm:e2e_request_latency_seconds_count{{engine=\"0\"}} {c3}\n\
             vllm:e2e_request_latency_seconds_bucket{{engine=\"1\",le=\"0.5\"}} 0\n\
             vllm:e2e_request_latency_seconds_bucket{{engine=\"1\",le=\"1.0\"}} 0\n\
             vllm:e2e_request_latency_seconds_bucket{{engine=\"1\",le=\"2.0\"}} 0\n\
             vllm:e2e_request_latency_seconds_bucket{{engine=\"1\",le=\"+Inf\"}} 0\n\
             vllm:e2e_request_latency_seconds_sum{{engine=\"1\"}} 0\n\
             vllm:e2e_request_latency_seconds_count{{engine=\"1\"}} 0\n"
        )
    };
    let a = ServerView::of(&parse(&page(1, 1, 2, 1.5)).unwrap());
    let b = ServerView::of(&parse(&page(3, 11, 12, 11.5)).unwrap());
    let (ha, hb) = (a.e2e.unwrap(), b.e2e.unwrap());
    assert_eq!(hb.buckets, vec![(0.5, 3.0), (1.0, 11.0), (2.0, 12.0)]);
    let d = ha.delta(&hb);
    // 10 observations: 2 in (0, 0.5], 8 in (0.5, 1], none above.
    assert_eq!((d.count, d.sum), (10.0, 10.0));
    assert_eq!(d.buckets, vec![(0.5, 2.0), (1.0, 10.0), (2.0, 10.0)]);
    assert_eq!(d.mean_ms(), Some(1000.0));
    // Rank 5 lies 3/8 into (0.5, 1]: 687.5 ms; rank 1 is half-way into (0, 0.5].
    assert!((d.quantile_ms(0.5).unwrap() - 687.5).abs() < 1e-9);
    assert!((d.quantile_ms(0.1).unwrap() - 250.0).abs() < 1e-9);
    assert!((d.quantile_ms(1.0).unwrap() - 1000.0).abs() < 1e-9);
    // A restart (count went down) counts from zero.
    assert_eq!(hb.delta(&ha).count, 2.0);
    // Nothing observed: no quantile.
    assert_eq!(ha.delta(&ha).quantile_ms(0.5), None);
}
