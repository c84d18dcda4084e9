//! Closed-loop session timing: a later turn of a session is released at
//! `max(its trace time, parent's completion + think time)`.
//!
//! Agent corpora (`trace/formats/`, `trace::model::Corpus`) use the same gate with more to wait for: a request waits for
//! its parent (its predecessor in the agent, or the parent's request a subagent follows), the
//! last requests of the subagents it joins, and (the first request of a user's next
//! conversation) the last requests of the user's previous conversation; it is released at the
//! latest of these completions plus its client gap ([`SessionGate::wait_turn`]).
//!
//! The dispatcher never waits for a parent: at the turn's trace time it hands the (already
//! built) body to a task that awaits the parent's completion ([`SessionGate::wait`]), so a turn
//! waiting for its parent delays no other request, whatever the number of sessions in flight.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::trace::{SessionTurn, Sessions};

/// `--timing`: when follow-up turns are sent.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    /// Every request at its trace time (sessions ignored).
    #[default]
    Open,
    /// A later turn waits for its parent's answer plus the think time.
    Closed,
}

/// `--think-time`: the pause between a parent's completion and its child's release.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThinkTime {
    /// The trace's own gap (`delay`, else the child's trace time minus the parent's), divided
    /// by `--scale-factor` like every trace time.
    Trace,
    /// A fixed pause in milliseconds.
    FixedMs(f64),
}

impl Default for ThinkTime {
    fn default() -> Self {
        ThinkTime::FixedMs(0.0)
    }
}

impl ThinkTime {
    /// Parses `trace` or a number of milliseconds (>= 0).
    pub fn parse(s: &str) -> Result<ThinkTime, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("trace") {
            return Ok(ThinkTime::Trace);
        }
        match t.parse::<f64>() {
            Ok(ms) if ms.is_finite() && ms >= 0.0 => Ok(ThinkTime::FixedMs(ms)),
            _ => Err(format!(
                "expected `trace` or a number of milliseconds >= 0, got {s:?}"
            )),
        }
    }

    /// The think time before `turn` (a turn with a parent).
    pub fn before(&self, turn: &SessionTurn, scale_factor: f64) -> Duration {
        let ms = match *self {
            ThinkTime::FixedMs(ms) => ms,
            ThinkTime::Trace => turn.trace_gap_ms.unwrap_or(0.0).max(0.0) / scale_factor,
        };
        Duration::from_secs_f64(ms / 1e3)
    }
}

/// Session settings of a replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionOptions {
    pub timing: Timing,
    pub think: ThinkTime,
    /// `--skip-after-failed-parent`: a turn whose parent failed is not sent (recorded skipped).
    pub skip_after_failed_parent: bool,
    /// `--session-user`: the session id goes into the OpenAI `user` field.
    pub session_user: bool,
    /// `--session-header NAME`: the session id goes into this request header.
    pub session_header: Option<reqwest::header::HeaderName>,
    /// `--live-history` (closed timing, messages traces): a later turn carries the answers the
    /// server actually gave to the earlier turns instead of the recorded ones.
    pub live_history: bool,
}

/// How a request ended, as its children see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Done {
    pub at: Instant,
    /// The request completed with status ok (or dry run).
    pub ok: bool,
    /// `--live-history`: the answers of this request and of its ancestors (`None` otherwise,
    /// and for a turn that was never sent).
    pub answer: Option<Arc<LiveAnswer>>,
}

/// `--live-history`: what the server answered to one turn, linked to the answers of the turns
/// before it in the session (newest first), so a later turn finds every earlier answer it
/// replays without copying them.
#[derive(Debug, PartialEq)]
pub struct LiveAnswer {
    /// The answer's text (`content` of the chat response); `None` when the turn failed.
    pub text: Option<Box<str>>,
    /// The parent's [`LiveAnswer`], when the parent is in the replayed slice.
    pub prev: Option<Arc<LiveAnswer>>,
}

impl LiveAnswer {
    /// The answer `depth` turns back along the chain (1 = this one), if known.
    pub fn at_depth(self: &Arc<Self>, depth: u32) -> Option<&str> {
        let mut node = self;
        for _ in 1..depth {
            node = node.prev.as_ref()?;
        }
        node.text.as_deref()
    }
}

/// Completion signals of the requests that are some turn's parent.
pub struct SessionGate {
    done: Vec<Option<watch::Sender<Option<Done>>>>,
}

impl SessionGate {
    /// A gate for `n` requests with these sessions.
    pub fn new(sessions: &Sessions, n: usize) -> SessionGate {
        let mut done: Vec<Option<watch::Sender<Option<Done>>>> = (0..n).map(|_| None).collect();
        for t in sessions.turns.iter().flatten() {
            for p in t.waits() {
                if p < n && done[p].is_none() {
                    done[p] = Some(watch::channel(None).0);
                }
            }
        }
        SessionGate { done }
    }

    /// True when some turn waits for request `index` (only then is its answer kept).
    pub fn is_parent(&self, index: usize) -> bool {
        matches!(self.done.get(index), Some(Some(_)))
    }

    /// Request `index` ended (every request must end here once, sent or not).
    pub fn complete(&self, index: usize, done: Done) {
        if let Some(Some(tx)) = self.done.get(index) {
            tx.send_replace(Some(done));
        }
    }

    /// Waits until request `parent` ended.
    pub async fn wait(&self, parent: usize) -> Option<Done> {
        let tx = self.done.get(parent)?.as_ref()?;
        let mut rx = tx.subscribe();
        let r = rx.wait_for(Option::is_some).await.ok()?;
        r.clone()
    }
}

/// What a turn waited for ([`SessionGate::wait_turn`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Waited {
    /// How the parent ended (`None` without a parent).
    pub parent: Option<Done>,
    /// The latest completion among everything the turn waited for (`None`: nothing).
    pub latest: Option<Instant>,
    /// The latest completion among the subagents it joins (`None`: it joins none).
    pub joins_latest: Option<Instant>,
    /// Subagents it joined.
    pub joins: usize,
}

impl SessionGate {
    /// Waits until everything `turn` waits for ended: its parent, the subagents it joins and
    /// its user's previous conversation (agent corpora), in turn, so the last wake-up is the
    /// latest completion and a finished one costs no wait.
    pub async fn wait_turn(&self, turn: &SessionTurn) -> Waited {
        let parent = match turn.parent_index {
            Some(p) => self.wait(p).await,
            None => None,
        };
        let mut latest = parent.as_ref().map(|d| d.at);
        let mut joins_latest: Option<Instant> = None;
        let mut joins = 0;
        if let Some(a) = &turn.agent {
            for &j in a.joins.iter() {
                if let Some(d) = self.wait(j).await {
                    joins_latest = joins_latest.max(Some(d.at));
                    joins += 1;
                }
            }
            for &p in a.prior.iter() {
                if let Some(d) = self.wait(p).await {
                    latest = latest.max(Some(d.at));
                }
            }
        }
        Waited {
            parent,
            latest: latest.max(joins_latest),
            joins_latest,
            joins,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_time_parses() {
        assert_eq!(ThinkTime::parse("trace"), Ok(ThinkTime::Trace));
        assert_eq!(ThinkTime::parse("250"), Ok(ThinkTime::FixedMs(250.0)));
        assert!(ThinkTime::parse("-1").is_err());
        assert!(ThinkTime::parse("soon").is_err());
        let turn = SessionTurn {
            id: Arc::from("s"),
            turn: 2,
            parent_index: Some(0),
            trace_gap_ms: Some(400.0),
            agent: None,
        };
        assert_eq!(
            ThinkTime::Trace.before(&turn, 2.0),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn live_answers_by_depth() {
        let first = Arc::new(LiveAnswer {
            text: Some("one".into()),
            prev: None,
        });
        let failed = Arc::new(LiveAnswer {
            text: None,
            prev: Some(first),
        });
        let third = Arc::new(LiveAnswer {
            text: Some("three".into()),
            prev: Some(failed),
        });
        assert_eq!(third.at_depth(1), Some("three"));
        assert_eq!(third.at_depth(2), None);
        assert_eq!(third.at_depth(3), Some("one"));
        assert_eq!(third.at_depth(4), None);
    }

    #[test]
    fn gate_wakes_children() {
        let sessions = Sessions {
            turns: vec![
                Some(SessionTurn {
                    id: Arc::from("s"),
                    turn: 1,
                    parent_index: None,
                    trace_gap_ms: None,
                    agent: None,
                }),
                Some(SessionTurn {
                    id: Arc::from("s"),
                    turn: 2,
                    parent_index: Some(0),
                    trace_gap_ms: Some(1.0),
                    agent: None,
                }),
            ],
            stats: Default::default(),
            cut: Vec::new(),
        };
        let gate = Arc::new(SessionGate::new(&sessions, 2));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let at = Instant::now();
        let got = rt.block_on(async {
            let g = gate.clone();
            let waiter = tokio::spawn(async move { g.wait(0).await });
            tokio::task::yield_now().await;
            let done = Done {
                at,
                ok: false,
                answer: None,
            };
            gate.complete(0, done);
            waiter.await.unwrap()
        });
        assert_eq!(
            got,
            Some(Done {
                at,
                ok: false,
                answer: None
            })
        );
        assert!(gate.is_parent(0) && !gate.is_parent(1));
        // Requests nobody waits for have no signal.
        assert_eq!(rt.block_on(gate.wait(1)), None);
    }
}
