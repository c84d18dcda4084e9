//! What every phase of the run shares: its start-up and end-of-run lines on stderr ([`note`])
//! and the milliseconds it times itself in ([`ms_since`]; the summary's start-up times).

use std::time::Instant;

/// A start-up or end-of-run line on stderr (`--quiet` only turns off the progress line).
pub(super) fn note(msg: impl AsRef<str>) {
    eprintln!("request-sim: {}", msg.as_ref());
}

/// Milliseconds since `t`.
pub(super) fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
