//! Response shapes against fixtures written from vLLM's and TGI's documented formats.
//! Volatile values are replaced by placeholders before comparing (`<ID>`, `<CREATED>`, `<TOKEN>`
//! for one generated token, `<TEXT>` for a whole completion, `<TOKEN_ID>`, `<MESSAGE>`).

use crate::support::*;
use llm_sim::vocab::builtin_words;
use llm_sim::SimConfig;
use serde_json::{json, Value};

fn is_token(s: &str) -> bool {
    s.strip_prefix(' ')
        .is_some_and(|w| builtin_words().iter().any(|b| b == w))
}

fn normalize(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, val) in map.iter_mut() {
                match (k.as_str(), &*val) {
                    ("id", Value::String(s))
                        if s.starts_with("chatcmpl-") || s.starts_with("cmpl-") =>
                    {
                        assert!(s.len() > 20, "{s}");
                        *val = json!("<ID>");
                    }
                    ("id", Value::Number(_)) => *val = json!("<TOKEN_ID>"),
                    ("created", Value::Number(n)) => {
                        assert!(n.as_u64().is_some_and(|c| c > 1_600_000_000));
                        *val = json!("<CREATED>");
                    }
                    ("content" | "text", Value::String(s)) if !s.is_empty() => {
                        if is_token(s) {
                            *val = json!("<TOKEN>");
                        } else {
                            assert!(s.split(' ').skip(1).all(|w| is_token(&format!(" {w}"))));
                            *val = json!("<TEXT>");
                        }
                    }
                    ("generated_text", Value::String(s)) => {
                        assert!(s.starts_with(' '));
                        *val = json!("<TEXT>");
                    }
                    ("message", Value::String(_)) => *val = json!("<MESSAGE>"),
                    _ => normalize(val),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

fn fixture_events(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let l = e.trim();
            l.strip_prefix("data: ")
                .or_else(|| l.strip_prefix("data:"))
                .expect("data line")
                .to_string()
        })
        .collect()
}

fn assert_stream_matches(s: &Stream, fixture: &str) {
    let want = fixture_events(fixture);
    assert_eq!(s.events.len(), want.len(), "events: {:#?}", s.events);
    for (got, want) in s.events.iter().zip(want) {
        if want == "[DONE]" {
            assert_eq!(got.data, "[DONE]");
            continue;
        }
        let mut g: Value = serde_json::from_str(&got.data).expect("event is JSON");
        normalize(&mut g);
        let w: Value = serde_json::from_str(&want).expect("fixture JSON");
        assert_eq!(g, w, "event {}", got.data);
    }
}

#[tokio::test]
async fn chat_stream_shape() {
    let server = default_server().await;
    let s = stream(
        &server.base_url(),
        "/v1/chat/completions",
        &chat_body(" bake tomo dila", 3, true),
    )
    .await;
    assert_eq!(s.status, 200);
    assert!(s.content_type.starts_with("text/event-stream"));
    assert_stream_matches(&s, include_str!("../fixtures/chat_stream.sse"));
    // Every chunk of one stream has the same id.
    let ids: std::collections::HashSet<String> = s
        .json_events()
        .iter()
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn completion_stream_shape_with_token_ids() {
    let server = default_server().await;
    let s = stream(
        &server.base_url(),
        "/v1/completions",
        &completion_body(json!([5, 6, 7, 8]), 2, true),
    )
    .await;
    assert_eq!(s.status, 200);
    assert_stream_matches(&s, include_str!("../fixtures/completion_stream.sse"));
    server.shutdown().await;
}

#[tokio::test]
async fn stream_without_include_usage_has_no_usage_chunk() {
    let server = default_server().await;
    let mut body = chat_body("bake", 4, true);
    body.as_object_mut().unwrap().remove("stream_options");
    let s = stream(&server.base_url(), "/v1/chat/completions", &body).await;
    assert!(s.done());
    assert!(s.usage().is_none());
    assert_eq!(s.token_events().len(), 4);
    assert!(s
        .json_events()
        .iter()
        .all(|v| !v["choices"].as_array().unwrap().is_empty()));
    server.shutdown().await;
}

#[tokio::test]
async fn continuous_usage_stats_on_every_chunk() {
    let server = default_server().await;
    let mut body = completion_body(json!("bake tomo"), 3, true);
    body["stream_options"]["continuous_usage_stats"] = json!(true);
    let s = stream(&server.base_url(), "/v1/completions", &body).await;
    let ev = s.json_events();
    assert_eq!(ev.len(), 4);
    for (i, v) in ev[..3].iter().enumerate() {
        assert_eq!(v["usage"]["completion_tokens"], json!(i + 1));
        assert_eq!(v["usage"]["prompt_tokens"], json!(2));
    }
    assert_eq!(ev[3]["usage"]["total_tokens"], json!(5));
    server.shutdown().await;
}

#[tokio::test]
async fn non_streaming_shapes() {
    let server = default_server().await;
    let base = server.base_url();
    let mut v: Value = post(
        &base,
        "/v1/chat/completions",
        &chat_body("bake tomo dila", 5, false),
    )
    .await
    .json()
    .await
    .unwrap();
    let text = v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(text.split_whitespace().count(), 5);
    normalize(&mut v);
    let want: Value = serde_json::from_str(include_str!("../fixtures/chat.json")).unwrap();
    assert_eq!(v, want);

    let mut v: Value = post(
        &base,
        "/v1/completions",
        &completion_body(json!("a b c d"), 5, false),
    )
    .await
    .json()
    .await
    .unwrap();
    normalize(&mut v);
    let want: Value = serde_json::from_str(include_str!("../fixtures/completion.json")).unwrap();
    assert_eq!(v, want);

    let mut v: Value = client()
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    normalize(&mut v);
    let want: Value = serde_json::from_str(include_str!("../fixtures/models.json")).unwrap();
    assert_eq!(v, want);

    let h = client().get(format!("{base}/health")).send().await.unwrap();
    assert_eq!(h.status().as_u16(), 200);
    server.shutdown().await;
}

#[tokio::test]
async fn tgi_shapes() {
    let server = default_server().await;
    let base = server.base_url();
    let body = json!({"inputs": "a b c", "parameters": {"max_new_tokens": 2, "details": true}});
    let s = stream(&base, "/generate_stream", &body).await;
    assert_eq!(s.status, 200);
    assert_stream_matches(&s, include_str!("../fixtures/tgi_stream.sse"));
    let last = s.json_events().pop().unwrap();
    let joined: String = s
        .json_events()
        .iter()
        .map(|v| v["token"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(last["generated_text"].as_str().unwrap(), joined);

    let resp = post(&base, "/generate", &body).await;
    assert_eq!(resp.headers()["x-prompt-tokens"], "3");
    assert_eq!(resp.headers()["x-generated-tokens"], "2");
    let mut v: Value = resp.json().await.unwrap();
    normalize(&mut v);
    let want: Value = serde_json::from_str(include_str!("../fixtures/tgi_generate.json")).unwrap();
    assert_eq!(v, want);

    let plain: Value = post(
        &base,
        "/generate",
        &json!({"inputs": "a", "parameters": {"max_new_tokens": 3}}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        plain["generated_text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count(),
        3
    );
    assert!(plain.get("details").is_none());
    server.shutdown().await;
}

async fn expect_400(base: &str, path: &str, body: Value, needle: &str) {
    let resp = client()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400, "{body}");
    let mut v: Value = resp.json().await.unwrap();
    let msg = v["error"]["message"].as_str().unwrap().to_string();
    assert!(msg.contains(needle), "message {msg:?} lacks {needle:?}");
    // The blamed field (vLLM 0.32: `input_tokens`, `max_tokens`, else null) is checked apart.
    assert!(v["error"]["param"].is_null() || v["error"]["param"].is_string());
    v["error"]["param"] = Value::Null;
    normalize(&mut v);
    let want: Value = serde_json::from_str(include_str!("../fixtures/error_400.json")).unwrap();
    assert_eq!(v, want);
}

#[tokio::test]
async fn bad_requests_get_vllm_errors() {
    let cfg = SimConfig {
        max_model_len: 100,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let chat = "/v1/chat/completions";
    let cmpl = "/v1/completions";
    expect_400(&b, chat, json!({"messages": []}), "at least one message").await;
    expect_400(&b, chat, json!({"max_tokens": 3}), "messages").await;
    expect_400(&b, chat, json!({"messages": "hi"}), "Invalid request body").await;
    expect_400(
        &b,
        chat,
        chat_body("a", 0, false),
        "max_tokens must be at least 1, got 0",
    )
    .await;
    let mut neg = chat_body("a", 5, false);
    neg["max_tokens"] = json!(-3);
    expect_400(&b, chat, neg, "at least 1").await;
    let mut min = chat_body("a", 5, false);
    min["min_tokens"] = json!(6);
    expect_400(
        &b,
        chat,
        min,
        "min_tokens must be less than or equal to max_tokens=5",
    )
    .await;
    let mut so = chat_body("a", 5, false);
    so["stream_options"] = json!({"include_usage": true});
    expect_400(&b, chat, so, "Stream options").await;
    expect_400(
        &b,
        chat,
        chat_body(&words(120, 0), 10, false),
        "maximum context length is 100",
    )
    .await;
    // As vLLM 0.32: a prompt of exactly the context length leaves no room for one token.
    let full = completion_body(json!(words(100, 0)), 5, false);
    expect_400(&b, cmpl, full, "max_tokens must be at least 1, got 0").await;
    // A prompt that fits with max_tokens cut to what is left is served.
    let r = post(&b, chat, &chat_body(&words(60, 0), 80, false)).await;
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() < 80);
    expect_400(
        &b,
        chat,
        chat_body("a", 101, false),
        "max_tokens=101 cannot be greater than max_model_len=100",
    )
    .await;
    let mut n2 = chat_body("a", 5, false);
    n2["n"] = json!(2);
    expect_400(&b, chat, n2, "n=1").await;
    expect_400(
        &b,
        cmpl,
        completion_body(json!(""), 5, false),
        "cannot be empty",
    )
    .await;
    expect_400(
        &b,
        cmpl,
        completion_body(json!([1, -2]), 5, false),
        "Invalid request body",
    )
    .await;
    expect_400(
        &b,
        cmpl,
        completion_body(json!(["a", "b"]), 5, false),
        "one prompt",
    )
    .await;
    expect_400(&b, cmpl, json!({"max_tokens": 5}), "prompt").await;
    // Not even JSON.
    let resp = client()
        .post(format!("{b}{cmpl}"))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);

    // Wrong model: 404 NotFoundError.
    let mut wrong = chat_body("a", 5, false);
    wrong["model"] = json!("gpt-9");
    let resp = post(&b, chat, &wrong).await;
    assert_eq!(resp.status().as_u16(), 404);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "NotFoundError");
    assert_eq!(v["error"]["param"], "model");
    assert_eq!(v["error"]["code"], 404);

    // TGI validation errors are 422 in TGI's shape.
    let resp = post(
        &b,
        "/generate",
        &json!({"inputs": "a", "parameters": {"max_new_tokens": 500}}),
    )
    .await;
    assert_eq!(resp.status().as_u16(), 422);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error_type"], "validation");

    // Unknown route and wrong method.
    let r = client().get(format!("{b}/nope")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let r = client().get(format!("{b}{chat}")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);

    let page = metrics(&b).await;
    assert_eq!(
        metric_with(&page, "llm_sim:http_responses_total", "status=\"400\""),
        16.0
    );
    assert_eq!(
        metric_with(&page, "llm_sim:http_responses_total", "status=\"422\""),
        1.0
    );
    server.shutdown().await;
}

#[tokio::test]
async fn api_key_is_required_when_set() {
    let cfg = SimConfig {
        api_key: Some("sekret".into()),
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let url = format!("{b}/v1/completions");
    let body = completion_body(json!("a"), 1, false);
    let r = client().post(&url).json(&body).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v, json!({"error": "Unauthorized"}));
    let r = client()
        .post(&url)
        .bearer_auth("wrong")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let r = client()
        .post(&url)
        .bearer_auth("sekret")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    // Health and metrics stay open, as in vLLM.
    let r = client().get(format!("{b}/health")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        metric_with(
            &metrics(&b).await,
            "llm_sim:http_responses_total",
            "status=\"401\""
        ),
        2.0
    );
    server.shutdown().await;
}

#[tokio::test]
async fn weird_inputs_never_break_the_server() {
    let server = default_server().await;
    let b = server.base_url();
    let bodies: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"null".to_vec(),
        b"[]".to_vec(),
        b"{}".to_vec(),
        vec![0xff, 0xfe, b'{'],
        br#"{"messages":[{"role":5,"content":"a"}]}"#.to_vec(),
        br#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}],"max_tokens":1}"#
            .to_vec(),
        br#"{"messages":[{"role":"user","content":{"x":1}}]}"#.to_vec(),
        br#"{"messages":[{"role":"user","content":"a"}],"max_tokens":1e30}"#.to_vec(),
        br#"{"messages":[{"role":"user","content":"a"}],"max_tokens":"5"}"#.to_vec(),
        br#"{"messages":[{"role":"user","content":"a"}],"max_tokens":9223372036854775807}"#
            .to_vec(),
        br#"{"prompt":[[1,2],[3]],"max_tokens":1}"#.to_vec(),
        br#"{"prompt":{"a":1}}"#.to_vec(),
        br#"{"prompt":[4294967296]}"#.to_vec(),
        br#"{"prompt":"a","min_tokens":-1,"max_tokens":2}"#.to_vec(),
        br#"{"inputs":5}"#.to_vec(),
        br#"{"inputs":"a","parameters":{"max_new_tokens":-1}}"#.to_vec(),
        br#"{"inputs":"a","parameters":"x"}"#.to_vec(),
    ];
    for path in [
        "/v1/chat/completions",
        "/v1/completions",
        "/generate",
        "/generate_stream",
    ] {
        for body in &bodies {
            let r = client()
                .post(format!("{b}{path}"))
                .body(body.clone())
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            assert!(
                (400..500).contains(&status),
                "{path} {:?} -> {status}",
                String::from_utf8_lossy(body)
            );
        }
    }
    let r = client().get(format!("{b}/health")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let s = stream(&b, "/v1/chat/completions", &chat_body("a", 3, true)).await;
    assert_eq!(s.token_events().len(), 3);
    server.shutdown().await;
}

#[tokio::test]
async fn huge_step_costs_do_not_crash() {
    let cfg = SimConfig {
        step_fixed_us: 1e300,
        ..SimConfig::default()
    };
    let server = start_server(cfg).await;
    let b = server.base_url();
    let c = client();
    let r = c
        .post(format!("{b}/v1/completions"))
        .json(&completion_body(json!("a"), 1, false))
        .timeout(std::time::Duration::from_millis(300))
        .send()
        .await;
    assert!(r.is_err(), "a step of 1e300 us cannot finish");
    let r = c.get(format!("{b}/health")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    server.shutdown().await;
}

/// `--served-model-name a b` (vLLM's aliases): `/v1/models` lists both, a request naming either
/// is served and answered under the first, and another name gets vLLM 0.32's 404 word for word.
#[tokio::test]
async fn served_names_are_aliases_and_others_get_vllms_404() {
    let server = start_server(SimConfig {
        model_name: "qwen3-8b".into(),
        model_aliases: vec!["fleet-b".into()],
        ..SimConfig::default()
    })
    .await;
    let b = server.base_url();
    let models: Value = client()
        .get(format!("{b}/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["qwen3-8b", "fleet-b"]);
    let mut body = chat_body("a", 2, false);
    body["model"] = json!("fleet-b");
    let resp = post(&b, "/v1/chat/completions", &body).await;
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["model"], "qwen3-8b");
    body["model"] = json!("nope");
    let resp = post(&b, "/v1/chat/completions", &body).await;
    assert_eq!(resp.status().as_u16(), 404);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(
        v,
        json!({"error": {"message": "The model `nope` does not exist. Valid aliases: qwen3-8b, fleet-b.",
            "type": "NotFoundError", "param": "model", "code": 404}})
    );
    server.shutdown().await;
}
