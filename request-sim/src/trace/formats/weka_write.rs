//! An agent corpus written as a Weka / kv-cache-tester directory (`transform` of an agent
//! corpus, `docs/transform.md`): one JSON file per conversation, in corpus order
//! (`000000.json`, `000001.json`, …), which `weka.rs` reads back into the same session trees.
//!
//! Weka is the one agent format whose fields carry everything the replay uses: hash ids as
//! given (`hash_id_scope` kept), lengths, the model, the server time (`api_time`), each
//! request's client gap (`think_time`), and subagents nested under the request they follow
//! (background ones `async_launched`, joined ones `completed` with their `duration_ms`).
//!
//! The times are written on a clock rebuilt from the gaps, so that the reader's rules give back
//! each gap exactly (to the float rounding of seconds): a request starts at its predecessor's
//! end (`t + api_time`) plus its gap; a subagent starts at the end of the request it follows
//! plus its spawn offset (its first request's `t` is the rest of its gap); a joining request
//! starts at the latest end of its predecessor and the subagents it joins plus its gap. What
//! does not carry over: the gap rule's name (every later request's rule reads back as
//! `think_time`, a subagent's first as `spawn`, a join as `after_join`), the trace's own
//! absolute times (the rebuilt clock gives the same replay, not the same `t`), and what Weka
//! cannot say — `messages` payloads (AIPerf) and subagents that inherit their parent's history
//! or are joined by other than the parent's next request are refused with the conversation's
//! name.

use serde::Serialize;

use crate::trace::model::{Agent, Conversation, HashScope};

/// A file's object.
#[derive(Serialize)]
struct File<'a> {
    id: &'a str,
    block_size: usize,
    hash_id_scope: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_tokens: Option<u32>,
    requests: Vec<Entry<'a>>,
}

/// One entry of a `requests` list: a request or a subagent.
#[derive(Serialize)]
struct Entry<'a> {
    t: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(rename = "in", skip_serializing_if = "Option::is_none")]
    input: Option<u32>,
    #[serde(rename = "out", skip_serializing_if = "Option::is_none")]
    output: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hash_ids: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    api_time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    think_time: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    agent_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subagent_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duration_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    requests: Option<Vec<Entry<'a>>>,
}

impl Entry<'_> {
    fn blank(t: f64, kind: &'static str) -> Self {
        Entry {
            t,
            kind,
            model: None,
            input: None,
            output: None,
            hash_ids: None,
            api_time: None,
            think_time: None,
            agent_id: None,
            subagent_type: None,
            duration_ms: None,
            status: None,
            tool_tokens: None,
            system_tokens: None,
            requests: None,
        }
    }
}

/// Conversation `c` as one Weka JSON file's bytes; an error names what Weka cannot say.
pub fn conversation_json(c: &Conversation) -> Result<Vec<u8>, String> {
    for (i, a) in c.agents.iter().enumerate() {
        if a.requests.iter().any(|r| r.messages.is_some()) {
            return Err(format!(
                "conversation {}: its requests are messages (AIPerf), which a Weka file cannot hold",
                c.id
            ));
        }
        if let Some(l) = &a.parent {
            if l.inherits_history {
                return Err(format!("conversation {}: subagent {} starts with its parent's history (a fork), which a Weka file cannot say", c.id, a.id));
            }
            if l.join.is_some_and(|j| j != l.after + 1) {
                return Err(format!("conversation {}: subagent {} is joined by its parent's request {} but follows request {}; a Weka file joins a subagent at the next request", c.id, a.id, l.join.unwrap_or(0), l.after));
            }
        }
        if i > 0 && a.parent.is_none() {
            return Err(format!(
                "conversation {}: agent {} has no parent",
                c.id, a.id
            ));
        }
    }
    let main = &c.agents[0];
    let (requests, _) = Writer { c }.agent(0, 0.0, 0.0)?;
    let file = File {
        id: &c.id,
        block_size: c.block_size,
        hash_id_scope: match c.hash_scope {
            HashScope::Local => "local",
            HashScope::Global => "global",
        },
        tool_tokens: main.tool_tokens,
        system_tokens: main.system_tokens,
        requests,
    };
    serde_json::to_vec(&file).map_err(|e| format!("conversation {}: {e}", c.id))
}

struct Writer<'a> {
    c: &'a Conversation,
}

impl<'a> Writer<'a> {
    /// The entries of agent `ai`, which starts at `start_ms` (conversation clock) with its
    /// first request at `first_ms`; returns them and the agent's end (its last request's end).
    fn agent(
        &self,
        ai: usize,
        start_ms: f64,
        first_ms: f64,
    ) -> Result<(Vec<Entry<'a>>, f64), String> {
        let a: &'a Agent = &self.c.agents[ai];
        let mut out = Vec::new();
        let mut prev_end = start_ms;
        // Ends of the subagents the next request joins.
        let mut pending: Vec<f64> = Vec::new();
        for (k, r) in a.requests.iter().enumerate() {
            let t_ms = match k {
                0 => first_ms,
                _ => pending.iter().copied().fold(prev_end, f64::max) + r.gap.ms,
            };
            let joining = !pending.is_empty();
            pending.clear();
            let server = r.server_ms;
            out.push(Entry {
                model: r.model.as_deref(),
                input: Some(r.input_length),
                output: Some(r.output_length),
                hash_ids: Some(r.hash_ids.to_vec()),
                api_time: server.map(|s| s / 1e3),
                think_time: (k > 0 && !joining).then_some(r.gap.ms / 1e3),
                ..Entry::blank((t_ms - start_ms) / 1e3, stream_kind(r.stream))
            });
            let end = t_ms + server.unwrap_or(0.0);
            prev_end = end;
            for (si, sub) in self.children(ai, k) {
                let (entry, sub_end, joined) = self.subagent(si, sub, end, start_ms)?;
                out.push(entry);
                if joined {
                    pending.push(sub_end);
                }
            }
        }
        Ok((out, prev_end))
    }

    /// The subagents of agent `ai` that follow its request `k`, in order.
    fn children(&self, ai: usize, k: usize) -> impl Iterator<Item = (usize, &'a Agent)> + '_ {
        self.c.agents.iter().enumerate().filter(move |(_, s)| {
            s.parent
                .as_ref()
                .is_some_and(|l| l.agent == ai && l.after == k)
        })
    }

    /// The entry of subagent `si` spawned after a request that ended at `after_end`, in a
    /// parent that started at `parent_start`; its end, and whether the parent joins it.
    fn subagent(
        &self,
        si: usize,
        sub: &'a Agent,
        after_end: f64,
        parent_start: f64,
    ) -> Result<(Entry<'a>, f64, bool), String> {
        let Some(l) = &sub.parent else {
            return Err(format!(
                "conversation {}: agent {} has no parent",
                self.c.id, sub.id
            ));
        };
        let gap = sub.requests.first().map_or(0.0, |r| r.gap.ms);
        // The spawn offset as the link says, the rest of the first gap as its own offset.
        let offset = l.spawn_offset_ms.min(gap);
        let start = after_end + offset;
        let (requests, end) = self.agent(si, start, start + (gap - offset))?;
        let joined = l.join.is_some();
        let entry = Entry {
            agent_id: Some(&sub.id),
            subagent_type: sub.kind.as_deref(),
            duration_ms: joined.then_some(end - start),
            status: Some(if joined {
                "completed"
            } else {
                "async_launched"
            }),
            tool_tokens: sub.tool_tokens,
            system_tokens: sub.system_tokens,
            requests: Some(requests),
            ..Entry::blank(
                ((if joined { end } else { start }) - parent_start) / 1e3,
                "subagent",
            )
        };
        Ok((entry, end, joined))
    }
}

/// Weka's `type` of a request: `n` for a recorded non-streaming one, else `s`.
fn stream_kind(stream: Option<bool>) -> &'static str {
    match stream {
        Some(false) => "n",
        _ => "s",
    }
}
