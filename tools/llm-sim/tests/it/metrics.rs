//! `/metrics` parity with vLLM V1: the names a vLLM dashboard or router scrapes, the `model_name`
//! and `engine` labels, histogram shape, and prefix-cache counters agreeing with `cached_tokens`.

use crate::support::*;
use llm_sim::SimConfig;
use serde_json::{json, Value};

/// vLLM's metric names and histogram buckets as its source defines them (the fixture names the
/// source and version it was read from).
fn fixture() -> Value {
    serde_json::from_str(include_str!("../fixtures/vllm_metrics.json")).unwrap()
}

fn names(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

/// vLLM's `build_1_2_5_buckets(max_value)`: 1, 2, 5, 10, 20, 50, ... up to `max_value`.
fn one_two_five(max_value: u32) -> Vec<f64> {
    let mut out = Vec::new();
    let mut scale = 1u64;
    loop {
        for m in [1u64, 2, 5] {
            let v = m * scale;
            if v > u64::from(max_value) {
                return out;
            }
            out.push(v as f64);
        }
        scale *= 10;
    }
}

/// The finite `le` bounds of histogram `name` on a page, in order.
fn bucket_bounds(page: &str, name: &str) -> Vec<f64> {
    let prefix = format!("{name}_bucket{{");
    page.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| {
            l.split("le=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse::<f64>()
                .ok()
        })
        .filter(|v| v.is_finite())
        .collect()
}

#[tokio::test]
async fn histogram_buckets_and_names_match_vllms_source() {
    let f = fixture();
    let cfg = SimConfig {
        max_model_len: 20_000,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let r = post(
        &b,
        "/v1/completions",
        &completion_body(json!("bake tomo"), 3, false),
    )
    .await;
    assert_eq!(r.status(), 200);
    let page = metrics(&b).await;
    let labels: Vec<String> = names(&f, "labels");
    let lbl = format!("{}=\"llm-sim\",{}=\"0\"", labels[0], labels[1]);
    for (name, want) in f["histograms"].as_object().unwrap() {
        assert_eq!(type_of(&page, name).as_deref(), Some("histogram"), "{name}");
        let want: Vec<f64> = match want {
            Value::Array(a) => a.iter().map(|x| x.as_f64().unwrap()).collect(),
            Value::String(rule) => {
                assert_eq!(rule, "build_1_2_5_buckets(max_model_len)");
                one_two_five(20_000)
            }
            other => panic!("{name}: {other}"),
        };
        assert_eq!(bucket_bounds(&page, name), want, "{name}");
        assert!(
            page.contains(&format!("{name}_bucket{{{lbl},le=\"+Inf\"}}")),
            "{name}: +Inf bucket with the model_name and engine labels"
        );
    }
    for reason in names(&f, "request_success_reasons") {
        assert!(
            page.contains(&format!(
                "vllm:request_success_total{{{lbl},finished_reason=\"{reason}\"}}"
            )),
            "finished_reason {reason}"
        );
    }
    // The older per-token name carries the same observations as inter_token_latency_seconds.
    for part in ["_count", "_sum"] {
        assert_eq!(
            metric(&page, &format!("vllm:time_per_output_token_seconds{part}")),
            metric(&page, &format!("vllm:inter_token_latency_seconds{part}")),
        );
    }
    assert_eq!(metric(&page, "vllm:inter_token_latency_seconds_count"), 2.0);
    assert_eq!(
        metric(&page, "vllm:request_time_per_output_token_seconds_count"),
        1.0
    );
    server.shutdown().await;
}

fn type_of(page: &str, name: &str) -> Option<String> {
    let prefix = format!("# TYPE {name} ");
    page.lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
}

#[tokio::test]
async fn metric_names_labels_and_histograms_match_vllm() {
    let cfg = SimConfig {
        model_name: "sim-model".into(),
        ..SimConfig::default()
    };
    let max_model_len = cfg.max_model_len;
    let server = start_server(cfg).await;
    let b = server.base_url();
    // The same long prompt twice: the second request hits the prefix cache.
    let prompt = words(200, 0);
    let mut cached_sum = 0u64;
    let mut prompt_sum = 0u64;
    for n in [1u32, 5, 20] {
        let mut body = completion_body(json!(prompt), n, false);
        body["model"] = json!("sim-model");
        let v: serde_json::Value = post(&b, "/v1/completions", &body)
            .await
            .json()
            .await
            .unwrap();
        cached_sum += v["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0);
        prompt_sum += v["usage"]["prompt_tokens"].as_u64().unwrap();
    }
    let page = metrics(&b).await;
    let lbl = "model_name=\"sim-model\",engine=\"0\"";
    let f = fixture();
    for name in names(&f, "gauges") {
        assert_eq!(type_of(&page, &name).as_deref(), Some("gauge"), "{name}");
        if name == "vllm:cache_config_info" {
            // vLLM 0.32's labels: the cache settings and the engine, no model_name.
            assert!(
                page.contains("vllm:cache_config_info{block_size=\"16\","),
                "{name} labels"
            );
            continue;
        }
        assert!(page.contains(&format!("{name}{{{lbl}")), "{name} labels");
    }
    for name in names(&f, "counters") {
        let name = format!("{name}_total");
        assert_eq!(type_of(&page, &name).as_deref(), Some("counter"), "{name}");
        assert!(page.contains(&format!("{name}{{{lbl}")), "{name} labels");
    }
    // Every finished request is observed once in the request-level histograms.
    for name in [
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens",
    ] {
        assert_eq!(metric(&page, &format!("{name}_count")), 3.0, "{name}");
    }
    assert_eq!(metric(&page, "vllm:request_generation_tokens_sum"), 26.0);
    assert_eq!(
        metric(&page, "vllm:request_prompt_tokens_sum"),
        prompt_sum as f64
    );
    // Inter-token latencies: one per token after the first; the per-request TPOT only for
    // requests of 2+ tokens.
    assert_eq!(
        metric(&page, "vllm:inter_token_latency_seconds_count"),
        23.0
    );
    assert_eq!(
        metric(&page, "vllm:request_time_per_output_token_seconds_count"),
        2.0
    );
    // Token buckets stop at max_model_len like vLLM's build_1_2_5_buckets.
    let last_le = page
        .lines()
        .filter(|l| l.starts_with("vllm:request_prompt_tokens_bucket"))
        .filter_map(|l| {
            l.split("le=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse::<f64>()
                .ok()
        })
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    assert!(
        last_le <= f64::from(max_model_len) && last_le * 2.5 > f64::from(max_model_len),
        "{last_le} {max_model_len}"
    );
    // The ttft buckets are cumulative and end at the count.
    let ttft_inf = metric_with(
        &page,
        "vllm:time_to_first_token_seconds_bucket",
        "le=\"+Inf\"",
    );
    assert_eq!(ttft_inf, 3.0);
    // Prefix-cache counters count tokens as vLLM does: they agree with the clients' usage.
    assert!(cached_sum > 0, "second request should hit the cache");
    assert_eq!(
        metric(&page, "vllm:prefix_cache_hits_total"),
        cached_sum as f64
    );
    assert_eq!(
        metric(&page, "vllm:gpu_prefix_cache_hits_total"),
        cached_sum as f64
    );
    assert_eq!(
        metric(&page, "vllm:prefix_cache_queries_total"),
        prompt_sum as f64
    );
    assert_eq!(
        metric(&page, "vllm:gpu_prefix_cache_queries_total"),
        prompt_sum as f64
    );
    assert_eq!(
        metric(&page, "vllm:kv_cache_usage_perc"),
        metric(&page, "vllm:gpu_cache_usage_perc")
    );
    server.shutdown().await;
}
