//! Request logs, the source `request-sim convert` makes traces from: one JSON object per line,
//! each a request with its prompt text (not yet a trace row: its token counts are the
//! tokenizer's to make, in `convert/`).
//!
//! Four shapes, detected from the first data line ([`LogShape::detect`]) or forced
//! (`--log-format`); each is a list of default JSON pointers for the fields a request needs,
//! and every pointer can be overridden (`--time-field`, `--messages-field`, …):
//!
//! | shape | time | messages | output tokens | session |
//! |---|---|---|---|---|
//! | `openai`: request body, time, response | `/timestamp`, `/time`, `/created_at`, `/start_time`, `/response/created` | `/request/messages`, `/body/messages`, `/messages` | `/response/usage/completion_tokens`, `/usage/completion_tokens` (else the response text) | none (inferred) |
//! | `litellm`: `StandardLoggingPayload` | `/startTime` | `/messages` | `/completion_tokens`, `/response/usage/completion_tokens` | none (inferred) |
//! | `otel`: GenAI spans (`otel.rs`) | `/start_time` | `gen_ai.input.messages` | `/attributes/gen_ai.usage.output_tokens` | none (inferred) |
//! | `messages`: the project's own traces | `/timestamp` (ms) | `/messages` | `/output_length` | `/session_id` |
//!
//! Lines are read as every trace is (`trace/formats/rows.rs`: capped length, gzip/zstd/bzip2 by magic
//! bytes); a bad line is an error naming `file:line`, which `convert` counts and skips.

mod otel;
pub mod time;

use std::io::BufRead;

use serde_json::Value;

use super::lines::buffered;
use super::lines::{read_line_capped, LineRead};
use crate::trace::error::{RowError, TraceError};
use crate::trace::options::{DEFAULT_MAX_LINE_BYTES, MAX_LENGTH_TOKENS};
pub use time::{TimeFormat, TimeParser};

/// The shape of a log's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogShape {
    /// OpenAI-format request logs: the request body, a time, the response (or its usage).
    OpenAi,
    /// LiteLLM's `StandardLoggingPayload`.
    LiteLlm,
    /// OpenTelemetry GenAI spans (OTLP JSON, or one flat span per line).
    Otel,
    /// The project's own `messages` trace.
    Messages,
}

impl LogShape {
    pub const NAMES: &'static str = "openai, litellm, otel, messages";

    pub fn from_name(name: &str) -> Option<LogShape> {
        Some(match name.to_ascii_lowercase().as_str() {
            "openai" => LogShape::OpenAi,
            "litellm" => LogShape::LiteLlm,
            "otel" | "opentelemetry" => LogShape::Otel,
            "messages" => LogShape::Messages,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            LogShape::OpenAi => "openai",
            LogShape::LiteLlm => "litellm",
            LogShape::Otel => "otel",
            LogShape::Messages => "messages",
        }
    }

    /// The shape of a log from its first data line (a JSON object).
    pub fn detect(first: &Value) -> Result<LogShape, String> {
        let Some(o) = first.as_object() else {
            return Err("the first data line is not a JSON object".into());
        };
        let has = |k: &str| o.contains_key(k);
        if has("resourceSpans")
            || (has("attributes")
                && (has("start_time") || has("startTimeUnixNano") || has("context")))
        {
            return Ok(LogShape::Otel);
        }
        // LiteLLM's `StandardLoggingPayload`: `startTime` (which no other shape reads) with
        // any of the payload's own keys, or with none of the times the openai shape reads. A
        // row need not carry `completion_tokens` (a failed call, a proxy logging less): a log
        // without it is still LiteLLM's, and its rows say what they lack.
        const LITELLM_KEYS: &[&str] = &[
            "call_type",
            "completion_tokens",
            "prompt_tokens",
            "total_tokens",
            "model_parameters",
            "endTime",
            "completionStartTime",
            "response_cost",
            "hidden_params",
        ];
        let openai_time = LogShape::OpenAi.defaults().time.iter().any(|p| {
            p.strip_prefix('/')
                .is_some_and(|k| !k.contains('/') && has(k))
        });
        if has("startTime") && (LITELLM_KEYS.iter().any(|k| has(k)) || !openai_time) {
            return Ok(LogShape::LiteLlm);
        }
        if has("messages")
            && !has("response")
            && !has("usage")
            && !has("choices")
            && (has("output_length") || has("session_id") || has("timestamp") || has("delay"))
        {
            return Ok(LogShape::Messages);
        }
        let nested = |k: &str| o.get(k).and_then(|v| v.get("messages")).is_some();
        if has("messages") || nested("request") || nested("body") {
            return Ok(LogShape::OpenAi);
        }
        Err(
            "the first data line is none of the log shapes (no `messages`, `request.messages`, \
             `startTime` with `completion_tokens`, or span `attributes`); force one with \
             --log-format and name the fields with --messages-field, --time-field, ..."
                .into(),
        )
    }

    /// What a small number means as a time: milliseconds in a `messages` trace, else seconds.
    pub fn relative_time(self) -> TimeFormat {
        match self {
            LogShape::Messages => TimeFormat::RelativeMillis,
            _ => TimeFormat::RelativeSeconds,
        }
    }

    fn defaults(self) -> Defaults {
        match self {
            LogShape::OpenAi => Defaults {
                time: &[
                    "/timestamp",
                    "/time",
                    "/created_at",
                    "/start_time",
                    "/request_time",
                    "/response/created",
                ],
                messages: &["/request/messages", "/body/messages", "/messages"],
                output: &[
                    "/response/usage/completion_tokens",
                    "/usage/completion_tokens",
                    "/response/body/usage/completion_tokens",
                ],
                output_text: &[
                    "/response/choices/0/message/content",
                    "/choices/0/message/content",
                ],
                session: &[],
            },
            LogShape::LiteLlm => Defaults {
                time: &["/startTime"],
                messages: &["/messages"],
                output: &["/completion_tokens", "/response/usage/completion_tokens"],
                output_text: &["/response/choices/0/message/content"],
                session: &[],
            },
            LogShape::Otel => Defaults {
                time: &["/start_time"],
                messages: &[],
                output: &["/attributes/gen_ai.usage.output_tokens"],
                output_text: &[],
                session: &[],
            },
            LogShape::Messages => Defaults {
                time: &["/timestamp"],
                messages: &["/messages"],
                output: &["/output_length"],
                output_text: &[],
                session: &["/session_id"],
            },
        }
    }
}

struct Defaults {
    time: &'static [&'static str],
    messages: &'static [&'static str],
    output: &'static [&'static str],
    output_text: &'static [&'static str],
    session: &'static [&'static str],
}

/// Where a log's fields are: JSON pointers overriding the shape's defaults (`None`: default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFields {
    pub time: Option<String>,
    pub messages: Option<String>,
    /// The output token count.
    pub output: Option<String>,
    pub session: Option<String>,
    pub tools: Option<String>,
}

/// A `--…-field` value as a JSON pointer: `usage/completion_tokens` and `/usage/...` alike.
pub fn pointer(text: &str) -> String {
    if text.starts_with('/') || text.is_empty() {
        text.to_owned()
    } else {
        format!("/{text}")
    }
}

/// What a request of a log says about its output.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A token count (the response's usage).
    Tokens(u32),
    /// Only the response text: its tokens are counted by the tokenizer.
    Text(String),
}

/// One request of a log.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRow {
    /// Milliseconds (since the epoch or a relative start: see [`TimeParser`]).
    pub time_ms: f64,
    /// An OpenAI chat array (non-empty).
    pub messages: Value,
    pub tools: Option<Value>,
    pub output: Output,
    /// The session the log names (`--session-field`), if any.
    pub session: Option<String>,
}

/// Reads a log line by line into [`LogRow`]s.
pub struct LogReader<B> {
    name: String,
    input: B,
    compression: Option<&'static str>,
    buf: Vec<u8>,
    line: usize,
    shape: Option<LogShape>,
    fields: LogFields,
    time: TimeParser,
    forced_time: Option<TimeFormat>,
    /// Spans of an OpenTelemetry export without `gen_ai.input.messages` (not requests).
    pub spans_passed_over: usize,
    /// Data lines read (blank lines not counted).
    pub lines_read: usize,
}

/// What one data line gave: its requests, or why it gave none.
pub type LineRows = (usize, Result<Vec<LogRow>, RowError>);

/// Opens a log file (`-`: standard input), decompressed by its magic bytes.
pub fn open(
    path: &std::path::Path,
    shape: Option<LogShape>,
    fields: LogFields,
    time: Option<TimeFormat>,
) -> Result<LogReader<Box<dyn BufRead + Send>>, TraceError> {
    let name = if path.as_os_str() == "-" {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    };
    let file: Box<dyn std::io::Read + Send> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        if path.is_dir() {
            return Err(TraceError::Open {
                path: name,
                error: std::io::Error::other(
                    "is a directory: `convert` reads one request log, a file (plain, .gz, .zst \
                     or .bz2) or `-` for standard input; for a directory of logs, pipe them in \
                     time order into `convert -`",
                ),
            });
        }
        Box::new(std::fs::File::open(path).map_err(|error| TraceError::Open {
            path: name.clone(),
            error,
        })?)
    };
    let (input, compression) = buffered(&name, file)?;
    Ok(LogReader::new(
        &name,
        input,
        compression,
        shape,
        fields,
        time,
    ))
}

impl<B: BufRead> LogReader<B> {
    pub fn new(
        name: &str,
        input: B,
        compression: Option<&'static str>,
        shape: Option<LogShape>,
        fields: LogFields,
        time: Option<TimeFormat>,
    ) -> LogReader<B> {
        LogReader {
            name: name.to_owned(),
            input,
            compression,
            buf: Vec::with_capacity(8 << 10),
            line: 0,
            shape,
            fields,
            time: TimeParser::new(time, TimeFormat::RelativeSeconds),
            forced_time: time,
            spans_passed_over: 0,
            lines_read: 0,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The shape, once forced or detected.
    pub fn shape(&self) -> Option<LogShape> {
        self.shape
    }

    /// The time form in use and how it was found.
    pub fn time(&self) -> &TimeParser {
        &self.time
    }

    /// The next data line's requests (an OpenTelemetry export line may hold several, or none)
    /// or its error; `None` at the end. A read error (a damaged compressed file) is fatal.
    pub fn next_line(&mut self) -> Result<Option<LineRows>, TraceError> {
        loop {
            let kind = read_line_capped(&mut self.input, &mut self.buf, DEFAULT_MAX_LINE_BYTES)
                .map_err(|error| TraceError::Read {
                    path: self.name.clone(),
                    line: self.line,
                    compression: self.compression,
                    error,
                })?;
            self.line += 1;
            let line = self.line;
            let text = match kind {
                LineRead::Eof => {
                    self.line -= 1;
                    return Ok(None);
                }
                LineRead::TooLong => {
                    self.lines_read += 1;
                    return Ok(Some((
                        line,
                        Err(RowError::TooLong {
                            limit: DEFAULT_MAX_LINE_BYTES,
                        }),
                    )));
                }
                LineRead::Line => match std::str::from_utf8(&self.buf) {
                    Ok(t) => t.trim_start_matches('\u{feff}').trim(),
                    Err(e) => {
                        self.lines_read += 1;
                        let column = e.valid_up_to() + 1;
                        return Ok(Some((line, Err(RowError::NotUtf8 { column }))));
                    }
                },
            };
            if text.is_empty() {
                continue;
            }
            self.lines_read += 1;
            let value: Result<Value, RowError> = serde_json::from_str(text)
                .map_err(|e| RowError::Json(format!("not a JSON object: {e}")));
            let rows = value.and_then(|v| self.rows_of(v));
            return Ok(Some((line, rows)));
        }
    }

    fn rows_of(&mut self, v: Value) -> Result<Vec<LogRow>, RowError> {
        if !v.is_object() {
            return Err(RowError::NotObject {
                found: match v {
                    Value::Array(_) => "an array".into(),
                    _ => "a JSON value that is not an object".into(),
                },
            });
        }
        let shape = match self.shape {
            Some(s) => s,
            None => {
                let s = LogShape::detect(&v).map_err(RowError::Undetectable)?;
                self.shape = Some(s);
                if self.forced_time.is_none() {
                    self.time = TimeParser::new(None, s.relative_time());
                }
                s
            }
        };
        if shape == LogShape::Otel {
            let mut out = Vec::new();
            for span in otel::spans(v).map_err(RowError::Json)? {
                let messages = match otel::to_openai_messages(&span["attributes"]) {
                    None if self.fields.messages.is_none() => {
                        self.spans_passed_over += 1;
                        continue;
                    }
                    None => None,
                    Some(m) => Some(m.map_err(|what| bad("gen_ai.input.messages", what))?),
                };
                out.push(self.row(shape, &span, messages)?);
            }
            return Ok(out);
        }
        Ok(vec![self.row(shape, &v, None)?])
    }

    /// One request from its object; `messages` when the shape already found them.
    fn row(
        &mut self,
        shape: LogShape,
        v: &Value,
        messages: Option<Value>,
    ) -> Result<LogRow, RowError> {
        let d = shape.defaults();
        let fields = &self.fields;
        let (time_at, time) = find(v, fields.time.as_deref(), d.time)
            .ok_or_else(|| missing("time", fields.time.as_deref(), d.time, "--time-field"))?;
        let time_ms = self.time.ms(time).map_err(|what| bad(&time_at, what))?;
        let (messages_at, messages) = match messages {
            Some(m) if fields.messages.is_none() => ("gen_ai.input.messages".to_owned(), m),
            _ => {
                let (at, m) = find(v, fields.messages.as_deref(), d.messages).ok_or_else(|| {
                    missing(
                        "messages",
                        fields.messages.as_deref(),
                        d.messages,
                        "--messages-field",
                    )
                })?;
                (at, m.clone())
            }
        };
        check_messages(&messages_at, &messages)?;
        let tools_at = match &fields.tools {
            Some(t) => Some(t.clone()),
            None => messages_at
                .strip_suffix("messages")
                .filter(|p| p.ends_with('/'))
                .map(|p| format!("{p}tools")),
        };
        let tools = tools_at
            .and_then(|p| v.pointer(&p))
            .filter(|t| !t.is_null())
            .cloned();
        let output = match find(v, fields.output.as_deref(), d.output) {
            Some((at, n)) => Output::Tokens(tokens(&at, n)?),
            None => match find(v, None, d.output_text) {
                Some((_, Value::String(s))) if fields.output.is_none() => Output::Text(s.clone()),
                _ => {
                    let mut e = missing(
                        "output token count (usage)",
                        fields.output.as_deref(),
                        d.output,
                        "--output-field",
                    );
                    if let (RowError::Field { what, .. }, None, false) =
                        (&mut e, &fields.output, d.output_text.is_empty())
                    {
                        *what = format!(
                            "no output token count (usage) here, and no response text to count at {} \
                             (name the count's place with --output-field as a JSON pointer)",
                            d.output_text.join(", ")
                        );
                    }
                    return Err(e);
                }
            },
        };
        let session = match find(v, fields.session.as_deref(), d.session) {
            None | Some((_, Value::Null)) => None,
            Some((at, s)) => Some(match s {
                Value::String(s) if !s.is_empty() => s.clone(),
                Value::Number(n) => n.to_string(),
                other => {
                    return Err(bad(
                        &at,
                        format!(
                            "a session id must be a non-empty string or a number, found {}",
                            kind(other)
                        ),
                    ))
                }
            }),
        };
        Ok(LogRow {
            time_ms,
            messages,
            tools,
            output,
            session,
        })
    }
}

/// The value at the user's pointer, else at the first default pointer present (not null).
fn find<'v>(v: &'v Value, given: Option<&str>, defaults: &[&str]) -> Option<(String, &'v Value)> {
    match given {
        Some(p) => v.pointer(p).map(|x| (p.to_owned(), x)),
        None => defaults.iter().find_map(|p| {
            v.pointer(p)
                .filter(|x| !x.is_null())
                .map(|x| ((*p).to_owned(), x))
        }),
    }
}

fn bad(at: &str, what: impl Into<String>) -> RowError {
    RowError::Field {
        field: at.to_owned(),
        what: what.into(),
    }
}

fn missing(what: &str, given: Option<&str>, defaults: &[&str], flag: &str) -> RowError {
    let at = match given {
        Some(p) => p.to_owned(),
        None => defaults.join(", "),
    };
    RowError::Field {
        field: at,
        what: format!("no {what} here (name its place with {flag} as a JSON pointer)"),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn tokens(at: &str, v: &Value) -> Result<u32, RowError> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if n <= MAX_LENGTH_TOKENS => Ok(n as u32),
        Some(n) => Err(bad(at, format!("{n} tokens is absurd"))),
        None => Err(bad(
            at,
            format!("expected a non-negative token count, found {}", kind(v)),
        )),
    }
}

/// A non-empty array of message objects with a `role`.
fn check_messages(at: &str, v: &Value) -> Result<(), RowError> {
    let items = v.as_array().ok_or_else(|| {
        bad(
            at,
            format!("expected an array of chat messages, found {}", kind(v)),
        )
    })?;
    if items.is_empty() {
        return Err(bad(at, "has no messages"));
    }
    for (i, m) in items.iter().enumerate() {
        if m.get("role").and_then(Value::as_str).is_none() {
            return Err(bad(&format!("{at}/{i}"), "a message needs a string `role`"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(text: &str, shape: Option<LogShape>, fields: LogFields) -> Vec<LineRows> {
        let mut r = LogReader::new("log", text.as_bytes(), None, shape, fields, None);
        let mut out = Vec::new();
        while let Some(x) = r.next_line().unwrap() {
            out.push(x);
        }
        out
    }

    #[test]
    fn shapes_are_detected() {
        let d = |v: Value| LogShape::detect(&v).unwrap();
        assert_eq!(
            d(json!({"timestamp": 1, "request": {"messages": []}, "response": {}})),
            LogShape::OpenAi
        );
        assert_eq!(d(json!({"messages": [], "usage": {}})), LogShape::OpenAi);
        assert_eq!(
            d(json!({"startTime": 1.5, "messages": [], "completion_tokens": 3})),
            LogShape::LiteLlm
        );
        // Without completion_tokens (a failed call, a proxy that logs less): still LiteLLM's.
        assert_eq!(
            d(json!({"startTime": 1.5, "messages": [], "prompt_tokens": 3})),
            LogShape::LiteLlm
        );
        assert_eq!(
            d(json!({"startTime": 1.5, "messages": []})),
            LogShape::LiteLlm
        );
        assert_eq!(
            d(json!({"startTime": 1.5, "timestamp": 2, "messages": [], "response": {}})),
            LogShape::OpenAi
        );
        assert_eq!(d(json!({"resourceSpans": []})), LogShape::Otel);
        assert_eq!(
            d(json!({"name": "chat", "start_time": "x", "attributes": {}})),
            LogShape::Otel
        );
        assert_eq!(
            d(json!({"timestamp": 0, "messages": [], "output_length": 3})),
            LogShape::Messages
        );
        assert!(LogShape::detect(&json!({"a": 1})).is_err());
    }

    #[test]
    fn openai_rows_and_their_errors() {
        let log = concat!(
            r#"{"timestamp": 1715342400.5, "request": {"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}, "response": {"usage": {"completion_tokens": 7}}}"#,
            "\n",
            "\n",
            r#"{"timestamp": 1715342401, "request": {"messages": []}, "response": {"usage": {"completion_tokens": 7}}}"#,
            "\n",
            r#"{"timestamp": 1715342402, "request": {"messages": [{"role": "user", "content": "x"}]}, "response": {"choices": [{"message": {"content": "a reply"}}]}}"#,
            "\n",
            r#"{"timestamp": 1715342402, "request": {"messages": [{"role": "user", "content": "x"}]}}"#,
            "\n",
            "not json\n",
        );
        let rows = read(log, None, LogFields::default());
        assert_eq!(rows.len(), 5);
        let (line, r) = &rows[0];
        let r = &r.as_ref().unwrap()[0];
        assert_eq!(*line, 1);
        assert_eq!(r.time_ms, 1_715_342_400_500.0);
        assert_eq!(r.output, Output::Tokens(7));
        assert_eq!(r.tools, Some(json!([{"type": "function"}])));
        assert_eq!(rows[1].0, 3);
        assert_eq!(
            rows[1].1.as_ref().unwrap_err().to_string(),
            "field `/request/messages`: has no messages"
        );
        assert_eq!(
            rows[2].1.as_ref().unwrap()[0].output,
            Output::Text("a reply".into())
        );
        assert!(rows[3]
            .1
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("no output token count (usage) here"));
        assert!(rows[4]
            .1
            .as_ref()
            .unwrap_err()
            .to_string()
            .starts_with("not a JSON object"));
    }

    #[test]
    fn fields_are_overridable() {
        let log = r#"{"at": "2024-05-10T12:00:00Z", "req": {"msgs": [{"role": "user", "content": "hi"}]}, "out": 4, "conv": 17}"#;
        let fields = LogFields {
            time: Some(pointer("at")),
            messages: Some(pointer("/req/msgs")),
            output: Some(pointer("out")),
            session: Some(pointer("conv")),
            tools: None,
        };
        let rows = read(log, Some(LogShape::OpenAi), fields);
        let r = &rows[0].1.as_ref().unwrap()[0];
        assert_eq!(r.time_ms, 1_715_342_400_000.0);
        assert_eq!(
            (r.output.clone(), r.session.as_deref()),
            (Output::Tokens(4), Some("17"))
        );
    }

    #[test]
    fn litellm_and_messages_rows() {
        let lite = r#"{"id": "x", "call_type": "acompletion", "startTime": 1715342400.25, "endTime": 1715342401.0, "messages": [{"role": "user", "content": "hi"}], "completion_tokens": 9, "prompt_tokens": 3, "trace_id": "t1"}"#;
        let rows = read(lite, None, LogFields::default());
        let r = &rows[0].1.as_ref().unwrap()[0];
        assert_eq!(
            (r.time_ms, r.output.clone(), r.session.clone()),
            (1_715_342_400_250.0, Output::Tokens(9), None)
        );
        let own = r#"{"timestamp": 1500, "session_id": "s1", "messages": [{"role": "user", "content": "hi"}], "output_length": 5}"#;
        let rows = read(own, None, LogFields::default());
        let r = &rows[0].1.as_ref().unwrap()[0];
        assert_eq!((r.time_ms, r.session.as_deref()), (1500.0, Some("s1")));
    }
}
