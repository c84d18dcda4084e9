//! Run control: stopping dispatch (Ctrl-C, SIGTERM, early stop), cancelling what is in flight,
//! and counting outcomes for the early-stop check.
//!
//! Signals, counted: the first stops sending (in-flight requests get `--grace-secs`), the
//! second forces the stop (the requests in flight are cancelled at once; every record and the
//! summary are still written, and the summary says the stop was forced), a third exits at once
//! without them, for a run stuck after the cancel.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::schedule::{Stop, StopReason};

/// Shared run control: stop dispatching, cancel in-flight, count failures.
#[derive(Default)]
pub(super) struct Control {
    /// The dispatcher's stop signal, with the reason.
    pub(super) stop: Stop,
    /// Cancelled with the stop (closed-loop turns waiting for a parent give up).
    pub(super) stopping: CancellationToken,
    /// Cancels the requests in flight (second Ctrl-C, or the grace period is over).
    pub(super) cancel: CancellationToken,
    pub(super) finished: AtomicU64,
    pub(super) failed: AtomicU64,
    /// A second signal forced the stop: what was in flight was cancelled without its grace.
    pub(super) forced: AtomicBool,
}

impl Control {
    /// Stop sending for `reason` (Ctrl-C or early stop); `false` when already stopping.
    pub(super) fn request_stop(&self, reason: StopReason) -> bool {
        if !self.stop.request(reason) {
            return false;
        }
        self.stopping.cancel();
        true
    }

    /// Why sending was stopped from outside the dispatcher, if it was.
    pub(super) fn stopped_by(&self) -> Option<StopReason> {
        self.stop.reason()
    }

    /// Force the stop asked for: cancel the requests in flight now (each still ends as one
    /// record); `false` when it was forced already.
    pub(super) fn force_stop(&self) -> bool {
        let first = !self.forced.swap(true, Ordering::SeqCst);
        self.cancel.cancel();
        first
    }

    /// Whether a second signal forced the stop.
    pub(super) fn was_forced(&self) -> bool {
        self.forced.load(Ordering::SeqCst)
    }
}

pub(super) async fn watch_signals(control: Arc<Control>) {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    loop {
        #[cfg(unix)]
        {
            tokio::select! {
                r = tokio::signal::ctrl_c() => { if r.is_err() { return; } }
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => {}
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                return;
            }
        }
        if control.request_stop(StopReason::Interrupted) {
            eprintln!(
                "\nrequest-sim: interrupted: stopped sending; waiting for in-flight requests (press Ctrl-C again to cancel them now)"
            );
        } else if control.force_stop() {
            // Also when the first stop was the early stop's, or the grace period has already
            // cancelled what was in flight: the files are written all the same.
            eprintln!(
                "\nrequest-sim: forced stop: cancelling in-flight requests now; the records and the summary are still written (a third Ctrl-C exits without them)"
            );
        } else {
            // Once installed, the handler stays: without this a run stuck after the cancel
            // could no longer be interrupted. Records written so far are complete lines.
            eprintln!("\nrequest-sim: interrupted again: exiting now");
            std::process::exit(130);
        }
    }
}
