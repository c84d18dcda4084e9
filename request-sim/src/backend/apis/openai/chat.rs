//! OpenAI chat completions (`/v1/chat/completions`): the request bodies (a synthetic prompt
//! as one user message; a `messages` row as given, with the byte range of every message kept
//! for `--live-history` ([`LiveBody`])), and the calibration fact. Its answers are read by
//! [`super`] (the `choices` wire it shares with completions) and, for vLLM's token chunk,
//! `super::fast`; its body with images is [`super::chat_images`].

use serde::Serialize;
use serde_json::Value;

use super::tail::OpenAiTail;
use crate::backend::api::Calibration;
use crate::backend::body::{BodyParams, Field, RowBody};

/// The endpoint's path.
pub const PATH: &str = "/v1/chat/completions";

/// The prompt overhead is the chat template's: from `--tokenizer-config`, from the server's
/// `/tokenize` with `messages`, or from a calibration request.
pub const CALIBRATION: Calibration = Calibration::ChatTemplate;

/// A synthetic chat message. `content` comes first: that is how a `messages` row's message
/// objects serialise (sorted keys), so a prompt saved with `--save-prompts` and replayed gives
/// the same bytes.
#[derive(Serialize)]
struct Message<'a> {
    content: &'a str,
    role: &'static str,
}

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: [Message<'a>; 1],
    #[serde(flatten)]
    tail: OpenAiTail<'a>,
}

/// The body of a synthetic prompt `text` (not cleared first).
pub fn encode_body(
    params: &BodyParams,
    text: &str,
    max_tokens: u32,
    thinking: Option<u32>,
    out: &mut Vec<u8>,
) {
    let body = ChatBody {
        model: &params.model,
        messages: [Message {
            role: "user",
            content: text,
        }],
        tail: OpenAiTail::new(params, max_tokens, thinking),
    };
    // Serialising into a Vec cannot fail for these types (no maps with non-string keys).
    let r = serde_json::to_writer(&mut *out, &body);
    debug_assert!(r.is_ok());
}

/// Serialise the chat body of a `messages` trace row into `out` (cleared first): its
/// `messages`, `tools` and `extra` as given, the token budget only when the row gives one, and
/// `user` = `session_user` when set. Later sources override earlier keys in place (no
/// duplicate keys): run settings, then `--extra-body`, then the row's `extra`.
///
/// The keys come in the order [`encode_body`] writes them (`model`, `messages`, `tools`,
/// `max_tokens`, `min_tokens`, `ignore_eos`, `stream`, `stream_options`, `--extra-body`,
/// `user`, the row's `extra`), so a synthetic prompt saved as a `messages` row
/// (`--save-prompts`) replays as the same bytes.
pub fn encode_chat_row_body(
    params: &BodyParams,
    chat: &crate::trace::ChatPayload,
    session_user: Option<&str>,
    out: &mut Vec<u8>,
) {
    encode_chat_row_body_marked(params, chat, (None, session_user), out, None);
}

/// Like [`encode_chat_row_body`], with the row's thinking budget `thinking`
/// ([`crate::trace::Reasoning::budget_to_send`]); with `marks`, also the byte range of every message of the
/// row's `messages` in `out` (`--live-history` swaps recorded answers at these places). The
/// messages are written one by one, which gives the same bytes as writing the array at once.
pub fn encode_chat_row_body_marked(
    params: &BodyParams,
    chat: &crate::trace::ChatPayload,
    (thinking, session_user): (Option<u32>, Option<&str>),
    out: &mut Vec<u8>,
    marks: Option<&mut Vec<std::ops::Range<usize>>>,
) {
    out.clear();
    let mut body = RowBody::new(params);
    let messages = match &chat.messages {
        Value::Array(items) => Field::Messages(items),
        other => Field::Borrowed(other),
    };
    body.set("messages", messages);
    if let Some(t) = &chat.tools {
        body.set("tools", Field::Borrowed(t));
    }
    // Servers reject max_tokens 0: a row with output_length 0 asks for one token.
    if let Some(n) = chat.max_tokens.map(|n| n.max(1)) {
        body.budget(params, "max_tokens", n);
    }
    if let Some((k, v)) = super::tail::thinking_to_send(params, thinking) {
        body.own(k, v);
    }
    body.own("stream", Value::from(params.stream));
    if params.stream {
        body.own("stream_options", serde_json::json!({"include_usage": true}));
    }
    body.tail(
        params,
        session_user.map(super::tail::session_user_field),
        chat,
    );
    body.write(out, marks);
}

/// `--live-history`: where the recorded answers of a turn's earlier turns sit in its body, so
/// the answers the server actually gave can take their place when the turn is released (the
/// rest of the body is built ahead of time like any other).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LiveBody {
    /// In body order.
    pub slots: Vec<LiveSlot>,
}

/// One recorded answer in a body; see [`LiveBody`].
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSlot {
    /// Whose answer: 1 = the parent turn's, 2 = the grandparent's, ...
    pub depth: u32,
    /// The body bytes of the recorded answer message(s); an empty range when the history has
    /// no recorded answer there (a live answer is then inserted, after a comma).
    pub bytes: std::ops::Range<usize>,
    /// The live answer message up to its content: `{"role":"assistant",` (plus the recorded
    /// `"tool_calls":[...],` when the recorded answer called tools, since the trace's tool
    /// results answer them) `"content":`.
    pub head: Box<[u8]>,
}

impl LiveSlot {
    /// The head of an answer message that keeps these recorded tool calls.
    pub fn head_with(tool_calls: &[&serde_json::Value]) -> Box<[u8]> {
        let mut h = b"{\"role\":\"assistant\",".to_vec();
        if !tool_calls.is_empty() {
            h.extend_from_slice(b"\"tool_calls\":");
            let _ = serde_json::to_writer(&mut h, tool_calls);
            h.push(b',');
        }
        h.extend_from_slice(b"\"content\":");
        h.into_boxed_slice()
    }
}

impl LiveBody {
    /// `body` with the recorded answers replaced by the live ones (`answer(depth)`); `None`
    /// when no live answer is known (send `body` as it is). A slot without a live answer keeps
    /// the recorded text.
    pub fn rebuild<'a>(
        &self,
        body: &[u8],
        answer: impl Fn(u32) -> Option<&'a str>,
    ) -> Option<Vec<u8>> {
        let answers: Vec<Option<&str>> = self.slots.iter().map(|s| answer(s.depth)).collect();
        if answers.iter().all(Option::is_none) {
            return None;
        }
        let extra: usize = answers.iter().flatten().map(|a| a.len() + 64).sum();
        let mut out = Vec::with_capacity(body.len() + extra);
        let mut at = 0;
        for (slot, text) in self.slots.iter().zip(&answers) {
            let Some(text) = text else { continue };
            out.extend_from_slice(&body[at..slot.bytes.start]);
            if slot.bytes.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(&slot.head);
            let _ = serde_json::to_writer(&mut out, text);
            out.push(b'}');
            at = slot.bytes.end;
        }
        out.extend_from_slice(&body[at..]);
        Some(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backend::api::ApiKind;
    use crate::backend::body::PromptPayload;
    use crate::backend::dispatch::encode_body;

    pub(crate) fn params(stream: bool) -> BodyParams {
        BodyParams {
            model: "m".into(),
            stream,
            exact_output: true,
            extra: None,
            thinking: Default::default(),
        }
    }

    #[test]
    fn chat_body_asks_for_exact_tokens_and_usage() {
        let mut out = Vec::new();
        encode_body(
            ApiKind::Chat,
            &params(true),
            PromptPayload::Text(" a\"b"),
            (7, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["messages"][0]["content"], " a\"b");
        assert_eq!(v["messages"][0]["role"], "user");
        assert_eq!(v["max_tokens"], 7);
        assert_eq!(v["min_tokens"], 7);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert!(v.get("prompt").is_none());
    }

    #[test]
    fn live_answers_replace_recorded_ones() {
        let chat = crate::trace::ChatPayload {
            messages: serde_json::json!([
                {"role": "user", "content": "q1"},
                {"role": "assistant", "content": "recorded one"},
                {"role": "user", "content": "q2"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "r"},
                {"role": "user", "content": "q3"}
            ]),
            tools: None,
            extra: None,
            max_tokens: Some(4),
            prompt_token_ids: None,
            text_input: None,
        };
        let mut out = Vec::new();
        let mut marks = Vec::new();
        encode_chat_row_body_marked(
            &params(false),
            &chat,
            (None, None),
            &mut out,
            Some(&mut marks),
        );
        let mut plain = Vec::new();
        encode_chat_row_body(&params(false), &chat, None, &mut plain);
        assert_eq!(out, plain, "marking does not change the bytes");
        assert_eq!(marks.len(), 6);
        let msg1: serde_json::Value = serde_json::from_slice(&out[marks[1].clone()]).unwrap();
        assert_eq!(msg1["content"], "recorded one");
        let calls = chat.messages[3]["tool_calls"].clone();
        let live = LiveBody {
            slots: vec![
                LiveSlot {
                    depth: 2,
                    bytes: marks[1].clone(),
                    head: LiveSlot::head_with(&[]),
                },
                LiveSlot {
                    depth: 1,
                    bytes: marks[3].clone(),
                    head: LiveSlot::head_with(&[&calls[0]]),
                },
            ],
        };
        assert_eq!(live.rebuild(&out, |_| None), None);
        let both = live
            .rebuild(&out, |d| {
                Some(if d == 1 { "new \"two\"" } else { "new one" })
            })
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&both).unwrap();
        assert_eq!(
            v["messages"][1],
            serde_json::json!({"role": "assistant", "content": "new one"})
        );
        assert_eq!(v["messages"][3]["content"], "new \"two\"");
        assert_eq!(
            v["messages"][3]["tool_calls"],
            serde_json::json!([calls[0]])
        );
        assert_eq!(v["messages"][5]["content"], "q3");
        assert_eq!(v["max_tokens"], 4);
        // Only the grandparent's answer known: the parent's recorded answer stays.
        let one = live.rebuild(&out, |d| (d == 2).then_some("x")).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&one).unwrap();
        assert_eq!(v["messages"][1]["content"], "x");
        assert_eq!(v["messages"][3], chat.messages[3]);
        // A history without a recorded answer: the live one is inserted.
        let ins = LiveBody {
            slots: vec![LiveSlot {
                depth: 1,
                bytes: marks[0].end..marks[0].end,
                head: LiveSlot::head_with(&[]),
            }],
        };
        let v: serde_json::Value =
            serde_json::from_slice(&ins.rebuild(&out, |_| Some("y")).unwrap()).unwrap();
        assert_eq!(v["messages"].as_array().unwrap().len(), 7);
        assert_eq!(v["messages"][1]["content"], "y");
        assert_eq!(v["messages"][2]["content"], "recorded one");
    }
}
