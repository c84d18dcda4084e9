//! Phase 1: the trace as this run replays it — one stream of planned requests (this shard's
//! share, outputs capped, each with its trace-ideal prefix-cache hits) that the producers take
//! as the run goes ([`crate::schedule::Feed`]).
//!
//! The stream comes straight from the file ([`TraceStream`]: memory independent of the trace's
//! length), or, for what needs the whole trace, from the trace loaded into memory: Bailian
//! parent chains, `--timing closed` with sessions (the session gate looks turns up by index),
//! `--save-prompts` (written before the run). Either way the first requests are read now, for
//! start-up (warm-up connections, pre-fill, the prompt check), and the feed starts with them.

use std::sync::{Arc, Mutex};

use super::note::note;
use crate::analyze::IdealCache;
use crate::config::{ReplayConfig, Target, TraceSource};
use crate::schedule::{Feed, Timing};
use crate::trace::history::{self, AnswerSpan};
use crate::trace::pipeline::plan::{PlanFacts, PlanOptions};
use crate::trace::pipeline::shard::{self, Shard};
use crate::trace::{
    self, Corpus, Opened, Planned, RowError, Sessions, Trace, TraceError, TraceFormat, TraceStats,
    TraceStream,
};
use crate::{Error, Result};

pub use crate::trace::demo::DEMO_TRACE;

/// Requests read before the run starts (start-up looks at the first ones only)…
const HEAD: usize = 1024;
/// …or, when they are all due at the start (one burst), the whole burst up to this many.
const BURST_HEAD_MAX: usize = 16_384;

/// The trace as this run replays it.
pub(super) struct Loaded {
    pub(super) format: TraceFormat,
    pub(super) block_size: usize,
    pub(super) name: String,
    /// The first requests of this run, in send order (the feed starts with them).
    pub(super) head: Vec<Planned>,
    /// The whole trace, when it was loaded whole.
    pub(super) whole: Option<Arc<Trace>>,
    /// Sessions by trace index (a whole trace's; empty when streamed: each planned request
    /// carries its own turn).
    pub(super) sessions: Arc<Sessions>,
    /// This run's requests, when known before it starts (a whole trace).
    pub(super) planned: Option<usize>,
    stats: Stats,
    /// `--live-history`: the recorded answers of earlier turns in each request's messages.
    pub(super) answer_spans: Option<Arc<Vec<Vec<AnswerSpan>>>>,
    /// Turns of this run's sessions that slicing left out, and the sessions they belong to
    /// (counted when the trace is loaded whole).
    pub(super) cut: (usize, usize),
    /// An agent corpus: how its population was laid out.
    pub(super) agents: Option<PlanFacts>,
}

/// Requests due within this many ms of each other count as one burst (start-up sizes the
/// connections and the bodies built ahead for the largest early one).
pub(super) const BURST_WINDOW_MS: f64 = 20.0;

impl Loaded {
    /// The most requests of the first second (at `scale`) due within [`BURST_WINDOW_MS`] of
    /// each other, as far as the head shows (at most [`BURST_HEAD_MAX`]).
    pub(super) fn first_burst(&self, scale: f64) -> usize {
        let due: Vec<f64> = self
            .head
            .iter()
            .map(|p| p.req.timestamp_ms / scale)
            .take_while(|&t| t < 1000.0)
            .collect();
        // In time order already (the feed is); a sliding window.
        let (mut best, mut lo) = (0, 0);
        for hi in 0..due.len() {
            while due[hi] - due[lo] > BURST_WINDOW_MS {
                lo += 1;
            }
            best = best.max(hi + 1 - lo);
        }
        best
    }
}

/// Where the trace's counts come from.
enum Stats {
    Whole(TraceStats),
    /// Filled in when the stream ends (or is dropped).
    Stream(Arc<Mutex<TraceStats>>),
}

impl Loaded {
    /// The trace's counts (a stream's once it has ended).
    pub(super) fn trace_stats(&self) -> TraceStats {
        match &self.stats {
            Stats::Whole(s) => s.clone(),
            Stats::Stream(h) => h.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }
}

/// Load the whole trace the config names (for what needs it all, e.g. `sweep`'s rate).
pub fn load_trace(cfg: &ReplayConfig) -> Result<Trace> {
    Ok(match &cfg.trace.source {
        TraceSource::File(p) => trace::load(p, &cfg.trace.load)?,
        TraceSource::BuiltinDemo => trace::parse_reader(
            "<built-in demo trace>",
            DEMO_TRACE.as_bytes(),
            &cfg.trace.load,
        )?,
    })
}

/// An agent corpus laid out as this run's population (`trace::pipeline::plan`), loaded whole.
fn agent_corpus(
    cfg: &ReplayConfig,
    path: &std::path::Path,
    mut corpus: Corpus,
    format: TraceFormat,
) -> Result<(Arc<Trace>, String, PlanFacts)> {
    let name = path.display().to_string();
    let reshaped = super::reshape::agent_corpus(cfg, &name, &mut corpus)?;
    let opts = PlanOptions {
        population: cfg.trace.agents.population,
        seed: cfg.prompts.seed,
        max_idle_gap_ms: cfg.trace.max_idle_gap_ms,
        share_system_prefix: cfg.trace.agents.share_system_prefix,
        time_limit_ms: cfg
            .schedule
            .time_limit
            .map(|l| l.as_secs_f64() * 1e3 * cfg.schedule.scale_factor),
        max_requests: cfg.trace.load.max_requests,
        trajectory: cfg.trace.agents.trajectory,
    };
    let (whole, mut facts) =
        crate::trace::pipeline::plan::plan(&corpus, format, &opts).map_err(|e| {
            Error::from(TraceError::NoRequests {
                path: name.clone(),
                reason: e,
            })
        })?;
    reshaped.fill(&mut facts);
    // A dry run opens no connection.
    if !cfg.requests.dry_run {
        facts
            .check_client_can_start(crate::trace::pipeline::plan::open_file_limit())
            .map_err(|e| Error::config(format!("agent corpus {name}: {e}")))?;
    }
    let joined = corpus
        .conversations
        .iter()
        .flat_map(|c| &c.agents)
        .filter(|a| a.parent.as_ref().is_some_and(|l| l.join.is_some()))
        .count();
    note(format!(
        "agent corpus {name}: {} conversations, {} requests ({} subagents, {joined} joined); {} laid out as {} with {} requests{}{}",
        facts.corpus_conversations,
        corpus.requests(),
        corpus.subagents(),
        facts.conversations,
        match (facts.users, facts.session_rate, facts.recorded_starts) {
            (Some(u), _, _) => format!("{u} users"),
            (_, Some(r), _) => format!("arrivals at {r}/s"),
            (_, _, Some(_)) => format!(
                "conversations starting at their recorded times ({} left out: they start after the time limit)",
                facts.starting_after_limit
            ),
            _ => "one population starting at once".into(),
        },
        facts.requests,
        match facts.max_idle_gap_ms {
            Some(ms) => format!("; --max-idle-gap {} s cut {} gaps", ms / 1e3, facts.capped_gaps),
            None => String::new(),
        },
        match facts.past_limit {
            0 => String::new(),
            n => format!("; {n} requests left out: they cannot start before the time limit"),
        }
    ));
    for n in &corpus.notes {
        note(format!("{name}: {n}"));
    }
    Ok((Arc::new(whole), name, facts))
}

/// Open the trace, choose how it is read, and read this run's first requests.
pub(super) fn run(cfg: &ReplayConfig) -> Result<(Loaded, Feed)> {
    let stream = match &cfg.trace.source {
        // The one front door: the file is opened once, whatever it holds.
        TraceSource::File(p) => match trace::open(p, &cfg.trace.load)? {
            Opened::Corpus(corpus, format) => {
                let (whole, name, facts) = agent_corpus(cfg, p, corpus, format)?;
                let mut loaded = whole_loaded(cfg, whole.clone(), name, "an agent corpus");
                loaded.agents = Some(facts);
                let inner = Source::Whole(Box::new(trace::pipeline::stream::planned(whole)));
                return start_feed(cfg, loaded, inner);
            }
            Opened::Rows(rows) => {
                TraceStream::from_rows(*rows, &cfg.trace.load, cfg.trace.reorder)?
            }
        },
        TraceSource::BuiltinDemo => TraceStream::from_reader(
            "<built-in demo trace>",
            DEMO_TRACE.as_bytes(),
            &cfg.trace.load,
            cfg.trace.reorder,
        )?,
    };
    let (format, block_size, name) = (
        stream.format(),
        stream.block_size(),
        stream.name().to_owned(),
    );
    let why_whole = if let Some(why) = stream.whole_reason() {
        Some(why)
    } else if cfg.output.save_prompts.is_some() {
        Some("--save-prompts".to_owned())
    } else if cfg.requests.sessions.timing == Timing::Closed {
        if !format.has_sessions() {
            let kind = format.name();
            let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            let why = format!("{article} {kind} trace has no session ids");
            return Err(no_sessions(&name, &why));
        }
        Some("--timing closed sessions".to_owned())
    } else {
        None
    };
    let (inner, loaded) = match why_whole {
        Some(why) => {
            let whole = Arc::new(stream.into_whole()?);
            let loaded = whole_loaded(cfg, whole.clone(), name.clone(), &why);
            (
                Source::Whole(Box::new(trace::pipeline::stream::planned(whole))),
                loaded,
            )
        }
        None => {
            let loaded = Loaded {
                format,
                block_size,
                name: name.clone(),
                head: Vec::new(),
                whole: None,
                sessions: Arc::new(Sessions::default()),
                planned: None,
                stats: Stats::Stream(stream.stats_handle()),
                answer_spans: None,
                cut: (0, 0),
                agents: None,
            };
            (
                Source::Stream {
                    stream: Box::new(stream),
                    cut: None,
                },
                loaded,
            )
        }
    };
    if let Stats::Whole(st) = &loaded.stats {
        skipped_note(&loaded.name, st);
    }
    start_feed(cfg, loaded, inner)
}

/// The feed over `inner` (this shard's share, trace-ideal hits) and its first requests.
fn start_feed(cfg: &ReplayConfig, mut loaded: Loaded, inner: Source) -> Result<(Loaded, Feed)> {
    let (block_size, name) = (loaded.block_size, loaded.name.clone());
    let mut feed = RunFeed {
        skipped: match (&loaded.stats, cfg.trace.load.skip_invalid) {
            (Stats::Stream(h), true) => Some(h.clone()),
            // BurstGPT: the failed requests kept or dropped are said at the end too.
            (Stats::Stream(h), false) if loaded.format.info().zero_output_is_failure => {
                Some(h.clone())
            }
            _ => None,
        },
        inner,
        failed: false,
        ideal: IdealCache::new(block_size, IdealCache::MAX_BLOCKS),
        shard: cfg.trace.shard,
        max_output: cfg.requests.max_output_tokens,
        not_chat: endpoint_limits(cfg).0,
        not_completions: endpoint_limits(cfg).1,
        name,
    };
    let t = std::time::Instant::now();
    // Empty only for a shard with no request of the slice: it replays nothing, and its empty
    // records file still merges.
    loaded.answer_spans = match &loaded.whole {
        Some(w) => live_history(cfg, w, &loaded.name)?,
        None if cfg.requests.sessions.live_history => {
            return Err(Error::config(format!(
                "--live-history needs a messages trace (rows with `messages` whose assistant turns it replaces); {} is a {} trace",
                loaded.name,
                loaded.format.name()
            )))
        }
        None => None,
    };
    if let Some(w) = &loaded.whole {
        if cfg.requests.sessions.timing == Timing::Closed && !w.sessions.any() {
            return Err(no_sessions(
                &loaded.name,
                "no row has a session id or a parent (session_id, or chat_id/parent_chat_id)",
            ));
        }
    }
    let mut head: Vec<Planned> = feed.by_ref().take(HEAD).collect::<Result<_>>()?;
    // A first burst larger than the head (10,000 requests at one instant) is read whole, so
    // start-up opens its connections and builds its bodies ahead (`Loaded::first_burst`).
    // Whatever ends it (the first later row, or a bad row) goes back in front of the rest: a bad
    // row inside the burst is still the stream's error at its place, not a start-up error.
    let mut next = None;
    if head.len() == HEAD {
        let (t0, window) = (
            head[0].req.timestamp_ms,
            BURST_WINDOW_MS * cfg.schedule.scale_factor,
        );
        while head.len() < BURST_HEAD_MAX {
            match feed.next() {
                Some(Ok(p)) if p.req.timestamp_ms - t0 <= window => head.push(p),
                Some(other) => {
                    next = Some(other);
                    break;
                }
                None => break,
            }
        }
    }
    describe(cfg, &loaded, &head, t.elapsed().as_secs_f64() * 1e3);
    thinking_note(cfg, &loaded, &head);
    session_label_warning(cfg, &loaded, &head);
    loaded.head = head.clone();
    let rest = next.into_iter().chain(feed);
    Ok((loaded, Box::new(head.into_iter().map(Ok).chain(rest))))
}

/// `--timing closed` on a trace without sessions: it would run open-loop, so it is refused.
fn no_sessions(name: &str, why: &str) -> Error {
    Error::config(format!(
        "--timing closed needs a trace with sessions, and {name} has none ({why}): every request would be sent at its trace time, as with --timing open; drop --timing closed (and --think-time, --skip-after-failed-parent), or give the rows a session_id"
    ))
}

/// `--session-user`/`--session-header` on a trace whose requests carry no session: the flag
/// cannot act, said loudly (not refused: a script may pass it to traces with and without
/// sessions alike).
fn session_label_warning(cfg: &ReplayConfig, loaded: &Loaded, head: &[Planned]) {
    let s = &cfg.requests.sessions;
    let flags: Vec<&str> = [
        (s.session_user, "--session-user"),
        (s.session_header.is_some(), "--session-header"),
    ]
    .into_iter()
    .filter_map(|(on, f)| on.then_some(f))
    .collect();
    if flags.is_empty() {
        return;
    }
    let (any, scope) = match &loaded.whole {
        Some(w) => (w.sessions.any(), "no request of the trace has".to_string()),
        None if head.len() < HEAD => (
            head.iter().any(|p| p.turn.is_some()),
            "no request of the trace has".to_string(),
        ),
        None => (
            head.iter().any(|p| p.turn.is_some()),
            format!("none of the first {} requests has", head.len()),
        ),
    };
    if !any {
        note(format!(
            "WARNING: {} has no effect on {}: {scope} a session id (session_id, or a Bailian chat_id chain), so no request carries one",
            flags.join(" and "),
            loaded.name
        ));
    }
}

/// A trace loaded whole: its sessions, and how many requests this run (shard) has.
fn whole_loaded(cfg: &ReplayConfig, whole: Arc<Trace>, name: String, why: &str) -> Loaded {
    let planned = match cfg.trace.shard {
        Some(s) => (0..whole.requests.len())
            .filter(|&i| shard::owner(whole.sessions.key(i), i, s.count) == s.index)
            .count(),
        None => whole.requests.len(),
    };
    let span_s = whole.requests.last().map_or(0.0, |r| r.timestamp_ms / 1e3);
    note(format!(
        "trace {name}: {} requests over {span_s:.1} s ({:?}, {}; loaded whole for {why}), replayed in {:.1} s at scale {}",
        whole.requests.len(),
        whole.format,
        block_label(
            whole.block_size,
            whole.requests.iter().any(|r| !r.hash_ids.is_empty())
        ),
        span_s / cfg.schedule.scale_factor,
        cfg.schedule.scale_factor
    ));
    Loaded {
        format: whole.format,
        block_size: whole.block_size,
        name,
        head: Vec::new(),
        sessions: Arc::new(whole.sessions.clone()),
        planned: Some(planned),
        stats: Stats::Whole(whole.stats.clone()),
        answer_spans: None,
        cut: cut_turns(cfg, &whole),
        whole: Some(whole),
        agents: None,
    }
}

/// `block N`, or what a trace without hash ids has instead (an Azure trace: every prompt
/// unique), for the start-up line.
fn block_label(block_size: usize, hashed: bool) -> String {
    if hashed {
        format!("block {block_size}")
    } else {
        "no hash ids: every prompt is unique".to_string()
    }
}

/// The start-up lines about the trace and the shard.
fn describe(cfg: &ReplayConfig, loaded: &Loaded, head: &[Planned], head_ms: f64) {
    if loaded.whole.is_none() {
        note(format!(
            "trace {}: streamed ({:?}, {}; rows put in time order within {} ms / {} rows), replayed at scale {}; first {} requests read in {head_ms:.0} ms",
            loaded.name,
            loaded.format,
            block_label(
                loaded.block_size,
                head.iter().any(|p| !p.req.hash_ids.is_empty())
            ),
            cfg.trace.reorder.ms,
            cfg.trace.reorder.rows,
            cfg.schedule.scale_factor,
            head.len()
        ));
    }
    if let Some(s) = cfg.trace.shard {
        let share = match loaded.planned {
            Some(n) => format!("{n} of the trace's requests"),
            None => "sessions whole by session id, other requests round-robin by index".into(),
        };
        note(format!(
            "shard {}/{}: {share} (record indexes are the trace's)",
            s.index, s.count
        ));
    }
}

/// The Messages API cannot carry every row's thinking budget (`backend/thinking.rs`): how many
/// rows go without, said once (over the whole trace when it is loaded whole, else over the
/// first requests read).
fn thinking_note(cfg: &ReplayConfig, loaded: &Loaded, head: &[Planned]) {
    use crate::backend::{messages_thinking_budget, ThinkingBudget};
    let Target::Remote(ep) = &cfg.target.server else {
        return;
    };
    if !ep.kind.is_messages() || cfg.requests.thinking_budget == ThinkingBudget::Off {
        return;
    }
    let cap = cfg.requests.max_output_tokens.unwrap_or(u32::MAX);
    // (rows with a budget, rows whose budget the Messages API cannot take)
    let mut counts = (0usize, 0usize);
    let mut count = |req: &crate::trace::TraceRequest, chat: Option<&crate::trace::ChatPayload>| {
        let Some(b) = req.reasoning.capped(cap).budget_to_send() else {
            return;
        };
        let max_tokens = match chat.filter(|c| !c.is_literal()) {
            Some(c) => c
                .max_tokens
                .map_or(crate::backend::MESSAGES_DEFAULT_MAX_TOKENS, |n| n.max(1)),
            None => req.output_length.min(cap).max(1),
        };
        counts.0 += 1;
        counts.1 += usize::from(messages_thinking_budget(b, max_tokens).is_none());
    };
    let scope = match &loaded.whole {
        Some(w) => {
            for (i, r) in w.requests.iter().enumerate() {
                count(r, w.chats.get(i).and_then(|c| c.as_deref()));
            }
            "the trace's"
        }
        None => {
            for p in head {
                count(&p.req, p.chat.as_deref());
            }
            "the first requests'"
        }
    };
    if counts.1 > 0 {
        note(format!(
            "--thinking-budget: {} of {scope} {} rows with a thinking length or budget send no `thinking` (the Messages API needs 1024 <= budget_tokens < max_tokens)",
            counts.1, counts.0
        ));
    }
}

/// The endpoint, when it is not a chat, Responses or Messages endpoint (a `messages` row cannot
/// be sent there), and when it is not a completions endpoint (nor can a `prompt_token_ids`
/// row).
fn endpoint_limits(cfg: &ReplayConfig) -> (Option<String>, Option<String>) {
    match &cfg.target.server {
        Target::Remote(ep) => (
            (!ep.kind.takes_messages()).then(|| ep.display_url()),
            (!ep.kind.takes_token_ids()).then(|| ep.display_url()),
        ),
        Target::BuiltinSimulator if cfg.prompts.token_ids => (
            Some("the built-in simulator's /v1/completions (--token-ids)".into()),
            None,
        ),
        Target::BuiltinSimulator => (
            None,
            Some("the built-in simulator's /v1/chat/completions".into()),
        ),
    }
}

/// `--skip-invalid`: how many rows were skipped and the first reason (`file:line: what`), in
/// one console line; nothing when none was.
fn skipped_note(name: &str, st: &TraceStats) {
    if st.failed_requests > 0 {
        note(format!(
            "{name}: {} failed request(s) (0 response tokens){}",
            st.failed_requests,
            if st.dropped_failed > 0 {
                " dropped by --drop-failed, not replayed"
            } else {
                " replayed with output length 0 (--drop-failed drops them)"
            }
        ));
    }
    if st.skipped_invalid == 0 {
        return;
    }
    note(format!(
        "WARNING: --skip-invalid: {} invalid row(s) of {name} skipped, not replayed{}; first: {}",
        st.skipped_invalid,
        if st.partial {
            " (in the rows read)"
        } else {
            ""
        },
        st.invalid_examples.first().map_or("", String::as_str)
    ));
}

/// Where this run's requests come from.
enum Source {
    /// The trace streamed from its file; `cut`: after an error, the requests it had read and
    /// not released ([`TraceStream::cut`]).
    Stream {
        stream: Box<TraceStream>,
        cut: Option<std::vec::IntoIter<Planned>>,
    },
    /// A trace (or an agent corpus laid out) whole in memory.
    Whole(Box<dyn Iterator<Item = Planned> + Send>),
}

impl Source {
    fn next(&mut self) -> Option<std::result::Result<Planned, TraceError>> {
        match self {
            Source::Stream { stream, .. } => stream.next(),
            Source::Whole(requests) => requests.next().map(Ok),
        }
    }

    /// After an error ended the feed: the next request read before it that will never be sent
    /// (a streamed trace's reorder window; the rest of a whole trace).
    fn next_cut_off(&mut self) -> Option<Planned> {
        match self {
            Source::Stream { stream, cut } => {
                cut.get_or_insert_with(|| stream.cut().into_iter()).next()
            }
            Source::Whole(requests) => requests.next(),
        }
    }
}

/// The planned requests of this run: every request of the slice gets its trace-ideal hits
/// (the cache sees all shards' requests, as the server does), then this shard's share is kept
/// and outputs are capped. After an error (a bad row), the requests of this shard read before
/// it follow the error: the feeder counts them as never sent (`schedule::Feed`).
struct RunFeed {
    /// `--skip-invalid` on a streamed trace: its counts, said once the stream has ended (or
    /// is dropped); taken when said.
    skipped: Option<Arc<Mutex<TraceStats>>>,
    inner: Source,
    /// An error has ended the feed: what follows is cut off.
    failed: bool,
    ideal: IdealCache,
    shard: Option<Shard>,
    max_output: Option<u32>,
    not_chat: Option<String>,
    not_completions: Option<String>,
    name: String,
}

impl RunFeed {
    /// Say the skipped rows of a streamed trace (its counts are published when it ends).
    fn say_skipped(&mut self) {
        if let Some(h) = self.skipped.take() {
            let st = h.lock().unwrap_or_else(|p| p.into_inner()).clone();
            skipped_note(&self.name, &st);
        }
    }

    /// True when the request is this shard's (every request without `--shard`).
    fn mine(&self, p: &Planned) -> bool {
        self.shard.is_none_or(|s| {
            let key = p.turn.as_ref().map(|t| &*t.id);
            shard::owner(key, p.req.index, s.count) == s.index
        })
    }

    /// A row the endpoint cannot take: a `messages` row needs a chat endpoint, a
    /// `prompt_token_ids` row a completions endpoint.
    fn unsendable(&self, p: &Planned) -> Option<crate::Error> {
        let chat = p.chat.as_ref()?;
        let (field, url, need) = if !chat.is_literal() {
            ("messages", self.not_chat.as_ref()?, "a messages row is sent as a conversation: it needs a chat, Responses or Messages endpoint (…/v1/chat/completions, …/v1/responses, …/v1/messages)")
        } else if chat.prompt_token_ids.is_some() {
            ("prompt_token_ids", self.not_completions.as_ref()?, "a prompt_token_ids row is sent as a completions request: it needs a completions endpoint (…/v1/completions)")
        } else {
            return None;
        };
        Some(
            TraceError::Row {
                path: self.name.clone(),
                line: p.req.line,
                error: RowError::Field {
                    field: field.into(),
                    what: format!("{need}, not {url}"),
                },
            }
            .into(),
        )
    }
}

impl Iterator for RunFeed {
    type Item = Result<Planned>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                let Some(p) = self.inner.next_cut_off() else {
                    self.say_skipped();
                    return None;
                };
                if self.mine(&p) {
                    return Some(Ok(p));
                }
                continue;
            }
            let Some(next) = self.inner.next() else {
                self.say_skipped();
                return None;
            };
            let mut p = match next {
                Ok(p) => p,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e.into()));
                }
            };
            p.ideal_hit = self.ideal.hits(&p.req);
            if !self.mine(&p) {
                continue;
            }
            if let Some(e) = self.unsendable(&p) {
                self.failed = true;
                return Some(Err(e));
            }
            if let Some(cap) = self.max_output {
                p.req.output_length = p.req.output_length.min(cap);
                p.req.reasoning = p.req.reasoning.capped(cap);
            }
            return Some(Ok(p));
        }
    }
}

impl Drop for RunFeed {
    fn drop(&mut self) {
        if self.skipped.is_some() {
            // Dropping the stream publishes its counts.
            self.inner = Source::Whole(Box::new(std::iter::empty()));
            self.say_skipped();
        }
    }
}

/// Turns of this run's sessions (this shard's with `--shard`) that `--start-ms/--end-ms/
/// --max-requests` left out, said at start-up when there are any.
fn cut_turns(cfg: &ReplayConfig, trace: &Trace) -> (usize, usize) {
    let cut = trace.sessions.cut_in(|id| match cfg.trace.shard {
        Some(s) => trace::pipeline::shard::owner(Some(id), 0, s.count) == s.index,
        None => true,
    });
    if cut.0 > 0 {
        note(format!(
            "sessions: the slice (--start-ms/--end-ms/--max-requests) cut {} turns of {} sessions{}; a turn whose parent was cut starts its part of the session",
            cut.0,
            cut.1,
            if cfg.trace.shard.is_some() { " on this shard" } else { "" }
        ));
    }
    cut
}

/// `--live-history`: only for a messages trace; where each turn's earlier answers are.
fn live_history(
    cfg: &ReplayConfig,
    trace: &Trace,
    name: &str,
) -> Result<Option<Arc<Vec<Vec<AnswerSpan>>>>> {
    if !cfg.requests.sessions.live_history {
        return Ok(None);
    }
    let has_messages = trace.chats.iter().flatten().any(|c| !c.is_literal());
    if !has_messages {
        return Err(Error::config(format!(
            "--live-history needs a messages trace (rows with `messages` whose assistant turns it replaces); {name} is a {} trace without any",
            trace.format.name()
        )));
    }
    let chat = match &cfg.target.server {
        Target::Remote(ep) => ep.kind.is_chat(),
        Target::BuiltinSimulator => !cfg.target.api.is_responses_or_messages(),
    };
    if !chat {
        return Err(Error::config(
            "--live-history works with chat completions only: the Responses and Messages bodies are converted from the trace's messages, where recorded answers cannot be swapped in place",
        ));
    }
    let spans = history::answer_spans(trace, name)?;
    let turns = spans.iter().filter(|s| !s.is_empty()).count();
    note(format!(
        "--live-history: {turns} turns will carry the server's answers to their earlier turns"
    ));
    Ok(Some(Arc::new(spans)))
}
