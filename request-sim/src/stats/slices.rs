//! A run in time slices (AgentX's `--slice-duration 1`): per second from the first successful
//! send, the output tokens that arrived (throughput) and what one user saw (per-user output
//! tokens/s: the slice's tokens over the request-seconds in flight in it), over the measured
//! requests (warm-up left out).

use serde::{Deserialize, Serialize};

/// One 1 s slice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimeSlice {
    /// Seconds from the first successful send to the slice's start.
    pub start_s: f64,
    /// Output tokens that arrived in the slice (= tokens/s).
    pub output_tokens: u64,
    /// Successful requests in flight in the slice, time-weighted (request-seconds / s).
    pub in_flight: f64,
    /// Output tokens/s per request in flight (`None` with none in flight).
    pub per_user_output_tps: Option<f64>,
}

/// The slices from the tokens per second (`tokens[k]`: arrivals in `[base + k s, base + (k+1)
/// s)`) and the successful requests' spans (send, end; ms on the run's clock).
pub fn slices(tokens: &[u64], spans: &[(f64, f64)], base_ms: f64) -> Vec<TimeSlice> {
    let last = spans.iter().map(|s| s.1).fold(base_ms, f64::max);
    let n = (((last - base_ms) / 1000.0).ceil() as usize).max(tokens.len());
    let mut busy = vec![0.0f64; n];
    for &(a, b) in spans {
        let (a, b) = (
            (a - base_ms).max(0.0) / 1000.0,
            (b - base_ms).max(0.0) / 1000.0,
        );
        let mut k = a.floor() as usize;
        while (k as f64) < b && k < n {
            let lo = a.max(k as f64);
            let hi = b.min(k as f64 + 1.0);
            busy[k] += (hi - lo).max(0.0);
            k += 1;
        }
    }
    (0..n)
        .map(|k| {
            let output_tokens = tokens.get(k).copied().unwrap_or(0);
            TimeSlice {
                start_s: k as f64,
                output_tokens,
                in_flight: busy[k],
                per_user_output_tps: (busy[k] > 0.0).then(|| output_tokens as f64 / busy[k]),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_request_seconds_per_slice() {
        // Two requests: 0–2 s and 0.5–1 s; 30 tokens in the first second, 10 in the second.
        let s = slices(&[30, 10], &[(1000.0, 3000.0), (1500.0, 2000.0)], 1000.0);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].output_tokens, s[0].in_flight), (30, 1.5));
        assert_eq!(s[0].per_user_output_tps, Some(20.0));
        assert_eq!(
            (s[1].in_flight, s[1].per_user_output_tps),
            (1.0, Some(10.0))
        );
    }
}
