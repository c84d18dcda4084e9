//! vLLM V1's histogram bucket bounds (`vllm/v1/metrics/loggers.py`; llm-sim's
//! `tests/fixtures/vllm_metrics.json` transcribes them): llm-sim's `GET /metrics` renders its
//! `vllm:*` histograms with them, and request-sim's live client metrics use the latency ones so
//! a dashboard puts the client's histograms next to the server's.

/// Bounds (seconds) of `vllm:time_to_first_token_seconds`.
pub const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// Bounds (seconds) of `vllm:inter_token_latency_seconds`, its older name
/// `vllm:time_per_output_token_seconds`, and `vllm:request_time_per_output_token_seconds`.
pub const ITL_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// Bounds (seconds) of the request-phase latencies: `vllm:e2e_request_latency_seconds`,
/// `vllm:request_queue_time_seconds`, `vllm:request_prefill_time_seconds`,
/// `vllm:request_decode_time_seconds` and `vllm:request_inference_time_seconds`.
pub const REQUEST_LATENCY_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// Bounds (tokens) of `vllm:iteration_tokens_total`.
pub const ITERATION_TOKEN_BUCKETS: &[f64] = &[
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
];
