//! The producers' build function: trace row → prompt → request body.

use std::sync::Arc;

use bytes::Bytes;

use crate::backend::{self, ApiKind, BodyParams, PromptPayload};
use crate::prompt::PromptBuilder;
use crate::schedule::{BuildFn, Prepared, Scratch};
use crate::trace::{ChatPayload, Sessions, TraceRequest};

/// Room in a body buffer for everything but the prompt and the model name.
pub(super) const BODY_SLACK: usize = 512;

/// The chat requests of a `messages` trace, and the sessions when their ids go into `user`.
pub(super) struct ChatRows {
    pub(super) chats: Arc<Vec<Option<Arc<ChatPayload>>>>,
    pub(super) sessions: Option<Arc<Sessions>>,
}

pub(super) fn make_build_fn(
    builder: Arc<PromptBuilder>,
    kind: ApiKind,
    params: BodyParams,
    (overhead, lead): (u32, &'static str),
    token_ids: bool,
    rows: ChatRows,
) -> Arc<BuildFn> {
    Arc::new(move |req: &TraceRequest, s: &mut Scratch| {
        let user = rows.sessions.as_ref().and_then(|ss| ss.key(req.index));
        let chat = rows.chats.get(req.index).and_then(|c| c.as_deref());
        if let Some(chat) = chat.filter(|c| !c.is_literal()) {
            // A messages row is sent as given; its prompt length is the server's to count.
            let mut body = Vec::new();
            backend::encode_chat_row_body(&params, chat, user, &mut body);
            return Prepared {
                index: req.index,
                body: Bytes::from(body),
                intended_prompt_tokens: 0,
            };
        }
        let content = req.input_length.saturating_sub(overhead) as usize;
        let literal = chat.filter(|c| c.is_literal());
        let payload = if let Some(ids) = literal.and_then(|c| c.prompt_token_ids.as_deref()) {
            // A `prompt_token_ids` row: a completions prompt of these token ids.
            PromptPayload::TokenIds(ids)
        } else if let Some(t) = literal.and_then(|c| c.text_input.as_deref()) {
            // A `text_input` row: its text is the prompt, encoded like a synthetic one.
            PromptPayload::Text(t)
        } else if token_ids {
            s.ids.clear();
            builder.write_token_ids(req, content, &mut s.ids);
            PromptPayload::TokenIds(&s.ids)
        } else {
            s.text.clear();
            s.text.push_str(lead);
            builder.write_text(req, content, &mut s.text);
            PromptPayload::Text(&s.text)
        };
        // Encode straight into the body's own buffer (sized for the whole body, so it never
        // grows) and hand it over without a copy.
        let hint = match payload {
            PromptPayload::Text(t) => t.len(),
            PromptPayload::TokenIds(ids) => ids.len() * 7,
        } + params.model.len()
            + BODY_SLACK;
        let mut body = Vec::with_capacity(hint);
        // Servers reject max_tokens 0: rows with output_length 0 ask for one token.
        backend::encode_body(kind, &params, payload, req.output_length.max(1), &mut body);
        if let (Some(u), true) = (user, kind.is_openai()) {
            // The session id as OpenAI `user`: appended inside the body's top-level object.
            if body.last() == Some(&b'}') {
                body.pop();
                body.extend_from_slice(b",\"user\":");
                let _ = serde_json::to_writer(&mut body, u);
                body.push(b'}');
            }
        }
        Prepared {
            index: req.index,
            body: Bytes::from(body),
            intended_prompt_tokens: if literal.is_some() {
                0
            } else {
                content as u32 + overhead
            },
        }
    })
}
