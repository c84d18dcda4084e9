//! [`Latencies`]: the latency metrics' statistics, (de)serialized flat with vLLM's keys.

use serde::{Deserialize, Serialize};

use super::samples::MetricStats;

/// Statistics of the latency metrics, serialized flat with vLLM's keys
/// (`mean_ttft_ms`, `median_ttft_ms`, `std_ttft_ms`, `p99_ttft_ms`, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latencies {
    pub ttft: MetricStats,
    pub tpot: MetricStats,
    pub itl: MetricStats,
    pub e2el: MetricStats,
    /// Time to first content token (differs from TTFT for role-only first chunks).
    pub ttfc: MetricStats,
}

/// Metric names in [`Latencies`], in display order, with vLLM's labels.
pub const METRICS: [(&str, &str, &str); 4] = [
    ("ttft", "TTFT", "Time to First Token"),
    ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
    ("itl", "ITL", "Inter-token Latency"),
    ("e2el", "E2EL", "End-to-end Latency"),
];

impl Latencies {
    pub fn get(&self, name: &str) -> Option<&MetricStats> {
        match name {
            "ttft" => Some(&self.ttft),
            "tpot" => Some(&self.tpot),
            "itl" => Some(&self.itl),
            "e2el" => Some(&self.e2el),
            "ttfc" => Some(&self.ttfc),
            _ => None,
        }
    }
    fn get_mut(&mut self, name: &str) -> Option<&mut MetricStats> {
        match name {
            "ttft" => Some(&mut self.ttft),
            "tpot" => Some(&mut self.tpot),
            "itl" => Some(&mut self.itl),
            "e2el" => Some(&mut self.e2el),
            "ttfc" => Some(&mut self.ttfc),
            _ => None,
        }
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

const ALL_METRICS: [&str; 5] = ["ttft", "tpot", "itl", "e2el", "ttfc"];

impl Serialize for Latencies {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = ser.serialize_map(None)?;
        for name in ALL_METRICS {
            let m = self.get(name).expect("known metric");
            map.serialize_entry(&format!("count_{name}"), &m.count)?;
            map.serialize_entry(&format!("mean_{name}_ms"), &finite(m.mean))?;
            map.serialize_entry(&format!("median_{name}_ms"), &finite(m.median))?;
            map.serialize_entry(&format!("std_{name}_ms"), &finite(m.std))?;
            map.serialize_entry(&format!("min_{name}_ms"), &finite(m.min))?;
            map.serialize_entry(&format!("max_{name}_ms"), &finite(m.max))?;
            for (p, v) in &m.percentiles {
                map.serialize_entry(&format!("p{}_{name}_ms", p_word(*p)), &finite(*v))?;
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
                while let Some(key) = a.next_key::<String>()? {
                    match parse_metric_key(&key) {
                        Some((stat, name)) => {
                            let v: f64 = a.next_value()?;
                            let m = l.get_mut(name).expect("known metric");
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
                for name in ALL_METRICS {
                    let m = l.get_mut(name).expect("known metric");
                    m.percentiles.sort_by(|x, y| x.0.total_cmp(&y.0));
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

fn parse_metric_key(key: &str) -> Option<(Stat, &'static str)> {
    if let Some(name) = key.strip_prefix("count_") {
        return ALL_METRICS
            .iter()
            .find(|m| **m == name)
            .map(|m| (Stat::Count, *m));
    }
    let body = key.strip_suffix("_ms")?;
    let (stat, name) = body.split_once('_')?;
    let name = *ALL_METRICS.iter().find(|m| **m == name)?;
    let stat = match stat {
        "mean" => Stat::Mean,
        "median" => Stat::Median,
        "std" => Stat::Std,
        "min" => Stat::Min,
        "max" => Stat::Max,
        s => Stat::P(s.strip_prefix('p')?.parse().ok()?),
    };
    Some((stat, name))
}

fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}
