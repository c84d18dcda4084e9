//! `--save-prompts`: every request's prompt as built, written as a `messages` trace
//! (AIPerf-style JSONL: `timestamp` ms, `session_id`, `messages`, `tools`, `output_length`,
//! `reasoning_tokens`, `thinking_token_budget`,
//! `extra`) that request-sim replays as the same request bodies and AIPerf's trace replay
//! accepts. Completions endpoints get `text_input` rows, and with `--token-ids`
//! `prompt_token_ids` rows (request-sim's own: AIPerf's trace rows carry text only).

use std::io::Write;
use std::path::Path;

use serde::Serialize;

use std::sync::Arc;

use crate::backend::ApiKind;
use crate::prompt::PromptBuilder;
use crate::trace::{ChatPayload, Sessions, TraceRequest};
use crate::{Error, Result};

#[derive(Serialize)]
struct Message<'a> {
    role: &'static str,
    content: &'a str,
}

/// A trace time in ms: an integer when it is one (as in the source traces), else a float.
#[derive(Serialize)]
#[serde(untagged)]
enum Ms {
    Int(i64),
    Float(f64),
}

impl Ms {
    fn of(ms: f64) -> Ms {
        if ms.fract() == 0.0 && ms.abs() < 1e15 {
            Ms::Int(ms as i64)
        } else {
            Ms::Float(ms)
        }
    }
}

/// What a synthetic prompt is saved as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SaveAs {
    /// Chat, Responses and Messages endpoints: one user message.
    Messages,
    /// Completions endpoints: `text_input`.
    Text,
    /// Completions endpoints with `--token-ids`: `prompt_token_ids`.
    TokenIds,
}

impl SaveAs {
    pub(super) fn of(kind: ApiKind, token_ids: bool) -> SaveAs {
        match (kind, token_ids) {
            (k, _) if k.takes_messages() => SaveAs::Messages,
            (_, true) => SaveAs::TokenIds,
            _ => SaveAs::Text,
        }
    }
}

#[derive(Serialize)]
struct Row<'a, M: Serialize> {
    timestamp: Ms,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text_input: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_token_ids: Option<&'a [u32]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<M>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_length: Option<u32>,
    /// The row's thinking length and budget (`docs/traces.md`, "Reasoning"), so the saved row
    /// sends the same thinking budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_token_budget: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extra: Option<&'a serde_json::Map<String, serde_json::Value>>,
}

/// Write the prompt of every request of `requests` (content shortened by `overhead`, exactly as
/// the producers build it) to `path`; returns the rows written.
pub(super) fn save_prompts(
    path: &Path,
    requests: &[TraceRequest],
    builder: &PromptBuilder,
    (overhead, lead): (u32, &str),
    save_as: SaveAs,
    chats: &[Option<Arc<ChatPayload>>],
    sessions: &Sessions,
) -> Result<usize> {
    let err = |e: std::io::Error| Error::io(format!("--save-prompts {}", path.display()), e);
    // Written whole or not at all: an error on the way leaves a file already at `path` as it was.
    let mut out = crate::util::OutputFile::create(path)?;
    let mut text = String::new();
    let mut ids = Vec::new();
    let chat = save_as == SaveAs::Messages;
    for req in requests {
        let session_id = sessions.key(req.index);
        let mut line = Vec::new();
        let r = match chats.get(req.index).and_then(|c| c.as_deref()) {
            Some(row) => serde_json::to_writer(
                &mut line,
                &Row {
                    timestamp: Ms::of(req.timestamp_ms),
                    session_id,
                    text_input: row.text_input.as_deref(),
                    prompt_token_ids: row.prompt_token_ids.as_deref(),
                    messages: (!row.is_literal()).then_some(&row.messages),
                    tools: row.tools.as_ref(),
                    output_length: row.max_tokens,
                    reasoning_tokens: req.reasoning.tokens,
                    thinking_token_budget: req.reasoning.budget,
                    extra: row.extra.as_ref(),
                },
            ),
            None => {
                text.clear();
                ids.clear();
                let content = req.input_length.saturating_sub(overhead) as usize;
                if save_as == SaveAs::TokenIds {
                    builder.write_token_ids(req, content, &mut ids);
                } else {
                    text.push_str(lead);
                    builder.write_text(req, content, &mut text);
                }
                serde_json::to_writer(
                    &mut line,
                    &Row {
                        timestamp: Ms::of(req.timestamp_ms),
                        session_id,
                        text_input: (save_as == SaveAs::Text).then_some(text.as_str()),
                        prompt_token_ids: (save_as == SaveAs::TokenIds).then_some(ids.as_slice()),
                        messages: chat.then_some([Message {
                            role: "user",
                            content: &text,
                        }]),
                        tools: None,
                        output_length: Some(req.output_length),
                        reasoning_tokens: req.reasoning.tokens,
                        thinking_token_budget: req.reasoning.budget,
                        extra: None,
                    },
                )
            }
        };
        r.map_err(|e| Error::internal(format!("--save-prompts: request {}: {e}", req.index)))?;
        line.push(b'\n');
        out.write_all(&line).map_err(err)?;
    }
    out.commit()?;
    Ok(requests.len())
}
