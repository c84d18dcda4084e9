//! Chat template helpers request-sim and llm-sim share: the chat messages and `tools` as vLLM
//! hands them to a Hugging Face chat template, and the template's `tojson` filter as Python's
//! `json.dumps` writes it. request-sim renders prompts with them, llm-sim tokenizes with them,
//! so both see the same text.

use minijinja::value::Value;
use minijinja::{Error, ErrorKind};

/// One chat message with its content flattened to text, and the other fields vLLM passes to
/// the chat template (see [`template_messages`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// An assistant message's `tool_calls`, as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<serde_json::Value>,
    /// A tool message's `tool_call_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    /// A message of text only (no tool calls, id or name).
    pub fn text(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            ..ChatMessage::default()
        }
    }
}

/// The messages as vLLM hands them to a chat template: `role` and `content` (text), and when
/// present `tool_calls` (each call's `function.arguments` JSON string parsed into an object,
/// `{}` when empty, as vLLM does before rendering), `tool_call_id` and `name`.
pub fn template_messages(messages: &[ChatMessage]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| {
            let mut fields: Vec<(&str, Value)> = vec![
                ("role", Value::from(m.role.as_str())),
                ("content", Value::from(m.content.as_str())),
            ];
            if let Some(calls) = &m.tool_calls {
                fields.push(("tool_calls", tool_calls_value(calls)));
            }
            if let Some(id) = &m.tool_call_id {
                fields.push(("tool_call_id", Value::from(id.as_str())));
            }
            if let Some(n) = &m.name {
                fields.push(("name", Value::from(n.as_str())));
            }
            Value::from_iter(fields)
        })
        .collect()
}

/// `tool_calls` with every `function.arguments` string parsed (key order kept).
fn tool_calls_value(calls: &serde_json::Value) -> Value {
    let Some(list) = calls.as_array() else {
        return Value::from_serialize(calls);
    };
    list.iter()
        .map(|call| {
            let Some(obj) = call.as_object() else {
                return Value::from_serialize(call);
            };
            Value::from_iter(obj.iter().map(|(k, v)| {
                let v = match (k.as_str(), v.as_object()) {
                    ("function", Some(f)) => Value::from_iter(f.iter().map(|(fk, fv)| {
                        let fv = match (fk.as_str(), fv) {
                            ("arguments", serde_json::Value::String(a)) if a.is_empty() => {
                                Value::from_iter(std::iter::empty::<(String, Value)>())
                            }
                            ("arguments", serde_json::Value::String(a)) => {
                                serde_json::from_str::<Value>(a)
                                    .unwrap_or_else(|_| Value::from(a.as_str()))
                            }
                            _ => Value::from_serialize(fv),
                        };
                        (fk.clone(), fv)
                    })),
                    _ => Value::from_serialize(v),
                };
                (k.clone(), v)
            }))
        })
        .collect()
}

/// `tools` as vLLM passes them to the chat template: each function tool re-serialised from its
/// request model, so `type` then `function` with `name`, `description` and `parameters` first
/// (`null` when absent), then any other fields in their order.
pub fn template_tools(tools: &serde_json::Value) -> Value {
    let Some(list) = tools.as_array() else {
        return Value::from_serialize(tools);
    };
    list.iter()
        .map(|tool| {
            match (
                tool.as_object(),
                tool.get("function").and_then(|f| f.as_object()),
            ) {
                (Some(t), Some(f)) => {
                    let mut func: Vec<(String, Value)> = ["name", "description", "parameters"]
                        .iter()
                        .map(|k| (k.to_string(), Value::from_serialize(f.get(*k))))
                        .collect();
                    func.extend(
                        f.iter()
                            .filter(|(k, _)| {
                                !["name", "description", "parameters"].contains(&k.as_str())
                            })
                            .map(|(k, v)| (k.clone(), Value::from_serialize(v))),
                    );
                    let ty = t.get("type").cloned().unwrap_or_else(|| "function".into());
                    let mut out = vec![
                        ("type".to_string(), Value::from_serialize(ty)),
                        ("function".to_string(), Value::from_iter(func)),
                    ];
                    out.extend(
                        t.iter()
                            .filter(|(k, _)| !["type", "function"].contains(&k.as_str()))
                            .map(|(k, v)| (k.clone(), Value::from_serialize(v))),
                    );
                    Value::from_iter(out)
                }
                _ => Value::from_serialize(tool),
            }
        })
        .collect()
}

/// JSON text as Python's `json.dumps` writes it (what Hugging Face templates get from
/// `tojson`): `", "` and `": "` between items unless `indent` is given, keys in their order,
/// non-ASCII kept, floats as Python prints them. serde_json's own formatters write compact
/// JSON and minijinja's `tojson` also escapes HTML characters, hence this formatter.
struct PyFormatter {
    indent: Option<Vec<u8>>,
    level: usize,
}

impl PyFormatter {
    fn newline<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        if let Some(ind) = &self.indent {
            w.write_all(b"\n")?;
            for _ in 0..self.level {
                w.write_all(ind)?;
            }
        }
        Ok(())
    }

    /// Opens an array or an object (`bracket`): one level deeper.
    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.level += 1;
        w.write_all(bracket)
    }

    /// Closes an array or an object (`bracket`), on a line of its own when indented.
    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.level -= 1;
        self.newline(w)?;
        w.write_all(bracket)
    }

    /// Before an array value or an object key: the separator unless `first`, then the line
    /// break when indented (Python writes `,` at the end of the line then, `, ` otherwise).
    fn begin_item<W: ?Sized + std::io::Write>(
        &self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if !first {
            w.write_all(if self.indent.is_some() { b"," } else { b", " })?;
        }
        self.newline(w)
    }
}

impl serde_json::ser::Formatter for PyFormatter {
    fn write_f64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f64) -> std::io::Result<()> {
        w.write_all(python_float(v).as_bytes())
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.begin_item(w, first)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.begin_item(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// A float as Python's `repr` prints it: shortest round-trip digits, positional for decimal
/// exponents -4..16 (with `.0` when integral), else `d.ddde+XX`.
fn python_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let s = format!("{v}");
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// A copy of `v` with every map's keys sorted (`tojson(sort_keys=true)`).
fn sorted_keys(v: &Value) -> Value {
    use minijinja::value::ValueKind;
    match v.kind() {
        ValueKind::Map => {
            let mut items: Vec<(Value, Value)> = v
                .try_iter()
                .into_iter()
                .flatten()
                .map(|k| {
                    let val = v.get_item(&k).unwrap_or_default();
                    (k, sorted_keys(&val))
                })
                .collect();
            items.sort_by(|a, b| a.0.cmp(&b.0));
            Value::from_iter(items)
        }
        ValueKind::Seq => v
            .try_iter()
            .into_iter()
            .flatten()
            .map(|x| sorted_keys(&x))
            .collect(),
        _ => v.clone(),
    }
}

/// The `tojson` filter of Hugging Face chat templates (`json.dumps(x, ensure_ascii=False,
/// indent=None, separators=None, sort_keys=False)`); `indent`, `ensure_ascii` and `sort_keys`
/// are honoured, custom `separators` are not.
pub fn python_tojson(value: &Value, kwargs: minijinja::value::Kwargs) -> Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let indent = match indent {
        Some(i) if i.is_none() => None,
        Some(i) => match i.as_str() {
            Some(s) => Some(s.as_bytes().to_vec()),
            None => Some(b" ".repeat(usize::try_from(i)?)),
        },
        None => None,
    };
    let sorted;
    let value = if sort_keys == Some(true) {
        sorted = sorted_keys(value);
        &sorted
    } else {
        value
    };
    let mut out = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut out, PyFormatter { indent, level: 0 });
    serde::Serialize::serialize(value, &mut ser).map_err(|e| {
        Error::new(ErrorKind::InvalidOperation, "cannot serialize to JSON").with_source(e)
    })?;
    let text = String::from_utf8(out)
        .map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    if ensure_ascii != Some(true) {
        return Ok(Value::from_safe_string(text));
    }
    let mut ascii = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                ascii.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    Ok(Value::from_safe_string(ascii))
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::Environment;

    #[test]
    fn tojson_writes_what_python_json_dumps_writes() {
        let mut env = Environment::new();
        env.add_filter("tojson", python_tojson);
        let render = |t: &str, v: Value| env.render_str(t, minijinja::context! { v => v }).unwrap();
        let v: Value = serde_json::from_str(
            r#"{"b": [1, 2.5, 1e20, 1e-7, 3.0], "a": "<é>\n", "n": null, "t": true}"#,
        )
        .unwrap();
        assert_eq!(
            render("{{ v | tojson }}", v.clone()),
            r#"{"b": [1, 2.5, 1e+20, 1e-07, 3.0], "a": "<é>\n", "n": null, "t": true}"#
        );
        assert_eq!(
            render("{{ v | tojson(indent=2, sort_keys=true, ensure_ascii=true) }}", v),
            "{\n  \"a\": \"<\\u00e9>\\n\",\n  \"b\": [\n    1,\n    2.5,\n    1e+20,\n    1e-07,\n    3.0\n  ],\n  \"n\": null,\n  \"t\": true\n}"
        );
    }

    #[test]
    fn tools_and_tool_calls_as_vllm_passes_them() {
        let tools = serde_json::json!([{"function": {"parameters": {"type": "object"}, "name": "f", "strict": true}, "type": "function"}]);
        let mut env = Environment::new();
        env.add_filter("tojson", python_tojson);
        let out = env
            .render_str(
                "{{ tools[0] | tojson }}|{{ m[0].tool_calls[0].function.arguments.b }}",
                minijinja::context! {
                    tools => template_tools(&tools),
                    m => template_messages(&[ChatMessage {
                        role: "assistant".into(),
                        tool_calls: Some(serde_json::json!([{"function": {"name": "f", "arguments": "{\"z\": 1, \"b\": 2}"}}])),
                        ..Default::default()
                    }]),
                },
            )
            .unwrap();
        assert_eq!(
            out,
            r#"{"type": "function", "function": {"name": "f", "description": null, "parameters": {"type": "object"}, "strict": true}}|2"#
        );
    }
}
