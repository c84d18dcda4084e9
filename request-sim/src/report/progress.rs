//! Live progress line on stderr: sent/total, completion rate, in-flight, errors, elapsed.
//!
//! Counting is a relaxed atomic increment, cheap at thousands of requests per second; a
//! separate thread redraws the line about 4 times a second. Disabled (all methods no-ops
//! apart from counting) when not enabled or when stderr is not a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::record::Status;

#[derive(Debug)]
struct Counters {
    /// Requests to be scheduled; 0 = not known yet (a streamed trace).
    total: AtomicU64,
    sent: AtomicU64,
    done: AtomicU64,
    errors: AtomicU64,
    stop: AtomicBool,
    start: Instant,
}

impl Counters {
    fn line(&self, rate: f64) -> String {
        let sent = self.sent.load(Ordering::Relaxed);
        let done = self.done.load(Ordering::Relaxed);
        let errors = self.errors.load(Ordering::Relaxed);
        let elapsed = self.start.elapsed().as_secs();
        let total = self.total.load(Ordering::Relaxed);
        let pct = if total > 0 {
            done as f64 / total as f64 * 100.0
        } else {
            0.0
        };
        let total = if total > 0 {
            total.to_string()
        } else {
            "?".to_string()
        };
        let width = 24usize;
        let filled = ((pct / 100.0) * width as f64).round() as usize;
        let bar: String = "#".repeat(filled.min(width)) + &"-".repeat(width - filled.min(width));
        format!(
            "[{bar}] {done}/{total} {pct:5.1}% | sent {sent} | {rate:7.1} req/s | in-flight {} | errors {errors} | {:02}:{:02}:{:02}",
            sent.saturating_sub(done),
            elapsed / 3600,
            (elapsed / 60) % 60,
            elapsed % 60
        )
    }
}

/// Live progress display. Share it (e.g. in an `Arc`) between the tasks that report.
#[derive(Debug)]
pub struct Progress {
    c: Arc<Counters>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

const REFRESH: Duration = Duration::from_millis(250);

impl Progress {
    /// `total`: requests to be scheduled (0: not known yet, see [`Progress::set_total`]). The
    /// line is drawn only when `enabled` and stderr is a terminal.
    pub fn new(total: u64, enabled: bool) -> Progress {
        let c = Arc::new(Counters {
            total: AtomicU64::new(total),
            sent: AtomicU64::new(0),
            done: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            start: Instant::now(),
        });
        let thread = if enabled && std::io::stderr().is_terminal() {
            let c2 = Arc::clone(&c);
            std::thread::Builder::new()
                .name("progress".into())
                .spawn(move || draw_loop(&c2))
                .ok()
        } else {
            None
        };
        Progress {
            c,
            thread: Mutex::new(thread),
        }
    }

    /// The total, once known (a streamed trace's, at its end).
    pub fn set_total(&self, total: u64) {
        self.c.total.store(total, Ordering::Relaxed);
    }

    /// A request was sent.
    pub fn on_sent(&self) {
        self.c.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// A request ended with `status` (errors are every status but ok and dry run).
    pub fn on_done(&self, status: Status) {
        self.c.done.fetch_add(1, Ordering::Relaxed);
        if !matches!(status, Status::Ok | Status::DryRun) {
            self.c.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// (sent, done, errors) so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.c.sent.load(Ordering::Relaxed),
            self.c.done.load(Ordering::Relaxed),
            self.c.errors.load(Ordering::Relaxed),
        )
    }

    /// Stop the display thread and leave the final line on the terminal. Idempotent.
    pub fn finish(&self) {
        self.c.stop.store(true, Ordering::Relaxed);
        let handle = self.thread.lock().ok().and_then(|mut g| g.take());
        if let Some(h) = handle {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

fn draw_loop(c: &Counters) {
    let mut err = std::io::stderr();
    // Rate over a ~2 s sliding window of (time, done) samples.
    let mut samples: std::collections::VecDeque<(Instant, u64)> = Default::default();
    loop {
        let stopping = c.stop.load(Ordering::Relaxed);
        let now = Instant::now();
        let done = c.done.load(Ordering::Relaxed);
        samples.push_back((now, done));
        while samples.len() > 2 && now.duration_since(samples[0].0) > Duration::from_secs(2) {
            samples.pop_front();
        }
        let (t0, d0) = samples[0];
        let dt = now.duration_since(t0).as_secs_f64();
        let rate = if dt > 0.0 {
            (done - d0) as f64 / dt
        } else {
            0.0
        };
        let _ = write!(err, "\r\x1b[2K{}", c.line(rate));
        let _ = err.flush();
        if stopping {
            let _ = writeln!(err);
            return;
        }
        std::thread::park_timeout(REFRESH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_without_terminal() {
        let p = Progress::new(3, true);
        p.on_sent();
        p.on_sent();
        p.on_done(Status::Ok);
        p.on_done(Status::Timeout);
        assert_eq!(p.counts(), (2, 2, 1));
        assert!(p.c.line(1.0).contains("2/3"));
        let q = Progress::new(0, false);
        q.on_done(Status::Ok);
        assert!(q.c.line(1.0).contains("1/? "), "{}", q.c.line(1.0));
        q.set_total(4);
        assert!(q.c.line(1.0).contains("1/4  25.0%"), "{}", q.c.line(1.0));
        p.finish();
        p.finish();
    }
}
