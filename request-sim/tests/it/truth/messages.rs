//! The messages that used to mislead, one case each: the new text is asserted, and the wrong
//! one is asserted absent.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use crate::support::*;

/// One command line and what its output must (and must not) say.
struct Case {
    name: &'static str,
    args: Vec<String>,
    /// The exit code, when it matters.
    code: Option<i32>,
    says: Vec<&'static str>,
    not: Vec<&'static str>,
}

/// Run `bin` with the case's arguments; what is wrong with its stdout + stderr, if anything.
fn failure(bin: &str, c: &Case) -> Option<String> {
    let out = command(bin, &c.args, &[])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", c.name));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut wrong = Vec::new();
    if c.code.is_some_and(|code| out.status.code() != Some(code)) {
        wrong.push(format!("exit {:?}, not {:?}", out.status.code(), c.code));
    }
    wrong.extend(
        c.says
            .iter()
            .filter(|s| !text.contains(*s))
            .map(|s| format!("{s:?} missing")),
    );
    wrong.extend(
        c.not
            .iter()
            .chain(&["panicked"])
            .filter(|s| text.contains(*s))
            .map(|s| format!("{s:?} present")),
    );
    (!wrong.is_empty()).then(|| format!("{}: {}\n{text}", c.name, wrong.join("; ")))
}

/// [`failure`] as an assertion.
fn check(bin: &str, c: &Case) {
    if let Some(f) = failure(bin, c) {
        panic!("{f}");
    }
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A server that answers every request `401 Unauthorized`.
fn unauthorized_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = s.write_all(
                b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    url
}

/// A word-level tokenizer of 1,100 words (enough for prompt words), as a file.
fn word_level_tokenizer(dir: &Path) -> PathBuf {
    let letters: Vec<char> = ('a'..='z').collect();
    let mut vocab = serde_json::Map::new();
    vocab.insert("[UNK]".into(), 0.into());
    for i in 0..1100usize {
        let w = format!(
            "{}{}{}x",
            letters[i % 26],
            letters[(i / 26) % 26],
            letters[i / 676]
        );
        vocab.insert(w, (i + 1).into());
    }
    let json = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    });
    let path = dir.join("tokenizer.json");
    std::fs::write(&path, json.to_string()).unwrap();
    path
}

const MESSAGES: &str = r#"{"session_id": "a", "timestamp": 0, "messages": [{"role": "user", "content": "hello there"}], "output_length": 2}
{"session_id": "a", "timestamp": 50, "messages": [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}], "output_length": 2}
"#;

#[test]
fn misleading_messages_say_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    let mooncake = trace_fixture("mooncake.jsonl").display().to_string();
    let azure = trace_fixture("azure.csv").display().to_string();
    let messages = d("messages.jsonl");
    std::fs::write(&messages, MESSAGES).unwrap();
    let invalid = d("invalid.jsonl");
    std::fs::write(
        &invalid,
        "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 2}\n{\"timestamp\": 5, \"input_length\": \"x\", \"output_length\": 2}\n{\"timestamp\": 9, \"input_length\": 30, \"output_length\": 2}\n",
    )
    .unwrap();
    let tokenizer = word_level_tokenizer(dir.path()).display().to_string();
    let raw = RawServer::start(Script::whole(
        "500 Internal Server Error",
        "text/plain",
        b"no",
    ));
    let sim = default_sim();
    let unauthorized = unauthorized_server();
    let chat = raw.url("/v1/chat/completions");
    let replay = |extra: &[&str]| {
        // Each case writes over the last one's records.
        let mut a = owned(&[
            "replay",
            "--dataset-path",
            &mooncake,
            "-o",
            &d("r.jsonl"),
            "--overwrite",
        ]);
        a.extend(owned(extra));
        a
    };
    let wrong_tokenize = "the server has no POST /tokenize";
    let cases = vec![
        Case {
            name: "--no-server-tokenize",
            args: replay(&["--endpoint", &chat, "--model-name", "m", "--chat-overhead", "0", "--no-server-tokenize"]),
            code: Some(1),
            says: vec!["no --tokenizer, --no-server-tokenize"],
            not: vec![wrong_tokenize, "the server is not llm-sim"],
        },
        Case {
            name: "--api tgi",
            args: replay(&["--endpoint", &raw.url("/generate_stream"), "--api", "tgi", "--chat-overhead", "0"]),
            code: Some(1),
            says: vec!["is not an OpenAI-style endpoint, so no /tokenize is asked"],
            not: vec![wrong_tokenize],
        },
        Case {
            name: "unreachable server",
            args: replay(&["--endpoint", "http://127.0.0.1:9/v1/chat/completions", "--model-name", "m", "--chat-overhead", "0"]),
            code: Some(5),
            says: vec!["cannot connect to http://127.0.0.1:9/tokenize (the start-up probe for the server's tokenizer, asked without --tokenizer): connection refused"],
            not: vec![wrong_tokenize],
        },
        Case {
            name: "default llm-sim",
            args: replay(&["--endpoint", &sim.base_url(), "--scale-factor", "100", "--max-output-tokens", "2", "--no-server-metrics"]),
            code: Some(0),
            says: vec!["the built-in word list, which the server's /tokenize counts exactly (4/4 sample prompts)"],
            not: vec!["<unk>", "WARNING"],
        },
        Case {
            name: "401 on /v1/models",
            args: replay(&["--endpoint", &unauthorized]),
            code: Some(5),
            says: vec!["401 Unauthorized (the API key was refused: pass the right one with --api-key KEY"],
            not: vec!["pass --model-name"],
        },
        Case {
            name: "401 on the calibration request",
            args: replay(&["--endpoint", &unauthorized, "--model-name", "m", "--no-server-tokenize", "--allow-inexact-prompts"]),
            code: Some(5),
            says: vec!["calibration request to", "— the API key was refused: pass the right one with --api-key KEY"],
            not: vec!["--model-name", "--chat-overhead"],
        },
        Case {
            name: "401 when asked for /tokenize",
            args: replay(&["--endpoint", &unauthorized, "--model-name", "m", "--chat-overhead", "0"]),
            code: Some(5),
            says: vec!["cannot be asked for its /tokenize (it answered 401 Unauthorized: the API key was refused"],
            not: vec![wrong_tokenize],
        },
        Case {
            name: "early stop threshold",
            args: replay(&["--endpoint", &chat, "--model-name", "m", "--chat-overhead", "0", "--no-server-tokenize", "--allow-inexact-prompts", "--early-stop-error-threshold", "2", "--no-server-metrics", "--scale-factor", "100"]),
            code: None,
            says: vec!["(threshold: 2 failed requests)"],
            not: vec!["Count("],
        },
        Case {
            name: "analyze azure",
            args: owned(&["analyze", &azure]),
            code: Some(0),
            says: vec!["Block size (tokens per hash id):         none (no hash ids: every prompt is unique)"],
            not: vec!["Block size (tokens per hash id):         512"],
        },
        Case {
            name: "replay azure",
            args: owned(&["replay", "--dataset-path", &azure, "--dry-run", "--scale-factor", "1000", "-o", &d("az.jsonl")]),
            code: Some(0),
            says: vec!["(azure, no hash ids: every prompt is unique;"],
            not: vec!["Azure, block 512"],
        },
        Case {
            name: "analyze --instances",
            args: owned(&["analyze", &mooncake, "--instances", "4"]),
            code: Some(0),
            says: vec!["One shared LRU cache of 4 x that:", "a reference, not a bound", "Upper bound of any policy (infinite cache):"],
            not: vec!["(ceiling)"],
        },
        Case {
            name: "messages trace start-up check",
            args: owned(&["replay", "--dataset-path", &messages, "--endpoint", &sim.base_url(), "--scale-factor", "100", "--no-server-metrics", "-o", &d("m.jsonl")]),
            code: Some(0),
            says: vec!["prompt check: n/a"],
            not: vec!["Prompts verified at start-up", "sample prompts (first 1024 tokens) re-tokenize exactly"],
        },
        Case {
            name: "verify-prompts of a messages trace",
            args: owned(&["verify-prompts", &messages, "--tokenizer", &tokenizer]),
            code: Some(0),
            says: vec!["nothing to verify (n/a): all 2 rows of"],
            not: vec!["2 of 2 prompts"],
        },
        Case {
            name: "--skip-invalid",
            args: owned(&["replay", "--dataset-path", &invalid, "--skip-invalid", "--dry-run", "--scale-factor", "100", "-o", &d("s.jsonl")]),
            code: Some(0),
            says: vec![
                "WARNING: --skip-invalid: 1 invalid row(s) of",
                "skipped, not replayed; first: ",
                "invalid.jsonl:2: field `input_length`",
            ],
            not: vec![],
        },
        Case {
            name: "--skip-invalid, trace loaded whole",
            args: owned(&["replay", "--dataset-path", &invalid, "--skip-invalid", "--dry-run", "--chat-overhead", "0", "--save-prompts", &d("p.jsonl"), "-o", &d("w.jsonl")]),
            code: Some(0),
            says: vec!["WARNING: --skip-invalid: 1 invalid row(s) of", "invalid.jsonl:2: field `input_length`"],
            not: vec![],
        },
    ];
    // Every case is run; the failures are listed together.
    let failed: Vec<String> = cases.iter().filter_map(|c| failure(BIN, c)).collect();
    let names: Vec<&str> = failed
        .iter()
        .map(|f| f.split(':').next().unwrap_or(""))
        .collect();
    assert!(
        failed.is_empty(),
        "{} case(s) failed: {names:?}\n\n{}",
        failed.len(),
        failed.join("\n\n")
    );
}

#[test]
fn trace_replay_suggests_its_own_flags() {
    let dir = tempfile::tempdir().unwrap();
    let raw = RawServer::start(Script::whole(
        "500 Internal Server Error",
        "text/plain",
        b"no",
    ));
    let port = raw.addr.port().to_string();
    let trace = trace_fixture("mooncake.jsonl").display().to_string();
    let out = dir.path().display().to_string();
    check(
        TRACE_REPLAY_BIN,
        &Case {
            name: "trace_replay without a way to count tokens",
            args: owned(&[
                "--model",
                "m",
                "--backend",
                "openai-chat",
                "--trace-path",
                &trace,
                "--port",
                &port,
                "--result-dir",
                &out,
            ]),
            code: Some(1),
            says: vec!["pass --tokenizer (or --model) with the model's local directory"],
            not: vec!["--allow-inexact-prompts", "--model-name", "--chat-overhead"],
        },
    );
}

#[test]
fn trace_replay_result_dir_is_used_without_save_result() {
    let dir = tempfile::tempdir().unwrap();
    let sim = default_sim();
    let port = sim.base_url().rsplit(':').next().unwrap().to_string();
    let trace = trace_fixture("mooncake.jsonl").display().to_string();
    let out = dir.path().join("res");
    let o = run_program(
        TRACE_REPLAY_BIN,
        &[
            "--model",
            "llm-sim",
            "--backend",
            "openai-chat",
            "--trace-path",
            &trace,
            "--port",
            &port,
            "--result-dir",
            out.to_str().unwrap(),
            "--scale-factor",
            "100",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        read_records(&out.join("trace_replay_records.jsonl")).len(),
        4
    );
    assert!(out.join("summary.json").is_file());
    assert!(
        !out.join("metrics.xlsx").exists(),
        "metrics.xlsx only with --save-result"
    );
}

#[test]
fn replay_reads_the_trace_from_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let mut child = command(
        BIN,
        [
            "replay",
            "--dataset-path",
            "-",
            "--dry-run",
            "--scale-factor",
            "100",
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .stdin(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let text = std::fs::read(trace_fixture("mooncake.jsonl")).unwrap();
    child.stdin.take().unwrap().write_all(&text).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(read_records(&out).len(), 4);
}
