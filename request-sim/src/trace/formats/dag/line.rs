//! One `dag_jsonl` line read into a [`Session`]: first into derived structs, each field's JSON
//! type (and its own range) checked as it is read, with the whole path of a bad field
//! (`turns[2].spawns[0].join_at`); then checked across fields (unknown keys, required keys, a
//! bare fork's turn, `join_at`'s range) into the session with the children its turns name.
//! An orchestrator conversation is refused before it is read; the turns are read and checked
//! one after the other.

use std::sync::Arc;

use serde::de::{self, value::MapAccessDeserializer, Deserialize, Deserializer, MapAccess};
use serde::de::{Error as _, SeqAccess};
use serde_json::{Map, Number, Value};

use crate::trace::error::RowError;
use crate::trace::formats::agent_fields::{elements, from_value, refused, some, via, Accepts};
use crate::trace::formats::fields;
use crate::trace::formats::messages::{check_messages, take_extra, take_tools};

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
const FORK_KEYS: [&str; 2] = ["child", "background"];
const SPAWN_KEYS: [&str; 2] = ["children", "join_at"];

// ---------------------------------------------------------------------------------------------
// A line checked: the rules across fields, into a session.

/// A child named by a turn.
#[derive(Debug, Clone)]
pub(super) struct ChildRef {
    pub(super) session: String,
    /// JSON path of the reference, for messages.
    pub(super) path: String,
    pub(super) fork: bool,
    /// Turn index of the parent that waits for it.
    pub(super) join: Option<usize>,
}

/// One turn, checked: what its request sends and the children it names.
pub(super) struct Turn {
    pub(super) model: Option<Arc<str>>,
    pub(super) messages: Vec<Value>,
    pub(super) tools: Option<Value>,
    pub(super) extra: Option<Map<String, Value>>,
    pub(super) max_tokens: Option<u32>,
    pub(super) delay_ms: f64,
    pub(super) children: Vec<ChildRef>,
}

/// One line, checked: a session (`accumulate`: each turn sends the history before it).
pub(super) struct Session {
    pub(super) id: String,
    pub(super) line: usize,
    pub(super) turns: Vec<Turn>,
    pub(super) accumulate: bool,
    pub(super) pre: Vec<ChildRef>,
}

/// A field error.
fn bad(field: impl Into<String>, what: impl Into<String>) -> RowError {
    RowError::Field {
        field: field.into(),
        what: what.into(),
    }
}

/// `e` with its field under `prefix` (a turn's path).
fn prefixed(prefix: &str, e: RowError) -> RowError {
    match e {
        RowError::Field { field, what } => RowError::Field {
            field: format!("{prefix}.{field}"),
            what,
        },
        other => other,
    }
}

/// The first key of `obj` (in key order) that `keys` does not hold, as an error.
fn only_keys(obj: &Map<String, Value>, keys: &[&str], path: &str) -> Result<(), RowError> {
    match obj.keys().find(|k| !keys.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => {
            let at = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            Err(bad(at, format!("unknown key (known: {})", keys.join(", "))))
        }
    }
}

/// AIPerf's orchestrator conversations have no turns of their own: refused.
fn refuse_orchestrator(obj: &Map<String, Value>) -> Result<(), RowError> {
    match ORCHESTRATOR_KEYS.iter().find(|k| obj.contains_key(**k)) {
        None => Ok(()),
        Some(k) => Err(bad(
            *k,
            "orchestrator conversations (orchestrator, rounds, think_time_*, conversation-level spawns) are not supported; write the rounds as turns with spawns and join_at",
        )),
    }
}

/// Reads line `line` (`text`) into a session.
pub(super) fn parse_session(line: usize, text: &str) -> Result<Session, RowError> {
    let obj: Map<String, Value> = fields::from_json_line(text)?;
    refuse_orchestrator(&obj)?;
    let l: Line = from_value(Value::Object(obj), "")?;
    only_keys(&l.other, &CONVERSATION_KEYS, "")?;
    let id = l.session_id.ok_or_else(|| bad("session_id", "missing"))?.0;
    let turns = l.turns.ok_or_else(|| bad("turns", "missing"))?.0;
    if turns.is_empty() {
        return Err(bad("turns", "must hold at least one turn"));
    }
    let n = turns.len();
    let turns = turns
        .into_iter()
        .enumerate()
        .map(|(k, t)| {
            let t: TurnObject = from_value(t, &format!("turns[{k}]"))?;
            check_turn(t.0, k, n)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let pre = l.pre_session_spawns.map_or_else(Vec::new, |ids| {
        ids.0
            .into_iter()
            .enumerate()
            .map(|(i, s)| ChildRef {
                session: s.0,
                path: format!("pre_session_spawns[{i}]"),
                fork: false,
                join: None,
            })
            .collect()
    });
    Ok(Session {
        id,
        line,
        turns,
        accumulate: l.accumulate,
        pre,
    })
}

/// Turn `k` of `n`: its keys, its messages, tools and extra, and its children.
fn check_turn(mut t: TurnLine, k: usize, n: usize) -> Result<Turn, RowError> {
    let path = format!("turns[{k}]");
    only_keys(&t.rest, &TURN_KEYS, &path)?;
    let messages = t.messages.ok_or_else(|| {
        bad(
            format!("{path}.messages"),
            "missing (every turn sends messages)",
        )
    })?;
    check_messages(&messages).map_err(|e| prefixed(&path, e))?;
    let Value::Array(messages) = messages else {
        unreachable!("check_messages accepts arrays only")
    };
    let tools = take_tools(&mut t.rest).map_err(|e| prefixed(&path, e))?;
    let extra = take_extra(&mut t.rest).map_err(|e| prefixed(&path, e))?;
    let mut children = forks(t.forks, &path, k, n)?;
    children.extend(spawns(t.spawns, &path, k, n)?);
    Ok(Turn {
        model: t.model,
        messages,
        tools,
        extra,
        max_tokens: t.max_tokens,
        delay_ms: t.delay,
        children,
    })
}

/// The forks of turn `k` of `n` (at `path`); a bare fork ends the conversation, so it must be
/// on the last turn.
fn forks(
    forks: Children<ForkLine>,
    path: &str,
    k: usize,
    n: usize,
) -> Result<Vec<ChildRef>, RowError> {
    let mut children = Vec::with_capacity(forks.0.len());
    for (i, f) in forks.0.into_iter().enumerate() {
        let fp = format!("{path}.forks[{i}]");
        let (session, background) = match f {
            Child::Bare(s) => (s, false),
            Child::Spec(o) => {
                only_keys(&o.other, &FORK_KEYS, &fp)?;
                let child = o
                    .child
                    .ok_or_else(|| bad(format!("{fp}.child"), "missing"))?;
                (child.0, o.background)
            }
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
    Ok(children)
}

/// The spawns of turn `k` of `n` (at `path`): a bare one joins at the next turn.
fn spawns(
    spawns: Children<SpawnLine>,
    path: &str,
    k: usize,
    n: usize,
) -> Result<Vec<ChildRef>, RowError> {
    let mut children = Vec::new();
    for (i, s) in spawns.0.into_iter().enumerate() {
        let sp = format!("{path}.spawns[{i}]");
        let o = match s {
            Child::Bare(session) => {
                children.push(ChildRef {
                    session,
                    path: sp,
                    fork: false,
                    join: (k + 1 < n).then_some(k + 1),
                });
                continue;
            }
            Child::Spec(o) => o,
        };
        only_keys(&o.other, &SPAWN_KEYS, &sp)?;
        let kids = o
            .children
            .ok_or_else(|| bad(format!("{sp}.children"), "missing"))?
            .0;
        if kids.is_empty() {
            return Err(bad(
                format!("{sp}.children"),
                "must name at least one session",
            ));
        }
        let join = join_turn(o.join_at, k, n, &sp)?;
        for (c, kid) in kids.into_iter().enumerate() {
            children.push(ChildRef {
                session: kid.0,
                path: format!("{sp}.children[{c}]"),
                fork: false,
                join,
            });
        }
    }
    Ok(children)
}

/// The turn that joins a spawn of turn `k` of `n`: `join_at`, after `k` and before `n`; by
/// default the next turn (none after the last).
fn join_turn(
    join_at: Option<Number>,
    k: usize,
    n: usize,
    sp: &str,
) -> Result<Option<usize>, RowError> {
    let Some(x) = join_at else {
        return Ok((k + 1 < n).then_some(k + 1));
    };
    match x.as_u64() {
        Some(j) if (j as usize) > k && (j as usize) < n => Ok(Some(j as usize)),
        _ => Err(bad(
            format!("{sp}.join_at"),
            format!("must be a turn index after this turn ({k}) and before the conversation's end ({n} turns), found {x}"),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// A line as written: derived structs, each field's type checked as it is read.

/// One line: a conversation (orchestrator keys are refused before it is read).
#[derive(serde::Deserialize)]
struct Line {
    #[serde(
        rename = "context_mode",
        default = "accumulates",
        deserialize_with = "context_mode"
    )]
    accumulate: bool,
    #[serde(default, deserialize_with = "some")]
    session_id: Option<SessionRef>,
    #[serde(default, deserialize_with = "some")]
    turns: Option<Turns>,
    #[serde(default)]
    pre_session_spawns: Option<SessionRefs>,
    /// Any other key: refused.
    #[serde(flatten)]
    other: Map<String, Value>,
}

/// One turn as written.
#[derive(serde::Deserialize)]
struct TurnLine {
    #[serde(default, deserialize_with = "some")]
    messages: Option<Value>,
    #[serde(default, deserialize_with = "model")]
    model: Option<Arc<str>>,
    #[serde(default, deserialize_with = "max_tokens")]
    max_tokens: Option<u32>,
    #[serde(default, deserialize_with = "delay")]
    delay: f64,
    #[serde(default)]
    forks: Children<ForkLine>,
    #[serde(default)]
    spawns: Children<SpawnLine>,
    /// `tools` and `extra` (checked by `messages.rs`), and any other key: refused.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// `{"child": "x", "background": true}`.
#[derive(serde::Deserialize)]
struct ForkLine {
    #[serde(default, deserialize_with = "some")]
    child: Option<SessionRef>,
    #[serde(default, deserialize_with = "background")]
    background: bool,
    #[serde(flatten)]
    other: Map<String, Value>,
}

/// `{"children": [...], "join_at": K}`.
#[derive(serde::Deserialize)]
struct SpawnLine {
    #[serde(default, deserialize_with = "some")]
    children: Option<SessionRefs>,
    #[serde(default, deserialize_with = "join_at")]
    join_at: Option<Number>,
    #[serde(flatten)]
    other: Map<String, Value>,
}

/// A session id: a non-empty string.
struct SessionRef(String);

/// A list of session ids.
struct SessionRefs(Vec<SessionRef>);

/// `turns`: an array, each turn read and checked in turn ([`TurnObject`]).
struct Turns(Vec<Value>);

/// One element of `turns`: an object.
struct TurnObject(TurnLine);

/// `forks` or `spawns`: an array of children, each a bare session id or an object `S`.
struct Children<S>(Vec<Child<S>>);

/// One child: `"x"`, or an object `S` (`{"child": "x", ...}`, `{"children": [...], ...}`).
enum Child<S> {
    Bare(String),
    Spec(S),
}

impl<S> Default for Children<S> {
    fn default() -> Self {
        Children(Vec::new())
    }
}

impl<'de> Accepts<'de> for SessionRef {
    const WHAT: &'static str = "a non-empty session id string";

    fn id<E: de::Error>(s: &str) -> Result<Self, E> {
        if s.is_empty() {
            return Err(refused::<Self, E>(fields::describe_value(&Value::from(s))));
        }
        Ok(SessionRef(s.to_owned()))
    }
}

impl<'de> Accepts<'de> for SessionRefs {
    const WHAT: &'static str = "an array of session ids";

    fn list<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error> {
        elements(seq).map(SessionRefs)
    }
}

impl<'de> Accepts<'de> for Turns {
    const WHAT: &'static str = "an array of turns";

    fn list<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error> {
        elements(seq).map(Turns)
    }
}

impl<'de> Accepts<'de> for TurnObject {
    const WHAT: &'static str = "a turn object";

    fn object<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        TurnLine::deserialize(MapAccessDeserializer::new(map)).map(TurnObject)
    }
}

impl<'de, S: Deserialize<'de>> Accepts<'de> for Children<S> {
    const WHAT: &'static str = "an array";

    fn list<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error> {
        elements(seq).map(Children)
    }
}

impl<'de, S: Deserialize<'de>> Accepts<'de> for Child<S> {
    const WHAT: &'static str = SessionRef::WHAT;

    fn object<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        S::deserialize(MapAccessDeserializer::new(map)).map(Child::Spec)
    }

    fn id<E: de::Error>(s: &str) -> Result<Self, E> {
        <SessionRef as Accepts>::id(s).map(|r: SessionRef| Child::Bare(r.0))
    }
}

/// `Deserialize` through [`via`] for the types above.
macro_rules! deserialize_via {
    ($($t:ty),* $(,)?) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                via(d)
            }
        }
    )*};
}

deserialize_via!(SessionRef, SessionRefs, Turns, TurnObject);

impl<'de, S: Deserialize<'de>> Deserialize<'de> for Children<S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        via(d)
    }
}

impl<'de, S: Deserialize<'de>> Deserialize<'de> for Child<S> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        via(d)
    }
}

/// `expected {what}, found {the value}`.
fn expected<E: de::Error>(what: &str, v: &Value) -> E {
    E::custom(format_args!(
        "expected {what}, found {}",
        fields::describe_value(v)
    ))
}

/// The default `context_mode` accumulates.
fn accumulates() -> bool {
    true
}

/// `context_mode`: accumulate the history (the default) or send each turn as written.
fn context_mode<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(true),
        Value::String(m) => match m.to_ascii_lowercase().as_str() {
            "deltas_without_responses" => Ok(true),
            "message_array_with_responses" => Ok(false),
            _ => Err(D::Error::custom(format_args!(
                "unknown value {} (known: deltas_without_responses, message_array_with_responses)",
                fields::quote_short(&m)
            ))),
        },
        other => Err(expected("a string", &other)),
    }
}

/// A turn's `model` (not sent: the replay's model is).
fn model<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<str>>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(m) => Ok(Some(Arc::from(m))),
        other => Err(expected("a string", &other)),
    }
}

/// `max_tokens`: a positive integer, sent as the token budget.
fn max_tokens<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Number(x) if x.as_u64().is_some() => {
            fields::check_length(x.as_u64().unwrap_or(0), 1)
                .map(Some)
                .map_err(D::Error::custom)
        }
        other => Err(expected("a positive integer", &other)),
    }
}

/// `delay`: ms after the previous turn completed (0 when absent).
fn delay<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(0.0),
        Value::Number(x) => {
            let ms = x.as_f64().unwrap_or(f64::NAN);
            if !ms.is_finite() || !(0.0..=fields::MAX_ABS_TIMESTAMP_MS).contains(&ms) {
                return Err(D::Error::custom(format_args!(
                    "must be a number of ms >= 0, found {x}"
                )));
            }
            Ok(ms)
        }
        other => Err(expected("a number of ms", &other)),
    }
}

/// A fork's `background` (false when absent).
fn background<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(b),
        other => Err(expected("a boolean", &other)),
    }
}

/// `join_at` as written; its range is [`join_turn`]'s check (it depends on the turn).
fn join_at<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Number>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Number(x) => Ok(Some(x)),
        other => Err(expected("a turn index", &other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSG: &str = r#"[{"role":"user","content":"x"}]"#;

    /// A conversation of two turns, `first` and `second` added to their keys.
    fn line(first: &str, second: &str) -> String {
        format!(
            r#"{{"session_id":"r","turns":[{{"messages":{MSG}{first}}},{{"messages":{MSG}{second}}}]}}"#
        )
    }

    fn err(text: &str) -> String {
        match parse_session(1, text) {
            Ok(_) => panic!("read: {text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn each_fault_is_named_by_its_whole_path() {
        for (text, want) in [
            (format!(r#"{{"session_id":null,"turns":[{{"messages":{MSG}}}]}}"#), "field `session_id`: expected a non-empty session id string, found null"),
            (r#"{"session_id":"r","turns":[5]}"#.into(), "field `turns[0]`: expected a turn object, found the number 5"),
            (r#"{"session_id":"r","turns":{}}"#.into(), "field `turns`: expected an array of turns, found an object"),
            (r#"{"session_id":"r"}"#.into(), "field `turns`: missing"),
            (line(r#","forks":null"#, ""), "field `turns[0].forks`: expected an array, found null"),
            (line("", r#","forks":[{"background":true}]"#), "field `turns[1].forks[0].child`: missing"),
            (line(r#","forks":[{"child":"a","x":1}]"#, ""), "field `turns[0].forks[0].x`: unknown key (known: child, background)"),
            (line(r#","forks":[{"child":"","background":true}]"#, ""), r#"field `turns[0].forks[0].child`: expected a non-empty session id string, found the string """#),
            (line(r#","forks":[1.5]"#, ""), "field `turns[0].forks[0]`: expected a non-empty session id string, found the number 1.5"),
            (line(r#","forks":[{"child":"a","background":"yes"}]"#, ""), r#"field `turns[0].forks[0].background`: expected a boolean, found the string "yes""#),
            (line(r#","spawns":[{"children":[]}]"#, ""), "field `turns[0].spawns[0].children`: must name at least one session"),
            (line(r#","spawns":[{"children":["a",7]}]"#, ""), "field `turns[0].spawns[0].children[1]`: expected a non-empty session id string, found the number 7"),
            (line(r#","spawns":[{"children":["a"],"join_at":1.5}]"#, ""), "field `turns[0].spawns[0].join_at`: must be a turn index after this turn (0) and before the conversation's end (2 turns), found 1.5"),
            (line(r#","spawns":[{"children":["a"],"join_at":"1"}]"#, ""), r#"field `turns[0].spawns[0].join_at`: expected a turn index, found the string "1""#),
            (format!(r#"{{"session_id":"r","pre_session_spawns":[1],"turns":[{{"messages":{MSG}}}]}}"#), "field `pre_session_spawns[0]`: expected a non-empty session id string, found the number 1"),
            (format!(r#"{{"session_id":"r","context_mode":3,"turns":[{{"messages":{MSG}}}]}}"#), "field `context_mode`: expected a string, found the number 3"),
            (line(r#","delay":"5""#, ""), r#"field `turns[0].delay`: expected a number of ms, found the string "5""#),
            (line(r#","max_tokens":-2"#, ""), "field `turns[0].max_tokens`: expected a positive integer, found the number -2"),
            (line("", r#","model":[]"#), "field `turns[1].model`: expected a string, found an array"),
            (line(r#","tools":{}"#, ""), "field `turns[0].tools`: expected an array of tool definitions, found an object"),
            (r#"{"session_id":"r","turns":[{"messages":null}]}"#.into(), "field `turns[0].messages`: expected an array of chat messages, found null"),
        ] {
            assert_eq!(err(&text), want, "{text}");
        }
    }

    #[test]
    fn turns_are_read_in_order_each_whole_before_its_checks() {
        // Turn 0's unknown key comes before turn 1's bad type: the turns are read in turn.
        assert_eq!(
            err(&line(r#","max_token":3"#, r#","delay":"x""#)),
            "field `turns[0].max_token`: unknown key (known: messages, model, max_tokens, tools, extra, forks, spawns, delay)"
        );
        // Within a turn, its types are read before the rules across its keys: of two faults,
        // the bad type is named (the reader named the unknown key before serde read the turn).
        assert_eq!(
            err(&line(r#","max_token":3,"delay":"x""#, "")),
            r#"field `turns[0].delay`: expected a number of ms, found the string "x""#
        );
    }

    #[test]
    fn a_line_read_keeps_its_children_and_defaults() {
        let s = parse_session(
            3,
            &format!(
                r#"{{"session_id":"r","context_mode":"MESSAGE_ARRAY_WITH_RESPONSES","pre_session_spawns":null,"turns":[{{"messages":{MSG},"delay":null,"forks":[{{"child":"n","background":true}}],"spawns":["a",{{"children":["b","c"],"join_at":null}}]}},{{"messages":{MSG},"max_tokens":4,"model":"m","forks":[{{"child":"z","background":null}}]}}]}}"#
            ),
        )
        .unwrap();
        assert_eq!((s.id.as_str(), s.line, s.accumulate), ("r", 3, false));
        assert!(s.pre.is_empty());
        let kids: Vec<(&str, &str, bool, Option<usize>)> = s
            .turns
            .iter()
            .flat_map(|t| &t.children)
            .map(|c| (c.session.as_str(), c.path.as_str(), c.fork, c.join))
            .collect();
        assert_eq!(
            kids,
            [
                ("n", "turns[0].forks[0]", true, None),
                ("a", "turns[0].spawns[0]", false, Some(1)),
                ("b", "turns[0].spawns[1].children[0]", false, Some(1)),
                ("c", "turns[0].spawns[1].children[1]", false, Some(1)),
                ("z", "turns[1].forks[0]", true, None),
            ]
        );
        assert_eq!(s.turns[1].max_tokens, Some(4));
        assert_eq!(s.turns[1].model.as_deref(), Some("m"));
        assert_eq!(s.turns[0].delay_ms, 0.0);
    }
}
