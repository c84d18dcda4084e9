//! `--measure-window START..END | auto`: the statistics over the requests *sent* inside a span
//! of the run (seconds since the run's clock start, the records' `sent_ms / 1000`); the
//! records keep every request. `auto` finds the steady span from the in-flight count
//! (definition in `docs/metrics.md`, "Steady-state window", and on [`steady_window`]).

use serde::{Deserialize, Serialize};

use super::per_record::end_ms;
use crate::record::Record;

/// The window asked for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum MeasureWindow {
    /// `[start_s, end_s)` in seconds of the run.
    Fixed { start_s: f64, end_s: f64 },
    /// The steady span of the in-flight count, found from the records.
    Auto,
}

impl MeasureWindow {
    /// Parse `START..END` (seconds, `START < END`, either may have a fraction; an empty END
    /// is the end of the run) or `auto`.
    pub fn parse(s: &str) -> Result<MeasureWindow, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(MeasureWindow::Auto);
        }
        let bad = || {
            format!(
                "--measure-window {s:?}: expected START..END in seconds of the run (e.g. 30..270, 30..) or auto"
            )
        };
        let (a, b) = t.split_once("..").ok_or_else(bad)?;
        let num = |x: &str| -> Result<f64, String> {
            let v: f64 = x.trim().parse().map_err(|_| bad())?;
            if v.is_finite() && v >= 0.0 {
                Ok(v)
            } else {
                Err(format!(
                    "--measure-window {s:?}: times must be seconds >= 0"
                ))
            }
        };
        let start_s = num(a)?;
        let end_s = if b.trim().is_empty() {
            f64::INFINITY
        } else {
            num(b)?
        };
        if end_s <= start_s {
            return Err(format!("--measure-window {s:?}: END must be after START"));
        }
        Ok(MeasureWindow::Fixed { start_s, end_s })
    }
}

/// The window a summary was computed over: what was asked, the span used, and how many
/// records fell inside and outside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    /// `fixed` or `auto`.
    pub mode: String,
    /// The span used, seconds of the run (`end_s` null: to the end of the run).
    pub start_s: f64,
    pub end_s: Option<f64>,
    /// Records of requests sent inside the span (the statistics' requests).
    pub inside: usize,
    /// Records outside it, never-sent ones included (kept in the records file).
    pub outside: usize,
    /// `auto`: the steady in-flight band `[low, high]` and the median it is around.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub band: Option<(f64, f64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_in_flight: Option<f64>,
}

/// Half-width of the steady band, as a share of the median in-flight count.
pub const BAND: f64 = 0.25;

/// The steady span of a run, from `(sent, end)` of every sent request with a known end (ms
/// since the run's start):
///
/// 1. The run from the first send to the last send is cut into bins of width `w` = 1 s (a
///    twentieth of that span when it is shorter than 20 s).
/// 2. Each bin gets its time-averaged in-flight count: the overlap of every request's
///    `[sent, end)` with the bin, summed, divided by `w`.
/// 3. `m` is the median of the bins' averages; the steady band is `[(1 - 0.25)·m, (1 + 0.25)·m]`.
/// 4. The window runs from the start of the first bin inside the band to the end of the last
///    bin inside the band.
///
/// So the ramp-up (in flight still climbing to its level) and the drain (sends stopped, the
/// last requests finishing) are left out, and a dip in the middle is kept. Errors (as
/// messages): no request with an end, fewer than 3 bins in the band.
pub fn steady_window(spans: &[(f64, f64)]) -> Result<(f64, f64, WindowAuto), String> {
    let first = spans.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let last = spans.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
    if !first.is_finite() || last <= first {
        return Err(
            "--measure-window auto: the records have fewer than two sent requests with an end; nothing to find a steady span in"
                .to_string(),
        );
    }
    let span = last - first;
    let w = if span < 20_000.0 { span / 20.0 } else { 1000.0 };
    let bins = (span / w).ceil().max(1.0) as usize;
    let mut load = vec![0.0f64; bins];
    for &(s, e) in spans {
        if e <= s {
            continue;
        }
        let lo = ((s - first) / w).floor().max(0.0) as usize;
        let hi = (((e - first) / w).ceil() as usize).min(bins);
        for (k, l) in load.iter_mut().enumerate().take(hi).skip(lo) {
            let (b0, b1) = (first + k as f64 * w, first + (k + 1) as f64 * w);
            let overlap = e.min(b1) - s.max(b0);
            if overlap > 0.0 {
                *l += overlap / w;
            }
        }
    }
    let mut sorted = load.clone();
    sorted.sort_by(f64::total_cmp);
    let m = super::samples::percentile_sorted(&sorted, 50.0);
    let (low, high) = ((1.0 - BAND) * m, (1.0 + BAND) * m);
    let inside: Vec<usize> = (0..bins)
        .filter(|&k| load[k] >= low && load[k] <= high)
        .collect();
    if inside.len() < 3 || m <= 0.0 {
        return Err(format!(
            "--measure-window auto: the in-flight count is steady (within ±25% of its median {m:.2}) in only {} of {bins} bins of {:.2} s; the run has no steady span to measure: give START..END",
            inside.len(),
            w / 1000.0
        ));
    }
    let start = first + inside[0] as f64 * w;
    let end = first + (inside[inside.len() - 1] + 1) as f64 * w;
    Ok((
        start,
        end,
        WindowAuto {
            band: (low, high),
            median: m,
        },
    ))
}

/// What `auto` found besides the span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowAuto {
    pub band: (f64, f64),
    pub median: f64,
}

/// `(sent, end)` of every record sent with a known end.
pub fn spans(records: &[Record]) -> Vec<(f64, f64)> {
    records
        .iter()
        .filter_map(|r| Some((r.sent_ms?, end_ms(r)?)))
        .collect()
}

/// Whether a record was sent inside `[start_ms, end_ms)`.
pub fn inside(r: &Record, start_ms: f64, end_ms: f64) -> bool {
    r.sent_ms.is_some_and(|t| t >= start_ms && t < end_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_or_say_why_not() {
        assert_eq!(
            MeasureWindow::parse("30..270"),
            Ok(MeasureWindow::Fixed {
                start_s: 30.0,
                end_s: 270.0
            })
        );
        assert_eq!(
            MeasureWindow::parse("1.5.."),
            Ok(MeasureWindow::Fixed {
                start_s: 1.5,
                end_s: f64::INFINITY
            })
        );
        assert_eq!(MeasureWindow::parse("AUTO"), Ok(MeasureWindow::Auto));
        assert!(MeasureWindow::parse("5..5")
            .unwrap_err()
            .contains("after START"));
        assert!(MeasureWindow::parse("-1..5").unwrap_err().contains(">= 0"));
        assert!(MeasureWindow::parse("5")
            .unwrap_err()
            .contains("START..END"));
    }
}
