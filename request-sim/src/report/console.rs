//! The console result table, in the shape of vLLM's `bench serve` output
//! (`{:<40} {:<10.2f}` rows, `=`/`-` centred headers, 50 columns), followed by the
//! replayer's own sections.

use std::fmt::Write;

use super::latency::{p_word, METRICS};
use super::stats::MetricStats;
use super::summary::Summary;

const WIDTH: usize = 50;

struct Table(String);

impl Table {
    fn header(&mut self, title: &str, fill: char) {
        let t = title.chars().count();
        let pad = WIDTH.saturating_sub(t);
        let left = pad / 2;
        let right = pad - left;
        let f = fill.to_string();
        let _ = writeln!(self.0, "{}{}{}", f.repeat(left), title, f.repeat(right));
    }
    fn float(&mut self, label: &str, v: f64) {
        let _ = writeln!(self.0, "{:<40} {:<10.2}", label, v);
    }
    fn int(&mut self, label: &str, v: impl std::fmt::Display) {
        let _ = writeln!(self.0, "{:<40} {:<10}", label, v);
    }
    fn metric(&mut self, label: &str, m: &MetricStats, title: &str) {
        self.header(title, '-');
        self.float(&format!("Mean {label} (ms):"), m.mean);
        self.float(&format!("Median {label} (ms):"), m.median);
        for (p, v) in &m.percentiles {
            self.float(&format!("P{} {label} (ms):", p_word(*p)), *v);
        }
    }
}

fn pct(r: Option<f64>) -> String {
    r.map_or("n/a".to_string(), |r| format!("{:.2}", r * 100.0))
}

/// The vLLM-shaped result table plus send drift, errors, prefix cache and token exactness;
/// warnings follow the closing line.
pub fn render_console(s: &Summary) -> String {
    let mut t = Table(String::new());
    t.header(" Serving Benchmark Result ", '=');
    t.int("Successful requests:", s.completed);
    t.int("Failed requests:", s.failed);
    t.float("Benchmark duration (s):", s.duration_s);
    t.int("Total input tokens:", s.total_input_tokens);
    t.int("Total generated tokens:", s.total_output_tokens);
    t.float("Request throughput (req/s):", s.request_throughput);
    if let Some(g) = s.request_goodput {
        t.float("Request goodput (req/s):", g);
    }
    t.float("Output token throughput (tok/s):", s.output_throughput);
    t.float(
        "Peak output token throughput (tok/s):",
        s.max_output_tokens_per_s,
    );
    t.float(
        "Peak concurrent requests:",
        s.max_concurrent_requests as f64,
    );
    t.float("Total Token throughput (tok/s):", s.total_token_throughput);
    for (key, label, title) in METRICS {
        let m = s.latency.get(key).expect("known metric");
        t.metric(label, m, title);
    }

    let (ttfc, ttft) = (&s.latency.ttfc, &s.latency.ttft);
    if ttfc.count > 0 && (ttfc.mean != ttft.mean || ttfc.count != ttft.count) {
        // Role-only first chunks: the first content token comes later than the first token.
        t.header("Time to First Content Token", '-');
        t.float("Mean TTFC (ms):", ttfc.mean);
        t.float("Median TTFC (ms):", ttfc.median);
        if let Some(p99) = ttfc.percentile(99.0) {
            t.float("P99 TTFC (ms):", p99);
        }
    }

    t.header("Send drift", '-');
    t.float("Mean drift (ms):", s.drift.mean_ms);
    t.float("P50 drift (ms):", s.drift.p50_ms);
    t.float("P99 drift (ms):", s.drift.p99_ms);
    t.float("Max drift (ms):", s.drift.max_ms);
    t.int("Sent > 5 ms late:", s.drift.over_5ms);

    t.header("Requests and errors", '-');
    t.int("Scheduled requests:", s.scheduled);
    for (name, n) in s.status.rows() {
        if n > 0 || name == "ok" {
            t.int(&format!("Status {name}:"), n);
        }
    }
    t.int(
        "Records = scheduled:",
        if s.counts_add_up { "yes" } else { "NO" },
    );
    for (kind, n) in &s.errors {
        t.int(&format!("  {kind}:"), n);
    }
    if s.retried > 0 {
        t.int("Retried on a fresh connection:", s.retried);
    }
    if s.run.never_sent > 0 {
        let reason = s.run.never_sent_reason.as_deref().unwrap_or("");
        t.int("Never sent:", format!("{} {reason}", s.run.never_sent));
    }
    t.int("Peak in-flight requests:", s.max_in_flight);

    t.header("Prefix cache", '-');
    t.int("Server cache hit ratio (%):", pct(s.cache.hit_ratio));
    if s.cache.ideal_hit_ratio.is_some() {
        t.int(
            "Trace-ideal cache hit ratio (%):",
            pct(s.cache.ideal_hit_ratio),
        );
    }
    t.int("Cached tokens:", s.cache.cached_tokens);

    if let Some(ss) = &s.sessions {
        let ms = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.2}"));
        t.header("Sessions", '-');
        t.int("Sessions:", ss.sessions);
        t.float("Turns per session (mean):", ss.mean_turns);
        t.int("Turns per session (max):", ss.max_turns);
        t.float("Session duration mean (s):", ss.mean_duration_s);
        t.float("Session duration max (s):", ss.max_duration_s);
        t.int(
            "Mean TTFT first turns (ms):",
            ms(ss.mean_ttft_first_turn_ms),
        );
        t.int(
            "Mean TTFT later turns (ms):",
            ms(ss.mean_ttft_later_turns_ms),
        );
        if ss.mean_session_wait_ms.is_some() {
            t.int("Mean session wait (ms):", ms(ss.mean_session_wait_ms));
            t.int("Max session wait (ms):", ms(ss.max_session_wait_ms));
        }
        if ss.turns_not_sent > 0 {
            t.int("Turns not sent (cut/skipped):", ss.turns_not_sent);
        }
    }

    t.header("Token exactness", '-');
    let e = &s.token_exactness;
    t.int(
        "Prompt tokens exact (server/intended):",
        format!("{} / {}", e.exact, e.with_usage),
    );
    if e.with_usage > e.exact {
        t.int(
            "Prompt tokens over / under:",
            format!("{} / {}", e.over, e.under),
        );
    }
    if let Some(pv) = s.run.prompt_verification {
        t.int(
            "Prompts verified at start-up (exact):",
            format!("{} / {}", pv.exact, pv.checked),
        );
    }
    if let Some(o) = s.run.chat_overhead {
        t.int("Chat template overhead (tokens):", o);
    }
    let src = &s.output_tokens_source;
    t.int("Output tokens from usage:", src.usage);
    if src.chunks + src.unknown > 0 {
        t.int(
            "Output tokens counted from chunks:",
            src.chunks + src.unknown,
        );
    }
    if s.run.dry_run {
        t.int("Dry run:", "yes (nothing was sent)");
    }
    if let Some(seed) = s.run.seed {
        t.int("Seed:", seed);
    }
    let _ = writeln!(t.0, "{}", "=".repeat(WIDTH));
    for w in &s.warnings {
        let _ = writeln!(t.0, "WARNING: {w}");
    }
    t.0
}
