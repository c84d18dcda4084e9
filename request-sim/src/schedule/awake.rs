//! Cores kept awake around send times.
//!
//! A virtual machine that halts its idle vCPUs at once (KVM guests with
//! `guest_halt_poll_ns` = 0, as the development VM) wakes them through the hypervisor, which
//! sometimes takes a few hundred microseconds: a burst's first I/O thread then starts late and
//! the whole burst runs slow (docs/performance.md, blitz table). While the dispatcher holds the
//! I/O threads raised (a fraction of a millisecond around each send time, the real-time module),
//! one `SCHED_IDLE` thread per core spins, so the cores are running when the burst wakes its
//! threads; `SCHED_IDLE` yields the core to any other thread at once. Between send times the
//! threads sleep on a condition variable.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

#[derive(Debug, Default)]
struct Shared {
    active: AtomicBool,
    quit: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

/// The spinning threads (one per core); stopped and joined on drop.
#[derive(Debug)]
pub struct KeepAwake {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// Kernel thread ids (for checks).
    tids: Vec<i32>,
}

impl KeepAwake {
    /// One thread pinned to each of `cores`; `None` for no cores or when a thread cannot be
    /// started (the run goes on without). Each thread, once pinned, calls `setup`, which lowers
    /// its scheduling policy (to `SCHED_IDLE`: the caller owns the thread-priority calls) and
    /// returns its kernel thread id.
    pub fn start(cores: &[core_affinity::CoreId], setup: fn() -> i32) -> Option<KeepAwake> {
        if cores.is_empty() {
            return None;
        }
        let shared = Arc::new(Shared::default());
        let mut k = KeepAwake {
            shared: shared.clone(),
            threads: Vec::new(),
            tids: Vec::new(),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        for &core in cores {
            let (s, tx) = (shared.clone(), tx.clone());
            let t = std::thread::Builder::new()
                .name("keep-awake".into())
                .spawn(move || {
                    core_affinity::set_for_current(core);
                    let _ = tx.send(setup());
                    drop(tx);
                    spin_while_active(&s);
                })
                .ok()?;
            k.threads.push(t);
        }
        drop(tx);
        // Wait until every thread is pinned and at SCHED_IDLE (it sends its id then), so none
        // starts up later on a core a send needs; the caller does this before the clock starts.
        k.tids = rx.iter().take(k.threads.len()).collect();
        Some(k)
    }

    /// Threads started.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Kernel thread ids of the threads.
    pub fn tids(&self) -> &[i32] {
        &self.tids
    }

    /// Start spinning.
    pub fn on(&self) {
        let _g = self.shared.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.shared.active.store(true, Ordering::Release);
        self.shared.cv.notify_all();
    }

    /// Stop spinning (the threads go back to sleep).
    pub fn off(&self) {
        self.shared.active.store(false, Ordering::Release);
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        {
            let _g = self.shared.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.quit.store(true, Ordering::Release);
            self.shared.active.store(false, Ordering::Release);
            self.shared.cv.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn spin_while_active(s: &Shared) {
    loop {
        {
            let mut g = s.lock.lock().unwrap_or_else(|p| p.into_inner());
            while !s.active.load(Ordering::Acquire) && !s.quit.load(Ordering::Acquire) {
                g = s.cv.wait(g).unwrap_or_else(|p| p.into_inner());
            }
        }
        if s.quit.load(Ordering::Acquire) {
            return;
        }
        while s.active.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    }
}
