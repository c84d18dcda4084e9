//! Re-tokenize built prompts with the real tokenizer: a quick sample at start-up, or a whole
//! trace slice with the block-sharing check.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;
use tokenizers::Tokenizer;

use crate::trace::TraceRequest;

use super::{Encoder, PromptBuilder, PromptError};

/// Result of [`verify_sample`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VerifyReport {
    /// Prompts built and re-tokenized.
    pub checked: usize,
    /// Prompts whose re-tokenization is exactly the intended token ids (hence length).
    pub exact: usize,
    /// Tokens re-tokenized in total.
    pub tokens: usize,
    /// Wall time of the check.
    pub elapsed_ms: f64,
    /// Description of the first prompt that was not exact.
    pub first_failure: Option<String>,
}

impl VerifyReport {
    /// Every checked prompt was exact.
    pub fn ok(&self) -> bool {
        self.exact == self.checked
    }

    /// `Ok(self)` when every checked prompt was exact, else [`PromptError::Verification`]
    /// naming the first failure (for callers that refuse to run with inexact prompts).
    pub fn into_result(self) -> Result<Self, PromptError> {
        if self.ok() {
            Ok(self)
        } else {
            Err(PromptError::Verification(format!(
                "{} of {} sampled prompts re-tokenized exactly; first failure: {}",
                self.exact,
                self.checked,
                self.first_failure.as_deref().unwrap_or("unknown")
            )))
        }
    }
}

/// Outcome of one prompt's re-tokenization.
struct Checked {
    ids: Vec<u32>,
    exact_length: bool,
    exact_ids: bool,
    failure: Option<String>,
}

fn check_one(builder: &PromptBuilder, tok: &Tokenizer, req: &TraceRequest) -> Checked {
    let n = req.input_length as usize;
    let text = builder.text(req, n);
    let intended = builder.token_ids(req, n);
    let ids = match tok.encode_fast(text.as_str(), false) {
        Ok(enc) => enc.get_ids().to_vec(),
        Err(e) => {
            return Checked {
                ids: Vec::new(),
                exact_length: false,
                exact_ids: false,
                failure: Some(format!("request {} (line {}): {e}", req.index, req.line)),
            }
        }
    };
    let exact_length = ids.len() == n;
    let exact_ids = ids == intended;
    let failure = (!exact_ids).then(|| {
        let at = ids
            .iter()
            .zip(&intended)
            .position(|(a, b)| a != b)
            .unwrap_or(ids.len().min(n));
        format!(
            "request {} (line {}): intended {n} tokens, re-tokenized to {}; first difference \
             at token {at}",
            req.index,
            req.line,
            ids.len()
        )
    });
    Checked {
        ids,
        exact_length,
        exact_ids,
        failure,
    }
}

/// Tokens re-tokenized at each end of a sampled prompt by [`verify_sample`].
pub const SAMPLE_WINDOW: usize = 512;

/// The pieces of one prompt to re-tokenize: its first and last `window` tokens (the whole
/// prompt if it has at most `2 * window` tokens), as (text, intended ids, first token index).
/// The cuts are at word or corpus-unit starts ([`PromptBuilder::cut_points`]), so with corpus
/// units a window can be a few tokens longer.
fn windows(
    builder: &PromptBuilder,
    req: &TraceRequest,
    window: usize,
) -> Result<Vec<(String, Vec<u32>, usize)>, String> {
    let n = req.input_length as usize;
    let text = builder.text(req, n);
    let intended = builder.token_ids(req, n);
    if n <= 2 * window {
        return Ok(vec![(text, intended, 0)]);
    }
    let cuts = builder.cut_points(req, n);
    if cuts.last() != Some(&(text.len(), n)) || intended.len() != n {
        return Err(format!(
            "request {} (line {}): built text has {} tokens, intended {n}",
            req.index,
            req.line,
            intended.len()
        ));
    }
    // The head ends at the first cut at or after `window` tokens; the tail starts at the last
    // cut at or before `n - window`.
    let &(head_b, head_t) = cuts
        .iter()
        .find(|c| c.1 >= window)
        .unwrap_or(&(text.len(), n));
    let &(tail_b, tail_t) = cuts
        .iter()
        .rev()
        .find(|c| c.1 <= n - window)
        .unwrap_or(&(0, 0));
    // A window that starts a text starts without its space, like a whole prompt
    // (SentencePiece vocabularies).
    let strip = usize::from(builder.vocab().strips_first_space() && tail_b > 0);
    Ok(vec![
        (text[..head_b].to_string(), intended[..head_t].to_vec(), 0),
        (
            text[tail_b + strip..].to_string(),
            intended[tail_t..].to_vec(),
            tail_t,
        ),
    ])
}

/// Start-up check: build the prompts of `n` requests spread evenly over `requests` (all of
/// them if fewer), re-tokenize the first and the last [`SAMPLE_WINDOW`] tokens of each (the
/// whole prompt when shorter) with `enc` (the local tokenizer, or the server's `/tokenize`),
/// and compare with the intended token ids. With `n = 8` this takes a few tens of
/// milliseconds locally; [`verify_trace`] checks whole prompts.
pub fn verify_sample<E: Encoder + ?Sized>(
    builder: &PromptBuilder,
    enc: &E,
    requests: &[TraceRequest],
    n: usize,
) -> VerifyReport {
    let start = Instant::now();
    let n = n.min(requests.len());
    let picks: Vec<&TraceRequest> = (0..n).map(|k| &requests[k * requests.len() / n]).collect();
    let mut failures: Vec<Option<String>> = vec![None; picks.len()];
    let mut texts = Vec::new();
    let mut wants = Vec::new();
    for (k, r) in picks.iter().enumerate() {
        match windows(builder, r, SAMPLE_WINDOW) {
            Ok(ws) => {
                for (t, ids, at) in ws {
                    texts.push(t);
                    wants.push((k, ids, at));
                }
            }
            Err(e) => failures[k] = Some(e),
        }
    }
    let mut tokens = 0;
    match enc.encode_many(&texts) {
        Ok(got) => {
            for ((k, want, at), got) in wants.into_iter().zip(got) {
                tokens += got.len();
                if got != want && failures[k].is_none() {
                    let r = picks[k];
                    let end = at + want.len();
                    // Same count, other ids: say where they part, not "32, not 32".
                    failures[k] = Some(if got.len() == want.len() {
                        let i = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
                        format!(
                            "request {} (line {}): tokens {at}..{end} re-tokenized to as many \
                             tokens, but other ones: token {} is id {} as built and {} as re-tokenized",
                            r.index,
                            r.line,
                            at + i,
                            want[i],
                            got[i]
                        )
                    } else {
                        format!(
                            "request {} (line {}): tokens {at}..{end} re-tokenized to {} tokens, \
                             not the intended {}",
                            r.index,
                            r.line,
                            got.len(),
                            want.len()
                        )
                    });
                }
            }
        }
        Err(e) => {
            for (k, f) in failures.iter_mut().enumerate() {
                if f.is_none() {
                    *f = Some(format!("request {}: {e}", picks[k].index));
                }
            }
        }
    }
    VerifyReport {
        checked: picks.len(),
        exact: failures.iter().filter(|f| f.is_none()).count(),
        tokens,
        elapsed_ms: start.elapsed().as_secs_f64() * 1e3,
        first_failure: failures.into_iter().flatten().next(),
    }
}

/// Result of [`verify_trace`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TraceVerifyReport {
    /// Requests checked.
    pub requests: usize,
    /// Prompts that re-tokenize to exactly `input_length` tokens.
    pub exact_length: usize,
    /// Prompts that re-tokenize to exactly the intended token ids.
    pub exact_ids: usize,
    /// `100 * exact_length / requests`.
    pub pct_exact: f64,
    /// Tokens re-tokenized in total.
    pub tokens: usize,
    /// Block occurrences whose (position, hash id) had been seen before and whose re-tokenized
    /// ids were compared with the earlier occurrence (prefix-compared for partial blocks).
    pub shared_blocks_compared: usize,
    /// Of those, blocks whose token ids differed (must be 0).
    pub shared_block_mismatches: usize,
    /// Requests whose first block was seen before (they share a prefix with an earlier one).
    pub requests_with_shared_prefix: usize,
    /// Σ over requests of k×block_size (capped at the prompt length), k = leading hash ids
    /// shared with some earlier request: the trace-ideal prefix-cache hit tokens.
    pub shared_prefix_tokens: u64,
    /// Places where requests with a common prefix of k hash ids continue with different
    /// hash ids (or one continues with its unique tail): each must differ from the first token
    /// of block k.
    pub branch_points: usize,
    /// Branch points whose continuations start with the same token (0 expected when the
    /// hash ids involved are less than the vocabulary size apart; see `docs/prompts.md`).
    pub first_token_collisions: usize,
    /// Branch points whose continuations start with the same two tokens (0 expected when the
    /// hash ids involved are less than the vocabulary size squared apart).
    pub two_token_collisions: usize,
    /// Description of the first first-token collision.
    pub first_collision: Option<String>,
    /// Wall time of the check.
    pub elapsed_ms: f64,
    /// Description of the first failure (length, ids or sharing).
    pub first_failure: Option<String>,
}

impl TraceVerifyReport {
    /// All prompts exact and all shared blocks identical.
    pub fn ok(&self) -> bool {
        self.exact_ids == self.requests && self.shared_block_mismatches == 0
    }
}

/// What follows a trie node: the next hash id, or a request's unique tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Child {
    Block(u64),
    Tail(usize),
}

/// Incremental state of the sharing checks.
#[derive(Default)]
struct Sharing {
    /// (position, hash id) -> the longest re-tokenized block seen so far.
    blocks: HashMap<(u32, u64), Box<[u32]>>,
    /// (parent node, hash id) -> node; node 0 is the root (empty prefix).
    nodes: HashMap<(u32, u64), u32>,
    /// (parent node, first token) -> the child that starts with it.
    first_tokens: HashMap<(u32, u32), Child>,
    /// (parent node, first token, second token) -> the child that starts with them.
    first_two: HashMap<(u32, u32, u32), Child>,
    /// parent node -> number of distinct children.
    children: HashMap<u32, u32>,
    /// The number the next new trie node gets.
    next_node: u32,
}

impl Sharing {
    /// No block seen; the trie holds only its root (node 0).
    fn new() -> Sharing {
        Sharing {
            next_node: 1,
            ..Sharing::default()
        }
    }

    /// One request's re-tokenized prompt `ids`, walked block by block (`b` tokens a block):
    /// each block compared with the earlier ones of the same (position, hash id), and its
    /// place in the prefix trie (shared prefix, branch points) counted into `rep`.
    fn record(&mut self, rep: &mut TraceVerifyReport, req: &TraceRequest, ids: &[u32], b: usize) {
        let mut parent = 0u32;
        let mut on_known_path = true;
        let mut shared_blocks = 0usize;
        let mut pos = 0usize;
        for (i, &h) in req.hash_ids.ids().iter().enumerate() {
            if b == 0 || pos >= ids.len() {
                break;
            }
            let end = (pos + b).min(ids.len());
            let block = &ids[pos..end];
            self.compare_block(rep, req, i, h, block);
            // Prefix trie: shared-prefix length and first-token divergence.
            let node = match self.nodes.entry((parent, h)) {
                Entry::Occupied(e) => {
                    if on_known_path {
                        shared_blocks += 1;
                    }
                    *e.get()
                }
                Entry::Vacant(e) => {
                    on_known_path = false;
                    let node = self.next_node;
                    self.next_node += 1;
                    e.insert(node);
                    add_child(self, rep, parent, block, Child::Block(h), req);
                    node
                }
            };
            parent = node;
            pos = end;
        }
        if pos < ids.len() {
            add_child(self, rep, parent, &ids[pos..], Child::Tail(req.index), req);
        }
        if shared_blocks > 0 {
            rep.requests_with_shared_prefix += 1;
            rep.shared_prefix_tokens += (shared_blocks * b).min(ids.len()) as u64;
        }
    }

    /// Sharing: block `i` (hash id `h`) of `req` has the same tokens as the earlier blocks of
    /// the same (position, hash id), compared up to the shorter one.
    fn compare_block(
        &mut self,
        rep: &mut TraceVerifyReport,
        req: &TraceRequest,
        i: usize,
        h: u64,
        block: &[u32],
    ) {
        match self.blocks.entry((i as u32, h)) {
            Entry::Vacant(e) => {
                e.insert(block.into());
            }
            Entry::Occupied(mut e) => {
                rep.shared_blocks_compared += 1;
                let prev = e.get();
                let common = prev.len().min(block.len());
                if prev[..common] != block[..common] {
                    rep.shared_block_mismatches += 1;
                    if rep.first_failure.is_none() {
                        rep.first_failure = Some(format!(
                            "request {} (line {}): block {i} (hash id {h}) differs from \
                             an earlier request's block with the same hash id",
                            req.index, req.line
                        ));
                    }
                } else if block.len() > prev.len() {
                    e.insert(block.into());
                }
            }
        }
    }
}

/// Full check for a trace slice (the "Done when"): every prompt of `requests` is built
/// with `input_length` tokens and re-tokenized (in parallel with rayon, in batches so memory
/// stays bounded), then
/// * its length and ids are compared with the intended ones;
/// * each block `i` is compared token by token with the earlier occurrences of the same
///   `(i, hash id)` — so requests that share `k` leading hash ids share exactly the first
///   `k × block_size` token ids;
/// * where requests with a common prefix continue differently, the continuations' first tokens
///   are compared (they should differ, so the shared prefix is exactly `k` blocks).
pub fn verify_trace(
    builder: &PromptBuilder,
    tok: &Tokenizer,
    requests: &[TraceRequest],
) -> TraceVerifyReport {
    let start = Instant::now();
    let b = builder.block_size();
    let mut rep = TraceVerifyReport {
        requests: requests.len(),
        ..Default::default()
    };
    let mut sh = Sharing::new();
    let batch = (rayon::current_num_threads() * 8).max(8);
    for chunk in requests.chunks(batch) {
        let results: Vec<Checked> = chunk
            .par_iter()
            .with_max_len(1)
            .map(|r| check_one(builder, tok, r))
            .collect();
        for (req, c) in chunk.iter().zip(results) {
            rep.tokens += c.ids.len();
            rep.exact_length += usize::from(c.exact_length);
            rep.exact_ids += usize::from(c.exact_ids);
            if rep.first_failure.is_none() {
                rep.first_failure = c.failure;
            }
            sh.record(&mut rep, req, &c.ids, b);
        }
    }
    rep.pct_exact = if rep.requests == 0 {
        100.0
    } else {
        100.0 * rep.exact_length as f64 / rep.requests as f64
    };
    rep.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    rep
}

fn add_child(
    sh: &mut Sharing,
    rep: &mut TraceVerifyReport,
    parent: u32,
    start: &[u32],
    child: Child,
    req: &TraceRequest,
) {
    let first = start[0];
    if let Some(&second) = start.get(1) {
        if let Some(other) = sh.first_two.insert((parent, first, second), child) {
            if other != child {
                rep.two_token_collisions += 1;
            }
        }
    }
    let n = sh.children.entry(parent).or_insert(0);
    *n += 1;
    if *n > 1 {
        rep.branch_points += 1;
    }
    match sh.first_tokens.entry((parent, first)) {
        Entry::Vacant(e) => {
            e.insert(child);
        }
        Entry::Occupied(e) => {
            if *e.get() != child {
                rep.first_token_collisions += 1;
                if rep.first_collision.is_none() {
                    rep.first_collision = Some(format!(
                        "request {} (line {}): continuation {child:?} after a shared prefix \
                         starts with the same token ({first}) as {:?}",
                        req.index,
                        req.line,
                        e.get()
                    ));
                }
            }
        }
    }
}
