//! The JSON of `vllm bench serve --save-result --save-detailed` (`vllm/benchmarks/serve.py`:
//! the configuration keys `date`, `endpoint_type`, `backend`, `label`, `model_id`,
//! `tokenizer_id`, `num_prompts`, `request_rate`, `burstiness`, `max_concurrency`; the result
//! keys `duration`, `completed`, `failed`, `total_input_tokens`, `total_output_tokens`,
//! `request_throughput`, `request_goodput`, `output_throughput`, `total_token_throughput`,
//! `max_output_tokens_per_s`, `max_concurrent_requests`; `mean_/median_/std_/pN_` of
//! `ttft`, `tpot`, `itl`, `e2el` in ms; and per request, in replay order, `input_lens`,
//! `output_lens`, `ttfts`, `itls`, `latencies`, `start_times` (seconds), `errors`).
//!
//! The headline values are the summary's (`null` when unknown, where vLLM writes 0: a latency
//! without values, the peak output tokens/s without every token's time); `request_rate` is `"trace"`-timed, written as vLLM
//! writes an unpaced run: `"inf"`. A per-request value vLLM leaves at its default for a failed
//! request is that default here too (`ttft` 0.0, `itl` [], `latency` 0.0, output length 0).

use std::path::Path;

use serde_json::{json, Map, Value};

use super::common::write_file;
use crate::record::{Record, Status};
use crate::stats::latency::Metric;
use crate::stats::per_record::output_tokens_of;
use crate::stats::{MetricStats, Summary};

/// The vLLM result: config keys, headline metrics, per-request lists.
pub fn result_json(summary: &Summary, records: &[Record]) -> Value {
    let s = summary;
    let model = s.run.server.model.clone();
    let mut m = Map::new();
    let date = s
        .run
        .started_at
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| t.strftime("%Y%m%d-%H%M%S").to_string());
    m.insert("date".into(), json!(date));
    m.insert("endpoint_type".into(), json!(backend(s)));
    m.insert("backend".into(), json!(backend(s)));
    m.insert("label".into(), Value::Null);
    m.insert("model_id".into(), json!(model));
    m.insert("tokenizer_id".into(), json!(model));
    m.insert("num_prompts".into(), json!(s.scheduled));
    m.insert("request_rate".into(), json!("inf"));
    m.insert("burstiness".into(), json!(1.0));
    m.insert("max_concurrency".into(), Value::Null);
    m.insert("duration".into(), json!(s.duration_s));
    m.insert("completed".into(), json!(s.completed));
    m.insert("failed".into(), json!(s.failed));
    m.insert("total_input_tokens".into(), json!(s.total_input_tokens));
    m.insert("total_output_tokens".into(), json!(s.total_output_tokens));
    m.insert("request_throughput".into(), json!(s.request_throughput));
    m.insert("request_goodput".into(), json!(s.request_goodput));
    m.insert("output_throughput".into(), json!(s.output_throughput));
    m.insert(
        "total_token_throughput".into(),
        json!(s.total_token_throughput),
    );
    m.insert(
        "max_output_tokens_per_s".into(),
        json!(s.max_output_tokens_per_s),
    );
    m.insert(
        "max_concurrent_requests".into(),
        json!(s.max_concurrent_requests),
    );
    per_request(&mut m, records);
    for metric in Metric::vllm() {
        latency(&mut m, metric.key(), s.latency.get(metric));
    }
    Value::Object(m)
}

/// vLLM's backend name for the run's API.
fn backend(s: &Summary) -> &'static str {
    s.run
        .server
        .api
        .map_or("openai", crate::backend::Api::vllm_bench_backend)
}

/// `mean_KEY_ms`, `median_KEY_ms`, `std_KEY_ms`, `pN_KEY_ms` (vLLM's names for percentile N:
/// `p99`, `p99.9`); `null` without values (vLLM writes 0, which reads as a measurement).
fn latency(m: &mut Map<String, Value>, key: &str, st: &MetricStats) {
    let v = |x: f64| json!(st.known().then_some(x));
    m.insert(format!("mean_{key}_ms"), v(st.mean));
    m.insert(format!("median_{key}_ms"), v(st.median));
    m.insert(format!("std_{key}_ms"), v(st.std));
    for (p, x) in &st.percentiles {
        m.insert(format!("p{p}_{key}_ms"), v(*x));
    }
}

/// The per-request lists, in replay order (seconds, as vLLM keeps them).
fn per_request(m: &mut Map<String, Value>, records: &[Record]) {
    let recs: Vec<&Record> = records
        .iter()
        .filter(|r| r.status != Status::DryRun)
        .collect();
    let ok = |r: &Record| r.status == Status::Ok;
    let s = |ms: Option<f64>| ms.map_or(0.0, |x| x / 1e3);
    let list = |f: &dyn Fn(&Record) -> Value| Value::Array(recs.iter().map(|r| f(r)).collect());
    m.insert("input_lens".into(), list(&|r| json!(r.input_length)));
    m.insert(
        "output_lens".into(),
        list(&|r| json!(if ok(r) { output_tokens_of(r) } else { 0 })),
    );
    m.insert(
        "ttfts".into(),
        list(&|r| json!(s(r.ttft_ms.filter(|_| ok(r))))),
    );
    m.insert(
        "itls".into(),
        list(&|r| {
            let gaps: Vec<f64> = match (&r.itl_ms, ok(r)) {
                (Some(g), true) => g.iter().map(|x| x / 1e3).collect(),
                _ => Vec::new(),
            };
            json!(gaps)
        }),
    );
    m.insert(
        "latencies".into(),
        list(&|r| json!(s(r.e2e_ms.filter(|_| ok(r))))),
    );
    m.insert("start_times".into(), list(&|r| json!(s(r.sent_ms))));
    m.insert(
        "errors".into(),
        list(&|r| {
            json!(if ok(r) {
                String::new()
            } else {
                r.error.clone().unwrap_or_else(|| r.status.as_str().into())
            })
        }),
    );
}

/// Write the vLLM-shaped result to `path`.
pub fn write(path: &Path, summary: &Summary, records: &[Record]) -> crate::Result<()> {
    let text = serde_json::to_string(&result_json(summary, records))
        .map_err(|e| crate::Error::internal(format!("{}: {e}", path.display())))?;
    write_file(path, text.as_bytes())
}
