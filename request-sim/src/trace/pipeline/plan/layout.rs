//! One conversation of a population laid out as requests (`plan.rs` decides which
//! conversations start when): each request's waits (its predecessor or the parent's request it
//! follows, the subagents it joins, the user's previous conversation), its session and its
//! hash ids (namespaced per conversation and pass, or keyed by the shared prompt sizes), then
//! the lower bounds of their releases.

use std::collections::HashMap;
use std::sync::Arc;

use llm_common::util::hash3;

use crate::trace::model::{
    Agent, AgentRequest, AgentTurn, BlockIds, ChatPayload, Conversation, HashScope, Rename,
    SessionTurn, TraceRequest,
};

/// One request before the replay order is known.
pub(super) struct Item {
    pub(super) lower_ms: f64,
    pub(super) req: TraceRequest,
    pub(super) turn: SessionTurn,
    pub(super) chat: Option<Arc<ChatPayload>>,
    /// Tmp ids (positions in `items`) this one waits for: predecessor, joins, prior.
    pub(super) parent: Option<usize>,
    pub(super) joins: Vec<usize>,
    pub(super) prior: Vec<usize>,
}

/// One conversation being laid out: its names, the tmp ids of its requests, its hash id
/// namespace and its recorded end.
struct Layout<'a> {
    conv: &'a Conversation,
    /// The conversation's name in the trace (`<id>#<pass>` for a repeat).
    name: Arc<str>,
    /// The routing key: the user's, else the conversation's.
    key: Arc<str>,
    space: Option<u64>,
    /// Tmp id (position in the items) of each agent's first request.
    first: Vec<usize>,
    /// Its last recorded completion (ms of its clock).
    trace_end_ms: f64,
}

impl<'a> Layout<'a> {
    fn new(conv: &'a Conversation, pass: usize, user: Option<usize>, base: usize) -> Self {
        let name: Arc<str> = if pass == 0 {
            conv.id.clone()
        } else {
            Arc::from(format!("{}#{pass}", conv.id))
        };
        let key: Arc<str> = match user {
            Some(u) => Arc::from(format!("user:{u}")),
            None => name.clone(),
        };
        let mut first: Vec<usize> = Vec::with_capacity(conv.agents.len());
        let mut at = base;
        for a in &conv.agents {
            first.push(at);
            at += a.requests.len();
        }
        let trace_end_ms = conv
            .agents
            .iter()
            .flat_map(|a| &a.requests)
            .map(|r| r.trace_ms + r.server_ms.unwrap_or(0.0))
            .fold(0.0, f64::max);
        Layout {
            conv,
            name,
            key,
            space: namespace(conv, pass),
            first,
            trace_end_ms,
        }
    }

    /// The tmp id of request `k` of agent `a`.
    fn id_of(&self, a: usize, k: usize) -> usize {
        self.first[a] + k
    }

    /// Joins: (parent agent, request) → the last requests of the subagents it waits for.
    fn joins(&self) -> HashMap<(usize, usize), Vec<usize>> {
        let mut joins: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
        for (s, a) in self.conv.agents.iter().enumerate() {
            if let Some(j) = a.parent.as_ref().and_then(|l| Some((l.agent, l.join?))) {
                joins
                    .entry(j)
                    .or_default()
                    .push(self.id_of(s, a.requests.len() - 1));
            }
        }
        joins
    }

    /// The last request of every agent.
    fn ends(&self) -> Vec<usize> {
        let agents = self.conv.agents.iter().enumerate();
        agents
            .map(|(a, ag)| self.id_of(a, ag.requests.len() - 1))
            .collect()
    }

    /// The session of agent `a`: the conversation's name, a subagent's `<name>::sa:<id>`.
    fn session(&self, a: &Agent) -> Arc<str> {
        if a.is_main() {
            self.name.clone()
        } else {
            Arc::from(format!("{}::sa:{}", self.name, a.id))
        }
    }
}

/// Where a conversation goes in the population: its repeat pass, its start (lower bound), what
/// its first request waits for (the user's previous conversation), its user.
pub(super) struct Slot {
    pub(super) pass: usize,
    pub(super) start_ms: f64,
    pub(super) prior: Vec<usize>,
    pub(super) user: Option<usize>,
}

/// Rewrites a conversation's requests just laid out (`items[base..]`, their waits set, their
/// lower bounds not yet) and says where each went (`usize::MAX`: left out): the warm start of
/// `plan/trajectory.rs`.
pub(super) type Rewrite<'a> = &'a mut dyn FnMut(&mut Vec<Item>, usize) -> Vec<usize>;

/// The settings of the layout a request needs: the gap cap (`--max-idle-gap`, ms) and the
/// shared tools + system prompt blocks.
pub(super) struct Rules {
    pub(super) max_idle_gap_ms: Option<f64>,
    pub(super) share_system_prefix: bool,
}

/// One request laid out: what it waits for and its gap.
struct Waits {
    gap_ms: f64,
    joins: Vec<usize>,
    prior: Vec<usize>,
}

/// Lays out one conversation in `slot` (its requests appended to `items`, the gaps `rules`
/// caps counted in `capped`); returns the lower bound of its end and its agents' last requests
/// (what the user's next conversation waits for).
pub(super) fn lay_out(
    conv: &Conversation,
    slot: Slot,
    rules: &Rules,
    items: &mut Vec<Item>,
    capped: &mut usize,
    rewrite: Option<Rewrite<'_>>,
) -> Result<(f64, Vec<usize>), String> {
    let (base, start_ms) = (items.len(), slot.start_ms);
    let l = Layout::new(conv, slot.pass, slot.user, base);
    let mut joins = l.joins();
    for (ai, a) in conv.agents.iter().enumerate() {
        let session = l.session(a);
        for k in 0..a.requests.len() {
            let mut gap_ms = a.requests[k].gap.ms;
            if let Some(cap) = rules.max_idle_gap_ms {
                if gap_ms > cap {
                    gap_ms = cap;
                    *capped += 1;
                }
            }
            let waits = Waits {
                gap_ms,
                joins: joins.remove(&(ai, k)).unwrap_or_default(),
                prior: if ai == 0 && k == 0 {
                    slot.prior.clone()
                } else {
                    Vec::new()
                },
            };
            items.push(item(&l, ai, k, &session, waits, start_ms, rules));
        }
    }
    if let Some(cap) = rules.max_idle_gap_ms {
        capped_trace_time(conv, cap, items, base, l.trace_end_ms);
    }
    let mut ends = l.ends();
    if let Some(rewrite) = rewrite {
        let to = rewrite(items, base);
        ends = ends
            .iter()
            .filter(|&&e| to[e - base] != usize::MAX)
            .map(|&e| base + to[e - base])
            .collect();
    }
    lower_bounds(items, base, start_ms)?;
    let end_ms = ends
        .iter()
        .map(|&i| items[i].lower_ms)
        .fold(start_ms, f64::max);
    Ok((end_ms, ends))
}

/// Leaves out the items of `items[base..]` (one conversation, just laid out) whose lower bound
/// is at or past `limit_ms`, renumbering the waits among those kept and `ends` (the
/// conversation's last requests; those left out are dropped from it); returns how many were
/// left out. What an item waits for has a lower bound no later than its own, so a kept item
/// never waits for one left out.
pub(super) fn drop_past(
    items: &mut Vec<Item>,
    base: usize,
    limit_ms: f64,
    ends: &mut Vec<usize>,
) -> usize {
    let n = items.len() - base;
    let mut to = vec![usize::MAX; n];
    let mut kept = base;
    for (i, slot) in to.iter_mut().enumerate() {
        if items[base + i].lower_ms < limit_ms {
            *slot = kept;
            kept += 1;
        }
    }
    if kept == items.len() {
        return 0;
    }
    let new = |j: usize| if j >= base { to[j - base] } else { j };
    let mut i = 0;
    items.retain(|_| {
        i += 1;
        i <= base || to[i - 1 - base] != usize::MAX
    });
    for it in &mut items[base..] {
        it.parent = it.parent.map(new);
        for j in it.joins.iter_mut() {
            *j = new(*j);
        }
        debug_assert!(it.parent.iter().chain(&it.joins).all(|&j| j != usize::MAX));
    }
    ends.retain_mut(|e| {
        *e = new(*e);
        *e != usize::MAX
    });
    n - (kept - base)
}

/// Request `k` of agent `ai` of the conversation of `l`, in `session`, as an item.
fn item(
    l: &Layout,
    ai: usize,
    k: usize,
    session: &Arc<str>,
    waits: Waits,
    start_ms: f64,
    rules: &Rules,
) -> Item {
    let (conv, a) = (l.conv, &l.conv.agents[ai]);
    let r = &a.requests[k];
    let parent = match (&a.parent, k) {
        (_, k) if k > 0 => Some(l.id_of(ai, k - 1)),
        (Some(link), 0) => Some(l.id_of(link.agent, link.after)),
        _ => None,
    };
    let first = ai == 0 && k == 0;
    let turn = SessionTurn {
        id: session.clone(),
        turn: k as u32 + 1,
        parent_index: None,
        trace_gap_ms: parent
            .or(waits.joins.first().copied())
            .map(|_| waits.gap_ms),
        agent: Some(Arc::new(AgentTurn {
            conversation: l.name.clone(),
            agent: a.id.clone(),
            key: l.key.clone(),
            joins: Box::default(),
            prior: Box::default(),
            gap_rule: r.gap.rule,
            trace_result: r.result.clone(),
            conversation_trace_ms: first.then_some(l.trace_end_ms),
            conversation_requests: first.then_some(conv.requests() as u32),
            warmup: false,
        })),
    };
    let hash_ids = BlockIds::renamed(
        &r.hash_ids,
        rename(conv, a, l.space, rules.share_system_prefix),
    );
    Item {
        lower_ms: start_ms,
        req: TraceRequest {
            reasoning: Default::default(),
            images: None,
            index: 0,
            line: r.origin.line,
            timestamp_ms: 0.0,
            input_length: r.input_length,
            output_length: r.output_length,
            hash_ids,
            session: None,
            model: r.model.clone(),
        },
        turn,
        chat: r.messages.clone(),
        parent,
        joins: waits.joins,
        prior: waits.prior,
    }
}

/// Fills in the lower bounds of `items[base..]` (Kahn's order over their waits within the
/// conversation; waits outside it are already final).
fn lower_bounds(items: &mut [Item], base: usize, start_ms: f64) -> Result<(), String> {
    let n = items.len() - base;
    let mut indeg = vec![0usize; n];
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, it) in items[base..].iter().enumerate() {
        for &d in it.parent.iter().chain(&it.joins) {
            if d >= base {
                indeg[i] += 1;
                next[d - base].push(i);
            }
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    let mut done = 0;
    while let Some(i) = ready.pop() {
        done += 1;
        let it = &items[base + i];
        let deps = it.parent.iter().chain(&it.joins);
        let latest = deps.map(|&d| items[d].lower_ms).fold(f64::NAN, f64::max);
        let gap = it.turn.trace_gap_ms.unwrap_or(0.0);
        items[base + i].lower_ms = if latest.is_nan() {
            start_ms
        } else {
            latest + gap
        };
        for &c in &next[i] {
            indeg[c] -= 1;
            if indeg[c] == 0 {
                ready.push(c);
            }
        }
    }
    if done != n {
        return Err("the conversation's requests wait for each other in a cycle".into());
    }
    Ok(())
}

/// `--max-idle-gap`: the conversation's own trace wall time (on its first request) as the
/// replay plays it, with the gaps capped: the recorded wall time less what the cap takes off
/// the longest chain of requests (each request ends its recorded server time after its gap
/// past the latest request it waits for). No gap cut: the recorded wall time.
fn capped_trace_time(
    conv: &Conversation,
    cap: f64,
    items: &mut [Item],
    base: usize,
    trace_ms: f64,
) {
    let reqs: Vec<&AgentRequest> = conv.agents.iter().flat_map(|a| &a.requests).collect();
    let chain = |capped: bool| {
        longest_chain(&items[base..], base, |i| {
            let gap = reqs.get(i).map_or(0.0, |r| r.gap.ms);
            let server = reqs.get(i).and_then(|r| r.server_ms).unwrap_or(0.0);
            (if capped { gap.min(cap) } else { gap }, server)
        })
    };
    let cut = chain(false) - chain(true);
    if cut <= 0.0 {
        return;
    }
    if let Some(agent) = items[base].turn.agent.as_mut() {
        Arc::make_mut(agent).conversation_trace_ms = Some((trace_ms - cut).max(0.0));
    }
}

/// The end of the longest chain of `items` (tmp ids from `base`, a conversation whose
/// waits have no cycle: `lower_bounds` checked): a request starts its gap after the latest end
/// it waits for (the first at 0, its gap not counted) and ends its server time later;
/// `times(i)`: request `i`'s (gap, server time), ms.
fn longest_chain(items: &[Item], base: usize, times: impl Fn(usize) -> (f64, f64)) -> f64 {
    let n = items.len();
    let mut indeg = vec![0usize; n];
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, it) in items.iter().enumerate() {
        for &d in it.parent.iter().chain(&it.joins) {
            if d >= base && d - base < n {
                indeg[i] += 1;
                next[d - base].push(i);
            }
        }
    }
    let mut end = vec![0.0f64; n];
    let mut ready: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
    while let Some(i) = ready.pop() {
        let it = &items[i];
        let deps = it.parent.iter().chain(&it.joins).filter(|&&d| d >= base);
        let latest = deps.map(|&d| end[d - base]).fold(f64::NAN, f64::max);
        let (gap, server) = times(i);
        end[i] = if latest.is_nan() { 0.0 } else { latest + gap } + server;
        for &c in &next[i] {
            indeg[c] -= 1;
            if indeg[c] == 0 {
                ready.push(c);
            }
        }
    }
    end.into_iter().fold(0.0, f64::max)
}

/// The namespace of a conversation's hash ids: `None` keeps global ids as given.
fn namespace(conv: &Conversation, pass: usize) -> Option<u64> {
    let local = conv.hash_scope == HashScope::Local;
    (local || pass > 0).then(|| {
        hash3(
            llm_common::routing::session_hash(&conv.id),
            pass as u64,
            0xa6e7,
        )
    })
}

/// How the ids of agent `a`'s requests are renamed in a conversation laid out in `space`.
fn rename(conv: &Conversation, a: &Agent, space: Option<u64>, share: bool) -> Rename {
    let (tools, system) = (a.tool_tokens.unwrap_or(0), a.system_tokens.unwrap_or(0));
    Rename {
        space,
        shared_blocks: if share {
            (tools as usize + system as usize) / conv.block_size.max(1)
        } else {
            0
        },
        sizes: (u64::from(tools) << 32) | u64::from(system),
    }
}
