//! The session facts of each request, one type whatever the source format: [`SessionTurn`]
//! (an agent corpus's requests add an [`AgentTurn`]), the [`Sessions`] of a trace and their
//! counts ([`SessionStats`]). The rules that build them are `trace/pipeline/session/`.

use std::sync::Arc;

use super::corpus::GapRule;

/// The session facts of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionTurn {
    /// Session id: the root `chat_id` (Bailian) or the row's `session_id`.
    pub id: Arc<str>,
    /// 1-based turn within the session (Bailian: the row's `turn` when given).
    pub turn: u32,
    /// Replay index of the parent request; `None` for a first turn, or when the parent was
    /// sliced away (the request then starts its part of the session).
    pub parent_index: Option<usize>,
    /// The trace's own think time before this turn (ms): `delay` when the row has one, else
    /// this turn's trace time minus its parent's (`None` without a parent).
    pub trace_gap_ms: Option<f64>,
    /// The agentic facts of a request of an agent corpus (`trace/formats/`, `trace::model::Corpus`), `None` otherwise.
    pub agent: Option<Arc<AgentTurn>>,
}

/// Where a request of an agent corpus sits in its session tree, and what else it waits for
/// beyond its parent (`SessionTurn::parent_index`: its predecessor in the agent, or for a
/// subagent's first request the parent's request it follows). Built by
/// `trace/pipeline/plan.rs`; the release gate waits for the parent, `joins` and `prior`.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTurn {
    /// The conversation (`<id>`, or `<id>#<pass>` for a repeat of the corpus).
    pub conversation: Arc<str>,
    /// `main` or the subagent's id.
    pub agent: Arc<str>,
    /// What keeps requests together on one shard: the user (`user:<n>` with `--users`), else
    /// the conversation.
    pub key: Arc<str>,
    /// Replay indexes of the last requests of the subagents this request joins.
    pub joins: Box<[usize]>,
    /// The first request of a user's later conversation: replay indexes of the last requests
    /// of the user's previous conversation.
    pub prior: Box<[usize]>,
    /// The rule that gave the client gap (`SessionTurn::trace_gap_ms`, after `--max-idle-gap`).
    pub gap_rule: GapRule,
    /// How the trace's call ended when not successfully (Copilot `UserCancel`, ...); the
    /// request is sent in full all the same, and its record says so (`trace_result`).
    pub trace_result: Option<Arc<str>>,
    /// On the main agent's first request: the conversation's own wall time in the trace (ms,
    /// its first request to its last request's end).
    pub conversation_trace_ms: Option<f64>,
    /// On the main agent's first request: the conversation's requests (all agents), so the
    /// summary can tell a conversation the run finished from one it cut.
    pub conversation_requests: Option<u32>,
    /// A warm-up request of a warm trajectory start (`trace/pipeline/plan/trajectory.rs`):
    /// sent and recorded, not measured.
    pub warmup: bool,
}

impl SessionTurn {
    /// Every request this one waits for: its parent, the subagents it joins, the previous
    /// conversation of its user.
    pub fn waits(&self) -> impl Iterator<Item = usize> + '_ {
        let (joins, prior) = match &self.agent {
            Some(a) => (&a.joins[..], &a.prior[..]),
            None => (&[][..], &[][..]),
        };
        self.parent_index
            .into_iter()
            .chain(joins.iter().copied())
            .chain(prior.iter().copied())
    }
}

/// Counts about the sessions of a trace (after slicing).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionStats {
    /// Sessions with at least one replayed request.
    pub sessions: usize,
    /// Replayed requests that belong to a session.
    pub turns: usize,
    /// Most replayed turns in one session.
    pub max_turns: usize,
    /// Bailian turns whose `parent_chat_id` is not in the file (they start a session).
    pub orphans: usize,
    /// Turns removed by slicing (`--start-ms/--end-ms/--max-requests`) from sessions that still
    /// have replayed turns.
    pub cut_turns: usize,
    /// Sessions that lost turns to slicing.
    pub cut_sessions: usize,
}

/// The sessions of a trace: one entry per request (empty when the trace has no sessions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sessions {
    pub turns: Vec<Option<SessionTurn>>,
    pub stats: SessionStats,
    /// The sessions that lost turns to slicing and how many (sorted by id); their sum is
    /// `stats.cut_turns`. Per session so that a shard can count its own.
    pub cut: Vec<(Arc<str>, usize)>,
}

impl Sessions {
    /// The session facts of request `index`.
    pub fn get(&self, index: usize) -> Option<&SessionTurn> {
        self.turns.get(index).and_then(Option::as_ref)
    }

    /// The key to keep a session together (e.g. on one scale-out shard): the session id (an
    /// agent corpus: the user or the conversation, so subagents stay with their parent), or
    /// `None` for a request outside any session.
    pub fn key(&self, index: usize) -> Option<&str> {
        self.get(index)
            .map(|t| t.agent.as_ref().map_or(&*t.id, |a| &*a.key))
    }

    /// Turns cut by slicing and the sessions they belong to, over the sessions `keep` accepts
    /// (e.g. a shard's).
    pub fn cut_in(&self, keep: impl Fn(&str) -> bool) -> (usize, usize) {
        self.cut
            .iter()
            .filter(|(id, _)| keep(id))
            .fold((0, 0), |(t, s), (_, n)| (t + n, s + 1))
    }

    /// True when at least one request belongs to a session.
    pub fn any(&self) -> bool {
        self.stats.turns > 0
    }
}
