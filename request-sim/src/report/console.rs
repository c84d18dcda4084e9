//! The console result table, in the shape of vLLM's `bench serve` output
//! (`{:<40} {:<10.2f}` rows, `=`/`-` centred headers, 50 columns), followed by the
//! replayer's own sections.

use std::fmt::Write;

use super::format::{num, pct, percent_or_na, trim_num};
use super::server::server_section;
use super::table::{Item, Table};
use crate::stats::agents::AgentSummary;
use crate::stats::latency::{Metric, Shown};
use crate::stats::sessions::SessionSummary;
use crate::stats::Summary;

/// The vLLM-shaped result table plus send drift, errors, prefix cache and token exactness;
/// warnings follow the closing line.
pub fn render_console(s: &Summary) -> String {
    let mut t = table(s);
    t.rule('=');
    for w in &s.invalid {
        let _ = writeln!(t, "RUN INVALID: {w}");
    }
    for w in &s.warnings {
        let _ = writeln!(t, "WARNING: {w}");
    }
    t.finish()
}

/// The sections of [`render_console`] (without the closing line, the invalid marks and the
/// warnings), piece by piece.
pub(super) fn console_items(s: &Summary) -> Vec<Item> {
    table(s).items()
}

/// The table of [`render_console`] up to its closing line: vLLM's rows, then the replayer's
/// sections in order.
fn table(s: &Summary) -> Table {
    let mut t = Table::new();
    if let Some(sc) = &s.scenario {
        scenario_section(&mut t, sc, s);
    }
    benchmark_section(&mut t, s);
    ttfc_section(&mut t, s);
    own_sections(&mut t, s);
    drift_section(&mut t, s);
    requests_section(&mut t, s);
    cache_section(&mut t, s);
    if let Some(ss) = &s.sessions {
        sessions_section(&mut t, ss);
    }
    if let Some(r) = &s.reasoning {
        reasoning_section(&mut t, r, &s.latency[Metric::Ttfa], &s.percentiles);
    }
    if let Some(a) = &s.agents {
        agents_section(&mut t, a);
    }
    if let Some(m) = &s.models {
        super::models::models_section(&mut t, m);
    }
    if let Some(srv) = &s.server {
        server_section(&mut t, srv);
    }
    exactness_section(&mut t, s);
    if let Some(i) = &s.images {
        images_section(&mut t, i);
    }
    t
}

/// `--scenario`: its name, its stamp, the broken rules and the warm-up / profiling split.
fn scenario_section(t: &mut Table, sc: &crate::scenario::Stamp, s: &Summary) {
    t.header(" Scenario ", '=');
    t.row("Scenario:", &sc.scenario);
    t.row("Submission valid:", sc.submission_valid);
    t.row("Violations:", sc.violated_rules());
    t.row("Lanes (users):", sc.users);
    t.row(
        "Warm-up / profiling requests:",
        format!("{} / {}", s.warmup_requests, s.status.total),
    );
    t.row("Duration asked (s):", sc.duration_s);
    for v in &sc.violations {
        t.row("Violation:", v.to_string());
    }
}

/// vLLM's own rows: counts, throughput and the latency metrics.
fn benchmark_section(t: &mut Table, s: &Summary) {
    t.header(" Serving Benchmark Result ", '=');
    if let Some(w) = &s.measure_window {
        // Every row below covers only the requests sent inside the window.
        t.row(
            "Measured window (s):",
            format!(
                "{:.1}..{} {} ({} of {} records)",
                w.start_s,
                w.end_s.map_or(String::new(), |e| format!("{e:.1}")),
                w.mode,
                w.inside,
                w.inside + w.outside
            ),
        );
    }
    t.row("Successful requests:", s.completed);
    t.row("Failed requests:", s.failed);
    t.float("Benchmark duration (s):", s.duration_s);
    t.row("Total input tokens:", s.total_input_tokens);
    t.row("Total generated tokens:", s.total_output_tokens);
    t.float("Request throughput (req/s):", s.request_throughput);
    if let Some(g) = s.request_goodput {
        t.float("Request goodput (req/s):", g);
    }
    if let (Some(good), Some(share)) = (s.good_requests, s.good_fraction()) {
        let cut = s.slo_undecided.unwrap_or(0);
        let judged = s.scheduled.saturating_sub(cut);
        let mut v = format!("{good} of {judged} ({:.1}%)", share * 100.0);
        if cut > 0 {
            v.push_str(&format!("; {cut} cut by the run's end, not judged"));
        }
        t.row("Requests within the SLOs:", v);
    }
    t.float("Output token throughput (tok/s):", s.output_throughput);
    t.maybe(
        "Peak output token throughput (tok/s):",
        s.max_output_tokens_per_s,
    );
    t.row("Peak concurrent requests:", s.max_concurrent_requests);
    t.float("Total Token throughput (tok/s):", s.total_token_throughput);
    for metric in Metric::shown(Shown::Vllm) {
        t.metric(metric, s.latency.get(metric));
    }
}

/// The metrics shown in sections of their own ([`Shown::Own`]), each when the run measured it.
fn own_sections(t: &mut Table, s: &Summary) {
    for metric in Metric::shown(Shown::Own) {
        let m = s.latency.get(metric);
        if m.known() {
            t.metric(metric, m);
        }
    }
}

/// Time to first content token, which differs from TTFT when the first tokens carry no text.
fn ttfc_section(t: &mut Table, s: &Summary) {
    let (ttfc, ttft) = (&s.latency[Metric::Ttfc], &s.latency[Metric::Ttft]);
    if ttfc.count > 0 && (ttfc.mean != ttft.mean || ttfc.count != ttft.count) {
        // Role-only first chunks: the first content token comes later than the first token.
        let (title, label) = (Metric::Ttfc.title(), Metric::Ttfc.label());
        t.header(title, '-');
        t.float(&format!("Mean {label} (ms):"), ttfc.mean);
        t.float(&format!("Median {label} (ms):"), ttfc.median);
        if let Some(p99) = ttfc.percentile(99.0) {
            t.float(&format!("P99 {label} (ms):"), p99);
        }
    }
}

/// How late requests were sent against their schedule.
fn drift_section(t: &mut Table, s: &Summary) {
    t.header("Send drift", '-');
    // Nothing sent: no drift to tell.
    let known = |v: f64| (s.drift.count > 0).then_some(v);
    t.maybe("Mean drift (ms):", known(s.drift.mean_ms));
    t.maybe("P50 drift (ms):", known(s.drift.p50_ms));
    t.maybe("P99 drift (ms):", known(s.drift.p99_ms));
    t.maybe("Max drift (ms):", known(s.drift.max_ms));
    t.row("Sent > 5 ms late:", s.drift.over_5ms);
    // Receive lateness: how late the client read each request's latest token after the kernel
    // had it (token times are the kernel's).
    let rx = &s.rx_late;
    if rx.count > 0 {
        t.row("P50 read lateness (ms):", format!("{:.3}", rx.p50_ms));
        t.row("P99 read lateness (ms):", format!("{:.3}", rx.p99_ms));
        t.row("Max read lateness (ms):", format!("{:.3}", rx.max_ms));
    }
    if let Some(c) = &s.run.internals.client_cpu {
        let label = if c.includes_simulator {
            "Client CPU, ms/request (with simulator):"
        } else {
            "Client CPU, ms/request:"
        };
        t.maybe(label, c.ms_per_request);
        // Only where the hypervisor took time: a VM's stalls explain tails the client cannot.
        t.maybe(
            "Machine steal time (s):",
            c.machine_steal_s.filter(|&s| s > 0.0),
        );
    }
}

/// Scheduled requests, their statuses and errors, retries and requests never sent.
fn requests_section(t: &mut Table, s: &Summary) {
    t.header("Requests and errors", '-');
    t.row("Scheduled requests:", s.scheduled);
    for (name, n) in s.status.rows() {
        if n > 0 || name == "ok" {
            t.row(&format!("Status {name}:"), n);
        }
    }
    t.row(
        "Records = scheduled:",
        if s.counts_add_up { "yes" } else { "NO" },
    );
    for (kind, n) in &s.errors {
        t.row(&format!("  {kind}:"), n);
        if let Some(e) = s.error_examples.get(kind) {
            let _ = writeln!(t, "    first: {e}");
        }
    }
    if s.retried > 0 {
        t.row("Retried on a fresh connection:", s.retried);
    }
    if s.run.outcome.never_sent > 0 {
        let reason = s.run.outcome.never_sent_reason.map_or("", |r| r.as_str());
        t.row(
            "Never sent:",
            format!("{} {reason}", s.run.outcome.never_sent),
        );
    }
    t.row("Peak in-flight requests:", s.max_in_flight);
}

/// The server's prefix-cache hit ratio next to the trace's ideal one.
fn cache_section(t: &mut Table, s: &Summary) {
    t.header("Prefix cache", '-');
    t.row("Server cache hit ratio (%):", pct(s.cache.hit_ratio));
    if s.cache.ideal_hit_ratio.is_some() {
        t.row(
            "Trace-ideal cache hit ratio (%):",
            pct(s.cache.ideal_hit_ratio),
        );
        if let (Some(n), Some(sent)) = (s.cache.ideal_requests, s.cache.ideal_sent) {
            if n < sent {
                t.row(
                    "  ideal counted over:",
                    format!("{n} of {sent} sent requests (those the server processed)"),
                );
            }
        }
        if let Some(b) = s.cache.server_block_size {
            t.row(
                &format!("  at the server's {b}-token blocks (%):"),
                pct(s.cache.ideal_hit_ratio_server_blocks),
            );
        }
    }
    t.row("Cached tokens:", s.cache.cached_tokens);
}

/// Agent conversations: completed, subagents, wall time against the trace's, joins, hit ratios.
fn agents_section(t: &mut Table, a: &AgentSummary) {
    let opt = |v: Option<f64>| num(v, 2);
    let pct = percent_or_na;
    t.header("Agents", '-');
    if let Some(l) = &a.layout {
        agent_layout_rows(t, l);
    }
    t.row(
        "Conversations completed:",
        format!("{} of {}", a.conversations_completed, a.conversations),
    );
    t.float(
        "Requests per conversation:",
        a.mean_requests_per_conversation,
    );
    t.row(
        "Subagents spawned / joined:",
        format!("{} / {}", a.subagents_spawned, a.subagents_joined),
    );
    let p50_p99 = |p50, p99| format!("{} / {}", opt(p50), opt(p99));
    t.row(
        "Wall time p50 / p99 (s):",
        p50_p99(a.wall_time_p50_s, a.wall_time_p99_s),
    );
    // With --max-idle-gap the trace's wall time is the capped one the replay plays.
    let trace_label = match a.layout.as_ref().and_then(|l| l.max_idle_gap_ms) {
        Some(ms) => format!("Trace wall time, gaps ≤ {} s, p50 / p99 (s):", ms / 1e3),
        None => "Trace wall time p50 / p99 (s):".to_string(),
    };
    t.row(
        &trace_label,
        p50_p99(a.trace_wall_time_p50_s, a.trace_wall_time_p99_s),
    );
    t.row(
        "Waiting on joins (s, max ms):",
        format!("{:.2} ({})", a.join_wait_total_s, opt(a.max_join_wait_ms)),
    );
    t.row("Mean client gap (ms):", opt(a.mean_client_gap_ms));
    for (result, n) in &a.trace_results {
        t.row(&format!("Trace calls ended {result} (sent in full):"), *n);
    }
    if a.requests_not_sent > 0 {
        t.row("Requests not sent (cut):", a.requests_not_sent);
    }
    t.row(
        "Prefix hit ratio server / ideal:",
        format!("{} / {}", pct(a.server_hit_ratio), pct(a.ideal_hit_ratio)),
    );
    if let (Some(r), Some(n)) = (a.routed_ideal_hit_ratio, a.instances_served) {
        t.row(
            format!("Ideal for the routing ({n} inst.):").as_str(),
            pct(Some(r)),
        );
    }
}

/// How an agent corpus was laid out: its population and the reshaping rules with their counts.
fn agent_layout_rows(t: &mut Table, l: &crate::trace::pipeline::plan::PlanFacts) {
    let population = match (l.users, l.session_rate, l.recorded_starts) {
        (Some(u), _, _) => format!("{u} users"),
        (_, Some(r), _) => format!("{r} conversations/s"),
        (_, _, Some(_)) => "at their recorded times".to_string(),
        _ => "all at once".to_string(),
    };
    t.row("Population:", population);
    t.row(
        "Conversations laid out (corpus):",
        format!("{} ({})", l.conversations, l.corpus_conversations),
    );
    if l.past_limit > 0 {
        t.row("Requests left out (past -t):", l.past_limit);
    }
    if let Some(p) = l.sample_sessions {
        t.row(
            "Sample sessions / sampled out:",
            format!("{p} / {}", l.sampled_out),
        );
    }
    if let Some(a) = l.amplify {
        t.row(
            "Amplify / conversations added:",
            format!("{a} / {}", l.amplified),
        );
    }
    if l.prefix_scale.is_some() || l.prompt_scale.is_some() {
        t.row(
            "Prefix / prompt scale, prompts:",
            format!(
                "{} / {}, {}",
                l.prefix_scale.unwrap_or(1.0),
                l.prompt_scale.unwrap_or(1.0),
                l.scaled_prompts
            ),
        );
    }
    if let Some(max) = l.max_input_length {
        t.row(
            "Max input length / prompts cut:",
            format!("{max} / {}", l.capped_inputs),
        );
    }
    if let Some(ms) = l.max_idle_gap_ms {
        t.row(
            "Max idle gap (s) / gaps cut:",
            format!("{} / {}", ms / 1e3, l.capped_gaps),
        );
    }
    if l.share_system_prefix {
        t.row("Shared tools+system prefix:", "yes");
    }
}

/// Multi-turn sessions: turns, durations, TTFT by turn, waits and think time.
fn sessions_section(t: &mut Table, ss: &SessionSummary) {
    let ms = |v: Option<f64>| num(v, 2);
    t.header("Sessions", '-');
    t.row("Sessions:", ss.sessions);
    t.float("Turns per session (mean):", ss.mean_turns);
    t.row("Turns per session (max):", ss.max_turns);
    t.float("Session duration mean (s):", ss.mean_duration_s);
    t.float("Session duration max (s):", ss.max_duration_s);
    t.row(
        "Mean TTFT first turns (ms):",
        ms(ss.mean_ttft_first_turn_ms),
    );
    t.row(
        "Mean TTFT later turns (ms):",
        ms(ss.mean_ttft_later_turns_ms),
    );
    if ss.mean_session_wait_ms.is_some() {
        t.row("Mean session wait (ms):", ms(ss.mean_session_wait_ms));
        t.row("Max session wait (ms):", ms(ss.max_session_wait_ms));
    }
    if ss.turns_not_sent > 0 {
        t.row("Turns not sent (cut/skipped):", ss.turns_not_sent);
    }
    if ss.cut_turns > 0 {
        t.row(
            "Turns cut by slicing (sessions):",
            format!("{} ({})", ss.cut_turns, ss.cut_sessions),
        );
    }
    if let Some(timing) = ss.timing {
        let think = match (ss.think_time.as_deref(), ss.think_time_fixed_ms) {
            (_, Some(ms)) => format!("{ms} ms"),
            (Some(t), None) => t.to_string(),
            (None, None) => "-".to_string(),
        };
        let timing = match timing {
            crate::schedule::Timing::Open => "open".to_string(),
            crate::schedule::Timing::Closed => format!(
                "closed, think time {think}{}",
                if ss.live_history {
                    ", live history"
                } else {
                    ""
                }
            ),
        };
        t.row("Timing:", timing);
    }
    if ss.mean_think_ms.is_some() {
        t.row("Mean think time applied (ms):", ms(ss.mean_think_ms));
        t.row("Max think time applied (ms):", ms(ss.max_think_ms));
    }
}

/// Prompt and output token counts against the intended ones, and the run's prompt facts.
fn exactness_section(t: &mut Table, s: &Summary) {
    t.header("Token exactness", '-');
    let e = &s.token_exactness;
    t.row(
        "Prompt tokens exact (server/intended):",
        format!("{} / {}", e.exact, e.with_usage),
    );
    if e.with_usage > e.exact {
        t.row(
            "Prompt tokens over / under:",
            format!("{} / {}", e.over, e.under),
        );
    }
    if e.unknown_intended > 0 {
        t.row(
            "Prompt tokens not checked (no intended):",
            e.unknown_intended,
        );
    }
    if e.without_usage > 0 {
        t.row("Prompt tokens not reported (no usage):", e.without_usage);
    }
    let o = &s.output_exactness;
    if o.with_usage > 0 {
        t.row(
            "Output tokens exact (received/asked):",
            format!("{} / {}", o.exact, o.with_usage),
        );
        if o.with_usage > o.exact {
            t.row(
                "Output tokens over / under:",
                format!("{} / {}", o.over, o.under),
            );
        }
    }
    if s.cache.impossible_cached > 0 {
        t.row(
            "Cached > prompt tokens (impossible):",
            s.cache.impossible_cached,
        );
    }
    if let Some(src) = &s.run.prompts.prompt_token_source {
        t.row("Prompt tokens counted by:", src);
    }
    if let Some(c) = &s.run.prompts.prompt_corpus {
        t.row(
            "Prompt text (corpus share):",
            format!("{} ({:.1}%)", c.stats.path, 100.0 * c.corpus_token_share),
        );
    }
    if let Some(pv) = s.run.prompts.prompt_verification {
        t.row(
            "Prompts verified at start-up (exact):",
            format!("{} / {}", pv.exact, pv.checked),
        );
    }
    if let Some(o) = s.run.prompts.chat_overhead {
        t.row("Chat template overhead (tokens):", o);
    }
    let src = &s.output_tokens_source;
    t.row("Output tokens from usage:", src.usage);
    if src.chunks + src.unknown > 0 {
        t.row(
            "Output tokens counted from chunks:",
            src.chunks + src.unknown,
        );
    }
    if s.run.outcome.dry_run {
        t.row("Dry run:", "yes (nothing was sent)");
    }
    if let Some(seed) = s.run.seed {
        t.row("Seed:", seed);
    }
}

/// Image requests: their images and the exactness check split into images and text
/// (`docs/metrics.md`, "Images"); only when some request carried images.
fn images_section(t: &mut Table, i: &crate::stats::images::ImageSummary) {
    t.header("Images", '-');
    t.row("Requests with images:", i.requests);
    t.row("Images sent:", i.images);
    t.row(
        "Prompt tokens exact (image requests):",
        format!("{} / {}", i.prompt_exact, i.requests),
    );
    if i.with_image_usage == 0 {
        t.row("Image tokens reported by the server:", "none");
        t.row("Image tokens intended:", i.image_tokens_intended);
        return;
    }
    t.row(
        "Image tokens (server/intended):",
        format!("{} / {}", i.image_tokens, i.image_tokens_intended),
    );
    t.row(
        "Image tokens exact (requests):",
        format!("{} / {}", i.image_tokens_exact, i.with_image_usage),
    );
    t.row(
        "Text tokens exact (requests):",
        format!("{} / {}", i.text_tokens_exact, i.with_image_usage),
    );
}

/// Thinking, answer and tool calls apart (reasoning models, tool calls).
fn reasoning_section(
    t: &mut Table,
    r: &crate::stats::reasoning::ReasoningSummary,
    ttfa: &crate::stats::samples::MetricStats,
    percentiles: &[f64],
) {
    let p = |m: &crate::stats::samples::MetricStats, q: f64| num(m.known_percentile(q), 2);
    let hi = percentiles.iter().copied().fold(50.0_f64, f64::max);
    t.header("Reasoning and tool calls", '-');
    t.row("Requests with thinking:", r.requests_with_reasoning);
    // Without an answer after the thinking (all thinking): unknown, n/a.
    if ttfa.count > 0 || r.requests_with_reasoning > 0 {
        t.row(
            &format!("Time to first answer P50 / P{} (ms):", trim_num(hi)),
            format!("{} / {}", p(ttfa, 50.0), p(ttfa, hi)),
        );
    }
    if r.requests_with_reasoning > 0 {
        // Token events: a server that holds back a token (part of a multi-byte character)
        // sends it merged with the next (docs/metrics.md).
        t.row(
            "Thinking token events per request (mean):",
            num(r.reasoning_tokens_mean, 1),
        );
        t.row("Thinking TPOT P50 (ms):", p(&r.reasoning_tpot_ms, 50.0));
        let server = match r.reasoning_usage_reported {
            0 => "none reported".to_string(),
            n => format!("{n} ({} equal the stream)", r.reasoning_usage_equal),
        };
        t.row("Server reasoning-token counts:", server);
    }
    if r.reasoning_length_rows > 0 {
        t.row(
            "Thinking = trace's reasoning length:",
            format!("{} of {}", r.reasoning_exact_rows, r.reasoning_length_rows),
        );
    }
    if r.answer_tpot_ms.count > 0 || r.requests_with_reasoning > 0 {
        t.row("Answer TPOT P50 (ms):", p(&r.answer_tpot_ms, 50.0));
    }
    if r.requests_with_tool_calls > 0 {
        t.row(
            "Tool calls (requests / calls):",
            format!("{} / {}", r.requests_with_tool_calls, r.tool_calls),
        );
        t.row("Tool argument bytes:", r.tool_arg_bytes);
        t.row("Time to first tool call P50 (ms):", p(&r.ttf_tool_ms, 50.0));
    }
}
