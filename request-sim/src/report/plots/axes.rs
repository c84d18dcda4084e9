//! Axes: tick positions (round numbers, log decades) and a linear axis with given ticks.

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;

/// Upper axis bound: a little above the maximum, never zero.
pub(super) fn upper(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.05
    } else {
        1.0
    }
}

/// Keep the ascending positions `xs` that are at least `gap` from the previously kept one.
pub(super) fn spaced(xs: &[f64], gap: f64) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    for &x in xs {
        if out.last().is_none_or(|&l| x - l >= gap) {
            out.push(x);
        }
    }
    out
}

/// Round tick positions (1, 2 or 5 × 10^k apart) covering `lo..=hi`, about `n` of them.
pub(super) fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut out = Vec::new();
    let mut k = (lo / step).ceil();
    while k * step <= hi + step * 1e-9 {
        out.push(k * step);
        k += 1.0;
    }
    out
}

/// log10 positions of 1, 2, 5 × 10^k (bold) and 1..9 × 10^k (light) within `lo..=hi` (log10).
pub(super) fn log10_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let (mut bold, mut light) = (Vec::new(), Vec::new());
    for e in (lo.floor() as i32)..=(hi.ceil() as i32) {
        for m in 1..10 {
            let x = (f64::from(m) * 10f64.powi(e)).log10();
            if x < lo - 1e-9 || x > hi + 1e-9 {
                continue;
            }
            light.push(x);
            if matches!(m, 1 | 2 | 5) {
                bold.push(x);
            }
        }
    }
    (bold, light)
}

/// A linear f64 axis with the tick positions given (plotters' `WithKeyPoints` over f64 cannot
/// take a label formatter).
#[derive(Clone)]
pub(super) struct TickedAxis {
    lo: f64,
    hi: f64,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl TickedAxis {
    pub(super) fn new(lo: f64, hi: f64, bold: Vec<f64>, light: Vec<f64>) -> Self {
        TickedAxis {
            lo,
            hi,
            bold,
            light,
        }
    }
}

impl Ranged for TickedAxis {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        if span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let f = ((v - self.lo) / span).clamp(-10.0, 10.0);
        limit.0 + (f64::from(limit.1 - limit.0) * f + 1e-3).floor() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}
