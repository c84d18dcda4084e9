//! Request bodies, serialised into a reusable buffer: what every API's body is built from
//! ([`PromptPayload`], [`BodyParams`]; the entry points that write one, `encode_body`,
//! `encode_row_body` and `append_session_user`, are [`super::dispatch`]'s: each asks the API's
//! module), and the field writer the `messages`-row bodies of the API modules share
//! ([`RowBody`]: keys in order, later sources overriding earlier keys in place, the byte range
//! of every message kept when asked).
//!
//! The output length each API can enforce (`docs/backends.md`): chat and completions send
//! `max_tokens`, Responses `max_output_tokens`, Messages `max_tokens` (required by Anthropic),
//! TGI `max_new_tokens`; all of them add vLLM's `min_tokens` and `ignore_eos` with
//! `exact_output`, which vLLM-style servers honour on every API and strict servers ignore or
//! refuse (TGI: `ignore_eos_token`). A row's thinking budget adds the API's budget field
//! ([`super::thinking`]).

use serde_json::Value;

/// The prompt of one request.
#[derive(Debug, Clone, Copy)]
pub enum PromptPayload<'a> {
    /// Prompt text (chat content, completions prompt, TGI inputs).
    Text(&'a str),
    /// Token ids (completions endpoints of vLLM / SGLang only).
    TokenIds(&'a [u32]),
}

/// Per-run settings that go into every body.
#[derive(Debug, Clone)]
pub struct BodyParams {
    pub model: String,
    pub stream: bool,
    /// Ask for exactly `max_tokens`: also send `min_tokens` and `ignore_eos: true`
    /// (vLLM/SGLang extensions); off for strict OpenAI-compatible servers.
    pub exact_output: bool,
    /// Extra top-level JSON fields merged into OpenAI bodies (`--extra-body`).
    pub extra: Option<serde_json::Map<String, serde_json::Value>>,
    /// `--thinking-budget`: whether a row's thinking budget is sent.
    pub thinking: super::thinking::ThinkingBudget,
}

impl<'a> PromptPayload<'a> {
    /// The prompt's text; a token-id prompt has none (`""`).
    pub fn text(self) -> &'a str {
        match self {
            PromptPayload::Text(t) => t,
            PromptPayload::TokenIds(_) => "",
        }
    }
}

/// A top-level field of a `messages`-row body, borrowed where it can be.
pub(crate) enum Field<'a> {
    /// The row's `messages`, written one message at a time (so their places can be marked).
    Messages(&'a [Value]),
    Borrowed(&'a Value),
    Owned(Value),
}

/// The fields of a `messages`-row body, in the order they are written; a key set again keeps
/// its place (no duplicate keys).
pub(crate) struct RowBody<'k>(Vec<(&'k str, Field<'k>)>);

impl<'k> RowBody<'k> {
    /// A body whose first field is `model`.
    pub(crate) fn new(params: &BodyParams) -> RowBody<'k> {
        let mut b = RowBody(Vec::with_capacity(12));
        b.set("model", Field::Owned(Value::from(params.model.as_str())));
        b
    }

    /// Sets `key` to `v`, in place when the key is already there.
    pub(crate) fn set(&mut self, key: &'k str, v: Field<'k>) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = v,
            None => self.0.push((key, v)),
        }
    }

    /// Sets `key` to the owned value `v`.
    pub(crate) fn own(&mut self, key: &'k str, v: Value) {
        self.set(key, Field::Owned(v));
    }

    /// The output budget `n` as `key`, with `min_tokens` and `ignore_eos` under
    /// `exact_output`.
    pub(crate) fn budget(&mut self, params: &BodyParams, key: &'k str, n: u32) {
        self.own(key, Value::from(n));
        if params.exact_output {
            self.own("min_tokens", Value::from(n));
            self.own("ignore_eos", Value::from(true));
        }
    }

    /// The last fields of every row body, each source overriding the earlier: `--extra-body`,
    /// the session id's field (`session`), the row's `extra`.
    pub(crate) fn tail(
        &mut self,
        params: &'k BodyParams,
        session: Option<(&'k str, Value)>,
        chat: &'k crate::trace::ChatPayload,
    ) {
        for (k, v) in params.extra.iter().flatten() {
            self.set(k, Field::Borrowed(v));
        }
        if let Some((k, v)) = session {
            self.own(k, v);
        }
        for (k, v) in chat.extra.iter().flatten() {
            self.set(k, Field::Borrowed(v));
        }
    }

    /// Writes the fields as one JSON object into `out`; with `marks`, the byte range of every
    /// message of a [`Field::Messages`] too.
    pub(crate) fn write(
        &self,
        out: &mut Vec<u8>,
        mut marks: Option<&mut Vec<std::ops::Range<usize>>>,
    ) {
        if let Some(m) = marks.as_deref_mut() {
            m.clear();
        }
        out.push(b'{');
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let r = serde_json::to_writer(&mut *out, k).and_then(|()| {
                out.push(b':');
                match v {
                    Field::Messages(items) => write_messages(items, out, marks.as_deref_mut()),
                    Field::Borrowed(v) => serde_json::to_writer(&mut *out, v),
                    Field::Owned(v) => serde_json::to_writer(&mut *out, v),
                }
            });
            debug_assert!(r.is_ok());
        }
        out.push(b'}');
    }
}

/// The messages as a JSON array, one at a time, each one's byte range in `marks`.
fn write_messages(
    items: &[Value],
    out: &mut Vec<u8>,
    mut marks: Option<&mut Vec<std::ops::Range<usize>>>,
) -> serde_json::Result<()> {
    out.push(b'[');
    for (j, m) in items.iter().enumerate() {
        if j > 0 {
            out.push(b',');
        }
        let at = out.len();
        serde_json::to_writer(&mut *out, m)?;
        if let Some(marks) = marks.as_deref_mut() {
            marks.push(at..out.len());
        }
    }
    out.push(b']');
    Ok(())
}
