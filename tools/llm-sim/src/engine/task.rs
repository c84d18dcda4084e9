//! The engine as a tokio task on the server's runtime: requests and commands come in over an
//! unbounded channel ([`EngineHandle`]); each step the loop picks the work, sleeps until the
//! step's simulated duration (divided by the speedup) has passed, then applies it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::progress::{NewRequest, ABORTED};
use super::scheduler::{Engine, Seq};
use crate::config::SimConfig;
use crate::kv_events;
use crate::metrics::Metrics;

/// Most wall time by which the engine's step clock may trail the wall clock and catch up.
const MAX_CATCH_UP: Duration = Duration::from_secs(1);

/// What the HTTP side sends the engine.
enum EngineMsg {
    Request(NewRequest),
    /// Drop every cached block (vLLM's `reset_prefix_cache`); answers false, changing nothing,
    /// while running sequences hold blocks.
    ResetPrefixCache(oneshot::Sender<bool>),
    /// The hashes of every cached block, sorted (for tests and KV-event consumers' checks).
    CachedHashes(oneshot::Sender<Vec<u64>>),
}

/// The sending side of the engine.
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::UnboundedSender<EngineMsg>,
}

impl EngineHandle {
    /// Queues a request; false if the engine has stopped.
    pub fn submit(&self, req: NewRequest) -> bool {
        self.tx.send(EngineMsg::Request(req)).is_ok()
    }

    /// Empties the prefix cache between steps; `None` if the engine has stopped, `Some(false)`
    /// if blocks were in use (as vLLM, nothing is reset then).
    pub async fn reset_prefix_cache(&self) -> Option<bool> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(EngineMsg::ResetPrefixCache(tx)).ok()?;
        rx.await.ok()
    }

    /// The hashes of every block in the prefix cache, sorted (between steps); `None` if the
    /// engine has stopped.
    pub async fn cached_hashes(&self) -> Option<Vec<u64>> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(EngineMsg::CachedHashes(tx)).ok()?;
        rx.await.ok()
    }
}

/// Starts the scheduler loop on the current tokio runtime.
pub fn spawn_engine(
    cfg: &SimConfig,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
    kv_events: Option<mpsc::UnboundedSender<kv_events::Batch>>,
) -> (EngineHandle, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut engine = Engine::new(cfg, metrics);
    if kv_events.is_some() {
        engine.pool.record_events();
    }
    engine.kv_events = kv_events;
    let task = tokio::spawn(engine.run(rx, shutdown));
    (EngineHandle { tx }, task)
}

impl Engine {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<EngineMsg>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        // When the next step starts on the simulated GPU: the previous step's deadline while
        // the engine stays busy, so the timer's late wake-ups (tokio rounds up to 1 ms) do not
        // add up; now, after an idle wait.
        let mut next_start = Instant::now();
        loop {
            if *shutdown.borrow() {
                break;
            }
            if self.running.is_empty() && self.waiting.is_empty() {
                tokio::select! {
                    msg = rx.recv() => match msg {
                        Some(m) => self.handle(m),
                        None => break,
                    },
                    _ = shutdown.changed() => break,
                }
                next_start = Instant::now();
            }
            while let Ok(m) = rx.try_recv() {
                self.handle(m);
            }
            let cost_us = self.schedule();
            self.publish_gauges();
            if self.step.is_empty() {
                // Nothing could run (e.g. everything was cancelled); wait for news.
                tokio::select! {
                    msg = rx.recv() => match msg {
                        Some(m) => self.handle(m),
                        None => break,
                    },
                    _ = tokio::time::sleep(Duration::from_millis(5)) => {}
                    _ = shutdown.changed() => break,
                }
                next_start = Instant::now();
                continue;
            }
            // A backlog longer than MAX_CATCH_UP (the process was starved of CPU) is dropped
            // rather than replayed as a burst of instant steps.
            let now = Instant::now();
            let start = next_start.max(now.checked_sub(MAX_CATCH_UP).unwrap_or(now));
            // Wall time of the step: its simulated cost divided by the speedup, capped at an
            // hour so absurd settings cannot overflow the clock.
            let wall_us = cost_us / self.speedup;
            let cost = Duration::from_nanos((wall_us.min(3.6e9) * 1000.0) as u64);
            let end = start.checked_add(cost).unwrap_or(start);
            tokio::select! {
                _ = tokio::time::sleep_until(end) => {}
                _ = shutdown.changed() => break,
            }
            next_start = end;
            let woke = Instant::now();
            self.metrics
                .engine_sim_us
                .fetch_add((cost_us as u64).max(1), Ordering::Relaxed);
            self.metrics.engine_lag_us.fetch_add(
                woke.saturating_duration_since(end).as_micros() as u64,
                Ordering::Relaxed,
            );
            // Token times are the step's deadline (the simulated GPU's clock), not the wake-up,
            // so timer lag never shows in the server's histograms.
            self.complete(end);
            self.publish_gauges();
        }
        self.abort_all(&mut rx);
    }

    fn handle(&mut self, m: EngineMsg) {
        match m {
            EngineMsg::Request(r) => self.add(r),
            EngineMsg::ResetPrefixCache(tx) => {
                let _ = tx.send(self.pool.reset());
                self.flush_events();
            }
            EngineMsg::CachedHashes(tx) => {
                let _ = tx.send(self.pool.cached_hashes());
            }
        }
    }

    fn abort_all(&mut self, rx: &mut mpsc::UnboundedReceiver<EngineMsg>) {
        rx.close();
        while let Ok(m) = rx.try_recv() {
            self.handle(m);
        }
        let running: Vec<Seq> = self.running.drain(..).collect();
        let now = Instant::now();
        for s in running {
            self.end_seq(s, ABORTED, now);
        }
        while let Some(s) = self.waiting.pop_front() {
            self.end_seq(s, ABORTED, now);
        }
        self.publish_gauges();
    }
}
