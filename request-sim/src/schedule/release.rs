//! The release clock: one thread that sends every closed-loop turn at its release instant.
//!
//! A closed-loop turn's release (its parent's completion plus the think time, after its joins)
//! is known only at run time, in the turn's own task ([`super::sessions::SessionGate`]). Each
//! task used to sleep until its release on the async runtime and yield-spin the last two
//! milliseconds there: with agent corpora, whose releases never stop, the I/O threads spun for
//! every request (about 2 CPU-ms each). Now the task hands its instant to this clock and
//! awaits a signal. The clock thread sleeps until just before the earliest instant (parked,
//! so a new earlier instant wakes it), raises the I/O threads to real-time priority, spins the
//! last stretch, and signals every turn due; the raised I/O thread that runs the turn's task
//! then sends it. Only the earliest instant is ever spun for, so the CPU the clock costs
//! grows with the releases, not with the turns waiting.
//!
//! The gate computes the instant and the clock sends it: data still flows one way.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::priority::{IoBoost, Realtime};

/// Longest park without an instant due, so a quit is noticed quickly.
const IDLE_PARK: Duration = Duration::from_millis(20);

/// A turn waiting for its release: ordered by instant, then by arrival.
struct Entry {
    at: Instant,
    seq: u64,
    tx: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

#[derive(Default)]
struct Shared {
    heap: Mutex<BinaryHeap<Reverse<Entry>>>,
    seq: AtomicU64,
    quit: AtomicBool,
    /// The clock thread, to wake it for an earlier instant.
    thread: Mutex<Option<Thread>>,
    stats: Mutex<ReleaseStats>,
}

/// What the clock did, for the summary (`run.releases`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ReleaseStats {
    /// Turns signalled at their release instant.
    pub released: u64,
    /// Wake-ups that signalled at least one turn.
    pub wakeups: u64,
    /// Signals later than their instant: the latest, ms, and how many were over 1 ms.
    pub max_late_ms: f64,
    pub late_over_1ms: u64,
    /// CPU time spent spinning before instants, seconds.
    pub spin_s: f64,
    /// How long before an instant the clock woke up at the end of the run, µs (learnt from
    /// its wake-ups, at most `--spin-us`).
    pub wake_margin_us: f64,
}

/// Where tasks hand in their release instants (cheap to clone).
#[derive(Clone)]
pub struct Releases {
    shared: Arc<Shared>,
}

impl Releases {
    /// Resolves at `at` (as signalled by the clock thread); `Err` if the clock stopped first.
    pub fn at(&self, at: Instant) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let seq = self.shared.seq.fetch_add(1, Ordering::Relaxed);
        let earliest = {
            let mut h = lock(&self.shared.heap);
            h.push(Reverse(Entry { at, seq, tx }));
            h.peek().is_some_and(|e| e.0.seq == seq)
        };
        if earliest {
            if let Some(t) = lock(&self.shared.thread).as_ref() {
                t.unpark();
            }
        }
        rx
    }
}

/// The clock thread; stopped and joined by [`ReleaseClock::finish`] or on drop (turns still
/// waiting then see their signal dropped).
pub struct ReleaseClock {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl ReleaseClock {
    /// Starts the clock thread: pinned to `core` if given, under SCHED_FIFO when `realtime`
    /// permits (as the dispatcher), spinning `spin` before each instant.
    pub fn start(
        realtime: Realtime,
        core: Option<core_affinity::CoreId>,
        spin: Duration,
    ) -> std::io::Result<ReleaseClock> {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("release-clock".into())
            .spawn(move || {
                if let Some(c) = core {
                    core_affinity::set_for_current(c);
                }
                let fifo = realtime.enter_clock();
                run(&s, &realtime, fifo, spin);
            })?;
        *lock(&shared.thread) = Some(thread.thread().clone());
        Ok(ReleaseClock {
            shared,
            thread: Some(thread),
        })
    }

    /// The handle tasks hand their instants to.
    pub fn releases(&self) -> Releases {
        Releases {
            shared: self.shared.clone(),
        }
    }

    /// Stops the thread and returns what it did.
    pub fn finish(mut self) -> ReleaseStats {
        self.stop();
        lock(&self.shared.stats).clone()
    }

    fn stop(&mut self) {
        self.shared.quit.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for ReleaseClock {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The clock thread's loop.
fn run(s: &Shared, realtime: &Realtime, fifo: bool, spin: Duration) {
    // The booster is taken lazily: the dispatcher's real-time check may come after this
    // thread starts, and a turn is released only once the dispatch has begun.
    let mut boost: Option<IoBoost> = None;
    let mut released: u64 = 0;
    let mut spun = Duration::ZERO;
    let mut wake = WakeMargin::new(if fifo { spin } else { spin * 2 });
    while !s.quit.load(Ordering::Acquire) {
        let Some(at) = lock(&s.heap).peek().map(|e| e.0.at) else {
            std::thread::park_timeout(IDLE_PARK);
            continue;
        };
        let margin = wake.margin();
        let now = Instant::now();
        if at > now + margin {
            let wake_at = at - margin;
            std::thread::park_timeout((wake_at - now).min(IDLE_PARK));
            if Instant::now() < wake_at {
                continue; // an earlier instant came in, or the park ended early
            }
            if boost.is_none() {
                boost = realtime.io_boost(false);
            }
            if let Some(b) = boost.as_mut() {
                b.raise();
            }
            wake.woke(Instant::now() - wake_at);
        } else {
            if boost.is_none() {
                boost = realtime.io_boost(false);
            }
            if let Some(b) = boost.as_mut() {
                b.raise();
            }
        }
        let t = Instant::now();
        if !spin_until(s, at) {
            continue;
        }
        spun += t.elapsed();
        released += fire(s, Instant::now());
        if let Some(b) = boost.as_mut() {
            settle(s, b, released);
        }
    }
    lock(&s.stats).spin_s = spun.as_secs_f64();
    lock(&s.stats).wake_margin_us = wake.margin().as_secs_f64() * 1e6;
    if let Some(mut b) = boost {
        b.lower();
    }
    // Turns still waiting see their signal dropped: the run is over.
    lock(&s.heap).clear();
}

/// How long before an instant the clock wakes up (to raise the I/O threads and spin the rest):
/// learnt from its own wake-ups. The clock spins for every release, so the spin is most of its
/// CPU: a fixed margin of `--spin-us` (300 µs) spun 0.2 ms per release, where a wake-up plus
/// the raise under SCHED_FIFO took 35-40 µs (median; p99 70-100 µs) in scripts/bench-agents.sh.
/// The margin is the 90th percentile of the last [`WakeMargin::WINDOW`] wake-ups' overshoots
/// plus [`WakeMargin::SLACK`], between [`WakeMargin::MIN`] and the configured spin. Measured
/// there (one run each, load < 1): the latest overshoot of the window spun 1.79 s in all
/// (margin ~100 µs, release latency p99 0.28 ms), the 90th percentile 0.48 s (p99 0.23 ms),
/// the median 0.30 s (p99 0.26 ms); a wake-up past the margin is late by the difference only.
struct WakeMargin {
    max: Duration,
    recent: [Duration; WakeMargin::WINDOW],
    next: usize,
}

impl WakeMargin {
    const WINDOW: usize = 256;
    const SLACK: Duration = Duration::from_micros(30);
    const MIN: Duration = Duration::from_micros(50);
    /// The overshoot the margin covers: the 90th percentile of the window.
    const QUANTILE: usize = WakeMargin::WINDOW * 9 / 10;

    /// Starts at `max` (the configured spin) until wake-ups have been seen.
    fn new(max: Duration) -> WakeMargin {
        WakeMargin {
            max,
            recent: [max; WakeMargin::WINDOW],
            next: 0,
        }
    }

    fn margin(&self) -> Duration {
        let mut r = self.recent;
        let (_, &mut usual, _) = r.select_nth_unstable(Self::QUANTILE);
        (usual + Self::SLACK).clamp(Self::MIN.min(self.max), self.max)
    }

    /// A wake-up (and raise) that came `late` after it was asked for.
    fn woke(&mut self, late: Duration) {
        self.recent[self.next] = late;
        self.next = (self.next + 1) % Self::WINDOW;
    }
}

/// After a wake-up: lower the I/O threads once the turns signalled so far have run (and
/// [`IoBoost::LINGER`] has passed), unless the next instant comes first. A turn that never
/// runs after its signal (the run stopped meanwhile) must not keep them raised: they are
/// lowered anyway when the next instant is not near.
fn settle(s: &Shared, b: &mut IoBoost, released: u64) {
    let next = || lock(&s.heap).peek().map(|e| e.0.at);
    let cap = Instant::now() + IoBoost::SETTLE_MAX;
    let until = next()
        .map(|n| n.checked_sub(IoBoost::LEAD).unwrap_or(n))
        .map_or(cap, |n| n.min(cap));
    b.settle_released(released, until, &s.quit);
    if b.is_raised() && next().is_none_or(|n| n > Instant::now() + IoBoost::LEAD) {
        b.lower();
    }
}

/// Spins until `at`, yielding between checks (a SCHED_FIFO thread must not hold its core
/// from another of the same priority, the dispatcher's note in `clock.rs`). False when a quit
/// came first.
fn spin_until(s: &Shared, at: Instant) -> bool {
    while Instant::now() < at {
        if s.quit.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

/// Signals every turn due at `now`; returns how many.
fn fire(s: &Shared, now: Instant) -> u64 {
    let mut due = Vec::new();
    {
        let mut h = lock(&s.heap);
        while h.peek().is_some_and(|e| e.0.at <= now) {
            if let Some(Reverse(e)) = h.pop() {
                due.push(e);
            }
        }
    }
    let mut st = lock(&s.stats);
    st.wakeups += u64::from(!due.is_empty());
    let mut sent = 0;
    for e in due {
        let late = now.saturating_duration_since(e.at);
        st.max_late_ms = st.max_late_ms.max(late.as_secs_f64() * 1e3);
        st.late_over_1ms += u64::from(late > Duration::from_millis(1));
        // A task that stopped waiting (the run stopped) dropped its receiver.
        if e.tx.send(()).is_ok() {
            sent += 1;
        }
    }
    st.released += sent;
    sent
}

/// Lock, also after a panic elsewhere (the data are plain queues and counters).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::RealtimeMode;

    #[test]
    fn signals_in_instant_order_never_early() {
        let clock = ReleaseClock::start(
            Realtime::new(RealtimeMode::Off, 10),
            None,
            Duration::from_micros(200),
        )
        .unwrap();
        let r = clock.releases();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let t0 = Instant::now();
        // Handed in out of order; one instant already past.
        let offsets_ms = [30u64, 5, 18, 0, 12];
        let got = rt.block_on(async {
            let mut tasks = Vec::new();
            for &ms in &offsets_ms {
                let at = t0 + Duration::from_millis(ms);
                let rx = r.at(at);
                tasks.push(tokio::spawn(async move {
                    rx.await.unwrap();
                    (ms, Instant::now(), at)
                }));
            }
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.unwrap());
            }
            out
        });
        for (ms, woke, at) in &got {
            assert!(woke >= at, "turn due at {ms} ms woke early");
        }
        let mut by_wake = got.clone();
        by_wake.sort_by_key(|g| g.1);
        let order: Vec<u64> = by_wake.iter().map(|g| g.0).collect();
        assert_eq!(order, vec![0, 5, 12, 18, 30]);
        let st = clock.finish();
        assert_eq!(st.released, 5);
        assert!(st.wakeups >= 1 && st.wakeups <= 5, "{st:?}");
    }

    #[test]
    fn the_wake_margin_follows_the_wake_ups() {
        let us = Duration::from_micros;
        let mut m = WakeMargin::new(us(300));
        assert_eq!(
            m.margin(),
            us(300),
            "the configured spin until wake-ups are seen"
        );
        for _ in 0..WakeMargin::WINDOW {
            m.woke(us(40));
        }
        assert_eq!(m.margin(), us(40) + WakeMargin::SLACK);
        // A few late wake-ups (under 10% of the window) do not move the 90th percentile; many do,
        // up to the configured spin at most.
        for _ in 0..10 {
            m.woke(us(250));
        }
        assert_eq!(m.margin(), us(40) + WakeMargin::SLACK);
        for _ in 0..40 {
            m.woke(us(250));
        }
        assert_eq!(m.margin(), us(280));
        for _ in 0..WakeMargin::WINDOW {
            m.woke(us(900));
        }
        assert_eq!(m.margin(), us(300));
        // Never below the floor.
        for _ in 0..WakeMargin::WINDOW {
            m.woke(us(1));
        }
        assert_eq!(m.margin(), WakeMargin::MIN);
    }

    #[test]
    fn a_stopped_clock_drops_waiting_turns() {
        let clock = ReleaseClock::start(
            Realtime::new(RealtimeMode::Off, 10),
            None,
            Duration::from_micros(200),
        )
        .unwrap();
        let rx = clock
            .releases()
            .at(Instant::now() + Duration::from_secs(3600));
        let st = clock.finish();
        assert_eq!(st.released, 0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(rt.block_on(rx).is_err());
    }
}
