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

use crate::backend::tokenize::ServerTokenizer;
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

mod build;
mod control;
mod drain;
mod finish;
mod save;
mod startup;
mod task;

use build::{make_build_fn, ChatRows};
use control::{watch_signals, Cause, Control};
use startup::{
    determine_overhead, fetch_model, open_connections, producer_placement, STARTUP_CHECK_PROMPTS,
    STARTUP_CHECK_TOKENS, WARMUP_CONNECTIONS, WARMUP_MAX, WARMUP_MAX_BODIES, WARMUP_SCHEDULE_MS,
};
use task::{closed_turn, ms_between, run_one, TaskCtx};

/// The built-in demo trace (mooncake format, 200 requests over ~19 s, block 512).
pub const DEMO_TRACE: &str = include_str!("../../data/demo_trace.jsonl");

/// How a replay ended.
#[derive(Debug)]
pub struct RunOutcome {
    pub summary: Summary,
    /// 0 completed, 3 early stop, 130 interrupted.
    pub exit_code: i32,
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

/// The trace as this run replays it.
struct TracePhase {
    trace: Trace,
    /// This run's requests (this shard's share, outputs capped), in send order.
    requests: Arc<Vec<TraceRequest>>,
    /// Prefix-cache hit ratio a perfect cache would reach on them.
    ideal_ratio: Option<f64>,
    trace_name: String,
}

/// Load the trace, take this shard's share, cap outputs, and say what will be replayed.
fn trace_phase(cfg: &ReplayConfig) -> Result<TracePhase, String> {
    let trace = load_trace(cfg)?;
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
    Ok(TracePhase {
        trace,
        requests,
        ideal_ratio,
        trace_name,
    })
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
    let TracePhase {
        trace,
        requests,
        ideal_ratio,
        trace_name,
    } = trace_phase(&cfg)?;
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
    let has_messages = trace.chats.iter().flatten().any(|c| !c.is_literal());
    if has_messages && ep.kind != ApiKind::Chat {
        return Err(format!(
            "a messages trace is sent as chat requests: it needs a chat endpoint (…/v1/chat/completions), not {}",
            ep.display_url()
        ));
    }
    let has_token_rows = trace
        .chats
        .iter()
        .flatten()
        .any(|c| c.prompt_token_ids.is_some());
    if (cfg.token_ids || has_token_rows) && ep.kind != ApiKind::Completions {
        return Err(format!(
            "token-id prompts (--token-ids, or a trace with prompt_token_ids rows) need a completions endpoint (…/v1/completions), not {}",
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
    let model = match (&cfg.model_name, cfg.dry_run, ep.kind.is_openai()) {
        (Some(m), _, _) => m.clone(),
        (None, true, _) | (None, _, false) => "default".to_string(),
        (None, false, true) => rt.block_on(fetch_model(&client, &ep))?,
    };
    let model_ms = ms_since(t_phase);

    // Without a local tokenizer, the server's own `/tokenize` (vLLM, SGLang, llama.cpp) is the
    // source of truth when it has one.
    let t_phase = Instant::now();
    let server_tok = (tokenizer.is_none()
        && matches!(cfg.target, Target::Remote(_))
        && !cfg.dry_run
        && !cfg.no_server_tokenize
        && ep.kind.is_openai())
    .then(|| ServerTokenizer::probe(rt.handle().clone(), &client, &ep, Some(model.clone())))
    .flatten();
    let (vocab, token_source) = match (&tokenizer, &server_tok) {
        (Some(t), _) => (
            Vocab::from_tokenizer(t).map_err(|e| e.to_string())?,
            PromptTruth::Local,
        ),
        (None, Some(s)) => match s.candidates().and_then(|c| Vocab::from_candidates(s, c)) {
            Ok(v) => (v, PromptTruth::Server),
            Err(e) => {
                note(format!(
                    "WARNING: no prompt words from {} ({e}): prompts use the built-in word list, checked by the server",
                    s.describe()
                ));
                (Vocab::builtin(), PromptTruth::Server)
            }
        },
        (None, None) => {
            let against_sim = matches!(cfg.target, Target::BuiltinSimulator);
            if !against_sim {
                note("WARNING: no --tokenizer and the server has no POST /tokenize: prompts use the built-in \
                     word list, so prompt token counts are APPROXIMATE for a real model (exact only against \
                     the built-in simulator). Pass the model's tokenizer.json for exact counts.",
                );
            }
            (Vocab::builtin(), PromptTruth::None)
        }
    };
    startup.vocab_ms = ms_since(t_phase);
    let encoder: Option<&dyn prompt::Encoder> = match (&tokenizer, &server_tok) {
        (Some(t), _) => Some(t),
        (None, Some(s)) => Some(s),
        (None, None) => None,
    };
    // `--prompt-corpus`: real text, tokenized and checked by the same source of truth.
    let corpus = prompt::load_corpus(cfg.prompt_corpus.as_ref(), encoder, &vocab)
        .map_err(|e| e.to_string())?;
    let builder = Arc::new(PromptBuilder::with_corpus(
        Arc::new(vocab),
        corpus,
        cfg.seed,
        trace.block_size,
    ));
    let t_phase = Instant::now();
    let source_name = match (&cfg.tokenizer, &server_tok) {
        (Some(p), _) => format!("local tokenizer {}", p.display()),
        (None, Some(s)) => s.describe(),
        (None, None) => "none (built-in word list)".to_string(),
    };
    let verification = encoder.map(|enc| {
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
        let v = prompt::verify_sample(&builder, enc, &heads, STARTUP_CHECK_PROMPTS);
        let loaded = match token_source {
            PromptTruth::Local => format!("loaded in {:.0} ms, ", startup.tokenizer_load_ms),
            _ => String::new(),
        };
        note(format!(
                "prompt tokens: {source_name} {loaded}{} prompt words ({}) in {:.0} ms; start-up check: {}/{} sample prompts (first {STARTUP_CHECK_TOKENS} tokens) re-tokenize exactly",
                builder.vocab().len(),
                builder.vocab().method(),
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

    // ---- chat overhead ----
    let t_phase = Instant::now();
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
        (tokenizer.as_ref(), server_tok.as_ref()),
    )?;
    if let Some((n, how, _)) = &overhead {
        note(format!(
            "prompt overhead: {n} tokens ({how}); content is shortened by it"
        ));
    }
    let overhead_n = overhead.as_ref().map(|o| o.0).unwrap_or(0);
    let corpus_report = prompt::CorpusReport::new(&builder, &requests, overhead_n);
    if let Some(r) = &corpus_report {
        note(r.line());
    }
    // Put before every content (a chat template that trims the content; counted in overhead_n).
    let lead = overhead.as_ref().map(|o| o.2).unwrap_or("");
    if let Some(path) = &cfg.save_prompts {
        if !ep.kind.is_openai() {
            return Err(format!(
                "--save-prompts writes a messages (chat) or text_input / prompt_token_ids (completions) trace: it needs an OpenAI endpoint, not {}",
                ep.display_url(),
            ));
        }
        let t = Instant::now();
        let n = save::save_prompts(
            path,
            &requests,
            &builder,
            (overhead_n, lead),
            save::SaveAs::of(ep.kind, cfg.token_ids),
            &trace.chats,
            &trace.sessions,
        )?;
        note(format!(
            "saved the prompts of {n} requests to {} in {:.0} ms (a messages trace: replay it with --dataset-path)",
            path.display(),
            ms_since(t)
        ));
    }
    drop(tokenizer);
    drop(server_tok);
    startup.calibration_ms = ms_since(t_phase) + model_ms;

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
        (overhead_n, lead),
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

    // ---- server metrics ----
    // The scraper's first round (the baseline of every counter) comes after start-up's own
    // requests (model lookup, calibration), so the run's deltas count only the replay.
    let scraper = match (&cfg.server_metrics, cfg.dry_run) {
        (Some(sm), false) => {
            // Behind a router the listed instances are the servers; the router's origin (which
            // may forward /metrics to one of them) would count that instance twice.
            let origin = sm
                .urls
                .is_empty()
                .then(|| ep.url.join("/metrics").ok())
                .flatten();
            let out = match &cfg.result_dir {
                Some(dir) => dir.join("server_metrics.jsonl"),
                None => {
                    let mut p = cfg.output_path.as_os_str().to_owned();
                    p.push(".server_metrics.jsonl");
                    p.into()
                }
            };
            let started = crate::observe::Scraper::start(crate::observe::ScrapeConfig {
                urls: sm.urls.clone(),
                origin,
                origin_api_key: cfg.api_key.clone(),
                interval: sm.interval,
                out: Some(out),
                insecure: cfg.insecure,
            })?;
            for n in &started.notes {
                note(n);
            }
            started.scraper
        }
        _ => None,
    };

    // ---- records and summary ----
    let report_cfg = ReportConfig {
        percentiles: cfg.percentiles.clone(),
        slo: cfg.slo,
    };
    let acc = Arc::new(Mutex::new(Some(Accumulator::new(&report_cfg))));
    let acc_sink = acc.clone();
    let progress = Arc::new(report::Progress::new(requests.len() as u64, !cfg.quiet));
    let progress_sink = progress.clone();
    // Each record gets the server's state at its send, on the writer's thread.
    let annotate = scraper.as_ref().map(|s| {
        let (series, clock) = (s.series(), s.clock());
        Box::new(move |r: &mut Record| {
            if let (Some(sent), Some(start)) = (r.sent_ms, clock.get()) {
                let at = *start + Duration::from_secs_f64(sent.max(0.0) / 1e3);
                r.server = series.cluster_at(at).map(|st| crate::record::ServerAtSend {
                    waiting: st.waiting,
                    running: st.running,
                    kv_usage: st.kv_usage.map(|k| (k * 1e6).round() / 1e6),
                    dt_ms: (st.dt_ms * 1e3).round() / 1e3,
                    instances: st.instances,
                });
            }
        }) as crate::record::Annotate
    });
    let (writer, tx) = RecordWriter::spawn_annotated(
        Some(&cfg.output_path),
        cfg.record_itl,
        annotate,
        move |rec, itl| {
            progress_sink.on_done(rec.status);
            if let Some(a) = acc_sink.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                a.add(rec, itl);
            }
        },
    )
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
        let (progress, cfg, startup, scraper) = (&progress, &cfg, &mut startup, &scraper);
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
                    if let Some(s) = scraper {
                        s.set_clock_start(start);
                    }
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
    drain::wait_in_flight(&rt, tracker, &control, stopped_early, grace);
    let end_wall = start.elapsed();
    // The scraper's last round comes after the last request, before the simulator stops.
    let scraped = scraper.map(|s| s.finish());
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
        prompt_token_source: Some(source_name),
        prompt_verification: verification.as_ref().map(|v| report::PromptVerification {
            checked: v.checked,
            exact: v.exact,
        }),
        prompt_corpus: corpus_report,
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
    let mut summary = acc.finish(&info);
    match scraped {
        Some(Ok(r)) => {
            let l = &summary.latency;
            let client = crate::observe::ClientSide {
                cached_tokens_ratio: summary.cache.hit_ratio,
                ideal_hit_ratio: summary.cache.ideal_hit_ratio,
                ttft_mean_ms: (l.ttft.count > 0).then_some(l.ttft.mean),
                ttft_p50_ms: (l.ttft.count > 0).then_some(l.ttft.median),
                ttft_p99_ms: l.ttft.percentile(99.0).filter(|_| l.ttft.count > 0),
                e2e_mean_ms: (l.e2el.count > 0).then_some(l.e2el.mean),
                e2e_p50_ms: (l.e2el.count > 0).then_some(l.e2el.median),
                e2e_p99_ms: l.e2el.percentile(99.0).filter(|_| l.e2el.count > 0),
                completed: summary.completed,
            };
            let srv = crate::observe::summary::summarize(&r, client);
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
            if let Some(p) = &r.path {
                note(format!(
                    "server metrics: {} samples in {}",
                    r.lines,
                    p.display()
                ));
            }
            summary.server = Some(srv);
        }
        Some(Err(e)) => summary
            .warnings
            .push(format!("server metrics: the scraper failed: {e}")),
        None => {}
    }
    // ---- validity ----
    if summary.drift.count > 0 && summary.drift.p99_ms > cfg.max_drift_ms {
        summary.invalid.push(format!(
            "send drift p99 {:.3} ms is above --max-drift-ms {}: the client fell behind the schedule, so the server did not get the trace's timing (see docs/performance.md)",
            summary.drift.p99_ms, cfg.max_drift_ms
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
    if wstats.written != result.dispatched {
        return Err(format!(
            "internal error: {} requests dispatched but {} records written",
            result.dispatched, wstats.written
        ));
    }
    report::write_summary_json(&cfg.summary_path, &summary).map_err(|e| format!("{e:#}"))?;
    report::print_stdout(&format!("{}\n", report::render_console(&summary)))?;
    finish::end_notes(&summary, &producer_stats, &result.stats, &startup);
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
    for w in &summary.invalid {
        note(format!("RUN INVALID: {w}"));
    }
    let exit_code = match cause {
        Some(Cause::Interrupted) => 130,
        Some(Cause::EarlyStop) => 3,
        None if cfg.strict && !summary.invalid.is_empty() => {
            note("--strict: exit status 4 (run invalid)");
            4
        }
        None => 0,
    };
    Ok(RunOutcome { summary, exit_code })
}

/// What prompt token counts were checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PromptTruth {
    /// `--tokenizer`.
    Local,
    /// The server's `POST /tokenize`.
    Server,
    /// Nothing: the built-in word list.
    None,
}

/// Milliseconds since `t`.
fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
