//! The feeder: one thread takes the planned requests in replay order (a trace streamed from its
//! file, or a whole trace in memory: the same iterator) and deals them round-robin to the
//! producers' bounded input queues, so producer `p` gets positions `p, p + n, …` in order and
//! nothing holds more of the trace than the queues, the producers' lookahead and the stream's
//! reorder window.
//!
//! How it ends decides how the dispatcher ends at the position where the requests run out: the
//! feed's natural end (every request dispatched), or an error of the trace (a bad row far into
//! a streamed file). After the run stops early the feeder counts the rest of the slice for at
//! most [`COUNT_REST_MAX`], so the summary can say how many requests were never sent.
//!
//! After an error the feed may still give requests: those it had read before the error and not
//! given (a streamed trace's reorder window). They are counted, never dealt: no valid request
//! read is lost from the count of those never sent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::stop::StopReason;
use crate::trace::Planned;

/// The planned requests of a run, in replay order, or the error that ends them; after the
/// error, the requests read before it that will never be sent (counted, not dealt).
pub type Feed = Box<dyn Iterator<Item = crate::Result<Planned>> + Send>;

/// After an early stop, the rest of the slice is counted for at most this long.
pub const COUNT_REST_MAX: Duration = Duration::from_secs(2);

/// How the feed ended.
#[derive(Debug, Default)]
pub struct FeedEnd {
    /// Requests dealt to the producers.
    pub dealt: usize,
    /// Requests of the slice counted (not dealt): after the run stopped, and those the feed had
    /// read before its error ([`FeedEnd::cut_off`]).
    pub counted: usize,
    /// Requests the feed had read before its error and never gave (part of `counted`).
    pub cut_off: usize,
    /// The feed was read to its end (or to its error): `dealt + counted` is the whole slice.
    pub ended: bool,
    /// The error that ended the feed (a bad row of a streamed trace).
    pub error: Option<crate::Error>,
}

impl FeedEnd {
    /// Requests of the slice, when the feed was read to its end.
    pub fn planned(&self) -> Option<usize> {
        self.ended.then_some(self.dealt + self.counted)
    }
}

/// What the dispatcher side sees of the feeder.
#[derive(Debug, Default)]
struct State {
    /// Position where the dealt requests end (set before the queues close), and whether an
    /// error ended them there.
    end: OnceLock<(usize, bool)>,
    error: Mutex<Option<crate::Error>>,
}

/// The running feeder thread.
pub(super) struct Feeder {
    state: Arc<State>,
    handle: Option<JoinHandle<FeedEnd>>,
}

impl Feeder {
    /// Start dealing `feed` to `inputs` (one queue per producer); `stop` makes it stop dealing
    /// and count the rest. The thread runs at nice level `nice`.
    pub(super) fn spawn(
        feed: Feed,
        inputs: Vec<Sender<(usize, Planned)>>,
        stop: Arc<AtomicBool>,
        nice: i32,
    ) -> crate::Result<Feeder> {
        let state = Arc::new(State::default());
        let st = state.clone();
        let handle = std::thread::Builder::new()
            .name("trace-feeder".into())
            .spawn(move || {
                let _ = super::priority::lower_calling_thread(nice);
                deal(feed, inputs, &stop, &st)
            })
            .map_err(|e| crate::Error::io("cannot start the trace feeder thread", e))?;
        Ok(Feeder {
            state,
            handle: Some(handle),
        })
    }

    /// Why the requests ran out at `position`: the feed's end, an error of the trace, or else
    /// a producer that died.
    pub(super) fn ending_at(&self, position: usize) -> StopReason {
        match self.state.end.get() {
            Some(&(at, false)) if at == position => StopReason::Completed,
            Some(&(at, true)) if at == position => StopReason::TraceError,
            _ => StopReason::ProducerFailed,
        }
    }

    /// The error that ended the feed, if it has (taken: later calls get `None`).
    pub(super) fn take_error(&self) -> Option<crate::Error> {
        self.state
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Wait for the thread (it must have been told to stop, or have ended).
    pub(super) fn join(mut self) -> FeedEnd {
        let mut end = match self.handle.take().map(JoinHandle::join) {
            Some(Ok(end)) => end,
            _ => FeedEnd::default(),
        };
        if end.error.is_none() {
            end.error = self.take_error();
        }
        end
    }
}

/// The feeder thread's loop.
fn deal(
    mut feed: Feed,
    inputs: Vec<Sender<(usize, Planned)>>,
    stop: &AtomicBool,
    state: &State,
) -> FeedEnd {
    let n = inputs.len().max(1);
    let mut end = FeedEnd::default();
    loop {
        match feed.next() {
            None => break,
            Some(Err(e)) => {
                *state.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                count_cut_off(&mut feed, &mut end);
                break;
            }
            Some(Ok(p)) => {
                let pos = end.dealt;
                if stop.load(Ordering::Relaxed) || inputs[pos % n].send((pos, p)).is_err() {
                    // The run stopped: this request and the rest are never sent.
                    drop(inputs);
                    end.counted = 1;
                    count_rest(&mut feed, &mut end);
                    return end;
                }
                end.dealt += 1;
            }
        }
    }
    end.ended = true;
    let failed = state
        .error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .is_some();
    let _ = state.end.set((end.dealt, failed));
    // Closing the queues lets each producer finish and close its channel.
    drop(inputs);
    end
}

/// Count the rest of the slice (for `planned`), for at most [`COUNT_REST_MAX`] up to an error,
/// then what the feed had read before the error.
fn count_rest(feed: &mut Feed, end: &mut FeedEnd) {
    let until = Instant::now() + COUNT_REST_MAX;
    while let Some(item) = feed.next() {
        match item {
            Ok(_) => end.counted += 1,
            Err(e) => {
                end.error = Some(e);
                count_cut_off(feed, end);
                break;
            }
        }
        if Instant::now() > until {
            return;
        }
    }
    end.ended = true;
}

/// After the feed's error: the requests it had read before it, counted (they are few: a
/// reorder window's, or the rest of a trace already in memory).
fn count_cut_off(feed: &mut Feed, end: &mut FeedEnd) {
    let n = feed.by_ref().filter(Result::is_ok).count();
    end.cut_off += n;
    end.counted += n;
}
