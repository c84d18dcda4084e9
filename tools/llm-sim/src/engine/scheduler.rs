//! The engine's state and one step of it, in the manner of vLLM's V1 scheduler: `schedule`
//! picks the step's work (running sequences first, preempting by recomputation when KV blocks
//! run out, then waiting ones admitted with their prefix-cache hits) and returns its simulated
//! cost; `complete` applies it once its time has passed (computed tokens advance, finished
//! prefills and decodes each produce one output token, full blocks enter the prefix cache).
//! The server's task (`task.rs`) and the offline run (`offline.rs`) drive it.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use super::progress::{output_token, NewRequest, ReqShared, ABORTED, FINISHED};
use crate::cache::{extend_block_hashes, BlockPool};
use crate::config::SimConfig;
use crate::kv_events::{self, KvEvent};
use crate::metrics::{Metrics, RequestTimes};
use crate::timing::{StepCost, StepWork};

/// A request inside the engine: its tokens (the prompt, then the output so far), its prompt's
/// block hashes, its KV blocks and how far it got.
pub(super) struct Seq {
    shared: Arc<ReqShared>,
    /// Per image at the front of the prompt: (end of its tokens, its image tokens).
    image_regions: Vec<(u32, u32)>,
    tokens: Vec<u32>,
    prompt_len: u32,
    max_tokens: u32,
    output_seed: u64,
    stops: bool,
    hashes: Vec<u64>,
    blocks: Vec<u32>,
    computed: u32,
    registered: u32,
    generated: u32,
    admitted_once: bool,
    /// When the engine received it, first scheduled it, and produced its first and latest token
    /// (the request-level histograms of `metrics`).
    arrived: Instant,
    scheduled_at: Option<Instant>,
    first_token_at: Option<Instant>,
    last_token_at: Option<Instant>,
}

/// The `BlockStored` event of blocks `a..b` of a sequence.
fn stored_event(s: &Seq, a: usize, b: usize, bs: usize) -> KvEvent {
    KvEvent::BlockStored {
        block_hashes: s.hashes[a..b].to_vec(),
        parent_block_hash: if a == 0 { None } else { Some(s.hashes[a - 1]) },
        token_ids: s.tokens[a * bs..b * bs].to_vec(),
        block_size: bs as u32,
    }
}

/// One sequence's share of the current step.
pub(super) struct Scheduled {
    /// Index into `running`.
    idx: usize,
    tokens: u32,
}

/// Engine state: owned by the scheduler task only.
pub(super) struct Engine {
    max_num_seqs: usize,
    max_num_batched_tokens: u32,
    block_size: u32,
    cost: StepCost,
    /// Simulated time per wall-clock time (`SimConfig::speedup`).
    pub(super) speedup: f64,
    pub(super) pool: BlockPool,
    pub(super) running: Vec<Seq>,
    pub(super) waiting: VecDeque<Seq>,
    pub(super) step: Vec<Scheduled>,
    pub(super) metrics: Arc<Metrics>,
    /// Where KV event batches go (`None`: not published).
    pub(super) kv_events: Option<mpsc::UnboundedSender<kv_events::Batch>>,
}

impl Engine {
    pub(super) fn new(cfg: &SimConfig, metrics: Arc<Metrics>) -> Self {
        Engine {
            max_num_seqs: cfg.max_num_seqs.max(1),
            max_num_batched_tokens: cfg.max_num_batched_tokens.max(1),
            block_size: cfg.block_size.max(1),
            cost: StepCost::of(cfg),
            speedup: if cfg.speedup > 0.0 { cfg.speedup } else { 1.0 },
            pool: BlockPool::new(cfg.num_gpu_blocks.max(1), cfg.enable_prefix_caching),
            running: Vec::new(),
            waiting: VecDeque::new(),
            step: Vec::new(),
            metrics,
            kv_events: None,
        }
    }

    /// Publishes the KV events of the last step (or reset) as one batch.
    pub(super) fn flush_events(&mut self) {
        let Some(tx) = &self.kv_events else {
            return;
        };
        let events = self.pool.take_events();
        if events.is_empty() {
            return;
        }
        let ts = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let _ = tx.send(kv_events::Batch { ts, events });
    }

    pub(super) fn add(&mut self, r: NewRequest) {
        let bs = self.block_size as usize;
        let mut hashes = Vec::with_capacity(r.prompt.len() / bs + 1);
        extend_block_hashes(&mut hashes, &r.prompt, bs);
        let prompt_len = r.prompt.len() as u32;
        let mut tokens = r.prompt;
        tokens.reserve(r.max_tokens as usize);
        self.waiting.push_back(Seq {
            shared: r.shared,
            image_regions: r.image_regions,
            tokens,
            prompt_len,
            max_tokens: r.max_tokens.max(1),
            output_seed: r.output_seed,
            stops: r.stops,
            hashes,
            blocks: Vec::new(),
            computed: 0,
            registered: 0,
            generated: 0,
            admitted_once: false,
            arrived: Instant::now(),
            scheduled_at: None,
            first_token_at: None,
            last_token_at: None,
        });
    }

    pub(super) fn publish_gauges(&self) {
        self.metrics
            .running
            .store(self.running.len() as u64, Ordering::Relaxed);
        self.metrics
            .waiting
            .store(self.waiting.len() as u64, Ordering::Relaxed);
        self.metrics
            .kv_usage_ppm
            .store((self.pool.usage() * 1e6) as u64, Ordering::Relaxed);
    }

    fn blocks_for(&self, tokens: u32) -> usize {
        tokens.div_ceil(self.block_size) as usize
    }

    /// Ends a sequence at `now` (the deadline of the step that finished it).
    pub(super) fn end_seq(&mut self, mut s: Seq, state: u8, now: Instant) {
        self.pool.release(&s.blocks);
        s.blocks.clear();
        if !s.admitted_once {
            self.metrics.unscheduled.fetch_sub(1, Ordering::Relaxed);
        }
        if state == FINISHED {
            let finished = if s.stops {
                &self.metrics.requests_stopped
            } else {
                &self.metrics.requests_finished
            };
            finished.fetch_add(1, Ordering::Relaxed);
            // Simulated seconds since arrival (wall time × speedup).
            let sim = self.speedup;
            let since = |t: Option<Instant>| {
                t.map_or(0.0, |t| {
                    t.saturating_duration_since(s.arrived).as_secs_f64() * sim
                })
            };
            self.metrics.observe_finished(&RequestTimes {
                scheduled: since(s.scheduled_at),
                first_token: since(s.first_token_at),
                last_token: since(s.last_token_at),
                finished: since(Some(now)),
                prompt_tokens: s.prompt_len,
                generation_tokens: s.generated,
            });
        } else {
            self.metrics
                .requests_aborted
                .fetch_add(1, Ordering::Relaxed);
        }
        s.shared.publish(s.generated, Some(state));
    }

    fn preempt(&mut self, mut s: Seq) {
        self.pool.release(&s.blocks);
        s.blocks.clear();
        s.computed = 0;
        s.registered = 0;
        self.metrics.preemptions.fetch_add(1, Ordering::Relaxed);
        self.waiting.push_front(s);
    }

    /// Picks this step's work; returns its simulated cost in microseconds (0 when nothing can
    /// run).
    pub(super) fn schedule(&mut self) -> f64 {
        self.step.clear();
        self.drop_cancelled();
        let mut budget = self.max_num_batched_tokens;
        let mut work = StepWork::default();
        let preempted = self.schedule_running(&mut budget, &mut work);
        // Waiting sequences only get room in a step that did not have to preempt.
        if !preempted {
            self.admit_waiting(budget, &mut work);
        }
        if self.step.is_empty() {
            return 0.0;
        }
        self.cost.cost_us(&work)
    }

    /// Ends the running sequences whose clients went away.
    fn drop_cancelled(&mut self) {
        let mut i = 0;
        while i < self.running.len() {
            if self.running[i].shared.is_cancelled() {
                let s = self.running.remove(i);
                self.end_seq(s, ABORTED, Instant::now());
            } else {
                i += 1;
            }
        }
    }

    /// Schedules the running sequences in arrival order (a decode takes 1 token of the budget,
    /// a prefill the rest of its prompt up to what is left), preempting the most recently
    /// admitted ones when KV blocks run out. True if it had to preempt.
    fn schedule_running(&mut self, budget: &mut u32, work: &mut StepWork) -> bool {
        let mut preempted = false;
        let mut i = 0;
        while i < self.running.len() && *budget > 0 {
            let (computed, total, nblocks, generated) = {
                let s = &self.running[i];
                (
                    s.computed,
                    s.tokens.len() as u32,
                    s.blocks.len(),
                    s.generated,
                )
            };
            let need = total - computed;
            let n = need.min(*budget);
            let extra = self.blocks_for(computed + n).saturating_sub(nblocks);
            let mut fits = true;
            while self.pool.num_free() < extra {
                if self.running.len() - 1 == i {
                    fits = false;
                    break;
                }
                if let Some(victim) = self.running.pop() {
                    self.preempt(victim);
                    preempted = true;
                }
            }
            if !fits {
                let s = self.running.remove(i);
                self.preempt(s);
                return true;
            }
            let s = &mut self.running[i];
            if !self.pool.allocate(extra, &mut s.blocks) {
                break;
            }
            if generated > 0 && need == 1 {
                work.add_decode(total);
            } else {
                work.add_prefill(computed, n);
            }
            self.step.push(Scheduled { idx: i, tokens: n });
            *budget -= n;
            i += 1;
        }
        preempted
    }

    /// Admits waiting sequences (FIFO) while fewer than `max_num_seqs` run and budget is left:
    /// the prefix cache gives their cached blocks, fresh blocks hold the part computed now; stops
    /// at the first one that does not fit.
    fn admit_waiting(&mut self, mut budget: u32, work: &mut StepWork) {
        while budget > 0 && self.running.len() < self.max_num_seqs {
            let Some(front) = self.waiting.front() else {
                break;
            };
            if front.shared.is_cancelled() {
                if let Some(s) = self.waiting.pop_front() {
                    self.end_seq(s, ABORTED, Instant::now());
                }
                continue;
            }
            let total = front.tokens.len() as u32;
            let bs = self.block_size;
            // Like vLLM, always recompute at least the last token.
            let max_hit_blocks = ((total.saturating_sub(1)) / bs) as usize;
            let lookup_len = max_hit_blocks.min(front.hashes.len());
            let (hit, hit_free) = self.pool.lookup(&front.hashes[..lookup_len]);
            let cached = hit as u32 * bs;
            let n = (total - cached).min(budget);
            let extra = self.blocks_for(cached + n).saturating_sub(hit);
            if self.pool.num_free().saturating_sub(hit_free) < extra {
                break;
            }
            let Some(mut s) = self.waiting.pop_front() else {
                break;
            };
            self.pool.acquire_cached(&s.hashes[..hit], &mut s.blocks);
            if !self.pool.allocate(extra, &mut s.blocks) {
                // Cannot happen after the check above; put it back untouched.
                self.pool.release(&s.blocks);
                s.blocks.clear();
                self.waiting.push_front(s);
                break;
            }
            s.computed = cached;
            s.registered = hit as u32;
            if !s.admitted_once {
                self.first_admission(&mut s, total, cached);
                // The vision encoder runs for the images not in the prefix cache.
                work.encoder_tokens += s
                    .image_regions
                    .iter()
                    .filter(|(end, _)| *end > cached)
                    .map(|(_, n)| u64::from(*n))
                    .sum::<u64>();
            }
            work.add_prefill(cached, n);
            self.running.push(s);
            self.step.push(Scheduled {
                idx: self.running.len() - 1,
                tokens: n,
            });
            budget -= n;
        }
    }

    /// Counts a sequence's first admission: it leaves the waiting queue's bound, its cached
    /// tokens are known, and the prefix-cache counters see its prompt (once per request).
    fn first_admission(&self, s: &mut Seq, total: u32, cached: u32) {
        s.admitted_once = true;
        self.metrics.unscheduled.fetch_sub(1, Ordering::Relaxed);
        s.scheduled_at = Some(Instant::now());
        s.shared.admit(cached);
        self.metrics
            .prefix_queries
            .fetch_add(u64::from(total), Ordering::Relaxed);
        self.metrics
            .prefix_hits
            .fetch_add(u64::from(cached), Ordering::Relaxed);
    }

    /// Registers the newly full blocks of running sequence `idx` in the prefix cache, noting
    /// one `BlockStored` event per run of consecutive newly cached blocks.
    fn register_blocks(&mut self, idx: usize) {
        let bs = self.block_size as usize;
        let recording = self.pool.records_events();
        let Some(s) = self.running.get_mut(idx) else {
            return;
        };
        let mut run: Option<usize> = None;
        while ((s.registered as usize + 1) * bs) <= s.computed as usize
            && (s.registered as usize) < s.hashes.len()
            && (s.registered as usize) < s.blocks.len()
        {
            let r = s.registered as usize;
            let fresh = self.pool.register(s.blocks[r], s.hashes[r]);
            if recording {
                match (fresh, run) {
                    (true, None) => run = Some(r),
                    (false, Some(a)) => {
                        self.pool.note_stored(stored_event(s, a, r, bs));
                        run = None;
                    }
                    _ => {}
                }
            }
            s.registered += 1;
        }
        if let Some(a) = run {
            self.pool
                .note_stored(stored_event(s, a, s.registered as usize, bs));
        }
    }

    /// Applies the step picked by `schedule` once its time has passed; `now` is the step's end
    /// on the simulated GPU (its deadline).
    pub(super) fn complete(&mut self, now: Instant) {
        self.metrics.engine_steps.fetch_add(1, Ordering::Relaxed);
        let bs = self.block_size as usize;
        let mut any_done = false;
        let mut generated_now: u64 = 0;
        let mut prompt_done: u64 = 0;
        let mut itls: Vec<f64> = Vec::new();
        let mut step_tokens: u64 = 0;
        for k in 0..self.step.len() {
            let Scheduled { idx, tokens } = self.step[k];
            let Some(s) = self.running.get_mut(idx) else {
                continue;
            };
            s.computed += tokens;
            step_tokens += u64::from(tokens);
            self.register_blocks(idx);
            let s = &mut self.running[idx];
            if s.computed as usize != s.tokens.len() {
                continue;
            }
            if s.generated == 0 {
                prompt_done += u64::from(s.prompt_len);
            }
            let tok = output_token(s.output_seed, s.generated);
            s.tokens.push(tok);
            s.generated += 1;
            generated_now += 1;
            match s.last_token_at {
                Some(prev) => itls.push(now.saturating_duration_since(prev).as_secs_f64()),
                None => s.first_token_at = Some(now),
            }
            s.last_token_at = Some(now);
            extend_block_hashes(&mut s.hashes, &s.tokens, bs);
            if s.generated >= s.max_tokens {
                any_done = true;
            } else {
                s.shared.publish(s.generated, None);
            }
        }
        self.step.clear();
        self.flush_events();
        if let Ok(mut h) = self.metrics.hist.lock() {
            h.iteration_tokens.observe(step_tokens as f64);
            for v in itls {
                h.itl.observe(v * self.speedup);
            }
        }
        self.metrics
            .generation_tokens
            .fetch_add(generated_now, Ordering::Relaxed);
        self.metrics
            .prompt_tokens
            .fetch_add(prompt_done, Ordering::Relaxed);
        if any_done {
            let mut i = 0;
            while i < self.running.len() {
                if self.running[i].generated >= self.running[i].max_tokens {
                    let s = self.running.remove(i);
                    self.end_seq(s, FINISHED, now);
                } else {
                    i += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SimConfig {
        SimConfig {
            max_num_seqs: 2,
            max_num_batched_tokens: 64,
            num_gpu_blocks: 64,
            ..SimConfig::default()
        }
    }

    fn req(prompt: Vec<u32>, max_tokens: u32) -> (NewRequest, Arc<ReqShared>) {
        let shared = Arc::new(ReqShared::new(true));
        (
            NewRequest {
                prompt,
                max_tokens,
                output_seed: 1,
                stops: false,
                shared: shared.clone(),
                image_regions: Vec::new(),
            },
            shared,
        )
    }

    #[test]
    fn batching_respects_limits_and_finishes_exactly() {
        let m = Arc::new(Metrics::default());
        let mut e = Engine::new(&cfg(), m.clone());
        let mut shared = Vec::new();
        for k in 0..3u32 {
            let (r, s) = req((0..100).map(|t| t + 1000 * k).collect(), 5);
            e.add(r);
            shared.push(s);
        }
        // Step 1: budget 64 goes to the first prompt's first chunk only.
        e.schedule();
        assert_eq!(e.running.len(), 1);
        assert_eq!(e.step[0].tokens, 64);
        e.complete(Instant::now());
        let mut steps = 1;
        while !e.running.is_empty() || !e.waiting.is_empty() {
            e.schedule();
            assert!(e.running.len() <= 2);
            let used: u32 = e.step.iter().map(|s| s.tokens).sum();
            assert!(used <= 64);
            e.complete(Instant::now());
            steps += 1;
            assert!(steps < 100);
        }
        for s in &shared {
            let p = s.progress();
            assert!(p.finished);
            assert_eq!(p.generated, 5);
        }
        assert_eq!(m.generation_tokens.load(Ordering::Relaxed), 15);
        assert_eq!(m.prompt_tokens.load(Ordering::Relaxed), 300);
        assert_eq!(e.pool.num_free(), 64);
    }

    #[test]
    fn repeated_prompt_hits_full_blocks() {
        let m = Arc::new(Metrics::default());
        let mut e = Engine::new(&cfg(), m.clone());
        let prompt: Vec<u32> = (0..100).collect();
        for _ in 0..2 {
            let (r, s) = req(prompt.clone(), 3);
            e.add(r);
            while !s.progress().finished {
                e.schedule();
                e.complete(Instant::now());
            }
            if m.prefix_hits.load(Ordering::Relaxed) > 0 {
                assert_eq!(s.cached_tokens(), 96);
            }
        }
        assert_eq!(m.prefix_hits.load(Ordering::Relaxed), 96);
        assert_eq!(m.prefix_queries.load(Ordering::Relaxed), 200);
        // A prompt of exactly 6 full blocks can hit at most 5 (the last token is recomputed).
        let (r, s) = req(prompt[..96].to_vec(), 1);
        e.add(r);
        e.schedule();
        e.complete(Instant::now());
        assert_eq!(s.cached_tokens(), 80);
    }

    #[test]
    fn preempts_when_blocks_run_out() {
        let c = SimConfig {
            max_num_seqs: 4,
            max_num_batched_tokens: 1000,
            num_gpu_blocks: 8,
            block_size: 16,
            ..SimConfig::default()
        };
        let m = Arc::new(Metrics::default());
        let mut e = Engine::new(&c, m.clone());
        let mut shared = Vec::new();
        for k in 0..2u32 {
            let (r, s) = req((0..60).map(|t| t + 1000 * k).collect(), 40);
            e.add(r);
            shared.push(s);
        }
        let mut steps = 0;
        while !e.running.is_empty() || !e.waiting.is_empty() {
            e.schedule();
            e.complete(Instant::now());
            steps += 1;
            assert!(steps < 1000);
        }
        assert!(m.preemptions.load(Ordering::Relaxed) > 0);
        for s in &shared {
            assert_eq!(s.progress().generated, 40);
        }
    }

    #[test]
    fn step_cost_follows_the_model() {
        let c = SimConfig {
            step_fixed_us: 1000.0,
            prefill_token_us: 15.0,
            attention_pair_us: 0.01,
            decode_seq_us: 10.0,
            decode_ctx_token_us: 0.5,
            max_num_batched_tokens: 100,
            ..SimConfig::default()
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let mut e = Engine::new(&c, Arc::new(Metrics::default()));
        let (r, _a) = req((0..150).collect(), 3);
        e.add(r);
        // Chunked prefill, 100 then 50 tokens. 100 tokens of compute (1.5 ms) hide the 1 ms
        // weight read; attention: 100·101/2 pairs.
        let cost = e.schedule();
        assert!(close(cost, 1500.0 + 0.01 * 5050.0), "{cost}");
        e.complete(Instant::now());
        // 50 tokens (0.75 ms) hide under the weight read; they attend to the first 100 too.
        let cost = e.schedule();
        assert!(
            close(cost, 1000.0 + 0.01 * (50.0 * 100.0 + 1275.0)),
            "{cost}"
        );
        e.complete(Instant::now());
        // A second request prefills while the first decodes with 151 tokens of context.
        let (r, _b) = req((1000..1020).collect(), 3);
        e.add(r);
        let cost = e.schedule();
        assert!(
            close(cost, 1000.0 + 0.01 * 210.0 + 10.0 + 0.5 * 151.0),
            "{cost}"
        );
        e.complete(Instant::now());
        // Both decode: contexts 152 and 21, no prefill, no attention pairs.
        let cost = e.schedule();
        assert!(close(cost, 1000.0 + 2.0 * 10.0 + 0.5 * 173.0), "{cost}");
    }

    #[test]
    fn cancelled_requests_are_dropped() {
        let m = Arc::new(Metrics::default());
        let mut e = Engine::new(&cfg(), m.clone());
        let (r, s) = req((0..40).collect(), 1000);
        e.add(r);
        e.schedule();
        e.complete(Instant::now());
        s.cancel();
        e.schedule();
        assert!(e.running.is_empty());
        assert!(s.progress().aborted);
        assert_eq!(e.pool.num_free(), 64);
    }
}
