//! GitHub Copilot coding-agent traces (June 2026; Azure Public Dataset,
//! `analysis/GitHubCopilotCodingAgents/schema.json`): one session per JSON line, in a
//! `date=YYYY-MM-DD/` partition of `shard-NNNN.jsonl.gz` files (plus a `manifest.json`, not
//! read), or one shard, plain or gzip.
//!
//! A session: `session_id`, `date`, `turns` (in time order). A turn: `turn_id`, `llm_calls`
//! (`message_id`, ISO-8601 `timestamp`, `duration_ms`, `initiator_type`, `model`, `result`,
//! `status_code`, `tokens` {`total`, `prompt`, `completion`, `cached`, `cached_pct`},
//! `message_metadata` [{`type`, `role`, `sequenceId`, `token_len`}]) and `tool_batches`
//! (`timestamp`, `duration_ms`, `auto_continue`, `result`, `request_id` = the `message_id` of
//! the call that asked for the tools, `function_calls`).
//!
//! How a session becomes a [`Conversation`] (the model every agent format shares):
//! - **Calls** in turn order, by `timestamp` within a turn. A call that starts before the
//!   previous call of the main chain ended (a parallel call) is a one-request background
//!   subagent `p<k>` following the main request before the one it overlaps (spawn offset: its
//!   start minus that request's end); overlapping the session's first call, it is sent after it
//!   instead (gap 0, counted as serialized).
//! - **Gaps**: within a turn, a call waits for its predecessor's completion plus the duration of
//!   the tool batch whose `request_id` is the predecessor's `message_id` (`tool_time`); without
//!   a batch, and between turns (the person), its start minus the predecessor's end
//!   (`start_minus_server`, at least 0).
//! - **Prefixes** (the trace has no hash ids): a call's segments are its `message_metadata`
//!   by `sequenceId`. When they add up to less than `tokens.prompt`, the difference is a final
//!   segment of its own (never shared); when to more, the prompt is cut at `tokens.prompt`.
//!   Both are counted. A call shares, with the previous main-chain call of its session on the
//!   same model, the tokens of the leading segments they have in common (same type, role,
//!   sequence id and length), unless its prompt is shorter than that call's (a compaction: a
//!   new prefix). A parallel call shares so with the call it overlaps, is never a compaction,
//!   and is no later call's predecessor. The
//!   leading `System` segments are shared by every session of the model: their whole blocks
//!   get the same ids in every session (hash scope global). Shared tokens become whole blocks
//!   of `--block-size` (default 64) ids; the rest of `ceil(prompt / block)` are fresh ids.
//! - `UserCancel` (and every result other than `Success`) calls are kept, sent in full, marked
//!   (`AgentRequest::result`, the record's `trace_result`) and counted.
//! - The session's first call's time is the conversation's `recorded_start_ms`: without a
//!   population flag the replay starts each session at its offset from the corpus's earliest.
//! - Ids are shared prefix storage (`BlockIds`: the predecessor's prefix plus a run of fresh
//!   ids), dense below the corpus's `dense_ids` (each id one block after one prefix).
//!
//! Reading streams one line at a time (the corpus of conversations is kept, as for every agent
//! format). Bad input is one `file:line` error naming the field: a tool batch naming no call,
//! a turn that starts before the previous one, a negative or zero token count, a bad time.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::agent_fields::{blocks, field_error, for_each_line, parse_object, row_error};
use super::fields;
use super::unit::Format;
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::FormatInfo;
use crate::trace::model::{
    Agent, AgentRequest, BlockIds, ClientGap, Conversation, Corpus, GapRule, HashScope, Origin,
    ParentLink, Production,
};
use crate::trace::options::{LoadOptions, DEFAULT_MAX_LINE_BYTES, MAX_LENGTH_TOKENS};

#[derive(Deserialize)]
struct Session {
    session_id: String,
    turns: Vec<Turn>,
}

#[derive(Deserialize)]
struct Turn {
    #[serde(default)]
    llm_calls: Vec<Call>,
    #[serde(default)]
    tool_batches: Vec<Batch>,
}

#[derive(Deserialize)]
struct Call {
    message_id: String,
    timestamp: String,
    duration_ms: f64,
    model: String,
    #[serde(default)]
    result: Option<String>,
    tokens: Tokens,
    #[serde(default)]
    message_metadata: Vec<Segment>,
}

#[derive(Deserialize)]
struct Tokens {
    prompt: u32,
    completion: u32,
    #[serde(default)]
    cached: Option<u32>,
}

#[derive(Deserialize, PartialEq)]
struct Segment {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(rename = "sequenceId", default)]
    sequence_id: Option<u64>,
    token_len: u32,
}

#[derive(Deserialize)]
struct Batch {
    duration_ms: f64,
    request_id: String,
}

/// What the reader counted, for the run's notes.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counts {
    pub sessions: usize,
    pub calls: usize,
    /// Calls whose `result` is not `Success`, by result (`UserCancel`, ...).
    pub not_success: Vec<(String, usize)>,
    /// Calls sent as a background subagent (they overlap the main chain).
    pub parallel: usize,
    /// Overlapping calls sent after the session's first call (nothing to follow).
    pub serialized: usize,
    /// Calls whose prompt is shorter than the previous call's on its model (a new prefix).
    pub compactions: usize,
    /// Calls whose segments add up to less than `prompt`, and the tokens added as a final
    /// unshared segment.
    pub short_segments: usize,
    pub short_tokens: u64,
    /// Calls whose segments add up to more than `prompt`, and the tokens cut.
    pub long_segments: usize,
    pub long_tokens: u64,
    /// Sessions without an LLM call (skipped).
    pub empty_sessions: usize,
    /// Prompt tokens, and of them what production found cached (`tokens.cached`).
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
}

impl Counts {
    /// One line for the run's notes.
    pub fn note(&self) -> String {
        let results: Vec<String> = self
            .not_success
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        let results = if results.is_empty() {
            "none".to_owned()
        } else {
            results.join(", ")
        };
        let cached_pct = 100.0 * self.cached_tokens as f64 / self.prompt_tokens.max(1) as f64;
        format!(
            "copilot: {} sessions, {} calls ({} parallel as background subagents, {} serialized), \
             {} compactions, calls not Success: {results}; production cached {} of {} prompt \
             tokens ({cached_pct:.2}%); segments short of `prompt`: {} calls (+{} tokens as a \
             final unshared segment), over: {} calls ({} tokens cut); {} sessions without calls \
             skipped",
            self.sessions,
            self.calls,
            self.parallel,
            self.serialized,
            self.compactions,
            self.cached_tokens,
            self.prompt_tokens,
            self.short_segments,
            self.short_tokens,
            self.long_segments,
            self.long_tokens,
            self.empty_sessions
        )
    }

    /// What production recorded, for `analyze`.
    pub fn production(&self) -> Production {
        Production {
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            segments_short: self.short_segments,
            segments_short_tokens: self.short_tokens,
            segments_over: self.long_segments,
            segments_over_tokens: self.long_tokens,
            not_success: self.not_success.iter().cloned().collect(),
        }
    }

    fn result(&mut self, r: &str) {
        match self.not_success.iter_mut().find(|(k, _)| k == r) {
            Some((_, n)) => *n += 1,
            None => self.not_success.push((r.to_owned(), 1)),
        }
    }
}

/// Reads a partition directory (its shards in name order) or one shard (plain or gzip).
pub fn load(path: &Path, opts: &LoadOptions) -> Result<(Corpus, Counts), TraceError> {
    opts.check(&path.display().to_string())?;
    let files = if path.is_dir() {
        shards(path)
    } else {
        vec![path.to_path_buf()]
    };
    let mut reader = Reader::new(opts);
    for f in &files {
        let name = f.display().to_string();
        let file = std::fs::File::open(f).map_err(|error| TraceError::Open {
            path: name.clone(),
            error,
        })?;
        reader.read(&name, file)?;
    }
    reader.finish(&path.display().to_string())
}

/// Builds a corpus from sessions read line by line; ids are numbered across every file.
pub struct Reader {
    block: usize,
    max_line: usize,
    next_id: u64,
    /// The ids of each model's system segment (by model and its length in tokens).
    system: HashMap<(Arc<str>, u32), BlockIds>,
    models: HashMap<String, Arc<str>>,
    corpus: Corpus,
    counts: Counts,
}

impl Reader {
    pub fn new(opts: &LoadOptions) -> Reader {
        Reader {
            block: opts.block_size.unwrap_or(FORMAT.info.block_size),
            max_line: opts.max_line_bytes.unwrap_or(DEFAULT_MAX_LINE_BYTES),
            next_id: 0,
            system: HashMap::new(),
            models: HashMap::new(),
            corpus: Corpus::default(),
            counts: Counts::default(),
        }
    }

    /// Reads every session line of `input` (plain or gzip), one line in memory at a time.
    pub fn read(&mut self, name: &str, input: impl Read + Send) -> Result<(), TraceError> {
        let cap = self.max_line;
        for_each_line(name, input, cap, |line, text| {
            self.add_line(name, line, text)
        })
    }

    /// The corpus read, and what was counted; an error when no session had a call.
    pub fn finish(mut self, name: &str) -> Result<(Corpus, Counts), TraceError> {
        if self.corpus.conversations.is_empty() {
            return Err(TraceError::Empty {
                path: name.to_owned(),
            });
        }
        self.corpus.production = Some(self.counts.production());
        self.corpus.dense_ids = Some(self.next_id);
        Ok((self.corpus, self.counts))
    }

    /// One session line.
    pub fn add_line(&mut self, name: &str, line: usize, text: &str) -> Result<(), TraceError> {
        let s: Session = parse_object(text).map_err(|e| row_error(name, line, e))?;
        let calls = timeline(&s).map_err(|(f, w)| field_error(name, line, f, w))?;
        if calls.is_empty() {
            self.counts.empty_sessions += 1;
            return Ok(());
        }
        let conv = self.conversation(&s, &calls, name, line);
        conv.check().map_err(|w| {
            row_error(
                name,
                line,
                RowError::Json(format!("session {}: {w}", conv.id)),
            )
        })?;
        self.counts.sessions += 1;
        self.corpus.conversations.push(conv);
        Ok(())
    }
}

/// One call placed on the session's timeline.
struct Timed<'a> {
    call: &'a Call,
    turn: usize,
    index: usize,
    start_ms: f64,
    end_ms: f64,
    /// The duration of the tool batch this call asked for, if any.
    tool_ms: Option<f64>,
}

/// The calls of `s` in order (turns as listed, calls by start within a turn), with their tool
/// batches; a bad field is `(its path, what)`.
fn timeline(s: &Session) -> Result<Vec<Timed<'_>>, (String, String)> {
    let mut calls: Vec<Timed> = Vec::new();
    let mut ids: HashMap<&str, usize> = HashMap::new();
    let mut last_turn_start: Option<(usize, f64)> = None;
    for (t, turn) in s.turns.iter().enumerate() {
        let first = calls.len();
        for (k, c) in turn.llm_calls.iter().enumerate() {
            let at = |f: &str| format!("turns[{t}].llm_calls[{k}].{f}");
            let start_ms = parse_time(&c.timestamp).map_err(|w| (at("timestamp"), w))?;
            if !c.duration_ms.is_finite() || !(0.0..=1e12).contains(&c.duration_ms) {
                let w = format!(
                    "must be a number of ms >= 0, found {}",
                    fields::short_num(c.duration_ms)
                );
                return Err((at("duration_ms"), w));
            }
            tokens(&c.tokens).map_err(|(f, w)| (at(f), w))?;
            if ids.insert(&c.message_id, calls.len()).is_some() {
                let w = format!(
                    "{} appears twice in the session",
                    fields::quote_short(&c.message_id)
                );
                return Err((at("message_id"), w));
            }
            calls.push(Timed {
                call: c,
                turn: t,
                index: k,
                start_ms,
                end_ms: start_ms + c.duration_ms,
                tool_ms: None,
            });
        }
        calls[first..].sort_by(|a, b| {
            a.start_ms
                .total_cmp(&b.start_ms)
                .then(a.index.cmp(&b.index))
        });
        if let Some(c) = calls.get(first) {
            if let Some((pt, ps)) = last_turn_start.filter(|(_, ps)| c.start_ms < *ps) {
                let w = format!(
                    "the turn starts at {}, before turn {pt} (at {}): turns must be in time order",
                    c.call.timestamp,
                    fields::short_num(ps)
                );
                return Err((format!("turns[{t}].llm_calls[{}].timestamp", c.index), w));
            }
            last_turn_start = Some((t, c.start_ms));
        }
        batches(turn, t, &ids, &mut calls)?;
    }
    Ok(calls)
}

/// Checks a call's lengths: a prompt of 1 to [`MAX_LENGTH_TOKENS`] tokens, a completion of at
/// most that; a bad one is `(its field, what)`.
fn tokens(t: &Tokens) -> Result<(), (&'static str, String)> {
    let max = MAX_LENGTH_TOKENS;
    if t.prompt == 0 || u64::from(t.prompt) > max {
        let w = format!("must be 1 to {max} tokens, found {}", t.prompt);
        return Err(("tokens.prompt", w));
    }
    if u64::from(t.completion) > max {
        let w = format!("must be at most {max} tokens, found {}", t.completion);
        return Err(("tokens.completion", w));
    }
    Ok(())
}

/// Gives each call the duration of the tool batches naming it (summed).
fn batches(
    turn: &Turn,
    t: usize,
    ids: &HashMap<&str, usize>,
    calls: &mut [Timed],
) -> Result<(), (String, String)> {
    for (b, batch) in turn.tool_batches.iter().enumerate() {
        let at = |f: &str| format!("turns[{t}].tool_batches[{b}].{f}");
        let Some(&i) = ids.get(batch.request_id.as_str()) else {
            let w = format!(
                "{} names no LLM call of the session (it must be a call's message_id)",
                fields::quote_short(&batch.request_id)
            );
            return Err((at("request_id"), w));
        };
        if !batch.duration_ms.is_finite() || !(0.0..=1e12).contains(&batch.duration_ms) {
            let w = format!(
                "must be a number of ms >= 0, found {}",
                fields::short_num(batch.duration_ms)
            );
            return Err((at("duration_ms"), w));
        }
        let c = &mut calls[i];
        c.tool_ms = Some(c.tool_ms.unwrap_or(0.0) + batch.duration_ms);
    }
    Ok(())
}

/// Milliseconds since the Unix epoch of an ISO-8601 time; without an offset, UTC.
fn parse_time(s: &str) -> Result<f64, String> {
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Ok(ts.as_microsecond() as f64 / 1000.0);
    }
    let dt: jiff::civil::DateTime = s
        .parse()
        .map_err(|e| format!("not an ISO-8601 time ({e}): {}", fields::quote_short(s)))?;
    let ts = dt
        .to_zoned(jiff::tz::TimeZone::UTC)
        .map_err(|e| format!("not a time ({e}): {}", fields::quote_short(s)))?;
    Ok(ts.timestamp().as_microsecond() as f64 / 1000.0)
}

/// The previous call of a session on one model: its segments (cut at its prompt), prompt and
/// ids.
struct Prev<'a> {
    segments: Vec<&'a Segment>,
    prompt: u32,
    ids: BlockIds,
}

/// The calls of a session placed so far: the main chain (and its calls' ends) and the parallel
/// calls as background subagents.
#[derive(Default)]
struct Chain<'a> {
    main: Vec<AgentRequest>,
    ends: Vec<f64>,
    subagents: Vec<Agent>,
    last: Option<&'a Timed<'a>>,
}

impl<'a> Chain<'a> {
    /// Places call `k` (`c`, its request `req`): after the main chain's last call, or beside it
    /// as a background subagent when it overlaps it.
    fn place(&mut self, k: usize, c: &'a Timed<'a>, mut req: AgentRequest, counts: &mut Counts) {
        let Some(p) = self.last else {
            self.push(c, c.end_ms, req);
            return;
        };
        if c.start_ms < p.end_ms && self.main.len() >= 2 {
            let after = self.main.len() - 2;
            let offset = (c.start_ms - self.ends[after]).max(0.0);
            req.gap = ClientGap {
                ms: offset,
                rule: GapRule::Spawn,
            };
            counts.parallel += 1;
            self.subagents.push(Agent {
                id: Arc::from(format!("p{k}")),
                kind: Some(Arc::from("parallel")),
                parent: Some(ParentLink {
                    agent: 0,
                    after,
                    spawn_offset_ms: offset,
                    join: None,
                    inherits_history: false,
                }),
                system_tokens: None,
                tool_tokens: None,
                start_ms: req.trace_ms,
                requests: vec![req],
            });
            return;
        }
        let (ms, rule) = if c.start_ms < p.end_ms {
            counts.serialized += 1;
            (0.0, GapRule::StartMinusServer)
        } else {
            match p.tool_ms.filter(|_| p.turn == c.turn) {
                Some(ms) => (ms, GapRule::ToolTime),
                None => (c.start_ms - p.end_ms, GapRule::StartMinusServer),
            }
        };
        req.gap = ClientGap { ms, rule };
        self.push(c, c.end_ms.max(p.end_ms), req);
    }

    fn push(&mut self, c: &'a Timed<'a>, end_ms: f64, req: AgentRequest) {
        self.main.push(req);
        self.ends.push(end_ms);
        self.last = Some(c);
    }
}

impl Reader {
    fn conversation<'a>(
        &mut self,
        s: &Session,
        calls: &'a [Timed<'a>],
        name: &str,
        line: usize,
    ) -> Conversation {
        let origin = calls[0].start_ms;
        let mut prev: HashMap<&str, Prev> = HashMap::new();
        let mut chain = Chain::default();
        let mut system_tokens = None;
        for (k, c) in calls.iter().enumerate() {
            self.counts.calls += 1;
            self.counts.prompt_tokens += u64::from(c.call.tokens.prompt);
            self.counts.cached_tokens += u64::from(c.call.tokens.cached.unwrap_or(0));
            if let Some(r) = c.call.result.as_deref().filter(|r| *r != "Success") {
                self.counts.result(r);
            }
            let overlaps = chain.last.is_some_and(|p| c.start_ms < p.end_ms);
            let (ids, sys) = self.prefix(c.call, overlaps, &mut prev);
            system_tokens = system_tokens.or((sys > 0).then_some(sys));
            let result = c.call.result.as_deref().filter(|r| *r != "Success");
            let req = AgentRequest {
                result: result.map(|r| self.model(r)),
                trace_ms: (c.start_ms - origin).max(0.0),
                input_length: c.call.tokens.prompt,
                output_length: c.call.tokens.completion,
                hash_ids: ids,
                stream: None,
                gap: ClientGap {
                    ms: 0.0,
                    rule: GapRule::First,
                },
                server_ms: Some(c.call.duration_ms),
                model: Some(self.model(&c.call.model)),
                origin: Origin {
                    line,
                    pointer: Some(format!("turns[{}].llm_calls[{}]", c.turn, c.index).into()),
                },
                messages: None,
            };
            chain.place(k, c, req, &mut self.counts);
        }
        let Chain {
            main, subagents, ..
        } = chain;
        let mut agents = vec![Agent {
            id: Arc::from(Agent::MAIN),
            kind: None,
            parent: None,
            system_tokens,
            tool_tokens: None,
            start_ms: 0.0,
            requests: main,
        }];
        agents.extend(subagents);
        Conversation {
            recorded_start_ms: Some(origin),
            id: Arc::from(s.session_id.as_str()),
            source: Arc::from(name),
            block_size: self.block,
            hash_scope: HashScope::Global,
            system_tokens,
            tool_tokens: None,
            agents,
        }
    }

    fn model(&mut self, m: &str) -> Arc<str> {
        if let Some(a) = self.models.get(m) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(m);
        self.models.insert(m.to_owned(), a.clone());
        a
    }

    /// The hash ids of call `c` and its system tokens, after the previous call on its model
    /// (`prev`). A call that `overlaps` the main chain's last call shares with it without being
    /// a compaction, and is no one's predecessor (the next call follows the main chain).
    fn prefix<'a>(
        &mut self,
        c: &'a Call,
        overlaps: bool,
        prev: &mut HashMap<&'a str, Prev<'a>>,
    ) -> (BlockIds, u32) {
        let prompt = c.tokens.prompt;
        let segments = self.segments(c);
        let system: u32 = segments
            .iter()
            .take_while(|s| {
                s.kind
                    .as_deref()
                    .is_some_and(|k| k.eq_ignore_ascii_case("system"))
            })
            .map(|s| s.token_len)
            .fold(0u32, u32::saturating_add)
            .min(prompt);
        let before = prev.get(c.model.as_str());
        let shared = match before {
            Some(p) if prompt < p.prompt && !overlaps => {
                self.counts.compactions += 1;
                0
            }
            Some(p) => {
                common(&segments, &p.segments).min(p.prompt).min(prompt) as usize / self.block
            }
            None => 0,
        };
        let n = blocks(prompt, self.block);
        let sys_blocks = system as usize / self.block;
        // the prefix is stored once, shared with the call it came from (`BlockIds`)
        let (prefix, reuse) = match before {
            Some(p) if shared >= sys_blocks && shared > 0 => (p.ids.clone(), shared),
            _ => (self.system_ids(&c.model, system), sys_blocks),
        };
        let reuse = reuse.min(prefix.len()).min(n);
        let fresh = n - reuse;
        let ids = BlockIds::extend(&prefix, reuse, self.next_id, fresh);
        self.next_id += fresh as u64;
        if !overlaps {
            let ids = ids.clone();
            prev.insert(
                c.model.as_str(),
                Prev {
                    segments,
                    prompt,
                    ids,
                },
            );
        }
        (ids, system)
    }

    /// The ids of the whole blocks of a `tokens`-long system segment of `model` (the same in
    /// every session).
    fn system_ids(&mut self, model: &str, tokens: u32) -> BlockIds {
        let n = tokens as usize / self.block;
        let key = (self.model(model), tokens);
        if let Some(ids) = self.system.get(&key) {
            return ids.clone();
        }
        let ids = BlockIds::range(self.next_id, n);
        self.next_id += n as u64;
        self.system.insert(key, ids.clone());
        ids
    }

    /// The segments of `c` by sequence id, cut where they pass `prompt`; the shortfall or the
    /// excess is counted.
    fn segments<'a>(&mut self, c: &'a Call) -> Vec<&'a Segment> {
        let mut segs: Vec<&Segment> = c.message_metadata.iter().collect();
        segs.sort_by_key(|s| s.sequence_id.unwrap_or(u64::MAX));
        let total: u64 = segs.iter().map(|s| u64::from(s.token_len)).sum();
        let prompt = u64::from(c.tokens.prompt);
        if total < prompt {
            self.counts.short_segments += 1;
            self.counts.short_tokens += prompt - total;
        } else if total > prompt {
            self.counts.long_segments += 1;
            self.counts.long_tokens += total - prompt;
            let mut sum = 0u64;
            segs.retain(|s| {
                sum += u64::from(s.token_len);
                sum <= prompt
            });
        }
        segs
    }
}

/// Tokens of the leading segments `a` and `b` have in common.
fn common(a: &[&Segment], b: &[&Segment]) -> u32 {
    a.iter()
        .zip(b)
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x.token_len)
        .fold(0u32, u32::saturating_add)
}

/// Copilot: a `date=` directory of shards, or a line with `session_id` and `turns` whose first
/// turn has `llm_calls`.
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo::corpus(
        "copilot",
        64,
        "GitHub Copilot coding-agent trace (June 2026): one session per line, a date= directory of shard-*.jsonl[.gz] files; prefixes built from the prompt segments",
    ),
    recognise: |p| match p.dir {
        Some(d) => !shards(d).is_empty(),
        None => {
            p.has("session_id")
                && p.json
                    .and_then(|o| o.get("turns"))
                    .and_then(|t| t.as_array())
                    .and_then(|t| t.first())
                    .is_some_and(|t| t.get("llm_calls").is_some())
        }
    },
    read: super::unit::Reader::Corpus {
        file: |name, input, opts| {
            let mut reader = Reader::new(opts);
            reader.read(name, input)?;
            let (mut corpus, counts) = reader.finish(name)?;
            corpus.notes.push(counts.note());
            Ok(corpus)
        },
        dir: Some(|dir, opts| {
            let (mut corpus, counts) = load(dir, opts)?;
            corpus.notes.push(counts.note());
            Ok(corpus)
        }),
    },
};

/// The shard files of a Copilot partition directory (`shard-*.jsonl`, `shard-*.jsonl.gz`), by
/// name; empty when `dir` is no directory or holds none.
pub(crate) fn shards(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("shard-") && (n.ends_with(".jsonl") || n.ends_with(".jsonl.gz"))
            })
        })
        .collect();
    files.sort();
    files
}
