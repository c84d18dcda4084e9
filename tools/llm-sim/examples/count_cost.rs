//! CPU cost of counting a chat prompt, built-in vocabulary against a Hugging Face tokenizer:
//! `cargo run --release -p llm-sim --example count_cost -- PROMPTS.jsonl TOKENIZER_DIR`
//! (PROMPTS: a `messages` trace, as `request-sim replay --dry-run --save-prompts` writes it).
use std::time::Instant;

use llm_sim::tokenize::{ChatMessage, Tokenizer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let prompts = std::fs::read_to_string(&args[1]).expect("prompts");
    let dir = std::path::Path::new(&args[2]);
    let mut chats: Vec<Vec<ChatMessage>> = Vec::new();
    for line in prompts.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        let msgs = v["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|m| ChatMessage {
                role: m["role"].as_str().unwrap_or("user").into(),
                content: m["content"].as_str().unwrap_or("").into(),
                ..Default::default()
            })
            .collect();
        chats.push(msgs);
    }
    let builtin = Tokenizer::builtin();
    let t0 = Instant::now();
    let hf = Tokenizer::load(
        &dir.join("tokenizer.json"),
        Some(&dir.join("tokenizer_config.json")),
    )
    .expect("tokenizer");
    eprintln!("load {:?}", t0.elapsed());
    let rounds = 5;
    // Rounds alternate between the tokenizers; the best round of each is reported (the
    // machine may be busy with other work).
    let mut best = [f64::MAX; 2];
    let mut tokens = [0usize; 2];
    for _ in 0..rounds {
        for (k, tok) in [&builtin, &hf].into_iter().enumerate() {
            let t = Instant::now();
            tokens[k] = 0;
            for c in &chats {
                tokens[k] += tok.encode_chat(c).expect("count").len();
            }
            best[k] = best[k].min(t.elapsed().as_secs_f64() * 1e3 / chats.len() as f64);
        }
    }
    for (k, name) in ["builtin", "hf"].into_iter().enumerate() {
        println!(
            "{name:8} encode_chat {:.3} ms/request ({} tokens/request)",
            best[k],
            tokens[k] / chats.len()
        );
    }
    println!("hf chats from frames: {}", hf.chats_from_frames());
    // The HF cost without the template: the text a one-user-message ChatML render gives.
    let texts: Vec<String> = chats
        .iter()
        .map(|c| {
            let mut s = String::new();
            for m in c {
                s.push_str(&format!(
                    "<|im_start|>{}\n{}<|im_end|>\n",
                    m.role, m.content
                ));
            }
            s.push_str("<|im_start|>assistant\n");
            s
        })
        .collect();
    let t = Instant::now();
    for _ in 0..rounds {
        for s in &texts {
            std::hint::black_box(hf.encode_text_with(s, false).expect("count"));
        }
    }
    let per = t.elapsed().as_secs_f64() * 1e3 / (rounds * texts.len()) as f64;
    println!("hf       encode_text {per:.3} ms/request (no template)");
    // JSON parse of the request body (both tokenizers pay it).
    let bodies: Vec<String> = chats
        .iter()
        .map(|c| {
            serde_json::json!({"messages": c.iter().map(|m| serde_json::json!({"role": m.role, "content": m.content})).collect::<Vec<_>>(), "max_tokens": 64, "stream": true})
                .to_string()
        })
        .collect();
    #[derive(serde::Deserialize)]
    struct M {
        #[allow(dead_code)]
        role: String,
        #[allow(dead_code)]
        content: String,
    }
    #[derive(serde::Deserialize)]
    struct R {
        #[allow(dead_code)]
        messages: Vec<M>,
    }
    let t = Instant::now();
    for _ in 0..rounds {
        for b in &bodies {
            std::hint::black_box(serde_json::from_str::<R>(b).expect("parse"));
        }
    }
    let per = t.elapsed().as_secs_f64() * 1e3 / (rounds * bodies.len()) as f64;
    println!("json parse {per:.3} ms/request");
}
