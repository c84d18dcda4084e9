//! `--start-at`: a common wall-clock start for several shards (docs/scale-out.md).
//!
//! Every shard finishes its start-up (tokenizer, calibration, warm-up connections, pre-fill)
//! and then waits until the same wall-clock instant to start its trace clock. The wall clock
//! is read once to map that instant onto the monotonic clock the dispatcher uses, so a clock
//! step during the run does not move the schedule. The host clock's own error, as the kernel's
//! NTP discipline estimates it, is recorded: shards can be no closer to each other than their
//! clocks are.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// When the trace clock starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartAt(pub jiff::Timestamp);

impl StartAt {
    /// RFC 3339 (`2026-11-22T18:00:00Z`, any offset) or Unix seconds (`1795370400`,
    /// fractions allowed).
    pub fn parse(s: &str) -> Result<StartAt, String> {
        let s = s.trim();
        // Unix seconds, read as decimal digits (a float would turn .771 into .770999…).
        let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
        let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if !whole.is_empty() && digits(whole) && digits(frac) && frac.len() <= 9 {
            let secs: i64 = whole.parse().map_err(|e| format!("--start-at {s}: {e}"))?;
            let nanos: i32 = format!("{frac:0<9}").parse().unwrap_or(0);
            return jiff::Timestamp::new(secs, nanos)
                .map(StartAt)
                .map_err(|e| format!("--start-at {s}: {e}"));
        }
        s.parse::<jiff::Timestamp>().map(StartAt).map_err(|e| {
            format!("--start-at {s}: not RFC 3339 (e.g. 2026-11-22T18:00:00Z) or Unix seconds: {e}")
        })
    }

    /// Time from now until the start; `Err(late)` when it has passed.
    pub fn remaining(&self) -> Result<Duration, Duration> {
        let d = self.0.duration_since(jiff::Timestamp::now());
        if d.is_negative() {
            Err(Duration::try_from(-d).unwrap_or_default())
        } else {
            Ok(Duration::try_from(d).unwrap_or_default())
        }
    }

    /// The start on the monotonic clock, or how late it already is.
    pub fn instant(&self) -> Result<Instant, Duration> {
        let now = Instant::now();
        self.remaining().map(|d| now + d)
    }

    /// Milliseconds from the start to now (negative: before it).
    pub fn offset_now_ms(&self) -> f64 {
        jiff::Timestamp::now().duration_since(self.0).as_secs_f64() * 1e3
    }

    /// RFC 3339 with milliseconds.
    pub fn rfc3339(&self) -> String {
        format!("{:.3}", self.0)
    }
}

/// The host clock's state as the kernel's NTP discipline sees it (`adjtimex`, read only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockState {
    /// False when the kernel says the clock is not synchronised (STA_UNSYNC).
    pub synchronised: bool,
    /// Estimated error, microseconds.
    pub est_error_us: i64,
    /// Maximum error, microseconds.
    pub max_error_us: i64,
}

/// Read the clock's estimated error, where the kernel exposes it (Linux).
pub fn clock_state() -> Option<ClockState> {
    #[cfg(target_os = "linux")]
    {
        // adjtimex with `modes` 0 only reads. Hand-written: the libc call is one line and no
        // well-kept crate wraps it without pulling in much more.
        // SAFETY: `tx` is a zeroed, valid `timex` the kernel fills in; it outlives the call.
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        let state = unsafe { libc::adjtimex(&mut tx) };
        if state < 0 {
            return None;
        }
        Some(ClockState {
            synchronised: state != libc::TIME_ERROR && tx.status & libc::STA_UNSYNC == 0,
            est_error_us: tx.esterror,
            max_error_us: tx.maxerror,
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// What the summary says about a common start (`run.start_at`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StartAtReport {
    /// The common start, RFC 3339 UTC.
    pub at: String,
    /// Wall-clock time of this shard's clock start minus the common start, ms.
    pub clock_start_offset_ms: f64,
    /// This shard's first send, ms after the common start (its first request's scheduled
    /// time plus its drift).
    pub first_send_ms: Option<f64>,
    /// How long start-up left before the common start, ms (spent waiting).
    pub waited_ms: f64,
    /// The host clock's error estimate at the start, where the kernel exposes it.
    pub clock: Option<ClockState>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc3339_and_unix_seconds() {
        let a = StartAt::parse("2026-11-22T18:00:00Z").unwrap();
        let b = StartAt::parse("2026-11-22T19:00:00+01:00").unwrap();
        assert_eq!(a, b);
        let c = StartAt::parse(&a.0.as_second().to_string()).unwrap();
        assert_eq!(a, c);
        let d = StartAt::parse(&format!("{}.25", a.0.as_second())).unwrap();
        assert_eq!(d.0.as_millisecond() - a.0.as_millisecond(), 250);
        assert_eq!(a.rfc3339(), "2026-11-22T18:00:00.000Z");
        for bad in ["tomorrow", "-5", "2026-13-01T00:00:00Z", ""] {
            assert!(StartAt::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn past_and_future() {
        let past = StartAt(jiff::Timestamp::now() - jiff::SignedDuration::from_secs(3));
        let late = past.remaining().unwrap_err();
        assert!(late >= Duration::from_secs(3) && late < Duration::from_secs(10));
        assert!(past.offset_now_ms() >= 3000.0);
        let future = StartAt(jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60));
        let left = future.remaining().unwrap();
        assert!(left > Duration::from_secs(59) && left <= Duration::from_secs(60));
        let at = future.instant().unwrap();
        assert!(at > Instant::now() + Duration::from_secs(59));
    }

    #[test]
    fn clock_state_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let c = clock_state().expect("adjtimex");
            assert!(c.max_error_us >= 0 && c.est_error_us >= 0, "{c:?}");
        }
    }
}
