//! Statistics with numpy's semantics: mean, median, population std and percentiles by linear
//! interpolation at index `p/100 * (n-1)` (numpy's default "linear" method), over all values.
//!
//! Two sample stores:
//! - [`Samples`]: every value kept exactly (one per request: TTFT, TPOT, E2EL, drift).
//! - [`QuantizedSamples`]: values rounded to 1 µs in a counting map (ITL, which runs into tens
//!   of millions of values). Memory grows with the number of *distinct* microsecond values,
//!   not with the number of values; mean and std come from exact running sums of the unrounded
//!   values, percentiles are exact at 1 µs resolution.

use serde::{Deserialize, Serialize};

pub use crate::util::percentile_sorted;
use crate::util::{lerp, rank};

/// Summary statistics of one metric, in the metric's unit (ms). Without values (`count` 0)
/// every statistic is unknown: held as zeros, `null` in JSON (read back as zeros).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(from = "StatsJson", into = "StatsJson")]
pub struct MetricStats {
    /// Number of values.
    pub count: u64,
    pub mean: f64,
    pub median: f64,
    /// Population standard deviation (numpy `std`, ddof = 0).
    pub std: f64,
    pub min: f64,
    pub max: f64,
    /// `(p, value)` for each configured percentile, in configuration order.
    pub percentiles: Vec<(f64, f64)>,
}

/// [`MetricStats`] as written: the statistics `null` when unknown.
#[derive(Serialize, Deserialize)]
struct StatsJson {
    #[serde(default)]
    count: u64,
    mean: Option<f64>,
    median: Option<f64>,
    std: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    #[serde(default)]
    percentiles: Vec<(f64, Option<f64>)>,
}

impl From<StatsJson> for MetricStats {
    fn from(j: StatsJson) -> MetricStats {
        let v = |x: Option<f64>| x.unwrap_or(0.0);
        MetricStats {
            count: j.count,
            mean: v(j.mean),
            median: v(j.median),
            std: v(j.std),
            min: v(j.min),
            max: v(j.max),
            percentiles: j.percentiles.into_iter().map(|(p, x)| (p, v(x))).collect(),
        }
    }
}

impl From<MetricStats> for StatsJson {
    fn from(m: MetricStats) -> StatsJson {
        // Unknown without values, and nothing is NaN.
        let v = |x: f64| (m.count > 0 && x.is_finite()).then_some(x);
        StatsJson {
            count: m.count,
            mean: v(m.mean),
            median: v(m.median),
            std: v(m.std),
            min: v(m.min),
            max: v(m.max),
            percentiles: m.percentiles.iter().map(|(p, x)| (*p, v(*x))).collect(),
        }
    }
}

impl MetricStats {
    /// The value at percentile `p`, if it was configured.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(q, _)| (q - p).abs() < 1e-9)
            .map(|(_, v)| *v)
    }

    /// Whether there were values: without, every statistic is unknown (shown as `n/a`,
    /// `null` in JSON), though held as zeros.
    pub fn known(&self) -> bool {
        self.count > 0
    }

    /// The value at percentile `p` when known and configured.
    pub fn known_percentile(&self, p: f64) -> Option<f64> {
        self.percentile(p).filter(|_| self.known())
    }

    /// The median when known.
    pub fn known_median(&self) -> Option<f64> {
        self.known().then_some(self.median)
    }

    /// Statistics of no values: held as zeros (vLLM's `np.mean(x or 0)`), rendered unknown.
    pub fn empty(percentiles: &[f64]) -> MetricStats {
        MetricStats {
            percentiles: percentiles.iter().map(|p| (*p, 0.0)).collect(),
            ..MetricStats::default()
        }
    }
}

/// Order-independent running moments: sums of the values at 1 ns resolution in 128-bit
/// integers, so the mean and std do not depend on the order values arrive (a live run and a
/// re-summarised JSONL give identical numbers) and do not drift over tens of millions of values.
#[derive(Debug, Clone, Default)]
pub struct Moments {
    n: u64,
    sum: i128,
    sum_sq: i128,
    min: f64,
    max: f64,
}

const NS_PER_MS: f64 = 1e6;

impl Moments {
    pub fn push(&mut self, x: f64) {
        if self.n == 0 {
            self.min = x;
            self.max = x;
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        self.n += 1;
        let q = (x * NS_PER_MS).round() as i128;
        self.sum += q;
        self.sum_sq = self.sum_sq.saturating_add(q * q);
    }
    pub fn count(&self) -> u64 {
        self.n
    }
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64 / NS_PER_MS
        }
    }
    /// Population standard deviation.
    pub fn std(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let n = self.n as i128;
        // n^2 * var = n * Σx² - (Σx)², exact in integers when it fits.
        let var_ns2 = match n
            .checked_mul(self.sum_sq)
            .and_then(|a| self.sum.checked_mul(self.sum).map(|b| a - b))
        {
            Some(d) => d as f64 / (n as f64 * n as f64),
            None => {
                let m = self.sum as f64 / n as f64;
                self.sum_sq as f64 / n as f64 - m * m
            }
        };
        var_ns2.max(0.0).sqrt() / NS_PER_MS
    }
}

/// Exact store: keeps every value.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    values: Vec<f64>,
}

impl Samples {
    pub fn push(&mut self, x: f64) {
        if x.is_finite() {
            self.values.push(x);
        }
    }
    pub fn len(&self) -> usize {
        self.values.len()
    }
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
    pub fn values(&self) -> &[f64] {
        &self.values
    }
    pub fn stats(&self, percentiles: &[f64]) -> MetricStats {
        stats_of(&self.values, percentiles)
    }
}

/// Statistics of a slice of values (copied and sorted).
pub fn stats_of(values: &[f64], percentiles: &[f64]) -> MetricStats {
    if values.is_empty() {
        return MetricStats::empty(percentiles);
    }
    let mut sorted: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if sorted.is_empty() {
        return MetricStats::empty(percentiles);
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    // Two-pass mean and population std, as numpy does.
    let mean = sorted.iter().sum::<f64>() / n;
    let var = sorted.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    MetricStats {
        count: sorted.len() as u64,
        mean,
        median: percentile_sorted(&sorted, 50.0),
        std: var.sqrt(),
        min: sorted[0],
        max: sorted[sorted.len() - 1],
        percentiles: percentiles
            .iter()
            .map(|p| (*p, percentile_sorted(&sorted, *p)))
            .collect(),
    }
}

/// Values quantised to 1 µs in a counting map; exact mean/std from running sums.
#[derive(Debug, Clone, Default)]
pub struct QuantizedSamples {
    /// Our own measurements as keys: no protection against crafted collisions is needed, so
    /// rustc-hash's fast integer hasher instead of SipHash.
    counts: rustc_hash::FxHashMap<i64, u64>,
    moments: Moments,
}

/// Resolution of [`QuantizedSamples`]: values per millisecond (1 µs).
const QUANTA_PER_MS: f64 = 1000.0;

impl QuantizedSamples {
    pub fn push(&mut self, x_ms: f64) {
        if !x_ms.is_finite() {
            return;
        }
        self.moments.push(x_ms);
        let q = (x_ms * QUANTA_PER_MS).round() as i64;
        *self.counts.entry(q).or_insert(0) += 1;
    }
    pub fn len(&self) -> u64 {
        self.moments.count()
    }
    pub fn is_empty(&self) -> bool {
        self.moments.count() == 0
    }
    /// Number of distinct quantised values held (memory is proportional to this).
    pub fn distinct(&self) -> usize {
        self.counts.len()
    }

    pub fn stats(&self, percentiles: &[f64]) -> MetricStats {
        let n = self.moments.count();
        if n == 0 {
            return MetricStats::empty(percentiles);
        }
        let mut sorted: Vec<(i64, u64)> = self.counts.iter().map(|(k, v)| (*k, *v)).collect();
        sorted.sort_unstable_by_key(|(k, _)| *k);
        // Cumulative counts: value at rank r is the first bucket whose cumulative count > r.
        let mut cum = Vec::with_capacity(sorted.len());
        let mut acc = 0u64;
        for (_, c) in &sorted {
            acc += c;
            cum.push(acc);
        }
        let at = |r: u64| -> f64 {
            let i = cum.partition_point(|c| *c <= r);
            sorted[i.min(sorted.len() - 1)].0 as f64 / QUANTA_PER_MS
        };
        let pct = |p: f64| -> f64 {
            let (lo, hi, frac) = rank(n, p);
            lerp(at(lo), at(hi), frac)
        };
        MetricStats {
            count: n,
            mean: self.moments.mean(),
            median: pct(50.0),
            std: self.moments.std(),
            min: self.moments.min,
            max: self.moments.max,
            percentiles: percentiles.iter().map(|p| (*p, pct(*p))).collect(),
        }
    }
}

/// Default `--metric-percentile` list.
pub const DEFAULT_PERCENTILES: [f64; 6] = [25.0, 50.0, 75.0, 90.0, 95.0, 99.0];

/// The percentiles a report computes: each in (0, 100], ascending, no repeats. Built once from
/// the flags (`--metric-percentile`, checked value by value by [`parse_percentile`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<f64>", into = "Vec<f64>")]
pub struct Percentiles(Vec<f64>);

impl Percentiles {
    /// Sort and de-duplicate `values`; an empty list or a value outside (0, 100] is an error.
    pub fn new(mut values: Vec<f64>) -> Result<Percentiles, String> {
        if values.is_empty() {
            return Err("no percentile given".to_string());
        }
        for &p in &values {
            check_percentile(p)?;
        }
        values.sort_by(f64::total_cmp);
        values.dedup();
        Ok(Percentiles(values))
    }

    /// `values` when given and not empty, else `default` (both checked).
    pub fn or_default(values: Option<Vec<f64>>, default: &[f64]) -> Result<Percentiles, String> {
        match values {
            Some(v) if !v.is_empty() => Percentiles::new(v),
            _ => Percentiles::new(default.to_vec()),
        }
    }
}

impl Default for Percentiles {
    fn default() -> Percentiles {
        Percentiles(DEFAULT_PERCENTILES.to_vec())
    }
}

impl std::ops::Deref for Percentiles {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        &self.0
    }
}

impl TryFrom<Vec<f64>> for Percentiles {
    type Error = String;
    fn try_from(v: Vec<f64>) -> Result<Percentiles, String> {
        Percentiles::new(v)
    }
}

impl From<Percentiles> for Vec<f64> {
    fn from(p: Percentiles) -> Vec<f64> {
        p.0
    }
}

fn check_percentile(p: f64) -> Result<f64, String> {
    if p.is_finite() && p > 0.0 && p <= 100.0 {
        Ok(p)
    } else {
        Err(format!(
            "--metric-percentile values must be in (0, 100], got {p}"
        ))
    }
}

/// One `--metric-percentile` value (clap parses the comma-separated list value by value).
pub fn parse_percentile(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("invalid percentile {s:?}: expected a number in (0, 100]"))?;
    check_percentile(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_checked_sorted_and_unique() {
        let p = Percentiles::new(vec![99.0, 50.0, 99.0, 99.9]).unwrap();
        assert_eq!(&*p, &[50.0, 99.0, 99.9]);
        assert!(Percentiles::new(vec![]).is_err());
        assert!(Percentiles::new(vec![0.0]).is_err());
        assert!(Percentiles::new(vec![101.0]).is_err());
        assert_eq!(parse_percentile(" 99.5"), Ok(99.5));
        assert!(parse_percentile("x").is_err());
        assert!(parse_percentile("0").is_err());
        let d = Percentiles::or_default(Some(vec![]), &[90.0, 50.0]).unwrap();
        assert_eq!(&*d, &[50.0, 90.0]);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, "[50.0,99.0,99.9]");
        assert!(serde_json::from_str::<Percentiles>("[150.0]").is_err());
    }

    #[test]
    fn quantized_matches_exact_at_us_resolution() {
        let vals: Vec<f64> = (0..10_000)
            .map(|i| ((i * 7919) % 1000) as f64 * 0.013)
            .collect();
        let mut q = QuantizedSamples::default();
        for v in &vals {
            q.push(*v);
        }
        let ps = [25.0, 50.0, 90.0, 99.0, 99.9];
        let a = q.stats(&ps);
        let b = stats_of(&vals, &ps);
        assert!((a.mean - b.mean).abs() < 1e-9);
        assert!((a.std - b.std).abs() < 1e-9);
        for ((_, x), (_, y)) in a.percentiles.iter().zip(&b.percentiles) {
            assert!((x - y).abs() < 1e-3, "{x} vs {y}");
        }
        assert!(q.distinct() <= 1000);
    }

    #[test]
    fn many_values_bounded_memory() {
        // 5 million ITL-like values between 0 and 100 ms at 10 µs steps: at most 10,001 keys.
        let mut q = QuantizedSamples::default();
        let mut x = 12345u64;
        for _ in 0..5_000_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            q.push(((x >> 40) % 10_001) as f64 * 0.01);
        }
        assert_eq!(q.len(), 5_000_000);
        assert!(q.distinct() <= 10_001);
        let s = q.stats(&[50.0, 99.0]);
        assert!((s.mean - 50.0).abs() < 0.1, "{}", s.mean);
        assert!((s.percentile(99.0).unwrap() - 99.0).abs() < 0.1);
    }
}
