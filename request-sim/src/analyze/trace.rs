//! Trace analysis: what a user checks before replaying (`request-sim analyze TRACE`).
//!
//! Everything is computed from the trace's requests in replay order (rebased times, normalised
//! hash ids) held as [`Columns`], a few numbers per request: `request-sim analyze` streams
//! them from the file ([`read_columns`]), so a trace of millions of rows needs no more memory
//! than that; [`analyze`] takes a loaded [`Trace`]. One pass, plus one for all LRU sizes.
//!
//! ## Prefix-cache hit ratio (definition)
//!
//! A request's prompt is the chain of blocks `b0, b1, ..., b(n-1)` (one per hash id, `block_size`
//! tokens each except the last, which holds the rest of `input_length`; tokens beyond the hashed
//! blocks are unique to the request). Block `i` is a **hit** when the whole chain `b0..=bi` was
//! part of an earlier request's prompt (same ids at the same positions) and still is in the
//! cache; matching stops at the first miss, as in vLLM/SGLang prefix caching. The hit ratio is
//!
//! `Σ tokens of hit blocks ÷ Σ input_length` over all requests,
//!
//! where a hit block counts its token count in the current request (`block_size`, or fewer for
//! the last partial block). If the cached copy of a block is shorter than this request needs
//! (an earlier request's partial last block), its cached tokens count and the match ends there.
//! The block ratio (`fully hit blocks ÷ hashed blocks`) is reported too.
//! The infinite cache never evicts; the LRU cache holds a given number of tokens
//! (`capacity / block_size` whole blocks) and evicts the least recently used block. A request
//! touches its blocks from last to first, so a prefix is always more recent than its tails and
//! tails are evicted first (as vLLM frees blocks in reverse order). All LRU sizes are computed
//! in one pass from LRU stack distances, so a finer sweep costs nothing extra.
//!
//! ## Routing what-if (`--instances N --routing POLICY`)
//!
//! N instances, each with its own LRU prefix cache of the given capacity; every request goes to
//! the instance a routing policy picks (`llm_common::routing`, the same code as llm-sim's built-in
//! router, so an online run through `llm-sim --router` chooses alike), and its hits are counted
//! against that instance's cache only, with the definition above. `least-loaded` sees no load
//! offline (all equal) and so goes round-robin; `session` uses the trace's session ids (the id
//! request-sim sends as `user` with `--session-user`) and sends requests without one
//! round-robin. A row "one cache of N × capacity" gives the ceiling: what a single cache of
//! the cluster's total size would hit.

use std::path::Path;

use super::analysis::{length_stats, Analysis, AnalyzeOptions};
use super::chains::{Caches, ChainsBuilder, IdSet};
use super::rates::{burstiness, rate_series, Arrivals};
use super::routing::routing_analysis;
use super::sessions::SessionFacts;
use crate::trace::error::TraceError;
use crate::trace::model::{SessionTurn, Trace, TraceFormat, TraceRequest, TraceStats};
use crate::trace::options::LoadOptions;
use crate::trace::pipeline::{ReorderWindow, TraceStream};

/// The requests of a trace as `analyze` needs them, in replay order: a few numbers per request
/// and its blocks as nodes of one trie, about 30 bytes a request plus 4 a block (a loaded row
/// takes some 600 while the trace loads), so that a trace of millions of rows is analysed as
/// it streams ([`Columns::push`] one request at a time) rather than loaded whole.
pub struct Columns {
    format: TraceFormat,
    block_size: usize,
    times_ms: Vec<f64>,
    outputs: Vec<u32>,
    chains: ChainsBuilder,
    distinct_ids: IdSet<u64>,
    with_ids: usize,
    sessions: SessionFacts,
    /// The loader's counts (set once the trace is read).
    pub stats: TraceStats,
}

impl Columns {
    pub fn new(format: TraceFormat, block_size: usize) -> Columns {
        Columns {
            format,
            block_size,
            times_ms: Vec::new(),
            outputs: Vec::new(),
            chains: ChainsBuilder::new(),
            distinct_ids: IdSet::default(),
            with_ids: 0,
            sessions: SessionFacts::default(),
            stats: TraceStats::default(),
        }
    }

    /// The next request in replay order, with its session turn.
    pub fn push(&mut self, r: &TraceRequest, turn: Option<&SessionTurn>) {
        self.times_ms.push(r.timestamp_ms);
        self.outputs.push(r.output_length);
        let ids = r.hash_ids.ids();
        self.chains.push(&ids, r.input_length);
        self.distinct_ids.extend(ids.iter().copied());
        self.with_ids += usize::from(!r.hash_ids.is_empty());
        self.sessions.push(r, turn);
    }

    /// A loaded trace's requests.
    pub fn from_trace(trace: &Trace) -> Columns {
        let mut c = Columns::new(trace.format, trace.block_size);
        let total: usize = trace.requests.iter().map(|r| r.hash_ids.len()).sum();
        c.chains.nodes.reserve(total);
        for r in &trace.requests {
            c.push(r, trace.sessions.get(r.index));
        }
        c.stats = trace.stats.clone();
        c
    }
}

/// The requests of the trace at `path` as [`Columns`]: streamed through the pipeline a replay
/// streams with (its default reorder window), so memory grows with the columns only; loaded
/// whole when the trace needs it (Bailian parent links), when a file turns out to be out of
/// time order by more than the window (the whole load sorts it), and from what cannot be read
/// twice: stdin (`-`), a pipe (`<(...)`), a FIFO, a device.
pub fn read_columns(path: &Path, opts: &LoadOptions) -> Result<Columns, TraceError> {
    let once = path == Path::new("-")
        || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
    if once {
        return Ok(Columns::from_trace(&crate::trace::load(path, opts)?));
    }
    let stream = TraceStream::open(path, opts, ReorderWindow::default())?;
    if stream.needs_whole() {
        return Ok(Columns::from_trace(&stream.into_whole()?));
    }
    let mut cols = Columns::new(stream.format(), stream.block_size());
    let stats = stream.stats_handle();
    for p in stream {
        match p {
            Ok(p) => cols.push(&p.req, p.turn.as_ref()),
            Err(e) if e.is_out_of_order() => {
                return Ok(Columns::from_trace(&crate::trace::load(path, opts)?));
            }
            Err(e) => return Err(e),
        }
    }
    cols.stats = stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(cols)
}

/// Analyses a loaded trace.
pub fn analyze(trace: &Trace, opts: &AnalyzeOptions) -> Analysis {
    analyze_columns(Columns::from_trace(trace), opts)
}

/// Analyses a trace's requests (see [`Columns`]).
pub fn analyze_columns(cols: Columns, opts: &AnalyzeOptions) -> Analysis {
    let Columns {
        format,
        block_size,
        times_ms,
        outputs,
        chains,
        distinct_ids,
        with_ids,
        mut sessions,
        stats,
    } = cols;
    let requests = times_ms.len();
    let distinct_hash_ids = distinct_ids.len();
    drop(distinct_ids);
    let percentiles: Vec<f64> = if opts.percentiles.is_empty() {
        vec![50.0, 90.0, 99.0]
    } else {
        opts.percentiles.clone()
    };
    let arrivals = Arrivals::of(times_ms);
    let chains = chains.finish(block_size);
    let caches = Caches::of(&chains, requests, &opts.cache_sizes_tokens);
    Analysis {
        format,
        block_size,
        requests,
        duration_s: arrivals.duration_s,
        mean_rate_per_s: arrivals.mean_rate_per_s,
        peak_rate_per_s: arrivals.peak,
        peak_rate_at_s: arrivals.peak_at,
        distinct_timestamps: arrivals.distinct_timestamps,
        max_requests_per_timestamp: arrivals.max_same,
        burstiness: burstiness(&arrivals.times_s),
        think_time_s: sessions.think_times(&percentiles),
        input_length: length_stats(chains.inputs.iter().copied(), &percentiles),
        output_length: length_stats(outputs.into_iter(), &percentiles),
        requests_with_hash_ids: with_ids,
        distinct_hash_ids,
        distinct_prefix_blocks: chains.node_count,
        sessions: sessions.stats(),
        prefix_cache: caches.prefix_cache,
        lru_sweep: caches.lru_sweep,
        rate_series: rate_series(&arrivals.times_s, arrivals.duration_s, opts.rate_bucket_s),
        trace_stats: stats,
        routing: opts
            .routing
            .as_ref()
            .map(|o| routing_analysis(&chains, &sessions, o)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::chains::{ideal_prefix_hits, Chains};
    use crate::trace::TraceRequest;

    fn trace(block: usize, reqs: &[(f64, u32, &[u64])]) -> Trace {
        Trace {
            format: TraceFormat::from_name("mooncake").unwrap(),
            block_size: block,
            requests: reqs
                .iter()
                .enumerate()
                .map(|(i, &(t, input, ids))| TraceRequest {
                    model: None,
                    reasoning: Default::default(),
                    images: None,
                    index: i,
                    line: i + 1,
                    timestamp_ms: t,
                    input_length: input,
                    output_length: 1,
                    hash_ids: ids.to_vec().into(),
                    session: None,
                })
                .collect(),
            stats: TraceStats::default(),
            sessions: Default::default(),
            chats: Vec::new(),
        }
    }

    #[test]
    fn infinite_cache_counts_chain_prefixes() {
        // block 10. r0: [1,2] 15 tokens (10 + 5). r1: [1,2,3] 30 tokens.
        // r2: [9,2] : 9 misses, so 2 (at a different chain) misses too. r3: [1,5]: hits 1.
        let t = trace(
            10,
            &[
                (0.0, 15, &[1, 2]),
                (1.0, 30, &[1, 2, 3]),
                (2.0, 20, &[9, 2]),
                (3.0, 12, &[1, 5]),
            ],
        );
        // r1: (1) hits 10; (1,2) was cached with 5 tokens (r0's partial last block), so it hits 5
        // tokens and ends the match.
        assert_eq!(ideal_prefix_hits(&t), vec![0, 15, 0, 10]);
        let a = analyze(&t, &AnalyzeOptions::default());
        assert_eq!(a.prefix_cache.hit_tokens, 25);
        assert_eq!(a.prefix_cache.input_tokens, 77);
        assert_eq!(a.prefix_cache.hit_blocks, 2);
        assert_eq!(a.prefix_cache.blocks, 9);
        assert_eq!(a.distinct_hash_ids, 5);
        assert_eq!(a.distinct_prefix_blocks, 6); // (1) (1,2) (1,2,3) (9) (9,2) (1,5)
        assert_eq!(a.prefix_cache.footprint_tokens, 60);
    }

    #[test]
    fn lru_evicts_least_recent_tails_first() {
        // block 1, capacity 2 blocks.
        // r0 [1,2,3]: miss; cache keeps the two most recent = (1),(1,2).
        // r1 [1,2,3]: hits (1),(1,2) then (1,2,3) misses -> 2 hits.
        // r2 [4]: miss; cache now (4) and (1) [(1,2) evicted as least recent].
        // r3 [1,2]: hits (1) only.
        let t = trace(
            1,
            &[
                (0.0, 3, &[1, 2, 3]),
                (1.0, 3, &[1, 2, 3]),
                (2.0, 1, &[4]),
                (3.0, 2, &[1, 2]),
            ],
        );
        let opts = AnalyzeOptions {
            cache_sizes_tokens: vec![0, 2, 100],
            ..Default::default()
        };
        let a = analyze(&t, &opts);
        let hits: Vec<u64> = a.lru_sweep.iter().map(|p| p.hit_tokens).collect();
        assert_eq!(hits, vec![0, 3, 3 + 2]);
        assert_eq!(a.lru_sweep[1].capacity_blocks, 2);
        assert_eq!(a.prefix_cache.hit_tokens, 5);
    }

    #[test]
    fn one_pass_sweep_equals_direct_lru_simulation() {
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut rnd = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut evicting_rounds = 0;
        for round in 0..200 {
            // Small id alphabets so chains are shared, diverge and repeat; random lengths so
            // partial blocks, missing tails and surplus ids all occur.
            let block = 1 + rnd(4) as usize;
            let alphabet = 2 + rnd(6);
            let reqs: Vec<(f64, u32, Vec<u64>)> = (0..(1 + rnd(40)))
                .map(|i| {
                    let n = rnd(7) as usize;
                    let ids: Vec<u64> = (0..n).map(|_| rnd(alphabet)).collect();
                    let input = 1 + rnd((n * block + 3) as u64) as u32;
                    (i as f64, input, ids)
                })
                .collect();
            let refs: Vec<(f64, u32, &[u64])> = reqs
                .iter()
                .map(|(t, i, ids)| (*t, *i, ids.as_slice()))
                .collect();
            let t = trace(block, &refs);
            let chains = Chains::build(&t);
            let caps: Vec<u64> = (0..=chains.node_count as u64 + 2).collect();
            let swept = chains.lru_sweep(&caps);
            for (&c, &got) in caps.iter().zip(&swept) {
                assert_eq!(got, chains.lru(c as usize), "round {round}, capacity {c}");
            }
            let (hits, hit_blocks) = chains.infinite();
            let inf = (hits.iter().map(|&h| u64::from(h)).sum::<u64>(), hit_blocks);
            assert_eq!(*swept.last().unwrap(), inf, "round {round}");
            // Rounds where eviction matters: some capacity hits less than infinite, but not 0.
            if swept.iter().any(|&(h, _)| h > 0 && h < inf.0) {
                evicting_rounds += 1;
            }
        }
        assert!(evicting_rounds > 50, "{evicting_rounds}");
    }

    #[test]
    fn rates_and_lengths() {
        let t = trace(
            512,
            &[
                (0.0, 100, &[]),
                (200.0, 200, &[]),
                (900.0, 300, &[]),
                (1000.0, 400, &[]),
                (61_500.0, 500, &[]),
            ],
        );
        let a = analyze(&t, &AnalyzeOptions::default());
        assert_eq!(a.requests, 5);
        assert_eq!(a.duration_s, 61.5);
        assert!((a.mean_rate_per_s.unwrap() - 5.0 / 61.5).abs() < 1e-12);
        assert_eq!((a.peak_rate_per_s, a.peak_rate_at_s), (3, 0.0));
        assert_eq!(a.input_length.mean, 300.0);
        assert_eq!(a.input_length.percentiles.get(50.0), Some(300.0));
        assert_eq!(a.input_length.percentiles.get(90.0), Some(460.0));
        assert_eq!(a.input_length.max, 500);
        assert_eq!(a.rate_series.bucket_s, 60.0);
        let counts: Vec<u64> = a.rate_series.points.iter().map(|p| p.requests).collect();
        assert_eq!(counts, vec![4, 1]);
        assert_eq!(a.prefix_cache.hit_ratio, 0.0);
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["input_length"]["percentiles"]["p90"], 460.0);
        let text = crate::report::render_analysis(&a);
        assert!(text.contains("Requests:"), "{text}");
        assert!(
            text.contains("Peak request rate (req/s, 1-s window):   3 (at 0 s)\n"),
            "{text}"
        );
    }

    #[test]
    fn empty_trace_does_not_panic() {
        let t = trace(16, &[]);
        let a = analyze(&t, &AnalyzeOptions::default());
        assert_eq!(a.requests, 0);
        let _ = crate::report::render_analysis(&a);
    }
}
