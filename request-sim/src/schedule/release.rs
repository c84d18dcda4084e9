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
//! The hop from the clock's signal to the task running on an I/O thread (a wake-up of a
//! sleeping thread, 60-100 µs at the median on the development VM) was most of each release's
//! lateness. The clock learns it ([`Hops`]) and signals that much ahead; the task waits out
//! the rest of its instant itself ([`Releases::arrive`]), so nothing is sent early.
//!
//! The gate computes the instant and the clock sends it: data still flows one way.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::clock::WakeMargin;
use super::priority::{IoBoost, Realtime};

/// Longest park without an instant due, so a quit is noticed quickly.
const IDLE_PARK: Duration = Duration::from_millis(20);

/// A turn waiting for its release: ordered by instant, then by arrival.
struct Entry {
    at: Instant,
    seq: u64,
    tx: oneshot::Sender<Instant>,
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
    /// How long a signalled turn took to run on an I/O thread (its hops), and the lead the
    /// clock signals ahead of the instants by, ns ([`Hops`]).
    hops: Mutex<Hops>,
    lead_ns: AtomicU64,
    /// Time the turns' tasks waited out after their signal came ahead, ns.
    waited_ns: AtomicU64,
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
    /// How far ahead of an instant the clock signalled at the end of the run, µs: the median
    /// hop from its signal to the turn's task running (learnt, at most 300 µs).
    pub lead_us: f64,
    /// Time the turns' tasks waited out after a signal that came ahead of their instant, in
    /// all, seconds (on the I/O threads, yielding to their other tasks).
    pub waited_out_s: f64,
}

/// Where tasks hand in their release instants (cheap to clone).
#[derive(Clone)]
pub struct Releases {
    shared: Arc<Shared>,
}

impl Releases {
    /// Resolves shortly before `at` (signalled by the clock thread the learnt hop ahead, so
    /// that the task runs at about `at`) with the instant of the signal; `Err` if the clock
    /// stopped first. The task then calls [`Self::arrive`], which waits out what is left of
    /// `at`.
    pub fn at(&self, at: Instant) -> oneshot::Receiver<Instant> {
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

    /// The task of a turn signalled at `signalled` runs: it reports its hop (the clock learns
    /// its lead from them) and waits out what is left until `at`, yielding to the other tasks
    /// of its I/O thread between checks.
    pub async fn arrive(&self, signalled: Instant, at: Instant) {
        let now = Instant::now();
        let lead = lock(&self.shared.hops).add(now - signalled);
        if let Some(lead) = lead {
            let ns = lead.as_nanos() as u64;
            self.shared.lead_ns.store(ns, Ordering::Relaxed);
        }
        if now >= at {
            return;
        }
        while Instant::now() < at {
            tokio::task::yield_now().await;
        }
        let waited = now.elapsed().as_nanos() as u64;
        self.shared.waited_ns.fetch_add(waited, Ordering::Relaxed);
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
        let mut st = lock(&self.shared.stats).clone();
        st.waited_out_s = self.shared.waited_ns.load(Ordering::Relaxed) as f64 / 1e9;
        st
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
    let max = if fifo { spin } else { spin * 2 };
    let mut wake = WakeMargin::new(max, WakeMargin::MEDIAN);
    // After a release: when to see whether the I/O threads can be lowered.
    let mut settle: Option<Settle> = None;
    while !s.quit.load(Ordering::Acquire) {
        let lead = Duration::from_nanos(s.lead_ns.load(Ordering::Relaxed));
        let next = lock(&s.heap)
            .peek()
            .map(|e| e.0.at.checked_sub(lead).unwrap_or(e.0.at));
        if let (Some(st), Some(b)) = (settle, boost.as_mut()) {
            settle = st.check(b, released, next);
        }
        let check_at = settle.map(|st| st.at);
        let Some(at) = next else {
            park_until(check_at.unwrap_or_else(|| Instant::now() + IDLE_PARK));
            continue;
        };
        let wake_at = at.checked_sub(wake.margin()).unwrap_or(at);
        let parked = Instant::now() < wake_at;
        if parked {
            park_until(check_at.map_or(wake_at, |c| c.min(wake_at)));
            if Instant::now() < wake_at {
                continue; // a lowering check, an earlier instant, or the park ended early
            }
        }
        if boost.is_none() {
            boost = realtime.io_boost(false);
        }
        if let Some(b) = boost.as_mut() {
            b.raise();
        }
        if parked {
            // The margin covers the wake-up and the raise.
            wake.woke(Instant::now() - wake_at);
        }
        let t = Instant::now();
        if !spin_until(s, at) {
            continue;
        }
        spun += t.elapsed();
        released += fire(s, Instant::now(), lead);
        settle = boost.is_some().then(|| Settle::after_release(lead));
    }
    lock(&s.stats).spin_s = spun.as_secs_f64();
    lock(&s.stats).wake_margin_us = wake.margin().as_secs_f64() * 1e6;
    lock(&s.stats).lead_us = s.lead_ns.load(Ordering::Relaxed) as f64 / 1e3;
    if let Some(mut b) = boost {
        b.lower();
    }
    // Turns still waiting see their signal dropped: the run is over.
    lock(&s.heap).clear();
}

/// Parks until `until` at the longest ([`IDLE_PARK`] at most, so a quit is noticed), or
/// until a new earlier instant unparks the thread.
fn park_until(until: Instant) {
    let left = until.saturating_duration_since(Instant::now());
    if !left.is_zero() {
        std::thread::park_timeout(left.min(IDLE_PARK));
    }
}

/// Lowering the I/O threads after a release, without waiting for it: the clock goes back to
/// its loop and looks again at `at`. The turns signalled run at their instant (a lead after
/// the signal) and write their requests within [`IoBoost::LINGER`]; the threads are lowered
/// once they have run, unless the next instant comes within [`IoBoost::LEAD`] (they stay
/// raised for it), and at the latest [`IoBoost::SETTLE_MAX`] after the release (a turn that
/// never runs, the run having stopped, must not keep them raised). Waiting for this in
/// sleeps of [`IoBoost::SETTLE_STEP`] after every release cost the clock two or three more
/// wake-ups a release.
#[derive(Debug, Clone, Copy)]
struct Settle {
    at: Instant,
    give_up: Instant,
}

impl Settle {
    fn after_release(lead: Duration) -> Settle {
        let now = Instant::now();
        Settle {
            at: now + lead + IoBoost::LINGER,
            give_up: now + IoBoost::SETTLE_MAX,
        }
    }

    /// At or after `at`: lower if the turns released so far have run (or it is time to give
    /// up), unless the `next` signal is near. The settle still to come, if any.
    fn check(self, b: &mut IoBoost, released: u64, next: Option<Instant>) -> Option<Settle> {
        let now = Instant::now();
        if now < self.at {
            return Some(self);
        }
        if next.is_some_and(|n| n <= now + IoBoost::LEAD) {
            return None; // raised for the next release, which settles again
        }
        if b.lower_if_released(released) {
            return None;
        }
        if now >= self.give_up {
            b.lower();
            return None;
        }
        Some(Settle {
            at: now + IoBoost::SETTLE_STEP,
            ..self
        })
    }
}

/// The hops of the last [`Hops::WINDOW`] releases (from the clock's signal to the turn's task
/// running on an I/O thread) and the lead they give: the clock signals a turn that long ahead
/// of its instant and the task waits out the rest ([`Releases::arrive`]), so a release is late only by
/// the part of its hop beyond the lead.
struct Hops {
    recent: [Duration; Hops::WINDOW],
    next: usize,
    seen: usize,
}

impl Default for Hops {
    fn default() -> Hops {
        Hops {
            recent: [Duration::ZERO; Hops::WINDOW],
            next: 0,
            seen: 0,
        }
    }
}

impl Hops {
    const WINDOW: usize = 256;
    /// The longest lead (a hop longer than this is the machine's, not the wake-up's).
    const MAX: Duration = Duration::from_micros(300);
    /// The lead is recomputed every this many hops.
    const EVERY: usize = 16;

    /// The hop the lead covers: the median of the window.
    const QUANTILE: usize = Hops::WINDOW / 2;

    /// Adds a hop; every [`Self::EVERY`] hops, the new lead.
    fn add(&mut self, hop: Duration) -> Option<Duration> {
        self.recent[self.next] = hop;
        self.next = (self.next + 1) % Self::WINDOW;
        self.seen += 1;
        if self.seen < Self::WINDOW || !self.seen.is_multiple_of(Self::EVERY) {
            return None;
        }
        let mut r = self.recent;
        let (_, &mut q, _) = r.select_nth_unstable(Self::QUANTILE);
        Some(q.min(Self::MAX))
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

/// Signals every turn due at `now + lead`; returns how many.
fn fire(s: &Shared, now: Instant, lead: Duration) -> u64 {
    let mut due = Vec::new();
    {
        let mut h = lock(&s.heap);
        while h.peek().is_some_and(|e| e.0.at <= now + lead) {
            if let Some(Reverse(e)) = h.pop() {
                due.push(e);
            }
        }
    }
    let mut st = lock(&s.stats);
    st.wakeups += u64::from(!due.is_empty());
    let mut sent = 0;
    for e in due {
        let late = (now + lead).saturating_duration_since(e.at);
        st.max_late_ms = st.max_late_ms.max(late.as_secs_f64() * 1e3);
        st.late_over_1ms += u64::from(late > Duration::from_millis(1));
        // A task that stopped waiting (the run stopped) dropped its receiver.
        if e.tx.send(now).is_ok() {
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

    /// A clock at normal priority (tests need no real-time permission), spinning 200 µs.
    fn test_clock() -> ReleaseClock {
        ReleaseClock::start(
            Realtime::new(RealtimeMode::Off, 10),
            None,
            Duration::from_micros(200),
        )
        .unwrap()
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn signals_in_instant_order_never_early() {
        let clock = test_clock();
        let r = clock.releases();
        let rt = runtime();
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
    fn the_lead_is_the_median_hop_of_a_full_window() {
        let us = Duration::from_micros;
        let mut h = Hops::default();
        let hop = |i: usize| us(10 + (i * 7 % 100) as u64);
        for i in 0..Hops::WINDOW - 1 {
            assert_eq!(h.add(hop(i)), None, "no lead before the window is full");
        }
        let mut all: Vec<Duration> = (0..Hops::WINDOW).map(hop).collect();
        all.sort();
        assert_eq!(h.add(hop(Hops::WINDOW - 1)), Some(all[Hops::WINDOW / 2]));
        // Recomputed every EVERY hops only, and never past MAX.
        let mut last = None;
        for _ in 0..Hops::WINDOW {
            if let Some(l) = h.add(us(5_000)) {
                last = Some(l);
            }
        }
        assert_eq!(last, Some(Hops::MAX));
    }

    #[test]
    fn a_turn_signalled_ahead_waits_out_its_instant() {
        let clock = test_clock();
        // As if the hops had been 20 ms: the clock signals 20 ms ahead (a normal-priority
        // clock on a busy test machine may wake milliseconds late; the checks leave 10 ms).
        clock.shared.lead_ns.store(20_000_000, Ordering::Relaxed);
        let r = clock.releases();
        let rt = runtime();
        let at = Instant::now() + Duration::from_millis(60);
        let signalled = rt.block_on(async {
            let signalled = r.at(at).await.unwrap();
            r.arrive(signalled, at).await;
            assert!(Instant::now() >= at, "sent before its instant");
            signalled
        });
        assert!(
            signalled < at - Duration::from_millis(10),
            "signalled ahead"
        );
        let st = clock.finish();
        assert_eq!(st.released, 1);
        assert!(st.waited_out_s > 0.0, "{st:?}");
        assert_eq!(st.lead_us, 20_000.0);
    }

    #[test]
    fn a_stopped_clock_drops_waiting_turns() {
        let clock = test_clock();
        let rx = clock
            .releases()
            .at(Instant::now() + Duration::from_secs(3600));
        let st = clock.finish();
        assert_eq!(st.released, 0);
        let rt = runtime();
        assert!(rt.block_on(rx).is_err());
    }
}
