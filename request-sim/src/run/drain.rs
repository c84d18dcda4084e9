//! After the last send: wait for the requests in flight, up to `--grace-secs` after a stop,
//! then cancel what is left (each cancelled request still ends as one record).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use super::control::Control;

/// Wait for every request task. After a complete dispatch that is all of them (unless a
/// stop comes meanwhile); after a stop, in-flight requests get `grace`, then are cancelled.
pub(super) fn wait_in_flight(
    rt: &tokio::runtime::Runtime,
    tracker: TaskTracker,
    control: &Arc<Control>,
    stopped_early: bool,
    grace: Duration,
) {
    let control = control.clone();
    rt.block_on(async move {
        tracker.close();
        if !stopped_early {
            tokio::select! {
                _ = tracker.wait() => return,
                _ = control.stopping.cancelled() => {}
            }
        }
        tokio::select! {
            _ = tracker.wait() => {}
            _ = tokio::time::sleep(grace) => {
                control.cancel.cancel();
                tracker.wait().await;
            }
            _ = control.cancel.cancelled() => tracker.wait().await,
        }
    });
}
