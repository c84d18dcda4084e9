//! The per-request latency metrics, one row each in [`SPECS`]: how a metric's values are taken
//! from a record and accumulated, its summary key, label, title and unit, its `requests.csv`
//! column, its place on the console (and so in `report.html`), and its names in vLLM's and
//! AIPerf's result files. [`Latencies`]: their statistics, (de)serialized flat with vLLM's
//! keys; [`LatencyAcc`]: their accumulation.
//!
//! A new per-request latency: a variant of [`Metric`] and its row of [`SPECS`]; when no record
//! field holds its value yet, that field (`record/mod.rs`, filled in `run/task.rs::record`).
//! The summary, the console, the HTML report, `requests.csv` / `results.xlsx` and the AIPerf
//! export follow from the row.

use serde::{Deserialize, Serialize};

use super::per_record::{record_tpot, split_ttfa, ttfa_of};
use super::samples::{MetricStats, QuantizedSamples, Samples};
use crate::record::Record;

/// A latency metric: a row of [`SPECS`], in the order of the summary's JSON keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    Ttft,
    Tpot,
    Itl,
    E2el,
    /// Time to first content token (differs from TTFT when the first tokens carry no text).
    Ttfc,
    /// Time to the first answer token (after thinking or a tool call).
    Ttfa,
    /// Time to the second token-bearing chunk.
    Ttst,
}

/// How a metric's values are taken from a completed request.
#[derive(Debug, Clone, Copy)]
pub enum Take {
    /// One value per request, from its record (`None`: the request has none); every value is
    /// kept, the statistics are exact.
    Request(fn(&Record) -> Option<f64>),
    /// One value per gap between token-bearing chunks (the engine's list, or the record's
    /// `itl_ms`), quantised to 1 µs ([`QuantizedSamples`]).
    Gaps,
}

/// Where the console table (and `report.html`, which shows the console's pieces) has a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// In vLLM's result table: its title, mean, median and percentile rows (`n/a` without
    /// values).
    Vllm,
    /// A section of its own after vLLM's rows (title, mean, median, percentiles), when some
    /// completed request had a value.
    Own,
    /// By the section it belongs to (TTFC beside TTFT when they differ, TTFA under "Reasoning
    /// and tool calls").
    InSection,
}

/// A metric's name in AIPerf's files and how AIPerf's value is taken from a record (AIPerf's
/// definition, which may differ from the metric's own: its TTST is the gap after the first
/// token).
#[derive(Debug, Clone, Copy)]
pub struct Aiperf {
    /// The metric tag (`time_to_first_token`).
    pub tag: &'static str,
    /// The CSV header (`Time to First Token`).
    pub header: &'static str,
    pub take: Take,
}

/// Everything about one latency metric.
#[derive(Debug, Clone, Copy)]
pub struct MetricSpec {
    pub metric: Metric,
    /// The name in JSON keys (`ttft` in `p99_ttft_ms`).
    pub key: &'static str,
    /// The console label (`TTFT` in `Mean TTFT (ms):`).
    pub label: &'static str,
    /// The console section title.
    pub title: &'static str,
    /// The unit of its values, the suffix of its JSON keys.
    pub unit: &'static str,
    pub take: Take,
    /// Its column in `requests.csv` and the Details sheet (`None`: none, ITL's values are
    /// summarised as `itl_count`).
    pub column: Option<&'static str>,
    pub shown: Shown,
    /// In `vllm bench serve`'s results (under the same key).
    pub vllm: bool,
    pub aiperf: Option<Aiperf>,
}

/// The metrics, in the order of the summary's JSON keys ([`Metric`] order).
pub const SPECS: [MetricSpec; 7] = [
    MetricSpec {
        metric: Metric::Ttft,
        key: "ttft",
        label: "TTFT",
        title: "Time to First Token",
        unit: "ms",
        take: Take::Request(|r| r.ttft_ms),
        column: Some("ttft_ms"),
        shown: Shown::Vllm,
        vllm: true,
        aiperf: Some(Aiperf {
            tag: "time_to_first_token",
            header: "Time to First Token",
            take: Take::Request(|r| r.ttft_ms),
        }),
    },
    MetricSpec {
        metric: Metric::Tpot,
        key: "tpot",
        label: "TPOT",
        title: "Time per Output Token (excl. 1st token)",
        unit: "ms",
        take: Take::Request(record_tpot),
        column: Some("tpot_ms"),
        shown: Shown::Vllm,
        vllm: true,
        // AIPerf's inter-token latency is vLLM's TPOT: (E2EL - TTFT) / (output tokens - 1).
        aiperf: Some(Aiperf {
            tag: "inter_token_latency",
            header: "Inter Token Latency",
            take: Take::Request(record_tpot),
        }),
    },
    MetricSpec {
        metric: Metric::Itl,
        key: "itl",
        label: "ITL",
        title: "Inter-token Latency",
        unit: "ms",
        take: Take::Gaps,
        column: None,
        shown: Shown::Vllm,
        vllm: true,
        aiperf: Some(Aiperf {
            tag: "inter_chunk_latency",
            header: "Inter Chunk Latency",
            take: Take::Gaps,
        }),
    },
    MetricSpec {
        metric: Metric::E2el,
        key: "e2el",
        label: "E2EL",
        title: "End-to-end Latency",
        unit: "ms",
        take: Take::Request(|r| r.e2e_ms),
        column: Some("e2e_ms"),
        shown: Shown::Vllm,
        vllm: true,
        aiperf: Some(Aiperf {
            tag: "request_latency",
            header: "Request Latency",
            take: Take::Request(|r| r.e2e_ms),
        }),
    },
    MetricSpec {
        metric: Metric::Ttfc,
        key: "ttfc",
        label: "TTFC",
        title: "Time to First Content Token",
        unit: "ms",
        take: Take::Request(|r| r.ttfc_ms),
        column: Some("ttfc_ms"),
        shown: Shown::InSection,
        vllm: false,
        aiperf: None,
    },
    MetricSpec {
        metric: Metric::Ttfa,
        key: "ttfa",
        label: "TTFA",
        title: "Time to First Answer Token",
        unit: "ms",
        // Over the answers that carried thinking or a tool call (empty for a run without):
        // the earlier of their first answer text and first tool call.
        take: Take::Request(split_ttfa),
        column: Some("ttfa_ms"),
        shown: Shown::InSection,
        vllm: false,
        // AIPerf's time to the first non-reasoning token, over every answer: what the `ttfa`
        // goodput limit judges (the TTFT of an answer without thinking or a tool call).
        aiperf: Some(Aiperf {
            tag: "time_to_first_output_token",
            header: "Time to First Output Token",
            take: Take::Request(ttfa_of),
        }),
    },
    MetricSpec {
        metric: Metric::Ttst,
        key: "ttst",
        label: "TTST",
        title: "Time to Second Token",
        unit: "ms",
        take: Take::Request(|r| r.ttst_ms),
        column: Some("ttst_ms"),
        shown: Shown::Own,
        vllm: false,
        // AIPerf's TTST is the time from the first token to the second.
        aiperf: Some(Aiperf {
            tag: "time_to_second_token",
            header: "Time to Second Token",
            take: Take::Request(|r| Some(r.ttst_ms? - r.ttft_ms?)),
        }),
    },
];

/// Number of metrics.
pub const COUNT: usize = SPECS.len();

impl Metric {
    /// Every metric, in the order of the summary's JSON keys.
    pub const ALL: [Metric; COUNT] = {
        let mut all = [Metric::Ttft; COUNT];
        let mut i = 0;
        while i < COUNT {
            all[i] = SPECS[i].metric;
            i += 1;
        }
        all
    };

    /// Its row of [`SPECS`].
    pub fn spec(self) -> &'static MetricSpec {
        &SPECS[self as usize]
    }

    /// vLLM's metrics, in the order of its result table.
    pub fn vllm() -> impl Iterator<Item = Metric> {
        Metric::ALL.into_iter().filter(|m| m.spec().vllm)
    }

    /// The metrics shown as `shown` on the console.
    pub fn shown(shown: Shown) -> impl Iterator<Item = Metric> {
        Metric::ALL
            .into_iter()
            .filter(move |m| m.spec().shown == shown)
    }

    /// The name in JSON keys (`ttft` in `p99_ttft_ms`).
    pub fn key(self) -> &'static str {
        self.spec().key
    }

    /// vLLM's label (`TTFT` in `Mean TTFT (ms):`).
    pub fn label(self) -> &'static str {
        self.spec().label
    }

    /// vLLM's section title.
    pub fn title(self) -> &'static str {
        self.spec().title
    }

    /// The unit of its values (`ms`).
    pub fn unit(self) -> &'static str {
        self.spec().unit
    }

    /// The metric's value of a request that has one value (`None` for ITL, one value per
    /// gap, and for a request without a value).
    pub fn of(self, rec: &Record) -> Option<f64> {
        match self.spec().take {
            Take::Request(f) => f(rec),
            Take::Gaps => None,
        }
    }

    /// The metric whose JSON name is `key`.
    pub fn from_key(key: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.key() == key)
    }
}

/// Statistics of the latency metrics, one per [`Metric`], serialized flat with vLLM's keys
/// (`mean_ttft_ms`, `median_ttft_ms`, `std_ttft_ms`, `p99_ttft_ms`, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies {
    stats: [MetricStats; COUNT],
}

impl Latencies {
    /// The statistics of `metric`.
    pub fn get(&self, metric: Metric) -> &MetricStats {
        &self.stats[metric as usize]
    }
    /// The statistics of `metric`, to change.
    pub fn get_mut(&mut self, metric: Metric) -> &mut MetricStats {
        &mut self.stats[metric as usize]
    }
}

impl std::ops::Index<Metric> for Latencies {
    type Output = MetricStats;
    fn index(&self, metric: Metric) -> &MetricStats {
        self.get(metric)
    }
}

impl std::ops::IndexMut<Metric> for Latencies {
    fn index_mut(&mut self, metric: Metric) -> &mut MetricStats {
        self.get_mut(metric)
    }
}

/// A metric's values as they arrive, stored as its [`Take`] says.
#[derive(Debug, Clone)]
enum Store {
    Request(fn(&Record) -> Option<f64>, Samples),
    Gaps(QuantizedSamples),
}

/// The values of every latency metric over the completed requests added.
#[derive(Debug, Clone)]
pub struct LatencyAcc {
    /// One per metric, in [`SPECS`] order.
    stores: Vec<Store>,
}

impl Default for LatencyAcc {
    fn default() -> Self {
        let stores = SPECS
            .iter()
            .map(|s| match s.take {
                Take::Request(f) => Store::Request(f, Samples::default()),
                Take::Gaps => Store::Gaps(QuantizedSamples::default()),
            })
            .collect();
        LatencyAcc { stores }
    }
}

impl LatencyAcc {
    /// Add a completed request: its record and its gaps between token-bearing chunks.
    pub fn add(&mut self, rec: &Record, gaps: &[f64]) {
        for store in &mut self.stores {
            match store {
                Store::Request(f, s) => {
                    if let Some(v) = f(rec) {
                        s.push(v);
                    }
                }
                Store::Gaps(q) => gaps.iter().for_each(|v| q.push(*v)),
            }
        }
    }

    /// Whether `metric` has no value yet.
    pub fn is_empty(&self, metric: Metric) -> bool {
        match &self.stores[metric as usize] {
            Store::Request(_, s) => s.is_empty(),
            Store::Gaps(q) => q.is_empty(),
        }
    }

    /// The statistics at `percentiles`.
    pub fn finish(&self, percentiles: &[f64]) -> Latencies {
        let mut l = Latencies::default();
        for (metric, store) in Metric::ALL.into_iter().zip(&self.stores) {
            l[metric] = match store {
                Store::Request(_, s) => s.stats(percentiles),
                Store::Gaps(q) => q.stats(percentiles),
            };
        }
        l
    }
}

/// vLLM's spelling of a percentile in keys and labels: `99`, `99.9`.
pub fn p_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

impl Serialize for Latencies {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = ser.serialize_map(None)?;
        for metric in Metric::ALL {
            let (name, unit, m) = (metric.key(), metric.unit(), self.get(metric));
            // Statistics of no values are unknown: null, never 0.
            let v = |x: f64| (m.count > 0).then(|| finite(x));
            map.serialize_entry(&format!("count_{name}"), &m.count)?;
            map.serialize_entry(&format!("mean_{name}_{unit}"), &v(m.mean))?;
            map.serialize_entry(&format!("median_{name}_{unit}"), &v(m.median))?;
            map.serialize_entry(&format!("std_{name}_{unit}"), &v(m.std))?;
            map.serialize_entry(&format!("min_{name}_{unit}"), &v(m.min))?;
            map.serialize_entry(&format!("max_{name}_{unit}"), &v(m.max))?;
            for (p, x) in &m.percentiles {
                map.serialize_entry(&format!("p{}_{name}_{unit}", p_word(*p)), &v(*x))?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Latencies {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Latencies;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("flat latency statistics (mean_ttft_ms, p99_ttft_ms, ...)")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Latencies, A::Error> {
                let mut l = Latencies::default();
                // Metrics with a `count_` key, and metrics with a value (vLLM's result JSON
                // has values without counts).
                let mut counted = Vec::new();
                let mut valued = Vec::new();
                while let Some(key) = a.next_key::<String>()? {
                    match parse_metric_key(&key) {
                        Some((stat, metric)) => {
                            // null: unknown (no values), kept as the zeros of no values.
                            let Some(v) = a.next_value::<Option<f64>>()? else {
                                if let Stat::P(p) = stat {
                                    l.get_mut(metric).percentiles.push((p, 0.0));
                                }
                                continue;
                            };
                            if matches!(stat, Stat::Count) {
                                counted.push(metric);
                            } else {
                                valued.push(metric);
                            }
                            let m = l.get_mut(metric);
                            match stat {
                                Stat::Count => m.count = v as u64,
                                Stat::Mean => m.mean = v,
                                Stat::Median => m.median = v,
                                Stat::Std => m.std = v,
                                Stat::Min => m.min = v,
                                Stat::Max => m.max = v,
                                Stat::P(p) => m.percentiles.push((p, v)),
                            }
                        }
                        None => {
                            a.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                for metric in Metric::ALL {
                    let m = l.get_mut(metric);
                    m.percentiles.sort_by(|x, y| x.0.total_cmp(&y.0));
                    // Values without a count (vLLM's JSON): known, the count not given.
                    if m.count == 0 && !counted.contains(&metric) && valued.contains(&metric) {
                        m.count = 1;
                    }
                }
                Ok(l)
            }
        }
        de.deserialize_map(V)
    }
}

enum Stat {
    Count,
    Mean,
    Median,
    Std,
    Min,
    Max,
    P(f64),
}

fn parse_metric_key(key: &str) -> Option<(Stat, Metric)> {
    if let Some(name) = key.strip_prefix("count_") {
        return Metric::from_key(name).map(|m| (Stat::Count, m));
    }
    let (stat, rest) = key.split_once('_')?;
    let metric = Metric::ALL
        .into_iter()
        .find(|m| rest.strip_prefix(m.key()).and_then(|u| u.strip_prefix('_')) == Some(m.unit()))?;
    let stat = match stat {
        "mean" => Stat::Mean,
        "median" => Stat::Median,
        "std" => Stat::Std,
        "min" => Stat::Min,
        "max" => Stat::Max,
        s => Stat::P(s.strip_prefix('p')?.parse().ok()?),
    };
    Some((stat, metric))
}

fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_in_metric_order() {
        for (i, m) in Metric::ALL.into_iter().enumerate() {
            assert_eq!(m as usize, i);
            assert_eq!(m.spec().metric, m);
        }
        let vllm: Vec<Metric> = Metric::vllm().collect();
        assert_eq!(
            vllm,
            [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el]
        );
        // Keys, columns and AIPerf tags are each one metric's.
        let mut names: Vec<&str> = SPECS.iter().map(|s| s.key).collect();
        names.extend(SPECS.iter().filter_map(|s| s.column));
        names.extend(SPECS.iter().filter_map(|s| s.aiperf.map(|a| a.tag)));
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn keys_round_trip() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_key(m.key()), Some(m));
        }
        assert_eq!(Metric::from_key("p99"), None);
        let mut l = Latencies::default();
        l[Metric::Itl].count = 3;
        l[Metric::Itl].percentiles = vec![(99.9, 1.5)];
        let v = serde_json::to_value(&l).unwrap();
        assert_eq!(v["count_itl"], 3);
        assert_eq!(v["p99.9_itl_ms"], 1.5);
        let back: Latencies = serde_json::from_value(v).unwrap();
        assert_eq!(back, l);
    }
}
