//! OpenTelemetry GenAI spans in their JSON exports, made into flat span objects and OpenAI chat
//! messages:
//!
//! - OTLP JSON (the collector's file exporter, one export per line):
//!   `{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId", "startTimeUnixNano",
//!   "attributes": [{"key": "gen_ai.usage.output_tokens", "value": {"intValue": "12"}}]}]}]}]}`;
//!   one line may hold many spans.
//! - One span per line with the attributes as an object (the Python SDK's console exporter):
//!   `{"name", "context": {"trace_id"}, "start_time": "2024-05-10T12:00:00.5Z",
//!   "attributes": {"gen_ai.input.messages": "[...]", ...}}`.
//!
//! Either becomes `{"start_time": …, "end_time": …, "trace_id": …, "name": …, "attributes":
//! {key: value}}`, which `--time-field`, `--session-field`, … pointers address
//! (`/attributes/gen_ai.conversation.id`). `gen_ai.input.messages` (a JSON string or an array)
//! follows the GenAI semantic conventions: `{"role", "parts": [{"type": "text", "content"},
//! {"type": "tool_call", "id", "name", "arguments"}, {"type": "tool_call_response", "id",
//! "response"}]}`; [`to_openai_messages`] turns it into an OpenAI chat array, with
//! `gen_ai.system_instructions` first as a system message. Spans without `gen_ai.input.messages`
//! (an HTTP span, a tool span) are not requests and are passed over (counted).

use serde_json::{json, Map, Value};

/// The GenAI spans of one line, flattened; `Err` when the line is not a span export.
pub(crate) fn spans(line: Value) -> Result<Vec<Value>, String> {
    let Value::Object(obj) = line else {
        return Err("expected a JSON object".into());
    };
    if let Some(rs) = obj.get("resourceSpans") {
        let mut out = Vec::new();
        for r in rs.as_array().into_iter().flatten() {
            for s in r
                .get("scopeSpans")
                .or_else(|| r.get("instrumentationLibrarySpans"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for span in s
                    .get("spans")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    out.push(flatten_otlp(span));
                }
            }
        }
        return Ok(out);
    }
    Ok(vec![flatten_plain(obj)])
}

/// An OTLP JSON span: attributes from the key/value list, times in nanoseconds (strings).
fn flatten_otlp(span: &Value) -> Value {
    let mut attrs = Map::new();
    for kv in span
        .get("attributes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let (Some(k), Some(v)) = (kv.get("key").and_then(Value::as_str), kv.get("value")) {
            attrs.insert(k.to_owned(), any_value(v));
        }
    }
    json!({
        "start_time": span.get("startTimeUnixNano").cloned().unwrap_or(Value::Null),
        "end_time": span.get("endTimeUnixNano").cloned().unwrap_or(Value::Null),
        "trace_id": span.get("traceId").cloned().unwrap_or(Value::Null),
        "name": span.get("name").cloned().unwrap_or(Value::Null),
        "attributes": attrs,
    })
}

/// An OTLP `AnyValue` as plain JSON (`{"intValue": "12"}` → 12).
fn any_value(v: &Value) -> Value {
    let Some(o) = v.as_object() else {
        return v.clone();
    };
    if let Some(s) = o.get("stringValue") {
        return s.clone();
    }
    if let Some(i) = o.get("intValue") {
        return match i {
            Value::String(s) => s.parse::<i64>().map(Value::from).unwrap_or(i.clone()),
            _ => i.clone(),
        };
    }
    if let Some(x) = o.get("doubleValue").or_else(|| o.get("boolValue")) {
        return x.clone();
    }
    if let Some(a) = o.get("arrayValue") {
        let items = a
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        return Value::Array(items.map(any_value).collect());
    }
    v.clone()
}

/// A span already flat (attributes an object): times and ids under their usual names.
fn flatten_plain(mut obj: Map<String, Value>) -> Value {
    let pick = |obj: &Map<String, Value>, keys: &[&str]| {
        keys.iter()
            .find_map(|k| obj.get(*k).filter(|v| !v.is_null()).cloned())
            .unwrap_or(Value::Null)
    };
    let trace_id = obj
        .get("context")
        .and_then(|c| c.get("trace_id"))
        .cloned()
        .unwrap_or_else(|| pick(&obj, &["trace_id", "traceId"]));
    let start = pick(&obj, &["start_time", "startTimeUnixNano", "startTime"]);
    let end = pick(&obj, &["end_time", "endTimeUnixNano", "endTime"]);
    let attributes = obj.remove("attributes").unwrap_or_else(|| json!({}));
    json!({
        "start_time": start,
        "end_time": end,
        "trace_id": trace_id,
        "name": obj.get("name").cloned().unwrap_or(Value::Null),
        "attributes": attributes,
    })
}

/// A JSON-encoded attribute (the conventions put structured values in strings) as JSON.
fn decoded(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| v.clone()),
        _ => v.clone(),
    }
}

/// `gen_ai.input.messages` (and `gen_ai.system_instructions`) as an OpenAI chat array; messages
/// already in OpenAI's shape (with `content`) are kept as they are. `None` when the span has
/// no input messages.
pub(crate) fn to_openai_messages(attributes: &Value) -> Option<Result<Value, String>> {
    let input = decoded(attributes.get("gen_ai.input.messages")?);
    let Some(items) = input.as_array() else {
        return Some(Err(
            "attribute `gen_ai.input.messages` is not an array of messages".into(),
        ));
    };
    let mut out = Vec::new();
    if let Some(sys) = attributes.get("gen_ai.system_instructions").map(decoded) {
        let text = match &sys {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts_text(parts),
            _ => String::new(),
        };
        out.push(json!({"role": "system", "content": text}));
    }
    for m in items {
        match convert_message(m) {
            Ok(v) => out.extend(v),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(Value::Array(out)))
}

fn parts_text(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|p| p.get("content").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// One GenAI message as OpenAI messages (a tool message per tool call response).
fn convert_message(m: &Value) -> Result<Vec<Value>, String> {
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or("a message of `gen_ai.input.messages` has no `role`")?;
    if m.get("content").is_some() || m.get("parts").is_none() {
        return Ok(vec![m.clone()]);
    }
    let parts = m
        .get("parts")
        .and_then(Value::as_array)
        .ok_or("`parts` of a message is not an array")?;
    let mut tool_calls = Vec::new();
    let mut out = Vec::new();
    for p in parts {
        match p.get("type").and_then(Value::as_str) {
            Some("tool_call") => {
                let args = p.get("arguments").cloned().unwrap_or(json!({}));
                let args = match args {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                tool_calls.push(json!({
                    "id": p.get("id").cloned().unwrap_or(Value::Null),
                    "type": "function",
                    "function": {"name": p.get("name").cloned().unwrap_or(Value::Null), "arguments": args},
                }));
            }
            Some("tool_call_response") => {
                let response = match p.get("response") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": p.get("id").cloned().unwrap_or(Value::Null),
                    "content": response,
                }));
            }
            Some("text") | Some("reasoning") => {}
            other => {
                return Err(format!(
                    "a `{}` part cannot be counted as text",
                    other.unwrap_or("untyped")
                ))
            }
        }
    }
    let text = parts_text(parts);
    if out.is_empty() || !text.is_empty() || !tool_calls.is_empty() {
        let mut msg = json!({"role": role, "content": text});
        if !tool_calls.is_empty() {
            msg["tool_calls"] = Value::Array(tool_calls);
        }
        out.insert(0, msg);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn otlp_export_is_flattened() {
        let line = json!({"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": "ab", "name": "chat m", "startTimeUnixNano": "1715342400000000000",
             "endTimeUnixNano": "1715342401000000000",
             "attributes": [
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "12"}},
                {"key": "gen_ai.input.messages", "value": {"stringValue": "[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"hi\"}]}]"}}
             ]},
            {"traceId": "cd", "attributes": []}
        ]}]}]});
        let s = spans(line).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0]["attributes"]["gen_ai.usage.output_tokens"], json!(12));
        assert_eq!(s[0]["start_time"], json!("1715342400000000000"));
        let msgs = to_openai_messages(&s[0]["attributes"]).unwrap().unwrap();
        assert_eq!(msgs, json!([{"role": "user", "content": "hi"}]));
        assert!(to_openai_messages(&s[1]["attributes"]).is_none());
    }

    #[test]
    fn parts_become_openai_messages() {
        let attrs = json!({
            "gen_ai.system_instructions": [{"type": "text", "content": "be brief"}],
            "gen_ai.input.messages": [
                {"role": "user", "parts": [{"type": "text", "content": "weather?"}]},
                {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "w", "arguments": {"city": "X"}}]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "sunny"}]}
            ]
        });
        let m = to_openai_messages(&attrs).unwrap().unwrap();
        assert_eq!(m[0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            json!("{\"city\":\"X\"}")
        );
        assert_eq!(
            m[3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
        );
        let bad = json!({"gen_ai.input.messages": [{"role": "user", "parts": [{"type": "blob"}]}]});
        assert!(to_openai_messages(&bad)
            .unwrap()
            .unwrap_err()
            .contains("`blob` part"));
    }
}
