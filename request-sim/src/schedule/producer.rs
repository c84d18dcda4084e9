//! Producer threads: build request bodies ahead of schedule, in trace order.
//!
//! `n` producers run on a rayon thread pool whose threads are pinned to cores (core_affinity).
//! Producer `p` builds requests `p, p + n, p + 2n, …` into its own bounded crossbeam channel of
//! `capacity / n` slots; the dispatcher reads the channels round-robin, so requests come out in
//! trace order with no reordering buffer and no lock shared between producers. A full channel
//! blocks its producer (bounded memory); an empty one makes the dispatcher wait, which shows as
//! send drift.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use crossbeam_channel::{bounded, Receiver};

use crate::trace::TraceRequest;

/// A request ready to send: the index into the trace's request list and its complete body.
#[derive(Debug)]
pub struct Prepared {
    pub index: usize,
    pub body: Bytes,
    /// Prompt tokens the body was built to have, as the server should count them.
    pub intended_prompt_tokens: u32,
}

/// Builds one body; called from producer threads. Gets a per-thread scratch buffer.
pub type BuildFn = dyn Fn(&TraceRequest, &mut Scratch) -> Prepared + Send + Sync;

/// Reusable per-producer buffers.
#[derive(Default)]
pub struct Scratch {
    pub text: String,
    pub ids: Vec<u32>,
    pub body: Vec<u8>,
}

/// Running producers; dropping it stops them.
pub struct Producers {
    receivers: Vec<Receiver<Prepared>>,
    counters: Vec<Arc<Counters>>,
    stop: Arc<AtomicBool>,
    _pool: rayon::ThreadPool,
}

/// What one producer thread has built so far (written by it, read by [`Producers::stats`]).
#[derive(Debug, Default)]
struct Counters {
    bodies: AtomicU64,
    prompt_tokens: AtomicU64,
    body_bytes: AtomicU64,
    /// Nanoseconds spent inside the build function (not waiting on a full channel).
    build_ns: AtomicU64,
}

/// What the producers did: how much they built and how fast they build when not blocked by a
/// full channel. `tokens_per_s_per_thread` is the producer side's capacity per thread; a
/// dry run at a high `--scale-factor` shows whether the rest of the pipeline keeps up with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ProducerStats {
    pub threads: usize,
    /// Request bodies built.
    pub bodies: u64,
    /// Prompt tokens in them (as the server should count them).
    pub prompt_tokens: u64,
    /// Bytes of request bodies built.
    pub body_bytes: u64,
    /// Seconds spent building, summed over threads.
    pub build_s: f64,
    /// Prompt tokens built per second of building, per thread.
    pub tokens_per_s_per_thread: f64,
    /// Bodies built per second of building, per thread.
    pub bodies_per_s_per_thread: f64,
    /// Bodies dispatched per second of dispatch wall time (set by the orchestrator).
    pub bodies_per_s: f64,
}

/// Producer settings.
#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub threads: usize,
    pub capacity: usize,
    /// Pin producer threads to cores (`--no-pin` turns it off).
    pub pin: bool,
    /// Cores producers may use (the dispatcher's core is left out when possible).
    pub cores: Vec<usize>,
}

impl Producers {
    pub fn spawn(
        requests: Arc<Vec<TraceRequest>>,
        cfg: &ProducerConfig,
        build: Arc<BuildFn>,
    ) -> Result<Self, String> {
        let n = cfg.threads.max(1);
        let per = (cfg.capacity / n).max(1);
        let core_ids = core_affinity::get_core_ids().unwrap_or_default();
        let pin_to: Vec<core_affinity::CoreId> = if cfg.pin {
            cfg.cores
                .iter()
                .filter_map(|c| core_ids.iter().find(|id| id.id == *c).copied())
                .collect()
        } else {
            Vec::new()
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("producer-{i}"))
            .start_handler(move |i| {
                if !pin_to.is_empty() {
                    core_affinity::set_for_current(pin_to[i % pin_to.len()]);
                }
            })
            .build()
            .map_err(|e| format!("cannot start producer threads: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut receivers = Vec::with_capacity(n);
        let mut all_counters = Vec::with_capacity(n);
        for p in 0..n {
            let (tx, rx) = bounded::<Prepared>(per);
            receivers.push(rx);
            let counters = Arc::new(Counters::default());
            all_counters.push(counters.clone());
            let requests = requests.clone();
            let build = build.clone();
            let stop = stop.clone();
            pool.spawn(move || {
                let mut scratch = Scratch::default();
                let mut i = p;
                let (mut bodies, mut tokens, mut bytes, mut ns) = (0u64, 0u64, 0u64, 0u64);
                while i < requests.len() && !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let prepared = build(&requests[i], &mut scratch);
                    ns += t.elapsed().as_nanos() as u64;
                    bodies += 1;
                    tokens += u64::from(prepared.intended_prompt_tokens);
                    bytes += prepared.body.len() as u64;
                    // Only this thread writes its counters: plain stores, no contention.
                    counters.bodies.store(bodies, Ordering::Relaxed);
                    counters.prompt_tokens.store(tokens, Ordering::Relaxed);
                    counters.body_bytes.store(bytes, Ordering::Relaxed);
                    counters.build_ns.store(ns, Ordering::Relaxed);
                    if tx.send(prepared).is_err() {
                        break; // dispatcher gone
                    }
                    i += n;
                }
            });
        }
        Ok(Producers {
            receivers,
            counters: all_counters,
            stop,
            _pool: pool,
        })
    }

    /// What the producers have built so far (`bodies_per_s` is left 0 for the caller, which
    /// knows the dispatch wall time).
    pub fn stats(&self) -> ProducerStats {
        let sum = |f: fn(&Counters) -> &AtomicU64| -> u64 {
            self.counters
                .iter()
                .map(|c| f(c).load(Ordering::Relaxed))
                .sum()
        };
        let bodies = sum(|c| &c.bodies);
        let prompt_tokens = sum(|c| &c.prompt_tokens);
        let build_s = sum(|c| &c.build_ns) as f64 / 1e9;
        let per_s = |x: u64| {
            if build_s > 0.0 {
                x as f64 / build_s
            } else {
                0.0
            }
        };
        ProducerStats {
            threads: self.counters.len(),
            bodies,
            prompt_tokens,
            body_bytes: sum(|c| &c.body_bytes),
            build_s,
            tokens_per_s_per_thread: per_s(prompt_tokens),
            bodies_per_s_per_thread: per_s(bodies),
            bodies_per_s: 0.0,
        }
    }

    /// The prepared request `index` (requests must be taken in order 0, 1, 2, …).
    /// Blocks until it is built; `None` if its producer died.
    pub fn take(&self, index: usize) -> Option<Prepared> {
        let rx = &self.receivers[index % self.receivers.len()];
        let p = rx.recv().ok()?;
        debug_assert_eq!(p.index, index);
        Some(p)
    }

    /// Non-blocking variant of [`Producers::take`].
    pub fn try_take(&self, index: usize) -> Option<Prepared> {
        self.receivers[index % self.receivers.len()].try_recv().ok()
    }

    /// Prepared requests waiting in the channels.
    pub fn buffered(&self) -> usize {
        self.receivers.iter().map(|r| r.len()).sum()
    }
}

impl Drop for Producers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Drain so producers blocked on a full channel wake up and see `stop`.
        for rx in &self.receivers {
            while rx.try_recv().is_ok() {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(i: usize) -> TraceRequest {
        TraceRequest {
            index: i,
            line: i + 1,
            timestamp_ms: i as f64,
            input_length: i as u32,
            output_length: 1,
            hash_ids: vec![],
            session: None,
        }
    }

    #[test]
    fn in_order_with_many_producers_and_small_channels() {
        let reqs = Arc::new((0..1000).map(req).collect::<Vec<_>>());
        let build: Arc<BuildFn> = Arc::new(|r: &TraceRequest, s: &mut Scratch| {
            s.body.clear();
            s.body.extend_from_slice(r.index.to_string().as_bytes());
            Prepared {
                index: r.index,
                body: Bytes::copy_from_slice(&s.body),
                intended_prompt_tokens: r.input_length,
            }
        });
        for threads in [1, 3, 4] {
            let cfg = ProducerConfig {
                threads,
                capacity: 8,
                pin: true,
                cores: vec![0, 1],
            };
            let p = Producers::spawn(reqs.clone(), &cfg, build.clone()).unwrap();
            for i in 0..1000 {
                let got = p.take(i).unwrap();
                assert_eq!(got.index, i);
                assert_eq!(&got.body[..], i.to_string().as_bytes());
            }
        }
    }

    #[test]
    fn dropping_stops_blocked_producers() {
        let reqs = Arc::new((0..100_000).map(req).collect::<Vec<_>>());
        let build: Arc<BuildFn> = Arc::new(|r: &TraceRequest, _s: &mut Scratch| Prepared {
            index: r.index,
            body: Bytes::new(),
            intended_prompt_tokens: 0,
        });
        let cfg = ProducerConfig {
            threads: 2,
            capacity: 4,
            pin: false,
            cores: vec![],
        };
        let p = Producers::spawn(reqs, &cfg, build).unwrap();
        assert_eq!(p.take(0).unwrap().index, 0);
        drop(p); // must not hang
    }
}
