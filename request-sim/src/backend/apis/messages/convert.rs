//! A `messages` row (an OpenAI chat request) in the shape of Anthropic's Messages API:
//!
//! `system` and `developer` messages become the top-level `system`
//! (a string when there is one string, else text blocks); an assistant's `tool_calls` become
//! `tool_use` blocks (`input` = the parsed `arguments`) after its text; consecutive `tool`
//! messages become one user message of `tool_result` blocks; content parts become blocks
//! (`text` as is, `image_url` as an `image` with a base64 or URL source); `tools` become
//! `{name, description, input_schema}`.
//!
//! Anything already in the target shape (an Anthropic block, a flat tool) and anything not
//! understood is passed as given; a reasoning field of a recorded answer is not carried (both
//! APIs need server-made ids or signatures for it). Nothing here fails: the rows were checked
//! when the trace was read.

use serde_json::{json, Map, Value};

use crate::backend::convert::{function_fields, image_url, part_type};

/// The messages of a row, as Anthropic's top-level `system` (if any) and `messages`.
pub fn to_anthropic(messages: &Value) -> (Option<Value>, Value) {
    let Some(items) = messages.as_array() else {
        return (None, messages.clone());
    };
    let mut system: Vec<Value> = Vec::new();
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    // The tool results waiting to be sent as one user message.
    let mut results: Vec<Value> = Vec::new();
    for m in items {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let content = m.get("content").unwrap_or(&Value::Null);
        if role == "tool" {
            results.push(tool_result(m, content));
            continue;
        }
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
        }
        match role {
            "system" | "developer" => system.extend(text_blocks(content)),
            "assistant" => out.push(anthropic_assistant(m, content)),
            _ => out.push(json!({"content": anthropic_content(content), "role": role})),
        }
    }
    if !results.is_empty() {
        out.push(json!({"role": "user", "content": results}));
    }
    let system = match system.as_slice() {
        [] => None,
        [one] if one.get("type").and_then(Value::as_str) == Some("text") => {
            one.get("text").cloned()
        }
        _ => Some(Value::Array(system)),
    };
    (system, Value::Array(out))
}

/// A `tool` message as a `tool_result` block.
fn tool_result(m: &Value, content: &Value) -> Value {
    let id = m.get("tool_call_id").cloned().unwrap_or(Value::Null);
    json!({
        "type": "tool_result",
        "tool_use_id": id,
        "content": anthropic_content(content),
    })
}

/// An assistant message: its text, then a `tool_use` block per tool call.
fn anthropic_assistant(m: &Value, content: &Value) -> Value {
    let calls = m.get("tool_calls").and_then(Value::as_array);
    let content = match calls {
        Some(calls) if !calls.is_empty() => {
            let mut blocks = match anthropic_content(content) {
                Value::String(s) if s.is_empty() => Vec::new(),
                Value::String(s) => vec![json!({"type": "text", "text": s})],
                Value::Array(b) => b,
                _ => Vec::new(),
            };
            blocks.extend(calls.iter().map(tool_use));
            Value::Array(blocks)
        }
        _ => match content {
            Value::Null => Value::String(String::new()),
            c => anthropic_content(c),
        },
    };
    json!({"content": content, "role": "assistant"})
}

/// An OpenAI tool call as a `tool_use` block.
fn tool_use(call: &Value) -> Value {
    let f = call.get("function").unwrap_or(&Value::Null);
    json!({
        "type": "tool_use",
        "id": call.get("id").cloned().unwrap_or(Value::Null),
        "name": f.get("name").cloned().unwrap_or(Value::Null),
        "input": arguments_object(f.get("arguments")),
    })
}

/// The `arguments` of a tool call as a JSON object: parsed when it is the text of an object,
/// taken as is when it already is one, else `{"arguments": <as given>}` (Anthropic's `input`
/// must be an object).
fn arguments_object(args: Option<&Value>) -> Value {
    match args {
        None | Some(Value::Null) => json!({}),
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ if s.trim().is_empty() => json!({}),
            _ => json!({ "arguments": s }),
        },
        Some(other) => json!({ "arguments": other }),
    }
}

/// A content (string, parts or null) as Anthropic content: a string stays a string, parts
/// become blocks.
fn anthropic_content(content: &Value) -> Value {
    match content {
        Value::Array(parts) => Value::Array(parts.iter().map(anthropic_block).collect()),
        Value::Null => Value::String(String::new()),
        other => other.clone(),
    }
}

/// A content (string or parts) as text blocks (for `system`).
fn text_blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(parts) => parts.iter().map(anthropic_block).collect(),
        _ => Vec::new(),
    }
}

/// One OpenAI content part as an Anthropic block.
fn anthropic_block(part: &Value) -> Value {
    match part_type(part) {
        "text" => json!({"type": "text", "text": part.get("text").cloned().unwrap_or_default()}),
        "image_url" => match image_url(part) {
            Some(url) => match data_url(url) {
                Some((media, data)) => json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": media, "data": data},
                }),
                None => json!({"type": "image", "source": {"type": "url", "url": url}}),
            },
            None => part.clone(),
        },
        _ => part.clone(),
    }
}

/// `data:<media type>;base64,<data>` split into its media type and data.
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (head, data) = rest.split_once(',')?;
    let media = head.strip_suffix(";base64")?;
    Some((media, data))
}

/// Tools in Anthropic's shape `{name, description, input_schema}`.
pub fn anthropic_tools(tools: &Value) -> Value {
    let Some(items) = tools.as_array() else {
        return tools.clone();
    };
    let one = |t: &Value| -> Value {
        let (name, desc, params) = match function_fields(t) {
            Some(f) => f,
            None => return t.clone(),
        };
        let mut o = Map::new();
        o.insert("name".into(), name.clone());
        if let Some(d) = desc {
            o.insert("description".into(), d.clone());
        }
        let schema = params
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        o.insert("input_schema".into(), schema);
        Value::Object(o)
    };
    Value::Array(items.iter().map(one).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::convert::tests::agent_row;

    #[test]
    fn anthropic_system_apart_tool_blocks_and_merged_results() {
        let (system, msgs) = to_anthropic(&agent_row());
        assert_eq!(system, Some(json!("You are a coding agent.")));
        let m = msgs.as_array().unwrap();
        assert_eq!(m.len(), 6, "{msgs:#}");
        assert_eq!(m[0], json!({"role": "user", "content": "Fix the bug."}));
        assert_eq!(m[1]["role"], "assistant");
        assert_eq!(
            m[1]["content"],
            json!([
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a.rs"}},
                {"type": "tool_use", "id": "call_2", "name": "grep", "input": {"arguments": "not json"}}
            ])
        );
        assert_eq!(
            m[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "fn main() {}"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "no match"}]}
            ]})
        );
        assert_eq!(
            m[3]["content"],
            json!([{"type": "tool_use", "id": "call_3", "name": "edit", "input": {}}])
        );
        assert_eq!(m[4]["content"][0]["type"], "tool_result");
        assert_eq!(
            m[5]["content"][1],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
        );
        // Two system messages: text blocks.
        let (system, _) = to_anthropic(&json!([
            {"role": "system", "content": "a"},
            {"role": "developer", "content": [{"type": "text", "text": "b"}]},
            {"role": "user", "content": "q"}
        ]));
        assert_eq!(
            system,
            Some(json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]))
        );
    }
}
