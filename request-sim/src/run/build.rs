//! The producers' build function: trace row → prompt → request body.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::backend::{self, ApiKind, BodyParams, LiveBody, LiveSlot, PromptPayload, SentModels};
use crate::prompt::image::{data_url, ImageSettings};
use crate::prompt::{ChatCounter, PromptBuilder};
use crate::schedule::{BuildFn, Built, BuiltImages, Scratch};
use crate::trace::history::AnswerSpan;
use crate::trace::{ChatPayload, Planned};

/// Room in a body buffer for everything but the prompt and the model name.
pub(super) const BODY_SLACK: usize = 512;

/// How `messages` rows are sent: the session id in `user` (`--session-user`), with
/// `--live-history` where each row's earlier answers are (by trace index), and what counts
/// their prompt tokens.
pub(super) struct ChatRows {
    pub(super) session_user: bool,
    pub(super) answer_spans: Option<Arc<Vec<Vec<AnswerSpan>>>>,
    /// Counts the prompt tokens of a row (`--tokenizer` with `--tokenizer-config`).
    pub(super) counter: Option<Arc<ChatCounter>>,
    /// How a row's images are sized and made (`None`: `--no-images`, sent as text).
    pub(super) images: Option<ImageSettings>,
}

/// The build function the producers call: [`Bodies::build`] for each planned request.
pub(super) fn make_build_fn(
    builder: Arc<PromptBuilder>,
    kind: ApiKind,
    (params, models): (BodyParams, Option<Arc<SentModels>>),
    (overhead, lead): (u32, &'static str),
    token_ids: bool,
    rows: ChatRows,
) -> Arc<BuildFn> {
    // `--model-map`: one copy of the body settings per served model, made once.
    let by_model = models.as_ref().map_or_else(HashMap::new, |m| {
        m.targets()
            .into_iter()
            .map(|t| {
                let p = BodyParams {
                    model: t.to_string(),
                    ..params.clone()
                };
                (t, p)
            })
            .collect()
    });
    let bodies = Bodies {
        builder,
        kind,
        params,
        models: models.map(|m| (m, by_model)),
        overhead,
        lead,
        token_ids,
        rows,
    };
    Arc::new(move |p: &Planned, s: &mut Scratch| bodies.build(p, s))
}

/// The body settings naming each served model of `--model-map`.
type ParamsByModel = HashMap<Arc<str>, BodyParams>;

/// Everything a request body is made from, shared by every call of the build function.
struct Bodies {
    builder: Arc<PromptBuilder>,
    kind: ApiKind,
    params: BodyParams,
    /// `--model-map`: the served model of each request, and the body settings naming it.
    models: Option<(Arc<SentModels>, ParamsByModel)>,
    /// Tokens the server adds around the content (the content is shortened by them), and the
    /// lead put before every content.
    overhead: u32,
    lead: &'static str,
    /// `--token-ids`: synthetic prompts as token ids.
    token_ids: bool,
    rows: ChatRows,
}

impl Bodies {
    /// The body settings of `req`: naming its served model with `--model-map`.
    fn params(&self, req: &crate::trace::TraceRequest) -> &BodyParams {
        match &self.models {
            Some((m, by)) => by.get(m.sent(req.model.as_deref())).unwrap_or(&self.params),
            None => &self.params,
        }
    }

    /// The body of planned request `p`: a messages row as given ([`Self::row_body`]), else a
    /// prompt ([`Self::prompt_body`]).
    fn build(&self, p: &Planned, s: &mut Scratch) -> Built {
        // `--session-user`: the session id goes into the OpenAI `user` field.
        let user = p
            .turn
            .as_ref()
            .filter(|_| self.rows.session_user)
            .map(|t| &*t.id);
        let chat = p.chat.as_deref();
        if let Some(chat) = chat.filter(|c| !c.is_literal()) {
            return self.row_body(p, chat, user);
        }
        if let (Some(images), Some(settings), None, true, false) = (
            p.req.images.as_deref().filter(|i| !i.is_empty()),
            self.rows.images,
            chat,
            self.kind.is_chat(),
            self.token_ids,
        ) {
            return self.image_body(p, images, settings, user, s);
        }
        self.prompt_body(p, chat.filter(|c| c.is_literal()), user, s)
    }

    /// A messages row is sent as given (with `--live-history`, its recorded answers marked).
    fn row_body(&self, p: &Planned, chat: &ChatPayload, user: Option<&str>) -> Built {
        let (kind, params, rows) = (self.kind, self.params(&p.req), &self.rows);
        let mut body = Vec::new();
        let spans = rows
            .answer_spans
            .as_ref()
            .and_then(|a| a.get(p.req.index))
            .filter(|s| !s.is_empty() && kind.is_chat());
        let thinking = p.req.reasoning.budget_to_send();
        let live = match spans {
            None => {
                backend::encode_row_body(kind, params, chat, (thinking, user), &mut body);
                None
            }
            Some(spans) => {
                let mut marks = Vec::new();
                backend::encode_chat_row_body_marked(
                    params,
                    chat,
                    (thinking, user),
                    &mut body,
                    Some(&mut marks),
                );
                live_body(chat, spans, &marks)
            }
        };
        // Its prompt tokens as the server should count them, when a template is at hand
        // and the history is the recorded one (0: unknown, the server's count is kept).
        let images = self.row_images(chat);
        let intended = match (&rows.counter, &live, images) {
            (Some(c), None, None) => c
                .prompt_tokens(&chat.messages, chat.tools.as_ref())
                .unwrap_or(0),
            // The text without its image parts, then every image by the rule.
            (Some(c), None, Some((i, cost))) if i.tokens.is_some() => c
                .prompt_tokens(&without_images(&chat.messages), chat.tools.as_ref())
                .map_or(0, |n| n + cost),
            _ => 0,
        };
        Built {
            body: Bytes::from(body),
            intended_prompt_tokens: intended,
            images: images.map(|(i, _)| i),
            live,
        }
    }

    /// A prompt request: a `prompt_token_ids` or `text_input` row (`literal`) as written, else
    /// a synthetic prompt of the row's length minus the overhead.
    fn prompt_body(
        &self,
        p: &Planned,
        literal: Option<&ChatPayload>,
        user: Option<&str>,
        s: &mut Scratch,
    ) -> Built {
        let (req, kind) = (&p.req, self.kind);
        let params = self.params(req);
        let content = req.input_length.saturating_sub(self.overhead) as usize;
        let payload = if let Some(ids) = literal.and_then(|c| c.prompt_token_ids.as_deref()) {
            // A `prompt_token_ids` row: a completions prompt of these token ids.
            PromptPayload::TokenIds(ids)
        } else if let Some(t) = literal.and_then(|c| c.text_input.as_deref()) {
            // A `text_input` row: its text is the prompt, encoded like a synthetic one.
            PromptPayload::Text(t)
        } else if self.token_ids {
            s.ids.clear();
            self.builder.write_token_ids(req, content, &mut s.ids);
            PromptPayload::TokenIds(&s.ids)
        } else {
            s.text.clear();
            s.text.push_str(self.lead);
            self.builder.write_text(req, content, &mut s.text);
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
        let tokens = (req.output_length.max(1), req.reasoning.budget_to_send());
        backend::encode_body(kind, params, payload, tokens, &mut body);
        if let Some(u) = user {
            // The session id as the API carries it (OpenAI `user`, Anthropic `metadata`).
            backend::append_session_user(kind, &mut body, u);
        }
        Built {
            body: Bytes::from(body),
            // A token-id row is exactly its ids; a text row's count is the server's.
            intended_prompt_tokens: match literal {
                Some(c) => c
                    .prompt_token_ids
                    .as_ref()
                    .map_or(0, |ids| ids.len() as u32),
                None => content as u32 + self.overhead,
            },
            images: None,
            live: None,
        }
    }
}

impl Bodies {
    /// A request with images: images sized to the rule so that text + images = the row's
    /// input length ([`ImageSettings::plan`]), made from (seed, image id), then the text.
    fn image_body(
        &self,
        p: &Planned,
        images: &[crate::trace::Image],
        settings: ImageSettings,
        user: Option<&str>,
        s: &mut Scratch,
    ) -> Built {
        let req = &p.req;
        let budget = req.input_length.saturating_sub(self.overhead);
        let plan = settings.plan(images, budget);
        let content = budget.saturating_sub(plan.cost) as usize;
        s.text.clear();
        s.text.push_str(self.lead);
        self.builder.write_text(req, content, &mut s.text);
        let urls: Vec<String> = images
            .iter()
            .zip(&plan.sizes)
            .map(|(i, &size)| data_url(settings.seed, i.id, size))
            .collect();
        let hint = urls.iter().map(String::len).sum::<usize>()
            + s.text.len()
            + self.params.model.len()
            + BODY_SLACK;
        let mut body = Vec::with_capacity(hint);
        let tokens = (req.output_length.max(1), req.reasoning.budget_to_send());
        backend::image_body::encode_image_chat_body(
            &self.params,
            &urls,
            &s.text,
            tokens,
            &mut body,
        );
        if let Some(u) = user {
            backend::append_session_user(self.kind, &mut body, u);
        }
        Built {
            body: Bytes::from(body),
            intended_prompt_tokens: content as u32 + self.overhead + plan.cost,
            images: Some(BuiltImages {
                count: images.len() as u32,
                tokens: Some(plan.image_tokens),
            }),
            live: None,
        }
    }
}

impl Bodies {
    /// A messages row's images: how many, their image tokens by the rule, and the prompt
    /// tokens they take (markers included); `None` without image parts.
    fn row_images(&self, chat: &ChatPayload) -> Option<(BuiltImages, u32)> {
        let urls = crate::trace::model::image_urls(&chat.messages);
        if urls.is_empty() {
            return None;
        }
        let rule = self.rows.images.map(|s| s.rule);
        let mut tokens = Some(0u32);
        let mut cost = 0;
        for u in &urls {
            let n = rule.zip(crate::trace::model::image_url_size(u));
            tokens = tokens.zip(n).map(|(t, (r, (w, h)))| t + r.tokens(w, h));
            cost += n.map_or(0, |(r, (w, h))| r.cost(w, h));
        }
        let images = BuiltImages {
            count: urls.len() as u32,
            tokens,
        };
        Some((images, cost))
    }
}

/// `messages` with the `image_url` parts left out (their text counted apart).
fn without_images(messages: &serde_json::Value) -> serde_json::Value {
    let mut m = messages.clone();
    for msg in m.as_array_mut().into_iter().flatten() {
        if let Some(parts) = msg.get_mut("content").and_then(|c| c.as_array_mut()) {
            parts.retain(|p| p.get("type").and_then(|t| t.as_str()) != Some("image_url"));
        }
    }
    m
}

/// `--live-history`: the places of a row's recorded earlier answers in its body (`marks`: the
/// byte range of each of its messages). The answer of a turn replaced by the server's is one
/// assistant message with the live text as its content, keeping the recorded tool calls.
fn live_body(
    chat: &ChatPayload,
    spans: &[AnswerSpan],
    marks: &[std::ops::Range<usize>],
) -> Option<Box<LiveBody>> {
    let messages = chat.messages.as_array()?;
    if marks.len() != messages.len() {
        // `extra` replaced the messages: nothing recorded to swap.
        return None;
    }
    let slots = spans
        .iter()
        .filter_map(|span| {
            let (a, b) = (span.messages.start, span.messages.end);
            let bytes = if b > a {
                marks[a].start..marks[b - 1].end
            } else {
                let end = marks.get(a.checked_sub(1)?)?.end;
                end..end
            };
            let calls: Vec<&serde_json::Value> = messages[a..b]
                .iter()
                .filter_map(|m| m.get("tool_calls")?.as_array())
                .flatten()
                .collect();
            Some(LiveSlot {
                depth: span.depth,
                bytes,
                head: LiveSlot::head_with(&calls),
            })
        })
        .collect();
    Some(Box::new(LiveBody { slots }))
}
