//! Precise waiting: sleep until shortly before the deadline, then spin.
//!
//! `thread::sleep` on Linux overshoots by tens to hundreds of microseconds on a quiet machine
//! (timer slack, scheduling); spinning the last stretch makes the wake-up land within a few
//! microseconds of the deadline at the cost of at most `spin` of CPU per wait. On a machine
//! whose cores are busy with other work a woken (or spinning) thread can wait milliseconds for
//! its core; no spin length fixes that (see docs/performance.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest single sleep, so a stop request is noticed quickly.
const MAX_SLEEP: Duration = Duration::from_millis(20);

/// Wait until `deadline`. Returns `false` if `stop` became true first.
pub fn wait_until(deadline: Instant, spin: Duration, stop: &AtomicBool) -> bool {
    Waiter::new(spin).wait_until(deadline, stop)
}

/// A sleep-then-spin waiter that accounts for the time it spins.
#[derive(Debug, Clone)]
pub struct Waiter {
    spin: Duration,
    spun: Duration,
    /// With [`Waiter::learning`]: the margin learnt from the wake-ups so far.
    learnt: Option<WakeMargin>,
}

impl Waiter {
    /// Spin `spin` before each deadline.
    pub fn new(spin: Duration) -> Self {
        Waiter {
            spin,
            spun: Duration::ZERO,
            learnt: None,
        }
    }

    /// Spin before each deadline what its own wake-ups overshoot (at most `spin`), as the
    /// release clock does ([`WakeMargin`]).
    pub fn learning(spin: Duration) -> Self {
        Waiter {
            learnt: Some(WakeMargin::new(spin, WakeMargin::P90)),
            ..Waiter::new(spin)
        }
    }

    /// The spin before the next deadline.
    pub fn spin(&self) -> Duration {
        self.learnt.as_ref().map_or(self.spin, WakeMargin::margin)
    }

    /// Time spent spinning so far.
    pub fn spun(&self) -> Duration {
        self.spun
    }

    /// Sleep (no spin) until about `deadline`, for waits that need no precision. Returns
    /// `false` if `stop` became true first.
    pub fn sleep_until(&self, deadline: Instant, stop: &AtomicBool) -> bool {
        // Without a margin the sleep lasts until the deadline or the stop.
        !matches!(sleep_before(deadline, Duration::ZERO, stop), Slept::Stopped)
    }

    /// Wait until `deadline`. Returns `false` if `stop` became true first.
    pub fn wait_until(&mut self, deadline: Instant, stop: &AtomicBool) -> bool {
        let margin = self.spin();
        match sleep_before(deadline, margin, stop) {
            Slept::Stopped => return false,
            Slept::Reached => return true,
            Slept::Near { slept } => {
                // Only a wake-up from a sleep tells how late wake-ups come.
                if let (true, Some(l)) = (slept, self.learnt.as_mut()) {
                    let asked = deadline.checked_sub(margin).unwrap_or(deadline);
                    l.woke(Instant::now().saturating_duration_since(asked));
                }
            }
        }
        let t = Instant::now();
        while Instant::now() < deadline {
            // Under real-time scheduling a spinning thread holds its core until the deadline:
            // another thread of the same priority there (another replay's dispatcher, in this
            // process or in another shard on the same host) would wait behind every spin, and
            // a dispatcher sending back-to-back spins almost all the time (measured: a 500 ms
            // stall of a second replay's dispatcher). Yielding between two checks lets it run;
            // uncontended, the call returns at once (about a microsecond).
            std::thread::yield_now();
        }
        self.spun += t.elapsed();
        true
    }
}

/// How long before an instant a thread wakes up (to raise the I/O threads and spin the rest):
/// learnt from its own wake-ups (the release clock; the dispatcher of closed-loop runs,
/// [`Waiter::learning`]). The clock spins for every release, so the spin is most of its
/// CPU: a fixed margin of `--spin-us` (300 µs) spun 0.2 ms per release, where a wake-up plus
/// the raise under SCHED_FIFO took 35-40 µs (median; p99 70-100 µs) in scripts/bench-agents.sh.
/// The margin is a percentile of the last [`WakeMargin::WINDOW`] wake-ups' overshoots plus
/// [`WakeMargin::SLACK`], between [`WakeMargin::MIN`] and the configured spin: the 90th
/// ([`WakeMargin::P90`]) for the dispatcher, the median ([`WakeMargin::MEDIAN`]) for the release
/// clock. Measured there (one run each, load < 1, before the clock signalled ahead): the latest
/// overshoot of the window spun 1.79 s in all (margin ~100 µs, release latency p99 0.28 ms),
/// the 90th percentile 0.48 s (p99 0.23 ms), the median 0.30 s (p99 0.26 ms); a wake-up past
/// the margin is late by the difference only. With the clock's signal ahead of the hop to the
/// I/O thread ([`super::release`]), its spin was the largest CPU cost left to it (0.6 s of
/// 7 s a run), so it takes the median.
#[derive(Debug, Clone)]
pub(super) struct WakeMargin {
    max: Duration,
    recent: [Duration; WakeMargin::WINDOW],
    next: usize,
    quantile: usize,
}

impl WakeMargin {
    const WINDOW: usize = 256;
    const SLACK: Duration = Duration::from_micros(30);
    const MIN: Duration = Duration::from_micros(50);
    /// The overshoot the margin covers: the 90th percentile of the window.
    pub(super) const P90: usize = WakeMargin::WINDOW * 9 / 10;
    /// ... or the median.
    pub(super) const MEDIAN: usize = WakeMargin::WINDOW / 2;

    /// Starts at `max` (the configured spin) until wake-ups have been seen; covers the
    /// `quantile`-th smallest overshoot of the window ([`Self::P90`], [`Self::MEDIAN`]).
    pub(super) fn new(max: Duration, quantile: usize) -> WakeMargin {
        WakeMargin {
            max,
            recent: [max; WakeMargin::WINDOW],
            next: 0,
            quantile: quantile.min(WakeMargin::WINDOW - 1),
        }
    }

    pub(super) fn margin(&self) -> Duration {
        let mut r = self.recent;
        let (_, &mut usual, _) = r.select_nth_unstable(self.quantile);
        (usual + Self::SLACK).clamp(Self::MIN.min(self.max), self.max)
    }

    /// A wake-up (and raise) that came `late` after it was asked for.
    pub(super) fn woke(&mut self, late: Duration) {
        self.recent[self.next] = late;
        self.next = (self.next + 1) % Self::WINDOW;
    }
}

/// How [`sleep_before`] ended.
enum Slept {
    /// `stop` became true.
    Stopped,
    /// The deadline passed.
    Reached,
    /// Within the margin of the deadline: spin the rest. `slept`: after a sleep (not on entry).
    Near { slept: bool },
}

/// Sleeps until `margin` before `deadline`, in sleeps of at most [`MAX_SLEEP`] so that a stop
/// is noticed quickly.
#[inline]
fn sleep_before(deadline: Instant, margin: Duration, stop: &AtomicBool) -> Slept {
    let mut slept = false;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Slept::Stopped;
        }
        let now = Instant::now();
        if now >= deadline {
            return Slept::Reached;
        }
        let left = deadline - now;
        if left <= margin {
            return Slept::Near { slept };
        }
        std::thread::sleep((left - margin).min(MAX_SLEEP));
        slept = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_early_and_stoppable() {
        let stop = AtomicBool::new(false);
        for ms in [0u64, 1, 3] {
            let d = Instant::now() + Duration::from_millis(ms);
            assert!(wait_until(d, Duration::from_micros(300), &stop));
            assert!(Instant::now() >= d);
        }
        stop.store(true, Ordering::Relaxed);
        let t = Instant::now();
        assert!(!wait_until(
            t + Duration::from_secs(10),
            Duration::from_micros(300),
            &stop
        ));
        assert!(t.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn waiter_counts_spin() {
        let stop = AtomicBool::new(false);
        // A spin longer than the wait: all of it is spun.
        let mut w = Waiter::new(Duration::from_millis(50));
        let d = Instant::now() + Duration::from_millis(2);
        assert!(w.wait_until(d, &stop));
        assert!(Instant::now() >= d);
        assert!(w.spun() > Duration::ZERO);
        assert_eq!(w.spin(), Duration::from_millis(50));
        // A spin shorter than the wait spins at most about the spin (a late wake-up from the
        // sleep may leave nothing to spin).
        let mut w = Waiter::new(Duration::from_micros(500));
        assert!(w.wait_until(Instant::now() + Duration::from_millis(2), &stop));
        assert!(w.spun() < Duration::from_secs(1));
    }

    /// `n` wake-ups, each `late`.
    fn woke(m: &mut WakeMargin, n: usize, late: Duration) {
        for _ in 0..n {
            m.woke(late);
        }
    }

    #[test]
    fn the_wake_margin_follows_the_wake_ups() {
        let us = Duration::from_micros;
        let full = WakeMargin::WINDOW;
        let mut m = WakeMargin::new(us(300), WakeMargin::P90);
        assert_eq!(
            m.margin(),
            us(300),
            "the configured spin until wake-ups are seen"
        );
        woke(&mut m, full, us(40));
        assert_eq!(m.margin(), us(40) + WakeMargin::SLACK);
        // A few late wake-ups (under 10% of the window) do not move the 90th percentile; many do,
        // up to the configured spin at most.
        woke(&mut m, 10, us(250));
        assert_eq!(m.margin(), us(40) + WakeMargin::SLACK);
        woke(&mut m, 40, us(250));
        assert_eq!(m.margin(), us(280));
        woke(&mut m, full, us(900));
        assert_eq!(m.margin(), us(300));
        // Never below the floor.
        woke(&mut m, full, us(1));
        assert_eq!(m.margin(), WakeMargin::MIN);
        // The median: a hundred late wake-ups of 256 do not move it, 140 do.
        let mut m = WakeMargin::new(us(300), WakeMargin::MEDIAN);
        woke(&mut m, full, us(40));
        woke(&mut m, 100, us(250));
        assert_eq!(m.margin(), us(40) + WakeMargin::SLACK);
        woke(&mut m, 40, us(250));
        assert_eq!(m.margin(), us(280));
    }

    #[test]
    fn a_learning_waiter_is_never_early_and_keeps_its_spin_in_bounds() {
        let stop = AtomicBool::new(false);
        let max = Duration::from_micros(300);
        let mut w = Waiter::learning(max);
        assert_eq!(w.spin(), max, "the configured spin before any wake-up");
        // Each wait that woke from its sleep before the deadline records how late it woke; a
        // wait whose sleep overshot the deadline (a loaded machine) records nothing, so wait up
        // to 50 times for 4 records.
        let recorded = |w: &Waiter| w.learnt.as_ref().map_or(0, |l| l.next);
        for _ in 0..50 {
            let d = Instant::now() + Duration::from_millis(5);
            assert!(w.wait_until(d, &stop));
            assert!(Instant::now() >= d, "woke early");
            if recorded(&w) >= 4 {
                break;
            }
        }
        assert!(
            recorded(&w) >= 4,
            "{} wake-ups recorded of 50 waits",
            recorded(&w)
        );
        let spin = w.spin();
        assert!(spin >= WakeMargin::MIN && spin <= max, "{spin:?}");
        // A waiter that does not learn keeps its spin.
        let mut fixed = Waiter::new(max);
        assert!(fixed.wait_until(Instant::now() + Duration::from_millis(2), &stop));
        assert_eq!(fixed.spin(), max);
    }
}
