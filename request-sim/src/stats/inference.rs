//! Confidence intervals and significance: the 95% interval of a mean over repeats (Student's
//! t), the difference of two sets of repeats (Welch's t), and the seeded bootstrap of a
//! statistic of per-request values (percentile bootstrap of the difference). Methods and
//! their limits: `docs/metrics.md`, "Repeats, intervals and comparisons".
//!
//! Pure arithmetic over slices; the t quantiles come from `statrs`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// The confidence level of every interval and test (two-sided).
pub const LEVEL: f64 = 0.95;

/// Resamples of the bootstrap.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The two-sided quantile `t_{1-(1-LEVEL)/2, df}` of Student's t distribution; `None` for
/// `df` not positive and finite.
pub fn t_quantile(df: f64) -> Option<f64> {
    if !(df.is_finite() && df > 0.0) {
        return None;
    }
    let p = 1.0 - (1.0 - LEVEL) / 2.0;
    // Past 10^4 degrees of freedom t is the normal distribution to 4 digits (statrs's inverse of
    // t does not converge for huge df).
    if df > 1e4 {
        return Some(Normal::new(0.0, 1.0).ok()?.inverse_cdf(p));
    }
    Some(StudentsT::new(0.0, 1.0, df).ok()?.inverse_cdf(p))
}

/// Mean, sample standard deviation (n - 1) and the 95% interval of the mean of `values`
/// (one per repeat), with their spread (min, max).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeanCi {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for one value.
    pub std: f64,
    /// `mean ∓ t · std / √n`; `None` with fewer than two values. When no value is negative
    /// (every headline metric: latencies, throughputs, the hit ratio) the lower bound is held
    /// at 0: the t interval is symmetric and, over a few spread repeats, reaches below 0, which
    /// such a mean cannot.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub min: f64,
    pub max: f64,
}

/// Mean and sample variance (n - 1) of `v` (`None` when empty).
fn mean_var(v: &[f64]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    Some((mean, var))
}

/// The 95% Student-t interval of the mean of `values` (`None` when there are none or one is
/// not finite), its lower bound held at 0 when no value is negative.
pub fn mean_ci(values: &[f64]) -> Option<MeanCi> {
    if values.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let (mean, var) = mean_var(values)?;
    let n = values.len();
    let std = var.sqrt();
    let half = t_quantile(n as f64 - 1.0).map(|t| t * std / (n as f64).sqrt());
    Some(MeanCi {
        n,
        mean,
        std,
        ci_low: half.map(|h| {
            let low = mean - h;
            if values.iter().all(|x| *x >= 0.0) {
                low.max(0.0)
            } else {
                low
            }
        }),
        ci_high: half.map(|h| mean + h),
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    })
}

/// The difference `B - A` of a statistic with its 95% interval; significant when the interval
/// excludes 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Diff {
    /// The statistic on each side (A, B).
    pub a: f64,
    pub b: f64,
    /// `b - a`.
    pub diff: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// The 95% interval of the relative change `(B - A) / |A|`, in percent, from the same
    /// resamples (the bootstrap: each resample's change over its own A, so a non-negative
    /// metric's interval never goes below -100%); `None` for Welch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rel_ci_pct: Option<(f64, f64)>,
}

impl Diff {
    /// The interval excludes 0.
    pub fn significant(&self) -> bool {
        self.ci_low > 0.0 || self.ci_high < 0.0
    }
}

/// Welch's t interval of `mean(b) - mean(a)` over repeat-level values (at least two on each
/// side). With no spread on either side the interval is the difference itself.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Diff> {
    if a.len() < 2 || b.len() < 2 || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let (ma, va) = mean_var(a)?;
    let (mb, vb) = mean_var(b)?;
    let (sa, sb) = (va / a.len() as f64, vb / b.len() as f64);
    let se2 = sa + sb;
    let diff = mb - ma;
    if se2 == 0.0 {
        return Some(Diff {
            a: ma,
            b: mb,
            diff,
            ci_low: diff,
            ci_high: diff,
            rel_ci_pct: None,
        });
    }
    // Welch–Satterthwaite degrees of freedom.
    let df = se2 * se2 / (sa * sa / (a.len() as f64 - 1.0) + sb * sb / (b.len() as f64 - 1.0));
    let half = t_quantile(df)? * se2.sqrt();
    Some(Diff {
        a: ma,
        b: mb,
        diff,
        ci_low: diff - half,
        ci_high: diff + half,
        rel_ci_pct: None,
    })
}

/// A statistic of a resample: the mean or a percentile (numpy's linear interpolation) of
/// per-request values (ratios of sums: [`bootstrap_ratio`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    Mean,
    Percentile(f64),
}

/// One request's contribution: its values (one for TTFT/E2E/TPOT; every gap for ITL, so a
/// request is resampled with all of its gaps).
pub type Cluster = Vec<f64>;

/// The values of every cluster sorted once, with each cluster's sum and size: a resample is
/// then a weight per cluster (how many times it was drawn), and its statistics one pass over
/// the sorted values (no copy, no sort per resample).
struct Pooled {
    /// `(value, cluster)`, ascending by value.
    sorted: Vec<(f64, usize)>,
    sums: Vec<f64>,
    lens: Vec<u64>,
}

impl Pooled {
    fn new(clusters: &[Cluster]) -> Pooled {
        let mut sorted: Vec<(f64, usize)> = clusters
            .iter()
            .enumerate()
            .flat_map(|(i, c)| c.iter().map(move |v| (*v, i)))
            .collect();
        sorted.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        Pooled {
            sorted,
            sums: clusters.iter().map(|c| c.iter().sum()).collect(),
            lens: clusters.iter().map(|c| c.len() as u64).collect(),
        }
    }

    /// The statistics of the values with cluster `i` counted `w[i]` times, as if they were
    /// written out and sorted (numpy's linear interpolation for percentiles); `None` when no
    /// value has weight.
    fn stats(&self, w: &[u64], stats: &[Statistic]) -> Option<Vec<f64>> {
        let n: u64 = w.iter().zip(&self.lens).map(|(w, l)| w * l).sum();
        if n == 0 {
            return None;
        }
        let total: f64 = w.iter().zip(&self.sums).map(|(w, s)| *w as f64 * s).sum();
        // The ranks each percentile reads (floor and floor + 1 of p/100 · (n - 1)), ascending.
        let mut ranks: Vec<u64> = Vec::new();
        for st in stats {
            if let Statistic::Percentile(p) = st {
                let h = p / 100.0 * (n - 1) as f64;
                let lo = h.floor() as u64;
                ranks.push(lo.min(n - 1));
                ranks.push((lo + 1).min(n - 1));
            }
        }
        ranks.sort_unstable();
        ranks.dedup();
        let mut at: Vec<f64> = vec![0.0; ranks.len()];
        let (mut next, mut seen) = (0usize, 0u64);
        for &(v, c) in &self.sorted {
            if next == ranks.len() {
                break;
            }
            seen += w[c];
            while next < ranks.len() && ranks[next] < seen {
                at[next] = v;
                next += 1;
            }
        }
        let value_at = |r: u64| at[ranks.binary_search(&r).unwrap_or(0)];
        Some(
            stats
                .iter()
                .map(|st| match st {
                    Statistic::Mean => total / n as f64,
                    Statistic::Percentile(p) => {
                        let h = p / 100.0 * (n - 1) as f64;
                        let lo = h.floor() as u64;
                        let (a, b) = (value_at(lo.min(n - 1)), value_at((lo + 1).min(n - 1)));
                        a + (h - lo as f64) * (b - a)
                    }
                })
                .collect(),
        )
    }
}

/// One bootstrap resample of `k` clusters: how many times each was drawn (k draws with
/// replacement).
fn resample_weights(k: usize, rng: &mut ChaCha8Rng, w: &mut Vec<u64>) {
    w.clear();
    w.resize(k, 0);
    for _ in 0..k {
        w[rng.random_range(0..k)] += 1;
    }
}

/// The percentile bootstrap of `stat(B) - stat(A)` over requests, for each of `stats`: each
/// resample draws as many requests as each side has, with replacement, from that side (a
/// request with all of its values); the interval is the 2.5th and 97.5th percentiles of the
/// resampled differences. `seed` makes it reproducible. `None` for every statistic when a
/// side has no values.
pub fn bootstrap(
    a: &[Cluster],
    b: &[Cluster],
    stats: &[Statistic],
    resamples: usize,
    seed: u64,
) -> Vec<Option<Diff>> {
    let (pa, pb) = (Pooled::new(a), Pooled::new(b));
    let (Some(sa), Some(sb)) = (
        pa.stats(&vec![1; a.len()], stats),
        pb.stats(&vec![1; b.len()], stats),
    ) else {
        return vec![None; stats.len()];
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    let mut diffs = vec![Vec::with_capacity(resamples); stats.len()];
    for _ in 0..resamples {
        resample_weights(a.len(), &mut rng, &mut wa);
        resample_weights(b.len(), &mut rng, &mut wb);
        if let (Some(x), Some(y)) = (pa.stats(&wa, stats), pb.stats(&wb, stats)) {
            for (d, (x, y)) in diffs.iter_mut().zip(x.into_iter().zip(y)) {
                d.push((x, y));
            }
        }
    }
    stats
        .iter()
        .enumerate()
        .zip(diffs)
        .map(|((i, _), d)| ci_of(sa[i], sb[i], d))
        .collect()
}

/// The percentile bootstrap of the difference of two ratios of sums, `Σnum/Σden` (the cache
/// hit ratio: cached over prompt tokens), requests drawn as pairs `(num, den)`.
pub fn bootstrap_ratio(
    a: &[(f64, f64)],
    b: &[(f64, f64)],
    resamples: usize,
    seed: u64,
) -> Option<Diff> {
    let ratio = |v: &mut dyn Iterator<Item = (f64, f64)>| {
        let (n, d) = v.fold((0.0, 0.0), |(n, d), (x, y)| (n + x, d + y));
        (d > 0.0).then(|| n / d)
    };
    let sa = ratio(&mut a.iter().copied())?;
    let sb = ratio(&mut b.iter().copied())?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut diffs = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let ra = ratio(&mut (0..a.len()).map(|_| a[rng.random_range(0..a.len())]));
        let rb = ratio(&mut (0..b.len()).map(|_| b[rng.random_range(0..b.len())]));
        if let (Some(x), Some(y)) = (ra, rb) {
            diffs.push((x, y));
        }
    }
    ci_of(sa, sb, diffs)
}

/// The percentile interval of the resampled `(A*, B*)` pairs: of `B* - A*`, and of the
/// relative change `(B* - A*) / |A*|` in percent (over the resamples whose A* is not 0; `None`
/// when fewer than half are). The relative interval is not the difference's interval divided
/// by A: a resample with a large A* has a large negative difference but a change of at most
/// -100% for a non-negative metric.
fn ci_of(a: f64, b: f64, pairs: Vec<(f64, f64)>) -> Option<Diff> {
    if pairs.is_empty() {
        return None;
    }
    let mut diffs: Vec<f64> = pairs.iter().map(|(x, y)| y - x).collect();
    diffs.sort_unstable_by(f64::total_cmp);
    let mut rel: Vec<f64> = pairs
        .iter()
        .filter(|(x, _)| *x != 0.0)
        .map(|(x, y)| (y - x) / x.abs() * 100.0)
        .collect();
    rel.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0 * 100.0;
    let interval = |v: &[f64]| {
        (
            super::samples::percentile_sorted(v, tail),
            super::samples::percentile_sorted(v, 100.0 - tail),
        )
    };
    let (ci_low, ci_high) = interval(&diffs);
    Some(Diff {
        a,
        b,
        diff: b - a,
        ci_low,
        ci_high,
        rel_ci_pct: (rel.len() * 2 >= pairs.len()).then(|| interval(&rel)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_published_table() {
        // Two-sided 95%: 12.706 (1), 2.776 (4), 2.262 (9), 1.962 (1000), 1.960 (∞).
        for (df, want) in [
            (1.0, 12.706),
            (4.0, 2.776),
            (9.0, 2.262),
            (1000.0, 1.9623),
            (1e9, 1.960),
        ] {
            let t = t_quantile(df).unwrap();
            assert!((t - want).abs() < 1e-3, "df {df}: {t} vs {want}");
        }
        assert_eq!(t_quantile(0.0), None);
    }

    #[test]
    fn the_interval_of_a_non_negative_mean_stays_at_or_above_0() {
        // Issue #39 defect 7: three spread repeats of a latency gave P90 TTFT [-16.71, 63.71].
        let c = mean_ci(&[2.0, 10.0, 58.0]).unwrap();
        assert_eq!(c.ci_low, Some(0.0), "{c:?}");
        let half = 4.302_652_7 * c.std / 3f64.sqrt();
        assert!((c.ci_high.unwrap() - (c.mean + half)).abs() < 1e-4, "{c:?}");
        // A metric that can be negative keeps its symmetric interval.
        let c = mean_ci(&[-2.0, 10.0, 58.0]).unwrap();
        assert!(c.ci_low.unwrap() < 0.0, "{c:?}");
    }

    #[test]
    fn weighted_statistics_equal_the_written_out_values() {
        let clusters: Vec<Cluster> = vec![vec![5.0, 1.0], vec![3.0], vec![10.0, 2.0, 7.0], vec![]];
        let pooled = Pooled::new(&clusters);
        let stats = [
            Statistic::Mean,
            Statistic::Percentile(50.0),
            Statistic::Percentile(90.0),
            Statistic::Percentile(99.0),
            Statistic::Percentile(100.0),
        ];
        for w in [[1, 1, 1, 1], [2, 0, 1, 3], [0, 3, 0, 0], [1, 0, 2, 0]] {
            let mut all: Vec<f64> = Vec::new();
            for (c, k) in clusters.iter().zip(w) {
                for _ in 0..k {
                    all.extend(c);
                }
            }
            all.sort_by(f64::total_cmp);
            let got = pooled.stats(&w, &stats).unwrap();
            let want = [
                all.iter().sum::<f64>() / all.len() as f64,
                super::super::samples::percentile_sorted(&all, 50.0),
                super::super::samples::percentile_sorted(&all, 90.0),
                super::super::samples::percentile_sorted(&all, 99.0),
                super::super::samples::percentile_sorted(&all, 100.0),
            ];
            for (g, x) in got.iter().zip(want) {
                assert!((g - x).abs() < 1e-12, "{w:?}: {got:?} vs {want:?}");
            }
        }
        assert!(pooled.stats(&[0, 0, 0, 5], &stats).is_none());
    }
}
