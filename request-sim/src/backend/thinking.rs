//! The thinking budget a request sends for a trace row that recorded its thinking length (or
//! asked for a budget): `docs/apis.md`, "Thinking budget".
//!
//! - `max_tokens` stays the row's whole output (thinking + answer): OpenAI's and vLLM's
//!   `max_tokens` count reasoning tokens.
//! - Chat and completions: vLLM's `thinking_token_budget` = the recorded length, else the
//!   row's budget.
//! - Messages: Anthropic's `thinking: {"type": "enabled", "budget_tokens": B}`, only when
//!   `1024 <= B < max_tokens` (vLLM's Anthropic endpoint, like Anthropic's API, refuses other
//!   budgets); otherwise nothing is sent (start-up counts such rows).
//! - Responses and TGI: nothing (vLLM takes no budget there).
//! - `--thinking-budget off`: nothing on any API, for servers that reject unknown fields.

use serde_json::Value;

use super::api::ApiKind;

/// `--thinking-budget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ThinkingBudget {
    /// Send the row's thinking length (or budget) as the API's budget field.
    #[default]
    Auto,
    /// Never send a budget field.
    Off,
}

/// The smallest `thinking.budget_tokens` a Messages request may carry.
pub const MESSAGES_MIN_THINKING_BUDGET: u32 = 1024;

/// The `budget_tokens` a Messages request with `max_tokens` can carry for `budget`: `None`
/// unless `1024 <= budget < max_tokens`.
pub fn messages_thinking_budget(budget: u32, max_tokens: u32) -> Option<u32> {
    (MESSAGES_MIN_THINKING_BUDGET..max_tokens)
        .contains(&budget)
        .then_some(budget)
}

/// The top-level field (key, value) a `kind` request with `max_tokens` adds for a row's
/// thinking budget `budget` ([`crate::trace::Reasoning::budget_to_send`]); `None` when it
/// adds none.
pub fn thinking_field(
    kind: ApiKind,
    mode: ThinkingBudget,
    budget: Option<u32>,
    max_tokens: u32,
) -> Option<(&'static str, Value)> {
    let b = budget.filter(|_| mode == ThinkingBudget::Auto)?;
    match kind {
        ApiKind::Chat | ApiKind::Completions => Some(("thinking_token_budget", Value::from(b))),
        ApiKind::Messages => messages_thinking_budget(b, max_tokens).map(|b| {
            (
                "thinking",
                serde_json::json!({"type": "enabled", "budget_tokens": b}),
            )
        }),
        ApiKind::Responses
        | ApiKind::TgiGenerate
        | ApiKind::TgiGenerateStream
        | ApiKind::VllmGrpc => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_gets_its_field_or_none() {
        let auto = ThinkingBudget::Auto;
        assert_eq!(
            thinking_field(ApiKind::Chat, auto, Some(700), 900),
            Some(("thinking_token_budget", Value::from(700)))
        );
        assert_eq!(
            thinking_field(ApiKind::Completions, auto, Some(5), 9),
            Some(("thinking_token_budget", Value::from(5)))
        );
        assert_eq!(
            thinking_field(ApiKind::Messages, auto, Some(1024), 2000),
            Some((
                "thinking",
                serde_json::json!({"type": "enabled", "budget_tokens": 1024})
            ))
        );
        // Below 1024, or not below max_tokens: the Messages API refuses it, none is sent.
        assert_eq!(
            thinking_field(ApiKind::Messages, auto, Some(1023), 2000),
            None
        );
        assert_eq!(
            thinking_field(ApiKind::Messages, auto, Some(2000), 2000),
            None
        );
        assert_eq!(
            thinking_field(ApiKind::Responses, auto, Some(700), 900),
            None
        );
        assert_eq!(
            thinking_field(ApiKind::Chat, ThinkingBudget::Off, Some(7), 9),
            None
        );
        assert_eq!(thinking_field(ApiKind::Chat, auto, None, 9), None);
    }

    fn params(thinking: ThinkingBudget) -> super::super::BodyParams {
        super::super::BodyParams {
            model: "m".into(),
            stream: false,
            exact_output: true,
            extra: None,
            thinking,
        }
    }

    fn json(out: &[u8]) -> Value {
        serde_json::from_slice(out).unwrap()
    }

    #[test]
    fn synthetic_bodies_carry_the_budget_and_the_whole_output_as_max_tokens() {
        use super::super::{encode_body, PromptPayload};
        let mut out = Vec::new();
        let p = params(ThinkingBudget::Auto);
        let text = PromptPayload::Text("hi");
        encode_body(ApiKind::Chat, &p, text, (900, Some(700)), &mut out);
        let v = json(&out);
        assert_eq!(
            (v["max_tokens"].as_u64(), v["min_tokens"].as_u64()),
            (Some(900), Some(900))
        );
        assert_eq!(v["thinking_token_budget"], 700);
        encode_body(ApiKind::Messages, &p, text, (3000, Some(1500)), &mut out);
        let v = json(&out);
        assert_eq!(v["max_tokens"], 3000);
        assert_eq!(
            v["thinking"],
            serde_json::json!({"type": "enabled", "budget_tokens": 1500})
        );
        encode_body(ApiKind::Messages, &p, text, (900, Some(700)), &mut out);
        assert!(json(&out).get("thinking").is_none());
        encode_body(ApiKind::Responses, &p, text, (900, Some(700)), &mut out);
        let v = json(&out);
        assert_eq!(v["max_output_tokens"], 900);
        assert!(v.get("thinking_token_budget").is_none() && v.get("thinking").is_none());
        let off = params(ThinkingBudget::Off);
        encode_body(ApiKind::Chat, &off, text, (900, Some(700)), &mut out);
        assert!(json(&out).get("thinking_token_budget").is_none());
    }

    #[test]
    fn messages_rows_carry_the_budget_after_ignore_eos() {
        use super::super::encode_row_body;
        let chat = crate::trace::ChatPayload {
            messages: serde_json::json!([{"role": "user", "content": "x"}]),
            tools: None,
            extra: None,
            max_tokens: Some(2048),
            text_input: None,
            prompt_token_ids: None,
        };
        let p = params(ThinkingBudget::Auto);
        let mut out = Vec::new();
        encode_row_body(ApiKind::Chat, &p, &chat, (Some(1100), None), &mut out);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.contains(r#""ignore_eos":true,"thinking_token_budget":1100,"stream":false"#),
            "{text}"
        );
        encode_row_body(ApiKind::Messages, &p, &chat, (Some(1100), None), &mut out);
        assert_eq!(json(&out)["thinking"]["budget_tokens"], 1100);
        assert_eq!(json(&out)["max_tokens"], 2048);
        encode_row_body(ApiKind::Messages, &p, &chat, (None, None), &mut out);
        assert!(json(&out).get("thinking").is_none());
    }
}
