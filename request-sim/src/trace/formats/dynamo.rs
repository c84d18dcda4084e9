//! Dynamo request traces (`ai-dynamo/dynamo`, `docs/observability/request-tracing.md`): JSONL
//! (or gzip segments) of `dynamo.request.trace.v1` records, each either the record itself or
//! wrapped as `{"timestamp": ms, "event": {record}}`.
//!
//! - `schema` must be `dynamo.request.trace.v1`; `event_type` `request_end` is a request,
//!   `request_payload`, `tool_start`, `tool_end` and `tool_error` are counted and skipped, any
//!   other value is an error.
//! - A request: `request.request_received_ms` (its start), `request.output_tokens`,
//!   `request.total_time_ms` (server time; else `event_time_unix_ms` minus the start), and
//!   `request.replay` {`trace_block_size`, `input_length`, `input_sequence_hashes`}. The block
//!   size is the file's (one value for every row; `--block-size` may only repeat it).
//! - **Ids**: the u64 sequence hashes are content hashes shared by the whole file; they are
//!   renumbered to small ids in order of first appearance (same hash, same id, in every
//!   conversation). More hashes than `ceil(input_length / trace_block_size)` are dropped.
//! - **Agents**: `agent_context.trajectory_id` (newer writers: `session_id`) names the agent;
//!   `parent_trajectory_id` (`parent_session_id`) its parent. A trajectory without a parent is
//!   a conversation's main agent, with every trajectory below it as subagents. A row without
//!   `agent_context` is a conversation of one request. A parent that has no request in the
//!   file, two parents for one trajectory, and a cycle of parents are errors.
//! - **Spawn**: a subagent follows the last request of its parent that started at or before
//!   its own first request, at its recorded offset from that request's completion (at least
//!   0). **Join**: when the parent started no request while the subagent ran, the parent's
//!   first request after the subagent's last completion waits for it; otherwise it ran in the
//!   background.
//! - **Client gap** (rule `start_minus_server`): a request's start minus the previous request
//!   of its agent's completion (`request_received_ms + total_time_ms`), or minus the latest
//!   completion of the subagents it joins when that is later; at least 0.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use super::agent_fields::{blocks, field_error, parse_object, row_error};
use super::fields;
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::{
    Agent, AgentRequest, ClientGap, Conversation, Corpus, GapRule, HashScope, Origin, ParentLink,
};
use crate::trace::options::LoadOptions;

/// The one schema version read.
pub const SCHEMA: &str = "dynamo.request.trace.v1";

/// Largest accepted `trace_block_size` (the `--block-size` limit).
const MAX_BLOCK: u64 = 1 << 20;

#[derive(Deserialize)]
struct Record {
    #[serde(default)]
    schema: Option<Value>,
    #[serde(default)]
    event_type: Option<Value>,
    #[serde(default)]
    event_time_unix_ms: Option<f64>,
    #[serde(default)]
    agent_context: Option<Value>,
    #[serde(default)]
    request: Option<Value>,
    #[serde(default)]
    event: Option<Value>,
}

#[derive(Deserialize)]
struct Context {
    #[serde(alias = "session_id")]
    trajectory_id: String,
    #[serde(default, alias = "parent_session_id")]
    parent_trajectory_id: Option<String>,
}

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    request_id: Option<Value>,
    #[serde(default)]
    model: Option<String>,
    #[serde(deserialize_with = "fields::output_length")]
    output_tokens: u32,
    #[serde(deserialize_with = "fields::timestamp_ms")]
    request_received_ms: f64,
    #[serde(default)]
    total_time_ms: Option<f64>,
    replay: Replay,
}

#[derive(Deserialize)]
struct Replay {
    trace_block_size: u64,
    #[serde(deserialize_with = "fields::input_length")]
    input_length: u32,
    input_sequence_hashes: Vec<u64>,
}

/// One `request_end` row, checked.
struct Row {
    line: usize,
    trajectory: Option<String>,
    parent: Option<String>,
    input_length: u32,
    output_length: u32,
    hash_ids: Vec<u64>,
    start_ms: f64,
    end_ms: Option<f64>,
    request_id: Option<String>,
    model: Option<Arc<str>>,
}

/// What one line is.
enum Line {
    Request(Row),
    Skipped,
}

fn sub<T: serde::de::DeserializeOwned>(v: Value, prefix: &str) -> Result<T, RowError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let field = if path.is_empty() || path == "." {
            prefix.to_owned()
        } else {
            format!("{prefix}.{path}")
        };
        RowError::Field {
            field,
            what: e.inner().to_string(),
        }
    })
}

struct Ids {
    map: HashMap<u64, u64>,
}

impl Ids {
    fn id(&mut self, hash: u64) -> u64 {
        let next = self.map.len() as u64;
        *self.map.entry(hash).or_insert(next)
    }
}

fn check_line(
    text: &str,
    line: usize,
    name: &str,
    block: &mut Option<(u64, usize)>,
    forced_block: Option<usize>,
    ids: &mut Ids,
) -> Result<Line, TraceError> {
    let err = |e| row_error(name, line, e);
    let outer: Record = parse_object(text).map_err(err)?;
    let (rec, prefix) = match outer.event {
        Some(ev @ Value::Object(_)) => (sub::<Record>(ev, "event").map_err(err)?, "event."),
        Some(other) => {
            return Err(field_error(
                name,
                line,
                "event",
                format!(
                    "expected a trace record object, found {}",
                    fields::describe_value(&other)
                ),
            ))
        }
        None => (outer, ""),
    };
    let bad = |field: &str, what: String| field_error(name, line, format!("{prefix}{field}"), what);
    match &rec.schema {
        Some(Value::String(s)) if s == SCHEMA => {}
        Some(Value::String(s)) => {
            return Err(bad(
                "schema",
                format!(
                    "unknown schema {} (this reader knows {SCHEMA})",
                    fields::quote_short(s)
                ),
            ))
        }
        Some(v) => {
            return Err(bad(
                "schema",
                format!("expected a string, found {}", fields::describe_value(v)),
            ))
        }
        None => return Err(bad("schema", format!("missing (expected {SCHEMA:?})"))),
    }
    let event_type = match &rec.event_type {
        Some(Value::String(s)) => s.as_str(),
        Some(v) => {
            return Err(bad(
                "event_type",
                format!("expected a string, found {}", fields::describe_value(v)),
            ))
        }
        None => return Err(bad("event_type", "missing".into())),
    };
    match event_type {
        "request_end" => {}
        "request_payload" | "tool_start" | "tool_end" | "tool_error" => return Ok(Line::Skipped),
        other => {
            return Err(bad(
                "event_type",
                format!(
                    "unknown event type {} (known: request_end, request_payload, tool_start, tool_end, tool_error)",
                    fields::quote_short(other)
                ),
            ))
        }
    }
    let ctx = match rec.agent_context {
        None | Some(Value::Null) => None,
        Some(v) => Some(sub::<Context>(v, &format!("{prefix}agent_context")).map_err(err)?),
    };
    if let Some(c) = &ctx {
        if c.trajectory_id.is_empty() {
            return Err(bad(
                "agent_context.trajectory_id",
                "must not be empty".into(),
            ));
        }
        if c.parent_trajectory_id.as_deref() == Some("") {
            return Err(bad(
                "agent_context.parent_trajectory_id",
                "must not be empty (omit it or use null for a main agent)".into(),
            ));
        }
    }
    let Some(req) = rec.request else {
        return Err(bad(
            "request",
            "missing (a request_end record carries its request)".into(),
        ));
    };
    let req: Request = sub(req, &format!("{prefix}request")).map_err(err)?;
    let r = &req.replay;
    if r.trace_block_size == 0 || r.trace_block_size > MAX_BLOCK {
        return Err(bad(
            "request.replay.trace_block_size",
            format!(
                "must be between 1 and {MAX_BLOCK}, found {}",
                r.trace_block_size
            ),
        ));
    }
    match *block {
        None => {
            if let Some(f) = forced_block {
                if f as u64 != r.trace_block_size {
                    return Err(bad(
                        "request.replay.trace_block_size",
                        format!(
                            "the file's hash ids are at {} tokens per block; --block-size {f} contradicts it",
                            r.trace_block_size
                        ),
                    ));
                }
            }
            *block = Some((r.trace_block_size, line));
        }
        Some((b, first)) if b != r.trace_block_size => {
            return Err(bad(
                "request.replay.trace_block_size",
                format!(
                    "{} differs from {b} on line {first} (one block size per file)",
                    r.trace_block_size
                ),
            ))
        }
        Some(_) => {}
    }
    let need = blocks(r.input_length, r.trace_block_size as usize);
    let hash_ids: Vec<u64> = r
        .input_sequence_hashes
        .iter()
        .take(need)
        .map(|&h| ids.id(h))
        .collect();
    let end_ms = match req.total_time_ms {
        Some(t) if !t.is_finite() || !(0.0..=fields::MAX_ABS_TIMESTAMP_MS).contains(&t) => {
            return Err(bad(
                "request.total_time_ms",
                format!(
                    "must be a number of ms >= 0, found {}",
                    fields::short_num(t)
                ),
            ))
        }
        Some(t) => Some(req.request_received_ms + t),
        None => rec
            .event_time_unix_ms
            .filter(|e| e.is_finite() && *e >= req.request_received_ms),
    };
    let request_id = match req.request_id {
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    let (trajectory, parent) = match ctx {
        Some(c) => (Some(c.trajectory_id), c.parent_trajectory_id),
        None => (None, None),
    };
    Ok(Line::Request(Row {
        line,
        trajectory,
        parent,
        input_length: r.input_length,
        output_length: req.output_tokens,
        hash_ids,
        start_ms: req.request_received_ms,
        end_ms,
        request_id,
        model: req.model.map(Arc::from),
    }))
}

/// One trajectory: its rows in start order and its parent.
struct Trajectory {
    id: String,
    line: usize,
    parent: Option<String>,
    rows: Vec<Row>,
}

/// Builds the corpus from every non-blank line.
pub(crate) fn build(
    name: &str,
    lines: &[(usize, String)],
    opts: &LoadOptions,
) -> Result<Corpus, TraceError> {
    let mut block = None;
    let mut ids = Ids {
        map: HashMap::new(),
    };
    // tool and payload events: counted for the message of a file without requests
    let mut ignored = 0usize;
    // Conversations in order of first appearance: trajectories and context-free requests.
    let mut trajectories: Vec<Trajectory> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut singles: Vec<(usize, Row)> = Vec::new();
    let mut firsts: Vec<Result<usize, usize>> = Vec::new();
    for (line, text) in lines {
        let row = match check_line(text, *line, name, &mut block, opts.block_size, &mut ids)? {
            Line::Skipped => {
                ignored += 1;
                continue;
            }
            Line::Request(r) => r,
        };
        let Some(tid) = row.trajectory.clone() else {
            firsts.push(Err(singles.len()));
            singles.push((*line, row));
            continue;
        };
        match by_id.get(&tid) {
            Some(&i) => {
                let t = &mut trajectories[i];
                if t.parent != row.parent {
                    return Err(field_error(
                        name,
                        *line,
                        "agent_context.parent_trajectory_id",
                        format!(
                            "trajectory {} has parent {} here but {} on line {}",
                            fields::quote_short(&tid),
                            show(&row.parent),
                            show(&t.parent),
                            t.line
                        ),
                    ));
                }
                t.rows.push(row);
            }
            None => {
                by_id.insert(tid.clone(), trajectories.len());
                firsts.push(Ok(trajectories.len()));
                trajectories.push(Trajectory {
                    id: tid,
                    line: *line,
                    parent: row.parent.clone(),
                    rows: vec![row],
                });
            }
        }
    }
    let Some((block, _)) = block else {
        return Err(TraceError::NoRequests {
            path: name.to_owned(),
            reason: format!("no request_end records ({ignored} other events)"),
        });
    };
    for t in &mut trajectories {
        t.rows
            .sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms).then(a.line.cmp(&b.line)));
    }
    // Parent links: every parent present, no cycles.
    let mut parent_of: Vec<Option<usize>> = Vec::with_capacity(trajectories.len());
    for t in &trajectories {
        parent_of.push(match &t.parent {
            None => None,
            Some(p) => Some(*by_id.get(p).ok_or_else(|| {
                field_error(
                    name,
                    t.line,
                    "agent_context.parent_trajectory_id",
                    format!(
                        "names trajectory {}, which has no request_end in the file",
                        fields::quote_short(p)
                    ),
                )
            })?),
        });
    }
    for (i, t) in trajectories.iter().enumerate() {
        let mut path = vec![i];
        let mut cur = i;
        while let Some(p) = parent_of[cur] {
            if let Some(k) = path.iter().position(|&x| x == p) {
                let names: Vec<String> = path[k..]
                    .iter()
                    .chain(std::iter::once(&p))
                    .map(|&x| trajectories[x].id.clone())
                    .collect();
                return Err(field_error(
                    name,
                    trajectories[path[k]].line.min(t.line),
                    "agent_context.parent_trajectory_id",
                    format!("trajectories form a cycle: {}", names.join(" -> ")),
                ));
            }
            path.push(p);
            cur = p;
        }
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); trajectories.len()];
    for (i, p) in parent_of.iter().enumerate() {
        if let Some(p) = p {
            children[*p].push(i);
        }
    }
    let source: Arc<str> = Arc::from(name);
    let block = block as usize;
    let mut slots: Vec<Option<Trajectory>> = trajectories.into_iter().map(Some).collect();
    let mut singles: Vec<Option<(usize, Row)>> = singles.into_iter().map(Some).collect();
    let mut conversations = Vec::new();
    for first in firsts {
        match first {
            Err(k) => {
                let Some((line, row)) = singles[k].take() else {
                    continue;
                };
                let id = row
                    .request_id
                    .clone()
                    .unwrap_or_else(|| format!("line-{line}"));
                let first = ClientGap {
                    ms: 0.0,
                    rule: GapRule::First,
                };
                let requests = vec![request(&row, row.start_ms, first)];
                conversations.push(conversation(id, &source, block, vec![main(requests)]));
            }
            Ok(i) if parent_of[i].is_none() => {
                conversations.push(tree(i, &mut slots, &children, &source, block));
            }
            Ok(_) => {}
        }
    }
    Ok(Corpus { conversations })
}

fn show(p: &Option<String>) -> String {
    p.as_deref()
        .map(fields::quote_short)
        .unwrap_or_else(|| "none".into())
}

fn main(requests: Vec<AgentRequest>) -> Agent {
    Agent {
        id: Arc::from(Agent::MAIN),
        kind: None,
        parent: None,
        system_tokens: None,
        tool_tokens: None,
        start_ms: 0.0,
        requests,
    }
}

fn conversation(id: String, source: &Arc<str>, block: usize, agents: Vec<Agent>) -> Conversation {
    Conversation {
        id: Arc::from(id),
        source: source.clone(),
        block_size: block,
        hash_scope: HashScope::Global,
        system_tokens: None,
        tool_tokens: None,
        agents,
    }
}

fn request(row: &Row, origin: f64, gap: ClientGap) -> AgentRequest {
    let start = row.start_ms - origin;
    AgentRequest {
        trace_ms: start,
        input_length: row.input_length,
        output_length: row.output_length,
        hash_ids: row.hash_ids.clone(),
        stream: None,
        gap,
        server_ms: row.end_ms.map(|e| (e - row.start_ms).max(0.0)),
        model: row.model.clone(),
        origin: Origin {
            line: row.line,
            pointer: None,
        },
        messages: None,
    }
}

/// The conversation rooted at trajectory `root`: agents parents first (breadth first, children
/// by their first start).
fn tree(
    root: usize,
    slots: &mut [Option<Trajectory>],
    children: &[Vec<usize>],
    source: &Arc<str>,
    block: usize,
) -> Conversation {
    let first_start = |slots: &[Option<Trajectory>], t: usize| {
        slots[t].as_ref().map_or(0.0, |x| x.rows[0].start_ms)
    };
    let mut order = vec![(root, None::<usize>)];
    let mut k = 0;
    while k < order.len() {
        let (t, _) = order[k];
        let mut kids = children[t].clone();
        kids.sort_by(|&a, &b| {
            first_start(slots, a)
                .total_cmp(&first_start(slots, b))
                .then(a.cmp(&b))
        });
        order.extend(kids.into_iter().map(|c| (c, Some(k))));
        k += 1;
    }
    let trajs: Vec<Trajectory> = order.iter().filter_map(|(t, _)| slots[*t].take()).collect();
    let origin = trajs
        .iter()
        .flat_map(|t| t.rows.iter().map(|r| r.start_ms))
        .fold(f64::INFINITY, f64::min);
    let end_of = |r: &Row| r.end_ms.unwrap_or(r.start_ms);
    // Spawn and join points of every subagent.
    let mut links: Vec<Option<ParentLink>> = vec![None; trajs.len()];
    let mut joined_end: Vec<HashMap<usize, f64>> = vec![HashMap::new(); trajs.len()];
    for (a, (_, parent)) in order.iter().enumerate() {
        let Some(p) = *parent else { continue };
        let child = &trajs[a];
        let pr = &trajs[p].rows;
        let c_start = child.rows[0].start_ms;
        let c_end = child.rows.iter().map(end_of).fold(c_start, f64::max);
        // A child that started before its parent's first request follows that request.
        let after = pr.iter().rposition(|r| r.start_ms <= c_start).unwrap_or(0);
        let spawn_offset_ms = (c_start - end_of(&pr[after])).max(0.0);
        let busy = pr[after + 1..]
            .iter()
            .any(|r| r.start_ms > c_start && r.start_ms < c_end);
        let join = if busy {
            None
        } else {
            (after + 1..pr.len()).find(|&j| pr[j].start_ms >= c_end)
        };
        if let Some(j) = join {
            let e = joined_end[p].entry(j).or_insert(c_end);
            *e = e.max(c_end);
        }
        links[a] = Some(ParentLink {
            agent: p,
            after,
            spawn_offset_ms,
            join,
            inherits_history: false,
        });
    }
    let mut agents = Vec::with_capacity(trajs.len());
    for (a, t) in trajs.iter().enumerate() {
        let link = links[a].take();
        let mut requests = Vec::with_capacity(t.rows.len());
        for (j, row) in t.rows.iter().enumerate() {
            let gap = match (j, &link) {
                (0, None) => ClientGap {
                    ms: 0.0,
                    rule: GapRule::First,
                },
                (0, Some(l)) => ClientGap {
                    ms: l.spawn_offset_ms,
                    rule: GapRule::Spawn,
                },
                _ => {
                    let prev = end_of(&t.rows[j - 1]);
                    match joined_end[a].get(&j) {
                        Some(&e) if e > prev => ClientGap {
                            ms: (row.start_ms - e).max(0.0),
                            rule: GapRule::AfterJoin,
                        },
                        _ => ClientGap {
                            ms: (row.start_ms - prev).max(0.0),
                            rule: GapRule::StartMinusServer,
                        },
                    }
                }
            };
            requests.push(request(row, origin, gap));
        }
        let id = if a == 0 {
            Agent::MAIN.to_owned()
        } else if t.id == Agent::MAIN {
            format!("{}#{a}", t.id)
        } else {
            t.id.clone()
        };
        agents.push(Agent {
            id: Arc::from(id),
            kind: None,
            parent: link,
            system_tokens: None,
            tool_tokens: None,
            start_ms: t.rows[0].start_ms - origin,
            requests,
        });
    }
    conversation(trajs[0].id.clone(), source, block, agents)
}
