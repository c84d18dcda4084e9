//! A `messages` row (an OpenAI chat request) in the shape of the OpenAI Responses API:
//! every message becomes an `input` item in place, each naming its
//! `type` (llama.cpp's server refuses an item without one): a message is
//! `{type: "message", role, content}` (system and developer messages stay items of their
//! role); an assistant's `tool_calls` become `function_call` items after its text, `tool`
//! messages `function_call_output` items; content parts become `input_text` /
//! `input_image`; an assistant's content is its text as one `output_text` part (the shape
//! of a Responses answer, the only one llama.cpp takes for an assistant item); `tools`
//! become the flat `{type: "function", name, description, parameters}`.
//!
//! Anything already in the target shape (an Anthropic block, a flat tool) and anything not
//! understood is passed as given; a reasoning field of a recorded answer is not carried (both
//! APIs need server-made ids or signatures for it). Nothing here fails: the rows were checked
//! when the trace was read.

use serde_json::{json, Map, Value};

use crate::backend::convert::{function_fields, image_url, part_type};

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
    use crate::backend::convert::tests::agent_row;

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
}
