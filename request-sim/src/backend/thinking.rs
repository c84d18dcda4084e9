//! The thinking budget a request sends for a trace row that recorded its thinking length (or
//! asked for a budget): `docs/apis.md`, "Thinking budget".
//!
//! - `max_tokens` stays the row's whole output (thinking + answer): OpenAI's and vLLM's
//!   `max_tokens` count reasoning tokens.
//! - Each API's field is its module's (`backend/apis/`, through [`ApiKind::thinking_field`]):
//!   chat and completions send vLLM's `thinking_token_budget` = the recorded length, else the
//!   row's budget; Messages Anthropic's `thinking: {"type": "enabled", "budget_tokens": B}`,
//!   only when `1024 <= B < max_tokens` (otherwise nothing is sent; start-up counts such rows);
//!   Responses, TGI and vLLM's gRPC engine nothing (vLLM takes no budget there).
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

/// The row's thinking budget `budget`, unless `--thinking-budget off`.
pub fn budget_to_send(mode: ThinkingBudget, budget: Option<u32>) -> Option<u32> {
    budget.filter(|_| mode == ThinkingBudget::Auto)
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
    kind.thinking_field(budget_to_send(mode, budget)?, max_tokens)
}
