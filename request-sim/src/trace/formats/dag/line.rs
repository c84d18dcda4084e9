//! A `dag_jsonl` line as written: derived structs, each field's JSON type (and its own range)
//! checked as it is read, with the whole path of a bad field (`turns[2].spawns[0].join_at`)
//! and the words `dag.rs` has always used. The rules that need more than one field (unknown
//! keys, required keys, a bare fork's turn, `join_at`'s range) are `dag.rs`'s checks.

use std::sync::Arc;

use serde::de::{self, value::MapAccessDeserializer, Deserialize, Deserializer, MapAccess};
use serde::de::{Error as _, SeqAccess};
use serde_json::{Map, Number, Value};

use crate::trace::formats::agent_fields::{elements, refused, some, via, Accepts};
use crate::trace::formats::fields;

/// One line: a conversation (orchestrator keys are refused before it is read).
#[derive(serde::Deserialize)]
pub(super) struct Line {
    #[serde(
        rename = "context_mode",
        default = "accumulates",
        deserialize_with = "context_mode"
    )]
    pub(super) accumulate: bool,
    #[serde(default, deserialize_with = "some")]
    pub(super) session_id: Option<SessionRef>,
    #[serde(default, deserialize_with = "some")]
    pub(super) turns: Option<Turns>,
    #[serde(default)]
    pub(super) pre_session_spawns: Option<SessionRefs>,
    /// Any other key: refused.
    #[serde(flatten)]
    pub(super) other: Map<String, Value>,
}

/// One turn as written.
#[derive(serde::Deserialize)]
pub(super) struct TurnLine {
    #[serde(default, deserialize_with = "some")]
    pub(super) messages: Option<Value>,
    #[serde(default, deserialize_with = "model")]
    pub(super) model: Option<Arc<str>>,
    #[serde(default, deserialize_with = "max_tokens")]
    pub(super) max_tokens: Option<u32>,
    #[serde(default, deserialize_with = "delay")]
    pub(super) delay: f64,
    #[serde(default)]
    pub(super) forks: Children<ForkLine>,
    #[serde(default)]
    pub(super) spawns: Children<SpawnLine>,
    /// `tools` and `extra` (checked by `messages.rs`), and any other key: refused.
    #[serde(flatten)]
    pub(super) rest: Map<String, Value>,
}

/// `{"child": "x", "background": true}`.
#[derive(serde::Deserialize)]
pub(super) struct ForkLine {
    #[serde(default, deserialize_with = "some")]
    pub(super) child: Option<SessionRef>,
    #[serde(default, deserialize_with = "background")]
    pub(super) background: bool,
    #[serde(flatten)]
    pub(super) other: Map<String, Value>,
}

/// `{"children": [...], "join_at": K}`.
#[derive(serde::Deserialize)]
pub(super) struct SpawnLine {
    #[serde(default, deserialize_with = "some")]
    pub(super) children: Option<SessionRefs>,
    #[serde(default, deserialize_with = "join_at")]
    pub(super) join_at: Option<Number>,
    #[serde(flatten)]
    pub(super) other: Map<String, Value>,
}

/// A session id: a non-empty string.
pub(super) struct SessionRef(pub(super) String);

/// A list of session ids.
pub(super) struct SessionRefs(pub(super) Vec<SessionRef>);

/// `turns`: an array, each turn read and checked in turn ([`TurnObject`]).
pub(super) struct Turns(pub(super) Vec<Value>);

/// One element of `turns`: an object.
pub(super) struct TurnObject(pub(super) TurnLine);

/// `forks` or `spawns`: an array of children, each a bare session id or an object `S`.
pub(super) struct Children<S>(pub(super) Vec<Child<S>>);

/// One child: `"x"`, or an object `S` (`{"child": "x", ...}`, `{"children": [...], ...}`).
pub(super) enum Child<S> {
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

fn model<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<str>>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(m) => Ok(Some(Arc::from(m))),
        other => Err(expected("a string", &other)),
    }
}

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

fn background<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(b),
        other => Err(expected("a boolean", &other)),
    }
}

/// `join_at` as written; its range is checked by `dag.rs` (it depends on the turn).
fn join_at<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Number>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        Value::Number(x) => Ok(Some(x)),
        other => Err(expected("a turn index", &other)),
    }
}
