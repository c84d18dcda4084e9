//! The replay orchestrator: trace → prompts → producers → dispatcher → backend → records →
//! summary. Everything the run needs is set up (and can fail) before the first request is
//! sent; after that every dispatched request ends as exactly one record.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::backend::{self, ApiKind, BodyParams, Endpoint, PromptPayload};
use crate::config::{ReplayConfig, Target, TraceSource};
use crate::prompt::{self, PromptBuilder, Vocab};
use crate::record::{Finished, Record, RecordWriter, Status, TokenSource};
use crate::report::{self, Accumulator, ReportConfig, RunInfo, StartupTimes, Summary};
use crate::schedule::sessions::{sleep_until_precise, Done, SessionGate, Timing};
use crate::schedule::{
    self, BuildFn, DispatchPlan, Prepared, ProducerConfig, ProducerStats, Producers, Realtime,
    RealtimeMode, Scratch, StopReason,
};
use crate::trace::{self, ChatPayload, Sessions, Trace, TraceRequest};

/// The built-in demo trace (mooncake format, 200 requests over ~19 s, block 512).
pub const DEMO_TRACE: &str = include_str!("../data/demo_trace.jsonl");

/// How a replay ended.
#[derive(Debug)]
pub struct RunOutcome {
    pub summary: Summary,
    /// 0 completed, 3 early stop, 130 interrupted.
    pub exit_code: i32,
}

/// Why the run stopped dispatching before the end of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Interrupted,
    EarlyStop,
}

/// Shared run control: stop dispatching, cancel in-flight, count failures.
struct Control {
    stop_flag: AtomicBool,
    stopping: CancellationToken,
    cancel: CancellationToken,
    cause: Mutex<Option<Cause>>,
    finished: AtomicU64,
    failed: AtomicU64,
}

impl Control {
    fn request_stop(&self, cause: Cause) -> bool {
        let mut c = self.cause.lock().unwrap_or_else(|p| p.into_inner());
        if c.is_some() {
            return false;
        }
        *c = Some(cause);
        self.stop_flag.store(true, Ordering::SeqCst);
        self.stopping.cancel();
        true
    }
    fn cause(&self) -> Option<Cause> {
        *self.cause.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A start-up or end-of-run line on stderr (`--quiet` only turns off the progress line).
fn note(msg: impl AsRef<str>) {
    eprintln!("request-sim: {}", msg.as_ref());
}

/// Load the trace the config names.
pub fn load_trace(cfg: &ReplayConfig) -> Result<Trace, String> {
    let trace = match &cfg.trace {
        TraceSource::File(p) => trace::load(p, &cfg.load).map_err(|e| e.to_string()),
        TraceSource::BuiltinDemo => {
            trace::parse_reader("<built-in demo trace>", DEMO_TRACE.as_bytes(), &cfg.load)
                .map_err(|e| e.to_string())
        }
    }?;
    Ok(trace)
}

/// Run a replay to the end and write its records and summary.
pub fn replay(cfg: ReplayConfig) -> Result<RunOutcome, String> {
    let t_start = Instant::now();
    let mut startup = StartupTimes::default();
    for n in &cfg.notes {
        note(format!("note: {n}"));
    }
    // The tokenizer (hundreds of ms for a real model's) loads while the trace is read.
    let tokenizer_job = cfg.tokenizer.clone().map(|p| {
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = prompt::load_tokenizer(&p).map_err(|e| e.to_string());
            (r, ms_since(t))
        })
    });
    // ---- trace ----
    let trace = load_trace(&cfg)?;
    let mut requests = trace.requests.clone();
    if let Some(shard) = cfg.shard {
        let all = requests.len();
        requests = trace::shard::select(requests, &trace.sessions, shard);
        note(format!(
            "shard {}/{}: {} of the trace's {all} requests (record indexes are the trace's)",
            shard.index,
            shard.count,
            requests.len()
        ));
    }
    if let Some(cap) = cfg.max_output_tokens {
        for r in &mut requests {
            r.output_length = r.output_length.min(cap);
        }
    }
    let requests = Arc::new(requests);
    let ideal_ratio = {
        let hits: u64 = trace::analyze::ideal_prefix_hits(&trace)
            .iter()
            .map(|&h| u64::from(h))
            .sum();
        let total: u64 = requests.iter().map(|r| u64::from(r.input_length)).sum();
        (total > 0 && !requests.iter().all(|r| r.hash_ids.is_empty()))
            .then(|| hits as f64 / total as f64)
    };
    let trace_name = match &cfg.trace {
        TraceSource::File(p) => p.display().to_string(),
        TraceSource::BuiltinDemo => "<built-in demo trace>".to_string(),
    };
    let span_s = requests.last().map(|r| r.timestamp_ms / 1e3).unwrap_or(0.0);
    note(format!(
            "trace {trace_name}: {} requests over {:.1} s ({:?}, block {}), replayed in {:.1} s at scale {}",
            requests.len(),
            span_s,
            trace.format,
            trace.block_size,
            span_s / cfg.scale_factor,
            cfg.scale_factor
        ),
    );

    startup.trace_load_ms = ms_since(t_start);

    // ---- runtime and server ----
    let t_phase = Instant::now();
    // The I/O threads write requests when their time comes: real-time scheduling when the
    // mode allows it (see schedule::priority). `on` fails here, before anything is sent.
    let realtime = Realtime::new(cfg.realtime, cfg.rt_priority);
    match (cfg.realtime, realtime.probe()) {
        (RealtimeMode::On, Err(e)) => return Err(format!("--realtime on: {e}")),
        (RealtimeMode::Auto, Err(e)) => note(format!(
            "normal scheduling ({e}); other work on this machine can delay sends (see --realtime)"
        )),
        _ => {}
    }
    let rt_io = realtime.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.threads)
        .thread_name("request-io")
        .on_thread_start(move || rt_io.register_io_thread())
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let sim = match (&cfg.target, cfg.dry_run) {
        (Target::BuiltinSimulator, false) => {
            let sc = llm_sim::SimConfig {
                tokenizer: cfg.tokenizer.clone(),
                tokenizer_config: cfg.tokenizer_config.clone(),
                ..Default::default()
            };
            let s = llm_sim::spawn_in_thread(sc)
                .map_err(|e| format!("cannot start the built-in simulator: {e:#}"))?;
            note(format!(
                "no --endpoint: started the built-in simulator (llm-sim) at {}",
                s.base_url()
            ));
            Some(s)
        }
        _ => None,
    };
    let endpoint_str = match (&cfg.target, &sim) {
        (Target::Remote(e), _) => e.clone(),
        (Target::BuiltinSimulator, Some(s)) => {
            if cfg.token_ids {
                format!("{}/v1/completions", s.base_url())
            } else {
                s.base_url()
            }
        }
        (Target::BuiltinSimulator, None) => "http://127.0.0.1:9/v1/chat/completions".to_string(),
    };
    let mut ep = Endpoint::resolve(
        &endpoint_str,
        cfg.api,
        cfg.stream,
        cfg.route.clone(),
        cfg.api_key.clone(),
    )?;
    ep.session_header = cfg.sessions.session_header.clone();
    if !trace.chats.is_empty() && ep.kind != ApiKind::Chat {
        return Err(format!(
            "a messages trace is sent as chat requests: it needs a chat endpoint (…/v1/chat/completions), not {}",
            ep.display_url()
        ));
    }
    if cfg.token_ids && ep.kind != ApiKind::Completions {
        return Err(format!(
            "--token-ids needs a completions endpoint (…/v1/completions), not {}",
            ep.display_url()
        ));
    }
    let api_name = match (cfg.api, ep.kind) {
        (backend::ApiFlavor::Aibrix, _) => "aibrix",
        (_, ApiKind::Chat) => "openai-chat",
        (_, ApiKind::Completions) => "openai-completions",
        _ => "tgi",
    }
    .to_string();
    let client_options = backend::ClientOptions {
        insecure: cfg.insecure,
        tls_roots: ep.url.scheme() == "https",
        pool_idle_timeout: cfg.pool_idle_timeout,
        ..Default::default()
    };
    let mut client = backend::build_client(&client_options)?;

    startup.runtime_ms = ms_since(t_phase);

    // ---- prompts ----
    let tokenizer = match tokenizer_job {
        Some(job) => {
            let (r, ms) = job
                .join()
                .map_err(|_| "tokenizer loading panicked".to_string())?;
            startup.tokenizer_load_ms = ms;
            Some(r?)
        }
        None => None,
    };
    let t_phase = Instant::now();
    let vocab = match &tokenizer {
        Some(t) => Vocab::from_tokenizer(t).map_err(|e| e.to_string())?,
        None => {
            let against_sim = matches!(cfg.target, Target::BuiltinSimulator);
            if !against_sim {
                note("WARNING: no --tokenizer: prompts use the built-in word list, so prompt token counts are \
                     APPROXIMATE for a real model (exact only against the built-in simulator). Pass the \
                     model's tokenizer.json for exact counts.",
                );
            }
            Vocab::builtin()
        }
    };
    startup.vocab_ms = ms_since(t_phase);
    let builder = Arc::new(PromptBuilder::new(
        Arc::new(vocab),
        cfg.seed,
        trace.block_size,
    ));
    let t_phase = Instant::now();
    let verification = tokenizer.as_ref().map(|t| {
        // The head of a few prompts: a prompt's first n tokens are the prompt of length n, so
        // this checks real blocks while keeping start-up short (`verify-prompts` checks all).
        let n = STARTUP_CHECK_PROMPTS.min(requests.len());
        let heads: Vec<TraceRequest> = (0..n)
            .map(|k| &requests[k * requests.len() / n])
            .map(|r| TraceRequest {
                input_length: r.input_length.min(STARTUP_CHECK_TOKENS),
                ..r.clone()
            })
            .collect();
        let v = prompt::verify_sample(&builder, t, &heads, STARTUP_CHECK_PROMPTS);
        note(format!(
                "tokenizer {} loaded in {:.0} ms, {} prompt words in {:.0} ms; start-up check: {}/{} sample prompts (first {STARTUP_CHECK_TOKENS} tokens) re-tokenize exactly",
                cfg.tokenizer.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
                startup.tokenizer_load_ms,
                builder.vocab().len(),
                startup.vocab_ms,
                v.exact,
                v.checked
            ),
        );
        if let Some(f) = &v.first_failure {
            note(format!("WARNING: prompt check failed: {f}"));
        }
        v
    });
    startup.prompt_check_ms = ms_since(t_phase);

    // ---- model name and chat overhead ----
    let t_phase = Instant::now();
    let model = match (&cfg.model_name, cfg.dry_run, ep.kind.is_openai()) {
        (Some(m), _, _) => m.clone(),
        (None, true, _) | (None, _, false) => "default".to_string(),
        (None, false, true) => rt.block_on(fetch_model(&client, &ep))?,
    };
    let params = BodyParams {
        model: model.clone(),
        stream: ep.stream,
        exact_output: cfg.exact_output,
        extra: None,
    };
    let overhead = determine_overhead(
        &cfg,
        &rt,
        &client,
        &ep,
        &params,
        &builder,
        tokenizer.as_ref(),
    )?;
    if let Some((n, how)) = &overhead {
        note(format!(
            "prompt overhead: {n} tokens ({how}); content is shortened by it"
        ));
    }
    let overhead_n = overhead.as_ref().map(|o| o.0).unwrap_or(0);
    drop(tokenizer);
    startup.calibration_ms = ms_since(t_phase);

    // ---- producers ----
    let ncores = core_affinity::get_core_ids().map(|c| c.len()).unwrap_or(1);
    // Producers keep off the dispatcher's (last) core while there are enough other cores;
    // with more producers than that they spread over all cores instead of sharing one.
    let producer_cores: Vec<usize> = if ncores >= 2 && cfg.producers < ncores {
        (0..ncores - 1).collect()
    } else if ncores >= 2 {
        (0..ncores).collect()
    } else {
        vec![0]
    };
    let sessions = Arc::new(trace.sessions.clone());
    let build = make_build_fn(
        builder.clone(),
        ep.kind,
        params,
        overhead_n,
        cfg.token_ids,
        ChatRows {
            chats: Arc::new(trace.chats.clone()),
            sessions: cfg.sessions.session_user.then(|| sessions.clone()),
        },
    );
    let gate = (cfg.sessions.timing == Timing::Closed && sessions.any())
        .then(|| Arc::new(SessionGate::new(&sessions, requests.len())));
    let producers = Producers::spawn(
        requests.clone(),
        &ProducerConfig {
            threads: cfg.producers,
            capacity: cfg.channel_capacity,
            pin: cfg.pin && ncores >= 2,
            cores: producer_cores,
            budget_bytes: cfg.lookahead_bytes,
            horizon: cfg.lookahead,
            scale_factor: cfg.scale_factor,
            nice: crate::schedule::priority::PRODUCER_NICE,
        },
        build,
    )?;
    note(producer_placement(
        cfg.producers,
        ncores,
        &producers.stats(),
    ));

    // ---- records and summary ----
    let report_cfg = ReportConfig {
        percentiles: cfg.percentiles.clone(),
        slo: cfg.slo,
    };
    let acc = Arc::new(Mutex::new(Some(Accumulator::new(&report_cfg))));
    let acc_sink = acc.clone();
    let progress = Arc::new(report::Progress::new(requests.len() as u64, !cfg.quiet));
    let progress_sink = progress.clone();
    let (writer, tx) =
        RecordWriter::spawn(Some(&cfg.output_path), cfg.record_itl, move |rec, itl| {
            progress_sink.on_done(rec.status);
            if let Some(a) = acc_sink.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                a.add(rec, itl);
            }
        })
        .map_err(|e| format!("cannot write {}: {e}", cfg.output_path.display()))?;
    note(format!("records: {}", cfg.output_path.display()));

    // ---- control ----
    let control = Arc::new(Control {
        stop_flag: AtomicBool::new(false),
        stopping: CancellationToken::new(),
        cancel: CancellationToken::new(),
        cause: Mutex::new(None),
        finished: AtomicU64::new(0),
        failed: AtomicU64::new(0),
    });
    {
        let control = control.clone();
        rt.spawn(async move { watch_signals(control).await });
    }

    // Let producers build the bodies due in the first few milliseconds before the clock
    // starts (the rest is built while those are sent), but never wait long for them.
    let t_phase = Instant::now();
    let early = requests
        .iter()
        .take_while(|r| r.timestamp_ms / cfg.scale_factor < WARMUP_SCHEDULE_MS)
        .count();
    let want = early
        .clamp(1, cfg.channel_capacity.min(WARMUP_MAX_BODIES))
        .min(requests.len());
    // Open the connections the first second of the schedule will need, so the first bursts
    // do not pay for TCP set-up (and the server's accept) at their send time.
    if !cfg.dry_run {
        let first_second = requests
            .iter()
            .take_while(|r| r.timestamp_ms / cfg.scale_factor < 1000.0)
            .count();
        let n = first_second.clamp(1, WARMUP_CONNECTIONS);
        let (mut answered, announced) = rt.block_on(open_connections(&client, &ep, n));
        // A server that announces its idle timeout (`Keep-Alive: timeout=N`) gets a pool that
        // lets connections go before it does (the connections just opened go with the old one).
        if let Some(server) = announced {
            startup.server_keep_alive_s = Some(server.as_secs_f64());
            if let Some(idle) = backend::pool_idle_for(server, client_options.pool_idle_timeout) {
                client = backend::build_client(&backend::ClientOptions {
                    pool_idle_timeout: idle,
                    ..client_options.clone()
                })?;
                note(format!(
                    "the server closes idle connections after {:.1} s (Keep-Alive header): idle connections are kept {:.1} s instead of {:.1} s",
                    server.as_secs_f64(),
                    idle.as_secs_f64(),
                    client_options.pool_idle_timeout.as_secs_f64()
                ));
                answered += rt.block_on(open_connections(&client, &ep, n)).0;
            }
        }
        startup.connections = answered;
    }
    // The clock starts when its start is ready: the first `want` requests themselves (not
    // just any `want` bodies) must be built, whatever the producer count.
    let t_fill = Instant::now();
    let warm_until = t_fill + WARMUP_MAX;
    while !producers.built_first(want) && Instant::now() < warm_until {
        std::thread::sleep(Duration::from_micros(200));
    }
    let prefilled = producers.built_first(want);
    startup.prefill_due = want;
    startup.prefill_built = if prefilled {
        want
    } else {
        (0..want)
            .take_while(|&k| producers.built_first(k + 1))
            .count()
    };
    note(format!(
        "pre-fill: the first {want} request bodies (due in the first {WARMUP_SCHEDULE_MS:.0} ms) {} in {:.1} ms; lookahead: {} bodies, {:.0} MB, {:.1} s",
        if prefilled { "built" } else { "NOT all built" },
        ms_since(t_fill),
        cfg.channel_capacity,
        cfg.lookahead_bytes as f64 / 1e6,
        cfg.lookahead.as_secs_f64(),
    ));
    startup.warmup_ms = ms_since(t_phase);

    // ---- dispatch ----
    let plan = DispatchPlan {
        scale_factor: cfg.scale_factor,
        spin: cfg.spin,
        time_limit: cfg.time_limit,
    };
    let tracker = TaskTracker::new();
    let handle = rt.handle().clone();
    // The dispatcher runs on its own thread: pinned to the last core and, when permitted,
    // under real-time scheduling; the thread ends with dispatching, so nothing after it (drain,
    // reports) runs at real-time priority. The clock starts on that thread once it is set up,
    // so its own start-up never makes the first requests late.
    let pin_dispatcher = ncores >= 2 && cfg.pin;
    // `--start-at`: start-up must be over before the common start.
    let start_deadline = match cfg.start_at {
        Some(at) => match at.instant() {
            Ok(deadline) => {
                note(format!(
                    "start-up done; waiting {:.3} s for the common start {}",
                    (deadline - Instant::now()).as_secs_f64(),
                    at.rfc3339()
                ));
                Some(deadline)
            }
            Err(late) => {
                return Err(format!(
                    "start-up ended {:.3} s after --start-at {} (it took {:.0} ms): nothing was sent; choose a later start",
                    late.as_secs_f64(),
                    at.rfc3339(),
                    ms_since(t_start)
                ))
            }
        },
        None => None,
    };
    let waited_ms =
        start_deadline.map(|d| d.saturating_duration_since(Instant::now()).as_secs_f64() * 1e3);
    let (result, start, started_at, start_offset_ms, task_ctx) = {
        let (requests, producers, plan, control, realtime, tracker, handle, tx) = (
            &requests, &producers, &plan, &control, &realtime, &tracker, &handle, &tx,
        );
        let (progress, cfg, startup) = (&progress, &cfg, &mut startup);
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("dispatcher".into())
                .spawn_scoped(scope, move || {
                    if pin_dispatcher {
                        if let Some(last) =
                            core_affinity::get_core_ids().and_then(|ids| ids.last().copied())
                        {
                            core_affinity::set_for_current(last);
                        }
                    }
                    realtime.enter_dispatcher();
                    // A common start (`--start-at`): wait for it on this thread, precisely.
                    if let Some(at) = start_deadline {
                        schedule::clock::wait_until(at, cfg.spin, &control.stop_flag);
                    }
                    let started_at = report::now_rfc3339();
                    let start = Instant::now();
                    let start_offset_ms = cfg.start_at.map(|a| a.offset_now_ms());
                    producers.start_clock(start);
                    startup.total_ms = ms_between(t_start, start);
                    let ctx = Arc::new(TaskCtx {
                        client,
                        ep,
                        requests: requests.clone(),
                        control: control.clone(),
                        cfg: cfg.clone(),
                        start,
                        progress: progress.clone(),
                        realtime: realtime.clone(),
                        sessions: sessions.clone(),
                        gate: gate.clone(),
                        first_sent_us: AtomicU64::new(u64::MAX),
                    });
                    let result = schedule::dispatch(
                        requests,
                        producers,
                        start,
                        plan,
                        &control.stop_flag,
                        realtime.io_boost(),
                        |prepared, scheduled| {
                            ctx.progress.on_sent();
                            let ctx = ctx.clone();
                            let tx = tx.clone();
                            let parent = ctx
                                .gate
                                .as_ref()
                                .and_then(|_| ctx.sessions.get(prepared.index)?.parent_index);
                            match parent {
                                // Closed loop: the turn waits for its parent in its own task,
                                // so no other request waits behind it.
                                Some(p) => tracker
                                    .spawn_on(closed_turn(ctx, prepared, scheduled, p, tx), handle),
                                None => tracker
                                    .spawn_on(run_one(ctx, prepared, scheduled, None, tx), handle),
                            };
                        },
                    );
                    (result, start, started_at, start_offset_ms, ctx)
                })
                .map_err(|e| format!("cannot start the dispatcher thread: {e}"))?
                .join()
                .map_err(|_| "the dispatcher thread panicked".to_string())
        })?
    };
    let realtime_report = realtime.report();
    let mut producer_stats = producers.stats();
    if let Some(last) = result.last_send {
        let s = last.duration_since(start).as_secs_f64();
        if s > 0.0 {
            producer_stats.bodies_per_s = result.dispatched as f64 / s;
        }
    }
    drop(producers);
    drop(tx);

    // ---- drain ----
    let grace = cfg.grace;
    let stopped_early = result.reason != StopReason::Completed;
    if stopped_early && result.reason == StopReason::TimeLimit {
        note(format!(
            "time limit reached: stopped sending; in-flight requests get {:.1} s",
            grace.as_secs_f64()
        ));
    }
    {
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
    let end_wall = start.elapsed();
    let wstats = writer
        .finish()
        .map_err(|e| format!("writing {} failed: {e}", cfg.output_path.display()))?;
    progress.finish();
    drop(sim);

    // ---- summary ----
    let never_sent = requests.len() - result.dispatched;
    let cause = control.cause();
    let stop_reason = match (cause, result.reason) {
        (Some(Cause::Interrupted), _) => "interrupted",
        (Some(Cause::EarlyStop), _) => "early_stop",
        (None, StopReason::TimeLimit) => "time_limit",
        (None, StopReason::ProducerFailed) => "producer_failed",
        _ => "completed",
    };
    let info = RunInfo {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at: Some(started_at),
        trace_path: Some(trace_name),
        format: Some(trace.format),
        block_size: Some(trace.block_size),
        trace_stats: Some(trace.stats.clone()),
        seed: Some(cfg.seed),
        scale_factor: Some(cfg.scale_factor),
        endpoint: Some(match &cfg.target {
            Target::Remote(e) => crate::backend::sanitize_url(e),
            Target::BuiltinSimulator => "built-in simulator (llm-sim)".to_string(),
        }),
        api: Some(api_name),
        model: Some(model),
        stream: Some(cfg.stream),
        num_producer: Some(cfg.producers),
        threads: Some(cfg.threads),
        chat_overhead: overhead.as_ref().map(|o| o.0),
        prompt_verification: verification.as_ref().map(|v| report::PromptVerification {
            checked: v.checked,
            exact: v.exact,
        }),
        ideal_cache_hit_ratio: ideal_ratio,
        scheduled: result.dispatched,
        never_sent,
        never_sent_reason: (never_sent > 0).then(|| stop_reason.to_string()),
        dry_run: cfg.dry_run,
        planned: Some(requests.len()),
        stop_reason: Some(stop_reason.to_string()),
        wall_time_s: Some(end_wall.as_secs_f64()),
        records_path: Some(cfg.output_path.display().to_string()),
        max_output_tokens: cfg.max_output_tokens,
        producer: Some(producer_stats),
        dispatch: Some(result.stats),
        startup: Some(startup),
        start_at: cfg.start_at.map(|at| {
            let offset = start_offset_ms.unwrap_or(0.0);
            let first = task_ctx.first_sent_us.load(Ordering::Relaxed);
            schedule::StartAtReport {
                at: at.rfc3339(),
                clock_start_offset_ms: (offset * 1e3).round() / 1e3,
                first_send_ms: (first != u64::MAX)
                    .then(|| ((first as f64 / 1e3 + offset) * 1e3).round() / 1e3),
                waited_ms: waited_ms.unwrap_or(0.0).round(),
                clock: schedule::start::clock_state(),
            }
        }),
        realtime: Some(realtime_report.clone()),
    };
    let acc = acc
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or("summary accumulator missing")?;
    let summary = acc.finish(&info);
    if wstats.written != result.dispatched {
        return Err(format!(
            "internal error: {} requests dispatched but {} records written",
            result.dispatched, wstats.written
        ));
    }
    report::write_summary_json(&cfg.summary_path, &summary).map_err(|e| format!("{e:#}"))?;
    report::print_stdout(&format!("{}\n", report::render_console(&summary)))?;
    note(format!(
            "producers: {} thread(s) built {} bodies ({:.1} M prompt tokens, {:.0} MB) at {:.1} M tokens/s and {:.0} bodies/s per thread while building; dispatched {:.0} bodies/s; {} not ready in time; dispatcher late > 1 ms: {}, max {:.3} ms; bodies waiting peaked at {:.1} MB of a {:.0} MB budget",
            producer_stats.threads,
            producer_stats.bodies,
            producer_stats.prompt_tokens as f64 / 1e6,
            producer_stats.body_bytes as f64 / 1e6,
            producer_stats.tokens_per_s_per_thread / 1e6,
            producer_stats.bodies_per_s_per_thread,
            producer_stats.bodies_per_s,
            result.stats.not_ready,
            result.stats.late_over_1ms,
            result.stats.max_late_ms,
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
    note(format!("summary: {}", cfg.summary_path.display()));
    if let Some(dir) = &cfg.result_dir {
        let files = report::write_result_dir(dir, &summary, &cfg.output_path)
            .map_err(|e| format!("{e:#}"))?;
        note(format!(
            "result files: {} files in {}",
            files.len(),
            dir.display()
        ));
    }
    let exit_code = match cause {
        Some(Cause::Interrupted) => 130,
        Some(Cause::EarlyStop) => 3,
        None => 0,
    };
    Ok(RunOutcome { summary, exit_code })
}

/// Before the clock starts, producers build the bodies scheduled in this first stretch…
const WARMUP_SCHEDULE_MS: f64 = 20.0;
/// …but at most this many…
const WARMUP_MAX_BODIES: usize = 256;
/// …for at most this long.
const WARMUP_MAX: Duration = Duration::from_secs(2);
/// At most this many connections are opened before the start, within this time.
const WARMUP_CONNECTIONS: usize = 64;
const WARMUP_CONNECT_MAX: Duration = Duration::from_secs(2);
/// Prompts re-tokenized at start-up, and the tokens checked of each (their head).
const STARTUP_CHECK_PROMPTS: usize = 8;
const STARTUP_CHECK_TOKENS: u32 = 1024;

/// Milliseconds since `t`.
fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Context shared by all request tasks.
struct TaskCtx {
    client: backend::HttpClient,
    ep: Endpoint,
    requests: Arc<Vec<TraceRequest>>,
    control: Arc<Control>,
    cfg: ReplayConfig,
    start: Instant,
    progress: Arc<report::Progress>,
    realtime: Realtime,
    sessions: Arc<Sessions>,
    /// `--timing closed` with sessions: completion signals for the waiting turns.
    gate: Option<Arc<SessionGate>>,
    /// Earliest send of the run, µs after `start` (u64::MAX until the first send).
    first_sent_us: AtomicU64,
}

/// Milliseconds from `a` to `b` (negative if `b` is earlier), rounded to 1 µs: records carry
/// microsecond resolution, which keeps them short and free of float noise.
fn ms_between(a: Instant, b: Instant) -> f64 {
    let us = if b >= a {
        b.duration_since(a).as_micros() as f64
    } else {
        -(a.duration_since(b).as_micros() as f64)
    };
    us / 1e3
}

/// A later turn in `--timing closed`: waits (in its own task) for its parent to end, then
/// until `max(trace time, parent's completion + think time)`, and sends with drift measured from
/// that release. A stop, the time limit, or (with `--skip-after-failed-parent`) a failed parent
/// end it as one unsent record instead.
async fn closed_turn(
    ctx: Arc<TaskCtx>,
    prepared: Prepared,
    trace_time: Instant,
    parent: usize,
    tx: crossbeam_channel::Sender<Finished>,
) {
    let index = prepared.index;
    let Some(gate) = ctx.gate.clone() else {
        return run_one(ctx, prepared, trace_time, None, tx).await;
    };
    let limit = ctx.cfg.time_limit.map(|l| ctx.start + l);
    let after_limit = async {
        match limit {
            Some(l) => tokio::time::sleep_until(l.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(after_limit);
    let cut = |why: &str| {
        format!("session cut: {why} while the turn waited for its parent (request {parent})")
    };
    let done = tokio::select! {
        biased;
        _ = ctx.control.stopping.cancelled() => Err(cut("the run stopped")),
        _ = &mut after_limit => Err(cut("--time-in-secs reached")),
        d = gate.wait(parent) => Ok(d),
    };
    let done = match done {
        Ok(d) => d,
        Err(why) => return unsent(&ctx, index, trace_time, Status::Cancelled, why, &tx),
    };
    if let Some(d) = done {
        if !d.ok && ctx.cfg.sessions.skip_after_failed_parent {
            let why = format!(
                "skipped: parent request {parent} did not succeed (--skip-after-failed-parent)"
            );
            return unsent(&ctx, index, trace_time, Status::Cancelled, why, &tx);
        }
    }
    let think = ctx
        .sessions
        .get(index)
        .map(|t| ctx.cfg.sessions.think.before(t, ctx.cfg.scale_factor))
        .unwrap_or_default();
    let release = match done {
        Some(d) => trace_time.max(d.at + think),
        None => trace_time,
    };
    if limit.is_some_and(|l| release >= l) {
        let why = cut("--time-in-secs reached");
        return unsent(&ctx, index, trace_time, Status::Cancelled, why, &tx);
    }
    tokio::select! {
        biased;
        _ = ctx.control.stopping.cancelled() => {
            return unsent(&ctx, index, trace_time, Status::Cancelled, cut("the run stopped"), &tx);
        }
        _ = sleep_until_precise(release) => {}
    }
    let wait_ms = ms_between(trace_time, release);
    run_one(ctx, prepared, release, Some(wait_ms), tx).await
}

/// The request with trace index `index`. Requests are in index order; without `--shard` the
/// index is the position, with it a binary search finds the position.
fn request_at(ctx: &TaskCtx, index: usize) -> &TraceRequest {
    let rs = &ctx.requests;
    match rs.get(index) {
        Some(r) if r.index == index => r,
        _ => {
            let pos = rs
                .binary_search_by_key(&index, |r| r.index)
                .expect("a dispatched request is in this run's request list");
            &rs[pos]
        }
    }
}

/// The session fields of request `index`'s record.
fn session_fields(ctx: &TaskCtx, index: usize) -> (Option<u32>, Option<String>, Option<usize>) {
    match ctx.sessions.get(index) {
        Some(t) => (Some(t.turn), Some(t.id.to_string()), t.parent_index),
        None => (None, None, None),
    }
}

/// One record for a request that was scheduled but never sent (a closed-loop turn cut or
/// skipped); its children are released as after a failure.
fn unsent(
    ctx: &TaskCtx,
    index: usize,
    scheduled: Instant,
    status: Status,
    why: String,
    tx: &crossbeam_channel::Sender<Finished>,
) {
    let req = request_at(ctx, index);
    let session = req.session.as_ref();
    let (turn, session_id, parent_index) = session_fields(ctx, index);
    let record = Record {
        index: req.index,
        line: req.line,
        timestamp: req.timestamp_ms,
        scheduled_ms: ms_between(ctx.start, scheduled),
        sent_ms: None,
        drift_ms: None,
        status,
        http_status: None,
        error: Some(why),
        ttft_ms: None,
        ttfc_ms: None,
        e2e_ms: None,
        done_ms: None,
        tpot_ms: None,
        itl_ms: None,
        input_length: req.input_length,
        prompt_tokens: None,
        cached_tokens: None,
        output_length: req.output_length,
        output_tokens: None,
        output_tokens_source: None,
        chunks: 0,
        chat_id: session.map(|s| s.chat_id),
        parent_chat_id: session.map(|s| s.parent_chat_id),
        turn,
        session_id,
        parent_index,
        session_wait_ms: None,
        retries: 0,
    };
    ctx.control.finished.fetch_add(1, Ordering::Relaxed);
    if let Some(g) = &ctx.gate {
        g.complete(
            index,
            Done {
                at: Instant::now(),
                ok: false,
            },
        );
    }
    let _ = tx.send(Finished {
        record,
        itl_ms: Vec::new(),
    });
}

async fn run_one(
    ctx: Arc<TaskCtx>,
    prepared: Prepared,
    scheduled: Instant,
    session_wait_ms: Option<f64>,
    tx: crossbeam_channel::Sender<Finished>,
) {
    let req = request_at(&ctx, prepared.index);
    // `--session-header`: the session id, only when asked for (no allocation otherwise).
    let session_key = ctx
        .ep
        .session_header
        .as_ref()
        .and_then(|_| ctx.sessions.get(req.index))
        .map(|t| t.id.to_string());
    let sent = Instant::now();
    ctx.realtime.task_started();
    let outcome = if ctx.cfg.dry_run {
        backend::Outcome {
            status: Status::DryRun,
            http_status: None,
            error: None,
            state: Default::default(),
            retries: 0,
        }
    } else {
        let timeout = ctx.cfg.timeout.for_output(req.output_length);
        let exec = backend::execute(
            &ctx.client,
            &ctx.ep,
            prepared.body,
            Some(timeout),
            &ctx.control.cancel,
            ctx.cfg.allow_missing_usage,
            session_key.as_deref(),
        );
        // A bug while reading a response must not lose the request's record (the panic
        // message itself still goes to stderr).
        match std::panic::AssertUnwindSafe(exec).catch_unwind().await {
            Ok(o) => o,
            Err(_) => backend::Outcome {
                status: Status::ProtocolError,
                http_status: None,
                error: Some(
                    "internal error while handling the response (a request-sim bug)".to_string(),
                ),
                state: Default::default(),
                retries: 0,
            },
        }
    };
    let st = &outcome.state;
    let rel = |t: Option<Instant>| t.map(|t| ms_between(sent, t));
    let ttft = rel(st.first_token);
    let e2e = rel(st.last_token);
    let usage = st.usage.unwrap_or_default();
    let (output_tokens, source) = match (usage.completion_tokens, st.chunks) {
        (Some(n), _) => (Some(n), Some(TokenSource::Usage)),
        (None, 0) => (None, None),
        (None, _) => (Some(st.content_chunks), Some(TokenSource::Chunks)),
    };
    let tpot = match (ttft, e2e, output_tokens) {
        (Some(a), Some(b), Some(n)) if n > 1 => {
            Some(((b - a) / (n as f64 - 1.0) * 1e3).round() / 1e3)
        }
        _ => None,
    };
    if let Some(g) = &ctx.gate {
        g.complete(
            req.index,
            Done {
                at: Instant::now(),
                ok: matches!(outcome.status, Status::Ok | Status::DryRun),
            },
        );
    }
    let sched_ms = ms_between(ctx.start, scheduled);
    let sent_ms = ms_between(ctx.start, sent);
    ctx.first_sent_us
        .fetch_min((sent_ms.max(0.0) * 1e3) as u64, Ordering::Relaxed);
    let session = req.session.as_ref();
    let (turn, session_id, parent_index) = session_fields(&ctx, req.index);
    let record = Record {
        index: req.index,
        line: req.line,
        timestamp: req.timestamp_ms,
        scheduled_ms: sched_ms,
        sent_ms: Some(sent_ms),
        drift_ms: Some(((sent_ms - sched_ms) * 1e3).round() / 1e3),
        status: outcome.status,
        http_status: outcome.http_status,
        error: outcome.error,
        ttft_ms: ttft,
        ttfc_ms: rel(st.first_content),
        e2e_ms: e2e,
        done_ms: rel(st.done),
        tpot_ms: tpot,
        itl_ms: None,
        input_length: req.input_length,
        prompt_tokens: usage.prompt_tokens,
        cached_tokens: usage.cached_tokens,
        output_length: req.output_length,
        output_tokens,
        output_tokens_source: source,
        chunks: st.chunks,
        chat_id: session.map(|s| s.chat_id),
        parent_chat_id: session.map(|s| s.parent_chat_id),
        turn,
        session_id,
        parent_index,
        session_wait_ms,
        retries: outcome.retries,
    };
    let failed = !matches!(
        record.status,
        Status::Ok | Status::DryRun | Status::Cancelled
    );
    let finished = ctx.control.finished.fetch_add(1, Ordering::Relaxed) + 1;
    let nfailed = if failed {
        ctx.control.failed.fetch_add(1, Ordering::Relaxed) + 1
    } else {
        ctx.control.failed.load(Ordering::Relaxed)
    };
    if failed {
        if let Some(es) = ctx.cfg.early_stop {
            if es.triggered(nfailed, finished) && ctx.control.request_stop(Cause::EarlyStop) {
                eprintln!(
                    "request-sim: early stop: {nfailed} of {finished} finished requests failed (threshold {:?}); \
                     in-flight requests get {:.1} s",
                    es,
                    ctx.cfg.grace.as_secs_f64()
                );
            }
        }
    }
    let itl = std::mem::take(&mut { outcome.state }.itl_ms);
    // The writer outlives every task (it exits when all senders are gone).
    let _ = tx.send(Finished {
        record,
        itl_ms: itl,
    });
}

async fn watch_signals(control: Arc<Control>) {
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

/// Room in a body buffer for everything but the prompt and the model name.
const BODY_SLACK: usize = 512;

/// The chat requests of a `messages` trace, and the sessions when their ids go into `user`.
struct ChatRows {
    chats: Arc<Vec<Option<Arc<ChatPayload>>>>,
    sessions: Option<Arc<Sessions>>,
}

fn make_build_fn(
    builder: Arc<PromptBuilder>,
    kind: ApiKind,
    params: BodyParams,
    overhead: u32,
    token_ids: bool,
    rows: ChatRows,
) -> Arc<BuildFn> {
    Arc::new(move |req: &TraceRequest, s: &mut Scratch| {
        let user = rows.sessions.as_ref().and_then(|ss| ss.key(req.index));
        if let Some(chat) = rows.chats.get(req.index).and_then(|c| c.as_deref()) {
            // A messages row is sent as given; its prompt length is the server's to count.
            let mut body = Vec::new();
            backend::encode_chat_row_body(&params, chat, user, &mut body);
            return Prepared {
                index: req.index,
                body: Bytes::from(body),
                intended_prompt_tokens: 0,
            };
        }
        let content = req.input_length.saturating_sub(overhead) as usize;
        let payload = if token_ids {
            s.ids.clear();
            builder.write_token_ids(req, content, &mut s.ids);
            PromptPayload::TokenIds(&s.ids)
        } else {
            s.text.clear();
            builder.write_text(req, content, &mut s.text);
            PromptPayload::Text(&s.text)
        };
        // Encode straight into the body's own buffer (sized for the whole body, so it never
        // grows) and hand it over without a copy.
        let hint = match payload {
            PromptPayload::Text(t) => t.len(),
            PromptPayload::TokenIds(ids) => ids.len() * 7,
        } + params.model.len()
            + BODY_SLACK;
        let mut body = Vec::with_capacity(hint);
        // Servers reject max_tokens 0: rows with output_length 0 ask for one token.
        backend::encode_body(kind, &params, payload, req.output_length.max(1), &mut body);
        if let (Some(u), true) = (user, kind.is_openai()) {
            // The session id as OpenAI `user`: appended inside the body's top-level object.
            if body.last() == Some(&b'}') {
                body.pop();
                body.extend_from_slice(b",\"user\":");
                let _ = serde_json::to_writer(&mut body, u);
                body.push(b'}');
            }
        }
        Prepared {
            index: req.index,
            body: Bytes::from(body),
            intended_prompt_tokens: content as u32 + overhead,
        }
    })
}

/// GET /v1/models and take the first model id.
/// Open up to `n` keep-alive connections to the endpoint's server with `n` concurrent cheap
/// requests (`GET /v1/models` for OpenAI-style servers, `GET /health` for TGI; any answer, even
/// an error status, leaves the connection open). Returns how many answered; a
/// failure only means the first requests open their own connections.
fn warmup_url(ep: &Endpoint) -> String {
    if ep.kind.is_openai() {
        format!("{}/v1/models", ep.base_url())
    } else {
        format!("{}/health", ep.base_url())
    }
}

/// Open `n` keep-alive connections with warm-up `GET`s; returns how many were answered and
/// the idle timeout the server announced (`Keep-Alive: timeout=`), if it did.
async fn open_connections(
    client: &reqwest::Client,
    ep: &Endpoint,
    n: usize,
) -> (usize, Option<Duration>) {
    let url = warmup_url(ep);
    // One task each, so they spread over the I/O threads and each thread has run the request
    // path once before the first real send.
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let req = ep.authorize(client.get(&url));
        set.spawn(async move {
            let resp = req.send().await.ok()?;
            let keep_alive = backend::keep_alive_timeout(resp.headers());
            resp.bytes().await.ok()?;
            Some(keep_alive)
        });
    }
    let mut ok = 0;
    let mut announced = None;
    let answered = async {
        while let Some(r) = set.join_next().await {
            if let Ok(Some(k)) = r {
                ok += 1;
                announced = announced.or(k);
            }
        }
    };
    // On timeout the set is dropped, which aborts what is left.
    let _ = tokio::time::timeout(WARMUP_CONNECT_MAX, answered).await;
    (ok, announced)
}

async fn fetch_model(client: &reqwest::Client, ep: &Endpoint) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Models {
        data: Vec<Model>,
    }
    #[derive(serde::Deserialize)]
    struct Model {
        id: String,
    }
    let url = format!("{}/v1/models", ep.base_url());
    let hint = "pass --model-name";
    let resp = ep
        .authorize(client.get(&url))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot reach {url} to find the model ({hint}): {}",
                e.without_url()
            )
        })?;
    if !resp.status().is_success() {
        return Err(format!("GET {url} answered {} ({hint})", resp.status()));
    }
    let body = resp
        .bytes()
        .await
        .map_err(|e| format!("GET {url}: {} ({hint})", e.without_url()))?;
    let m: Models = serde_json::from_slice(&body)
        .map_err(|e| format!("GET {url}: unexpected answer ({hint}): {e}"))?;
    m.data
        .into_iter()
        .next()
        .map(|m| m.id)
        .ok_or_else(|| format!("GET {url} lists no model ({hint})"))
}

/// Tokens the server adds around the prompt content: flag, chat template, or a calibration
/// request whose `usage.prompt_tokens` is read. `None` when it cannot be known (TGI).
fn determine_overhead(
    cfg: &ReplayConfig,
    rt: &tokio::runtime::Runtime,
    client: &backend::HttpClient,
    ep: &Endpoint,
    params: &BodyParams,
    builder: &PromptBuilder,
    tokenizer: Option<&tokenizers::Tokenizer>,
) -> Result<Option<(u32, String)>, String> {
    if let Some(n) = cfg.chat_overhead {
        return Ok(Some((n, "--chat-overhead".into())));
    }
    if cfg.token_ids {
        return Ok(Some((0, "token-id prompts are used as given".into())));
    }
    if let (true, Some(tok), Some(tc)) = (ep.kind.is_chat(), tokenizer, &cfg.tokenizer_config) {
        let n = prompt::chat_overhead_from_template(tok, tc).map_err(|e| e.to_string())?;
        return Ok(Some((n, format!("chat template of {}", tc.display()))));
    }
    if !ep.kind.is_openai() {
        return Ok(None);
    }
    if cfg.dry_run {
        return Ok(Some((0, "dry run: not calibrated".into())));
    }
    // Calibration: a prompt of K content tokens, one output token, non-streaming.
    const K: usize = 64;
    let probe = TraceRequest {
        index: usize::MAX,
        line: 0,
        timestamp_ms: 0.0,
        input_length: K as u32,
        output_length: 1,
        hash_ids: Vec::new(),
        session: None,
    };
    let mut text = String::new();
    builder.write_text(&probe, K, &mut text);
    let mut body = Vec::new();
    let p = BodyParams {
        stream: false,
        ..params.clone()
    };
    backend::encode_body(ep.kind, &p, PromptPayload::Text(&text), 1, &mut body);
    let mut probe_ep = ep.clone();
    probe_ep.stream = false;
    let out = rt.block_on(backend::execute(
        client,
        &probe_ep,
        Bytes::from(body),
        Some(Duration::from_secs(60)),
        &CancellationToken::new(),
        true,
        None,
    ));
    if out.status != Status::Ok {
        return Err(format!(
            "calibration request to {} failed ({}): {} — check --endpoint/--model-name, or pass --chat-overhead N",
            ep.display_url(),
            out.status.as_str(),
            out.error.unwrap_or_default()
        ));
    }
    match out.state.usage.and_then(|u| u.prompt_tokens) {
        Some(pt) => {
            let n = (pt as i64 - K as i64).max(0) as u32;
            Ok(Some((
                n,
                format!("calibration request: {pt} prompt tokens for {K} content tokens"),
            )))
        }
        None => {
            eprintln!("request-sim: WARNING: the server reported no usage.prompt_tokens; prompt overhead assumed 0");
            Ok(Some((0, "unknown: server reports no usage".into())))
        }
    }
}

/// The start-up line saying where the producers run relative to the sending threads.
fn producer_placement(threads: usize, ncores: usize, st: &ProducerStats) -> String {
    let level = match st.nice {
        Some(n) => format!("at nice {n}, below the dispatcher and I/O threads"),
        None => "at the default nice level (it could not be lowered)".to_string(),
    };
    let place = if st.pinned_cores == 0 {
        format!("unpinned over {ncores} core(s)")
    } else if threads > st.pinned_cores {
        format!(
            "{threads} threads sharing {} core(s) ({:.1} per core)",
            st.pinned_cores,
            threads as f64 / st.pinned_cores as f64
        )
    } else {
        format!("pinned one per core on {} core(s)", st.pinned_cores)
    };
    format!("producers: {threads} thread(s) {level}; {place}")
}
