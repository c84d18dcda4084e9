//! The trace-ideal prefix-cache hit ratio over the requests the server processed
//! ([`ServedIdeal`]): what an unbounded cache would hit if it had seen exactly the requests
//! the server worked on, in the order they were sent.
//!
//! A request the server refused (an HTTP 400 for a prompt over `--max-model-len`), one that
//! could not connect, and one never sent neither count nor leave blocks behind: the server
//! never cached them. "Processed" is a request answered `ok`, or one whose first token came
//! (a timeout or cut mid-stream still prefilled its prompt). A `--dry-run` counts every
//! request (the plan's ideal).
//!
//! Records complete out of send order; each sent request carries its send sequence number
//! ([`SentBlocks::seq`], dense over the sent requests), and requests are applied to the cache
//! in that order through a reorder buffer that holds only the requests still waiting for an
//! earlier one, so memory follows the requests in flight, not the run's length.

use std::collections::BTreeMap;

use crate::analyze::IdealCache;
use crate::record::{Record, SentBlocks, Status};

/// The ideal over the processed requests, built as their records arrive.
#[derive(Debug, Clone)]
pub struct ServedIdeal {
    cache: IdealCache,
    /// Send sequence number of the next request to apply.
    next: u64,
    /// Requests that arrived before an earlier-sent one: seq → (processed, instance, blocks).
    waiting: BTreeMap<u64, (bool, Option<usize>, SentBlocks)>,
    hits: Option<u64>,
    input: u64,
    processed: u64,
    sent: u64,
    any_hash_ids: bool,
    /// (trace-ideal hit tokens, prompt tokens) of each processed request, for the ideal at
    /// the server's block size ([`IdealCount::ratio_at_block`]); 8 bytes a request.
    per_request: Vec<(u32, u32)>,
    /// The routed ideal: one cache per instance that served (as the record says: its
    /// response or its KV placement), each fed the requests placed there.
    routed: Routed,
}

/// The routed ideal as it is counted (see [`ServedIdeal`]).
#[derive(Debug, Clone, Default)]
struct Routed {
    caches: Vec<Option<IdealCache>>,
    /// (hit tokens in its instance's cache, prompt tokens) of each processed, placed request.
    per_request: Vec<(u32, u32)>,
    /// Processed requests per instance, and processed requests no instance was known for.
    requests: Vec<u64>,
    unplaced: u64,
    block_size: usize,
}

/// The hit ratio of whole server blocks over (hit, prompt) pairs: a shared prefix counts only
/// as far as it fills whole blocks of `block`, and never a request's last token.
fn at_block(per_request: &[(u32, u32)], block: u32) -> Option<f64> {
    let block = u64::from(block.max(1));
    let (mut hit, mut input) = (0u64, 0u64);
    for &(h, n) in per_request {
        let usable = u64::from(h.min(n.saturating_sub(1)));
        hit += usable / block * block;
        input += u64::from(n);
    }
    (input > 0).then(|| hit as f64 / input as f64)
}

/// The routed ideal over the processed requests (see [`ServedIdeal`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RoutedCount {
    /// Processed requests per instance (instance order of the server section).
    pub requests: Vec<u64>,
    /// Processed requests whose instance is not known.
    pub unplaced: u64,
    per_request: Vec<(u32, u32)>,
}

impl RoutedCount {
    /// The ratio K unbounded caches reach under the placement that happened (placed requests
    /// only); at the server's block size when `block` is given.
    pub fn ratio(&self, block: Option<u32>) -> Option<f64> {
        match block {
            Some(b) => at_block(&self.per_request, b),
            None => {
                let (h, n) = self
                    .per_request
                    .iter()
                    .fold((0u64, 0u64), |(h, n), &(a, b)| {
                        (h + u64::from(a), n + u64::from(b))
                    });
                (n > 0).then(|| h as f64 / n as f64)
            }
        }
    }
}

/// What [`ServedIdeal`] counted.
#[derive(Debug, Clone, PartialEq)]
pub struct IdealCount {
    /// Hit ratio an unbounded cache reaches on the processed requests (`None`: no request had
    /// hash ids, or the cache outgrew its cap).
    pub ratio: Option<f64>,
    /// Requests counted (processed by the server) of those sent.
    pub processed: u64,
    pub sent: u64,
    per_request: Vec<(u32, u32)>,
    /// The routed ideal, when some processed request's instance is known.
    pub routed: Option<RoutedCount>,
}

impl IdealCount {
    /// The ideal of a server that caches whole blocks of `block` tokens (vLLM): a request's
    /// shared prefix counts only as far as it fills whole server blocks, and never its last
    /// token (vLLM recomputes at least one). `None` without a ratio.
    pub fn ratio_at_block(&self, block: u32) -> Option<f64> {
        self.ratio?;
        at_block(&self.per_request, block)
    }
}

impl ServedIdeal {
    pub fn new(block_size: usize) -> ServedIdeal {
        ServedIdeal {
            cache: IdealCache::new(block_size, IdealCache::MAX_BLOCKS),
            next: 0,
            waiting: BTreeMap::new(),
            hits: Some(0),
            input: 0,
            processed: 0,
            sent: 0,
            any_hash_ids: false,
            per_request: Vec::new(),
            routed: Routed {
                block_size,
                ..Routed::default()
            },
        }
    }

    /// The record of a sent request and its blocks (records of unsent requests carry none).
    pub fn add(&mut self, rec: &Record, blocks: &SentBlocks) {
        let processed = matches!(rec.status, Status::Ok | Status::DryRun) || rec.ttft_ms.is_some();
        // The instance that served it: its KV placement, else the one its response named.
        let instance = rec
            .kv_placement
            .as_ref()
            .map(|k| k.instance)
            .or_else(|| rec.server.as_ref().and_then(|s| s.instance));
        if blocks.seq != self.next {
            self.waiting
                .insert(blocks.seq, (processed, instance, blocks.clone()));
            return;
        }
        self.apply(processed, instance, blocks);
        while let Some(e) = self.waiting.first_entry() {
            if *e.key() != self.next {
                break;
            }
            let (p, i, b) = e.remove();
            self.apply(p, i, &b);
        }
    }

    fn apply(&mut self, processed: bool, instance: Option<usize>, blocks: &SentBlocks) {
        self.next = blocks.seq + 1;
        self.sent += 1;
        if !processed {
            return;
        }
        let r = &mut self.routed;
        match instance {
            Some(i) => {
                if r.caches.len() <= i {
                    r.caches.resize_with(i + 1, || None);
                    r.requests.resize(i + 1, 0);
                }
                r.requests[i] += 1;
                let bs = r.block_size;
                let cache =
                    r.caches[i].get_or_insert_with(|| IdealCache::new(bs, IdealCache::MAX_BLOCKS));
                if let Some(h) = cache.hits_of(&blocks.hash_ids.ids(), blocks.input_length) {
                    r.per_request.push((h, blocks.input_length));
                }
            }
            None => r.unplaced += 1,
        }
        self.processed += 1;
        self.any_hash_ids |= !blocks.hash_ids.is_empty();
        self.input += u64::from(blocks.input_length);
        let hit = self
            .cache
            .hits_of(&blocks.hash_ids.ids(), blocks.input_length);
        if let Some(h) = hit {
            self.per_request.push((h, blocks.input_length));
        }
        self.hits = self.hits.zip(hit).map(|(a, b)| a + u64::from(b));
    }

    /// The ratio over every request seen. A gap in the sequence (a sent request whose record
    /// never came, which the run refuses anyway) is skipped rather than waited for.
    pub fn finish(mut self) -> IdealCount {
        while let Some((seq, (p, i, b))) = self.waiting.pop_first() {
            self.next = seq;
            self.apply(p, i, &b);
        }
        let ratio = self
            .hits
            .filter(|_| self.any_hash_ids && self.input > 0)
            .map(|h| h as f64 / self.input as f64);
        IdealCount {
            ratio,
            processed: self.processed,
            sent: self.sent,
            per_request: self.per_request,
            routed: (!self.routed.requests.is_empty()).then_some(RoutedCount {
                requests: self.routed.requests,
                unplaced: self.routed.unplaced,
                per_request: self.routed.per_request,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(status: Status, ttft: Option<f64>) -> Record {
        Record {
            ttft_ms: ttft,
            ..Record::new(0, 0, status)
        }
    }

    fn blocks(seq: u64, input_length: u32, hash_ids: &[u64]) -> SentBlocks {
        SentBlocks {
            seq,
            input_length,
            hash_ids: hash_ids.to_vec().into(),
        }
    }

    #[test]
    fn a_refused_request_neither_counts_nor_warms_the_cache() {
        // Request 1 (refused) would have cached block 7 for request 2.
        let mut ideal = ServedIdeal::new(4);
        ideal.add(&rec(Status::Ok, Some(1.0)), &blocks(0, 8, &[1, 2]));
        ideal.add(&rec(Status::HttpError, None), &blocks(1, 12, &[1, 2, 7]));
        ideal.add(&rec(Status::Ok, Some(1.0)), &blocks(2, 12, &[1, 2, 7]));
        let c = ideal.finish();
        // Request 2 hits blocks 1 and 2 only: 8 of 8 + 12 tokens.
        assert_eq!(c.ratio, Some(8.0 / 20.0));
        assert_eq!((c.processed, c.sent), (2, 3));
    }

    #[test]
    fn records_arriving_out_of_send_order_give_the_send_order_ideal() {
        let mut in_order = ServedIdeal::new(4);
        let mut shuffled = ServedIdeal::new(4);
        let reqs = [
            (Status::Ok, 8, vec![1u64, 2]),
            (Status::Ok, 12, vec![1, 2, 3]),
            (Status::Timeout, 16, vec![1, 2, 3, 4]),
            (Status::Ok, 16, vec![1, 2, 3, 4]),
        ];
        for (i, (s, n, h)) in reqs.iter().enumerate() {
            let ttft = (*s != Status::HttpError).then_some(1.0);
            in_order.add(&rec(*s, ttft), &blocks(i as u64, *n, h));
        }
        for i in [3usize, 1, 0, 2] {
            let (s, n, h) = &reqs[i];
            shuffled.add(&rec(*s, Some(1.0)), &blocks(i as u64, *n, h));
        }
        let (a, b) = (in_order.finish(), shuffled.finish());
        // 0 + 8 + 12 + 16 hits over 8 + 12 + 16 + 16 tokens.
        assert_eq!(a.ratio, Some(36.0 / 52.0));
        assert_eq!(a, b);
        assert!(shuffled_waiting_is_empty_after_finish());
    }

    fn shuffled_waiting_is_empty_after_finish() -> bool {
        let mut s = ServedIdeal::new(4);
        s.add(&rec(Status::Ok, Some(1.0)), &blocks(1, 4, &[1]));
        assert_eq!(s.waiting.len(), 1, "seq 1 waits for seq 0");
        s.add(&rec(Status::Ok, Some(1.0)), &blocks(0, 4, &[1]));
        s.waiting.is_empty()
    }

    #[test]
    fn the_ideal_at_the_servers_block_size_counts_whole_blocks() {
        // Trace blocks of 16; the second request shares 48 tokens (3 blocks), the third all
        // 64 of its tokens.
        let mut ideal = ServedIdeal::new(16);
        ideal.add(&rec(Status::Ok, Some(1.0)), &blocks(0, 64, &[1, 2, 3, 4]));
        ideal.add(&rec(Status::Ok, Some(1.0)), &blocks(1, 64, &[1, 2, 3, 9]));
        ideal.add(&rec(Status::Ok, Some(1.0)), &blocks(2, 64, &[1, 2, 3, 4]));
        let c = ideal.finish();
        assert_eq!(c.ratio, Some((48.0 + 64.0) / 192.0));
        // Server blocks of 32: 48 shared → 32; 64 shared → 63 usable → 32.
        assert_eq!(c.ratio_at_block(32), Some(64.0 / 192.0));
        // Of 16: 48, and 63 → 48.
        assert_eq!(c.ratio_at_block(16), Some(96.0 / 192.0));
    }

    #[test]
    fn no_hash_ids_no_ratio() {
        let mut ideal = ServedIdeal::new(4);
        ideal.add(&rec(Status::Ok, Some(1.0)), &blocks(0, 8, &[]));
        assert_eq!(ideal.finish().ratio, None);
    }
}
