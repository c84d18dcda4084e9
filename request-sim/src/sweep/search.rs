//! The capacity search of `request-sim sweep` without `--scale-factors`: find the highest scale
//! factor at which the server still carries the load (goodput at or above `--target`, or
//! throughput keeping up), in few points.
//!
//! First a bracket: from `--search LO,HI` (or from scale 1), doubling while points are carried
//! and halving while they fall short, until one point carried lies below one fallen short.
//! Then bisection at the geometric mean (load spans orders of magnitude), rounded to three
//! significant digits so point directories read `scale-2.83`, until the bracket's ratio is
//! within `1 + tolerance`. The caller stops at `--max-points` whatever the state.

use serde::{Deserialize, Serialize};

/// Where the search stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// Highest scale factor carried so far.
    lo: Option<f64>,
    /// Lowest scale factor that fell short so far (above `lo`).
    hi: Option<f64>,
    /// Points to run first (`--search LO,HI`), in order.
    pending: Vec<f64>,
    tolerance: f64,
}

/// What `sweep.json` says about a search.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchInfo {
    /// `--search LO,HI`, when given.
    pub start: Option<[f64; 2]>,
    pub tolerance: f64,
    pub max_points: usize,
    /// Highest scale carried and lowest that fell short, when found.
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// The bracket is within the tolerance (else the point budget or an interruption ended it).
    pub converged: bool,
}

/// `x` to three significant digits (`2.8284` -> `2.83`, `0.35355` -> `0.354`).
pub fn round3(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return x;
    }
    let decimals = (2 - x.log10().floor() as i32).max(0) as usize;
    format!("{x:.decimals$}").parse().unwrap_or(x)
}

impl Search {
    /// A search from the bracket `start` (`--search LO,HI`), else from scale 1.
    pub fn new(start: Option<(f64, f64)>, tolerance: f64) -> Search {
        Search {
            lo: None,
            hi: None,
            pending: start.map(|(a, b)| vec![a, b]).unwrap_or_default(),
            tolerance,
        }
    }

    /// The next scale factor to run; `None` when the bracket is within the tolerance (or
    /// cannot be split further at three significant digits).
    pub fn next(&self) -> Option<f64> {
        if let Some(&f) = self.pending.first() {
            return Some(f);
        }
        match (self.lo, self.hi) {
            (None, None) => Some(1.0),
            (Some(l), None) => Some(round3(l * 2.0)),
            (None, Some(h)) => Some(round3(h / 2.0)),
            (Some(l), Some(h)) => {
                if h <= l * (1.0 + self.tolerance) {
                    return None;
                }
                let mid = round3((l * h).sqrt());
                (mid > l && mid < h).then_some(mid)
            }
        }
    }

    /// The point at `f` was carried or not. A result that contradicts the bracket (carried at
    /// or above a point that fell short: the measurement is noisy there) drops the other bound,
    /// so the search moves on from the newest point.
    pub fn record(&mut self, f: f64, carried: bool) {
        self.pending.retain(|&p| p != f);
        if carried {
            // A higher first point is still worth running; lower ones are not.
            self.pending.retain(|&p| p > f);
            if self.hi.is_some_and(|h| h <= f) {
                self.hi = None;
            }
            self.lo = Some(self.lo.map_or(f, |l| l.max(f)));
        } else {
            self.pending.retain(|&p| p < f);
            if self.lo.is_some_and(|l| l >= f) {
                self.lo = None;
            }
            self.hi = Some(self.hi.map_or(f, |h| h.min(f)));
        }
    }

    /// Highest scale carried and lowest fallen short.
    pub fn bracket(&self) -> (Option<f64>, Option<f64>) {
        (self.lo, self.hi)
    }

    /// Whether the bracket is within the tolerance.
    pub fn converged(&self) -> bool {
        matches!((self.lo, self.hi), (Some(_), Some(_))) && self.next().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against a server that carries any scale up to `capacity`, for at most
    /// `max` points; returns the points run and the search.
    fn against(capacity: f64, start: Option<(f64, f64)>, max: usize) -> (Vec<f64>, Search) {
        let mut s = Search::new(start, 0.05);
        let mut run = Vec::new();
        while run.len() < max {
            let Some(f) = s.next() else { break };
            run.push(f);
            s.record(f, f <= capacity);
        }
        (run, s)
    }

    #[test]
    fn brackets_by_doubling_then_bisects_into_the_tolerance() {
        let (run, s) = against(3.0, None, 20);
        assert_eq!(&run[..3], &[1.0, 2.0, 4.0]);
        assert_eq!(run[3], 2.83);
        assert!(s.converged());
        let (lo, hi) = s.bracket();
        let (lo, hi) = (lo.unwrap(), hi.unwrap());
        assert!(lo <= 3.0 && hi > 3.0, "{lo} {hi}");
        assert!(hi <= lo * 1.05, "{lo} {hi}");
        assert!(run.len() <= 8, "{run:?}");
    }

    #[test]
    fn the_defaults_narrow_any_capacity_from_an_eighth_to_eight() {
        for cap in [0.126, 0.3, 0.99, 1.5, 3.7, 7.9] {
            let (run, s) = against(cap, None, 8);
            assert!(s.converged(), "capacity {cap}: {run:?}");
            let (lo, hi) = s.bracket();
            assert!(lo.unwrap() <= cap && hi.unwrap() > cap, "{cap}: {run:?}");
        }
    }

    #[test]
    fn halves_when_the_first_point_falls_short() {
        let (run, s) = against(0.3, None, 20);
        assert_eq!(&run[..3], &[1.0, 0.5, 0.25]);
        let (lo, hi) = s.bracket();
        assert!(lo.unwrap() <= 0.3 && hi.unwrap() > 0.3);
        assert!(s.converged());
    }

    #[test]
    fn a_given_bracket_is_run_first_and_widened_when_wrong() {
        let (run, s) = against(3.0, Some((1.0, 4.0)), 20);
        assert_eq!(&run[..3], &[1.0, 4.0, 2.0]);
        assert!(s.converged());
        // Both ends carried: the search goes up from HI.
        let (run, _) = against(10.0, Some((1.0, 4.0)), 3);
        assert_eq!(run, vec![1.0, 4.0, 8.0]);
        // LO fell short: HI is not run, the search goes down.
        let (run, _) = against(0.2, Some((1.0, 4.0)), 3);
        assert_eq!(run, vec![1.0, 0.5, 0.25]);
    }

    #[test]
    fn the_point_budget_stops_an_unconverged_search() {
        let (run, s) = against(3.0, None, 4);
        assert_eq!(run.len(), 4);
        assert!(!s.converged());
        assert_eq!(s.bracket(), (Some(2.83), Some(4.0)));
    }

    #[test]
    fn noise_drops_the_contradicted_bound() {
        let mut s = Search::new(None, 0.05);
        s.record(1.0, true);
        s.record(2.0, false);
        // Carried above the point that fell short.
        s.record(2.5, true);
        assert_eq!(s.bracket(), (Some(2.5), None));
        assert_eq!(s.next(), Some(5.0));
    }

    #[test]
    fn three_significant_digits() {
        assert_eq!(round3(2.828_427), 2.83);
        assert_eq!(round3(0.353_553), 0.354);
        assert_eq!(round3(14.142), 14.1);
        assert_eq!(round3(141.42), 141.0);
        assert_eq!(round3(1.0), 1.0);
    }
}
