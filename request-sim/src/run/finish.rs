//! The end-of-run lines on stderr: what the producers did, where start-up time went, and how
//! close to a common start the run began.

use crate::report::{StartupTimes, Summary};
use crate::schedule::{DispatchStats, ProducerStats};

use super::note;

/// Print the end-of-run notes (after the summary table).
pub(super) fn end_notes(
    summary: &Summary,
    producer_stats: &ProducerStats,
    dispatch: &DispatchStats,
    startup: &StartupTimes,
) {
    note(format!(
            "producers: {} thread(s) built {} bodies ({:.1} M prompt tokens, {:.0} MB) at {:.1} M tokens/s and {:.0} bodies/s per thread while building; dispatched {:.0} bodies/s; {} not ready in time; dispatcher late > 1 ms: {}, max {:.3} ms; bodies waiting peaked at {:.1} MB of a {:.0} MB budget",
            producer_stats.threads,
            producer_stats.bodies,
            producer_stats.prompt_tokens as f64 / 1e6,
            producer_stats.body_bytes as f64 / 1e6,
            producer_stats.tokens_per_s_per_thread / 1e6,
            producer_stats.bodies_per_s_per_thread,
            producer_stats.bodies_per_s,
            dispatch.not_ready,
            dispatch.late_over_1ms,
            dispatch.max_late_ms,
            producer_stats.peak_buffered_bytes as f64 / 1e6,
            producer_stats.budget_bytes as f64 / 1e6,
        ),
    );
    note(format!(
            "start-up {:.0} ms: trace {:.0}, runtime {:.0}, tokenizer {:.0}, vocab {:.0}, prompt check {:.0}, calibration {:.0}, warm-up {:.0} ({} connections opened)",
            startup.total_ms,
            startup.trace_load_ms,
            startup.runtime_ms,
            startup.tokenizer_load_ms,
            startup.vocab_ms,
            startup.prompt_check_ms,
            startup.calibration_ms,
            startup.warmup_ms,
            startup.connections,
        ),
    );
    if let Some(sa) = &summary.run.start_at {
        let clock = match sa.clock {
            Some(c) => format!(
                "host clock estimated error {} µs (max {} µs){}",
                c.est_error_us,
                c.max_error_us,
                if c.synchronised {
                    ""
                } else {
                    ", NOT synchronised"
                }
            ),
            None => "host clock error unknown".to_string(),
        };
        note(format!(
            "common start {}: waited {:.0} ms for it; clock started {:+.3} ms from it; first send at {}; {clock}",
            sa.at,
            sa.waited_ms,
            sa.clock_start_offset_ms,
            sa.first_send_ms
                .map_or("(none)".to_string(), |f| format!("{f:+.3} ms")),
        ));
    }
}
