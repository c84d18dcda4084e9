//! Real-time scheduling for the threads that keep the schedule.
//!
//! On a machine whose cores are shared (the server under test, other work, our own producer
//! threads), a thread that must act at a given microsecond waits for a core whenever another
//! task holds it: Linux's fair scheduler lets a running task finish its slice before a woken one
//! runs, and a nice level changes shares, not that wait. On the 2-core development machine that
//! wait was nearly all of the drift above 1 ms (docs/performance.md). Under `SCHED_FIFO` a woken
//! thread preempts every normal task at once.
//!
//! Two kinds of threads need it, differently:
//! - the **dispatcher** hands requests over at their send times; it runs under SCHED_FIFO for
//!   the whole dispatch (it sleeps between sends) and its thread ends with dispatching, so
//!   nothing after it (drain, reports) runs at real-time priority;
//! - the async runtime's **I/O threads** start the request tasks and write the requests. Kept
//!   under SCHED_FIFO all the time they would also preempt the server for every streamed token
//!   they read (one context switch per SSE chunk: +30% CPU at 100 req/s), so the dispatcher
//!   **raises** them to SCHED_FIFO shortly before each send time and **lowers** them back once
//!   every request handed over has started ([`IoBoost`]).
//!
//! Producers and the record writer always stay at normal priority, and the kernel's real-time
//! throttling (by default 5% of every second left to normal tasks) bounds the rest.
//!
//! Needs permission (root, `CAP_SYS_NICE` or `RLIMIT_RTPRIO`, see `ulimit -r`) and Linux. In
//! `auto` mode a refusal is not an error: the run goes on at normal priority and says why.
//!
//! The `libc` calls are used directly (not a thread-priority crate) because the I/O threads are
//! switched by the dispatcher, by thread id, back and forth between SCHED_FIFO and SCHED_OTHER
//! without touching their nice level.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// `--realtime`: whether the dispatcher and I/O threads use `SCHED_FIFO`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RealtimeMode {
    /// Use it when permitted, otherwise run at normal priority (and say so).
    #[default]
    Auto,
    /// Use it; fail at start-up when not permitted.
    On,
    /// Never.
    Off,
}

/// Default `SCHED_FIFO` priority of the I/O threads (the dispatcher runs one above): above every
/// normal task, well below the kernel's threaded interrupt handlers (50).
pub const DEFAULT_RT_PRIORITY: u8 = 10;

/// What the run got, for the summary (`run.realtime`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RealtimeReport {
    /// The `--realtime` setting (`auto`, `on`, `off`).
    pub mode: RealtimeMode,
    /// `fifo` when the dispatcher ran under SCHED_FIFO, else `normal`.
    pub policy: SchedPolicy,
    /// SCHED_FIFO priority of the raised I/O threads, when used (the dispatcher runs one above).
    pub priority: Option<u8>,
    /// I/O threads raised to SCHED_FIFO around send times.
    pub io_threads: usize,
    /// Times the I/O threads were raised, and the seconds they spent raised in total.
    pub io_raises: u64,
    pub io_raised_s: f64,
    /// Why not, when `policy` is `normal` although the mode allowed it.
    pub reason: Option<String>,
    /// Threads that kept the cores awake while the I/O threads were raised (0: none;
    /// `--no-keep-awake`, or no real-time scheduling).
    pub keep_awake_threads: usize,
    /// Raises that kept the cores awake (the dispatcher's before sends, see
    /// [`IoBoost::AWAKE_BURST`]) and the seconds the threads spun in all.
    pub keep_awake_raises: u64,
    pub keep_awake_s: f64,
    /// The server is on this host (`--realtime auto`): what was chosen to leave it its cores
    /// (the I/O threads are not raised and no core is kept awake; the dispatcher still is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_host: Option<String>,
}

/// The scheduling policy the dispatcher ran under.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedPolicy {
    /// `SCHED_FIFO` (real-time).
    Fifo,
    /// The normal time-sharing policy.
    #[default]
    Normal,
}

/// Real-time scheduling for one run: decides, switches threads and remembers what happened.
#[derive(Debug, Clone)]
pub struct Realtime {
    mode: RealtimeMode,
    priority: u8,
    shared: Arc<Shared>,
    /// Cores to keep awake while the I/O threads are raised (read before any thread is
    /// pinned; empty: none).
    awake_cores: Vec<core_affinity::CoreId>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Kernel thread ids of the I/O threads.
    io: Mutex<Vec<i32>>,
    dispatcher_fifo: std::sync::atomic::AtomicBool,
    refused: Mutex<Option<String>>,
    /// Set by [`Realtime::leave_cores_to_local_server`]: the I/O threads are never raised.
    same_host: Mutex<Option<String>>,
    /// Request tasks that have started (first poll), for [`IoBoost::settle`].
    started: AtomicU64,
    raises: AtomicU64,
    raised_ns: AtomicU64,
    /// Keep-awake threads started (for the report).
    awake_threads: std::sync::atomic::AtomicUsize,
    /// Released closed-loop turns whose task has run since ([`IoBoost::lower_if_released`]).
    released_started: AtomicU64,
    /// Raises that kept the cores awake, and the seconds they did.
    awake_raises: AtomicU64,
    awake_ns: AtomicU64,
    /// The I/O threads' raised state, shared by every [`IoBoost`] handle.
    boost: Mutex<BoostState>,
}

/// Who holds the I/O threads raised: they are raised by the first holder and lowered by the
/// last, so the dispatcher (sends) and the release clock (closed-loop turns) never lower them
/// under each other.
#[derive(Debug, Default)]
struct BoostState {
    holders: u32,
    raised_at: Option<Instant>,
    /// When the keep-awake threads were turned on in this raise.
    awake_since: Option<Instant>,
    awake: Option<Arc<super::awake::KeepAwake>>,
}

impl Realtime {
    pub fn new(mode: RealtimeMode, priority: u8) -> Realtime {
        Realtime {
            mode,
            priority: priority.clamp(1, 99),
            shared: Arc::default(),
            awake_cores: Vec::new(),
        }
    }

    /// Keep every core the process may use awake while the I/O threads are raised
    /// ([`super::awake`]). Call before any thread is pinned (a pinned caller sees one core).
    pub fn keep_awake(mut self, on: bool) -> Realtime {
        self.awake_cores = if on && self.mode != RealtimeMode::Off {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        self
    }

    /// Whether threads may be switched at all: tries it once on a short-lived thread (the
    /// caller's own policy is untouched). `Err` explains a refusal.
    pub fn probe(&self) -> Result<(), String> {
        if self.mode == RealtimeMode::Off {
            self.refuse("--realtime off".to_string());
            return Err("--realtime off".to_string());
        }
        let prio = self.priority;
        let r = std::thread::Builder::new()
            .name("rt-probe".into())
            .spawn(move || set_policy(0, Some(prio)))
            .map_err(|e| format!("cannot start a thread: {e}"))?
            .join()
            .unwrap_or_else(|_| Err("probe thread panicked".to_string()));
        if let Err(e) = &r {
            self.refuse(e.clone());
        }
        r
    }

    fn refuse(&self, why: String) {
        let mut r = lock(&self.shared.refused);
        r.get_or_insert(why);
    }

    /// Register the calling thread as an I/O thread (from the runtime's `on_thread_start`). It
    /// stays at normal priority until an [`IoBoost`] raises it.
    pub fn register_io_thread(&self) {
        if let Some(tid) = current_tid() {
            lock(&self.shared.io).push(tid);
        }
    }

    /// Switch the calling (dispatcher) thread to SCHED_FIFO if the mode allows and the system
    /// permits; returns whether it did. A refusal is remembered for the report.
    pub fn enter_dispatcher(&self) -> bool {
        if self.mode == RealtimeMode::Off {
            return false;
        }
        // One above the I/O threads: raised on its core, they must never delay a hand-over.
        match set_policy(0, Some(self.priority.saturating_add(1).min(99))) {
            Ok(()) => {
                self.shared.dispatcher_fifo.store(true, Ordering::Relaxed);
                true
            }
            Err(e) => {
                self.refuse(e);
                false
            }
        }
    }

    /// Switch the calling thread (the release clock, [`super::release`]) to the dispatcher's
    /// priority if the mode allows and the system permits; returns whether it did. A refusal
    /// is the dispatcher's to report.
    pub fn enter_clock(&self) -> bool {
        self.mode != RealtimeMode::Off
            && set_policy(0, Some(self.priority.saturating_add(1).min(99))).is_ok()
    }

    /// Count a request task's start (its first poll).
    pub fn task_started(&self) {
        self.shared.started.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a released closed-loop turn's start (its task runs again after the release).
    pub fn released_started(&self) {
        self.shared.released_started.fetch_add(1, Ordering::Relaxed);
    }

    /// An I/O-thread booster, if the dispatcher itself got SCHED_FIFO (the permission check)
    /// and there are I/O threads to raise. The keep-awake threads are started by the first
    /// call with `start_awake` (the dispatcher's, before the clock starts: starting them took
    /// 4-8 ms) and shared by every booster.
    pub fn io_boost(&self, start_awake: bool) -> Option<IoBoost> {
        if lock(&self.shared.same_host).is_some() {
            return None;
        }
        let have_io = !lock(&self.shared.io).is_empty();
        if !(self.shared.dispatcher_fifo.load(Ordering::Relaxed) && have_io) {
            return None;
        }
        if start_awake {
            let mut st = lock(&self.shared.boost);
            if st.awake.is_none() {
                st.awake = super::awake::KeepAwake::start(&self.awake_cores, idle_thread_setup)
                    .map(Arc::new);
                if let Some(a) = &st.awake {
                    self.shared
                        .awake_threads
                        .store(a.threads(), Ordering::Relaxed);
                }
            }
        }
        Some(IoBoost {
            rt: self.clone(),
            held: false,
        })
    }

    /// The server under test is on this host (`server`: where, for the report): in `auto`
    /// mode, never raise the I/O threads nor keep cores awake, so the server keeps its cores
    /// and its timing. The dispatcher still runs under SCHED_FIFO (it sleeps between sends).
    /// Send and token times stay true without the raise: they are the kernel's (the socket
    /// stamps of `backend::socket`). Returns what was chosen, to say at start-up; `None` when
    /// the mode is not `auto` (`on` keeps the raise: the user asked for it).
    pub fn leave_cores_to_local_server(&mut self, server: &str) -> Option<String> {
        if self.mode != RealtimeMode::Auto {
            return None;
        }
        self.awake_cores.clear();
        let what = format!(
            "the server ({server}) is on this host: the I/O threads stay at normal priority and no core is kept awake, so it keeps its cores (send and token times are the kernel's; --realtime on raises them anyway)"
        );
        *lock(&self.shared.same_host) = Some(what.clone());
        Some(what)
    }

    pub fn report(&self) -> RealtimeReport {
        let fifo = self.shared.dispatcher_fifo.load(Ordering::Relaxed);
        let refused = lock(&self.shared.refused).clone();
        let raises = self.shared.raises.load(Ordering::Relaxed);
        RealtimeReport {
            mode: self.mode,
            policy: if fifo {
                SchedPolicy::Fifo
            } else {
                SchedPolicy::Normal
            },
            priority: fifo.then_some(self.priority),
            io_threads: if fifo && raises > 0 {
                lock(&self.shared.io).len()
            } else {
                0
            },
            io_raises: raises,
            io_raised_s: self.shared.raised_ns.load(Ordering::Relaxed) as f64 / 1e9,
            reason: if fifo { None } else { refused },
            keep_awake_threads: self.shared.awake_threads.load(Ordering::Relaxed),
            keep_awake_raises: self.shared.awake_raises.load(Ordering::Relaxed),
            keep_awake_s: self.shared.awake_ns.load(Ordering::Relaxed) as f64 / 1e9,
            same_host: lock(&self.shared.same_host).clone(),
        }
    }
}

/// Raises the I/O threads to SCHED_FIFO around send times: one handle per thread that keeps
/// a schedule (the dispatcher, the release clock); the threads stay raised while any handle
/// holds them.
#[derive(Debug)]
pub struct IoBoost {
    rt: Realtime,
    /// This handle holds the threads raised.
    held: bool,
}

impl IoBoost {
    /// How long before a send time the I/O threads are raised (a raise takes effect at once:
    /// a raised thread that was waiting for a core preempts whatever holds it).
    pub const LEAD: Duration = Duration::from_micros(500);
    /// How long they stay raised after every request handed over has started: covers the write
    /// of the request by the connection task that the request task wakes.
    pub const LINGER: Duration = Duration::from_micros(300);
    /// After the last request, the longest wait for it to start before lowering.
    pub const SETTLE_MAX: Duration = Duration::from_millis(20);
    /// How often the dispatcher checks whether the requests handed over have started. Every
    /// check preempts the I/O thread on the dispatcher's core (the dispatcher runs one
    /// priority above): checking every 50 µs cost that thread a context switch pair every
    /// 60 µs while it wrote a burst (`perf sched timehist`).
    pub const SETTLE_STEP: Duration = Duration::from_micros(200);
    /// Sends due within the burst window from which a dispatcher's raise also keeps the cores
    /// awake in open-loop runs (docs/performance.md): any send (closed-loop runs:
    /// `schedule::CLOSED_AWAKE_BURST`). Closed-loop turns handed over to wait, and the
    /// release clock's raises, never do: in agent runs the spinning threads cost two cores for
    /// every raise and bought nothing measurable. A threshold of 8 (keep-awake for bursts only)
    /// saved 0.8 CPU-ms per request at 156 req/s but raised open-loop drift max at 400 req/s
    /// from 0.58-1.79 to 1.92-2.79 ms (3 runs each), so every send keeps it.
    pub const AWAKE_BURST: usize = 1;

    pub fn is_raised(&self) -> bool {
        self.held
    }

    /// Raise every I/O thread to SCHED_FIFO (no keep-awake).
    pub fn raise(&mut self) {
        self.raise_with(false);
    }

    /// Raise every I/O thread to SCHED_FIFO; with `awake`, also keep the cores awake until the
    /// last holder lowers them.
    pub fn raise_with(&mut self, awake: bool) {
        if self.held {
            return;
        }
        self.held = true;
        let sh = &self.rt.shared;
        let mut st = lock(&sh.boost);
        st.holders += 1;
        if awake && st.awake_since.is_none() {
            if let Some(a) = &st.awake {
                a.on();
                st.awake_since = Some(Instant::now());
                sh.awake_raises.fetch_add(1, Ordering::Relaxed);
            }
        }
        if st.holders == 1 {
            for &tid in lock(&sh.io).iter() {
                let _ = set_policy(tid, Some(self.rt.priority));
            }
            sh.raises.fetch_add(1, Ordering::Relaxed);
            st.raised_at = Some(Instant::now());
        }
    }

    /// Let go of the I/O threads: the last holder returns them to normal scheduling.
    pub fn lower(&mut self) {
        if !self.held {
            return;
        }
        self.held = false;
        let sh = &self.rt.shared;
        let mut st = lock(&sh.boost);
        st.holders = st.holders.saturating_sub(1);
        if st.holders > 0 {
            return;
        }
        stop_awake(sh, &mut st);
        for &tid in lock(&sh.io).iter() {
            let _ = set_policy(tid, None);
        }
        if let Some(t) = st.raised_at.take() {
            sh.raised_ns
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Lower the I/O threads once `dispatched` request tasks have started and [`Self::LINGER`]
    /// has passed, if that happens by `until` (the next send's raise time); otherwise leave
    /// them raised. Never waits past `until` or a set `stop`.
    pub fn settle(
        &mut self,
        dispatched: usize,
        until: Instant,
        stop: &std::sync::atomic::AtomicBool,
    ) {
        let shared = self.rt.shared.clone();
        self.settle_on(&shared.started, dispatched as u64, until, stop);
    }

    /// For the release clock, which never waits here: lowers the I/O threads if `released`
    /// closed-loop turns have run after their release; whether they are lowered now (or
    /// were not raised by this handle).
    pub fn lower_if_released(&mut self, released: u64) -> bool {
        if self.held && self.rt.shared.released_started.load(Ordering::Relaxed) >= released {
            self.lower();
        }
        !self.held
    }

    fn settle_on(
        &mut self,
        started: &AtomicU64,
        target: u64,
        until: Instant,
        stop: &std::sync::atomic::AtomicBool,
    ) {
        if !self.held {
            return;
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let now = Instant::now();
            if now + Self::LINGER > until {
                return;
            }
            if started.load(Ordering::Relaxed) >= target {
                break;
            }
            std::thread::sleep(Self::SETTLE_STEP);
        }
        // Every request handed over runs on an I/O thread: the cores need not be kept awake
        // for their writes (the raise lingers for those). Off here rather than at the lower,
        // the keep-awake threads spun ~0.35 ms less per raise (docs/performance.md).
        stop_awake(&self.rt.shared, &mut lock(&self.rt.shared.boost));
        std::thread::sleep(Self::LINGER);
        self.lower();
    }
}

/// Turn the keep-awake threads off if a raise turned them on, and account the time they spun.
fn stop_awake(sh: &Shared, st: &mut BoostState) {
    let awake_since = st.awake_since.take();
    if let (Some(a), Some(t)) = (&st.awake, awake_since) {
        a.off();
        sh.awake_ns
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

impl Drop for IoBoost {
    fn drop(&mut self) {
        self.lower();
    }
}

/// Lock, also after a panic elsewhere (the data are plain lists and messages).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The calling thread's scheduling policy, as `fifo`, `rr` or `normal` (for checks and tests).
pub fn current_policy() -> String {
    policy_of(0)
}

/// The scheduling policy of thread `tid` (0 = the calling thread).
pub fn policy_of(tid: i32) -> String {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sched_getscheduler only reads the policy of a thread id; an unknown id gives
        // -1 (ESRCH), no memory is passed.
        let p = unsafe { libc::sched_getscheduler(tid) };
        match p {
            libc::SCHED_FIFO => "fifo".into(),
            libc::SCHED_RR => "rr".into(),
            libc::SCHED_IDLE => "idle".into(),
            p if p < 0 => "unknown".into(),
            _ => "normal".into(),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tid;
        "normal".into()
    }
}

/// The real-time priority of thread `tid` (0 = the calling thread); 0 for normal threads.
pub fn rt_priority_of(tid: i32) -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid, writable sched_param for the duration of the call.
        let r = unsafe { libc::sched_getparam(tid, &mut param) };
        (r == 0).then_some(param.sched_priority)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tid;
        None
    }
}

/// The kernel thread id of the calling thread.
pub fn current_tid() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no arguments and cannot fail.
        Some(unsafe { libc::gettid() })
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Nice level of producer threads: below the dispatcher and the I/O threads (nice 0, or
/// SCHED_FIFO around sends), so more producers than cores never take a core a send needs.
pub const PRODUCER_NICE: i32 = 10;

/// Lower the calling thread to nice level `nice` (Linux nice levels are per thread); a thread
/// already at that level or lower is left alone. Lowering needs no privilege; the thread keeps
/// SCHED_OTHER.
pub fn lower_calling_thread(nice: i32) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let tid = current_tid().unwrap_or(0);
        if nice_of(tid).is_some_and(|now| now >= nice) {
            return Ok(());
        }
        // SAFETY: plain syscall on the calling thread's id; no pointers involved.
        let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
        if r == 0 {
            Ok(())
        } else {
            Err(format!(
                "cannot set nice {nice}: {}",
                std::io::Error::last_os_error()
            ))
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        Err("nice levels per thread are only supported on Linux".to_string())
    }
}

/// Nice level of thread `tid` (0 = the calling thread), if it can be read.
pub fn nice_of(tid: i32) -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // getpriority may legitimately return -1: clear errno first and check it after.
        // SAFETY: errno is thread-local; the syscall takes no pointers.
        unsafe { *libc::__errno_location() = 0 };
        let r = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        (errno == 0).then_some(r)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = tid;
        None
    }
}

/// Switch the calling thread to `SCHED_IDLE` (runs only when nothing else wants the core;
/// needs no permission). Best effort.
pub(crate) fn set_idle_policy() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param that outlives the call; the kernel copies it.
        let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    }
}

/// What a keep-awake thread does once pinned: `SCHED_IDLE`, then its kernel thread id.
fn idle_thread_setup() -> i32 {
    set_idle_policy();
    current_tid().unwrap_or(0)
}

/// Set thread `tid` (0 = the calling thread) to SCHED_FIFO at `priority`, or back to
/// SCHED_OTHER (its nice level is kept) with `None`.
fn set_policy(tid: i32, priority: Option<u8>) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let (policy, prio) = match priority {
            Some(p) => (libc::SCHED_FIFO, i32::from(p)),
            None => (libc::SCHED_OTHER, 0),
        };
        let param = libc::sched_param {
            sched_priority: prio,
        };
        // SAFETY: `param` is a valid sched_param that outlives the call; the kernel copies it.
        let r = unsafe { libc::sched_setscheduler(tid, policy, &param) };
        if r == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        Err(match err.raw_os_error() {
            Some(libc::EPERM) => format!(
                "SCHED_FIFO not permitted: run as root, grant CAP_SYS_NICE, or raise `ulimit -r` to at least {prio}"
            ),
            _ => format!("cannot set SCHED_FIFO priority {prio}: {err}"),
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (tid, priority);
        Err("real-time scheduling is only supported on Linux".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn off_never_switches() {
        let rt = Realtime::new(RealtimeMode::Off, 10);
        assert!(rt.probe().is_err());
        assert!(!rt.enter_dispatcher());
        assert!(rt.io_boost(true).is_none());
        let r = rt.report();
        assert_eq!(r.policy, SchedPolicy::Normal);
        assert_eq!(r.mode, RealtimeMode::Off);
        assert_eq!(current_policy(), "normal");
    }

    /// Switches real threads when the system permits it (root in CI), and otherwise checks the
    /// refusal is reported: either way the policy read back from the kernel must match.
    #[test]
    fn dispatcher_and_io_boost_switch_real_threads() {
        let rt = Realtime::new(RealtimeMode::Auto, 3);
        let permitted = rt.probe().is_ok();
        // An "I/O thread" that waits until told to finish.
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let rt_io = rt.clone();
        let io = std::thread::spawn(move || {
            rt_io.register_io_thread();
            tid_tx.send(current_tid().unwrap()).unwrap();
            let _ = done_rx.recv();
        });
        let io_tid = tid_rx.recv().unwrap();
        let rt_d = rt.clone();
        let stop = AtomicBool::new(false);
        let seen = std::thread::spawn(move || {
            let entered = rt_d.enter_dispatcher();
            let me = current_policy();
            let mut seen = vec![(entered, me)];
            if let Some(mut b) = rt_d.io_boost(true) {
                assert_eq!(
                    policy_of(io_tid),
                    "normal",
                    "registered threads start normal"
                );
                b.raise();
                assert_eq!(rt_priority_of(io_tid), Some(3));
                assert_eq!(rt_priority_of(0), Some(4), "the dispatcher runs one above");
                seen.push((b.is_raised(), policy_of(io_tid)));
                rt_d.task_started();
                b.settle(1, Instant::now() + IoBoost::SETTLE_MAX, &stop);
                seen.push((b.is_raised(), policy_of(io_tid)));
            }
            seen
        })
        .join()
        .unwrap();
        done_tx.send(()).unwrap();
        io.join().unwrap();
        assert_eq!(current_policy(), "normal", "other threads are untouched");
        let r = rt.report();
        if permitted {
            assert_eq!(
                seen,
                vec![
                    (true, "fifo".to_string()),
                    (true, "fifo".to_string()),
                    (false, "normal".to_string())
                ]
            );
            assert_eq!(r.policy, SchedPolicy::Fifo);
            assert_eq!(r.priority, Some(3));
            assert_eq!((r.io_threads, r.io_raises), (1, 1));
            assert!(r.io_raised_s >= IoBoost::LINGER.as_secs_f64());
            assert!(r.reason.is_none());
        } else {
            assert_eq!(seen, vec![(false, "normal".to_string())]);
            assert_eq!(r.policy, SchedPolicy::Normal);
            assert!(r.reason.unwrap().contains("SCHED_FIFO"));
        }
    }

    // The keep-awake threads (schedule::awake) as this module sets them up.
    use super::super::awake::KeepAwake;
    use crate::schedule::eventually;
    use std::time::Duration;

    /// CPU time of thread `tid` of this process, ns (`/proc/self/task/<tid>/schedstat`).
    fn cpu_ns(tid: i32) -> u64 {
        std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    #[test]
    fn threads_idle_at_lowest_priority_spin_only_while_on() {
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        assert!(KeepAwake::start(&[], idle_thread_setup).is_none());
        let Some(k) = KeepAwake::start(&cores, idle_thread_setup) else {
            panic!("no keep-awake threads on {} cores", cores.len());
        };
        assert_eq!(k.threads(), cores.len());
        assert_eq!(k.tids().len(), cores.len());
        for &tid in k.tids() {
            assert_eq!(policy_of(tid), "idle");
        }
        let total = || k.tids().iter().map(|&t| cpu_ns(t)).sum::<u64>();
        // Asleep: no CPU time accrues (two reads 50 ms apart agree).
        let mut last = total();
        assert!(eventually(|| {
            std::thread::sleep(Duration::from_millis(50));
            let now = total();
            std::mem::replace(&mut last, now) == now
        }));
        // On: they spin (SCHED_IDLE still gets idle cores, or a share of busy ones).
        k.on();
        let before = total();
        assert!(eventually(|| total() > before + 5_000_000));
        // Off: they stop again.
        k.off();
        let mut last = total();
        assert!(eventually(|| {
            std::thread::sleep(Duration::from_millis(50));
            let now = total();
            std::mem::replace(&mut last, now) == now
        }));
        drop(k); // joins the threads: must not hang
    }
}
