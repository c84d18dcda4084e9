//! Dynamo rows laid out as conversations: a trajectory and every trajectory below it as one
//! session tree (agents parents first, breadth first), a row without `agent_context` as a
//! conversation of one request. The spawn, join and client gap rules are `dynamo.rs`'s.

use std::collections::HashMap;
use std::sync::Arc;

use crate::trace::model::{
    Agent, AgentRequest, ClientGap, Conversation, GapRule, HashScope, Origin, ParentLink,
};

/// One `request_end` row, checked.
pub(super) struct Row {
    pub(super) line: usize,
    pub(super) trajectory: Option<String>,
    pub(super) parent: Option<String>,
    pub(super) input_length: u32,
    pub(super) output_length: u32,
    pub(super) hash_ids: Vec<u64>,
    pub(super) start_ms: f64,
    pub(super) end_ms: Option<f64>,
    pub(super) request_id: Option<String>,
    pub(super) model: Option<Arc<str>>,
}

/// One trajectory: its rows in start order and its parent.
pub(super) struct Trajectory {
    pub(super) id: String,
    pub(super) line: usize,
    pub(super) parent: Option<String>,
    pub(super) rows: Vec<Row>,
}

/// The conversation of the row without `agent_context` on `line`: one request, named by its
/// `request_id` (else `line-N`).
pub(super) fn single(line: usize, row: &Row, source: &Arc<str>, block: usize) -> Conversation {
    let id = row
        .request_id
        .clone()
        .unwrap_or_else(|| format!("line-{line}"));
    let first = ClientGap {
        ms: 0.0,
        rule: GapRule::First,
    };
    let requests = vec![request(row, row.start_ms, first)];
    conversation(id, source, block, vec![main(requests)])
}

/// The main agent of a conversation of one request.
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

/// A conversation of the file (its ids are global: one renumbering for the file).
fn conversation(id: String, source: &Arc<str>, block: usize, agents: Vec<Agent>) -> Conversation {
    Conversation {
        recorded_start_ms: None,
        id: Arc::from(id),
        source: source.clone(),
        block_size: block,
        hash_scope: HashScope::Global,
        system_tokens: None,
        tool_tokens: None,
        agents,
    }
}

/// The request of `row` on a conversation clock starting at `origin` (ms since the epoch).
fn request(row: &Row, origin: f64, gap: ClientGap) -> AgentRequest {
    let start = row.start_ms - origin;
    AgentRequest {
        result: None,
        trace_ms: start,
        input_length: row.input_length,
        output_length: row.output_length,
        hash_ids: row.hash_ids.clone().into(),
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

/// When a row ended: its end, else its start.
fn end_of(r: &Row) -> f64 {
    r.end_ms.unwrap_or(r.start_ms)
}

/// The conversation rooted at trajectory `root`: agents parents first (breadth first, children
/// by their first start).
pub(super) fn tree(
    root: usize,
    slots: &mut [Option<Trajectory>],
    children: &[Vec<usize>],
    source: &Arc<str>,
    block: usize,
) -> Conversation {
    let order = agent_order(root, slots, children);
    let trajs: Vec<Trajectory> = order.iter().filter_map(|(t, _)| slots[*t].take()).collect();
    let origin = trajs
        .iter()
        .flat_map(|t| t.rows.iter().map(|r| r.start_ms))
        .fold(f64::INFINITY, f64::min);
    let (mut links, joined_end) = links(&order, &trajs);
    let agents = trajs
        .iter()
        .enumerate()
        .map(|(a, t)| tree_agent(a, t, links[a].take(), &joined_end[a], origin))
        .collect();
    conversation(trajs[0].id.clone(), source, block, agents)
}

/// The trajectories of the tree under `root`, breadth first (children by their first start),
/// each with the position of its parent in the order.
fn agent_order(
    root: usize,
    slots: &[Option<Trajectory>],
    children: &[Vec<usize>],
) -> Vec<(usize, Option<usize>)> {
    let first_start = |t: usize| slots[t].as_ref().map_or(0.0, |x| x.rows[0].start_ms);
    let mut order = vec![(root, None::<usize>)];
    let mut k = 0;
    while k < order.len() {
        let (t, _) = order[k];
        let mut kids = children[t].clone();
        kids.sort_by(|&a, &b| first_start(a).total_cmp(&first_start(b)).then(a.cmp(&b)));
        order.extend(kids.into_iter().map(|c| (c, Some(k))));
        k += 1;
    }
    order
}

/// The spawn and join points of every subagent of the tree (`order`, `trajs` in that order),
/// and for each agent the latest end of the subagents each of its requests joins.
fn links(
    order: &[(usize, Option<usize>)],
    trajs: &[Trajectory],
) -> (Vec<Option<ParentLink>>, Vec<HashMap<usize, f64>>) {
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
    (links, joined_end)
}

/// Agent `a` of a tree: trajectory `t`'s requests on the conversation's clock (`origin`).
fn tree_agent(
    a: usize,
    t: &Trajectory,
    link: Option<ParentLink>,
    joined_end: &HashMap<usize, f64>,
    origin: f64,
) -> Agent {
    let requests = t
        .rows
        .iter()
        .enumerate()
        .map(|(j, row)| {
            let gap = match (j, &link) {
                (0, None) => ClientGap {
                    ms: 0.0,
                    rule: GapRule::First,
                },
                (0, Some(l)) => ClientGap {
                    ms: l.spawn_offset_ms,
                    rule: GapRule::Spawn,
                },
                _ => later_gap(row, end_of(&t.rows[j - 1]), joined_end.get(&j)),
            };
            request(row, origin, gap)
        })
        .collect();
    let id = if a == 0 {
        Agent::MAIN.to_owned()
    } else if t.id == Agent::MAIN {
        format!("{}#{a}", t.id)
    } else {
        t.id.clone()
    };
    Agent {
        id: Arc::from(id),
        kind: None,
        parent: link,
        system_tokens: None,
        tool_tokens: None,
        start_ms: t.rows[0].start_ms - origin,
        requests,
    }
}

/// The gap of a request after an agent's first: from the previous request's end `prev`, or
/// from the end of the subagents it joins (`joined`) when that is later.
fn later_gap(row: &Row, prev: f64, joined: Option<&f64>) -> ClientGap {
    match joined {
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
