//! The engine in virtual time ([`simulate`]): the same scheduler, prefix cache and step-cost
//! model as the server, with no sleeping, no HTTP and no wall clock.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::time::Instant;

use super::progress::{NewRequest, ReqShared, ABORTED};
use super::scheduler::Engine;
use crate::config::SimConfig;
use crate::metrics::Metrics;

/// A request of an offline run ([`simulate`]).
#[derive(Clone, Debug)]
pub struct OfflineRequest {
    /// When it reaches the engine, simulated microseconds from the start.
    pub arrival_us: f64,
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
}

/// What an offline run saw of one request, in simulated microseconds from its arrival.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OfflineResult {
    pub ttft_us: f64,
    pub e2e_us: f64,
    /// Output tokens produced.
    pub tokens: u32,
    pub cached_tokens: u32,
    /// The engine could not run it (it needs more KV blocks than the cache has).
    pub dropped: bool,
}

impl OfflineResult {
    /// Mean time per output token after the first (0 for one-token requests).
    pub fn tpot_us(&self) -> f64 {
        if self.tokens > 1 {
            (self.e2e_us - self.ttft_us) / f64::from(self.tokens - 1)
        } else {
            0.0
        }
    }
}

/// Runs the engine of `cfg` on `reqs` (sorted by arrival) in virtual time: the same scheduler,
/// prefix cache and step-cost model as the server, with no sleeping, no HTTP and no wall
/// clock, so a what-if of hours of traffic takes milliseconds. Arrivals are taken between
/// steps, as the server's engine takes them. One result per request, in order.
pub fn simulate(cfg: &SimConfig, reqs: &[OfflineRequest]) -> Vec<OfflineResult> {
    let metrics = Arc::new(Metrics::default());
    let mut e = Engine::new(cfg, metrics.clone());
    let mut out = vec![OfflineResult::default(); reqs.len()];
    let mut first = vec![false; reqs.len()];
    let mut live: Vec<(usize, Arc<ReqShared>)> = Vec::new();
    let (mut t, mut next, mut stuck) = (0.0f64, 0usize, 0u32);
    loop {
        while next < reqs.len() && reqs[next].arrival_us <= t {
            let r = &reqs[next];
            let shared = Arc::new(ReqShared::new(false));
            metrics.unscheduled.fetch_add(1, Ordering::Relaxed);
            e.add(NewRequest {
                prompt: r.prompt.clone(),
                max_tokens: r.max_tokens,
                output_seed: next as u64,
                stops: false,
                shared: shared.clone(),
                image_regions: Vec::new(),
            });
            live.push((next, shared));
            next += 1;
        }
        if e.running.is_empty() && e.waiting.is_empty() {
            match reqs.get(next) {
                Some(r) => t = t.max(r.arrival_us),
                None => break,
            }
            continue;
        }
        let cost = e.schedule();
        if e.step.is_empty() {
            // A step that only preempted is retried; twice in a row means the head of the
            // queue can never fit: give it up, as the server refuses such a request.
            stuck += 1;
            if stuck >= 2 {
                if let Some(s) = e.waiting.pop_front() {
                    e.end_seq(s, ABORTED, Instant::now());
                }
            }
        } else {
            stuck = 0;
            t += cost;
            e.complete(Instant::now());
        }
        live.retain(|(i, shared)| {
            let p = shared.progress();
            let arrival = reqs[*i].arrival_us;
            if p.generated > 0 && !first[*i] {
                first[*i] = true;
                out[*i].ttft_us = t - arrival;
            }
            if p.finished || p.aborted {
                out[*i] = OfflineResult {
                    e2e_us: t - arrival,
                    tokens: p.generated,
                    cached_tokens: shared.cached_tokens(),
                    dropped: p.aborted,
                    ..out[*i]
                };
                return false;
            }
            true
        });
    }
    out
}
