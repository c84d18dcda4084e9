//! The trace analysis (`request-sim analyze TRACE`) as console text: a vLLM-style table, the
//! LRU sweep and the request rate over time. The analysis itself is [`crate::analyze`].

use std::fmt::Write as _;

use super::format::{num, percent, thousands};
use super::table::{Table, WIDTH};
use crate::analyze::agents::AgentAnalysis;
use crate::analyze::analysis::{
    Analysis, LengthStats, RatePoint, RateSeries, RoutingAnalysis, SessionStats,
};
use crate::trace::{TraceFormat, TraceStats};

/// A section title: ` name ` centred in `fill`.
fn title(t: &mut Table, name: &str, fill: char) {
    t.header(&format!(" {name} "), fill);
}

fn lengths(t: &mut Table, name: &str, l: &LengthStats) {
    title(t, &format!("{name} length (tokens)"), '-');
    t.row(&format!("Mean {name} length:"), format!("{:.2}", l.mean));
    for &(p, v) in &l.percentiles.0 {
        t.row(&format!("P{p} {name} length:"), format!("{v:.2}"));
    }
    t.row(&format!("Max {name} length:"), l.max);
    t.row(&format!("Total {name} tokens:"), thousands(l.total));
}

fn sparkline(points: &[RatePoint]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = points.iter().map(|p| p.requests).max().unwrap_or(0);
    points
        .iter()
        .map(|p| {
            let level = (p.requests * 7 + max / 2).checked_div(max).unwrap_or(0);
            BARS[level.min(7) as usize]
        })
        .collect()
}

/// The routing what-if: one line per policy, then one shared LRU cache of the same total size
/// for comparison (not a bound: LRU is not optimal, and caches split by prefix-aware routing can
/// keep more hits than one shared LRU, e.g. 6.80% against 6.56% with 4 instances on the Mooncake
/// conversation trace), then the true upper bound of any policy, the infinite cache.
fn routing(t: &mut Table, ra: &RoutingAnalysis, infinite: f64) {
    title(
        t,
        &format!(
            "Routing what-if: {} instances, {} tokens of prefix cache each",
            ra.instances,
            thousands(ra.capacity_tokens)
        ),
        '-',
    );
    let _ = writeln!(
        t,
        "{:<14} {:>9} {:>9} {:>22}",
        "policy", "hit tok", "hit blk", "requests per instance"
    );
    for p in &ra.policies {
        let min = p.requests_per_instance.iter().min().copied().unwrap_or(0);
        let max = p.requests_per_instance.iter().max().copied().unwrap_or(0);
        let _ = writeln!(
            t,
            "{:<14} {:>9} {:>9} {:>22}",
            p.policy,
            percent(p.hit_ratio),
            percent(p.block_hit_ratio),
            format!("{min}..{max}")
        );
    }
    t.row(
        &format!("One shared LRU cache of {} x that:", ra.instances),
        percent(ra.single_cache_hit_ratio),
    );
    let _ = writeln!(
        t,
        "  (a reference, not a bound: split caches can keep hits one shared LRU evicts)"
    );
    t.row(
        "Upper bound of any policy (infinite cache):",
        percent(infinite),
    );
}

/// Readable console output: a vLLM-style table, the LRU sweep and the rate over time.
pub fn render_analysis(a: &Analysis) -> String {
    let mut t = Table::trimmed();
    overview(&mut t, a);
    if let Some(s) = &a.sessions {
        sessions(&mut t, s);
    }
    prefix_cache(&mut t, a);
    if let Some(ra) = &a.routing {
        routing(&mut t, ra, a.prefix_cache.hit_ratio);
    }
    if !a.rate_series.points.is_empty() {
        rate_over_time(&mut t, &a.rate_series);
    }
    trace_rules(&mut t, &a.trace_stats);
    t.rule('=');
    t.finish()
}

/// The trace at a glance: format, requests, duration, rates, timestamps, lengths.
fn overview(t: &mut Table, a: &Analysis) {
    title(t, "Trace Analysis", '=');
    t.row("Format:", a.format.name());
    if a.requests_with_hash_ids > 0 {
        t.row("Block size (tokens per hash id):", a.block_size);
    } else {
        // Azure rows (and generic rows without hash ids) share no blocks: a block size would
        // describe nothing.
        t.row(
            "Block size (tokens per hash id):",
            "none (no hash ids: every prompt is unique)",
        );
    }
    t.row("Requests:", a.requests);
    t.row("Duration (s):", format!("{:.2}", a.duration_s));
    t.row("Mean request rate (req/s):", num(a.mean_rate_per_s, 2));
    t.row(
        "Peak request rate (req/s, 1-s window):",
        format!("{} (at {:.0} s)", a.peak_rate_per_s, a.peak_rate_at_s),
    );
    t.row(
        "Distinct timestamps:",
        format!(
            "{} (up to {} requests at one time)",
            a.distinct_timestamps, a.max_requests_per_timestamp
        ),
    );
    lengths(t, "input", &a.input_length);
    lengths(t, "output", &a.output_length);
}

/// Sessions and turns.
fn sessions(t: &mut Table, s: &SessionStats) {
    title(t, "Sessions", '-');
    t.row("Sessions:", s.sessions);
    t.row("Multi-turn sessions:", s.multi_turn_sessions);
    t.row(
        "Mean turns per session:",
        format!("{:.2}", s.mean_turns_per_session),
    );
    t.row("Max turns per session:", s.max_turns_per_session);
    t.row("Max turn number:", s.max_turn);
    t.row("Requests with parent not in trace:", s.orphan_requests);
    let types: Vec<String> = s.types.iter().map(|(k, v)| format!("{k} {v}")).collect();
    t.row("Request types:", types.join(", "));
}

/// The trace-ideal prefix cache: distinct blocks, infinite-cache hit ratios, the LRU sweep.
fn prefix_cache(t: &mut Table, a: &Analysis) {
    title(t, "Prefix cache (trace-ideal)", '-');
    let p = &a.prefix_cache;
    t.row("Requests with hash ids:", a.requests_with_hash_ids);
    t.row("Distinct hash ids:", thousands(a.distinct_hash_ids as u64));
    t.row(
        "Distinct prefix blocks:",
        thousands(a.distinct_prefix_blocks as u64),
    );
    t.row(
        "Footprint of all blocks (tokens):",
        thousands(p.footprint_tokens),
    );
    t.row("Infinite-cache hit ratio (tokens):", percent(p.hit_ratio));
    t.row(
        "Infinite-cache hit ratio (blocks):",
        percent(p.block_hit_ratio),
    );
    t.row(
        "Same, second half of the trace (warm):",
        percent(p.warm_hit_ratio),
    );
    if !a.lru_sweep.is_empty() {
        let _ = writeln!(t, "LRU cache sweep (prefix match stops at the first miss):");
        let _ = writeln!(
            t,
            "{:>16} {:>14} {:>9} {:>9}",
            "capacity tokens", "blocks", "hit tok", "hit blk"
        );
        for l in &a.lru_sweep {
            let _ = writeln!(
                t,
                "{:>16} {:>14} {:>9} {:>9}",
                thousands(l.capacity_tokens),
                thousands(l.capacity_blocks),
                percent(l.hit_ratio),
                percent(l.block_hit_ratio)
            );
        }
    }
}

/// Min and max request rate per bucket and a sparkline of it, one line per table width.
fn rate_over_time(t: &mut Table, r: &RateSeries) {
    title(t, "Request rate over time", '-');
    let max = r.points.iter().map(|p| p.rate_per_s).fold(0.0, f64::max);
    let min = r
        .points
        .iter()
        .map(|p| p.rate_per_s)
        .fold(f64::INFINITY, f64::min);
    let _ = writeln!(
        t,
        "per {} s bucket, req/s: min {min:.2}, max {max:.2}",
        r.bucket_s
    );
    let line = sparkline(&r.points);
    let chars: Vec<char> = line.chars().collect();
    for (i, chunk) in chars.chunks(WIDTH).enumerate() {
        let start = r.points[i * WIDTH].start_s;
        let _ = writeln!(t, "{:>8.0}s {}", start, chunk.iter().collect::<String>());
    }
}

/// What the trace-level rules found and dropped.
fn trace_rules(t: &mut Table, st: &TraceStats) {
    title(t, "Trace rules applied", '-');
    t.row("Rows read:", st.rows);
    t.row("Invalid rows skipped:", st.skipped_invalid);
    t.row("Input beyond hashed blocks:", st.input_beyond_blocks);
    t.row("Surplus hash ids dropped:", st.surplus_hash_ids);
    t.row("Repeated timestamps:", st.repeated_timestamps);
    t.row("Decreasing timestamps (sorted):", st.decreasing_timestamps);
    t.row("Zero output length:", st.zero_output_length);
    if st.failed_requests > 0 {
        let what = if st.dropped_failed > 0 {
            format!("{} (dropped by --drop-failed)", st.failed_requests)
        } else {
            format!("{} (kept; --drop-failed drops them)", st.failed_requests)
        };
        t.row("Failed requests (0 response tokens):", what);
    }
    if st.outside_time_window + st.over_max_requests > 0 {
        t.row("Outside time window:", st.outside_time_window);
        t.row("Over max requests:", st.over_max_requests);
    }
}

fn secs(ms: f64) -> String {
    format!("{:.2}", ms / 1e3)
}

/// What production recorded (Copilot) next to the ideal of the rebuilt prefixes.
fn production(t: &mut Table, p: &crate::analyze::agents::ProductionCache) {
    title(t, "Production (as recorded) vs rebuilt prefixes", '-');
    t.row(
        "Production cached (Σ cached / Σ prompt):",
        format!(
            "{} ({} of {} tokens)",
            percent(p.cached_share),
            p.cached_tokens,
            p.prompt_tokens
        ),
    );
    t.row(
        "Rebuilt prefixes, ideal hit ratio:",
        format!(
            "{} ({:+.2} pp vs production)",
            percent(p.rebuilt_ideal_hit_ratio),
            p.rebuilt_minus_production_pp
        ),
    );
    t.row(
        "Segments short of prompt (template):",
        format!(
            "{} calls, +{} tokens as an unshared last segment",
            p.segments_short, p.segments_short_tokens
        ),
    );
    t.row(
        "Segments over prompt (truncation):",
        format!(
            "{} calls, {} tokens cut",
            p.segments_over, p.segments_over_tokens
        ),
    );
    for (result, n) in &p.not_success {
        t.row(&format!("Calls ended {result} (sent in full):"), *n);
    }
}

/// `analyze` of an agent corpus: shape, gaps, trace-ideal hit ratios, the load of `--users`.
pub fn render_agent_analysis(a: &AgentAnalysis, format: TraceFormat) -> String {
    let mut t = Table::trimmed();
    title(&mut t, "Agent Corpus Analysis", '=');
    t.row("Format:", format.name());
    t.row("Conversations:", a.conversations);
    t.row("Requests:", a.requests);
    let r = &a.requests_per_conversation;
    t.row(
        "Requests per conversation (mean / max):",
        format!("{:.2} / {}", r.mean, r.max),
    );
    title(&mut t, "Subagents", '-');
    t.row("Subagents:", a.subagents);
    t.row("Joined by their parent:", a.joined_subagents);
    t.row("Background (not waited for):", a.background_subagents);
    t.row(
        "Conversations with subagents:",
        a.conversations_with_subagents,
    );
    t.row("Max depth:", a.max_depth);
    let per: Vec<String> = a
        .agents_per_depth
        .iter()
        .enumerate()
        .map(|(d, n)| format!("{d}: {n}"))
        .collect();
    t.row("Agents per depth:", per.join(", "));
    if a.spawn_offsets.count > 0 {
        t.row(
            "Spawn offset p50 / p99 (s):",
            format!(
                "{} / {}",
                secs(a.spawn_offsets.p50_ms),
                secs(a.spawn_offsets.p99_ms)
            ),
        );
    }
    title(&mut t, "Client gaps", '-');
    let g = &a.gaps;
    t.row("Gaps:", g.ms.count);
    t.row("Mean gap (s):", secs(g.ms.mean_ms));
    t.row("P50 gap (s):", secs(g.ms.p50_ms));
    t.row("P99 gap (s):", secs(g.ms.p99_ms));
    t.row("Max gap (s):", secs(g.ms.max_ms));
    if let Some(cap) = g.cap_ms {
        t.row(&format!("Gaps over {} s (capped):", secs(cap)), g.over_cap);
    }
    let rules: Vec<String> = g.rules.iter().map(|(k, v)| format!("{k} {v}")).collect();
    t.row("Rules:", rules.join(", "));
    t.row(
        "Conversation wall time p50 / p99 (s):",
        format!(
            "{} / {}",
            secs(a.conversation_wall.p50_ms),
            secs(a.conversation_wall.p99_ms)
        ),
    );
    lengths(&mut t, "input", &a.input_length);
    lengths(&mut t, "output", &a.output_length);
    title(&mut t, "Prefix cache (trace-ideal)", '-');
    t.row("Hit ratio (infinite cache):", percent(a.ideal_hit_ratio));
    t.row(
        "With the system prefix shared:",
        percent(a.ideal_hit_ratio_shared_prefix),
    );
    if let Some(p) = &a.production {
        production(&mut t, p);
    }
    if a.message_requests > 0 {
        t.row(
            "Requests given as messages (not counted):",
            a.message_requests,
        );
    }
    if a.users.is_none() && a.gaps.ms.count + a.requests > 0 && a.message_requests == a.requests {
        t.row(
            "Concurrent users:",
            "n/a (the trace records no server times)",
        );
    }
    if let Some(u) = &a.users {
        title(&mut t, &format!("{} concurrent users", u.users), '-');
        t.row(
            "Requests in flight (mean):",
            format!("{:.2}", u.mean_in_flight),
        );
        t.row("Requests in flight (peak, bound):", u.peak_in_flight_bound);
        t.row(
            "Request rate (req/s):",
            format!("{:.2}", u.request_rate_per_s),
        );
        t.row(
            "Conversations started (per s):",
            format!("{:.4}", u.conversation_rate_per_s),
        );
    }
    t.rule('=');
    t.finish()
}
