//! The APIs, one module each: how its bodies are built (text, token ids, images, `messages`
//! rows), how its stream or answer is read into the [`super::ResponseState`] (token events and
//! what each carried), its usage and errors, how an `--endpoint` path names it, and its
//! calibration fact (how its prompt overhead is found: [`super::api::Calibration`]).
//!
//! - [`openai`]: OpenAI chat ([`openai::chat`], with images: [`openai::chat_images`]) and
//!   completions ([`openai::completions`]), which share the `choices` wire read in
//!   `openai/mod.rs`; AIBrix is these plus a routing header ([`openai::ROUTE_HEADER`]);
//! - [`tgi`]: text-generation-inference's `/generate` and `/generate_stream`;
//! - [`responses`]: the OpenAI Responses API (`responses/convert.rs`: a `messages` row in its
//!   shape);
//! - [`messages`]: Anthropic's Messages API (`messages/convert.rs` likewise);
//! - [`vllm_grpc`]: vLLM's gRPC engine API, with its own transport (`vllm_grpc/client.rs`).
//!
//! The rest of the crate asks the dispatch (`backend/api.rs`: one `match` per question, each
//! arm a call into one of these modules); the machinery they share is API-neutral and stays in
//! `backend/` (the SSE parser `sse.rs`, the stream reader `stream.rs`, `state.rs`, the body
//! writer `body.rs`, what the row conversions share `convert.rs`, `extra.rs`).

pub mod messages;
pub mod openai;
pub mod responses;
pub mod tgi;
pub mod vllm_grpc;

/// The one path of an API with its own `--api` (Responses, Messages): a base URL or `/v1`
/// gets `path` (set in `url`); another path must end in `/{name}`.
fn single_path(
    url: &mut reqwest::Url,
    path: &str,
    (api_path, name, title): (&str, &str, &str),
) -> Result<(), String> {
    if path.is_empty() || path == "/v1" {
        url.set_path(api_path);
    } else if !path.ends_with(&format!("/{name}")) {
        return Err(format!(
            "--endpoint path {path:?} is not a {title} path with --api {name}: use .../v1/{name} or a base URL like http://host:port"
        ));
    }
    Ok(())
}

/// The bodies and thinking budgets of every API side by side.
#[cfg(test)]
mod tests {
    use super::messages::MESSAGES_DEFAULT_MAX_TOKENS;
    use super::openai::chat::encode_chat_row_body;
    use crate::backend::api::ApiKind;
    use crate::backend::body::{BodyParams, PromptPayload};
    use crate::backend::dispatch::{append_session_user, encode_body, encode_row_body};
    use crate::backend::thinking::{thinking_field, ThinkingBudget};
    use serde_json::Value;

    fn params(stream: bool) -> BodyParams {
        BodyParams {
            model: "m".into(),
            stream,
            exact_output: true,
            extra: None,
            thinking: Default::default(),
        }
    }

    fn thinking_params(thinking: ThinkingBudget) -> BodyParams {
        BodyParams {
            model: "m".into(),
            stream: false,
            exact_output: true,
            extra: None,
            thinking,
        }
    }

    #[test]
    fn responses_and_messages_bodies() {
        let mut out = Vec::new();
        encode_body(
            ApiKind::Responses,
            &params(true),
            PromptPayload::Text(" a b"),
            (7, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m",
                "input": [{"type": "message", "role": "user", "content": " a b"}],
                "max_output_tokens": 7, "min_tokens": 7, "ignore_eos": true, "stream": true,
                "store": false})
        );
        append_session_user(ApiKind::Responses, &mut out, "s1");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["user"], "s1");
        let mut p = params(false);
        p.exact_output = false;
        encode_body(
            ApiKind::Messages,
            &p,
            PromptPayload::Text(" a b"),
            (5, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": " a b"}],
                "max_tokens": 5, "stream": false})
        );
        append_session_user(ApiKind::Messages, &mut out, "s\"2");
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["metadata"], serde_json::json!({"user_id": "s\"2"}));
        let mut tgi = b"{}".to_vec();
        append_session_user(ApiKind::TgiGenerate, &mut tgi, "s");
        assert_eq!(tgi, b"{}");
    }

    /// A `messages` row with a system message, a tool call and its result, tools and extra.
    fn tool_row() -> crate::trace::ChatPayload {
        crate::trace::ChatPayload {
            messages: serde_json::json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "r"}
            ]),
            tools: Some(
                serde_json::json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]),
            ),
            extra: Some(serde_json::Map::from_iter([(
                "temperature".to_string(),
                serde_json::json!(0),
            )])),
            max_tokens: Some(9),
            prompt_token_ids: None,
            text_input: None,
        }
    }

    #[test]
    fn messages_rows_as_messages() {
        let chat = tool_row();
        let mut out = Vec::new();
        encode_row_body(
            ApiKind::Messages,
            &params(true),
            &chat,
            (None, Some("s")),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["system"], "Be brief.");
        assert_eq!(v["messages"].as_array().unwrap().len(), 3);
        assert_eq!(v["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(
            v["messages"][1]["content"][0]["input"],
            serde_json::json!({"x": 1})
        );
        assert_eq!(v["messages"][2]["content"][0]["type"], "tool_result");
        assert_eq!(
            v["tools"],
            serde_json::json!([{"name": "f", "input_schema": {"type": "object"}}])
        );
        assert_eq!(
            (v["max_tokens"].as_u64(), v["min_tokens"].as_u64()),
            (Some(9), Some(9))
        );
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream"], true);
        assert!(v.get("stream_options").is_none());
        assert_eq!(v["metadata"]["user_id"], "s");
        assert_eq!(v["temperature"], 0);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 10, "{keys:?}");
        assert!(out.starts_with(br#"{"model":"m","system":"Be brief.","messages":["#));
    }

    #[test]
    fn messages_rows_as_responses() {
        let chat = tool_row();
        let mut out = Vec::new();
        encode_row_body(
            ApiKind::Responses,
            &params(false),
            &chat,
            (None, Some("s")),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let items = v["input"].as_array().unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(
            (items[0]["type"].as_str(), items[0]["role"].as_str()),
            (Some("message"), Some("system"))
        );
        assert_eq!(items[2]["type"], "function_call");
        assert_eq!(items[3]["type"], "function_call_output");
        assert_eq!(v["tools"][0]["name"], "f");
        assert_eq!(v["max_output_tokens"], 9);
        assert_eq!(
            (v["store"].as_bool(), v["user"].as_str()),
            (Some(false), Some("s"))
        );
        assert!(v.get("messages").is_none() && v.get("max_tokens").is_none());
    }

    /// No output_length: Anthropic's required max_tokens gets the default; Responses none;
    /// chat: the chat encoder's bytes.
    #[test]
    fn messages_rows_without_output_length() {
        let mut chat = tool_row();
        chat.max_tokens = None;
        let mut out = Vec::new();
        encode_row_body(
            ApiKind::Messages,
            &params(false),
            &chat,
            (None, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["max_tokens"], MESSAGES_DEFAULT_MAX_TOKENS);
        assert!(v.get("min_tokens").is_none() && v.get("metadata").is_none());
        encode_row_body(
            ApiKind::Responses,
            &params(false),
            &chat,
            (None, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(v.get("max_output_tokens").is_none());
        let mut plain = Vec::new();
        encode_chat_row_body(&params(true), &chat, None, &mut plain);
        encode_row_body(ApiKind::Chat, &params(true), &chat, (None, None), &mut out);
        assert_eq!(out, plain);
    }

    #[test]
    fn tgi_body() {
        let mut out = Vec::new();
        encode_body(
            ApiKind::TgiGenerateStream,
            &params(true),
            PromptPayload::Text("hi"),
            (9, None),
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["inputs"], "hi");
        assert_eq!(v["parameters"]["max_new_tokens"], 9);
        assert_eq!(v["parameters"]["details"], true);
        assert_eq!(v["stream"], true);
    }

    #[test]
    fn each_api_gets_its_field_or_none() {
        let auto = ThinkingBudget::Auto;
        assert_eq!(
            thinking_field(ApiKind::Chat, auto, Some(700), 900),
            Some(("thinking_token_budget", Value::from(700)))
        );
        assert_eq!(
            thinking_field(ApiKind::Completions, auto, Some(5), 9),
            Some(("thinking_token_budget", Value::from(5)))
        );
        assert_eq!(
            thinking_field(ApiKind::Messages, auto, Some(1024), 2000),
            Some((
                "thinking",
                serde_json::json!({"type": "enabled", "budget_tokens": 1024})
            ))
        );
        // Below 1024, or not below max_tokens: the Messages API refuses it, none is sent.
        assert_eq!(
            thinking_field(ApiKind::Messages, auto, Some(1023), 2000),
            None
        );
        assert_eq!(
            thinking_field(ApiKind::Messages, auto, Some(2000), 2000),
            None
        );
        assert_eq!(
            thinking_field(ApiKind::Responses, auto, Some(700), 900),
            None
        );
        assert_eq!(
            thinking_field(ApiKind::Chat, ThinkingBudget::Off, Some(7), 9),
            None
        );
        assert_eq!(thinking_field(ApiKind::Chat, auto, None, 9), None);
    }

    fn json(out: &[u8]) -> Value {
        serde_json::from_slice(out).unwrap()
    }

    #[test]
    fn synthetic_bodies_carry_the_budget_and_the_whole_output_as_max_tokens() {
        let mut out = Vec::new();
        let p = thinking_params(ThinkingBudget::Auto);
        let text = PromptPayload::Text("hi");
        encode_body(ApiKind::Chat, &p, text, (900, Some(700)), &mut out);
        let v = json(&out);
        assert_eq!(
            (v["max_tokens"].as_u64(), v["min_tokens"].as_u64()),
            (Some(900), Some(900))
        );
        assert_eq!(v["thinking_token_budget"], 700);
        encode_body(ApiKind::Messages, &p, text, (3000, Some(1500)), &mut out);
        let v = json(&out);
        assert_eq!(v["max_tokens"], 3000);
        assert_eq!(
            v["thinking"],
            serde_json::json!({"type": "enabled", "budget_tokens": 1500})
        );
        encode_body(ApiKind::Messages, &p, text, (900, Some(700)), &mut out);
        assert!(json(&out).get("thinking").is_none());
        encode_body(ApiKind::Responses, &p, text, (900, Some(700)), &mut out);
        let v = json(&out);
        assert_eq!(v["max_output_tokens"], 900);
        assert!(v.get("thinking_token_budget").is_none() && v.get("thinking").is_none());
        let off = thinking_params(ThinkingBudget::Off);
        encode_body(ApiKind::Chat, &off, text, (900, Some(700)), &mut out);
        assert!(json(&out).get("thinking_token_budget").is_none());
    }

    #[test]
    fn messages_rows_carry_the_budget_after_ignore_eos() {
        let chat = crate::trace::ChatPayload {
            messages: serde_json::json!([{"role": "user", "content": "x"}]),
            tools: None,
            extra: None,
            max_tokens: Some(2048),
            text_input: None,
            prompt_token_ids: None,
        };
        let p = thinking_params(ThinkingBudget::Auto);
        let mut out = Vec::new();
        encode_row_body(ApiKind::Chat, &p, &chat, (Some(1100), None), &mut out);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.contains(r#""ignore_eos":true,"thinking_token_budget":1100,"stream":false"#),
            "{text}"
        );
        encode_row_body(ApiKind::Messages, &p, &chat, (Some(1100), None), &mut out);
        assert_eq!(json(&out)["thinking"]["budget_tokens"], 1100);
        assert_eq!(json(&out)["max_tokens"], 2048);
        encode_row_body(ApiKind::Messages, &p, &chat, (None, None), &mut out);
        assert!(json(&out).get("thinking").is_none());
    }

    use crate::backend::api::{Api, ApiFlavor};
    use crate::backend::Endpoint;

    #[test]
    fn endpoint_resolution() {
        let e = Endpoint::resolve("http://h:8000", ApiFlavor::Openai, true, None, None).unwrap();
        assert_eq!(e.url.as_str(), "http://h:8000/v1/chat/completions");
        assert_eq!(e.kind, ApiKind::Chat);
        let e = Endpoint::resolve("http://h:8000/v1", ApiFlavor::Openai, true, None, None).unwrap();
        assert_eq!(e.url.as_str(), "http://h:8000/v1/chat/completions");
        let e = Endpoint::resolve(
            "http://h:8000/v1/completions",
            ApiFlavor::Openai,
            false,
            None,
            None,
        )
        .unwrap();
        assert_eq!(e.kind, ApiKind::Completions);
        let e = Endpoint::resolve("http://h:1/", ApiFlavor::Tgi, true, None, None).unwrap();
        assert_eq!(e.url.path(), "/generate_stream");
        assert_eq!(e.kind, ApiKind::TgiGenerateStream);
        let e =
            Endpoint::resolve("http://h:1/generate", ApiFlavor::Tgi, false, None, None).unwrap();
        assert_eq!(e.kind, ApiKind::TgiGenerate);
        assert!(!e.stream);
        assert!(
            Endpoint::resolve("http://h:1/generate", ApiFlavor::Tgi, true, None, None).is_err()
        );
        assert!(Endpoint::resolve("http://h:1/foo", ApiFlavor::Openai, true, None, None).is_err());
        // Responses and Messages: by --api (a base URL gets the API's path) or by the path.
        for (flavor, path, kind) in [
            (ApiFlavor::Responses, "/v1/responses", ApiKind::Responses),
            (ApiFlavor::Messages, "/v1/messages", ApiKind::Messages),
        ] {
            for base in ["http://h:1", "http://h:1/", "http://h:1/v1"] {
                let e = Endpoint::resolve(base, flavor, true, None, None).unwrap();
                assert_eq!((e.url.path(), e.kind, e.stream), (path, kind, true));
            }
            let e = Endpoint::resolve(
                &format!("http://h:1{path}"),
                ApiFlavor::Openai,
                false,
                None,
                None,
            )
            .unwrap();
            assert_eq!((e.kind, e.stream), (kind, false));
            let e =
                Endpoint::resolve(&format!("http://h:1{path}"), flavor, false, None, None).unwrap();
            assert_eq!(e.kind, kind);
            let err = Endpoint::resolve("http://h:1/v1/chat/completions", flavor, true, None, None)
                .unwrap_err();
            assert!(err.contains(&format!("use .../v1/{}", &path[4..])), "{err}");
        }
        assert_eq!(
            Endpoint::resolve(
                "http://h:1/v1/messages",
                ApiFlavor::Openai,
                true,
                None,
                None
            )
            .unwrap()
            .api(),
            Api::AnthropicMessages
        );
        assert!(Endpoint::resolve("h:1", ApiFlavor::Openai, true, None, None).is_err());
        assert!(Endpoint::resolve("http://h:1", ApiFlavor::Aibrix, true, None, None).is_err());
    }
}
