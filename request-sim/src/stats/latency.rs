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
    /// Time to first content token (differs from TTFT when the first tokens carry no text).
    pub ttfc: MetricStats,
    /// Time to the first answer token, over the completed answers that carried thinking or a
    /// tool call (`ttfa_ms`; empty for a run without them).
    pub ttfa: MetricStats,
}

/// A latency metric of [`Latencies`]: its key in JSON (`mean_ttft_ms`), its label in the
/// console (`Mean TTFT (ms)`) and its section title.
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
}

impl Metric {
    /// Every metric, in the order of the summary's JSON keys.
    pub const ALL: [Metric; 6] = [
        Metric::Ttft,
        Metric::Tpot,
        Metric::Itl,
        Metric::E2el,
        Metric::Ttfc,
        Metric::Ttfa,
    ];

    /// vLLM's metrics, in the order of its result table.
    pub const VLLM: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

    /// The name in JSON keys (`ttft` in `p99_ttft_ms`).
    pub fn key(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2el => "e2el",
            Metric::Ttfc => "ttfc",
            Metric::Ttfa => "ttfa",
        }
    }

    /// vLLM's label (`TTFT` in `Mean TTFT (ms):`).
    pub fn label(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::Itl => "ITL",
            Metric::E2el => "E2EL",
            Metric::Ttfc => "TTFC",
            Metric::Ttfa => "TTFA",
        }
    }

    /// vLLM's section title.
    pub fn title(self) -> &'static str {
        match self {
            Metric::Ttft => "Time to First Token",
            Metric::Tpot => "Time per Output Token (excl. 1st token)",
            Metric::Itl => "Inter-token Latency",
            Metric::E2el => "End-to-end Latency",
            Metric::Ttfc => "Time to First Content Token",
            Metric::Ttfa => "Time to First Answer Token",
        }
    }

    /// The metric whose JSON name is `key`.
    pub fn from_key(key: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.key() == key)
    }
}

impl Latencies {
    /// The statistics of `metric`.
    pub fn get(&self, metric: Metric) -> &MetricStats {
        match metric {
            Metric::Ttft => &self.ttft,
            Metric::Tpot => &self.tpot,
            Metric::Itl => &self.itl,
            Metric::E2el => &self.e2el,
            Metric::Ttfc => &self.ttfc,
            Metric::Ttfa => &self.ttfa,
        }
    }
    fn get_mut(&mut self, metric: Metric) -> &mut MetricStats {
        match metric {
            Metric::Ttft => &mut self.ttft,
            Metric::Tpot => &mut self.tpot,
            Metric::Itl => &mut self.itl,
            Metric::E2el => &mut self.e2el,
            Metric::Ttfc => &mut self.ttfc,
            Metric::Ttfa => &mut self.ttfa,
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

impl Serialize for Latencies {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = ser.serialize_map(None)?;
        for metric in Metric::ALL {
            let (name, m) = (metric.key(), self.get(metric));
            // Statistics of no values are unknown: null, never 0.
            let v = |x: f64| (m.count > 0).then(|| finite(x));
            map.serialize_entry(&format!("count_{name}"), &m.count)?;
            map.serialize_entry(&format!("mean_{name}_ms"), &v(m.mean))?;
            map.serialize_entry(&format!("median_{name}_ms"), &v(m.median))?;
            map.serialize_entry(&format!("std_{name}_ms"), &v(m.std))?;
            map.serialize_entry(&format!("min_{name}_ms"), &v(m.min))?;
            map.serialize_entry(&format!("max_{name}_ms"), &v(m.max))?;
            for (p, x) in &m.percentiles {
                map.serialize_entry(&format!("p{}_{name}_ms", p_word(*p)), &v(*x))?;
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
    let body = key.strip_suffix("_ms")?;
    let (stat, name) = body.split_once('_')?;
    let metric = Metric::from_key(name)?;
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
    fn keys_round_trip() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_key(m.key()), Some(m));
        }
        assert_eq!(Metric::from_key("p99"), None);
        let mut l = Latencies::default();
        l.itl.count = 3;
        l.itl.percentiles = vec![(99.9, 1.5)];
        let v = serde_json::to_value(&l).unwrap();
        assert_eq!(v["count_itl"], 3);
        assert_eq!(v["p99.9_itl_ms"], 1.5);
        let back: Latencies = serde_json::from_value(v).unwrap();
        assert_eq!(back, l);
    }
}
