//! Run control: stopping dispatch (Ctrl-C, early stop), cancelling what is in flight, and
//! counting outcomes for the early-stop check.

use super::*;

/// Why the run stopped dispatching before the end of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    Interrupted,
    EarlyStop,
}

/// Shared run control: stop dispatching, cancel in-flight, count failures.
pub(super) struct Control {
    pub(super) stop_flag: AtomicBool,
    pub(super) stopping: CancellationToken,
    pub(super) cancel: CancellationToken,
    pub(super) cause: Mutex<Option<Cause>>,
    pub(super) finished: AtomicU64,
    pub(super) failed: AtomicU64,
}

impl Control {
    pub(super) fn request_stop(&self, cause: Cause) -> bool {
        let mut c = self.cause.lock().unwrap_or_else(|p| p.into_inner());
        if c.is_some() {
            return false;
        }
        *c = Some(cause);
        self.stop_flag.store(true, Ordering::SeqCst);
        self.stopping.cancel();
        true
    }
    pub(super) fn cause(&self) -> Option<Cause> {
        *self.cause.lock().unwrap_or_else(|p| p.into_inner())
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
        if control.request_stop(Cause::Interrupted) {
            eprintln!(
                "\nrequest-sim: interrupted: stopped sending; waiting for in-flight requests (press Ctrl-C again to cancel them now)"
            );
        } else if !control.cancel.is_cancelled() {
            eprintln!("\nrequest-sim: cancelling in-flight requests");
            control.cancel.cancel();
        } else {
            // Once installed, the handler stays: without this a run stuck after the cancel
            // could no longer be interrupted. Records written so far are complete lines.
            eprintln!("\nrequest-sim: interrupted again: exiting now");
            std::process::exit(130);
        }
    }
}
