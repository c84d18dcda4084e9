//! TraceLab round JSONL (`uw-syfi/TraceLab`, `round_trace.jsonl`): one JSON row per LLM round
//! of a coding-agent session.
//!
//! Fields read (others ignored): `session_id` (string or integer), `round_index` (order within
//! the session), `input_tokens_total`, `prefix_tokens` (the part of the input reused from the
//! previous round; `null` = 0), `output_tokens`, `timing_events` (`event_type` and ISO-8601
//! `timestamp`) and `tools` (`tool_wall_latency_ms`).
//!
//! - **Conversations**: rows grouped by `session_id` (in order of first appearance), ordered by
//!   `round_index` (ties: file order). Each session is one main agent; TraceLab records no
//!   parent link for subagents (a subagent's rounds are a session of their own), so none are
//!   made.
//! - **Hash ids** (TraceLab has none) are minted per session at the block size (`--block-size`,
//!   default 64): round k's first `min(prefix_tokens, input of round k-1) / block` whole blocks
//!   are round k-1's ids, the rest fresh ids. A partial last block is never shared. Round 0's
//!   prefix (reused from earlier sessions: the client's system prompt and tools) is fresh, and
//!   kept as the conversation's `system_tokens` (whole blocks).
//! - **Client gap** of round k >= 1 (rule `start_minus_server`): its submission time (its
//!   latest `user_message`/`tool_result` event; without one, its earliest model event) minus
//!   the end of round k-1 (its latest `reasoning`/`text`/`tool_call` event), at least 0: the
//!   tools' time, or the person's. When either is missing (rule `tool_time`): the longest
//!   `tool_wall_latency_ms` of round k-1 (0 when it ran no tool). A round's recorded start is
//!   its submission time, its server time from there to its latest model event.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::agent_fields::{blocks, field_error, parse_object, row_error};
use super::fields;
use super::unit::{Format, Reader};
use crate::trace::error::TraceError;
use crate::trace::model::FormatInfo;
use crate::trace::model::{
    Agent, AgentRequest, BlockIds, ClientGap, Conversation, Corpus, GapRule, HashScope, Origin,
};
use crate::trace::options::LoadOptions;

#[derive(Deserialize)]
struct Round {
    session_id: Value,
    #[serde(default)]
    round_index: Option<u64>,
    #[serde(default)]
    model: Option<String>,
    #[serde(deserialize_with = "fields::input_length")]
    input_tokens_total: u32,
    #[serde(default)]
    prefix_tokens: Option<u64>,
    #[serde(deserialize_with = "fields::output_length")]
    output_tokens: u32,
    #[serde(default)]
    timing_events: Option<Vec<Event>>,
    #[serde(default)]
    tools: Option<Vec<Tool>>,
}

#[derive(Deserialize)]
struct Event {
    event_type: String,
    #[serde(default)]
    timestamp: Option<String>,
}

#[derive(Deserialize)]
struct Tool {
    #[serde(default)]
    tool_wall_latency_ms: Option<f64>,
}

/// One checked round.
struct Checked {
    line: usize,
    round_index: u64,
    input: u32,
    prefix: u64,
    output: u32,
    model: Option<Arc<str>>,
    /// Submission and end, ms since the Unix epoch.
    submitted_ms: Option<f64>,
    end_ms: Option<f64>,
    longest_tool_ms: f64,
}

fn parse_time(s: &str) -> Result<f64, String> {
    let ts: jiff::Timestamp = s
        .parse()
        .map_err(|e| format!("not an ISO-8601 time ({e}): {}", fields::quote_short(s)))?;
    Ok(ts.as_microsecond() as f64 / 1000.0)
}

fn check(line: usize, text: &str, name: &str) -> Result<(String, Checked), TraceError> {
    let r: Round = parse_object(text).map_err(|e| row_error(name, line, e))?;
    let sid = fields::session_id(&r.session_id).map_err(|e| row_error(name, line, e))?;
    let times = timing(r.timing_events.iter().flatten())
        .map_err(|(k, w)| field_error(name, line, format!("timing_events[{k}].timestamp"), w))?;
    let longest_tool_ms = longest_tool(r.tools.iter().flatten())
        .map_err(|(k, w)| field_error(name, line, format!("tools[{k}].tool_wall_latency_ms"), w))?;
    Ok((
        sid,
        Checked {
            line,
            round_index: r.round_index.unwrap_or(0),
            input: r.input_tokens_total,
            prefix: r.prefix_tokens.unwrap_or(0),
            output: r.output_tokens,
            model: r.model.map(Arc::from),
            submitted_ms: times.inputs.or(times.first_out),
            end_ms: times.last_out,
            longest_tool_ms,
        },
    ))
}

/// What a round's timing events say (ms since the Unix epoch): its latest input event, its
/// earliest and latest model events.
#[derive(Default)]
struct Times {
    inputs: Option<f64>,
    first_out: Option<f64>,
    last_out: Option<f64>,
}

/// The times of `events`; a bad timestamp is `(its index, what)`.
fn timing<'a>(events: impl Iterator<Item = &'a Event>) -> Result<Times, (usize, String)> {
    let mut t = Times::default();
    for (k, e) in events.enumerate() {
        let Some(ts) = &e.timestamp else { continue };
        let at = parse_time(ts).map_err(|w| (k, w))?;
        match e.event_type.as_str() {
            "user_message" | "tool_result" => t.inputs = Some(t.inputs.map_or(at, |m| m.max(at))),
            "reasoning" | "text" | "tool_call" => {
                t.first_out = Some(t.first_out.map_or(at, |m| m.min(at)));
                t.last_out = Some(t.last_out.map_or(at, |m| m.max(at)));
            }
            // usage reports and event kinds added later carry no request timing
            _ => {}
        }
    }
    Ok(t)
}

/// The longest `tool_wall_latency_ms` of `tools` (0 without one), each a number of ms >= 0;
/// a bad one is `(its index, what)`.
fn longest_tool<'a>(tools: impl Iterator<Item = &'a Tool>) -> Result<f64, (usize, String)> {
    let mut longest = 0f64;
    for (k, t) in tools.enumerate() {
        let Some(ms) = t.tool_wall_latency_ms else {
            continue;
        };
        if !ms.is_finite() || !(0.0..=fields::MAX_ABS_TIMESTAMP_MS).contains(&ms) {
            let what = format!(
                "must be a number of ms >= 0, found {}",
                fields::short_num(ms)
            );
            return Err((k, what));
        }
        longest = longest.max(ms);
    }
    Ok(longest)
}

/// Builds the corpus from every non-blank line.
pub(crate) fn build(
    name: &str,
    rows: &[(usize, String)],
    opts: &LoadOptions,
) -> Result<Corpus, TraceError> {
    let block = opts.block_size.unwrap_or(FORMAT.info.block_size);
    let source: Arc<str> = Arc::from(name);
    let mut order: Vec<String> = Vec::new();
    let mut sessions: HashMap<String, Vec<Checked>> = HashMap::new();
    for (line, text) in rows {
        let (sid, round) = check(*line, text, name)?;
        match sessions.get_mut(&sid) {
            Some(v) => v.push(round),
            None => {
                order.push(sid.clone());
                sessions.insert(sid, vec![round]);
            }
        }
    }
    let mut conversations = Vec::with_capacity(order.len());
    for sid in order {
        let mut rounds = sessions.remove(&sid).unwrap_or_default();
        rounds.sort_by_key(|r| (r.round_index, r.line));
        conversations.push(conversation(&sid, &rounds, block, &source));
    }
    Ok(Corpus {
        production: None,
        dense_ids: None,
        conversations,
        notes: Vec::new(),
    })
}

fn conversation(id: &str, rounds: &[Checked], block: usize, source: &Arc<str>) -> Conversation {
    let mut next_id = 0u64;
    let origin = rounds
        .iter()
        .find_map(|r| r.submitted_ms.or(r.end_ms))
        .unwrap_or(0.0);
    let mut requests: Vec<AgentRequest> = Vec::with_capacity(rounds.len());
    let mut prev: Option<&Checked> = None;
    // The recorded timeline: a round without timestamps sits at the previous round's end.
    let mut clock = 0f64;
    for r in rounds {
        let empty = BlockIds::default();
        let (prefix, reuse) = match (prev, requests.last()) {
            (Some(p), Some(last)) => (&last.hash_ids, shared_blocks(r, p, &last.hash_ids, block)),
            _ => (&empty, 0),
        };
        let ids = mint_ids(prefix, reuse, blocks(r.input, block), &mut next_id);
        let start = r.submitted_ms.map(|s| s - origin).unwrap_or(clock).max(0.0);
        let end = r.end_ms.map(|e| (e - origin).max(start));
        clock = end.unwrap_or(start);
        requests.push(AgentRequest {
            result: None,
            trace_ms: start,
            input_length: r.input,
            output_length: r.output,
            hash_ids: ids,
            stream: None,
            gap: round_gap(r, prev),
            server_ms: end.map(|e| e - start),
            model: r.model.clone(),
            origin: Origin {
                line: r.line,
                pointer: None,
            },
            messages: None,
        });
        prev = Some(r);
    }
    let first = &rounds[0];
    let system_blocks = (first.prefix.min(u64::from(first.input)) as usize) / block;
    let system_tokens = (system_blocks > 0).then(|| (system_blocks * block) as u32);
    Conversation {
        recorded_start_ms: None,
        id: Arc::from(id),
        source: source.clone(),
        block_size: block,
        hash_scope: HashScope::Local,
        system_tokens,
        tool_tokens: None,
        agents: vec![Agent {
            id: Arc::from(Agent::MAIN),
            kind: None,
            parent: None,
            system_tokens,
            tool_tokens: None,
            start_ms: 0.0,
            requests,
        }],
    }
}

/// The client gap of round `r` after `prev` (none: the first).
fn round_gap(r: &Checked, prev: Option<&Checked>) -> ClientGap {
    let Some(p) = prev else {
        return ClientGap {
            ms: 0.0,
            rule: GapRule::First,
        };
    };
    match (r.submitted_ms, p.end_ms) {
        // submission minus (previous submission + its server time)
        (Some(s), Some(e)) => ClientGap {
            ms: (s - e).max(0.0),
            rule: GapRule::StartMinusServer,
        },
        _ => ClientGap {
            ms: p.longest_tool_ms,
            rule: GapRule::ToolTime,
        },
    }
}

/// How many ids round `r` shares with the previous round `p` (whose ids are `prev_ids`): the
/// whole blocks of its prefix that round `p` sent.
fn shared_blocks(r: &Checked, p: &Checked, prev_ids: &BlockIds, block: usize) -> usize {
    (r.prefix.min(u64::from(p.input)) as usize / block)
        .min(prev_ids.len())
        .min(blocks(r.input, block))
}

/// `n` ids: the first `reuse` of `prefix` (stored once, shared), then fresh ones from
/// `next_id` on.
fn mint_ids(prefix: &BlockIds, reuse: usize, n: usize, next_id: &mut u64) -> BlockIds {
    let fresh = n.saturating_sub(reuse);
    let ids = BlockIds::extend(prefix, reuse, *next_id, fresh);
    *next_id += fresh as u64;
    ids
}

/// TraceLab: a row with `prefix_tokens` and `round_index`.
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo::corpus(
        "tracelab",
        64,
        "TraceLab round JSONL: coding-agent sessions of rounds; hash ids minted from prefix_tokens (64-token blocks)",
    ),
    recognise: |p| p.has("prefix_tokens") && p.has("round_index"),
    read: Reader::Corpus {
        file: |name, input, opts| super::agent_jsonl::read_with(name, input, opts, build),
        dir: None,
    },
};
