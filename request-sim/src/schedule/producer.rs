//! Producer threads: build request bodies ahead of schedule, in trace order.
//!
//! The feeder thread ([`super::feed`]) deals the planned requests round-robin into one small
//! bounded input queue per producer; `n` producers run on a rayon thread pool whose threads are
//! pinned to cores (core_affinity). Producer `p` builds positions `p, p + n, p + 2n, …` into
//! its own bounded crossbeam channel of `capacity / n` slots; the dispatcher reads the channels
//! round-robin, so requests come out in trace order with no reordering buffer and no lock
//! shared between producers. A full channel blocks its producer (bounded memory); an empty one
//! makes the dispatcher wait, which shows as send drift. Nothing indexes the trace: it streams
//! through.
//!
//! Lookahead is bounded three ways: by count (the channels' capacity), by bytes (the bodies
//! built and not yet taken stay under `budget_bytes`), and by time (a request is built only once
//! it is due within `horizon` of the trace clock; before the clock starts, that is the first
//! `horizon` of the schedule, which is the pre-fill). The byte bound never holds back one of the
//! next `threads` requests the dispatcher will take, so it cannot stall the run.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};

use super::feed::{Feed, FeedEnd, Feeder};
use super::stop::StopReason;
use crate::trace::Planned;

/// Planned requests waiting in each producer's input queue at most.
const INPUT_SLOTS: usize = 64;

/// A request ready to send: its complete body, and the request it was built from.
#[derive(Debug)]
pub struct Prepared {
    /// The trace index (the record's `index`).
    pub index: usize,
    pub body: Bytes,
    /// Prompt tokens the body was built to have, as the server should count them.
    pub intended_prompt_tokens: u32,
    /// The images in the body (`None`: a text request).
    pub images: Option<BuiltImages>,
    /// The planned request, for its record.
    pub planned: Planned,
    /// `--live-history`: where the recorded answers of earlier turns sit in `body`.
    pub live: Option<Box<crate::backend::LiveBody>>,
}

/// The images of a built body: how many, and the image tokens they were made to cost (Σ N
/// without the vision markers, as vLLM reports them; `None` when not known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltImages {
    pub count: u32,
    pub tokens: Option<u32>,
}

/// A body built for one planned request.
#[derive(Debug)]
pub struct Built {
    pub body: Bytes,
    /// Prompt tokens the body was built to have, as the server should count them.
    pub intended_prompt_tokens: u32,
    /// The images in the body (`None`: a text request).
    pub images: Option<BuiltImages>,
    /// `--live-history`: where the recorded answers of earlier turns sit in `body`.
    pub live: Option<Box<crate::backend::LiveBody>>,
}

/// Builds one body; called from producer threads. Gets a per-thread scratch buffer.
pub type BuildFn = dyn Fn(&Planned, &mut Scratch) -> Built + Send + Sync;

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
    gate: Arc<Gate>,
    budget_bytes: u64,
    nice: i32,
    /// Producer threads whose nice level could not be set (none, normally).
    nice_failed: Arc<AtomicUsize>,
    pinned_cores: usize,
    feeder: Option<Feeder>,
    _pool: rayon::ThreadPool,
}

/// Wait until request `i` (due at `due_ms` on the schedule) may be built: it is due within
/// `horizon_ms` of the clock (of the schedule's start before the clock runs), and the bodies
/// waiting fit the byte budget unless `i` is among the next `n` requests to be taken. False
/// when stopped.
///
/// A due time is known, so the wait for it is one sleep (never too long: before the clock
/// starts its time counts as 0, so the sleep ends early and the loop checks again), in steps of
/// at most [`WAIT_STEP_MS`] so a stop is seen. Sleeping in 1 ms steps instead woke 32 idle
/// producers 32,000 times a second, a constant stream of context switches on the cores the
/// sends need. A full budget frees up when the dispatcher takes a body: checked every 0.2 ms.
fn wait_turn(
    gate: &Gate,
    stop: &AtomicBool,
    i: usize,
    n: usize,
    due_ms: f64,
    horizon_ms: f64,
    budget: u64,
) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let clock_ms = gate
            .start
            .get()
            .map(|s| s.elapsed().as_secs_f64() * 1e3)
            .unwrap_or(0.0);
        let early_ms = due_ms - horizon_ms - clock_ms;
        let over_budget = gate.buffered_bytes.load(Ordering::Relaxed) >= budget
            && i >= gate.next.load(Ordering::Relaxed) + n;
        if early_ms <= 0.0 && !over_budget {
            return true;
        }
        let step = if early_ms > 0.0 {
            early_ms.min(WAIT_STEP_MS)
        } else {
            0.2
        };
        std::thread::sleep(Duration::from_secs_f64(step / 1e3));
    }
}

/// Longest single sleep of a producer waiting for its next request's turn (ms).
const WAIT_STEP_MS: f64 = 50.0;

/// Longest single wait of [`Producers::take_until`] before it looks at the stop again (a body
/// that arrives ends the wait at once, so this costs a waiting dispatcher nothing but 50
/// wake-ups a second).
const TAKE_STEP: Duration = Duration::from_millis(20);

/// Why [`Producers::take_until`] gave no request at a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotTaken {
    /// The requests end there (see [`Producers::ending_at`]).
    Ended,
    /// A stop was asked for before it was built.
    Stopped,
    /// The deadline passed before it was built.
    Deadline,
}

/// What producers share with the dispatcher side to bound their lookahead.
#[derive(Debug, Default)]
struct Gate {
    /// When the trace clock started (unset during the pre-fill).
    start: OnceLock<Instant>,
    /// Bytes of bodies built and not yet taken.
    buffered_bytes: AtomicU64,
    /// Most `buffered_bytes` ever reached.
    peak_bytes: AtomicU64,
    /// Index of the next request the dispatcher will take.
    next: AtomicUsize,
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
    /// Memory budget of bodies built ahead (`--lookahead-mb`), bytes.
    pub budget_bytes: u64,
    /// Most bytes of bodies built and not yet sent at any moment.
    pub peak_buffered_bytes: u64,
    /// Nice level the producer threads run at (None: it could not be set).
    pub nice: Option<i32>,
    /// Cores the producers were pinned to (0 = not pinned; the scheduler places them).
    pub pinned_cores: usize,
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
    /// Bytes of bodies built ahead and not yet taken (at least one body per producer is
    /// always allowed).
    pub budget_bytes: u64,
    /// Build a request only once it is due within this much of the trace clock.
    pub horizon: Duration,
    /// Trace time ÷ this = schedule time (`--scale-factor`).
    pub scale_factor: f64,
    /// Nice level of the producer threads (below the dispatcher and the I/O threads).
    pub nice: i32,
}

impl Producers {
    /// Start the feeder and `cfg.threads` producers building the requests of `feed`.
    pub fn spawn(feed: Feed, cfg: &ProducerConfig, build: Arc<BuildFn>) -> crate::Result<Self> {
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
        let pinned_cores = pin_to.len();
        let nice = cfg.nice;
        let nice_failed = Arc::new(AtomicUsize::new(0));
        let nice_failed_in = nice_failed.clone();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("producer-{i}"))
            .start_handler(move |i| {
                if !pin_to.is_empty() {
                    core_affinity::set_for_current(pin_to[i % pin_to.len()]);
                }
                if crate::schedule::priority::lower_calling_thread(nice).is_err() {
                    nice_failed_in.fetch_add(1, Ordering::Relaxed);
                }
            })
            .build()
            .map_err(|e| crate::Error::internal(format!("cannot start producer threads: {e}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let gate = Arc::new(Gate::default());
        let (budget, horizon_ms, scale) = (
            cfg.budget_bytes,
            cfg.horizon.as_secs_f64() * 1e3,
            cfg.scale_factor,
        );
        let mut receivers = Vec::with_capacity(n);
        let mut inputs = Vec::with_capacity(n);
        let mut all_counters = Vec::with_capacity(n);
        for _ in 0..n {
            let (tx, rx) = bounded::<Prepared>(per);
            let (in_tx, in_rx) = bounded::<(usize, Planned)>(INPUT_SLOTS);
            receivers.push(rx);
            inputs.push(in_tx);
            let counters = Arc::new(Counters::default());
            all_counters.push(counters.clone());
            let build = build.clone();
            let stop = stop.clone();
            let gate = gate.clone();
            pool.spawn(move || {
                let mut scratch = Scratch::default();
                let (mut bodies, mut tokens, mut bytes, mut ns) = (0u64, 0u64, 0u64, 0u64);
                for (i, planned) in in_rx.iter() {
                    let due_ms = planned.req.timestamp_ms / scale;
                    if !wait_turn(&gate, &stop, i, n, due_ms, horizon_ms, budget) {
                        break;
                    }
                    let t = Instant::now();
                    let built = build(&planned, &mut scratch);
                    ns += t.elapsed().as_nanos() as u64;
                    bodies += 1;
                    tokens += u64::from(built.intended_prompt_tokens);
                    bytes += built.body.len() as u64;
                    // Only this thread writes its counters: plain stores, no contention.
                    counters.bodies.store(bodies, Ordering::Relaxed);
                    counters.prompt_tokens.store(tokens, Ordering::Relaxed);
                    counters.body_bytes.store(bytes, Ordering::Relaxed);
                    counters.build_ns.store(ns, Ordering::Relaxed);
                    let len = built.body.len() as u64;
                    let now = gate.buffered_bytes.fetch_add(len, Ordering::Relaxed) + len;
                    gate.peak_bytes.fetch_max(now, Ordering::Relaxed);
                    let prepared = Prepared {
                        index: planned.req.index,
                        body: built.body,
                        intended_prompt_tokens: built.intended_prompt_tokens,
                        images: built.images,
                        planned,
                        live: built.live,
                    };
                    if tx.send(prepared).is_err() {
                        break; // dispatcher gone
                    }
                }
            });
        }
        let feeder = Feeder::spawn(feed, inputs, stop.clone(), nice)?;
        Ok(Producers {
            receivers,
            counters: all_counters,
            stop,
            gate,
            budget_bytes: cfg.budget_bytes,
            nice,
            nice_failed,
            pinned_cores,
            feeder: Some(feeder),
            _pool: pool,
        })
    }

    /// Start the trace clock: from now on requests are built up to `horizon` ahead of
    /// `start` + their due time. Only the first call counts.
    pub fn start_clock(&self, start: Instant) {
        let _ = self.gate.start.set(start);
    }

    /// True when requests `0..k` are all built (taken or waiting in their channels).
    pub fn built_first(&self, k: usize) -> bool {
        let n = self.counters.len();
        (0..n.min(k)).all(|p| {
            // Producer p builds p, p + n, ...: of 0..k those are ceil((k - p) / n).
            let need = (k - p).div_ceil(n) as u64;
            self.counters[p].bodies.load(Ordering::Relaxed) >= need
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
            budget_bytes: self.budget_bytes,
            peak_buffered_bytes: self.gate.peak_bytes.load(Ordering::Relaxed),
            nice: (self.nice_failed.load(Ordering::Relaxed) == 0).then_some(self.nice),
            pinned_cores: self.pinned_cores,
        }
    }

    fn taken(&self, index: usize, p: &Prepared) {
        self.gate
            .buffered_bytes
            .fetch_sub(p.body.len() as u64, Ordering::Relaxed);
        self.gate.next.store(index + 1, Ordering::Relaxed);
    }

    /// The prepared request at `position` (taken in order 0, 1, 2, …), waiting until it is
    /// built, a stop is asked for (`stop`) or `deadline` passes, whichever comes first. A body
    /// due far ahead is built only within the lookahead of its time, so this wait can be as
    /// long as the trace's longest gap: it must give way to a stop or the time limit (a row
    /// 30 s after the last one kept `-t 3` running for 25 s, and a row at 10^15 ms kept a
    /// Ctrl-C from ever ending the run).
    pub fn take_until(
        &self,
        position: usize,
        stop: &AtomicBool,
        deadline: Option<Instant>,
    ) -> Result<Prepared, NotTaken> {
        let rx = &self.receivers[position % self.receivers.len()];
        loop {
            if stop.load(Ordering::SeqCst) {
                return Err(NotTaken::Stopped);
            }
            let now = Instant::now();
            let step = match deadline {
                Some(d) if d <= now => return Err(NotTaken::Deadline),
                Some(d) => TAKE_STEP.min(d - now),
                None => TAKE_STEP,
            };
            match rx.recv_timeout(step) {
                Ok(p) => {
                    self.taken(position, &p);
                    return Ok(p);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(NotTaken::Ended),
            }
        }
    }

    /// Non-blocking variant of [`Producers::take_until`].
    pub fn try_take(&self, position: usize) -> Option<Prepared> {
        let p = self.receivers[position % self.receivers.len()]
            .try_recv()
            .ok()?;
        self.taken(position, &p);
        Some(p)
    }

    /// Why [`Producers::take_until`] found no request at `position`: the feed ended there
    /// (`Completed`), a bad trace row ended it there (`TraceError`), or a producer died.
    pub fn ending_at(&self, position: usize) -> StopReason {
        self.feeder
            .as_ref()
            .map_or(StopReason::ProducerFailed, |f| f.ending_at(position))
    }

    /// The trace error that ended the feed, if it has ended with one (taken once).
    pub fn take_feed_error(&self) -> Option<crate::Error> {
        self.feeder.as_ref().and_then(Feeder::take_error)
    }

    /// Prepared requests waiting in the channels.
    pub fn buffered(&self) -> usize {
        self.receivers.iter().map(|r| r.len()).sum()
    }

    /// Stop building: producers and the feeder stop (the feeder then counts the rest of the
    /// slice, see [`Producers::finish`]).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        // Drain so producers blocked on a full channel wake up and see `stop`.
        for rx in &self.receivers {
            while rx.try_recv().is_ok() {}
        }
    }

    /// Stop, and wait for the feeder: how the feed ended.
    pub fn finish(mut self) -> FeedEnd {
        self.stop();
        self.feeder.take().map(Feeder::join).unwrap_or_default()
    }
}

impl Drop for Producers {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::eventually;
    use crate::trace::TraceRequest;

    /// The request at `i`, waited for with no stop and no deadline; `None` at the end.
    fn take(p: &Producers, i: usize) -> Option<Prepared> {
        match p.take_until(i, &AtomicBool::new(false), None) {
            Ok(got) => Some(got),
            Err(NotTaken::Ended) => None,
            Err(other) => panic!("request {i}: {other:?}"),
        }
    }

    /// The requests as a feed of planned requests.
    fn feed(reqs: Vec<TraceRequest>) -> Feed {
        Box::new(reqs.into_iter().map(|req| {
            Ok(Planned {
                req,
                turn: None,
                chat: None,
                ideal_hit: None,
            })
        }))
    }

    fn req(i: usize) -> TraceRequest {
        TraceRequest {
            model: None,
            reasoning: Default::default(),
            images: None,
            index: i,
            line: i + 1,
            timestamp_ms: i as f64,
            input_length: i as u32,
            output_length: 1,
            hash_ids: Default::default(),
            session: None,
        }
    }

    #[test]
    fn in_order_with_many_producers_and_small_channels() {
        let reqs = (0..1000).map(req).collect::<Vec<_>>();
        let build: Arc<BuildFn> = Arc::new(|p: &Planned, s: &mut Scratch| {
            s.body.clear();
            s.body.extend_from_slice(p.req.index.to_string().as_bytes());
            Built {
                body: Bytes::copy_from_slice(&s.body),
                intended_prompt_tokens: p.req.input_length,
                images: None,
                live: None,
            }
        });
        for threads in [1, 3, 4] {
            let cfg = ProducerConfig {
                threads,
                capacity: 8,
                pin: true,
                cores: vec![0, 1],
                budget_bytes: 1 << 20,
                horizon: Duration::from_secs(3600),
                scale_factor: 1.0,
                nice: 0,
            };
            let p = Producers::spawn(feed(reqs.clone()), &cfg, build.clone()).unwrap();
            for i in 0..1000 {
                let got = take(&p, i).unwrap();
                assert_eq!(got.index, i);
                assert_eq!(got.planned.req.input_length, i as u32);
                assert_eq!(&got.body[..], i.to_string().as_bytes());
            }
            // The feed's end is the end of the requests, and every one was dealt.
            assert!(take(&p, 1000).is_none());
            assert_eq!(p.ending_at(1000), StopReason::Completed);
            let end = p.finish();
            assert_eq!((end.dealt, end.planned()), (1000, Some(1000)));
        }
    }

    #[test]
    fn a_wait_for_a_body_far_ahead_gives_way_to_the_deadline_and_the_stop() {
        // Request 0 is due at 10^15 ms: it is not built within the lookahead of this test.
        let mut far = req(0);
        far.timestamp_ms = 1e15;
        let build: Arc<BuildFn> = Arc::new(|_p: &Planned, _s: &mut Scratch| Built {
            body: Bytes::new(),
            intended_prompt_tokens: 0,
            images: None,
            live: None,
        });
        let cfg = ProducerConfig {
            threads: 1,
            capacity: 4,
            pin: false,
            cores: vec![],
            budget_bytes: 1 << 20,
            horizon: Duration::from_secs(5),
            scale_factor: 1.0,
            nice: 0,
        };
        let p = Producers::spawn(feed(vec![far]), &cfg, build).unwrap();
        p.start_clock(Instant::now());
        let stop = AtomicBool::new(false);
        let t = Instant::now();
        let got = p.take_until(0, &stop, Some(t + Duration::from_millis(100)));
        assert_eq!(got.err(), Some(NotTaken::Deadline));
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(100) && waited < Duration::from_millis(500),
            "{waited:?}"
        );
        let t = Instant::now();
        let got = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                stop.store(true, Ordering::SeqCst);
            });
            p.take_until(0, &stop, None)
        });
        assert_eq!(got.err(), Some(NotTaken::Stopped));
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(100) && waited < Duration::from_millis(500),
            "{waited:?}"
        );
    }

    #[test]
    fn dropping_stops_blocked_producers() {
        let reqs = (0..100_000).map(req).collect::<Vec<_>>();
        let build: Arc<BuildFn> = Arc::new(|_p: &Planned, _s: &mut Scratch| Built {
            body: Bytes::new(),
            intended_prompt_tokens: 0,
            images: None,
            live: None,
        });
        let cfg = ProducerConfig {
            threads: 2,
            capacity: 4,
            pin: false,
            cores: vec![],
            budget_bytes: 1 << 20,
            horizon: Duration::from_secs(3600),
            scale_factor: 1.0,
            nice: 0,
        };
        let p = Producers::spawn(feed(reqs), &cfg, build).unwrap();
        assert_eq!(take(&p, 0).unwrap().index, 0);
        // Stopping: the rest of the feed is counted, not built.
        let end = p.finish(); // must not hang
        assert_eq!(end.planned(), Some(100_000));
        assert!(end.dealt < 1000, "{end:?}");
    }

    #[test]
    fn a_feed_error_ends_the_requests_where_it_happened() {
        let mut items: Vec<crate::Result<Planned>> = feed((0..10).map(req).collect()).collect();
        // Two requests read before the error and not given (a reorder window's) follow it.
        let cut_off = items.split_off(7);
        items.push(Err(crate::Error::config("t.jsonl:9: bad row")));
        items.extend(cut_off.into_iter().take(2));
        let build: Arc<BuildFn> = Arc::new(|_p: &Planned, _s: &mut Scratch| Built {
            body: Bytes::new(),
            intended_prompt_tokens: 0,
            images: None,
            live: None,
        });
        let cfg = ProducerConfig {
            threads: 3,
            capacity: 4,
            pin: false,
            cores: vec![],
            budget_bytes: 1 << 20,
            horizon: Duration::from_secs(3600),
            scale_factor: 1.0,
            nice: 0,
        };
        let p = Producers::spawn(Box::new(items.into_iter()), &cfg, build).unwrap();
        for i in 0..7 {
            assert_eq!(take(&p, i).unwrap().index, i);
        }
        assert!(take(&p, 7).is_none());
        assert_eq!(p.ending_at(7), StopReason::TraceError);
        assert_eq!(p.ending_at(6), StopReason::ProducerFailed);
        assert!(p
            .take_feed_error()
            .is_some_and(|e| e.to_string().contains("t.jsonl:9")));
        let end = p.finish();
        // Counted, never dealt: the slice is the 7 sent and the 2 cut off.
        assert_eq!((end.dealt, end.cut_off, end.planned()), (7, 2, Some(9)));
    }

    /// Bodies of 1,000 bytes; requests `burst` at t = 0, then one every `gap_ms`.
    fn bursty(n: usize, burst: usize, gap_ms: f64) -> (Feed, Arc<BuildFn>) {
        let reqs = (0..n)
            .map(|i| TraceRequest {
                model: None,
                timestamp_ms: i.saturating_sub(burst - 1) as f64 * gap_ms,
                ..req(i)
            })
            .collect();
        let build: Arc<BuildFn> = Arc::new(|_p: &Planned, _s: &mut Scratch| Built {
            body: Bytes::from(vec![b'x'; 1000]),
            intended_prompt_tokens: 0,
            images: None,
            live: None,
        });
        (feed(reqs), build)
    }

    #[test]
    fn prefill_builds_the_first_burst_and_nothing_beyond_the_horizon() {
        // 8 requests at t = 0, then one every 10 s: with a 1 s horizon and the clock not
        // started, exactly the burst is built, whatever the producer count.
        for threads in [1, 3, 32] {
            let (reqs, build) = bursty(100, 8, 10_000.0);
            let cfg = ProducerConfig {
                threads,
                capacity: 40960,
                pin: false,
                cores: vec![],
                budget_bytes: 1 << 20,
                horizon: Duration::from_secs(1),
                scale_factor: 1.0,
                nice: 0,
            };
            let p = Producers::spawn(reqs, &cfg, build).unwrap();
            assert!(eventually(|| p.built_first(8)), "{threads} producers");
            // Give producers time to overreach if they would.
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(p.stats().bodies, 8, "{threads} producers");
            assert!(!p.built_first(9));
            // Every body taken was built before it was asked for: none blocks.
            for i in 0..8 {
                assert_eq!(p.try_take(i).map(|b| b.index), Some(i));
            }
        }
    }

    #[test]
    fn byte_budget_bounds_the_lookahead_without_stalling() {
        // Everything due at once, a budget of 5 bodies, capacity of 1,000 bodies.
        let (reqs, build) = bursty(200, 200, 0.0);
        let cfg = ProducerConfig {
            threads: 2,
            capacity: 1000,
            pin: false,
            cores: vec![],
            budget_bytes: 5_000,
            horizon: Duration::from_secs(1),
            scale_factor: 1.0,
            nice: 0,
        };
        let p = Producers::spawn(reqs, &cfg, build).unwrap();
        p.start_clock(Instant::now());
        // The next `threads` requests are always built, budget or not.
        assert!(eventually(|| p.built_first(2) && p.stats().bodies >= 5));
        std::thread::sleep(Duration::from_millis(50));
        // The budget, plus at most one body per producer past it.
        assert!(p.stats().bodies <= 7, "{:?}", p.stats());
        // Taking frees budget: all 200 come out in order.
        for i in 0..200 {
            assert_eq!(take(&p, i).unwrap().index, i);
        }
        let st = p.stats();
        assert!(st.peak_buffered_bytes <= 7_000, "{st:?}");
        assert_eq!(st.budget_bytes, 5_000);
    }

    #[test]
    fn producers_run_below_the_dispatcher_and_io_threads() {
        // Each body records the nice level of the thread that built it.
        let reqs = feed((0..64).map(req).collect::<Vec<_>>());
        let build: Arc<BuildFn> = Arc::new(|_p: &Planned, _s: &mut Scratch| Built {
            body: Bytes::from(
                crate::schedule::priority::nice_of(0).map_or("?".to_string(), |n| n.to_string()),
            ),
            intended_prompt_tokens: 0,
            images: None,
            live: None,
        });
        let before = crate::schedule::priority::nice_of(0);
        let cfg = ProducerConfig {
            threads: 8,
            capacity: 64,
            pin: false,
            cores: vec![],
            budget_bytes: 1 << 20,
            horizon: Duration::from_secs(3600),
            scale_factor: 1.0,
            nice: crate::schedule::priority::PRODUCER_NICE,
        };
        let p = Producers::spawn(reqs, &cfg, build).unwrap();
        p.start_clock(Instant::now());
        for i in 0..64 {
            let body = take(&p, i).unwrap().body;
            if cfg!(target_os = "linux") {
                let want = crate::schedule::priority::PRODUCER_NICE.max(before.unwrap_or(0));
                assert_eq!(std::str::from_utf8(&body).unwrap(), want.to_string());
            }
        }
        if cfg!(target_os = "linux") {
            assert_eq!(
                p.stats().nice,
                Some(crate::schedule::priority::PRODUCER_NICE)
            );
            // The calling (dispatcher-side) thread is untouched.
            assert_eq!(crate::schedule::priority::nice_of(0), before);
        }
    }
}
