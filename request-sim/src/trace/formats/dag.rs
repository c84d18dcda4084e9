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
//!
//! `dag/line.rs` reads each line into a session (derived structs, then the checks across
//! fields); this file resolves the references between sessions and expands each root into its
//! conversation.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use self::line::{parse_session, ChildRef, Session, Turn};
use super::agent_fields::{field_error, row_error};
use super::fields;
use super::unit::{Format, Reader};
use crate::trace::error::TraceError;
use crate::trace::model::ChatPayload;
use crate::trace::model::FormatInfo;
use crate::trace::model::{
    Agent, AgentRequest, ClientGap, Conversation, Corpus, GapRule, HashScope, Origin, ParentLink,
};
use crate::trace::options::LoadOptions;

mod line;

/// Most agents one conversation may expand to (spawn templates nest multiplicatively).
pub const MAX_AGENTS: usize = 10_000;

// ---------------------------------------------------------------------------------------------
// The file: sessions resolved into conversations.

/// Builds the corpus from every non-blank line.
pub(crate) fn build(
    name: &str,
    lines: &[(usize, String)],
    _opts: &LoadOptions,
) -> Result<Corpus, TraceError> {
    let (sessions, by_id) = read_sessions(name, lines)?;
    let referenced = resolve(name, &sessions, &by_id)?;
    let source: Arc<str> = Arc::from(name);
    let mut conversations = Vec::new();
    for (i, named) in referenced.iter().enumerate() {
        if !named {
            conversations.push(expand(name, &source, &sessions, &by_id, i)?);
        }
    }
    Ok(Corpus {
        production: None,
        dense_ids: None,
        conversations,
        notes: Vec::new(),
    })
}

/// Every line read as a session, and each session's index by id (ids are unique).
fn read_sessions(
    name: &str,
    lines: &[(usize, String)],
) -> Result<(Vec<Session>, HashMap<String, usize>), TraceError> {
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
    Ok((sessions, by_id))
}

/// Checks the references between sessions: every one resolved, a session forked from one
/// parent at most, no cycle. Returns which sessions some other one names (the others are the
/// conversations' roots).
fn resolve(
    name: &str,
    sessions: &[Session],
    by_id: &HashMap<String, usize>,
) -> Result<Vec<bool>, TraceError> {
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
                one_fork_parent(name, sessions, &mut fork_parent, i, c, r)?;
            }
            referenced[c] = true;
            edges[i].push(c);
        }
    }
    if let Some(cycle) = find_cycle(&edges) {
        let names: Vec<&str> = cycle.iter().map(|&i| sessions[i].id.as_str()).collect();
        return Err(field_error(
            name,
            sessions[cycle[0]].line,
            "session_id",
            format!("sessions form a cycle: {}", names.join(" -> ")),
        ));
    }
    Ok(referenced)
}

/// Records session `i` as the fork parent of `c` (named by `r`): a fork child has one parent.
fn one_fork_parent(
    name: &str,
    sessions: &[Session],
    fork_parent: &mut [Option<usize>],
    i: usize,
    c: usize,
    r: &ChildRef,
) -> Result<(), TraceError> {
    match fork_parent[c] {
        Some(p) if p != i => Err(field_error(
            name,
            sessions[i].line,
            &r.path,
            format!(
                "session {} is already forked from {} (line {}); a fork child has one parent",
                fields::quote_short(&r.session),
                fields::quote_short(&sessions[p].id),
                sessions[p].line
            ),
        )),
        _ => {
            fork_parent[c] = Some(i);
            Ok(())
        }
    }
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
        let id = agent_id(&mut names, &s.id, agents.len());
        let agent = build_agent(s, id, p, agents.len(), by_id, &mut queue);
        agents.push(agent);
    }
    Ok(Conversation {
        recorded_start_ms: None,
        id: Arc::from(sessions[root].id.as_str()),
        source: source.clone(),
        // The conversations have no hash ids (prompts are messages): the declared block size.
        block_size: FORMAT.info.block_size,
        hash_scope: HashScope::Local,
        system_tokens: None,
        tool_tokens: None,
        agents,
    })
}

/// The id of agent `me` of session `session`: `main` for the root; else the session id, its
/// later copies (a spawn template) numbered `id#2`, `id#3`... (`seen` counts them).
fn agent_id(seen: &mut HashMap<String, usize>, session: &str, me: usize) -> String {
    if me == 0 {
        return Agent::MAIN.to_owned();
    }
    let n = seen.entry(session.to_owned()).or_insert(0);
    *n += 1;
    if *n == 1 && session != Agent::MAIN {
        session.to_owned()
    } else {
        format!("{session}#{n}")
    }
}

/// Agent `me`, the session `s` laid out from `p`: one request per turn; its children queued
/// (released by the turn that names them, `pre_session_spawns` by the first).
fn build_agent(
    s: &Session,
    id: String,
    p: Pending,
    me: usize,
    by_id: &HashMap<String, usize>,
    queue: &mut VecDeque<Pending>,
) -> Agent {
    let mut history = p.history;
    let mut requests = Vec::with_capacity(s.turns.len());
    let mut clock = p.start_ms;
    let mut link = p.link;
    for (k, t) in s.turns.iter().enumerate() {
        let gap = turn_gap(k, t.delay_ms, &mut link);
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
                link: Some(child_link(me, k, c.join, c.fork)),
                history: if c.fork { messages.clone() } else { Vec::new() },
                start_ms: clock,
            });
        }
        requests.push(turn_request(s, k, t, clock, gap, messages));
    }
    // Released when the parent's first turn completes: a subagent follows a request.
    for c in &s.pre {
        queue.push_back(Pending {
            session: by_id[&c.session],
            link: Some(child_link(me, 0, None, false)),
            history: Vec::new(),
            start_ms: p.start_ms,
        });
    }
    Agent {
        id: Arc::from(id),
        kind: None,
        parent: link,
        system_tokens: None,
        tool_tokens: None,
        start_ms: p.start_ms,
        requests,
    }
}

/// The link of a child of agent `agent` released by its request `after` (the spawn offset is
/// set by the child's first turn).
fn child_link(agent: usize, after: usize, join: Option<usize>, fork: bool) -> ParentLink {
    ParentLink {
        agent,
        after,
        spawn_offset_ms: 0.0,
        join,
        inherits_history: fork,
    }
}

/// The client gap of turn `k`: a child's first turn waits its `delay` as the spawn offset (set
/// in its `link`), the root's first turn without a delay is the first, any other its `delay`.
fn turn_gap(k: usize, delay_ms: f64, link: &mut Option<ParentLink>) -> ClientGap {
    match (k, link) {
        (0, Some(l)) => {
            l.spawn_offset_ms = delay_ms;
            ClientGap {
                ms: delay_ms,
                rule: GapRule::Spawn,
            }
        }
        (0, None) if delay_ms == 0.0 => ClientGap {
            ms: 0.0,
            rule: GapRule::First,
        },
        _ => ClientGap {
            ms: delay_ms,
            rule: GapRule::Delay,
        },
    }
}

/// The request of turn `k` of session `s`, at `clock`, sending `messages`.
fn turn_request(
    s: &Session,
    k: usize,
    t: &Turn,
    clock: f64,
    gap: ClientGap,
    messages: Vec<Value>,
) -> AgentRequest {
    AgentRequest {
        result: None,
        trace_ms: clock,
        input_length: 0,
        output_length: t.max_tokens.unwrap_or(0),
        hash_ids: Default::default(),
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
    }
}

/// `dag_jsonl`: a row with `turns` (after Copilot, whose turns have `llm_calls`).
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo {
        aliases: &["dag"],
        sends_rows_as_written: true,
        ..FormatInfo::corpus(
            "dag_jsonl",
            64,
            "AIPerf dag_jsonl: conversations with forks, spawns and join_at, real messages sent as written",
        )
    },
    recognise: |p| p.has("turns"),
    read: Reader::Corpus {
        file: |name, input, opts| super::agent_jsonl::read_with(name, input, opts, build),
        dir: None,
    },
};
