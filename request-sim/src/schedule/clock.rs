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
}

impl Waiter {
    /// Spin `spin` before each deadline.
    pub fn new(spin: Duration) -> Self {
        Waiter {
            spin,
            spun: Duration::ZERO,
        }
    }

    /// The spin before each deadline.
    pub fn spin(&self) -> Duration {
        self.spin
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
        match sleep_before(deadline, self.spin, stop) {
            Slept::Stopped => return false,
            Slept::Reached => return true,
            Slept::Near => {}
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

/// How [`sleep_before`] ended.
enum Slept {
    /// `stop` became true.
    Stopped,
    /// The deadline passed.
    Reached,
    /// Within the margin of the deadline: spin the rest.
    Near,
}

/// Sleeps until `margin` before `deadline`, in sleeps of at most [`MAX_SLEEP`] so that a stop
/// is noticed quickly.
#[inline]
fn sleep_before(deadline: Instant, margin: Duration, stop: &AtomicBool) -> Slept {
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
            return Slept::Near;
        }
        std::thread::sleep((left - margin).min(MAX_SLEEP));
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
}
