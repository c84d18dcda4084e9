//! The OpenAI Responses (`/v1/responses`) and Anthropic Messages (`/v1/messages`) routes:
//! shapes streaming and not, event order, usage sums, the Anthropic cache split on a repeated
//! prefix (shared with chat: the same template), tool turns rendered as chat's, error shapes,
//! faults, the server's metrics and the router.

use crate::support::*;
use llm_sim::routing::Policy;
use llm_sim::{RouterConfig, SimConfig};
use serde_json::{json, Value};

/// Slow steps, so that events sent before the first token are seen to come earlier.
fn slow_steps() -> SimConfig {
    SimConfig {
        step_fixed_us: 40_000.0,
        ..SimConfig::default()
    }
}

async fn post_json(base: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = post(base, path, body).await;
    let status = r.status().as_u16();
    (status, r.json().await.expect("a JSON body"))
}

fn names(s: &Stream) -> Vec<String> {
    s.events
        .iter()
        .map(|e| e.name.clone().unwrap_or_default())
        .collect()
}

/// Every event's `event:` line names its data's `type`.
fn check_event_lines(s: &Stream) {
    for e in &s.events {
        let v = e.json().expect("JSON data");
        assert_eq!(e.name.as_deref(), v["type"].as_str(), "{}", e.data);
    }
}

#[tokio::test]
async fn responses_whole_response_and_usage() {
    let server = default_server().await;
    let b = server.base_url();
    let mut body = responses_body(&words(40, 0), 6, false);
    body["instructions"] = json!(words(10, 3));
    let (status, v) = post_json(&b, "/v1/responses", &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "response");
    assert!(v["id"].as_str().unwrap().starts_with("resp_"));
    // Ended by its length limit, as OpenAI reports it.
    assert_eq!(v["status"], "incomplete");
    assert_eq!(v["incomplete_details"]["reason"], "max_output_tokens");
    let item = &v["output"][0];
    assert_eq!(item["type"], "message");
    assert_eq!(item["role"], "assistant");
    assert_eq!(item["content"][0]["type"], "output_text");
    let text = item["content"][0]["text"].as_str().unwrap();
    assert_eq!(text.split_whitespace().count(), 6);
    let u = &v["usage"];
    // Instructions are a system message, input a user message: (10 + 5) + (40 + 5) + 3.
    assert_eq!(u["input_tokens"], 63);
    assert_eq!(u["output_tokens"], 6);
    assert_eq!(u["total_tokens"], 69);
    assert_eq!(u["input_tokens_details"]["cached_tokens"], 0);
    assert_eq!(u["output_tokens_details"]["reasoning_tokens"], 0);
    // A string input is one user message: as the chat route counts it.
    let body = json!({"input": words(40, 0), "max_output_tokens": 2});
    let (_, v) = post_json(&b, "/v1/responses", &body).await;
    assert_eq!(v["usage"]["input_tokens"], 48);
    server.shutdown().await;
}

#[tokio::test]
async fn responses_stream_events_in_order() {
    let server = start_server(slow_steps()).await;
    let b = server.base_url();
    let n = 4;
    let s = stream(&b, "/v1/responses", &responses_body(&words(20, 0), n, true)).await;
    assert_eq!(s.status, 200);
    assert!(s.content_type.starts_with("text/event-stream"));
    assert!(s.body_error.is_none());
    let mut expected: Vec<&str> = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    expected.extend(std::iter::repeat_n(
        "response.output_text.delta",
        n as usize,
    ));
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(names(&s), expected);
    check_event_lines(&s);
    let evs = s.json_events();
    for (i, v) in evs.iter().enumerate() {
        assert_eq!(v["sequence_number"], i as u64, "{v}");
    }
    assert_eq!(evs[0]["response"]["status"], "in_progress");
    let deltas: String = evs[4..4 + n as usize]
        .iter()
        .map(|v| v["delta"].as_str().unwrap())
        .collect();
    assert_eq!(evs[4 + n as usize]["text"], deltas.as_str());
    let item_id = evs[2]["item"]["id"].as_str().unwrap();
    assert_eq!(evs[4]["item_id"], item_id);
    let done = &evs.last().unwrap()["response"];
    assert_eq!(done["output"][0]["content"][0]["text"], deltas.as_str());
    let u = &done["usage"];
    assert_eq!(u["input_tokens"], 28);
    assert_eq!(u["output_tokens"], n);
    assert_eq!(u["total_tokens"], 28 + n);
    // The head comes on accepting the request, the first delta a prefill step later.
    let first_delta = s.events[4].at;
    assert!(
        first_delta >= s.events[0].at + std::time::Duration::from_millis(30),
        "created at {:?}, first delta at {first_delta:?}",
        s.events[0].at
    );
    server.shutdown().await;
}

#[tokio::test]
async fn messages_whole_message_and_usage() {
    let server = default_server().await;
    let b = server.base_url();
    let mut body = messages_body(&words(30, 0), 5, false);
    body["system"] = json!([{"type": "text", "text": words(4, 1)},
                            {"type": "text", "text": words(6, 2)}]);
    let (status, v) = post_json(&b, "/v1/messages", &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert!(v["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(v["stop_reason"], "max_tokens");
    assert_eq!(v["content"][0]["type"], "text");
    assert_eq!(
        v["content"][0]["text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        5
    );
    let u = &v["usage"];
    // System blocks joined into one system message: (10 + 5) + (30 + 5) + 3.
    assert_eq!(u["input_tokens"], 53);
    assert_eq!(u["cache_read_input_tokens"], 0);
    assert_eq!(u["cache_creation_input_tokens"], 0);
    assert_eq!(u["output_tokens"], 5);
    server.shutdown().await;
}

#[tokio::test]
async fn messages_stream_events_in_order() {
    let server = start_server(slow_steps()).await;
    let b = server.base_url();
    let n = 3;
    let s = stream(&b, "/v1/messages", &messages_body(&words(20, 0), n, true)).await;
    assert_eq!(s.status, 200);
    assert!(s.body_error.is_none());
    let mut expected = vec!["message_start", "content_block_start"];
    expected.extend(std::iter::repeat_n("content_block_delta", n as usize));
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names(&s), expected);
    check_event_lines(&s);
    let evs = s.json_events();
    let start = &evs[0]["message"];
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["stop_reason"], Value::Null);
    assert_eq!(start["usage"]["input_tokens"], 28);
    assert!(start["usage"].get("cache_read_input_tokens").is_none());
    for d in &evs[2..2 + n as usize] {
        assert_eq!(d["delta"]["type"], "text_delta");
        assert!(d["delta"]["text"].as_str().unwrap().starts_with(' '));
    }
    let delta = &evs[evs.len() - 2];
    assert_eq!(delta["delta"]["stop_reason"], "max_tokens");
    assert_eq!(delta["usage"]["output_tokens"], n);
    // message_start comes when the request is scheduled, before its prefill step ends.
    assert!(s.events[3].at >= s.events[0].at + std::time::Duration::from_millis(30));
    server.shutdown().await;
}

#[tokio::test]
async fn messages_cache_split_on_a_repeated_prefix_shared_with_chat() {
    let server = default_server().await;
    let b = server.base_url();
    let content = words(100, 0);
    // Chat first: the Messages request renders the same template, so it hits chat's blocks.
    let (_, c) = post_json(&b, "/v1/chat/completions", &chat_body(&content, 2, false)).await;
    assert_eq!(c["usage"]["prompt_tokens"], 108);
    let (_, v) = post_json(&b, "/v1/messages", &messages_body(&content, 2, false)).await;
    let u = &v["usage"];
    // 108 prompt tokens: six full blocks of 16 cached, the rest computed.
    assert_eq!(u["cache_read_input_tokens"], 96);
    assert_eq!(u["input_tokens"], 12);
    assert_eq!(u["cache_creation_input_tokens"], 0);
    // Streaming: as vLLM 0.32, message_start counts the whole prompt as input; message_delta
    // tells the split.
    let s = stream(&b, "/v1/messages", &messages_body(&content, 2, true)).await;
    let start = &s.json_events()[0]["message"]["usage"];
    assert!(start.get("cache_read_input_tokens").is_none());
    assert_eq!(start["input_tokens"], 108);
    let end = &s.json_events()[s.events.len() - 2]["usage"];
    assert_eq!(end["cache_read_input_tokens"], 96);
    // And Responses reports the same hit as cached_tokens.
    let (_, r) = post_json(&b, "/v1/responses", &responses_body(&content, 2, false)).await;
    assert_eq!(r["usage"]["input_tokens"], 108);
    assert_eq!(r["usage"]["input_tokens_details"]["cached_tokens"], 96);
    server.shutdown().await;
}

#[tokio::test]
async fn tool_turns_count_as_the_equivalent_chat_request() {
    let server = default_server().await;
    let b = server.base_url();
    let chat = json!({"max_tokens": 1, "messages": [
        {"role": "system", "content": "bake tomo"},
        {"role": "user", "content": words(12, 0)},
        {"role": "assistant", "content": words(3, 1), "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": words(7, 2)},
        {"role": "user", "content": words(5, 3)}]});
    let (_, c) = post_json(&b, "/v1/chat/completions", &chat).await;
    let want = c["usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(want, 12 + 3 + 7 + 5 + 2 + 5 * 5 + 3);
    let msgs = json!({"max_tokens": 1, "system": "bake tomo", "messages": [
        {"role": "user", "content": words(12, 0)},
        {"role": "assistant", "content": [{"type": "text", "text": words(3, 1)},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": words(7, 2)}]},
            {"type": "text", "text": words(5, 3)}]}],
        "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}]});
    let (status, m) = post_json(&b, "/v1/messages", &msgs).await;
    assert_eq!(status, 200, "{m}");
    let u = &m["usage"];
    let got = u["input_tokens"].as_u64().unwrap() + u["cache_read_input_tokens"].as_u64().unwrap();
    assert_eq!(got, want);
    let resp = json!({"max_output_tokens": 1, "instructions": "bake tomo", "input": [
        {"role": "user", "content": words(12, 0)},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": words(3, 1)}]},
        {"type": "function_call", "call_id": "t1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "t1", "output": words(7, 2)},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": words(5, 3)}]}],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]});
    let (status, r) = post_json(&b, "/v1/responses", &resp).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["usage"]["input_tokens"].as_u64().unwrap(), want);
    server.shutdown().await;
}

#[tokio::test]
async fn error_shapes_of_each_api() {
    let server = default_server().await;
    let b = server.base_url();
    let body = json!({"model": "llm-sim", "messages": [{"role": "user", "content": "bake"}]});
    let (status, v) = post_json(&b, "/v1/messages", &body).await;
    assert_eq!(status, 400);
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "BadRequestError");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("max_tokens"));
    let (status, v) = post_json(&b, "/v1/messages", &json!({"max_tokens": 1})).await;
    assert_eq!(status, 400);
    assert_eq!(v["error"]["type"], "BadRequestError");
    let mut wrong = messages_body("bake", 1, false);
    wrong["model"] = json!("claude-x");
    let (status, v) = post_json(&b, "/v1/messages", &wrong).await;
    assert_eq!(
        (status, v["error"]["type"].as_str()),
        (404, Some("NotFoundError"))
    );
    let mut wrong = responses_body("bake", 1, false);
    wrong["model"] = json!("gpt-x");
    let (status, v) = post_json(&b, "/v1/responses", &wrong).await;
    assert_eq!(status, 404);
    assert_eq!(v["error"]["type"], "NotFoundError");
    assert_eq!(v["error"]["param"], "model");
    assert_eq!(v["error"]["code"], 404);
    assert!(v["error"]["message"].as_str().unwrap().contains("gpt-x"));
    let bad_item = json!({"input": [{"type": "input_image"}], "max_output_tokens": 1});
    let (status, v) = post_json(&b, "/v1/responses", &bad_item).await;
    assert_eq!(status, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("input[0]"),
        "{v}"
    );
    // Injected faults answer in each API's shape.
    server.faults().update(|f| f.error_503_rate = 1.0).unwrap();
    let (status, v) = post_json(&b, "/v1/messages", &messages_body("bake", 1, false)).await;
    assert_eq!(
        (status, v["error"]["type"].as_str()),
        (503, Some("ServiceUnavailableError"))
    );
    let (status, v) = post_json(&b, "/v1/responses", &responses_body("bake", 1, false)).await;
    assert_eq!(
        (status, v["error"]["type"].as_str()),
        (503, Some("ServiceUnavailableError"))
    );
    server.faults().update(|f| f.error_503_rate = 0.0).unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn api_key_in_anthropic_header() {
    let server = start_server(SimConfig {
        api_key: Some("k1".into()),
        ..SimConfig::default()
    })
    .await;
    let b = server.base_url();
    let send = |key: &'static str| {
        client()
            .post(format!("{b}/v1/messages"))
            .header("x-api-key", key)
            .json(&messages_body("bake", 1, false))
            .send()
    };
    let r = send("k1").await.unwrap();
    assert_eq!(r.status(), 200);
    let r = send("k2").await.unwrap();
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "AuthenticationError");
    server.shutdown().await;
}

#[tokio::test]
async fn missing_usage_malformed_and_reset_faults() {
    let server = default_server().await;
    let b = server.base_url();
    server
        .faults()
        .update(|f| f.missing_usage_rate = 1.0)
        .unwrap();
    let s = stream(&b, "/v1/messages", &messages_body(&words(8, 0), 3, true)).await;
    assert!(s
        .json_events()
        .iter()
        .all(|v| v.get("usage").is_none() && v["message"].get("usage").is_none()));
    let s = stream(&b, "/v1/responses", &responses_body(&words(8, 0), 3, true)).await;
    assert!(s.json_events().last().unwrap()["response"]
        .get("usage")
        .is_none());
    server
        .faults()
        .update(|f| {
            f.missing_usage_rate = 0.0;
            f.malformed_rate = 1.0;
        })
        .unwrap();
    for path in ["/v1/messages", "/v1/responses"] {
        let body = if path == "/v1/messages" {
            messages_body(&words(8, 0), 4, true)
        } else {
            responses_body(&words(8, 0), 4, true)
        };
        let s = stream(&b, path, &body).await;
        let broken = s.events.iter().filter(|e| e.json().is_none()).count();
        assert_eq!(broken, 1, "{path}: {:?}", s.events);
    }
    // A reset cuts the stream before its closing events.
    server
        .faults()
        .update(|f| {
            f.malformed_rate = 0.0;
            f.reset_rate = 1.0;
        })
        .unwrap();
    let s = stream(&b, "/v1/messages", &messages_body(&words(8, 0), 4, true)).await;
    assert!(s.body_error.is_some(), "{:?}", s.events);
    assert!(!names(&s).iter().any(|n| n == "message_stop"));
    let s = stream(&b, "/v1/responses", &responses_body(&words(8, 0), 4, true)).await;
    assert!(s.body_error.is_some(), "{:?}", s.events);
    assert!(!names(&s).iter().any(|n| n == "response.completed"));
    server.shutdown().await;
}

#[tokio::test]
async fn server_metrics_count_both_apis() {
    let server = default_server().await;
    let b = server.base_url();
    stream(&b, "/v1/responses", &responses_body(&words(20, 0), 3, true)).await;
    post_json(&b, "/v1/messages", &messages_body(&words(30, 0), 2, false)).await;
    let page = metrics(&b).await;
    assert_eq!(metric(&page, "vllm:time_to_first_token_seconds_count"), 2.0);
    assert_eq!(metric(&page, "vllm:e2e_request_latency_seconds_count"), 2.0);
    assert_eq!(metric(&page, "vllm:prompt_tokens_total"), (28 + 38) as f64);
    assert_eq!(metric(&page, "vllm:generation_tokens_total"), 5.0);
    server.shutdown().await;
}

#[tokio::test]
async fn both_apis_through_the_router() {
    let servers = llm_sim::start_cluster(SimConfig::default(), 2)
        .await
        .unwrap();
    let router = llm_sim::start_router(&servers, RouterConfig::new(Policy::RoundRobin))
        .await
        .unwrap();
    let b = router.base_url();
    let mut pods = Vec::new();
    for path in ["/v1/messages", "/v1/responses"] {
        let body = if path == "/v1/messages" {
            messages_body(&words(8, 0), 2, true)
        } else {
            responses_body(&words(8, 0), 2, true)
        };
        let r = post(&b, path, &body).await;
        assert_eq!(r.status(), 200);
        pods.push(r.headers()["x-inference-pod"].to_str().unwrap().to_string());
        let text = r.text().await.unwrap();
        assert!(text.contains("event: message_stop") || text.contains("event: response.completed"));
    }
    assert_eq!(pods, ["llm-sim-0", "llm-sim-1"]);
    assert_eq!(router.routed(), vec![1, 1]);
    // Refused before routing: in the API's own shape.
    let (status, v) = post_json(&b, "/v1/messages", &json!({"messages": []})).await;
    assert_eq!((status, v["type"].as_str()), (400, Some("error")));
    router.shutdown().await;
    for s in servers {
        s.shutdown().await;
    }
}

/// With `--tokenizer` and a chat template that renders tools and tool calls, a Messages or
/// Responses request counts exactly as the chat request it converts to.
#[tokio::test]
async fn with_a_tokenizer_each_api_renders_the_chat_template() {
    use crate::tokenizer::{temp_dir, write_tokenizer};
    let dir = temp_dir("apis");
    let template = "{% for m in messages %}<|im_start|>{{ m.role }} {{ m.content }}\
{% if m.tool_calls %}{% for c in m.tool_calls %} call {{ c.function.name }} {{ c.function.arguments | tojson }}{% endfor %}{% endif %}\
{% if m.tool_call_id %} id {{ m.tool_call_id }}{% endif %}<|im_end|>{% endfor %}\
{% if tools %}{% for t in tools %} tool {{ t.function.name }} {{ t.function.parameters | tojson }}{% endfor %}{% endif %}\
{% if add_generation_prompt %}<|im_start|>assistant{% endif %}";
    let cfg_path = dir.join("tokenizer_config.json");
    std::fs::write(&cfg_path, json!({"chat_template": template}).to_string()).unwrap();
    let server = start_server(SimConfig {
        tokenizer: Some(write_tokenizer(&dir)),
        tokenizer_config: Some(cfg_path),
        ..SimConfig::default()
    })
    .await;
    let b = server.base_url();
    let schema = json!({"type": "object", "properties": {"x": {"type": "integer"}}});
    let chat = json!({"max_tokens": 1, "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello world"},
        {"role": "assistant", "content": "hello", "tool_calls": [{"id": "t1", "type": "function",
            "function": {"name": "look", "arguments": "{\"x\": 1}"}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "world world"},
        {"role": "user", "content": "be brief"}],
        "tools": [{"type": "function", "function": {"name": "look", "parameters": schema}}]});
    let (status, c) = post_json(&b, "/v1/chat/completions", &chat).await;
    assert_eq!(status, 200, "{c}");
    let want = c["usage"]["prompt_tokens"].as_u64().unwrap();
    let msgs = json!({"max_tokens": 1, "system": [{"type": "text", "text": "be brief"}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hello world"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "hello"},
                {"type": "tool_use", "id": "t1", "name": "look", "input": {"x": 1}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "world world"},
                {"type": "text", "text": "be brief"}]}],
        "tools": [{"name": "look", "input_schema": schema}]});
    let (status, m) = post_json(&b, "/v1/messages", &msgs).await;
    assert_eq!(status, 200, "{m}");
    let u = &m["usage"];
    let got = u["input_tokens"].as_u64().unwrap() + u["cache_read_input_tokens"].as_u64().unwrap();
    assert_eq!(got, want);
    let resp = json!({"max_output_tokens": 1, "instructions": "be brief", "input": [
        {"role": "user", "content": "hello world"},
        {"role": "assistant", "content": "hello"},
        {"type": "function_call", "call_id": "t1", "name": "look", "arguments": "{\"x\": 1}"},
        {"type": "function_call_output", "call_id": "t1", "output": "world world"},
        {"role": "user", "content": [{"type": "input_text", "text": "be brief"}]}],
        "tools": [{"type": "function", "name": "look", "parameters": schema}]});
    let (status, r) = post_json(&b, "/v1/responses", &resp).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["usage"]["input_tokens"].as_u64().unwrap(), want);
    // The tools and the call are in the prompt: without them it is shorter.
    let mut plain = chat.clone();
    plain.as_object_mut().unwrap().remove("tools");
    let (_, p) = post_json(&b, "/v1/chat/completions", &plain).await;
    assert!(p["usage"]["prompt_tokens"].as_u64().unwrap() < want);
    server.shutdown().await;
}

#[tokio::test]
async fn count_tokens_tells_the_prompt_of_the_same_request() {
    let server = default_server().await;
    let b = server.base_url();
    let mut body = messages_body(&words(30, 0), 2, false);
    body["system"] = json!("bake tomo");
    body.as_object_mut().unwrap().remove("max_tokens");
    let (status, v) = post_json(&b, "/v1/messages/count_tokens", &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v, json!({"input_tokens": 2 + 5 + 30 + 5 + 3}));
    body["max_tokens"] = json!(2);
    let (_, m) = post_json(&b, "/v1/messages", &body).await;
    assert_eq!(m["usage"]["input_tokens"], v["input_tokens"]);
    body["model"] = json!("other");
    let (status, v) = post_json(&b, "/v1/messages/count_tokens", &body).await;
    assert_eq!(
        (status, v["error"]["type"].as_str()),
        (404, Some("NotFoundError"))
    );
    server.shutdown().await;
}
