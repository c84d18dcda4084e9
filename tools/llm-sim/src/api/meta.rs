//! What the response of one served request is made of ([`Meta`]), whatever its API and whether
//! it streams: its id, lengths, finish reason, output seed and fault plan; the output words;
//! the simulated connection reset.

use std::io;
use std::time::Duration;

use super::http::Api;
use crate::engine::output_token;
use crate::faults::FaultPlan;
use crate::vocab::builtin_words;

/// What the response of one request is made of.
pub(super) struct Meta {
    pub(super) api: Api,
    pub(super) id: String,
    pub(super) created: u64,
    pub(super) prompt_tokens: u32,
    /// Image tokens of the prompt (`prompt_tokens_details.multimodal_tokens`), 0: none.
    pub(super) image_tokens: u32,
    /// Tokens this request produces (its limit, or the EOS length when it stops earlier).
    pub(super) max_tokens: u32,
    /// `finish_reason` of its last token: `length`, `stop` (TGI: `eos_token`).
    pub(super) finish: &'static str,
    pub(super) output_seed: u64,
    pub(super) include_usage: bool,
    pub(super) continuous_usage: bool,
    pub(super) tgi_details: bool,
    pub(super) plan: FaultPlan,
    pub(super) fault_at: u32,
    /// The first tokens of the answer that are thinking (`--reasoning-share`, or the
    /// request's thinking budget; chat, Responses, Messages).
    pub(super) reasoning: u32,
    /// The tool call the turn ends in after the thinking (`turn.rs`), if any.
    pub(super) tool: Option<ToolCall>,
}

/// Output token `i` of the request whose output seed is `seed`: its id and its word.
pub(super) fn word(seed: u64, i: u32) -> (u32, &'static str) {
    let id = output_token(seed, i);
    let words = builtin_words();
    (id, words[id as usize % words.len()].as_str())
}

/// Pause before a simulated reset, so the bytes already sent reach the client before the RST
/// (a RST makes the peer's kernel drop data the application has not read yet).
pub(super) const RESET_PAUSE: Duration = Duration::from_millis(100);

/// The error a simulated reset fails the response body with.
pub(super) fn reset_error() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "simulated connection reset")
}

/// The `system_fingerprint` of OpenAI answers (vLLM 0.32 sends `vllm-<version>-<hash>`).
pub const SYSTEM_FINGERPRINT: &str = "llm-sim";

/// The tool call a turn ends in (`turn.rs` picks it and streams it).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ToolCall {
    /// The function called: the named one, or the first of the request's tools.
    pub name: String,
    /// The argument key: the first property of the function's parameters, else `input`.
    pub key: String,
    /// `tool_choice` named the function (chat then reports `finish_reason` `stop`, as vLLM).
    pub named: bool,
}
