//! Thinking and tool calls (issue #40) on every API, streamed and not: the thinking count
//! (`--reasoning-share`, beaten by `thinking_token_budget` and Anthropic's `budget_tokens`),
//! the kinds of the events in order (one output token per event after the opening ones), the
//! tool call's arguments (valid JSON, one fragment per token), finish and stop reasons, usage.

use crate::support::*;
use llm_sim::SimConfig;
use serde_json::{json, Value};

/// A server whose answers think for a quarter of their tokens (and, optionally, end in a tool
/// call for `tool_share` of the requests with tools).
async fn thinking_server(tool_share: f64, eos: Option<f64>) -> llm_sim::SimServer {
    start_server(SimConfig {
        reasoning_share: 0.25,
        tool_call_share: tool_share,
        eos_mean_tokens: eos,
        ..SimConfig::default()
    })
    .await
}

async fn post_json(base: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = post(base, path, body).await;
    let status = r.status().as_u16();
    (status, r.json().await.expect("a JSON body"))
}

/// Chat's tools: `get_weather(city)` and `get_time(zone)`.
fn chat_tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "parameters":
            {"type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "get_time", "parameters":
            {"type": "object", "properties": {"zone": {"type": "string"}}}}}
    ])
}

/// Each chat chunk's kind: `role`, `reasoning`, `content`, `call` (the tool call's first
/// chunk: id, type, name and the first arguments fragment), `args`, `usage`.
fn chat_kinds(s: &Stream) -> Vec<String> {
    s.json_events()
        .iter()
        .map(|v| {
            let d = &v["choices"][0]["delta"];
            if v["choices"].as_array().is_some_and(|c| c.is_empty()) {
                "usage"
            } else if d.get("role").is_some() {
                "role"
            } else if d.get("reasoning").is_some() {
                "reasoning"
            } else if d["tool_calls"][0].get("id").is_some() {
                "call"
            } else if d.get("tool_calls").is_some() {
                "args"
            } else {
                "content"
            }
            .to_string()
        })
        .collect()
}

fn repeat(kind: &str, n: usize) -> Vec<String> {
    vec![kind.to_string(); n]
}

fn seq(parts: &[(&str, usize)]) -> Vec<String> {
    parts.iter().flat_map(|(k, n)| repeat(k, *n)).collect()
}

/// The arguments of a streamed chat tool call, concatenated, parsed.
fn chat_stream_args(s: &Stream) -> (String, Value) {
    let args: String = s
        .json_events()
        .iter()
        .filter_map(|v| {
            v["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    let parsed = serde_json::from_str(&args).unwrap_or_else(|e| panic!("{args}: {e}"));
    (args, parsed)
}

#[tokio::test]
async fn chat_stream_thinks_then_calls_the_tool_one_token_per_chunk() {
    let server = thinking_server(0.0, None).await;
    let b = server.base_url();
    let mut body = chat_body(&words(20, 0), 8, true);
    body["tools"] = chat_tools();
    body["tool_choice"] = json!("required");
    let s = stream(&b, "/v1/chat/completions", &body).await;
    assert_eq!(s.status, 200);
    // 8 tokens: 2 thinking, then the call's 6 (its name with the first fragment, 5 more).
    let want = seq(&[
        ("role", 1),
        ("reasoning", 2),
        ("call", 1),
        ("args", 5),
        ("usage", 1),
    ]);
    assert_eq!(chat_kinds(&s), want);
    assert!(s.done());
    let ev = s.json_events();
    let call = &ev[3]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["index"], 0);
    assert_eq!(call["function"]["name"], "get_weather");
    assert!(call["id"].as_str().unwrap().starts_with("chatcmpl-tool-"));
    assert_eq!(ev[3]["choices"][0]["delta"]["content"], Value::Null);
    let (args, parsed) = chat_stream_args(&s);
    assert_eq!(
        parsed["city"].as_str().unwrap().split_whitespace().count(),
        4
    );
    assert!(args.starts_with("{\"city\": \""), "{args}");
    // The length limit ended it (as vLLM reports it then).
    assert_eq!(ev[8]["choices"][0]["finish_reason"], "length");
    let u = s.usage().unwrap();
    assert_eq!(u["completion_tokens"], 8);
    assert_eq!(u["completion_tokens_details"]["reasoning_tokens"], 2);
    server.shutdown().await;
}

#[tokio::test]
async fn chat_thinking_token_budget_beats_the_share() {
    let server = thinking_server(0.0, None).await;
    let b = server.base_url();
    let mut body = chat_body(&words(20, 0), 8, true);
    body["thinking_token_budget"] = json!(5);
    let s = stream(&b, "/v1/chat/completions", &body).await;
    let want = seq(&[("role", 1), ("reasoning", 5), ("content", 3), ("usage", 1)]);
    assert_eq!(chat_kinds(&s), want);
    assert_eq!(
        s.usage().unwrap()["completion_tokens_details"]["reasoning_tokens"],
        5
    );
    // Not streamed: a budget past the answer thinks to its end; a budget of 0 not at all.
    body["stream"] = json!(false);
    body.as_object_mut().unwrap().remove("stream_options");
    body["thinking_token_budget"] = json!(20);
    let (_, v) = post_json(&b, "/v1/chat/completions", &body).await;
    let m = &v["choices"][0]["message"];
    assert_eq!(
        m["reasoning"].as_str().unwrap().split_whitespace().count(),
        8
    );
    assert_eq!(m["content"], Value::Null);
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"],
        8
    );
    body["thinking_token_budget"] = json!(0);
    let (_, v) = post_json(&b, "/v1/chat/completions", &body).await;
    let m = &v["choices"][0]["message"];
    assert_eq!(m["reasoning"], Value::Null);
    assert_eq!(m["content"].as_str().unwrap().split_whitespace().count(), 8);
    assert_eq!(v["usage"]["completion_tokens_details"], Value::Null);
    body["thinking_token_budget"] = json!(-1);
    let (status, _) = post_json(&b, "/v1/chat/completions", &body).await;
    assert_eq!(status, 400);
    server.shutdown().await;
}

/// A request ended by the simulated EOS (at least 3 tokens, far below its limit).
fn eos_chat_body(tool_choice: Value, stream: bool) -> Value {
    let mut body = chat_body(&words(20, 0), 4000, stream);
    body.as_object_mut().unwrap().remove("ignore_eos");
    body["min_tokens"] = json!(3);
    body["tools"] = chat_tools();
    body["tool_choice"] = tool_choice;
    body
}

#[tokio::test]
async fn chat_whole_tool_call_and_its_finish_reason() {
    let server = thinking_server(0.0, Some(6.0)).await;
    let b = server.base_url();
    let (status, v) = post_json(
        &b,
        "/v1/chat/completions",
        &eos_chat_body(json!("required"), false),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let n = v["usage"]["completion_tokens"].as_u64().unwrap();
    let r = (n as f64 * 0.25).round() as u64;
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"],
        r
    );
    let c = &v["choices"][0];
    assert_eq!(c["finish_reason"], "tool_calls");
    assert_eq!(c["message"]["content"], Value::Null);
    let call = &c["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    // n − r tokens of call: `{"city": "`, n − r − 2 words, `"}`.
    let words_in = args["city"].as_str().unwrap().split_whitespace().count() as u64;
    assert_eq!(words_in, n - r - 2);
    // A named function: that one, and `stop` (vLLM 0.32's finish reason for a named call).
    let named = json!({"type": "function", "function": {"name": "get_time"}});
    let s = stream(&b, "/v1/chat/completions", &eos_chat_body(named, true)).await;
    let ev = s.json_events();
    let n = s.usage().unwrap()["completion_tokens"].as_u64().unwrap();
    let kinds = chat_kinds(&s);
    let r = (n as f64 * 0.25).round() as usize;
    let want = seq(&[
        ("role", 1),
        ("reasoning", r),
        ("call", 1),
        ("args", n as usize - r - 1),
        ("usage", 1),
    ]);
    assert_eq!(kinds, want);
    assert_eq!(
        ev[r + 1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"],
        "get_time"
    );
    assert_eq!(ev[n as usize]["choices"][0]["finish_reason"], "stop");
    assert!(chat_stream_args(&s).1["zone"].is_string());
    // A named function that is not among the tools: 400, as vLLM.
    let unknown = json!({"type": "function", "function": {"name": "nope"}});
    let (status, v) = post_json(&b, "/v1/chat/completions", &eos_chat_body(unknown, false)).await;
    assert_eq!(status, 400, "{v}");
    server.shutdown().await;
}

#[tokio::test]
async fn tool_call_share_is_drawn_per_prompt() {
    let server = start_server(SimConfig {
        tool_call_share: 0.5,
        ..SimConfig::default()
    })
    .await;
    let b = server.base_url();
    let mut called = Vec::new();
    for i in 0..16 {
        let mut body = chat_body(&words(12, i), 4, false);
        body["tools"] = chat_tools();
        let (_, v) = post_json(&b, "/v1/chat/completions", &body).await;
        let first = v["choices"][0]["message"].get("tool_calls").is_some();
        // The same prompt draws the same: a tool call again, or text again.
        let (_, again) = post_json(&b, "/v1/chat/completions", &body).await;
        assert_eq!(
            again["choices"][0]["message"].get("tool_calls").is_some(),
            first
        );
        // `none` never calls; without tools, nothing to call.
        body["tool_choice"] = json!("none");
        let (_, v) = post_json(&b, "/v1/chat/completions", &body).await;
        assert!(v["choices"][0]["message"].get("tool_calls").is_none());
        called.push(first);
    }
    let n = called.iter().filter(|c| **c).count();
    assert!((1..16).contains(&n), "{called:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn completions_stream_text_whatever_the_budget() {
    let server = thinking_server(0.0, None).await;
    let b = server.base_url();
    let mut body = completion_body(json!(words(10, 0)), 6, true);
    body["thinking_token_budget"] = json!(3);
    body["ignore_eos"] = json!(true);
    let s = stream(&b, "/v1/completions", &body).await;
    assert_eq!(s.token_events().len(), 6);
    let u = s.usage().unwrap();
    assert_eq!(u["completion_tokens"], 6);
    assert!(u.get("completion_tokens_details").is_none());
    server.shutdown().await;
}

fn names(s: &Stream) -> Vec<String> {
    s.events
        .iter()
        .map(|e| e.name.clone().unwrap_or_default())
        .collect()
}

fn names_of(parts: &[(&str, usize)]) -> Vec<String> {
    seq(parts)
}

/// Responses' head, a reasoning item of `r` tokens, closed.
fn responses_thinking(r: usize) -> Vec<(&'static str, usize)> {
    vec![
        ("response.created", 1),
        ("response.in_progress", 1),
        ("response.output_item.added", 1),
        ("response.content_part.added", 1),
        ("response.reasoning_text.delta", r),
        ("response.reasoning_text.done", 1),
        ("response.content_part.done", 1),
        ("response.output_item.done", 1),
    ]
}

#[tokio::test]
async fn responses_stream_reasoning_item_then_message() {
    let server = thinking_server(0.0, None).await;
    let b = server.base_url();
    let s = stream(&b, "/v1/responses", &responses_body(&words(20, 0), 8, true)).await;
    let mut want = responses_thinking(2);
    want.extend([
        ("response.output_item.added", 1),
        ("response.content_part.added", 1),
        ("response.output_text.delta", 6),
        ("response.output_text.done", 1),
        ("response.content_part.done", 1),
        ("response.output_item.done", 1),
        ("response.completed", 1),
    ]);
    assert_eq!(names(&s), names_of(&want));
    let ev = s.json_events();
    for (i, v) in ev.iter().enumerate() {
        assert_eq!(v["sequence_number"], i as u64, "{v}");
        assert_eq!(v["type"].as_str(), s.events[i].name.as_deref());
    }
    assert_eq!(ev[2]["item"]["type"], "reasoning");
    assert_eq!(ev[3]["part"]["type"], "reasoning_text");
    let thought: String = ev[4..6]
        .iter()
        .map(|v| v["delta"].as_str().unwrap())
        .collect();
    assert_eq!(ev[6]["text"], thought.as_str());
    assert_eq!(ev[9]["output_index"], 1);
    assert_eq!(ev[9]["item"]["type"], "message");
    let r = &ev.last().unwrap()["response"];
    let types: Vec<&str> = r["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["reasoning", "message"]);
    assert_eq!(r["output"][0]["content"][0]["text"], thought.as_str());
    assert_eq!(r["usage"]["output_tokens"], 8);
    assert_eq!(r["usage"]["output_tokens_details"]["reasoning_tokens"], 2);
    server.shutdown().await;
}

fn responses_tools() -> Value {
    json!([{"type": "function", "name": "get_weather", "parameters":
        {"type": "object", "properties": {"city": {"type": "string"}}}}])
}

#[tokio::test]
async fn responses_function_call_streamed_and_whole() {
    let server = thinking_server(0.0, None).await;
    let b = server.base_url();
    let mut body = responses_body(&words(20, 0), 8, true);
    body["tools"] = responses_tools();
    body["tool_choice"] = json!("required");
    body["reasoning"] = json!({"effort": "high"});
    let s = stream(&b, "/v1/responses", &body).await;
    let mut want = responses_thinking(2);
    want.extend([
        ("response.output_item.added", 1),
        ("response.function_call_arguments.delta", 5),
        ("response.function_call_arguments.done", 1),
        ("response.output_item.done", 1),
        ("response.completed", 1),
    ]);
    assert_eq!(names(&s), names_of(&want));
    let ev = s.json_events();
    assert_eq!(ev[9]["item"]["type"], "function_call");
    assert_eq!(ev[9]["item"]["name"], "get_weather");
    // The item (its name) is the call's first token: 5 argument fragments for 6 tokens.
    let args: String = ev[10..15]
        .iter()
        .map(|v| v["delta"].as_str().unwrap())
        .collect();
    let parsed: Value = serde_json::from_str(&args).unwrap();
    assert_eq!(
        parsed["city"].as_str().unwrap().split_whitespace().count(),
        3
    );
    assert_eq!(ev[15]["arguments"], args.as_str());
    assert_eq!(ev[16]["item"]["arguments"], args.as_str());
    let usage = &ev[17]["response"]["usage"];
    assert_eq!(usage["output_tokens"], 8);
    assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], 2);
    body["stream"] = json!(false);
    let (_, v) = post_json(&b, "/v1/responses", &body).await;
    let out = v["output"].as_array().unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0]["type"], "reasoning");
    assert_eq!(
        out[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        2
    );
    assert_eq!(out[1]["type"], "function_call");
    assert!(out[1]["call_id"]
        .as_str()
        .unwrap()
        .starts_with("chatcmpl-tool-"));
    let a: Value = serde_json::from_str(out[1]["arguments"].as_str().unwrap()).unwrap();
    assert!(a["city"].is_string());
    assert_eq!(v["usage"]["output_tokens_details"]["reasoning_tokens"], 2);
    server.shutdown().await;
}

/// Each Messages event's kind: its name, with a delta's type for `content_block_delta` and
/// a block's type for `content_block_start`.
fn messages_kinds(s: &Stream) -> Vec<String> {
    s.json_events()
        .iter()
        .map(|v| match v["type"].as_str().unwrap() {
            "content_block_delta" => v["delta"]["type"].as_str().unwrap().to_string(),
            "content_block_start" => {
                format!("start {}", v["content_block"]["type"].as_str().unwrap())
            }
            other => other.to_string(),
        })
        .collect()
}

#[tokio::test]
async fn messages_budget_tokens_beat_the_share_in_a_thinking_block() {
    let server = thinking_server(0.0, None).await;
    let b = server.base_url();
    let mut body = messages_body(&words(20, 0), 8, true);
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 3});
    let s = stream(&b, "/v1/messages", &body).await;
    let want = seq(&[
        ("message_start", 1),
        ("start thinking", 1),
        ("thinking_delta", 3),
        ("signature_delta", 1),
        ("content_block_stop", 1),
        ("start text", 1),
        ("text_delta", 5),
        ("content_block_stop", 1),
        ("message_delta", 1),
        ("message_stop", 1),
    ]);
    assert_eq!(messages_kinds(&s), want);
    let ev = s.json_events();
    assert_eq!(ev[1]["index"], 0);
    assert_eq!(ev[7]["index"], 1);
    assert_eq!(ev[8]["index"], 1);
    assert_eq!(ev[14]["usage"]["output_tokens"], 8);
    // Not streamed: a thinking block (signed) and a text block; disabled: no thinking.
    body["stream"] = json!(false);
    let (_, v) = post_json(&b, "/v1/messages", &body).await;
    let c = &v["content"];
    assert_eq!(c[0]["type"], "thinking");
    assert_eq!(
        c[0]["thinking"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        3
    );
    assert!(c[0]["signature"].is_string());
    assert_eq!(c[1]["type"], "text");
    assert_eq!(c[1]["text"].as_str().unwrap().split_whitespace().count(), 5);
    body["thinking"] = json!({"type": "disabled"});
    let (_, v) = post_json(&b, "/v1/messages", &body).await;
    assert_eq!(v["content"].as_array().unwrap().len(), 1);
    assert_eq!(v["content"][0]["type"], "text");
    // As vLLM: the budget must be below max_tokens.
    body["thinking"] = json!({"type": "enabled", "budget_tokens": 8});
    let (status, v) = post_json(&b, "/v1/messages", &body).await;
    assert_eq!(status, 400, "{v}");
    server.shutdown().await;
}

#[tokio::test]
async fn messages_tool_use_block_streamed_and_whole() {
    let server = thinking_server(0.0, Some(6.0)).await;
    let b = server.base_url();
    let tools = json!([{"name": "get_weather", "input_schema":
        {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let mut body = messages_body(&words(20, 0), 8, true);
    body["tools"] = tools.clone();
    body["tool_choice"] = json!({"type": "any"});
    let s = stream(&b, "/v1/messages", &body).await;
    let want = seq(&[
        ("message_start", 1),
        ("start thinking", 1),
        ("thinking_delta", 2),
        ("signature_delta", 1),
        ("content_block_stop", 1),
        ("start tool_use", 1),
        ("input_json_delta", 5),
        ("content_block_stop", 1),
        ("message_delta", 1),
        ("message_stop", 1),
    ]);
    assert_eq!(messages_kinds(&s), want);
    let ev = s.json_events();
    assert_eq!(ev[6]["content_block"]["name"], "get_weather");
    assert_eq!(ev[6]["content_block"]["input"], json!({}));
    assert_eq!(ev[6]["index"], 1);
    // The block start (its name) is the call's first token: 5 fragments for 6 tokens.
    let args: String = ev[7..12]
        .iter()
        .map(|v| v["delta"]["partial_json"].as_str().unwrap())
        .collect();
    let parsed: Value = serde_json::from_str(&args).unwrap();
    assert_eq!(
        parsed["city"].as_str().unwrap().split_whitespace().count(),
        3
    );
    assert_eq!(ev[13]["delta"]["stop_reason"], "max_tokens");
    assert_eq!(ev[13]["usage"]["output_tokens"], 8);
    // Ended by the simulated EOS: stop_reason tool_use, the input as an object.
    let body = json!({"messages": [{"role": "user", "content": words(20, 0)}], "max_tokens": 4000,
        "min_tokens": 3, "tools": tools, "tool_choice": {"type": "tool", "name": "get_weather"}});
    let (_, v) = post_json(&b, "/v1/messages", &body).await;
    assert_eq!(v["stop_reason"], "tool_use");
    let blocks = v["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "thinking");
    let tool = blocks.last().unwrap();
    assert_eq!(tool["type"], "tool_use");
    // An object: `{}` when the call had only its opening token and one more.
    assert!(tool["input"].is_object());
    assert!(blocks.iter().all(|b| b["type"] != "text"));
    server.shutdown().await;
}
