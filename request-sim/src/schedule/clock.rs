//! Precise waiting: sleep until shortly before the deadline, then spin.
//!
//! `thread::sleep` on Linux overshoots by tens to hundreds of microseconds (timer slack,
//! scheduling); spinning the last stretch makes the wake-up land within a few microseconds of
//! the deadline at the cost of at most `spin` of CPU per request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest single sleep, so a stop request is noticed quickly.
const MAX_SLEEP: Duration = Duration::from_millis(20);

/// Wait until `deadline`. Returns `false` if `stop` became true first.
pub fn wait_until(deadline: Instant, spin: Duration, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        let left = deadline - now;
        if left > spin {
            std::thread::sleep((left - spin).min(MAX_SLEEP));
        } else {
            break;
        }
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
    true
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
}
