//! What the simulated model's turn is made of, whatever the API: its thinking (the first
//! tokens, `--reasoning-share` or the request's thinking budget), then either the answer's
//! text or a tool call (`--tool-call-share`, or a `tool_choice` that forces one) whose JSON
//! arguments are streamed one output token per fragment.

use serde_json::Value;

use super::http::Api;
use super::meta::{word, Meta, ToolCall};
use crate::util::mix64;

/// What a request's `tool_choice` asks for.
enum Choice {
    None,
    Auto,
    Required,
    Named(String),
}

/// The `tool_choice` of any API: chat's and Responses' `"none"`, `"auto"`, `"required"`,
/// `{"type":"function","function":{"name":..}}` or `{"type":"function","name":..}`;
/// Anthropic's `{"type":"auto"|"any"|"none"}` and `{"type":"tool","name":..}`.
fn choice(v: Option<&Value>) -> Choice {
    let Some(v) = v else {
        return Choice::Auto;
    };
    let kind = v.as_str().or_else(|| v.get("type").and_then(Value::as_str));
    match kind {
        Some("none") => Choice::None,
        Some("required") | Some("any") => Choice::Required,
        Some("function") | Some("tool") => {
            let name = v
                .get("name")
                .or_else(|| v.get("function").and_then(|f| f.get("name")))
                .and_then(Value::as_str);
            match name {
                Some(n) => Choice::Named(n.to_string()),
                None => Choice::Required,
            }
        }
        _ => Choice::Auto,
    }
}

/// A number in [0, 1) drawn from the prompt's token ids: the same request (the same prompt)
/// draws the same number on every run and every instance.
fn prompt_draw(prompt: &[u32]) -> f64 {
    let h = prompt
        .iter()
        .fold(0x7001_CA11u64, |h, &t| mix64(h ^ u64::from(t)));
    (mix64(h) >> 11) as f64 / (1u64 << 53) as f64
}

/// The tool call a request ends in, if any: it has chat-shaped `tools`, and its `tool_choice`
/// is `required` (Anthropic: `any`) or names a function, or is `auto` (or absent) and the
/// prompt's draw falls under `share`. A named function missing from `tools` is an error (as
/// vLLM answers it: 400).
pub(super) fn pick_tool(
    tools: Option<&Value>,
    tool_choice: Option<&Value>,
    share: f64,
    prompt: &[u32],
) -> Result<Option<ToolCall>, String> {
    let Some(list) = tools.and_then(Value::as_array).filter(|l| !l.is_empty()) else {
        return Ok(None);
    };
    let name_of = |t: &Value| {
        t.get("function")
            .and_then(|f| f.get("name"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let (tool, named) = match choice(tool_choice) {
        Choice::None => return Ok(None),
        Choice::Auto if share <= 0.0 || prompt_draw(prompt) >= share => return Ok(None),
        Choice::Auto | Choice::Required => (&list[0], false),
        Choice::Named(n) => match list.iter().find(|t| name_of(t).as_deref() == Some(&n)) {
            Some(t) => (t, true),
            None => return Err(format!("Tool '{n}' has not been passed in `tools`.")),
        },
    };
    let key = tool
        .get("function")
        .and_then(|f| f.get("parameters"))
        .and_then(|p| p.get("properties"))
        .and_then(Value::as_object)
        .and_then(|o| o.keys().next().cloned())
        .unwrap_or_else(|| "input".to_string());
    Ok(Some(ToolCall {
        name: name_of(tool).unwrap_or_default(),
        key,
        named,
    }))
}

/// The kind of an output token.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Kind {
    Thinking,
    Text,
    Tool,
}

impl Meta {
    /// The kind of output token `i`: thinking first, then the tool call or the text.
    pub(super) fn kind(&self, i: u32) -> Kind {
        if i < self.reasoning {
            Kind::Thinking
        } else if self.tool.is_some() {
            Kind::Tool
        } else {
            Kind::Text
        }
    }

    /// Tokens of the tool call (all the tokens after the thinking when there is one).
    pub(super) fn tool_tokens(&self) -> u32 {
        match self.tool {
            Some(_) => self.max_tokens - self.reasoning.min(self.max_tokens),
            None => 0,
        }
    }

    /// The tool call's id (chat's `tool_calls[0].id`, Responses' `call_id`, Anthropic's
    /// `tool_use` id: vLLM 0.32 uses its chat id on all three).
    pub(super) fn call_id(&self) -> String {
        let hex = self.id.rsplit(['-', '_']).next().unwrap_or(&self.id);
        format!("chatcmpl-tool-{}", &hex[..hex.len().min(16)])
    }

    /// The raw JSON text of the tool call's argument fragment carried by output token `i`.
    /// Chat: the call's k tokens carry k fragments (the first with the call's name).
    /// Responses and Messages: the event opening the call (the `function_call` item, the
    /// `tool_use` block: its name) is the first token, so the other k − 1 carry the fragments
    /// and the first carries none. With m fragments: m = 1 is `{}`; otherwise the first is
    /// `{"KEY": "`, the last `"}`, and each one between a word (` w`): concatenated,
    /// `{"KEY": " w w .."}`.
    pub(super) fn fragment(&self, i: u32) -> String {
        let Some(tool) = &self.tool else {
            return String::new();
        };
        let (j, m) = match self.api {
            Api::Responses | Api::Messages => match (i - self.reasoning).checked_sub(1) {
                Some(j) => (j, self.tool_tokens() - 1),
                None => return String::new(),
            },
            _ => (i - self.reasoning, self.tool_tokens()),
        };
        if m == 1 {
            "{}".to_string()
        } else if j == 0 {
            let key = serde_json::to_string(&tool.key).unwrap_or_else(|_| "\"input\"".into());
            format!("{{{key}: \"")
        } else if j + 1 == m {
            "\"}".to_string()
        } else {
            format!(" {}", word(self.output_seed, i).1)
        }
    }

    /// The whole arguments of the tool call (its fragments of tokens `reasoning..n`; `{}`
    /// when a Responses or Messages call had only its opening token).
    pub(super) fn arguments(&self, n: u32) -> String {
        let args: String = (self.reasoning.min(n)..n)
            .map(|i| self.fragment(i))
            .collect();
        if args.is_empty() {
            "{}".to_string()
        } else {
            args
        }
    }

    /// The words of output tokens `range`, each after a space.
    pub(super) fn words(&self, range: std::ops::Range<u32>) -> String {
        range
            .map(|i| format!(" {}", word(self.output_seed, i).1))
            .collect()
    }
}

/// A whole answer of `n` tokens in its parts: the thinking's words, the text's words, the
/// tool call's arguments (when the turn ends in one, instead of text).
pub(super) struct Parts {
    pub thinking: String,
    pub text: String,
    pub args: Option<String>,
}

impl Meta {
    /// The parts of the answer's first `n` tokens.
    pub(super) fn parts(&self, n: u32) -> Parts {
        let r = self.reasoning.min(n);
        let thinking = self.words(0..r);
        match self.tool {
            Some(_) => Parts {
                thinking,
                text: String::new(),
                args: Some(self.arguments(n)),
            },
            None => Parts {
                thinking,
                text: self.words(r..n),
                args: None,
            },
        }
    }

    /// The index of the output item (Responses) or content block (Messages) of token kind
    /// `kind`: the thinking's is 0, the text's or tool call's 1 after thinking, else 0.
    pub(super) fn output_index(&self, kind: Kind) -> u32 {
        u32::from(kind != Kind::Thinking && self.reasoning > 0)
    }

    /// Chat's `finish_reason`: a turn stopped after its tool call says `tool_calls` (`stop`
    /// when `tool_choice` named the function), as vLLM 0.32; the length limit wins.
    pub(super) fn chat_finish(&self) -> &'static str {
        match &self.tool {
            Some(t) if self.finish == "stop" && !t.named => "tool_calls",
            _ => self.finish,
        }
    }
}

/// `s` as the inside of a JSON string (escaped, without the quotes).
pub(super) fn escaped(s: &str) -> String {
    let q = serde_json::to_string(s).unwrap_or_default();
    q[1..q.len() - 1].to_string()
}

/// The thinking tokens of an answer of `n` tokens: none on completions and TGI (vLLM has no
/// reasoning parser there), the request's budget when it gives one (the model thinks for
/// exactly min(budget, n) tokens), else round(share × n).
pub(super) fn reasoning_tokens(
    api: super::http::Api,
    n: u32,
    share: f64,
    budget: Option<u32>,
) -> u32 {
    use super::http::Api;
    if matches!(api, Api::Completion | Api::Tgi) {
        return 0;
    }
    match budget {
        Some(b) => b.min(n),
        None if share <= 0.0 => 0,
        None => ((f64::from(n) * share).round() as u32).min(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn choice_forces_or_names_or_defers_to_the_share() {
        let tools = json!([
            {"type": "function", "function": {"name": "a", "parameters":
                {"type": "object", "properties": {"city": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "b"}}
        ]);
        let pick = |choice: Option<&Value>, share: f64| {
            pick_tool(Some(&tools), choice, share, &[1]).unwrap()
        };
        let t = pick(Some(&json!("required")), 0.0).unwrap();
        assert_eq!(
            (t.name.as_str(), t.key.as_str(), t.named),
            ("a", "city", false)
        );
        let named = json!({"type": "function", "function": {"name": "b"}});
        let t = pick(Some(&named), 0.0).unwrap();
        assert_eq!(
            (t.name.as_str(), t.key.as_str(), t.named),
            ("b", "input", true)
        );
        let t = pick(Some(&json!({"type": "tool", "name": "b"})), 0.0);
        assert_eq!(t.unwrap().name, "b");
        assert!(pick(Some(&json!({"type": "any"})), 0.0).is_some());
        assert!(pick(Some(&json!("none")), 1.0).is_none());
        assert!(pick(None, 0.0).is_none());
        assert!(pick(None, 1.0).is_some());
        assert_eq!(
            pick_tool(None, Some(&json!("required")), 1.0, &[1]),
            Ok(None)
        );
        let unknown = json!({"type": "function", "function": {"name": "c"}});
        assert!(pick_tool(Some(&tools), Some(&unknown), 0.0, &[1]).is_err());
    }

    #[test]
    fn the_share_picks_about_its_fraction_of_prompts() {
        let tools = json!([{"type": "function", "function": {"name": "a"}}]);
        let picked = (0..1000u32)
            .filter(|&p| {
                pick_tool(Some(&tools), None, 0.3, &[p, 7])
                    .unwrap()
                    .is_some()
            })
            .count();
        assert!((250..350).contains(&picked), "{picked}");
    }
}
