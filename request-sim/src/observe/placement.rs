//! Which instance served each request, inferred from the instances' own KV cache events
//! (`--kv-events`, `docs/server-metrics.md` "Which instance served a request"): a router that
//! does not say where it sent a request (smg, production-stack, llm-d's gateway) still cannot
//! hide where the request's prompt was cached.
//!
//! Every instance publishes a `BlockStored` event, with the stored blocks' token ids, when it
//! caches the full blocks of a prompt it prefills (vLLM `--kv-events-config`). The listener
//! ([`super::kv`]) hands each event's tokens to [`Placement::stored`], which keeps a fingerprint
//! of every [`WINDOW`]-token window that starts at a multiple of [`STRIDE`] in the event, with
//! the instance and the time it came. When a request's record is written, its prompt's token
//! ids (rebuilt from its trace blocks, as the prompt builder made them) are fingerprinted at
//! every offset and looked up: each window some instance stored while the request was in
//! flight is a vote for that instance. The instance with most votes is the one that prefilled
//! the prompt; the record keeps the votes (`kv_placement`), so how sure the answer is stays
//! visible.
//!
//! What cannot be placed: a request whose prompt was already cached in full where it went
//! (nothing new stored), and prompts not built from trace blocks (kept text). They stay
//! unplaced and are counted. Windows are aligned on the event side only, so the server's block
//! boundaries, the chat template around the prompt and the block size need not be known.
//! Written by hand: no crate matches token windows against KV events.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use crate::record::KvPlacement;

/// Tokens per fingerprinted window.
pub const WINDOW: usize = 8;
/// Event windows start every this many tokens (a stored block of 16 or more tokens that lies in
/// a prompt holds at least one such window whole).
pub const STRIDE: usize = 8;
/// An event counts for a request it came up to this long after the request's end (the
/// listener's thread may see it a little after the response's last byte).
const LATE: Duration = Duration::from_millis(500);

/// Counts of the listener and of the placements, for the summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlacementStats {
    /// The instances' event endpoints, in instance order.
    pub endpoints: Vec<String>,
    /// Event batches received, and the `BlockStored` blocks among their events.
    pub batches: u64,
    pub blocks_stored: u64,
    /// Batches that could not be read (not vLLM's format), and the first reason.
    pub unreadable: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Records placed, and records with a prompt that nothing placed.
    pub placed: u64,
    pub unplaced: u64,
    /// Placed records whose votes were not unanimous.
    pub split_votes: u64,
    /// Placed records whose response also named its instance, and how many agreed.
    pub named_by_response: u64,
    pub agreed_with_response: u64,
}

/// The fingerprints of the events still in the horizon, and the counts.
#[derive(Default)]
struct State {
    seen: HashMap<u64, Vec<(u16, Instant)>>,
    order: VecDeque<(Instant, u64)>,
    stats: PlacementStats,
}

/// See the module doc. Shared by the listener (which adds) and the record writer (which asks).
pub struct Placement {
    urls: Vec<String>,
    /// Events older than this are forgotten (the longest a request can be in flight).
    horizon: Duration,
    state: Mutex<State>,
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement")
            .field("urls", &self.urls)
            .field("stats", &self.stats())
            .finish()
    }
}

/// The fingerprint of one window of token ids.
fn fingerprint(w: &[u32]) -> u64 {
    w.iter().fold(0x9e37_79b9_7f4a_7c15, |h, &t| {
        llm_common::util::mix64(h ^ u64::from(t))
    })
}

impl Placement {
    /// `urls`: the scraped instances (instance order); `endpoints`: where they publish, each
    /// shown as given.
    pub fn new(urls: Vec<String>, endpoints: Vec<String>, horizon: Duration) -> Placement {
        Placement {
            urls,
            horizon,
            state: Mutex::new(State {
                stats: PlacementStats {
                    endpoints,
                    ..PlacementStats::default()
                },
                ..State::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Instance `instance` stored blocks holding `tokens` (one event's), seen at `at`.
    pub fn stored(&self, instance: usize, at: Instant, tokens: &[u32], blocks: usize) {
        let mut st = self.lock();
        st.stats.blocks_stored += blocks as u64;
        let mut p = 0;
        while p + WINDOW <= tokens.len() {
            let f = fingerprint(&tokens[p..p + WINDOW]);
            st.seen.entry(f).or_default().push((instance as u16, at));
            st.order.push_back((at, f));
            p += STRIDE;
        }
        // Forget what is past the horizon.
        let Some(edge) = at.checked_sub(self.horizon) else {
            return;
        };
        while let Some(&(t, f)) = st.order.front() {
            if t >= edge {
                break;
            }
            st.order.pop_front();
            if let Some(v) = st.seen.get_mut(&f) {
                v.retain(|&(_, s)| s >= edge);
                if v.is_empty() {
                    st.seen.remove(&f);
                }
            }
        }
    }

    /// A batch arrived (`ok`), or could not be read (`why`).
    pub fn batch(&self, why: Option<String>) {
        let mut st = self.lock();
        st.stats.batches += 1;
        if let Some(w) = why {
            st.stats.unreadable += 1;
            st.stats.first_error.get_or_insert(w);
        }
    }

    /// The instance that stored most of `prompt`'s windows between `sent` and `done`
    /// (`None`: nothing it holds was stored meanwhile); counted for the summary.
    pub fn place(&self, sent: Instant, done: Instant, prompt: &[u32]) -> Option<KvPlacement> {
        let mut st = self.lock();
        let until = done + LATE;
        let mut votes = vec![0u32; self.urls.len().max(1)];
        if prompt.len() >= WINDOW {
            for w in prompt.windows(WINDOW) {
                let Some(hits) = st.seen.get(&fingerprint(w)) else {
                    continue;
                };
                for &(i, at) in hits {
                    if at >= sent && at <= until {
                        if let Some(v) = votes.get_mut(usize::from(i)) {
                            *v += 1;
                        }
                    }
                }
            }
        }
        let of: u32 = votes.iter().sum();
        // The most votes; a tie goes to the lower index.
        let best = (0..votes.len()).max_by_key(|&i| (votes[i], std::cmp::Reverse(i)));
        match best.filter(|_| of > 0) {
            Some(i) => {
                st.stats.placed += 1;
                if votes[i] < of {
                    st.stats.split_votes += 1;
                }
                Some(KvPlacement {
                    instance: i,
                    url: self.urls.get(i).cloned().unwrap_or_default(),
                    votes: votes[i],
                    of,
                })
            }
            None => {
                st.stats.unplaced += 1;
                None
            }
        }
    }

    /// A placed record's response also named its instance: whether they agreed.
    pub fn compared_with_response(&self, agreed: bool) {
        let mut st = self.lock();
        st.stats.named_by_response += 1;
        st.stats.agreed_with_response += u64::from(agreed);
    }

    /// The counts so far.
    pub fn stats(&self) -> PlacementStats {
        self.lock().stats.clone()
    }

    /// The instances' URLs, in instance order.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(seed: u32, n: usize) -> Vec<u32> {
        (0..n as u32)
            .map(|i| seed.wrapping_mul(7919) ^ i.wrapping_mul(2_654_435_761))
            .collect()
    }

    fn placement() -> Placement {
        Placement::new(
            vec!["http://a".into(), "http://b".into()],
            vec!["tcp://a:1".into(), "tcp://b:1".into()],
            Duration::from_secs(60),
        )
    }

    #[test]
    fn a_prompt_goes_to_the_instance_that_stored_its_blocks_while_it_ran() {
        let p = placement();
        let t0 = Instant::now();
        let shared = tokens(1, 64);
        let mine = tokens(2, 96);
        // Instance 0 stored the shared prefix earlier (another request); instance 1 stores
        // this request's new blocks, under a 3-token template, cut at its own block edges.
        p.stored(0, t0, &shared, 2);
        let sent = t0 + Duration::from_secs(1);
        let mut server = vec![1, 2, 3];
        server.extend_from_slice(&shared);
        server.extend_from_slice(&mine);
        p.stored(1, sent + Duration::from_millis(5), &server[..128], 4);
        p.stored(1, sent + Duration::from_millis(9), &server[128..160], 1);
        let mut prompt = shared.clone();
        prompt.extend_from_slice(&mine);
        let got = p
            .place(sent, sent + Duration::from_millis(50), &prompt)
            .unwrap();
        assert_eq!((got.instance, got.url.as_str()), (1, "http://b"));
        assert_eq!(
            got.votes, got.of,
            "the earlier store is outside the request's time"
        );
        assert!(got.votes >= 15, "{got:?}");
        // A request sent before anything was stored and done before: unplaced.
        assert_eq!(
            p.place(
                t0 - Duration::from_secs(9),
                t0 - Duration::from_secs(8),
                &prompt
            ),
            None
        );
        let s = p.stats();
        assert_eq!((s.placed, s.unplaced, s.blocks_stored), (1, 1, 7));
    }

    #[test]
    fn split_votes_go_to_the_majority_and_are_counted() {
        let p = placement();
        let t0 = Instant::now();
        let prompt = tokens(3, 160);
        p.stored(0, t0, &prompt[..32], 1);
        p.stored(1, t0, &prompt[32..160], 4);
        let got = p.place(t0, t0, &prompt).unwrap();
        assert_eq!(got.instance, 1);
        assert!(got.votes < got.of);
        assert_eq!(p.stats().split_votes, 1);
    }

    #[test]
    fn events_past_the_horizon_are_forgotten() {
        let p = Placement::new(vec!["a".into()], vec!["e".into()], Duration::from_secs(1));
        let t0 = Instant::now();
        let old = tokens(4, 64);
        p.stored(0, t0, &old, 2);
        p.stored(0, t0 + Duration::from_secs(5), &tokens(5, 32), 1);
        assert_eq!(p.place(t0, t0 + Duration::from_secs(6), &old), None);
        assert_eq!(p.lock().order.len(), 4);
    }
}
