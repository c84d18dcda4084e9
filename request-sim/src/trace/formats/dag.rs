//! AIPerf `dag_jsonl` (`ai-dynamo/aiperf`, `docs/benchmark-modes/dag.md`): one conversation per
//! line, `{"session_id": "root", "turns": [...], "pre_session_spawns": [...],
//! "context_mode": ...}`; a turn is `{"messages": [...], "max_tokens": N, "tools": [...],
//! "extra": {...}, "model": "...", "delay": ms, "forks": [...], "spawns": [...]}`.
//!
//! - **Conversations**: the sessions no other session names (roots), in file order; every
//!   session a root reaches through `forks`, `spawns` or `pre_session_spawns` is a subagent of
//!   it. A `spawns` target named by several parents is copied under each (AIPerf treats it as a
//!   template); a `forks` target may have one fork parent only.
//! - **Spawn and join**: a child starts when the turn that names it completes, after its own
//!   turn 0 `delay`. Bare `spawns: ["x"]` joins at the next turn of the parent (none: not
//!   joined); `{"children": [...], "join_at": K}` joins at turn K (the parent runs the turns
//!   between concurrently). `forks` never join: a bare fork ends its parent (only allowed on the
//!   last turn), `{"child": "x", "background": true}` runs beside it. `pre_session_spawns`
//!   run in the background from the completion of the parent's first turn (AIPerf sends them
//!   before it; a request-sim subagent follows one of its parent's requests).
//! - **Messages** carry real text and are sent as written. By default (`context_mode`
//!   `deltas_without_responses`) a conversation accumulates: turn k sends every earlier turn's
//!   messages then its own, and a fork child starts from its parent's history; AIPerf threads
//!   the model's answers into that history, which request-sim does with `--live-history` (without
//!   it, the history goes without answers). `message_array_with_responses`: each turn is sent as
//!   exactly its own messages.
//! - **Client gap** (rule `delay`): the turn's `delay` (ms) after the previous turn completed.
//!   The per-turn `model` is not sent (the replay's model is). The format has no token counts
//!   or hash ids: prompts are the messages.
//! - Refused with a message: unknown keys (AIPerf rejects them too), orchestrator conversations
//!   (`orchestrator`, `rounds`, `think_time_*`, conversation-level `spawns`), an unknown
//!   `context_mode`, duplicate session ids, undeclared targets, `join_at` outside the
//!   conversation, and a cycle of sessions.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::agent_fields::{field_error, row_error};
use super::fields;
use super::messages::{check_messages, take_extra, take_tools};
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::ChatPayload;
use crate::trace::model::TraceFormat;
use crate::trace::model::{
    Agent, AgentRequest, ClientGap, Conversation, Corpus, GapRule, HashScope, Origin, ParentLink,
};
use crate::trace::options::LoadOptions;

/// Most agents one conversation may expand to (spawn templates nest multiplicatively).
pub const MAX_AGENTS: usize = 10_000;

const CONVERSATION_KEYS: [&str; 3] = ["session_id", "turns", "pre_session_spawns"];
const ORCHESTRATOR_KEYS: [&str; 7] = [
    "orchestrator",
    "spawns",
    "rounds",
    "think_time_ms",
    "think_time_sigma",
    "think_time_min_ms",
    "think_time_max_ms",
];
const TURN_KEYS: [&str; 8] = [
    "messages",
    "model",
    "max_tokens",
    "tools",
    "extra",
    "forks",
    "spawns",
    "delay",
];

/// A child named by a turn.
#[derive(Debug, Clone)]
struct ChildRef {
    session: String,
    /// JSON path of the reference, for messages.
    path: String,
    fork: bool,
    /// Turn index of the parent that waits for it.
    join: Option<usize>,
}

struct Turn {
    model: Option<Arc<str>>,
    messages: Vec<Value>,
    tools: Option<Value>,
    extra: Option<Map<String, Value>>,
    max_tokens: Option<u32>,
    delay_ms: f64,
    children: Vec<ChildRef>,
}

struct Session {
    id: String,
    line: usize,
    turns: Vec<Turn>,
    accumulate: bool,
    pre: Vec<ChildRef>,
}

fn bad(field: impl Into<String>, what: impl Into<String>) -> RowError {
    RowError::Field {
        field: field.into(),
        what: what.into(),
    }
}

fn prefixed(prefix: &str, e: RowError) -> RowError {
    match e {
        RowError::Field { field, what } => RowError::Field {
            field: format!("{prefix}.{field}"),
            what,
        },
        other => other,
    }
}

fn id_string(v: &Value, path: &str) -> Result<String, RowError> {
    match v {
        Value::String(s) if !s.is_empty() => Ok(s.clone()),
        other => Err(bad(
            path,
            format!(
                "expected a non-empty session id string, found {}",
                fields::describe_value(other)
            ),
        )),
    }
}

fn id_list(v: &Value, path: &str) -> Result<Vec<String>, RowError> {
    let items = v.as_array().ok_or_else(|| {
        bad(
            path,
            format!(
                "expected an array of session ids, found {}",
                fields::describe_value(v)
            ),
        )
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, x)| id_string(x, &format!("{path}[{i}]")))
        .collect()
}

fn only_keys(obj: &Map<String, Value>, keys: &[&str], path: &str) -> Result<(), RowError> {
    for k in obj.keys() {
        if !keys.contains(&k.as_str()) {
            let at = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            return Err(bad(at, format!("unknown key (known: {})", keys.join(", "))));
        }
    }
    Ok(())
}

fn parse_turn(v: Value, k: usize, n: usize) -> Result<Turn, RowError> {
    let path = format!("turns[{k}]");
    let Value::Object(mut t) = v else {
        return Err(bad(
            &path,
            format!(
                "expected a turn object, found {}",
                fields::describe_value(&v)
            ),
        ));
    };
    only_keys(&t, &TURN_KEYS, &path)?;
    let messages = t.remove("messages").ok_or_else(|| {
        bad(
            format!("{path}.messages"),
            "missing (every turn sends messages)",
        )
    })?;
    check_messages(&messages).map_err(|e| prefixed(&path, e))?;
    let Value::Array(messages) = messages else {
        unreachable!("check_messages accepts arrays only")
    };
    let tools = take_tools(&mut t).map_err(|e| prefixed(&path, e))?;
    let extra = take_extra(&mut t).map_err(|e| prefixed(&path, e))?;
    let max_tokens = match t.remove("max_tokens") {
        None | Some(Value::Null) => None,
        Some(Value::Number(x)) if x.as_u64().is_some() => Some(
            fields::check_length(x.as_u64().unwrap_or(0), 1)
                .map_err(|w| bad(format!("{path}.max_tokens"), w))?,
        ),
        Some(other) => {
            return Err(bad(
                format!("{path}.max_tokens"),
                format!(
                    "expected a positive integer, found {}",
                    fields::describe_value(&other)
                ),
            ))
        }
    };
    let delay_ms = match t.remove("delay") {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(x)) => {
            let d = x.as_f64().unwrap_or(f64::NAN);
            if !d.is_finite() || !(0.0..=fields::MAX_ABS_TIMESTAMP_MS).contains(&d) {
                return Err(bad(
                    format!("{path}.delay"),
                    format!("must be a number of ms >= 0, found {x}"),
                ));
            }
            d
        }
        Some(other) => {
            return Err(bad(
                format!("{path}.delay"),
                format!(
                    "expected a number of ms, found {}",
                    fields::describe_value(&other)
                ),
            ))
        }
    };
    let model = match t.remove("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(Arc::from(m)),
        Some(m) => {
            return Err(bad(
                format!("{path}.model"),
                format!("expected a string, found {}", fields::describe_value(&m)),
            ))
        }
    };
    let mut children = Vec::new();
    if let Some(forks) = t.remove("forks") {
        let items = forks.as_array().ok_or_else(|| {
            bad(
                format!("{path}.forks"),
                format!(
                    "expected an array, found {}",
                    fields::describe_value(&forks)
                ),
            )
        })?;
        for (i, f) in items.iter().enumerate() {
            let fp = format!("{path}.forks[{i}]");
            let (session, background) = match f {
                Value::Object(o) => {
                    only_keys(o, &["child", "background"], &fp)?;
                    let child = o
                        .get("child")
                        .ok_or_else(|| bad(format!("{fp}.child"), "missing"))?;
                    let bg = match o.get("background") {
                        None | Some(Value::Null) => false,
                        Some(Value::Bool(b)) => *b,
                        Some(other) => {
                            return Err(bad(
                                format!("{fp}.background"),
                                format!(
                                    "expected a boolean, found {}",
                                    fields::describe_value(other)
                                ),
                            ))
                        }
                    };
                    (id_string(child, &format!("{fp}.child"))?, bg)
                }
                other => (id_string(other, &fp)?, false),
            };
            if !background && k + 1 != n {
                return Err(bad(
                    fp,
                    "a bare fork ends its conversation, so it is only allowed on the last turn (use {\"child\": ..., \"background\": true} to keep going)",
                ));
            }
            children.push(ChildRef {
                session,
                path: fp,
                fork: true,
                join: None,
            });
        }
    }
    if let Some(spawns) = t.remove("spawns") {
        let items = spawns.as_array().ok_or_else(|| {
            bad(
                format!("{path}.spawns"),
                format!(
                    "expected an array, found {}",
                    fields::describe_value(&spawns)
                ),
            )
        })?;
        for (i, s) in items.iter().enumerate() {
            let sp = format!("{path}.spawns[{i}]");
            match s {
                Value::Object(o) => {
                    only_keys(o, &["children", "join_at"], &sp)?;
                    let kids = o
                        .get("children")
                        .ok_or_else(|| bad(format!("{sp}.children"), "missing"))?;
                    let kids = id_list(kids, &format!("{sp}.children"))?;
                    if kids.is_empty() {
                        return Err(bad(
                            format!("{sp}.children"),
                            "must name at least one session",
                        ));
                    }
                    let join = match o.get("join_at") {
                        None | Some(Value::Null) => (k + 1 < n).then_some(k + 1),
                        Some(Value::Number(x)) => match x.as_u64() {
                            Some(j) if (j as usize) > k && (j as usize) < n => Some(j as usize),
                            _ => {
                                return Err(bad(
                                    format!("{sp}.join_at"),
                                    format!("must be a turn index after this turn ({k}) and before the conversation's end ({n} turns), found {x}"),
                                ))
                            }
                        },
                        Some(other) => {
                            return Err(bad(
                                format!("{sp}.join_at"),
                                format!("expected a turn index, found {}", fields::describe_value(other)),
                            ))
                        }
                    };
                    for (c, kid) in kids.into_iter().enumerate() {
                        children.push(ChildRef {
                            session: kid,
                            path: format!("{sp}.children[{c}]"),
                            fork: false,
                            join,
                        });
                    }
                }
                other => children.push(ChildRef {
                    session: id_string(other, &sp)?,
                    path: sp,
                    fork: false,
                    join: (k + 1 < n).then_some(k + 1),
                }),
            }
        }
    }
    Ok(Turn {
        model,
        messages,
        tools,
        extra,
        max_tokens,
        delay_ms,
        children,
    })
}

fn parse_session(line: usize, text: &str) -> Result<Session, RowError> {
    let mut obj: Map<String, Value> = fields::from_json_line(text)?;
    for k in ORCHESTRATOR_KEYS {
        if obj.contains_key(k) {
            return Err(bad(
                k,
                "orchestrator conversations (orchestrator, rounds, think_time_*, conversation-level spawns) are not supported; write the rounds as turns with spawns and join_at",
            ));
        }
    }
    let accumulate = match obj.remove("context_mode") {
        None | Some(Value::Null) => true,
        Some(Value::String(m)) => match m.to_ascii_lowercase().as_str() {
            "deltas_without_responses" => true,
            "message_array_with_responses" => false,
            _ => {
                return Err(bad(
                    "context_mode",
                    format!(
                        "unknown value {} (known: deltas_without_responses, message_array_with_responses)",
                        fields::quote_short(&m)
                    ),
                ))
            }
        },
        Some(other) => {
            return Err(bad(
                "context_mode",
                format!("expected a string, found {}", fields::describe_value(&other)),
            ))
        }
    };
    only_keys(&obj, &CONVERSATION_KEYS, "")?;
    let id = id_string(
        obj.get("session_id")
            .ok_or_else(|| bad("session_id", "missing"))?,
        "session_id",
    )?;
    let turns = match obj.remove("turns") {
        Some(Value::Array(t)) if !t.is_empty() => t,
        Some(Value::Array(_)) => return Err(bad("turns", "must hold at least one turn")),
        Some(other) => {
            return Err(bad(
                "turns",
                format!(
                    "expected an array of turns, found {}",
                    fields::describe_value(&other)
                ),
            ))
        }
        None => return Err(bad("turns", "missing")),
    };
    let n = turns.len();
    let turns = turns
        .into_iter()
        .enumerate()
        .map(|(k, t)| parse_turn(t, k, n))
        .collect::<Result<Vec<_>, _>>()?;
    let pre = match obj.get("pre_session_spawns") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => id_list(v, "pre_session_spawns")?
            .into_iter()
            .enumerate()
            .map(|(i, s)| ChildRef {
                session: s,
                path: format!("pre_session_spawns[{i}]"),
                fork: false,
                join: None,
            })
            .collect(),
    };
    Ok(Session {
        id,
        line,
        turns,
        accumulate,
        pre,
    })
}

/// Builds the corpus from every non-blank line.
pub(crate) fn build(
    name: &str,
    lines: &[(usize, String)],
    _opts: &LoadOptions,
) -> Result<Corpus, TraceError> {
    let mut sessions: Vec<Session> = Vec::with_capacity(lines.len());
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for (line, text) in lines {
        let s = parse_session(*line, text).map_err(|e| row_error(name, *line, e))?;
        if let Some(&first) = by_id.get(&s.id) {
            return Err(field_error(
                name,
                *line,
                "session_id",
                format!(
                    "duplicate session id {} (first on line {})",
                    fields::quote_short(&s.id),
                    sessions[first].line
                ),
            ));
        }
        by_id.insert(s.id.clone(), sessions.len());
        sessions.push(s);
    }
    // Every reference resolved; a session forked from one parent at most; no cycles.
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); sessions.len()];
    let mut referenced = vec![false; sessions.len()];
    let mut fork_parent: Vec<Option<usize>> = vec![None; sessions.len()];
    for (i, s) in sessions.iter().enumerate() {
        let refs = s.pre.iter().chain(s.turns.iter().flat_map(|t| &t.children));
        for r in refs {
            let &c = by_id.get(&r.session).ok_or_else(|| {
                field_error(
                    name,
                    s.line,
                    &r.path,
                    format!(
                        "names session {}, which no line of the file declares",
                        fields::quote_short(&r.session)
                    ),
                )
            })?;
            if r.fork {
                if let Some(p) = fork_parent[c] {
                    if p != i {
                        return Err(field_error(
                            name,
                            s.line,
                            &r.path,
                            format!(
                                "session {} is already forked from {} (line {}); a fork child has one parent",
                                fields::quote_short(&r.session),
                                fields::quote_short(&sessions[p].id),
                                sessions[p].line
                            ),
                        ));
                    }
                }
                fork_parent[c] = Some(i);
            }
            referenced[c] = true;
            edges[i].push(c);
        }
    }
    if let Some(cycle) = find_cycle(&edges) {
        let names: Vec<&str> = cycle.iter().map(|&i| sessions[i].id.as_str()).collect();
        let line = sessions[cycle[0]].line;
        return Err(field_error(
            name,
            line,
            "session_id",
            format!("sessions form a cycle: {}", names.join(" -> ")),
        ));
    }
    let source: Arc<str> = Arc::from(name);
    let mut conversations = Vec::new();
    for (i, named) in referenced.iter().enumerate() {
        if !named {
            conversations.push(expand(name, &source, &sessions, &by_id, i)?);
        }
    }
    Ok(Corpus { conversations })
}

/// A cycle of the reference graph (its nodes, the first repeated at the end), if any.
fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    // Iterative depth-first search with colours (0 new, 1 on the stack, 2 done): a file of
    // thousands of sessions must not overflow the call stack.
    let n = edges.len();
    let mut colour = vec![0u8; n];
    for start in 0..n {
        if colour[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        colour[start] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&c) = edges[node].get(*next) {
                *next += 1;
                match colour[c] {
                    0 => {
                        colour[c] = 1;
                        stack.push((c, 0));
                    }
                    1 => {
                        let from = stack.iter().position(|&(x, _)| x == c).unwrap_or(0);
                        let mut cycle: Vec<usize> = stack[from..].iter().map(|&(x, _)| x).collect();
                        cycle.push(c);
                        return Some(cycle);
                    }
                    _ => {}
                }
            } else {
                colour[node] = 2;
                stack.pop();
            }
        }
    }
    None
}

/// One agent to build: its session, its link, the history it inherits, its trace start.
struct Pending {
    session: usize,
    link: Option<ParentLink>,
    history: Vec<Value>,
    start_ms: f64,
}

/// The conversation rooted at session `root`, every reachable child copied under its parent.
fn expand(
    name: &str,
    source: &Arc<str>,
    sessions: &[Session],
    by_id: &HashMap<String, usize>,
    root: usize,
) -> Result<Conversation, TraceError> {
    let mut queue = VecDeque::from([Pending {
        session: root,
        link: None,
        history: Vec::new(),
        start_ms: 0.0,
    }]);
    let mut agents: Vec<Agent> = Vec::new();
    let mut names: HashMap<String, usize> = HashMap::new();
    while let Some(p) = queue.pop_front() {
        if agents.len() >= MAX_AGENTS {
            return Err(field_error(
                name,
                sessions[root].line,
                "session_id",
                format!(
                    "conversation {} expands to more than {MAX_AGENTS} agents (spawn templates nest too deep)",
                    fields::quote_short(&sessions[root].id)
                ),
            ));
        }
        let s = &sessions[p.session];
        let me = agents.len();
        let id = if me == 0 {
            Agent::MAIN.to_owned()
        } else {
            let seen = names.entry(s.id.clone()).or_insert(0);
            *seen += 1;
            if *seen == 1 && s.id != Agent::MAIN {
                s.id.clone()
            } else {
                format!("{}#{}", s.id, seen)
            }
        };
        let mut history = p.history;
        let mut requests = Vec::with_capacity(s.turns.len());
        let mut clock = p.start_ms;
        let mut link = p.link;
        for (k, t) in s.turns.iter().enumerate() {
            let gap = match (k, &mut link) {
                (0, Some(l)) => {
                    l.spawn_offset_ms = t.delay_ms;
                    ClientGap {
                        ms: t.delay_ms,
                        rule: GapRule::Spawn,
                    }
                }
                (0, None) if t.delay_ms == 0.0 => ClientGap {
                    ms: 0.0,
                    rule: GapRule::First,
                },
                _ => ClientGap {
                    ms: t.delay_ms,
                    rule: GapRule::Delay,
                },
            };
            clock += t.delay_ms;
            let messages = if s.accumulate {
                history.extend(t.messages.iter().cloned());
                history.clone()
            } else {
                t.messages.clone()
            };
            for c in &t.children {
                queue.push_back(Pending {
                    session: by_id[&c.session],
                    link: Some(ParentLink {
                        agent: me,
                        after: k,
                        spawn_offset_ms: 0.0,
                        join: c.join,
                        inherits_history: c.fork,
                    }),
                    history: if c.fork { messages.clone() } else { Vec::new() },
                    start_ms: clock,
                });
            }
            requests.push(AgentRequest {
                trace_ms: clock,
                input_length: 0,
                output_length: t.max_tokens.unwrap_or(0),
                hash_ids: Vec::new(),
                stream: None,
                gap,
                server_ms: None,
                model: t.model.clone(),
                origin: Origin {
                    line: s.line,
                    pointer: Some(format!("turns[{k}]").into_boxed_str()),
                },
                messages: Some(Arc::new(ChatPayload {
                    messages: Value::Array(messages),
                    tools: t.tools.clone(),
                    extra: t.extra.clone(),
                    max_tokens: t.max_tokens,
                    text_input: None,
                    prompt_token_ids: None,
                })),
            });
        }
        // Released when the parent's first turn completes: a subagent follows a request.
        for c in &s.pre {
            queue.push_back(Pending {
                session: by_id[&c.session],
                link: Some(ParentLink {
                    agent: me,
                    after: 0,
                    spawn_offset_ms: 0.0,
                    join: None,
                    inherits_history: false,
                }),
                history: Vec::new(),
                start_ms: p.start_ms,
            });
        }
        agents.push(Agent {
            id: Arc::from(id),
            kind: None,
            parent: link,
            system_tokens: None,
            tool_tokens: None,
            start_ms: p.start_ms,
            requests,
        });
    }
    Ok(Conversation {
        id: Arc::from(sessions[root].id.as_str()),
        source: source.clone(),
        // The conversations have no hash ids (prompts are messages): the declared block size.
        block_size: TraceFormat::Dag.default_block_size(),
        hash_scope: HashScope::Local,
        system_tokens: None,
        tool_tokens: None,
        agents,
    })
}
