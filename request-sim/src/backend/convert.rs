//! What the conversions of a `messages` row (an OpenAI chat request) into the other
//! conversation APIs' shapes share: reading its content parts and its tools. The
//! conversions are their APIs' (`apis/messages/convert.rs`, `apis/responses/convert.rs`).

use serde_json::Value;

/// The `type` of a content part (`""` when it has none).
pub(crate) fn part_type(part: &Value) -> &str {
    part.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The URL of an `image_url` part (`{"image_url": {"url": ..}}` or `{"image_url": ".."}`).
pub(crate) fn image_url(part: &Value) -> Option<&str> {
    let v = part.get("image_url")?;
    v.get("url").and_then(Value::as_str).or_else(|| v.as_str())
}

/// A function tool's name, description and parameter schema, from any of the three shapes:
/// OpenAI chat (`{type, function: {name, description, parameters}}`), Responses (flat,
/// `parameters`) or Anthropic (flat, `input_schema`). `None` for anything else.
pub(crate) fn function_fields(t: &Value) -> Option<(&Value, Option<&Value>, Option<&Value>)> {
    if let Some(f) = t.get("function").filter(|f| f.is_object()) {
        let name = f.get("name")?;
        return Some((name, f.get("description"), f.get("parameters")));
    }
    let name = t.get("name")?;
    let params = t.get("parameters").or_else(|| t.get("input_schema"));
    if params.is_none() && t.get("type").and_then(Value::as_str) != Some("function") {
        // E.g. an Anthropic server tool (`{"type": "bash_20250124", "name": "bash"}`).
        return None;
    }
    Some((name, t.get("description"), params))
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::backend::apis::messages::convert::anthropic_tools;
    use crate::backend::apis::responses::convert::responses_tools;
    use serde_json::{json, Value};

    /// An agent's row: a system message, a tool call and its result.
    pub(crate) fn agent_row() -> Value {
        json!([
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix the bug."},
            {"role": "assistant", "content": "Reading it.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.rs\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "grep", "arguments": "not json"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "no match"}]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_3", "type": "function", "function": {"name": "edit", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_3", "content": "ok"},
            {"role": "user", "content": [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}
            ]}
        ])
    }

    #[test]
    fn tools_in_each_shape() {
        let chat = json!([
            {"type": "function", "function": {"name": "read", "description": "Read a file",
              "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": true}},
            {"type": "function", "function": {"name": "now"}}
        ]);
        let a = anthropic_tools(&chat);
        assert_eq!(
            a[0],
            json!({"name": "read", "description": "Read a file",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}})
        );
        assert_eq!(
            a[1],
            json!({"name": "now", "input_schema": {"type": "object", "properties": {}}})
        );
        let r = responses_tools(&chat);
        assert_eq!(
            r[0],
            json!({"type": "function", "name": "read", "description": "Read a file",
                   "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}, "strict": true})
        );
        assert_eq!(r[1], json!({"type": "function", "name": "now"}));
        // Already in the other shapes: converted across, or kept.
        assert_eq!(anthropic_tools(&a), a);
        assert_eq!(responses_tools(&a)[0]["parameters"], a[0]["input_schema"]);
        assert_eq!(anthropic_tools(&r)[0], a[0]);
        let builtin = json!([{"type": "web_search"}]);
        assert_eq!(anthropic_tools(&builtin), builtin);
        assert_eq!(responses_tools(&builtin), builtin);
    }
}
