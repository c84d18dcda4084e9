//! Exact prompts with only an endpoint against llama.cpp's server shapes (issue #26, defect 1):
//! a small fake `llama-server` on 127.0.0.1 around the real Qwen3 tokenizer. Its `/tokenize`
//! takes `content` (a vLLM-shaped body gets no tokens), its `/detokenize` answers 500 for an id
//! beyond the vocabulary (llama.cpp's `vector::_M_range_check` exception), and its
//! `GET /v1/models` may carry `meta.n_vocab`. Also: the built-in word list against a server
//! that cannot vouch for it is refused unless `--allow-inexact-prompts`.

use std::path::Path;
use std::sync::Arc;

use request_sim::backend::tokenize::ServerTokenizer;
use request_sim::backend::{self, ApiFlavor, Endpoint};
use request_sim::prompt::Vocab;
use request_sim::record::Status;
use serde_json::{json, Value};
use tokenizers::Tokenizer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::qwen3::qwen3;
use super::server::write_trace;

/// What the fake server does.
#[derive(Clone, Copy)]
struct Mode {
    /// `GET /v1/models` carries `meta.n_vocab` (newer llama.cpp); else no `meta`.
    n_vocab_meta: bool,
    /// Serve `/tokenize` and `/detokenize` at all (else 404, like a server without them).
    tokenize: bool,
}

/// A fake llama.cpp server on 127.0.0.1 (one request per connection), stopped on drop.
struct FakeLlamaCpp {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeLlamaCpp {
    fn start(tok: Tokenizer, mode: Mode) -> FakeLlamaCpp {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let tok = Arc::new(tok);
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
                loop {
                    let (conn, _) = tokio::select! {
                        _ = &mut stopped => break,
                        c = listener.accept() => c.unwrap(),
                    };
                    let tok = tok.clone();
                    tokio::spawn(async move { serve(conn, &tok, mode).await });
                }
            });
        });
        FakeLlamaCpp {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FakeLlamaCpp {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one HTTP/1.1 request, answers it and closes the connection.
async fn serve(mut conn: tokio::net::TcpStream, tok: &Tokenizer, mode: Mode) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())
                .flatten()
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let mut first = head.split_whitespace();
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let body: Value = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(Value::Null);
    let (status, answer) = route(method, path, &body, tok, mode);
    let text = answer.to_string();
    let reason = if status == 200 { "OK" } else { "Error" };
    let resp = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = conn.write_all(resp.as_bytes()).await;
    let _ = conn.shutdown().await;
}

/// llama.cpp's answers (tools/server/server-context.cpp), with the Qwen3 tokenizer.
fn route(method: &str, path: &str, body: &Value, tok: &Tokenizer, mode: Mode) -> (u16, Value) {
    let n_vocab = tok.get_vocab_size(true) as u64;
    let encode = |text: &str| -> Vec<u32> { tok.encode(text, true).unwrap().get_ids().to_vec() };
    match (method, path) {
        ("GET", "/v1/models") => {
            let mut model =
                json!({"id": "qwen3-tiny.gguf", "object": "model", "owned_by": "llamacpp"});
            if mode.n_vocab_meta {
                model["meta"] = json!({"vocab_type": 2, "n_vocab": n_vocab, "n_ctx": 4096});
            }
            (
                200,
                json!({"models": [{"name": "qwen3-tiny.gguf"}], "object": "list", "data": [model]}),
            )
        }
        ("POST", "/tokenize") if mode.tokenize => {
            // Only `content` is read: a vLLM-shaped body gets no tokens.
            let tokens = body["content"].as_str().map(encode).unwrap_or_default();
            (200, json!({ "tokens": tokens }))
        }
        ("POST", "/detokenize") if mode.tokenize => {
            let ids: Vec<u64> = body["tokens"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            if let Some(&bad) = ids.iter().find(|&&i| i >= n_vocab) {
                let msg = format!(
                    "vector::_M_range_check: __n (which is {bad}) >= this->size() (which is {n_vocab})"
                );
                return (
                    500,
                    json!({"error": {"code": 500, "message": msg, "type": "server_error"}}),
                );
            }
            let ids: Vec<u32> = ids.iter().map(|&i| i as u32).collect();
            (200, json!({ "content": tok.decode(&ids, false).unwrap() }))
        }
        ("POST", "/v1/completions") => {
            let prompt = encode(body["prompt"].as_str().unwrap_or_default()).len();
            completion(
                body,
                prompt,
                json!({"index": 0, "text": " ok", "finish_reason": "length"}),
            )
        }
        ("POST", "/v1/chat/completions") => {
            // Qwen3's template (ChatML), as llama.cpp renders it for a user message.
            let mut text = String::new();
            for m in body["messages"].as_array().into_iter().flatten() {
                let (role, content) = (
                    m["role"].as_str().unwrap_or(""),
                    m["content"].as_str().unwrap_or(""),
                );
                text += &format!("<|im_start|>{role}\n{content}<|im_end|>\n");
            }
            text += "<|im_start|>assistant\n";
            let message = json!({"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "length"});
            completion(body, encode(&text).len(), message)
        }
        _ => (
            404,
            json!({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}),
        ),
    }
}

fn completion(body: &Value, prompt: usize, choice: Value) -> (u16, Value) {
    let out = body["max_tokens"]
        .as_u64()
        .or(body["max_completion_tokens"].as_u64())
        .unwrap_or(1);
    (
        200,
        json!({"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": "qwen3-tiny.gguf",
               "choices": [choice],
               "usage": {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt as u64 + out}}),
    )
}

/// A fake llama.cpp server (with `/tokenize`) and the server tokenizer probed from it; the
/// server and the runtime stay alive as long as the caller keeps them.
fn probe_fake(
    q: &super::qwen3::Qwen3,
    n_vocab_meta: bool,
) -> (FakeLlamaCpp, tokio::runtime::Runtime, ServerTokenizer) {
    let fake = FakeLlamaCpp::start(
        q.tok.clone(),
        Mode {
            n_vocab_meta,
            tokenize: true,
        },
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = backend::build_client(&backend::ClientOptions::default()).unwrap();
    let ep = Endpoint::resolve(&fake.base_url(), ApiFlavor::Openai, true, None, None).unwrap();
    let st = ServerTokenizer::probe(rt.handle().clone(), &client, &ep, None)
        .expect("the fake answers /tokenize");
    (fake, rt, st)
}

#[test]
fn llama_cpp_server_lists_its_vocabulary_despite_500_beyond_it() {
    let Some(q) = qwen3() else { return };
    for n_vocab_meta in [true, false] {
        let (_fake, _rt, st) = probe_fake(q, n_vocab_meta);
        assert!(
            st.describe().contains("llama.cpp shape"),
            "{}",
            st.describe()
        );
        // The prompt words come from the server: the same words and ids as the local tokenizer.
        let candidates = st
            .candidates()
            .expect("the vocabulary walk ends at the 500");
        let server = Vocab::from_candidates(&st, candidates).unwrap();
        assert_eq!(
            server.len(),
            q.vocab.len(),
            "n_vocab in /v1/models: {n_vocab_meta}"
        );
        for i in (0..server.len()).step_by(97) {
            assert_eq!(
                (server.id(i), server.word(i)),
                (q.vocab.id(i), q.vocab.word(i))
            );
        }
    }
}

#[test]
fn llama_cpp_vocabulary_size_is_read_from_v1_models() {
    let Some(q) = qwen3() else { return };
    for n_vocab_meta in [true, false] {
        let (_fake, _rt, st) = probe_fake(q, n_vocab_meta);
        let want = n_vocab_meta.then(|| q.tok.get_vocab_size(true) as u32);
        assert_eq!(st.vocab_size(), want);
    }
}

fn replay_args(endpoint: &str, trace: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> = [
        "request-sim",
        "replay",
        "--endpoint",
        endpoint,
        "--dataset-path",
        trace.to_str().unwrap(),
        "-q",
        "--no-stream",
        "--no-server-metrics",
        "--scale-factor",
        "4",
        "-o",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv
}

fn run(argv: &[String]) -> request_sim::Result<request_sim::run::RunOutcome> {
    // argv[0] is the program and argv[1] the subcommand, as a shell would give them.
    assert_eq!(argv[1], "replay");
    let args: Vec<&str> = argv[2..].iter().map(String::as_str).collect();
    crate::support::try_replay(&args)
}

#[test]
fn endpoint_only_replay_against_llama_cpp_is_exact() {
    let Some(q) = qwen3() else { return };
    let fake = FakeLlamaCpp::start(
        q.tok.clone(),
        Mode {
            n_vocab_meta: false,
            tokenize: true,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 20);
    for path in ["/v1/chat/completions", "/v1/completions"] {
        let out = dir.path().join("out.jsonl");
        let endpoint = format!("{}{path}", fake.base_url());
        let outcome = run(&replay_args(&endpoint, &trace, &out, &[])).unwrap();
        let run = &outcome.summary.run;
        let source = run.prompts.prompt_token_source.as_deref().unwrap();
        assert!(
            source.starts_with("server /tokenize (llama.cpp shape)"),
            "{source}"
        );
        let recs = crate::support::read_records(&out);
        assert_eq!(recs.len(), 20);
        let exact = recs
            .iter()
            .filter(|r| r.status == Status::Ok && r.prompt_tokens == Some(r.input_length))
            .count();
        assert_eq!(exact, 20, "{path}: {exact} of 20 exact");
        let want = if path.contains("chat") { 8 } else { 0 };
        assert_eq!(run.prompts.chat_overhead, Some(want), "{path}");
    }
}

#[test]
fn builtin_words_against_a_real_model_are_refused_unless_allowed() {
    let Some(q) = qwen3() else { return };
    // No /tokenize, not llm-sim: the built-in words would be ~2 tokens each.
    let fake = FakeLlamaCpp::start(
        q.tok.clone(),
        Mode {
            n_vocab_meta: true,
            tokenize: false,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 6);
    let out = dir.path().join("out.jsonl");
    let endpoint = format!("{}/v1/completions", fake.base_url());
    let Err(e) = run(&replay_args(&endpoint, &trace, &out, &[])) else {
        panic!("built-in words against a real model must be refused");
    };
    let e = e.to_string();
    assert!(
        e.contains("--allow-inexact-prompts") && !e.contains('\n'),
        "{e}"
    );
    let ok = run(&replay_args(
        &endpoint,
        &trace,
        &out,
        &["--allow-inexact-prompts"],
    ))
    .unwrap();
    assert_eq!(
        ok.summary.run.prompts.prompt_token_source.as_deref(),
        Some("none (built-in word list)")
    );
    assert_eq!(crate::support::read_records(&out).len(), 6);
}

#[test]
fn builtin_words_against_llm_sim_need_no_flag() {
    let sim = llm_sim::spawn_in_thread(llm_sim::SimConfig::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path(), 6);
    let out = dir.path().join("out.jsonl");
    let endpoint = format!("{}/v1/completions", sim.base_url());
    let argv = replay_args(&endpoint, &trace, &out, &["--no-server-tokenize"]);
    run(&argv).unwrap();
    let recs = crate::support::read_records(&out);
    assert_eq!(recs.len(), 6);
    assert!(recs.iter().all(|r| r.prompt_tokens == Some(r.input_length)));
}

/// Issue #39: `convert --endpoint` against a server whose `/tokenize` takes no chat messages
/// (llama.cpp's) repeated the same error for every row; it stops once, before reading the log,
/// and writes nothing.
#[test]
fn convert_refuses_a_tokenize_without_chat_messages_once() {
    let Some(q) = qwen3() else {
        return;
    };
    let fake = FakeLlamaCpp::start(
        q.tok.clone(),
        Mode {
            n_vocab_meta: false,
            tokenize: true,
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let log = crate::support::data_path("logs").join("bad_rows.jsonl");
    let out = dir.path().join("t.jsonl");
    let (code, stdout, stderr) = crate::support::run_cli(
        [
            "convert",
            log.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--endpoint",
            &fake.base_url(),
            "--no-analyze",
        ],
        &[],
    );
    assert_ne!(code, 0, "{stdout}{stderr}");
    let said = "/tokenize takes no chat messages (llama.cpp's server), and convert counts each request's messages through the chat template: give --tokenizer instead";
    let all = format!("{stdout}{stderr}");
    assert_eq!(all.matches("takes no chat messages").count(), 1, "{all}");
    assert!(all.contains(said), "{all}");
    assert!(!out.exists());
}
