//! The timing of a trace's arrivals: span, rates and peaks ([`Arrivals`]), burstiness (the gaps' coefficient of variation) and the
//! request rate over trace time.

use super::analysis::{RatePoint, RateSeries, MAX_RATE_POINTS};

/// The arrival facts of a trace: its times sorted (seconds), span and rates.
pub(super) struct Arrivals {
    pub(super) times_s: Vec<f64>,
    pub(super) duration_s: f64,
    pub(super) mean_rate_per_s: Option<f64>,
    pub(super) distinct_timestamps: usize,
    /// Most requests at one timestamp.
    pub(super) max_same: usize,
    /// Most requests in one whole second of trace time, and that second's start.
    pub(super) peak: u64,
    pub(super) peak_at: f64,
}

impl Arrivals {
    /// The facts of the requests' times (ms, replay order, which is not relied on).
    pub(super) fn of(times_ms: Vec<f64>) -> Arrivals {
        let mut times_s: Vec<f64> = times_ms.iter().map(|t| t / 1000.0).collect();
        drop(times_ms);
        times_s.sort_by(f64::total_cmp);
        let (first, last) = match (times_s.first(), times_s.last()) {
            (Some(&a), Some(&b)) => (a, b),
            _ => (0.0, 0.0),
        };
        let duration_s = last - first;
        let mean_rate_per_s = (duration_s > 0.0).then(|| times_s.len() as f64 / duration_s);
        let (mut distinct_timestamps, mut max_same) = (0usize, 0usize);
        let mut i = 0;
        while i < times_s.len() {
            let j = i + times_s[i..]
                .iter()
                .take_while(|&&t| t == times_s[i])
                .count();
            distinct_timestamps += 1;
            max_same = max_same.max(j - i);
            i = j;
        }
        let (mut peak, mut peak_at) = (0u64, 0.0);
        let mut i = 0;
        while i < times_s.len() {
            let w = ((times_s[i] - first).floor()).max(0.0);
            let mut j = i;
            while j < times_s.len() && ((times_s[j] - first).floor()).max(0.0) == w {
                j += 1;
            }
            if (j - i) as u64 > peak {
                peak = (j - i) as u64;
                peak_at = w;
            }
            i = j;
        }
        Arrivals {
            times_s,
            duration_s,
            mean_rate_per_s,
            distinct_timestamps,
            max_same,
            peak,
            peak_at,
        }
    }
}

/// Coefficient of variation of the gaps between consecutive (sorted) times.
pub(super) fn burstiness(times_s: &[f64]) -> Option<f64> {
    if times_s.len() < 3 {
        return None;
    }
    let gaps: Vec<f64> = times_s.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    if mean <= 0.0 {
        return None;
    }
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
    Some(var.sqrt() / mean)
}

pub(super) fn rate_series(times_s: &[f64], duration_s: f64, bucket_s: f64) -> RateSeries {
    let mut bucket = if bucket_s.is_finite() && bucket_s > 0.0 {
        bucket_s
    } else {
        60.0
    };
    while duration_s / bucket >= MAX_RATE_POINTS as f64 {
        bucket *= 2.0;
    }
    let first = times_s.first().copied().unwrap_or(0.0);
    let n = ((duration_s / bucket).floor() as usize + 1).min(MAX_RATE_POINTS);
    let mut counts = vec![0u64; n];
    for &t in times_s {
        let i = (((t - first) / bucket).floor().max(0.0) as usize).min(n - 1);
        counts[i] += 1;
    }
    RateSeries {
        bucket_s: bucket,
        points: counts
            .into_iter()
            .enumerate()
            .map(|(i, c)| RatePoint {
                start_s: i as f64 * bucket,
                requests: c,
                rate_per_s: c as f64 / bucket,
            })
            .collect(),
    }
}
