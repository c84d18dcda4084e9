//! How a run ends: the one [`StopReason`] (dispatcher, run control, summary) and the [`Stop`]
//! signal that Ctrl-C and the early-stop check raise and the dispatcher watches.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Why sending ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every request was dispatched.
    Completed,
    /// `--time-in-secs` reached.
    TimeLimit,
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// `--early-stop-error-threshold` reached.
    EarlyStop,
    /// A producer thread died (a bug): the rest could not be built.
    ProducerFailed,
    /// A streamed trace has a bad row (or a row beyond the reorder window) after the rows sent.
    TraceError,
}

impl StopReason {
    /// The word used in the summary (`completed`, `time_limit`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Completed => "completed",
            StopReason::TimeLimit => "time_limit",
            StopReason::Interrupted => "interrupted",
            StopReason::EarlyStop => "early_stop",
            StopReason::ProducerFailed => "producer_failed",
            StopReason::TraceError => "trace_error",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stop asked for from outside the dispatcher (signal, early stop): the first reason wins.
#[derive(Debug, Default)]
pub struct Stop {
    flag: AtomicBool,
    reason: Mutex<Option<StopReason>>,
}

impl Stop {
    /// Ask for a stop; `false` when one was asked for already (its reason stays).
    pub fn request(&self, reason: StopReason) -> bool {
        let mut r = self.reason.lock().unwrap_or_else(|p| p.into_inner());
        if r.is_some() {
            return false;
        }
        *r = Some(reason);
        self.flag.store(true, Ordering::SeqCst);
        true
    }

    /// The reason of the stop asked for, if any.
    pub fn reason(&self) -> Option<StopReason> {
        *self.reason.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The flag the clock's waits watch (set together with the reason).
    pub fn flag(&self) -> &AtomicBool {
        &self.flag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_reason_wins_and_words_are_stable() {
        let s = Stop::default();
        assert_eq!(s.reason(), None);
        assert!(!s.flag().load(Ordering::SeqCst));
        assert!(s.request(StopReason::EarlyStop));
        assert!(!s.request(StopReason::Interrupted));
        assert_eq!(s.reason(), Some(StopReason::EarlyStop));
        assert!(s.flag().load(Ordering::SeqCst));
        assert_eq!(
            serde_json::to_string(&StopReason::TimeLimit).unwrap(),
            "\"time_limit\""
        );
        assert_eq!(StopReason::ProducerFailed.to_string(), "producer_failed");
    }
}
