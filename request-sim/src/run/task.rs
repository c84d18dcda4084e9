//! One request's life after the dispatcher hands it over: the closed-loop wait for its
//! parent, the exchange with the server, and its one record.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;

use super::control::Control;
use crate::backend::{self, Endpoint};
use crate::config::{EarlyStop, ReplayConfig, TimeoutRule};
use crate::record::{Finished, Record, SentBlocks, Status, TokenSource};
use crate::report;
use crate::schedule::sessions::{Done, LiveAnswer, SessionGate, ThinkTime};
use crate::schedule::{Prepared, Realtime, StopReason};
use crate::trace::{Planned, TraceRequest};

/// Context shared by all request tasks.
pub(super) struct TaskCtx {
    pub(super) client: backend::HttpClient,
    pub(super) ep: Endpoint,
    pub(super) control: Arc<Control>,
    pub(super) settings: TaskSettings,
    pub(super) start: Instant,
    pub(super) progress: Arc<report::Progress>,
    pub(super) realtime: Realtime,
    /// `--timing closed` with sessions: completion signals for the waiting turns.
    pub(super) gate: Option<Arc<SessionGate>>,
    /// With the gate: the clock that sends each waiting turn at its release instant.
    pub(super) releases: Option<crate::schedule::Releases>,
    /// Connections in use, to open more before bursts (`backend::warm`).
    pub(super) warmth: Option<Arc<backend::warm::Warmth>>,
    /// Earliest send of the run, µs after `start` (u64::MAX until the first send).
    pub(super) first_sent_us: AtomicU64,
    /// Requests sent so far: the next one's send sequence number ([`SentBlocks::seq`]).
    pub(super) send_seq: AtomicU64,
    /// `--metrics-port`: the live metrics (sent and scheduled counts).
    pub(super) live: Option<Arc<crate::observe::export::LiveMetrics>>,
    /// `--model-map`: the served model each request names, for its record.
    pub(super) models: Option<Arc<backend::SentModels>>,
}

/// The settings a request task reads, copied from the run's [`ReplayConfig`] once.
#[derive(Debug, Clone, Copy)]
pub(super) struct TaskSettings {
    /// `--time-in-secs`: a closed-loop turn due after it is not sent.
    pub(super) time_limit: Option<Duration>,
    /// `--scale-factor` (a trace think time is divided by it).
    pub(super) scale_factor: f64,
    /// `--think-time`.
    pub(super) think: ThinkTime,
    /// `--skip-after-failed-parent`.
    pub(super) skip_after_failed_parent: bool,
    /// `--live-history`: a turn some later turn waits for keeps its answer.
    pub(super) live_history: bool,
    /// `--dry-run`: nothing is sent.
    pub(super) dry_run: bool,
    /// `--request-timeout` (or the SLO rule).
    pub(super) timeout: TimeoutRule,
    /// `--allow-missing-usage`.
    pub(super) allow_missing_usage: bool,
    /// `--early-stop-error-threshold`.
    pub(super) early_stop: Option<EarlyStop>,
    /// `--grace-secs` (only said in the early-stop line; the drain applies it).
    pub(super) grace: Duration,
}

impl TaskSettings {
    pub(super) fn new(cfg: &ReplayConfig) -> TaskSettings {
        let requests = &cfg.requests;
        TaskSettings {
            time_limit: cfg.schedule.time_limit,
            scale_factor: cfg.schedule.scale_factor,
            think: requests.sessions.think,
            skip_after_failed_parent: requests.sessions.skip_after_failed_parent,
            live_history: requests.sessions.live_history,
            dry_run: requests.dry_run,
            timeout: requests.timeout,
            allow_missing_usage: requests.allow_missing_usage,
            early_stop: requests.early_stop,
            grace: requests.grace,
        }
    }
}

/// Milliseconds from `a` to `b` (negative if `b` is earlier), rounded to 1 µs: records carry
/// microsecond resolution, which keeps them short and free of float noise.
pub(super) fn ms_between(a: Instant, b: Instant) -> f64 {
    let us = if b >= a {
        b.duration_since(a).as_micros() as f64
    } else {
        -(a.duration_since(b).as_micros() as f64)
    };
    us / 1e3
}

/// A later turn in `--timing closed`: waits (in its own task) for its parent (and, in an agent
/// corpus, its joins and its user's previous conversation) to end, then until `max(trace time,
/// latest completion + think time)`, and sends with drift measured from that release. A stop, the time limit, or (with `--skip-after-failed-parent`) a failed parent
/// end it as one unsent record instead.
pub(super) async fn closed_turn(
    ctx: Arc<TaskCtx>,
    mut prepared: Prepared,
    trace_time: Instant,
    tx: crossbeam_channel::Sender<Finished>,
) {
    let Some(gate) = ctx.gate.clone() else {
        return run_one(ctx, prepared, trace_time, None, None, tx).await;
    };
    // Handed over: the dispatcher may lower the I/O threads now (the send, if any, comes at
    // the release, under the release clock's raise).
    ctx.realtime.task_started();
    match wait_for_release(&ctx, &gate, &mut prepared, trace_time).await {
        Ok(r) => run_one(ctx, prepared, r.at, Some(r.released), r.answers, tx).await,
        Err(why) => unsent(
            &ctx,
            &prepared.planned,
            trace_time,
            Status::Cancelled,
            why,
            &tx,
        ),
    }
}

/// When and with what a closed-loop turn is sent.
struct Release {
    at: Instant,
    released: Released,
    /// `--live-history`: the answers of the parent and its ancestors.
    answers: Option<Arc<LiveAnswer>>,
}

/// Waits for what a closed-loop turn waits for (its parent; in an agent corpus also the
/// subagents it joins and its user's previous conversation) to end, puts the earlier answers
/// into the body (`--live-history`), then waits until the release: the latest of those
/// completions plus the think time (the client gap). `Err`: why the turn is not sent (a stop,
/// the time limit, a failed parent with `--skip-after-failed-parent`).
async fn wait_for_release(
    ctx: &TaskCtx,
    gate: &SessionGate,
    prepared: &mut Prepared,
    trace_time: Instant,
) -> Result<Release, String> {
    let limit = ctx.settings.time_limit.map(|l| ctx.start + l);
    let after_limit = async {
        match limit {
            Some(l) => tokio::time::sleep_until(l.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(after_limit);
    let Some(turn) = prepared.planned.turn.clone() else {
        return Err("internal error: a closed-loop turn without its session".into());
    };
    let parent = turn.parent_index;
    let cut = |why: &str| match parent {
        Some(p) => {
            format!("session cut: {why} while the turn waited for its parent (request {p})")
        }
        None => format!("session cut: {why} while the turn waited for the requests before it"),
    };
    let waited = tokio::select! {
        biased;
        _ = ctx.control.stopping.cancelled() => return Err(cut("the run stopped")),
        _ = &mut after_limit => return Err(cut("--time-in-secs reached")),
        w = gate.wait_turn(&turn) => w,
    };
    if let (Some(d), Some(p)) = (&waited.parent, parent) {
        if !d.ok && ctx.settings.skip_after_failed_parent {
            return Err(format!(
                "skipped: parent request {p} did not succeed (--skip-after-failed-parent)"
            ));
        }
    }
    let think = ctx.settings.think.before(&turn, ctx.settings.scale_factor);
    let release = match waited.latest {
        Some(at) => trace_time.max(at + think),
        None => trace_time,
    };
    let join_wait_ms = waited.joins_latest.map(|j| match &waited.parent {
        Some(p) if p.at < j => ms_between(p.at, j),
        _ => 0.0,
    });
    // `--live-history`: the earlier answers go into the body now, before the wait for the
    // release (nothing to do, and nothing allocated, without it).
    let answers = waited.parent.and_then(|d| d.answer);
    if let (Some(live), Some(chain)) = (prepared.live.take(), &answers) {
        if let Some(body) = live.rebuild(&prepared.body, |depth| chain.at_depth(depth)) {
            prepared.body = Bytes::from(body);
        }
    }
    if limit.is_some_and(|l| release >= l) {
        return Err(cut("--time-in-secs reached"));
    }
    if release > Instant::now() {
        let Some(clock) = &ctx.releases else {
            return Err("internal error: a closed-loop turn without the release clock".into());
        };
        let signal = clock.at(release);
        let signalled = tokio::select! {
            biased;
            _ = ctx.control.stopping.cancelled() => return Err(cut("the run stopped")),
            r = signal => r.map_err(|_| cut("the run stopped"))?,
        };
        clock.arrive(signalled, release).await;
        ctx.realtime.released_started();
    }
    Ok(Release {
        at: release,
        released: Released {
            wait_ms: ms_between(trace_time, release),
            think_ms: waited
                .latest
                .is_some()
                .then(|| (think.as_secs_f64() * 1e6).round() / 1e3),
            join_wait_ms,
            joins: (waited.joins > 0).then_some(waited.joins as u32),
        },
        answers,
    })
}

/// How a closed-loop turn was released.
#[derive(Debug, Clone, Copy)]
pub(super) struct Released {
    /// Past its trace time (waiting for the parent and the think time), ms.
    wait_ms: f64,
    /// The think time applied after the parent's completion (when the parent ended), ms.
    think_ms: Option<f64>,
    /// Agent corpora: how long past its parent's completion the turn waited for the subagents
    /// it joins (ms; 0 when they ended first).
    join_wait_ms: Option<f64>,
    /// Agent corpora: the subagents it joined.
    joins: Option<u32>,
}

/// How a request ended, for its record. Built and consumed at once by [`record`], so the size
/// of `Sent` costs nothing (boxing it would allocate per request).
#[allow(clippy::large_enum_variant)]
enum Ending {
    /// Never sent (a closed-loop turn cut or skipped): its status and why.
    Unsent(Status, String),
    /// Sent, with what came back.
    Sent(Sent),
}

/// A sent request and what came back, for its record.
struct Sent {
    /// When it was sent.
    at: Instant,
    /// Its outcome (the answer text already taken).
    outcome: backend::Outcome,
    /// Its intended prompt tokens (a messages row's are known only from its build).
    input_length: u32,
    /// The images its body carried.
    images: Option<crate::schedule::BuiltImages>,
    /// A closed-loop turn: how it was released.
    released: Option<Released>,
}

/// A request's one record, with its inter-token latencies: what the trace says of it, when it
/// was due (`scheduled`, on the clock started at `start`), and how it ended.
fn record(ctx: &TaskCtx, planned: &Planned, scheduled: Instant, ending: Ending) -> Finished {
    let (start, req) = (ctx.start, &planned.req);
    let session = req.session.as_ref();
    let (turn, session_id, parent_index) = match &planned.turn {
        Some(t) => (Some(t.turn), Some(t.id.to_string()), t.parent_index),
        None => (None, None, None),
    };
    let agent = planned.turn.as_ref().and_then(|t| t.agent.as_deref());
    let status = match &ending {
        Ending::Unsent(status, _) => *status,
        Ending::Sent(sent) => sent.outcome.status,
    };
    let base = Record {
        timestamp: req.timestamp_ms,
        scheduled_ms: ms_between(start, scheduled),
        input_length: req.input_length,
        output_length: req.output_length,
        reasoning_length: req.reasoning.tokens,
        images: req.images.as_ref().map(|i| i.len() as u32),
        chat_id: session.map(|s| s.chat_id),
        parent_chat_id: session.map(|s| s.parent_chat_id),
        turn,
        session_id,
        parent_index,
        conversation: agent.map(|a| a.conversation.to_string()),
        agent: agent.map(|a| a.agent.to_string()),
        gap_rule: agent.map(|a| a.gap_rule),
        trace_result: agent.and_then(|a| a.trace_result.as_deref().map(str::to_owned)),
        conversation_trace_ms: agent.and_then(|a| a.conversation_trace_ms),
        conversation_requests: agent.and_then(|a| a.conversation_requests),
        phase: agent
            .is_some_and(|a| a.warmup)
            .then_some(crate::record::Phase::Warmup),
        user: agent.and_then(|a| a.key.strip_prefix("user:")?.parse().ok()),
        trace_model: req.model.as_deref().map(str::to_owned),
        model: ctx
            .models
            .as_ref()
            .map(|m| m.sent(req.model.as_deref()).to_string()),
        ..Record::new(req.index, req.line, status)
    };
    match ending {
        Ending::Unsent(_, why) => Finished {
            record: Record {
                error: Some(why),
                ..base
            },
            itl_ms: Vec::new(),
            blocks: None,
        },
        Ending::Sent(sent) => sent.complete(start, base),
    }
}

impl Sent {
    /// `base` (the request's record as the trace and the schedule give it) completed with the
    /// send time and what came back; the inter-token latencies beside it.
    fn complete(self, start: Instant, base: Record) -> Finished {
        let Sent {
            at,
            outcome,
            input_length,
            images,
            released,
        } = self;
        // The send time is the moment the request's first byte went into the socket, when the
        // connection says (plain HTTP, one attempt); else the task's own stamp just before.
        let at = match outcome.state.written {
            Some(w) if outcome.retries == 0 && w >= at => w,
            _ => at,
        };
        // Called as soon as the exchange ended, so now is when the run cut a cancelled one.
        let cut = (outcome.status == Status::Cancelled).then(|| ms_between(at, Instant::now()));
        let st = outcome.state;
        let rel = |t: Option<Instant>| t.map(|t| ms_between(at, t));
        let ttft = rel(st.first_token);
        let e2e = rel(st.last_token);
        let usage = st.usage.unwrap_or_default();
        let (output_tokens, source) = match (usage.completion_tokens, st.chunks) {
            (Some(n), _) => (Some(n), Some(TokenSource::Usage)),
            (None, 0) => (None, None),
            (None, _) => (Some(st.content_chunks), Some(TokenSource::Chunks)),
        };
        let sent_ms = ms_between(start, at);
        // Thinking or a tool call in the answer: the record splits it.
        let split = st.reasoning_chunks > 0
            || st.tool_chunks > 0
            || usage.reasoning_tokens.is_some_and(|n| n > 0);
        let mut record = Record {
            sent_ms: Some(sent_ms),
            drift_ms: Some(((sent_ms - base.scheduled_ms) * 1e3).round() / 1e3),
            http_status: outcome.http_status,
            error: outcome.error,
            ttft_ms: ttft,
            ttfc_ms: rel(st.first_content),
            // The first gap between token-bearing chunks follows the first token.
            ttst_ms: ttft
                .zip(st.itl_ms.first())
                .map(|(t, gap)| ((t + gap) * 1e3).round() / 1e3),
            e2e_ms: e2e,
            cut_ms: cut,
            done_ms: rel(st.done),
            input_length,
            prompt_tokens: usage.prompt_tokens,
            cached_tokens: usage.cached_tokens,
            images: images.map(|i| i.count),
            image_tokens_intended: images.and_then(|i| i.tokens),
            image_tokens: usage.image_tokens,
            output_tokens,
            output_tokens_source: source,
            chunks: st.chunks,
            ttfa_ms: split.then(|| rel(st.first_answer)).flatten(),
            ttf_tool_ms: rel(st.first_tool),
            // A whole (non-streamed) answer is one event: its thinking is the server's count.
            reasoning_tokens: match st.whole {
                true => usage.reasoning_tokens.filter(|n| *n > 0),
                false => split.then_some(st.reasoning_chunks),
            },
            reasoning_tokens_usage: usage.reasoning_tokens.filter(|n| *n > 0),
            answer_tokens: match st.whole {
                true => split
                    .then(|| {
                        let thinking = usage.reasoning_tokens.unwrap_or(0);
                        output_tokens.map(|n| n.saturating_sub(thinking))
                    })
                    .flatten(),
                false => split.then_some(st.answer_chunks),
            },
            tool_calls: (st.tool_calls > 0).then_some(st.tool_calls),
            tool_arg_bytes: (st.tool_calls > 0 || st.tool_arg_bytes > 0)
                .then_some(st.tool_arg_bytes),
            session_wait_ms: released.map(|r| r.wait_ms),
            think_ms: released.and_then(|r| r.think_ms),
            join_wait_ms: released.and_then(|r| r.join_wait_ms),
            joins: released.and_then(|r| r.joins),
            served_by: st.served_by,
            rx_late_ms: st.rx_late_ms.map(|ms| (ms * 1e3).round() / 1e3),
            retries: outcome.retries,
            ..base
        };
        // TPOT as the statistics define it, from the record's own times and counts.
        record.tpot_ms = crate::stats::per_record::tpot_field(&record);
        Finished {
            record,
            itl_ms: st.itl_ms,
            blocks: None,
        }
    }
}

/// One record for a request that was scheduled but never sent (a closed-loop turn cut or
/// skipped); its children are released as after a failure.
pub(super) fn unsent(
    ctx: &TaskCtx,
    planned: &Planned,
    scheduled: Instant,
    status: Status,
    why: String,
    tx: &crossbeam_channel::Sender<Finished>,
) {
    let done = record(ctx, planned, scheduled, Ending::Unsent(status, why));
    ctx.control.finished.fetch_add(1, Ordering::Relaxed);
    signal_done(ctx, planned.req.index, false, None, None);
    let _ = tx.send(done);
}

/// The request's exchange with the server (or its dry run). A panic while reading the response
/// still gives an outcome, so the request keeps its one record.
async fn exchange(
    ctx: &TaskCtx,
    req: &TraceRequest,
    body: Bytes,
    opts: backend::RequestOpts<'_>,
) -> backend::Outcome {
    if ctx.settings.dry_run {
        return backend::Outcome {
            status: Status::DryRun,
            http_status: None,
            error: None,
            state: Default::default(),
            retries: 0,
        };
    }
    let timeout = ctx.settings.timeout.for_output(req.output_length);
    let exec = backend::execute(
        &ctx.client,
        &ctx.ep,
        body,
        Some(timeout),
        &ctx.control.cancel,
        ctx.settings.allow_missing_usage,
        opts,
    );
    // The panic message itself still goes to stderr.
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
}

/// Tells the turns waiting for request `index` that it ended: at `ended`, the end of its
/// response as its record has it (`done_ms`), or now when it has none (an error, a request
/// never sent). Its children's gaps count from there, so their release is exactly the recorded
/// completion plus the gap: counted from this call instead, each release also carried the
/// time from the end of the stream to here (hand-back of the connection, 26 µs median and
/// 87 µs p99 in `scripts/bench-agents.sh`). `answer`, with `--live-history` and only for a
/// request some turn waits for: its answer text (when it succeeded) and the answers of the
/// turns before it.
fn signal_done(
    ctx: &TaskCtx,
    index: usize,
    ok: bool,
    ended: Option<Instant>,
    answer: Option<(Option<String>, Option<Arc<LiveAnswer>>)>,
) {
    if let Some(g) = &ctx.gate {
        let answer = answer.map(|(text, prev)| {
            Arc::new(LiveAnswer {
                text: text.map(String::into_boxed_str),
                prev,
            })
        });
        g.complete(
            index,
            Done {
                at: ended.unwrap_or_else(Instant::now),
                ok,
                answer,
            },
        );
    }
}

/// Sends request `prepared` (released at `scheduled`) and writes its one record.
/// `earlier_answers`: with `--live-history`, the answers of the turns before it (its parent's
/// chain), passed on to its own children with its answer.
pub(super) async fn run_one(
    ctx: Arc<TaskCtx>,
    prepared: Prepared,
    scheduled: Instant,
    released: Option<Released>,
    earlier_answers: Option<Arc<LiveAnswer>>,
    tx: crossbeam_channel::Sender<Finished>,
) {
    let Prepared {
        body,
        mut planned,
        intended_prompt_tokens,
        images,
        ..
    } = prepared;
    let req = &planned.req;
    // A messages row's intended prompt tokens are known only from its build (0: unknown).
    let input_length = match req.input_length {
        0 => intended_prompt_tokens,
        n => n,
    };
    // `--live-history`: only a turn some later turn waits for keeps its answer.
    let keep_answer =
        ctx.settings.live_history && ctx.gate.as_ref().is_some_and(|g| g.is_parent(req.index));
    // `--session-header`: the session id, only when asked for (no allocation otherwise).
    let session_key = ctx
        .ep
        .session_header
        .as_ref()
        .and(planned.turn.as_ref())
        .map(|t| t.id.to_string());
    let opts = backend::RequestOpts {
        session: session_key.as_deref(),
        collect_answer: keep_answer,
    };
    let sent = Instant::now();
    let seq = ctx.send_seq.fetch_add(1, Ordering::Relaxed);
    if let Some(l) = ctx.live.as_ref().filter(|_| !ctx.settings.dry_run) {
        l.on_sent();
    }
    if released.is_none() {
        ctx.realtime.task_started();
    }
    let in_use = ctx.warmth.as_ref().map(|w| w.begin());
    let outcome = exchange(&ctx, req, body, opts).await;
    drop(in_use);
    let mut outcome = outcome;
    let answer = outcome.state.answer.take();
    if ctx.gate.is_some() {
        let ok = matches!(outcome.status, Status::Ok | Status::DryRun);
        let answer = keep_answer.then(|| (answer.filter(|_| ok), earlier_answers));
        signal_done(&ctx, req.index, ok, outcome.state.done, answer);
    }
    let status = outcome.status;
    let sent = Sent {
        at: sent,
        outcome,
        input_length,
        images,
        released,
    };
    let mut done = record(&ctx, &planned, scheduled, Ending::Sent(sent));
    done.blocks = Some(SentBlocks {
        seq,
        input_length,
        hash_ids: std::mem::take(&mut planned.req.hash_ids),
    });
    if let Some(sent_ms) = done.record.sent_ms {
        ctx.first_sent_us
            .fetch_min((sent_ms.max(0.0) * 1e3) as u64, Ordering::Relaxed);
    }
    count_finished(&ctx, status);
    // The writer outlives every task (it exits when all senders are gone).
    let _ = tx.send(done);
}

/// Counts a finished request (and a failed one); a failure may stop the run early
/// (`--early-stop-error-threshold`).
fn count_finished(ctx: &TaskCtx, status: Status) {
    let failed = !matches!(status, Status::Ok | Status::DryRun | Status::Cancelled);
    let finished = ctx.control.finished.fetch_add(1, Ordering::Relaxed) + 1;
    let nfailed = if failed {
        ctx.control.failed.fetch_add(1, Ordering::Relaxed) + 1
    } else {
        ctx.control.failed.load(Ordering::Relaxed)
    };
    if failed {
        if let Some(es) = ctx.settings.early_stop {
            if es.triggered(nfailed, finished) && ctx.control.request_stop(StopReason::EarlyStop) {
                eprintln!(
                    "request-sim: early stop: {nfailed} of {finished} finished requests failed (threshold: {}); \
                     in-flight requests get {:.1} s",
                    es,
                    ctx.settings.grace.as_secs_f64()
                );
            }
        }
    }
}
