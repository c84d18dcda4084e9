//! Agentic workloads: a corpus of coding-agent conversations as **session trees**, whatever
//! the format they came from.
//!
//! Every agentic format (Weka / kv-cache-tester JSON, TraceLab rounds, Dynamo request traces,
//! AIPerf `dag_jsonl`) is read into the same [`Corpus`]: conversations, each a main agent and
//! its subagents; each subagent is an [`Agent`] of its own with a [`ParentLink`] (the parent
//! agent, the parent's request it follows, the offset it starts at, and the parent request
//! that waits for it, or none for a background subagent). The replay, the routing headers, the
//! records and the summary read only these types, so they do not care which format a corpus
//! came from.
//!
//! The tree is acyclic by construction: an agent's parent comes before it in
//! [`Conversation::agents`] (the main agent is index 0), which [`Conversation::check`]
//! verifies with the other link rules. A reader builds the conversation, calls `check`, and
//! reports a failure as `file:line: what`.
//!
//! Times are milliseconds of the conversation's own trace clock (its first request at 0).
//! The client gap before each request ([`ClientGap`]) is the time between the completion of
//! the request it follows and its own start, with the rule that produced it ([`GapRule`]):
//! the replay releases request k+1 of an agent at completion of k plus this gap.

use std::fmt;
use std::sync::Arc;

use super::blocks::BlockIds;
use super::chat::ChatPayload;

/// A corpus: the conversations of one or more files, in the order they were read (files
/// sorted by name for a directory).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Corpus {
    pub conversations: Vec<Conversation>,
    /// What the reader counted or decided, one line each, for the run's notes (Copilot:
    /// cancelled calls, parallel calls, compactions, segments that miss `prompt`).
    pub notes: Vec<String>,
    /// What production recorded of the corpus's prompts, when the trace says (Copilot).
    pub production: Option<Production>,
    /// `Some(n)`: every hash id is below `n` and names one block after one prefix (an id is
    /// always preceded by the same ids, and a partial block's id is in one request only), as
    /// the Copilot reader builds them; `analyze` then keys its ideal cache by id (a bitset of
    /// `n` bits). A transform that rewrites or cuts ids sets it to `None`.
    pub dense_ids: Option<u64>,
}

/// What a trace recorded of production's prefix cache and how its prompts were rebuilt
/// (Copilot: `tokens.cached`, and the `message_metadata` segments that miss `tokens.prompt`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Production {
    /// Prompt tokens of every call (`tokens.prompt`), and of them what production found
    /// cached (`tokens.cached`).
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// Calls whose segments add up to less than `prompt` (template tokens), and the tokens
    /// added as a final unshared segment.
    pub segments_short: usize,
    pub segments_short_tokens: u64,
    /// Calls whose segments add up to more than `prompt` (truncation), and the tokens cut.
    pub segments_over: usize,
    pub segments_over_tokens: u64,
    /// Calls whose recorded result is not `Success`, by result (`UserCancel`, ...).
    pub not_success: std::collections::BTreeMap<String, usize>,
}

impl Production {
    /// Production's cached share of the prompt tokens (0 without prompts).
    pub fn cached_share(&self) -> f64 {
        if self.prompt_tokens == 0 {
            0.0
        } else {
            self.cached_tokens as f64 / self.prompt_tokens as f64
        }
    }
}

impl Corpus {
    /// Requests of every agent of every conversation.
    pub fn requests(&self) -> usize {
        self.conversations.iter().map(Conversation::requests).sum()
    }

    /// Subagents of every conversation.
    pub fn subagents(&self) -> usize {
        self.conversations
            .iter()
            .map(|c| c.agents.len().saturating_sub(1))
            .sum()
    }
}

/// Whether a conversation's hash ids name blocks of this conversation only or of the corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HashScope {
    /// Ids are private to the conversation (Weka `hash_id_scope: local`): two conversations'
    /// id 5 are different blocks, so the replay namespaces them per conversation.
    Local,
    /// Ids mean the same block in every conversation of the corpus.
    #[default]
    Global,
}

impl HashScope {
    /// Parses a Weka `hash_id_scope` value (`local` or `global`).
    pub fn from_name(name: &str) -> Option<HashScope> {
        match name {
            "local" => Some(HashScope::Local),
            "global" => Some(HashScope::Global),
            _ => None,
        }
    }
}

/// One conversation (a session tree): the main agent and its subagents.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// The conversation's id in the trace (Weka `id`, else the file name or session id).
    pub id: Arc<str>,
    /// The file it was read from (for `file:line` messages and the records).
    pub source: Arc<str>,
    /// Tokens per hash id.
    pub block_size: usize,
    /// Scope of the hash ids.
    pub hash_scope: HashScope,
    /// Tokens of the system prompt of the main agent, when the trace says.
    pub system_tokens: Option<u32>,
    /// Tokens of the tool definitions of the main agent, when the trace says.
    pub tool_tokens: Option<u32>,
    /// `agents[0]` is the main agent; a subagent comes after its parent.
    pub agents: Vec<Agent>,
    /// When the conversation started on the trace's absolute clock (ms since the epoch), for a
    /// format whose sessions start at their recorded times (Copilot); `None`: all at once.
    pub recorded_start_ms: Option<f64>,
}

/// An agent: the main agent or one subagent, a closed loop of requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    /// `main` for the main agent, else the trace's agent id (unique in the conversation).
    pub id: Arc<str>,
    /// The trace's kind of subagent (Weka `subagent_type`, e.g. `Explore`), if any.
    pub kind: Option<Arc<str>>,
    /// `None` for the main agent.
    pub parent: Option<ParentLink>,
    /// Tokens of this agent's own system prompt / tool definitions, when the trace says.
    pub system_tokens: Option<u32>,
    pub tool_tokens: Option<u32>,
    /// Trace time at which the agent started (ms of the conversation's clock).
    pub start_ms: f64,
    /// The agent's requests in order; never empty (a reader refuses an agent without one).
    pub requests: Vec<AgentRequest>,
}

impl Agent {
    /// The id of the main agent.
    pub const MAIN: &'static str = "main";

    /// True for the main agent.
    pub fn is_main(&self) -> bool {
        self.parent.is_none()
    }
}

/// How a subagent hangs off its parent.
#[derive(Debug, Clone, PartialEq)]
pub struct ParentLink {
    /// Index of the parent agent in [`Conversation::agents`] (smaller than the subagent's).
    pub agent: usize,
    /// Index (in the parent's requests) of the request the subagent follows: it is spawned
    /// after this request completed.
    pub after: usize,
    /// Time from the completion of `after` to the subagent's start (ms, >= 0). The subagent's
    /// first request is released at that completion + its own [`ClientGap`], which includes
    /// this offset.
    pub spawn_offset_ms: f64,
    /// Index (in the parent's requests) of the request that waits for this subagent to
    /// finish (its join); `None` for a background subagent, which blocks nothing.
    pub join: Option<usize>,
    /// The subagent starts with its parent's history (AIPerf `forks`), rather than empty.
    pub inherits_history: bool,
}

/// The rule that produced a request's [`ClientGap`]; each format documents the one it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GapRule {
    /// The first request of the main agent: nothing before it.
    First,
    /// The trace's recorded client delay (Weka `think_time`).
    ThinkTime,
    /// Start-to-start minus the recorded server time: `t[k] − (t[k−1] + api_time[k−1])`.
    StartMinusServer,
    /// Start-to-start, when no server time is recorded: `t[k] − t[k−1]` (an upper bound).
    StartToStart,
    /// A per-turn delay given by the trace (AIPerf `delay`).
    Delay,
    /// Tool latencies recorded between the rounds (TraceLab `tools`).
    ToolTime,
    /// The first request of a subagent: its spawn offset from the parent's request plus its
    /// own offset into the subagent.
    Spawn,
    /// A request that joins subagents: its start minus the latest end among its predecessor
    /// and the subagents it waits for (the recorded gap would count the subagents' time).
    AfterJoin,
}

impl GapRule {
    /// A short name for records and messages.
    pub fn name(self) -> &'static str {
        match self {
            GapRule::First => "first",
            GapRule::ThinkTime => "think_time",
            GapRule::StartMinusServer => "start_minus_server",
            GapRule::StartToStart => "start_to_start",
            GapRule::Delay => "delay",
            GapRule::ToolTime => "tool_time",
            GapRule::Spawn => "spawn",
            GapRule::AfterJoin => "after_join",
        }
    }
}

/// The client's time before a request: from the completion of the request it follows (for a
/// request that joins subagents: the latest completion among its predecessor and theirs) to its
/// own start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientGap {
    /// Milliseconds, >= 0.
    pub ms: f64,
    pub rule: GapRule,
}

/// Where a request is in its source: the 1-based line, and for a whole-file JSON format
/// (Weka: one line per file) the JSON path within it (`requests[3].requests[0]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub line: usize,
    pub pointer: Option<Box<str>>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pointer {
            Some(p) => write!(f, "{} ({p})", self.line),
            None => write!(f, "{}", self.line),
        }
    }
}

/// One request of an agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRequest {
    /// Trace time (ms of the conversation's clock).
    pub trace_ms: f64,
    pub input_length: u32,
    pub output_length: u32,
    /// Hash ids as the trace gives them, one per `block_size` tokens (scope: the
    /// conversation's [`HashScope`]; the replay namespaces `Local` ids), as a list or as a
    /// prefix shared with another request ([`BlockIds`]).
    pub hash_ids: BlockIds,
    /// Streaming (`Some(true)`) or not, when the trace records it.
    pub stream: Option<bool>,
    /// The client gap before this request (zero with [`GapRule::First`]).
    pub gap: ClientGap,
    /// The server time the trace recorded for it (ms), if any.
    pub server_ms: Option<f64>,
    /// The model the trace names, if any.
    pub model: Option<Arc<str>>,
    /// Where it is in the source file.
    pub origin: Origin,
    /// A messages-shaped request (AIPerf `dag_jsonl`): the real chat, sent as written.
    pub messages: Option<Arc<ChatPayload>>,
    /// How the trace's call ended when not successfully (Copilot `result`: `UserCancel`, ...);
    /// `None` for a success or when the trace does not say. Sent in full all the same.
    pub result: Option<Arc<str>>,
}

impl Conversation {
    /// Requests of every agent.
    pub fn requests(&self) -> usize {
        self.agents.iter().map(|a| a.requests.len()).sum()
    }

    /// The session id of agent `agent` as the server sees it: the conversation id for the main
    /// agent, `<conversation>::sa:<agent id>` for a subagent (so a session-affinity router
    /// does not pile the subagents onto the parent's instance).
    pub fn session_id(&self, agent: usize) -> String {
        match self.agents.get(agent) {
            Some(a) if !a.is_main() => format!("{}::sa:{}", self.id, a.id),
            _ => self.id.to_string(),
        }
    }

    /// Checks the tree's rules: at least one agent, the first the main agent and only it
    /// without a parent, every agent with a request, parents before children, link indexes
    /// in range, a join after the request the subagent follows, agent ids unique, finite
    /// non-negative gaps and times. The error names the agent at fault.
    pub fn check(&self) -> Result<(), String> {
        let Some(main) = self.agents.first() else {
            return Err("a conversation without requests".into());
        };
        if !main.is_main() {
            return Err("the first agent must be the main agent (no parent)".into());
        }
        if self.block_size == 0 {
            return Err("block size must be at least 1".into());
        }
        let mut ids = std::collections::HashSet::new();
        for (i, a) in self.agents.iter().enumerate() {
            let who = || format!("agent `{}`", a.id);
            if !ids.insert(&*a.id) {
                return Err(format!("{}: the agent id appears twice", who()));
            }
            if a.requests.is_empty() {
                return Err(format!("{}: an agent without requests", who()));
            }
            if i > 0 {
                self.check_link(i, a)
                    .map_err(|e| format!("{}: {e}", who()))?;
            }
            for (k, r) in a.requests.iter().enumerate() {
                let ok = |v: f64| v.is_finite() && v >= 0.0;
                if !ok(r.gap.ms) || !ok(r.trace_ms) || !r.server_ms.is_none_or(ok) {
                    return Err(format!(
                        "{}: request {k} at {}: times must be finite numbers >= 0",
                        who(),
                        r.origin
                    ));
                }
            }
        }
        Ok(())
    }

    fn check_link(&self, index: usize, agent: &Agent) -> Result<(), String> {
        let Some(link) = &agent.parent else {
            return Err("only the first agent may have no parent".into());
        };
        if link.agent >= index {
            return Err("its parent must come before it (a cycle of agents?)".into());
        }
        let parent = &self.agents[link.agent];
        if link.after >= parent.requests.len() {
            return Err(format!(
                "follows request {} of `{}`, which has {} requests",
                link.after,
                parent.id,
                parent.requests.len()
            ));
        }
        if let Some(j) = link.join {
            if j <= link.after || j >= parent.requests.len() {
                return Err(format!(
                    "joined by request {j} of `{}`, which must come after request {} and exist",
                    parent.id, link.after
                ));
            }
        }
        if !(link.spawn_offset_ms.is_finite() && link.spawn_offset_ms >= 0.0) {
            return Err("the spawn offset must be a finite number >= 0".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ms: f64) -> AgentRequest {
        AgentRequest {
            trace_ms: ms,
            input_length: 10,
            output_length: 1,
            hash_ids: vec![1].into(),
            stream: None,
            gap: ClientGap {
                ms: 0.0,
                rule: GapRule::First,
            },
            server_ms: None,
            model: None,
            origin: Origin {
                line: 1,
                pointer: None,
            },
            messages: None,
            result: None,
        }
    }

    fn agent(id: &str, parent: Option<ParentLink>, n: usize) -> Agent {
        Agent {
            id: Arc::from(id),
            kind: None,
            parent,
            system_tokens: None,
            tool_tokens: None,
            start_ms: 0.0,
            requests: (0..n).map(|k| req(k as f64)).collect(),
        }
    }

    fn conversation(agents: Vec<Agent>) -> Conversation {
        Conversation {
            id: Arc::from("c1"),
            source: Arc::from("c1.json"),
            block_size: 64,
            hash_scope: HashScope::Local,
            system_tokens: None,
            tool_tokens: None,
            agents,
            recorded_start_ms: None,
        }
    }

    fn link(after: usize, join: Option<usize>) -> Option<ParentLink> {
        Some(ParentLink {
            agent: 0,
            after,
            spawn_offset_ms: 0.0,
            join,
            inherits_history: false,
        })
    }

    #[test]
    fn tree_rules() {
        let good = conversation(vec![
            agent("main", None, 3),
            agent("a1", link(0, Some(1)), 2),
        ]);
        assert_eq!(good.check(), Ok(()));
        assert_eq!(good.session_id(0), "c1");
        assert_eq!(good.session_id(1), "c1::sa:a1");
        assert_eq!(good.requests(), 5);

        let join_before = conversation(vec![
            agent("main", None, 3),
            agent("a1", link(1, Some(1)), 2),
        ]);
        assert!(join_before
            .check()
            .unwrap_err()
            .contains("joined by request 1"));
        let empty = conversation(vec![agent("main", None, 3), agent("a1", link(0, None), 0)]);
        assert!(empty.check().unwrap_err().contains("without requests"));
        let mut cycle = conversation(vec![agent("main", None, 3), agent("a1", link(0, None), 1)]);
        cycle.agents[1].parent.as_mut().unwrap().agent = 1;
        assert!(cycle.check().unwrap_err().contains("cycle"));
        let twice = conversation(vec![
            agent("main", None, 1),
            agent("main", link(0, None), 1),
        ]);
        assert!(twice.check().unwrap_err().contains("twice"));
        assert!(conversation(vec![]).check().is_err());
    }
}
