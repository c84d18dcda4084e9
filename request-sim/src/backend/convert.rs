//! A `messages` row (an OpenAI chat request) in the shape of the other conversation APIs:
//!
//! - **Anthropic Messages**: `system` and `developer` messages become the top-level `system`
//!   (a string when there is one string, else text blocks); an assistant's `tool_calls` become
//!   `tool_use` blocks (`input` = the parsed `arguments`) after its text; consecutive `tool`
//!   messages become one user message of `tool_result` blocks; content parts become blocks
//!   (`text` as is, `image_url` as an `image` with a base64 or URL source); `tools` become
//!   `{name, description, input_schema}`.
//! - **OpenAI Responses**: every message becomes an `input` item in place, each naming its
//!   `type` (llama.cpp's server refuses an item without one): a message is
//!   `{type: "message", role, content}` (system and developer messages stay items of their
//!   role); an assistant's `tool_calls` become `function_call` items after its text, `tool`
//!   messages `function_call_output` items; content parts become `input_text` /
//!   `input_image`; an assistant's content is its text as one `output_text` part (the shape
//!   of a Responses answer, the only one llama.cpp takes for an assistant item); `tools`
//!   become the flat `{type: "function", name, description, parameters}`.
//!
//! Anything already in the target shape (an Anthropic block, a flat tool) and anything not
//! understood is passed as given; a reasoning field of a recorded answer is not carried (both
//! APIs need server-made ids or signatures for it). Nothing here fails: the rows were checked
//! when the trace was read.

use serde_json::{json, Map, Value};

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

fn part_type(part: &Value) -> &str {
    part.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The URL of an `image_url` part (`{"image_url": {"url": ..}}` or `{"image_url": ".."}`).
fn image_url(part: &Value) -> Option<&str> {
    let v = part.get("image_url")?;
    v.get("url").and_then(Value::as_str).or_else(|| v.as_str())
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

/// Tools in the Responses API's flat shape `{type: "function", name, description, parameters}`.
pub fn responses_tools(tools: &Value) -> Value {
    let Some(items) = tools.as_array() else {
        return tools.clone();
    };
    let one = |t: &Value| -> Value {
        let (name, desc, params) = match function_fields(t) {
            Some(f) => f,
            None => return t.clone(),
        };
        let mut o = Map::new();
        o.insert("type".into(), json!("function"));
        o.insert("name".into(), name.clone());
        if let Some(d) = desc {
            o.insert("description".into(), d.clone());
        }
        if let Some(p) = params {
            o.insert("parameters".into(), p.clone());
        }
        if let Some(s) = t.get("function").and_then(|f| f.get("strict")) {
            o.insert("strict".into(), s.clone());
        }
        Value::Object(o)
    };
    Value::Array(items.iter().map(one).collect())
}

/// A function tool's name, description and parameter schema, from any of the three shapes:
/// OpenAI chat (`{type, function: {name, description, parameters}}`), Responses (flat,
/// `parameters`) or Anthropic (flat, `input_schema`). `None` for anything else.
fn function_fields(t: &Value) -> Option<(&Value, Option<&Value>, Option<&Value>)> {
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

/// The messages of a row as the Responses API's `input` items.
pub fn to_responses(messages: &Value) -> Value {
    let Some(items) = messages.as_array() else {
        return messages.clone();
    };
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    for m in items {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let content = m.get("content").unwrap_or(&Value::Null);
        match role {
            "tool" => out.push(json!({
                "type": "function_call_output",
                "call_id": m.get("tool_call_id").cloned().unwrap_or(Value::Null),
                "output": plain_text(content),
            })),
            "assistant" => {
                let text = plain_text(content);
                let calls = m.get("tool_calls").and_then(Value::as_array);
                if !text.is_empty() || calls.is_none_or(|c| c.is_empty()) {
                    out.push(json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]}));
                }
                out.extend(calls.into_iter().flatten().map(function_call));
            }
            _ => out.push(json!({"type": "message", "role": role,
                "content": responses_content(content)})),
        }
    }
    Value::Array(out)
}

/// An OpenAI tool call as a `function_call` item.
fn function_call(call: &Value) -> Value {
    let f = call.get("function").unwrap_or(&Value::Null);
    let args = match f.get("arguments") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => "{}".to_string(),
        Some(other) => other.to_string(),
    };
    json!({
        "type": "function_call",
        "call_id": call.get("id").cloned().unwrap_or(Value::Null),
        "name": f.get("name").cloned().unwrap_or(Value::Null),
        "arguments": args,
    })
}

/// A user, system or developer content as Responses content: a string stays a string, parts
/// become `input_text` / `input_image`.
fn responses_content(content: &Value) -> Value {
    match content {
        Value::Array(parts) => Value::Array(
            parts
                .iter()
                .map(|p| match part_type(p) {
                    "text" => json!({"type": "input_text", "text": p.get("text").cloned().unwrap_or_default()}),
                    "image_url" => match image_url(p) {
                        Some(url) => {
                            let mut o = json!({"type": "input_image", "image_url": url});
                            if let Some(d) = p.get("image_url").and_then(|v| v.get("detail")) {
                                o["detail"] = d.clone();
                            }
                            o
                        }
                        None => p.clone(),
                    },
                    _ => p.clone(),
                })
                .collect(),
        ),
        Value::Null => Value::String(String::new()),
        other => other.clone(),
    }
}

/// The text of a content: the string, or its text (and refusal) parts joined.
fn plain_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| {
                p.get("text")
                    .or_else(|| p.get("refusal"))
                    .and_then(Value::as_str)
            })
            .collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent_row() -> Value {
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

    /// llama.cpp's server refuses an input item without `type` ("Cannot determine type of
    /// 'item'"), and takes an assistant message only as `output_text` parts.
    #[test]
    fn responses_message_items_carry_their_type() {
        let row = json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi."},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Again."}
        ]);
        let items = to_responses(&row);
        assert_eq!(
            items,
            json!([
                {"type": "message", "role": "system", "content": "Be brief."},
                {"type": "message", "role": "user", "content": "Hi."},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Hello."}]},
                {"type": "message", "role": "user", "content": "Again."}
            ])
        );
        // Every item of an agent row names its type too.
        for item in to_responses(&agent_row()).as_array().unwrap() {
            assert!(item["type"].is_string(), "{item}");
        }
    }

    #[test]
    fn responses_items_in_place() {
        let items = to_responses(&agent_row());
        let i = items.as_array().unwrap();
        assert_eq!(i.len(), 10, "{items:#}");
        assert_eq!(
            i[0],
            json!({"type": "message", "role": "system", "content": "You are a coding agent."})
        );
        assert_eq!(
            i[2],
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": "Reading it."}]})
        );
        assert_eq!(
            i[3],
            json!({"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{\"path\":\"a.rs\"}"})
        );
        assert_eq!(i[4]["arguments"], "not json");
        assert_eq!(
            i[5],
            json!({"type": "function_call_output", "call_id": "call_1", "output": "fn main() {}"})
        );
        assert_eq!(i[6]["output"], "no match");
        // A tool-calls-only answer has no empty message item.
        assert_eq!(i[7]["type"], "function_call");
        assert_eq!(i[8]["type"], "function_call_output");
        assert_eq!(
            i[9]["content"],
            json!([
                {"type": "input_text", "text": "Look:"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}
            ])
        );
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
