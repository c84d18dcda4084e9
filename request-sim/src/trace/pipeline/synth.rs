//! `transform --synthesize`: fit a trace, then write a new trace of any length from the fit.
//!
//! The fit ([`Fit::of`]) has three parts:
//!
//! - **Arrivals**: the request rate over the trace in buckets of 60 s (the shape of the hour),
//!   and the burstiness around it: the coefficient of variation of the gaps between requests
//!   measured in *operational time* (the integrated rate, where a rate-following Poisson process
//!   has gaps of mean 1 and CV 1). New arrivals are a gamma renewal process with that CV in
//!   operational time, mapped back through the rate; past the end of the fitted span the rate
//!   repeats (a day-like cycle of the trace's length). `--rate R` scales it to a mean of R.
//! - **Requests**: one *template* per request of the trace, kept jointly (so input and output
//!   lengths keep their joint distribution): input and output length, hash-id count, how many
//!   of its leading blocks an earlier request already held (`shared`), and how long ago the
//!   deepest of those blocks was last used (`reuse_ms`, the reuse distance in time).
//! - **Prefix tree**: not stored as a tree. A new request draws a template and takes its first
//!   `shared` blocks from the generated request nearest to `reuse_ms` ago that has that many
//!   blocks (so a root shared by many requests stays shared by many, a conversation's next
//!   turn extends its previous turn, and each block comes back after the same time as in the
//!   trace); the rest are fresh ids, numbered in order of first use. Templates are dealt in
//!   seeded shuffled rounds, each once a round (so an hour's length percentiles are the
//!   trace's, not a resample's); one whose reuse lies before the start of the new trace waits
//!   until it fits (the trace had the same cold start).
//!
//! Memory: the generated requests are written as they are made; only those within the longest
//! reuse distance of the fit are kept (at most the fitted trace's span, times the rate), so a
//! trace of any duration takes the same memory.

use std::collections::{HashMap, VecDeque};
use std::io::Write;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Gamma};

use crate::trace::model::Trace;

/// Width of the rate buckets of the fit, seconds.
const BUCKET_S: f64 = 60.0;
/// Templates dealt for one request (and waiting ones looked at) while their reuse lies before
/// the start of the new trace.
const DRAWS: usize = 32;
/// Generated requests looked at on each side of the reuse time for a source.
const NEIGHBOURS: usize = 256;

/// One request of the fitted trace, as a new request copies it.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub input_length: u32,
    pub output_length: u32,
    /// Hash ids of the request.
    pub blocks: u32,
    /// Leading blocks an earlier request held.
    pub shared: u32,
    /// Time since the deepest shared block was last used (ms); 0 when `shared` is 0.
    pub reuse_ms: f64,
    /// The earlier requests held the deepest shared block only in part (it was their last,
    /// partial block): the new request copies it from a request that ends with it.
    pub partial: bool,
}

/// What [`Fit::of`] learns from a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// Requests per bucket of [`BUCKET_S`] (the last one may be shorter: `span_s`).
    pub counts: Vec<f64>,
    /// The fitted span, seconds.
    pub span_s: f64,
    /// CV of the gaps in operational time (1 = Poisson around the rate curve).
    pub burstiness: f64,
    pub templates: Vec<Template>,
    pub block_size: usize,
}

impl Fit {
    /// The fit of a loaded trace.
    pub fn of(trace: &Trace) -> Fit {
        let reqs = &trace.requests;
        let span_s = reqs.last().map_or(0.0, |r| r.timestamp_ms / 1e3).max(1e-3);
        let buckets = (span_s / BUCKET_S).ceil().max(1.0) as usize;
        let mut counts = vec![0.0; buckets];
        for r in reqs {
            let b = ((r.timestamp_ms / 1e3 / BUCKET_S) as usize).min(buckets - 1);
            counts[b] += 1.0;
        }
        let mut fit = Fit {
            counts,
            span_s,
            burstiness: 1.0,
            templates: templates(trace),
            block_size: trace.block_size,
        };
        // Gaps in operational time.
        let ops: Vec<f64> = reqs
            .iter()
            .map(|r| fit.integral(r.timestamp_ms / 1e3))
            .collect();
        let gaps: Vec<f64> = ops.windows(2).map(|w| w[1] - w[0]).collect();
        if gaps.len() >= 2 {
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            if mean > 0.0 && var > 0.0 {
                fit.burstiness = var.sqrt() / mean;
            }
        }
        fit
    }

    /// Requests in the fitted trace.
    pub fn requests(&self) -> f64 {
        self.counts.iter().sum()
    }

    /// Mean rate of the fitted trace, requests per second.
    pub fn mean_rate(&self) -> f64 {
        self.requests() / self.span_s
    }

    /// Width of bucket `b` in seconds.
    fn width(&self, b: usize) -> f64 {
        (self.span_s - b as f64 * BUCKET_S).clamp(0.0, BUCKET_S)
    }

    /// The integrated rate from 0 to `t` seconds (repeating past the span).
    fn integral(&self, t: f64) -> f64 {
        let cycles = (t / self.span_s).floor();
        let mut rest = t - cycles * self.span_s;
        let mut total = cycles * self.requests();
        for (b, &c) in self.counts.iter().enumerate() {
            let w = self.width(b);
            if rest <= w {
                return total + if w > 0.0 { c * rest / w } else { 0.0 };
            }
            total += c;
            rest -= w;
        }
        total
    }

    /// The time (s) at which the integrated rate reaches `area` (repeating past the span).
    fn invert(&self, area: f64) -> f64 {
        let per_cycle = self.requests();
        let cycles = (area / per_cycle).floor();
        let mut rest = area - cycles * per_cycle;
        let mut t = cycles * self.span_s;
        for (b, &c) in self.counts.iter().enumerate() {
            let w = self.width(b);
            if rest <= c && c > 0.0 {
                return t + w * rest / c;
            }
            rest -= c;
            t += w;
        }
        t
    }

    /// Writes `duration_s` seconds of a new trace at a mean of `rate` requests per second
    /// (`None`: the fitted rate) to `out`, as Mooncake rows; how many requests it wrote.
    pub fn generate(
        &self,
        duration_s: f64,
        rate: Option<f64>,
        seed: u64,
        out: &mut dyn Write,
    ) -> std::io::Result<u64> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let speed = rate.map_or(1.0, |r| r / self.mean_rate());
        let shape = 1.0 / (self.burstiness * self.burstiness);
        let gaps = Gamma::new(shape, 1.0 / shape).ok();
        let mut gen = Generator {
            recent: VecDeque::new(),
            horizon_ms: self
                .templates
                .iter()
                .map(|t| t.reuse_ms)
                .fold(0.0, f64::max),
            next_id: 0,
            deck: Vec::new(),
            deferred: VecDeque::new(),
        };
        // Each cycle of the fitted span gets exactly its share of requests (the fitted count
        // times the speed-up), their gamma gaps scaled to fill the cycle: the burstiness (CV)
        // is the fit's, and the mean rate does not wander with it.
        let per_cycle = self.requests();
        let m = (per_cycle * speed).round().max(1.0) as usize;
        let mut cum: Vec<f64> = Vec::with_capacity(m);
        let (mut written, mut first) = (0u64, None::<f64>);
        for cycle in 0u64.. {
            cum.clear();
            let mut sum = 0.0;
            for _ in 0..m {
                sum += gaps.as_ref().map_or(1.0, |g| g.sample(&mut rng));
                cum.push(sum);
            }
            for &c in &cum {
                let area = (cycle as f64 + c / sum) * per_cycle;
                let t_ms = self.invert(area) * 1e3;
                let t = t_ms - *first.get_or_insert(t_ms);
                if t >= duration_s * 1e3 {
                    return Ok(written);
                }
                let (tpl, ids) = gen.request(self, t, &mut rng);
                let line = serde_json::json!({
                    "timestamp": crate::trace::formats::write::round_ms(t),
                    "input_length": tpl.input_length,
                    "output_length": tpl.output_length,
                    "hash_ids": ids,
                });
                serde_json::to_writer(&mut *out, &line)?;
                out.write_all(b"\n")?;
                written += 1;
            }
        }
        Ok(written)
    }
}

/// One generated request still within reach of a reuse.
struct Recent {
    at_ms: f64,
    ids: Vec<u64>,
    /// Already the source of a deep reuse (two blocks or more): a conversation's turn has one
    /// next turn, so another request of the same depth looks for another source first.
    used: bool,
}

/// The generated requests still within reach of a reuse, and the next fresh id.
struct Generator {
    /// In time order.
    recent: VecDeque<Recent>,
    horizon_ms: f64,
    next_id: u64,
    /// Templates left in this round (indexes), and those waiting for their reuse to fit.
    deck: Vec<u32>,
    deferred: VecDeque<u32>,
}

impl Generator {
    /// The next template: templates are dealt in seeded shuffled rounds, each once a round, so
    /// the lengths of an hour are the trace's own (not a resample, whose tails would wander).
    /// A template whose reuse lies before the start of the new trace waits until it fits (the
    /// recorded trace had the same cold start).
    fn draw(&mut self, fit: &Fit, t: f64, rng: &mut impl Rng) -> usize {
        let fits = |i: usize| {
            let tpl = &fit.templates[i];
            tpl.shared == 0 || tpl.reuse_ms <= t
        };
        if let Some(k) = self
            .deferred
            .iter()
            .take(DRAWS)
            .position(|&i| fits(i as usize))
        {
            return self.deferred.remove(k).map_or(0, |i| i as usize);
        }
        for _ in 0..DRAWS {
            if self.deck.is_empty() {
                self.deck = (0..fit.templates.len() as u32).collect();
                self.deck.shuffle(rng);
            }
            let i = self.deck.pop().map_or(0, |i| i as usize);
            if fits(i) {
                return i;
            }
            self.deferred.push_back(i as u32);
        }
        // Nothing fits yet: the oldest waiting template, sharing what it can.
        self.deferred.pop_front().map_or(0, |i| i as usize)
    }

    /// A new request at `t` ms: its template and hash ids.
    fn request<'f>(
        &mut self,
        fit: &'f Fit,
        t: f64,
        rng: &mut impl Rng,
    ) -> (&'f Template, Vec<u64>) {
        while self
            .recent
            .front()
            .is_some_and(|r| t - r.at_ms > self.horizon_ms)
        {
            self.recent.pop_front();
        }
        let pick = &fit.templates[self.draw(fit, t, rng)];
        let mut ids: Vec<u64> = Vec::with_capacity(pick.blocks as usize);
        let want = (pick.shared as usize).min(pick.blocks as usize);
        if want > 0 {
            if let Some((s, k)) = self.source(t - pick.reuse_ms, want, pick.partial) {
                let src = &mut self.recent[s];
                ids.extend_from_slice(&src.ids[..k]);
                src.used |= k >= 2;
            }
        }
        while ids.len() < pick.blocks as usize {
            ids.push(self.next_id);
            self.next_id += 1;
        }
        self.recent.push_back(Recent {
            at_ms: t,
            ids: ids.clone(),
            used: false,
        });
        (pick, ids)
    }

    /// The generated request to copy `blocks` leading blocks from, nearest to `at` ms: one
    /// with more blocks (`partial`: exactly as many, so the last copied block is its partial
    /// one) not yet used for a deep reuse, else one with at least as many, else the longest
    /// near `at`; and how many blocks to copy.
    fn source(&self, at: f64, blocks: usize, partial: bool) -> Option<(usize, usize)> {
        let i = self.recent.partition_point(|r| r.at_ms < at);
        // Outwards from `at`, the nearer in time first.
        let (mut older, mut newer) = (i, i);
        let near = std::iter::from_fn(|| {
            let o = older.checked_sub(1).map(|j| (j, at - self.recent[j].at_ms));
            let n = (newer < self.recent.len()).then(|| (newer, self.recent[newer].at_ms - at));
            match (o, n) {
                (Some((j, a)), Some((_, b))) if a <= b => {
                    older = j;
                    Some(j)
                }
                (_, Some((j, _))) => {
                    newer += 1;
                    Some(j)
                }
                (Some((j, _)), None) => {
                    older = j;
                    Some(j)
                }
                (None, None) => None,
            }
        })
        .take(2 * NEIGHBOURS);
        let (mut enough, mut longest): (Option<usize>, Option<usize>) = (None, None);
        for j in near {
            let r = &self.recent[j];
            let shape = if partial {
                r.ids.len() == blocks
            } else {
                r.ids.len() > blocks
            };
            if shape && (blocks < 2 || !r.used) {
                return Some((j, blocks));
            }
            if enough.is_none() && r.ids.len() >= blocks {
                enough = Some(j);
            }
            if longest.is_none_or(|l| self.recent[l].ids.len() < r.ids.len()) {
                longest = Some(j);
            }
        }
        enough
            .map(|j| (j, blocks))
            .or_else(|| longest.map(|j| (j, self.recent[j].ids.len().min(blocks))))
    }
}

/// One template per request: shared leading blocks and their reuse distance, through a trie
/// of the blocks (keyed by parent node and id, so ids need not be chain-unique).
fn templates(trace: &Trace) -> Vec<Template> {
    let block = trace.block_size.max(1) as u64;
    let mut nodes: HashMap<(u32, u64), u32> = HashMap::new();
    // Per node: when it was last used, and the most tokens a request held in it.
    let mut last_used: Vec<f64> = Vec::new();
    let mut held: Vec<u64> = Vec::new();
    let mut path: Vec<u32> = Vec::new();
    trace
        .requests
        .iter()
        .map(|r| {
            path.clear();
            let (mut parent, mut shared, mut reuse_ms, mut partial) = (u32::MAX, 0u32, 0.0, false);
            for &h in r.hash_ids.ids().iter() {
                let node = match nodes.get(&(parent, h)) {
                    Some(&n) if shared as usize == path.len() => {
                        shared += 1;
                        reuse_ms = r.timestamp_ms - last_used[n as usize];
                        partial = held[n as usize] < block;
                        n
                    }
                    Some(&n) => n,
                    None => {
                        let n = last_used.len() as u32;
                        nodes.insert((parent, h), n);
                        last_used.push(r.timestamp_ms);
                        held.push(0);
                        n
                    }
                };
                path.push(node);
                parent = node;
            }
            let len = u64::from(r.input_length);
            for (i, &n) in path.iter().enumerate() {
                last_used[n as usize] = r.timestamp_ms;
                let tokens = block.min(len.saturating_sub(i as u64 * block));
                held[n as usize] = held[n as usize].max(tokens);
            }
            Template {
                input_length: r.input_length,
                output_length: r.output_length,
                blocks: r.hash_ids.len() as u32,
                shared,
                reuse_ms,
                partial,
            }
        })
        .collect()
}
