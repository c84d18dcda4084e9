//! What the engine and the HTTP side share of one request: the request as handed to the
//! engine ([`NewRequest`]), its progress ([`ReqShared`]: atomics and a `Notify`, written by the
//! engine, read by the response body), and the ids of its output tokens.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

use crate::util::mix64;
use crate::vocab::BUILTIN_VOCAB_SIZE;

// State 0 (the default) means queued, not yet scheduled.
const RUNNING: u8 = 1;
pub(super) const FINISHED: u8 = 2;
pub(super) const ABORTED: u8 = 3;

/// The id of output token `i` of a request whose output seed is `seed` (an index into the
/// built-in word list).
#[inline]
pub fn output_token(seed: u64, i: u32) -> u32 {
    (mix64(seed ^ (u64::from(i) << 32 | 0x9E37)) % BUILTIN_VOCAB_SIZE as u64) as u32
}

/// Progress of one request, written by the engine and read by the HTTP side.
#[derive(Debug, Default)]
pub struct ReqShared {
    generated: AtomicU32,
    cached: AtomicU32,
    state: AtomicU8,
    cancelled: AtomicBool,
    /// Wake the reader on every token (streaming) or only at the end (non-streaming).
    per_token: bool,
    notify: Notify,
}

/// A snapshot of a request's progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Output tokens produced so far.
    pub generated: u32,
    /// All tokens produced.
    pub finished: bool,
    /// The engine gave up on the request (shutdown).
    pub aborted: bool,
}

impl ReqShared {
    /// Progress of a new request; `per_token` readers are woken for every token.
    pub fn new(per_token: bool) -> Self {
        ReqShared {
            per_token,
            ..ReqShared::default()
        }
    }

    pub fn progress(&self) -> Progress {
        // State first: a final state implies the final token count was already stored.
        let st = self.state.load(Ordering::Acquire);
        Progress {
            generated: self.generated.load(Ordering::Acquire),
            finished: st == FINISHED,
            aborted: st == ABORTED,
        }
    }

    /// Prompt tokens served from the prefix cache (known once the request was scheduled).
    pub fn cached_tokens(&self) -> u32 {
        self.cached.load(Ordering::Acquire)
    }

    /// Waits until more than `have` tokens exist or the request ended.
    pub async fn wait_beyond(&self, have: u32) -> Progress {
        loop {
            let p = self.progress();
            if p.generated > have || p.finished || p.aborted {
                return p;
            }
            self.notify.notified().await;
        }
    }

    /// Waits until the engine first scheduled the request (its cached tokens are then known) or
    /// the request ended. Only per-token readers are woken at admission.
    pub async fn wait_admitted(&self) {
        while self.state.load(Ordering::Acquire) == 0 {
            self.notify.notified().await;
        }
    }

    /// Notes the engine's first scheduling of the request: its cached tokens and the running
    /// state. A per-token reader is woken: a stream may be waiting to announce the request
    /// (Anthropic's `message_start`).
    pub(super) fn admit(&self, cached: u32) {
        self.cached.store(cached, Ordering::Release);
        self.state.store(RUNNING, Ordering::Release);
        if self.per_token {
            self.notify.notify_one();
        }
    }

    /// Tells the engine the client is gone.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
    }

    pub(super) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    pub(super) fn publish(&self, generated: u32, state: Option<u8>) {
        self.generated.store(generated, Ordering::Release);
        if let Some(s) = state {
            self.state.store(s, Ordering::Release);
            self.notify.notify_one();
        } else if self.per_token {
            self.notify.notify_one();
        }
    }
}

/// Cancels the request when dropped unless it already ended (used by response bodies).
pub struct CancelOnDrop(pub Arc<ReqShared>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let p = self.0.progress();
        if !p.finished && !p.aborted {
            self.0.cancel();
        }
    }
}

/// A request handed to the engine.
pub struct NewRequest {
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
    pub output_seed: u64,
    /// The request ends by EOS (`finish_reason` `stop`) after `max_tokens`, not by its limit.
    pub stops: bool,
    pub shared: Arc<ReqShared>,
    /// Per image at the front of the prompt: (end of its tokens, its image tokens).
    pub image_regions: Vec<(u32, u32)>,
}
