//! The settings of a trace read: how to load it ([`LoadOptions`] and its limits) and what it is
//! reshaped into ([`Reshape`]: `--amplify`, `--retime`, `--sample-sessions`, ...), with their
//! checks. The stages that apply them are `trace/pipeline/` (`reshape.rs` for [`Reshape`]).

use std::path::Path;

use crate::trace::error::TraceError;
use crate::trace::model::TraceFormat;

/// Largest accepted input or output length, in tokens.
pub const MAX_LENGTH_TOKENS: u64 = 10_000_000;

/// Longest accepted line (64 MiB) unless [`LoadOptions::max_line_bytes`] says otherwise.
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;

/// How to load a trace. `Default` detects the format, uses its block size, stops at the first
/// invalid row and keeps every request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadOptions {
    /// Force a format instead of detecting it from the first data line (`--dataset`).
    pub format: Option<TraceFormat>,
    /// Tokens per hash id; `None` = the format's default (mooncake/generic 512, bailian 16).
    pub block_size: Option<usize>,
    /// Skip malformed rows (counted in `stats.skipped_invalid`) instead of failing.
    pub skip_invalid: bool,
    /// Keep requests at rebased trace time `>= start_ms` (ms).
    pub start_ms: Option<f64>,
    /// Keep requests at rebased trace time `< end_ms` (ms).
    pub end_ms: Option<f64>,
    /// Keep at most this many requests (the first ones in replay order, after slicing).
    pub max_requests: Option<usize>,
    /// Longest accepted line in bytes; `None` = [`DEFAULT_MAX_LINE_BYTES`].
    pub max_line_bytes: Option<usize>,
    /// Drop BurstGPT's failed requests (0 response tokens) instead of keeping them with output
    /// length 0 (`--drop-failed`); counted either way.
    pub drop_failed: bool,
    /// What the trace is reshaped into (`--amplify`, `--retime`, ...; `reshape.rs`).
    pub reshape: Reshape,
}

impl LoadOptions {
    /// An error naming `name` when an option is out of range (a block size of 0, a time window
    /// that ends before it starts, ...).
    pub(crate) fn check(&self, name: &str) -> Result<(), TraceError> {
        let bad = |what: String| {
            Err(TraceError::Options {
                path: name.to_owned(),
                what,
            })
        };
        if self.block_size == Some(0) {
            return bad("block size must be at least 1".into());
        }
        if self.max_requests == Some(0) {
            return bad("max requests must be at least 1".into());
        }
        if let Err(what) = self.reshape.check() {
            return bad(what);
        }
        if self.max_line_bytes == Some(0) {
            return bad("max line bytes must be at least 1".into());
        }
        if let Some(s) = self.start_ms {
            if !s.is_finite() || s < 0.0 {
                return bad(format!("start ms must be a finite number >= 0, got {s}"));
            }
        }
        if let Some(e) = self.end_ms {
            if e.is_nan() || e <= 0.0 {
                return bad(format!("end ms must be a number > 0, got {e}"));
            }
        }
        if let (Some(s), Some(e)) = (self.start_ms, self.end_ms) {
            if s >= e {
                return bad(format!("start ms ({s}) must be before end ms ({e})"));
            }
        }
        Ok(())
    }
}

/// Most copies `--amplify` makes (the id spaces above stay below 2^62).
pub const MAX_COPIES: f64 = 1024.0;

/// How arrivals are re-timed (`--retime`, `--rate`, `--burstiness`, `--rate-series`).
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// Exponential gaps between session starts: `rate` session starts per second on average
    /// (a row without a session is a session of one: on a trace without sessions, requests).
    Poisson { rate: f64 },
    /// Gamma-distributed gaps with coefficient of variation `cv` (1 = Poisson; more: burstier).
    Gamma { rate: f64, cv: f64 },
    /// A Poisson process of session starts whose rate follows a piecewise-linear series
    /// (session starts per second over seconds).
    Series(RateSeries),
}

/// A piecewise-linear rate: `(seconds, requests per second)` points, strictly increasing in
/// time; before the first point the first rate holds, after the last the last.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSeries {
    pub points: Vec<(f64, f64)>,
    /// Where it was read from (for messages).
    pub source: String,
}

impl RateSeries {
    /// Reads a rate series file: one `SECONDS RATE` pair a line (whitespace or a comma
    /// between), `#` comments and blank lines ignored; an error names `file:line`.
    pub fn read(path: &Path) -> Result<RateSeries, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read the rate series: {e}", path.display()))?;
        RateSeries::parse(&path.display().to_string(), &text)
    }

    /// Parses the text of a rate series (`name` is used in messages).
    pub fn parse(name: &str, text: &str) -> Result<RateSeries, String> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |what: String| format!("{name}:{}: {what}", i + 1);
            let fields: Vec<&str> = line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|f| !f.is_empty())
                .collect();
            if fields.len() != 2 {
                return Err(bad(format!(
                    "expected two numbers `SECONDS RATE`, found {line:?}"
                )));
            }
            let num = |f: &str, what: &str| {
                f.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| bad(format!("{what} must be a number >= 0, got {f:?}")))
            };
            let (t, r) = (num(fields[0], "the time")?, num(fields[1], "the rate")?);
            if let Some(&(prev, _)) = points.last() {
                if t <= prev {
                    return Err(bad(format!("times must increase: {t} s follows {prev} s")));
                }
            }
            points.push((t, r));
        }
        if points.is_empty() {
            return Err(format!(
                "{name}: the rate series has no `SECONDS RATE` line"
            ));
        }
        if points.iter().all(|&(_, r)| r == 0.0) {
            return Err(format!("{name}: every rate of the series is 0"));
        }
        Ok(RateSeries {
            points,
            source: name.to_owned(),
        })
    }

    /// The time (s) at which the integral of the rate from 0 reaches `area`; `None` when the
    /// series ends at rate 0 before it does.
    pub(crate) fn invert(&self, area: f64) -> Option<f64> {
        let p = &self.points;
        let (t0, r0) = p[0];
        // Before the first point: the first rate from 0.
        let head = r0 * t0;
        if area <= head && r0 > 0.0 {
            return Some(area / r0);
        }
        let mut left = area - head;
        for w in p.windows(2) {
            let ((a, ra), (b, rb)) = (w[0], w[1]);
            let seg = (ra + rb) / 2.0 * (b - a);
            if left <= seg && seg > 0.0 {
                // Solve ra x + (rb - ra) / (2 (b - a)) x^2 = left for x in [0, b - a].
                let k = (rb - ra) / (2.0 * (b - a));
                let x = if k.abs() < 1e-12 {
                    left / ra
                } else {
                    (-ra + (ra * ra + 4.0 * k * left).max(0.0).sqrt()) / (2.0 * k)
                };
                return Some(a + x.clamp(0.0, b - a));
            }
            left -= seg;
        }
        let (tn, rn) = p[p.len() - 1];
        (rn > 0.0).then(|| tn + left / rn)
    }
}

/// What the trace is reshaped into; `Default` leaves it as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Reshape {
    /// `--amplify N`: copies of the trace (a fraction: the last copy is a sampled share of
    /// the sessions).
    pub amplify: Option<f64>,
    /// `--amplify-phase`: copy k >= 1 is shifted by a seeded phase in `[0, this)` ms.
    pub amplify_phase_ms: f64,
    /// `--prefix-scale`: blocks shared by several requests are grown or shrunk by this.
    pub prefix_scale: Option<f64>,
    /// `--prompt-scale`: blocks (and tokens) of one request only are grown or shrunk by this.
    pub prompt_scale: Option<f64>,
    /// `--max-input-length`: longer prompts are cut to it.
    pub max_input_length: Option<u32>,
    /// `--retime`/`--rate-series`: new session start times.
    pub retime: Option<Arrivals>,
    /// `--max-idle-gap`: a session's think time is at most this (ms).
    pub max_idle_gap_ms: Option<f64>,
    /// `--sample-sessions P`: keep each whole session with probability P.
    pub sample_sessions: Option<f64>,
    /// `--infer-sessions`: rows without a session get one inferred from their hash ids (a
    /// request that extends an earlier one is its next turn), before the other stages.
    pub infer_sessions: bool,
    /// `--seed`: every random choice above.
    pub seed: u64,
}

impl Default for Reshape {
    fn default() -> Self {
        Reshape {
            amplify: None,
            amplify_phase_ms: 10_000.0,
            prefix_scale: None,
            prompt_scale: None,
            max_input_length: None,
            retime: None,
            max_idle_gap_ms: None,
            sample_sessions: None,
            infer_sessions: false,
            seed: 0,
        }
    }
}

impl Reshape {
    /// True when nothing is reshaped.
    pub fn is_identity(&self) -> bool {
        *self
            == Reshape {
                seed: self.seed,
                amplify_phase_ms: self.amplify_phase_ms,
                ..Reshape::default()
            }
    }

    /// True when a stage needs the whole trace (it moves rows by more than a reorder window).
    pub fn needs_whole(&self) -> bool {
        self.retime.is_some()
            || self.max_idle_gap_ms.is_some()
            || self.prefix_scale.is_some()
            || self.prompt_scale.is_some()
    }

    /// An error message naming the flag when a value is out of range.
    pub fn check(&self) -> Result<(), String> {
        let positive = |flag: &str, v: Option<f64>| match v {
            Some(x) if !(x.is_finite() && x > 0.0) => {
                Err(format!("{flag} must be a number > 0, got {x}"))
            }
            _ => Ok(()),
        };
        positive("--amplify", self.amplify)?;
        positive("--prefix-scale", self.prefix_scale)?;
        positive("--prompt-scale", self.prompt_scale)?;
        if let Some(a) = self.amplify {
            if a > MAX_COPIES {
                return Err(format!("--amplify must be at most {MAX_COPIES}, got {a}"));
            }
        }
        if !(self.amplify_phase_ms.is_finite() && self.amplify_phase_ms >= 0.0) {
            return Err(format!(
                "--amplify-phase must be a number of seconds >= 0, got {}",
                self.amplify_phase_ms / 1e3
            ));
        }
        if self.max_input_length == Some(0) {
            return Err("--max-input-length must be at least 1".into());
        }
        if let Some(g) = self.max_idle_gap_ms {
            if !(g.is_finite() && g >= 0.0) {
                return Err(format!(
                    "--max-idle-gap must be a number of seconds >= 0, got {}",
                    g / 1e3
                ));
            }
        }
        if let Some(p) = self.sample_sessions {
            if !(p > 0.0 && p <= 1.0) {
                return Err(format!("--sample-sessions must be in (0, 1], got {p}"));
            }
        }
        match &self.retime {
            Some(Arrivals::Poisson { rate }) | Some(Arrivals::Gamma { rate, .. })
                if !(rate.is_finite() && *rate > 0.0) =>
            {
                Err(format!(
                    "--rate must be a number of session starts (requests, on a trace without sessions) per second > 0, got {rate}"
                ))
            }
            Some(Arrivals::Gamma { cv, .. }) if !(cv.is_finite() && *cv > 0.0) => {
                Err(format!("--burstiness must be a number > 0, got {cv}"))
            }
            _ => Ok(()),
        }
    }
}

/// Parses `A..B` (seconds; either side may be empty) into a `(start_ms, end_ms)` window.
pub fn parse_time_window(s: &str) -> Result<(Option<f64>, Option<f64>), String> {
    let (a, b) = s.split_once("..").ok_or_else(|| {
        format!("--time-window takes START..END in seconds (e.g. 600..1200), got {s:?}")
    })?;
    let side = |x: &str, what: &str| -> Result<Option<f64>, String> {
        let x = x.trim();
        if x.is_empty() {
            return Ok(None);
        }
        x.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(|v| Some(v * 1e3))
            .ok_or_else(|| {
                format!("--time-window {s:?}: the {what} must be seconds >= 0, got {x:?}")
            })
    };
    let (start, end) = (side(a, "start")?, side(b, "end")?);
    if let (Some(a), Some(b)) = (start, end) {
        if b <= a {
            return Err(format!(
                "--time-window {s:?}: the end must be after the start"
            ));
        }
    }
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_inverts_its_integral() {
        let s = RateSeries::parse("s", "0 0\n10, 2 # ramp\n\n20 2\n").unwrap();
        // The ramp 0..10 s holds 10 requests, then 2 per second.
        assert!((s.invert(10.0).unwrap() - 10.0).abs() < 1e-9);
        assert!((s.invert(2.5).unwrap() - 5.0).abs() < 1e-9);
        assert!((s.invert(14.0).unwrap() - 12.0).abs() < 1e-9);
        assert!((s.invert(34.0).unwrap() - 22.0).abs() < 1e-9);
        let e = RateSeries::parse("r.txt", "0 1\n5 x\n").unwrap_err();
        assert!(e.starts_with("r.txt:2: the rate must be"), "{e}");
        let e = RateSeries::parse("r.txt", "0 1\n0 2\n").unwrap_err();
        assert!(e.starts_with("r.txt:2: times must increase"), "{e}");
    }

    #[test]
    fn time_windows() {
        assert_eq!(
            parse_time_window("60..120"),
            Ok((Some(60_000.0), Some(120_000.0)))
        );
        assert_eq!(parse_time_window("..5"), Ok((None, Some(5_000.0))));
        assert!(parse_time_window("5..1").is_err());
        assert!(parse_time_window("5").is_err());
    }
}
