//! AIPerf's aggregates: `profile_export_aiperf.json` (AIPerf 0.13's `JsonExportData`, schema
//! 1.4: each metric tag → a `JsonMetricResult` `{unit, avg, p1 … p99, min, max, std, count,
//! sum}`, the scalar ones `{unit, avg}`) and `profile_export_aiperf.csv` (its exporter's two
//! sections: the per-request metrics with `avg,min,max,sum,p1,…,p99,std`, then `Metric,Value`
//! rows; floats with two decimals, rows sorted by tag).
//!
//! The distributions are those of every per-request metric of `profile_export.jsonl`
//! ([`super::aiperf::tags`]), computed from its values with request-sim's own statistics
//! ([`crate::stats::stats_of`], numpy's linear percentiles, AIPerf's method too) over the
//! completed requests, so `time_to_first_token`, `inter_token_latency` (request-sim's TPOT),
//! `request_latency` (E2EL) and `inter_chunk_latency` (ITL) equal the summary's. The scalars
//! (throughputs, counts, duration) are the summary's.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Map, Value};

use super::aiperf::{metrics, tags, ErrorDetails};
use super::common::write_file;
use crate::record::{Record, Status};
use crate::stats::samples::stats_of;
use crate::stats::{MetricStats, Summary};

/// AIPerf's file names.
pub const JSON_FILE: &str = "profile_export_aiperf.json";
pub const CSV_FILE: &str = "profile_export_aiperf.csv";

/// AIPerf's `JsonExportData.SCHEMA_VERSION` this layout follows.
const SCHEMA_VERSION: &str = "1.4";

/// AIPerf's percentiles (`STAT_KEYS`).
const PERCENTILES: [f64; 9] = [1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0];

/// One aggregated metric.
#[derive(Debug, Clone)]
pub enum Stat {
    /// A distribution over requests, with its sum.
    Dist(MetricStats, f64),
    /// One value for the run.
    Scalar(f64),
}

/// Every aggregated metric: tag, header, unit, value.
#[derive(Debug, Clone)]
pub struct Aggregates {
    pub metrics: Vec<(&'static str, &'static str, &'static str, Stat)>,
    /// `ErrorDetailsCount`s: each kind of error and how many requests had it.
    errors: Vec<(Value, usize)>,
}

impl Aggregates {
    /// The aggregates of a run: distributions from the completed records, scalars from the
    /// summary.
    pub fn of(summary: &Summary, records: &[Record]) -> Aggregates {
        let ok: Vec<Map<String, Value>> = records
            .iter()
            .filter(|r| r.status == Status::Ok && !r.is_warmup())
            .map(metrics)
            .collect();
        let mut out = Vec::new();
        // Every per-request metric of `profile_export.jsonl`, from the same values.
        for (tag, header, unit) in tags() {
            let values: Vec<f64> = ok
                .iter()
                .filter_map(|m| m.get(tag))
                .flat_map(|v| match &v["value"] {
                    Value::Array(a) => a.iter().filter_map(Value::as_f64).collect(),
                    x => x.as_f64().into_iter().collect::<Vec<f64>>(),
                })
                .collect();
            if values.is_empty() {
                continue;
            }
            let sum = values.iter().sum();
            out.push((
                tag,
                header,
                unit,
                Stat::Dist(stats_of(&values, &PERCENTILES), sum),
            ));
        }
        out.extend(scalars(summary));
        Aggregates {
            metrics: out,
            errors: error_counts(records),
        }
    }

    /// The stat of `tag`, if aggregated.
    pub fn get(&self, tag: &str) -> Option<&Stat> {
        self.metrics.iter().find(|m| m.0 == tag).map(|m| &m.3)
    }

    /// `profile_export_aiperf.json`.
    pub fn write_json(&self, path: &Path, summary: &Summary) -> crate::Result<()> {
        let mut top = Map::new();
        top.insert("schema_version".into(), json!(SCHEMA_VERSION));
        top.insert("aiperf_version".into(), Value::Null);
        top.insert(
            "generator".into(),
            json!(format!("request-sim {}", summary.run.tool_version)),
        );
        for (tag, _, unit, stat) in &self.metrics {
            top.insert((*tag).into(), metric_json(unit, stat));
        }
        top.insert("was_cancelled".into(), json!(summary.status.cancelled > 0));
        top.insert("is_complete".into(), json!(summary.counts_add_up));
        let errors: Vec<Value> = self
            .errors
            .iter()
            .map(|(e, n)| json!({ "error_details": e, "count": n }))
            .collect();
        top.insert("error_summary".into(), json!(errors));
        let (start, end) = run_times(summary);
        top.insert("start_time".into(), json!(start));
        top.insert("end_time".into(), json!(end));
        let text = serde_json::to_string_pretty(&Value::Object(top))
            .map_err(|e| crate::Error::internal(format!("{JSON_FILE}: {e}")))?;
        write_file(path, text.as_bytes())
    }

    /// `profile_export_aiperf.csv`.
    pub fn write_csv(&self, path: &Path) -> crate::Result<()> {
        let mut dists: Vec<_> = self
            .metrics
            .iter()
            .filter(|m| matches!(m.3, Stat::Dist(..)))
            .collect();
        dists.sort_by_key(|m| m.0);
        let mut scalars: Vec<_> = self
            .metrics
            .iter()
            .filter(|m| matches!(m.3, Stat::Scalar(_)))
            .collect();
        scalars.sort_by_key(|m| m.0);
        let mut s = String::from("Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\n");
        for (_, header, unit, stat) in dists {
            if let Stat::Dist(d, sum) = stat {
                let mut row = vec![csv_name(header, unit), two(d.mean), two(d.min), two(d.max)];
                row.push(two(*sum));
                row.extend(
                    PERCENTILES
                        .iter()
                        .map(|p| two(d.percentile(*p).unwrap_or(0.0))),
                );
                row.push(two(d.std));
                let _ = writeln!(s, "{}", row.join(","));
            }
        }
        s.push_str("\nMetric,Value\n");
        for (_, header, unit, stat) in scalars {
            if let Stat::Scalar(v) = stat {
                let _ = writeln!(s, "{},{}", csv_name(header, unit), two(*v));
            }
        }
        write_file(path, s.as_bytes())
    }
}

/// The run-level values, from the summary.
fn scalars(s: &Summary) -> Vec<(&'static str, &'static str, &'static str, Stat)> {
    let mut v = vec![
        (
            "request_throughput",
            "Request Throughput",
            "requests/sec",
            s.request_throughput,
        ),
        (
            "request_count",
            "Request Count",
            "requests",
            s.completed as f64,
        ),
        (
            "error_request_count",
            "Error Request Count",
            "requests",
            s.failed as f64,
        ),
        (
            "output_token_throughput",
            "Output Token Throughput",
            "tokens/sec",
            s.output_throughput,
        ),
        (
            "total_token_throughput",
            "Total Token Throughput",
            "tokens/sec",
            s.total_token_throughput,
        ),
        (
            "input_token_throughput",
            "Input Token Throughput",
            "tokens/sec",
            s.total_token_throughput - s.output_throughput,
        ),
        (
            "total_output_tokens",
            "Total Output Tokens",
            "tokens",
            s.total_output_tokens as f64,
        ),
        (
            "total_osl",
            "Total Output Sequence Length",
            "tokens",
            s.total_output_tokens as f64,
        ),
        (
            "total_isl",
            "Total Input Sequence Length",
            "tokens",
            s.total_input_tokens as f64,
        ),
        (
            "benchmark_duration",
            "Benchmark Duration",
            "sec",
            s.duration_s,
        ),
    ];
    if let (Some(g), Some(n)) = (s.request_goodput, s.good_requests) {
        v.push(("goodput", "Goodput", "requests/sec", g));
        v.push((
            "good_request_count",
            "Good Request Count",
            "requests",
            n as f64,
        ));
    }
    v.into_iter()
        .map(|(t, h, u, x)| (t, h, u, Stat::Scalar(x)))
        .collect()
}

/// A `JsonMetricResult`.
fn metric_json(unit: &str, stat: &Stat) -> Value {
    match stat {
        Stat::Scalar(v) => json!({ "unit": unit, "avg": v }),
        Stat::Dist(d, sum) => {
            let mut m = Map::new();
            m.insert("unit".into(), json!(unit));
            m.insert("avg".into(), json!(d.mean));
            for p in PERCENTILES {
                m.insert(format!("p{p}"), json!(d.percentile(p)));
            }
            m.insert("min".into(), json!(d.min));
            m.insert("max".into(), json!(d.max));
            m.insert("std".into(), json!(d.std));
            m.insert("count".into(), json!(d.count));
            m.insert("sum".into(), json!(sum));
            Value::Object(m)
        }
    }
}

/// AIPerf's CSV metric name: the header with its unit, except counts and requests.
fn csv_name(header: &str, unit: &str) -> String {
    if matches!(unit, "count" | "requests") {
        header.to_string()
    } else {
        format!("{header} ({unit})")
    }
}

/// AIPerf's CSV number: two decimals.
fn two(x: f64) -> String {
    format!("{x:.2}")
}

/// Each kind of error (`ErrorDetails`, keyed by code, type and message as AIPerf's equality)
/// and its count, most frequent first.
fn error_counts(records: &[Record]) -> Vec<(Value, usize)> {
    let mut counts: std::collections::BTreeMap<(Option<u16>, &str, String), usize> =
        Default::default();
    for e in records
        .iter()
        .filter(|r| !r.is_warmup())
        .filter_map(ErrorDetails::of)
    {
        *counts.entry((e.code, e.kind, e.message)).or_insert(0) += 1;
    }
    let mut v: Vec<(Value, usize)> = counts
        .into_iter()
        .map(|((code, kind, message), n)| {
            (json!({ "code": code, "type": kind, "message": message }), n)
        })
        .collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    v
}

/// The run's start and end as local-free ISO 8601 date-times (AIPerf writes naive
/// `datetime`s), `None` when the summary does not know its start.
fn run_times(s: &Summary) -> (Option<String>, Option<String>) {
    let Some(start) = s
        .run
        .started_at
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    else {
        return (None, None);
    };
    let end = jiff::SignedDuration::try_from_secs_f64(s.duration_s)
        .ok()
        .and_then(|d| start.checked_add(d).ok());
    let naive = |t: jiff::Timestamp| t.to_zoned(jiff::tz::TimeZone::UTC).datetime().to_string();
    (Some(naive(start)), end.map(naive))
}
