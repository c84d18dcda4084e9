//! Phase 8: what the run was (its typed facts), the summary from the writer's accumulator and
//! the scraper's samples, whether the run is valid, and the outputs: summary JSON, the
//! vLLM-shaped console table, the end-of-run lines and `--result-dir`.

use super::dispatch::Dispatched;
use super::drain::Drained;
use super::load::Loaded;
use super::note::note;
use super::prompts::Prompts;
use super::server::Server;
use crate::config::{ReplayConfig, Target};
use crate::observe::{ClientSide, ScrapeResult};
use crate::report;
use crate::schedule::{self, DispatchStats, FeedEnd, ProducerStats, StopReason};
use crate::stats::{Metric, PromptVerification, RunInfo, StartupTimes, Summary};
use crate::stats::{RunEnd, RunInternals, RunPrompts, RunServer};
use crate::Result;

/// How a replay ended.
#[derive(Debug)]
pub struct RunOutcome {
    pub summary: Summary,
    /// 0 completed, 3 early stop, 4 invalid run with `--strict`, 130 interrupted.
    pub exit_code: i32,
}

pub(super) fn run(
    cfg: &ReplayConfig,
    trace: &Loaded,
    server: &Server,
    prompts: &Prompts,
    mut drained: Drained,
    startup: StartupTimes,
) -> Result<RunOutcome> {
    let served_ideal = drained.accumulator.take_served_ideal();
    let info = run_info(
        cfg,
        trace,
        server,
        prompts,
        &drained,
        startup,
        served_ideal.as_ref(),
    );
    let Drained {
        dispatched,
        reason,
        accumulator,
        scraped,
        producer_stats,
        feed,
        forced,
        ..
    } = drained;
    let mut summary = windowed_summary(cfg, accumulator, &info)?;
    summary.rerun = Some(rerun(cfg));
    routed_ideal(cfg, trace, &mut summary);
    feed_warnings(&mut summary, &feed, reason);
    if forced {
        summary.warnings.push(forced_words(&summary));
    }
    match scraped {
        Some(Ok(r)) => {
            server_section(&mut summary, &r);
            server_blocks(&mut summary, trace.block_size, served_ideal.as_ref());
            placement_section(&mut summary, &r, trace.block_size, served_ideal.as_ref());
        }
        Some(Err(e)) => summary
            .warnings
            .push(format!("server metrics: the scraper failed: {e}")),
        None => {}
    }
    validity(cfg, &mut summary);
    report::write_summary_json(&cfg.output.summary_path, &summary)?;
    report::print_stdout(&format!("{}\n", report::render_console(&summary)))?;
    end_notes(
        &summary,
        &producer_stats,
        &dispatched.result.stats,
        &startup,
    );
    note(format!("summary: {}", cfg.output.summary_path.display()));
    if let Some(dir) = &cfg.output.result_dir {
        let files = report::write_result_dir_exporting(
            dir,
            &summary,
            &cfg.output.records_path,
            &cfg.output.exports,
        )?;
        note(format!(
            "result files: {} files in {}",
            files.len(),
            dir.display()
        ));
        let page = dir.join(report::html::REPORT_HTML);
        if files.contains(&page) {
            note(format!("report: {} (open it in a browser)", page.display()));
        }
    }
    for w in &summary.invalid {
        note(format!("RUN INVALID: {w}"));
    }
    if let Some(e) = feed
        .error
        .as_ref()
        .filter(|_| reason == StopReason::TraceError)
    {
        note(format!("error: {e}{}", cut_off_words(&feed)));
    }
    let exit_code = exit_code(cfg, &summary, reason);
    Ok(RunOutcome { summary, exit_code })
}

/// The summary of the run from the writer's accumulator; with `--measure-window auto`,
/// recomputed from the records file (the steady span is known only at the end; ITL then needs
/// `--record-itl`). A window no request was sent in is an error that names the records file.
fn windowed_summary(
    cfg: &ReplayConfig,
    accumulator: crate::stats::Accumulator,
    info: &RunInfo,
) -> Result<Summary> {
    let records = &cfg.output.records_path;
    let again = || {
        format!(
            "; every request is in {}: summarise it again with `request-sim report {} --measure-window ...`",
            records.display(),
            records.display()
        )
    };
    if cfg.output.report.window == Some(crate::stats::MeasureWindow::Auto) {
        return crate::stats::report_from_records(records, &cfg.output.report, Some(info.clone()))
            .map_err(|e| crate::Error::report(format!("{e:#}{}", again())));
    }
    if let Some(e) = accumulator.window_error() {
        return Err(crate::Error::report(format!("{e}{}", again())));
    }
    Ok(accumulator.finish(info))
}

/// Exit status of a run whose requests failed (nothing succeeded).
const EXIT_NO_SUCCESS: i32 = 5;
/// Exit status of a run whose error share is above `--max-error-rate`.
const EXIT_ERROR_RATE: i32 = 6;

/// The exit status, first match wins: 1 a bad trace row stopped the run, 130 interrupted, 3
/// early stop, 5 no request succeeded (not a dry run), 6 the error share is above
/// `--max-error-rate`, 4 `--strict` and the run is invalid, else 0 (docs/reliability.md).
fn exit_code(cfg: &ReplayConfig, summary: &Summary, reason: StopReason) -> i32 {
    let (errored, finished) = summary.status.error_share();
    match reason {
        StopReason::TraceError => 1,
        StopReason::Interrupted => 130,
        StopReason::EarlyStop => 3,
        _ if summary.completed == 0 && !summary.run.outcome.dry_run => {
            let kinds: Vec<String> = summary
                .errors
                .iter()
                .map(|(kind, n)| format!("{n} {kind}"))
                .collect();
            note(format!(
                "exit status {EXIT_NO_SUCCESS}: no request succeeded ({})",
                if kinds.is_empty() {
                    summary.status.describe()
                } else {
                    kinds.join(", ")
                }
            ));
            EXIT_NO_SUCCESS
        }
        _ if cfg
            .validity
            .max_error_rate
            .is_some_and(|max| errored as f64 > max * finished as f64) =>
        {
            note(format!(
                "exit status {EXIT_ERROR_RATE}: {errored} of {finished} requests ({:.2}%) ended in error, above --max-error-rate {}",
                100.0 * errored as f64 / finished.max(1) as f64,
                cfg.validity.max_error_rate.unwrap_or_default()
            ));
            EXIT_ERROR_RATE
        }
        _ if cfg.validity.strict && !summary.invalid.is_empty() => {
            note("--strict: exit status 4 (run invalid)");
            4
        }
        _ => 0,
    }
}

/// What was run: settings, trace facts, how it started and ended.
fn run_info(
    cfg: &ReplayConfig,
    trace: &Loaded,
    server: &Server,
    prompts: &Prompts,
    drained: &Drained,
    startup: StartupTimes,
    served_ideal: Option<&crate::stats::ideal::IdealCount>,
) -> RunInfo {
    let d = &drained.dispatched;
    let r = &d.result;
    // Requests of the slice: all of them when the feed was read to its end, else (a streamed
    // trace cut short by a stop) those read, and `planned` is unknown.
    let planned = drained.feed.planned();
    let seen = planned.unwrap_or(drained.feed.dealt + drained.feed.counted);
    let never_sent = seen.saturating_sub(r.dispatched);
    // Over the requests the server processed (`stats::ideal`); the dispatcher's count (every
    // request handed over) when the records were not tracked.
    let ideal = served_ideal.map_or_else(
        || {
            let ratio = r
                .ideal_hits
                .filter(|_| r.any_hash_ids && r.input_tokens > 0)
                .map(|h| h as f64 / r.input_tokens as f64);
            (ratio, None, None)
        },
        |c| (c.ratio, Some(c.processed), Some(c.sent)),
    );
    RunInfo {
        started_at: Some(d.started_at.clone()),
        trace_path: Some(trace.name.clone()),
        format: Some(trace.format),
        block_size: Some(trace.block_size),
        trace_stats: Some(trace.trace_stats()),
        seed: Some(cfg.prompts.seed),
        scale_factor: Some(cfg.schedule.scale_factor),
        server: RunServer {
            endpoint: Some(match &cfg.target.server {
                Target::Remote(ep) => crate::backend::sanitize_url(ep.url.as_str()),
                Target::BuiltinSimulator => "built-in simulator (llm-sim)".to_string(),
            }),
            api: Some(server.ep.api()),
            model: Some(prompts.model.clone()),
            stream: Some(cfg.requests.stream),
        },
        num_producer: Some(cfg.schedule.producers),
        threads: Some(cfg.schedule.threads),
        prompts: RunPrompts {
            chat_overhead: prompts.overhead.as_ref().map(|o| o.tokens),
            prompt_token_source: Some(prompts.source.clone()),
            prompt_verification: prompts.verification.as_ref().map(|v| PromptVerification {
                checked: v.checked,
                exact: v.exact,
            }),
            prompt_corpus: prompts.corpus.clone(),
            ideal_cache_hit_ratio: ideal.0,
            ideal_cache_hit_requests: ideal.1,
            ideal_cache_hit_sent: ideal.2,
        },
        outcome: RunEnd {
            scheduled: d.result.dispatched,
            never_sent,
            never_sent_reason: (never_sent > 0).then_some(drained.reason),
            dry_run: cfg.requests.dry_run,
            planned,
            stop_reason: Some(drained.reason),
            wall_time_s: Some(drained.wall.as_secs_f64()),
        },
        records_path: Some(cfg.output.records_path.display().to_string()),
        max_output_tokens: cfg.requests.max_output_tokens,
        internals: RunInternals {
            producer: Some(drained.producer_stats),
            dispatch: Some(d.result.stats),
            startup: Some(startup),
            start_at: start_at_report(cfg, d),
            realtime: Some(drained.realtime.clone()),
            releases: drained.releases.clone(),
            client_cpu: drained.client_cpu.clone(),
        },
        sessions: (trace.sessions.any() || trace.head.iter().any(|p| p.turn.is_some())).then_some(
            crate::stats::sessions::SessionRun {
                timing: cfg.requests.sessions.timing,
                think_time: Some(cfg.requests.sessions.think),
                live_history: cfg.requests.sessions.live_history,
                cut_turns: trace.cut.0,
                cut_sessions: trace.cut.1,
            },
        ),
        agents: trace.agents.clone(),
        scenario: cfg.scenario.clone(),
        ..RunInfo::new()
    }
}

/// The run as a run file: its settings with the seed it drew, the tool's version, the trace
/// file's checksum.
fn rerun(cfg: &ReplayConfig) -> crate::runfile::Rerun {
    let mut settings = cfg.settings.clone();
    settings.set("seed", cfg.prompts.seed);
    crate::runfile::Rerun {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        trace: match &cfg.trace.source {
            crate::config::TraceSource::File(p) => crate::runfile::trace_file(p),
            crate::config::TraceSource::BuiltinDemo => None,
        },
        settings,
        own_paths: crate::cli::replay_keys()
            .keys
            .iter()
            .filter(|k| k.table == "output" && k.path)
            .map(|k| k.long.clone())
            .collect(),
    }
}

/// An agent corpus: the trace-ideal hit ratio for the routing the run got, from the records
/// and the whole trace (nothing when the records cannot be read back).
fn routed_ideal(cfg: &ReplayConfig, trace: &Loaded, summary: &mut Summary) {
    let (Some(a), Some(w)) = (summary.agents.as_mut(), &trace.whole) else {
        return;
    };
    if let Ok((records, _)) = crate::record::read_records(&cfg.output.records_path) {
        let routed = crate::stats::agents::routed_ideal_hit_ratio(&records, w.block_size, |i| {
            w.requests.get(i)
        });
        a.routed_ideal_hit_ratio = routed.map(|r| r.0);
        a.instances_served = routed.map(|r| r.1);
    }
}

/// What the summary says about the feed: a trace error that stopped the run or was found
/// after it stopped, a slice whose end was not read.
fn feed_warnings(summary: &mut Summary, feed: &FeedEnd, reason: StopReason) {
    if let Some(e) = &feed.error {
        let cut = cut_off_words(feed);
        summary.warnings.push(if reason == StopReason::TraceError {
            format!("the run stopped at a bad trace row: {e}{cut}")
        } else {
            format!("the trace has a bad row after the requests sent: {e}{cut}")
        });
    }
    if !feed.ended {
        summary.warnings.push(format!(
            "the streamed trace was not read to the end of its slice after the stop: `planned` is unknown and `never_sent` counts the {} requests read but not sent",
            summary.run.outcome.never_sent
        ));
    }
}

/// What the summary says of a stop forced by a second signal.
fn forced_words(summary: &Summary) -> String {
    format!(
        "the stop was forced by a second Ctrl-C/SIGTERM: the requests in flight were cancelled at once, without --grace-secs (cancelled: {}, never sent: {})",
        summary.status.cancelled, summary.run.outcome.never_sent
    )
}

/// The valid requests read before the feed's error and never sent (a streamed trace's reorder
/// window), in words; empty when there were none.
fn cut_off_words(feed: &FeedEnd) -> String {
    match feed.cut_off {
        0 => String::new(),
        n => format!(
            " ({n} valid requests read before it were not sent: they are counted in never_sent)"
        ),
    }
}

/// `--start-at`: the common start and how close to it this run started.
fn start_at_report(cfg: &ReplayConfig, d: &Dispatched) -> Option<schedule::StartAtReport> {
    cfg.schedule.start_at.map(|at| {
        let offset = d.start_offset_ms.unwrap_or(0.0);
        let first = d.first_sent_us;
        schedule::StartAtReport {
            at: at.rfc3339(),
            clock_start_offset_ms: (offset * 1e3).round() / 1e3,
            first_send_ms: (first != u64::MAX)
                .then(|| ((first as f64 / 1e3 + offset) * 1e3).round() / 1e3),
            waited_ms: d.waited_ms.unwrap_or(0.0).round(),
            clock: schedule::start::clock_state(),
        }
    })
}

/// The server-metrics section: each instance's view over the run beside the client's.
fn server_section(summary: &mut Summary, scraped: &ScrapeResult) {
    let (ttft, e2el) = (
        &summary.latency[Metric::Ttft],
        &summary.latency[Metric::E2el],
    );
    let client = ClientSide {
        cached_tokens_ratio: summary.cache.hit_ratio,
        ideal_hit_ratio: summary.cache.ideal_hit_ratio,
        ttft_mean_ms: (ttft.count > 0).then_some(ttft.mean),
        ttft_p50_ms: (ttft.count > 0).then_some(ttft.median),
        ttft_p99_ms: ttft.percentile(99.0).filter(|_| ttft.count > 0),
        e2e_mean_ms: (e2el.count > 0).then_some(e2el.mean),
        e2e_p50_ms: (e2el.count > 0).then_some(e2el.median),
        e2e_p99_ms: e2el.percentile(99.0).filter(|_| e2el.count > 0),
        completed: summary.completed,
    };
    let srv = crate::observe::summary::summarize(scraped, client);
    for (i, x) in srv.instances.iter().enumerate() {
        if x.scrapes_failed > 0 {
            summary.warnings.push(format!(
                "server metrics: {} of {} scrapes of instance {i} ({}) failed{}",
                x.scrapes_failed,
                x.scrapes_failed + x.scrapes_ok,
                x.url,
                x.first_error
                    .as_ref()
                    .map(|e| format!(" (first: {e})"))
                    .unwrap_or_default()
            ));
        }
    }
    if let Some(p) = &scraped.path {
        note(format!(
            "server metrics: {} samples in {}",
            scraped.lines,
            p.display()
        ));
    }
    summary.server = Some(srv);
}

/// Which instance served each request (`docs/server-metrics.md`): the records' counts per
/// instance beside the instances' own, and the routed ideal beside the one-cache ideal.
fn placement_section(
    summary: &mut Summary,
    scraped: &ScrapeResult,
    trace_block: usize,
    ideal: Option<&crate::stats::ideal::IdealCount>,
) {
    let Some(routed) = ideal.and_then(|c| c.routed.as_ref()) else {
        return;
    };
    let Some(srv) = summary.server.as_mut() else {
        return;
    };
    let placed: u64 = routed.requests.iter().sum();
    for (i, x) in srv.instances.iter_mut().enumerate() {
        let n = routed.requests.get(i).copied().unwrap_or(0);
        x.records = Some(n);
        x.record_share = (placed > 0).then(|| n as f64 / placed as f64);
    }
    srv.cluster.records = Some(placed);
    let server_block = srv
        .cluster
        .block_size
        .filter(|b| *b as usize != trace_block);
    let from = if scraped.placement.is_some() {
        "kv-events"
    } else {
        "response"
    };
    srv.placement = Some(crate::observe::summary::PlacementSummary {
        from: from.to_string(),
        placed,
        unplaced: routed.unplaced,
        routed_ideal_hit_ratio: routed.ratio(None),
        routed_ideal_hit_ratio_server_blocks: server_block.and_then(|b| routed.ratio(Some(b))),
        kv_events: scraped.placement.as_ref().map(|p| p.stats()),
    });
    if let Some(k) = scraped.placement.as_ref().map(|p| p.stats()) {
        if k.unreadable > 0 {
            summary.warnings.push(format!(
                "KV events: {} of {} batches could not be read (first: {})",
                k.unreadable,
                k.batches,
                k.first_error.as_deref().unwrap_or("?")
            ));
        }
        if k.batches == 0 {
            summary.warnings.push(format!(
                "KV events: nothing came from {}: is each instance publishing (vLLM --kv-events-config)?",
                k.endpoints.join(", ")
            ));
        }
    }
}

/// A run is invalid when the client fell behind the schedule or the server metrics it was to
/// report are missing.
fn validity(cfg: &ReplayConfig, summary: &mut Summary) {
    if summary.drift.count > 0 && summary.drift.p99_ms > cfg.validity.max_drift_ms {
        summary.invalid.push(format!(
            "send drift p99 {:.3} ms is above --max-drift-ms {}: the client fell behind the schedule, so the server did not get the trace's timing (see docs/performance.md)",
            summary.drift.p99_ms, cfg.validity.max_drift_ms
        ));
    }
    let rx = &summary.rx_late;
    if rx.count > 0 && rx.p99_ms > cfg.validity.max_drift_ms {
        summary.invalid.push(format!(
            "receive lateness p99 {:.3} ms is above --max-drift-ms {}: the client read its tokens late, so tokens that queued in one read share its newest bytes' arrival (see docs/metrics.md, \"Receive lateness\")",
            rx.p99_ms, cfg.validity.max_drift_ms
        ));
    }
    if let Some(srv) = &summary.server {
        for (i, x) in srv.instances.iter().enumerate() {
            let all = x.scrapes_ok + x.scrapes_failed;
            if x.scrapes_failed * 2 > all {
                summary.invalid.push(format!(
                    "server metrics of instance {i} ({}) are missing: {} of {all} scrapes failed",
                    x.url, x.scrapes_failed
                ));
            }
        }
    }
}

/// Print the end-of-run notes (after the summary table).
fn end_notes(
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
            "start-up {:.0} ms: trace {:.0}, runtime {:.0}, tokenizer {:.0}, vocab {:.0}, prompt check {:.0}, calibration {:.0}, warm-up {:.0} ({} connections opened); {} more opened ahead of {} bursts",
            startup.total_ms,
            startup.trace_load_ms,
            startup.runtime_ms,
            startup.tokenizer_load_ms,
            startup.vocab_ms,
            startup.prompt_check_ms,
            startup.calibration_ms,
            startup.warmup_ms,
            startup.connections,
            dispatch.warm_gets,
            dispatch.warm_bursts,
        ),
    );
    if let Some(sa) = &summary.run.internals.start_at {
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

/// The server's KV block size next to the trace's: when they differ, the ideal at the
/// server's size, and a warning when the trace's blocks are no multiple of the server's (its
/// sharing cannot show: Bailian's 16-token blocks on vLLM CPU's 32 can, at best, hit half).
fn server_blocks(
    summary: &mut Summary,
    trace_block: usize,
    ideal: Option<&crate::stats::ideal::IdealCount>,
) {
    let Some(server_block) = summary
        .server
        .as_ref()
        .and_then(|s| s.cluster.block_size)
        .filter(|b| *b as usize != trace_block)
    else {
        return;
    };
    summary.cache.server_block_size = Some(server_block);
    let at = ideal.and_then(|c| c.ratio_at_block(server_block));
    summary.cache.ideal_hit_ratio_server_blocks = at;
    if !trace_block.is_multiple_of(server_block as usize) {
        summary.warnings.push(format!(
            "the trace's {trace_block}-token blocks do not map onto the server's \
             {server_block}-token KV blocks: the server caches only whole blocks of its own, so \
             the trace's sharing shows only as far as it fills them{}",
            at.map_or(String::new(), |r| format!(
                " (trace-ideal at the server's block size: {:.2}%)",
                100.0 * r
            ))
        ));
    }
}
