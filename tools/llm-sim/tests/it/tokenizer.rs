//! `--tokenizer` / `--tokenizer-config`: a small word-level HF tokenizer.json written by the
//! test, with the built-in ChatML template and with a custom minijinja chat template.

use std::path::PathBuf;

use crate::support::*;
use llm_sim::SimConfig;
use serde_json::{json, Value};

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("llm-sim-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn special(id: u32, content: &str) -> Value {
    json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false,
           "normalized": false, "special": true})
}

/// A word-level tokenizer: whitespace/punctuation pre-tokenizer, ChatML specials.
fn write_tokenizer(dir: &std::path::Path) -> PathBuf {
    let vocab = json!({"<|im_start|>": 0, "<|im_end|>": 1, "[UNK]": 2, "user": 3, "assistant": 4,
                       "hello": 5, "world": 6, "system": 7, "be": 8, "brief": 9});
    let tok = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0, "<|im_start|>"), special(1, "<|im_end|>")],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, tok.to_string()).unwrap();
    p
}

async fn prompt_tokens(base: &str, path: &str, body: Value) -> u64 {
    let r = post(base, path, &body).await;
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().await.unwrap();
    v["usage"]["prompt_tokens"].as_u64().unwrap()
}

#[tokio::test]
async fn hf_tokenizer_with_builtin_chatml() {
    let dir = temp_dir("chatml");
    let cfg = SimConfig {
        tokenizer: Some(write_tokenizer(&dir)),
        ..SimConfig::default()
    };
    let s = start_server(cfg).await;
    let b = s.base_url();
    // "<|im_start|>user\nhello world<|im_end|>\n<|im_start|>assistant\n"
    //  -> <|im_start|> user hello world <|im_end|> <|im_start|> assistant = 7
    assert_eq!(
        prompt_tokens(
            &b,
            "/v1/chat/completions",
            chat_body("hello world", 1, false)
        )
        .await,
        7
    );
    assert_eq!(
        prompt_tokens(
            &b,
            "/v1/completions",
            completion_body(json!("hello world hello"), 1, false)
        )
        .await,
        3
    );
    // Token ids are checked against the vocabulary.
    let r = post(
        &b,
        "/v1/completions",
        &completion_body(json!([1, 2, 99]), 1, false),
    )
    .await;
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert!(v["message"].as_str().unwrap().contains("99"));
    assert_eq!(
        prompt_tokens(
            &b,
            "/v1/completions",
            completion_body(json!([1, 2, 9]), 1, false)
        )
        .await,
        3
    );
    s.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn hf_tokenizer_with_custom_chat_template() {
    let dir = temp_dir("template");
    let template = "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ m.content.strip() }}\n\
{% else %}<|im_start|>{{ m.role }} {{ m.content.lstrip() }}<|im_end|>{% endif %}{% endfor %}\
{% if add_generation_prompt %}<|im_start|>assistant{% endif %}";
    let cfg_path = dir.join("tokenizer_config.json");
    std::fs::write(
        &cfg_path,
        json!({"chat_template": template, "bos_token": "<|im_start|>",
               "eos_token": {"content": "<|im_end|>"}})
        .to_string(),
    )
    .unwrap();
    let cfg = SimConfig {
        tokenizer: Some(write_tokenizer(&dir)),
        tokenizer_config: Some(cfg_path),
        ..SimConfig::default()
    };
    let s = start_server(cfg).await;
    let b = s.base_url();
    let body = json!({"messages": [
        {"role": "system", "content": "  be brief  "},
        {"role": "user", "content": "   hello world"}
    ], "max_tokens": 2});
    // <|im_start|> be brief <|im_start|> user hello world <|im_end|> <|im_start|> assistant = 10
    assert_eq!(prompt_tokens(&b, "/v1/chat/completions", body).await, 10);
    s.shutdown().await;

    // A template that fails to parse is reported at start-up.
    std::fs::write(
        dir.join("bad.json"),
        json!({"chat_template": "{% for %}"}).to_string(),
    )
    .unwrap();
    let bad = SimConfig {
        tokenizer: Some(dir.join("tokenizer.json")),
        tokenizer_config: Some(dir.join("bad.json")),
        ..SimConfig::default()
    };
    assert!(llm_sim::start(bad).await.is_err());
    let missing = SimConfig {
        tokenizer: Some(dir.join("nope.json")),
        ..SimConfig::default()
    };
    assert!(llm_sim::start(missing).await.is_err());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn template_errors_become_400() {
    let dir = temp_dir("raise");
    let template = "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be from the user') }}{% endif %}{% for m in messages %}{{ m.content }}{% endfor %}";
    let cfg_path = dir.join("tokenizer_config.json");
    std::fs::write(&cfg_path, json!({"chat_template": template}).to_string()).unwrap();
    let cfg = SimConfig {
        tokenizer: Some(write_tokenizer(&dir)),
        tokenizer_config: Some(cfg_path),
        ..SimConfig::default()
    };
    let s = start_server(cfg).await;
    let body = json!({"messages": [{"role": "assistant", "content": "hello"}], "max_tokens": 1});
    let r = post(&s.base_url(), "/v1/chat/completions", &body).await;
    assert_eq!(r.status().as_u16(), 400);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["message"].as_str().unwrap().contains("first message"),
        "{v}"
    );
    s.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
