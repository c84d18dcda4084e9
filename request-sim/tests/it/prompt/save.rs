//! `--save-prompts`: the prompts saved as a `messages` trace replay as byte-identical request
//! bodies (both runs captured by a loopback server), and `--dry-run` saves the same file
//! without sending anything.

use std::io::Write;
use std::path::Path;

use crate::support::{base_args, replay, strs, try_replay, RawServer, Script};

const ANSWER: &[u8] = br#"{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

/// Generic rows (block 16) with shared prefixes, a session and a partial last block.
fn write_trace(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    for i in 0..24u32 {
        let ids: Vec<u32> = (0..=(i % 4))
            .map(|k| if k == 0 { 0 } else { i * 10 + k })
            .collect();
        let session = if i % 3 == 0 {
            format!(r#", "session_id": "s{}""#, i % 2)
        } else {
            String::new()
        };
        writeln!(
            f,
            r#"{{"timestamp": {}, "input_length": {}, "output_length": {}, "hash_ids": {ids:?}{session}}}"#,
            i * 7,
            ids.len() as u32 * 16 - (i % 5),
            1 + i % 6
        )
        .unwrap();
    }
}

fn bodies(server: &RawServer) -> Vec<Vec<u8>> {
    let mut b: Vec<Vec<u8>> = server
        .generation_requests()
        .into_iter()
        .map(|r| r.body)
        .collect();
    b.sort();
    b
}

#[test]
fn saved_prompts_replay_byte_identically_and_dry_run_saves_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    write_trace(&trace);
    let saved = dir.path().join("saved.jsonl");
    let common = [
        "--dataset",
        "generic",
        "--block-size",
        "16",
        "--scale-factor",
        "20",
        "--no-stream",
    ];

    let first = RawServer::start(Script::whole("200 OK", "application/json", ANSWER));
    let url = first.url("/v1/chat/completions");
    let mut args = base_args(&url, &trace, dir.path());
    args.extend(common.iter().map(|s| s.to_string()));
    args.extend(["--save-prompts".into(), saved.display().to_string()]);
    replay(&strs(&args));
    let sent = bodies(&first);
    assert_eq!(sent.len(), 24);

    let text = std::fs::read_to_string(&saved).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 24);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["timestamp"], i * 7, "{r}");
        assert_eq!(r["output_length"], 1 + i % 6);
        assert_eq!(r["messages"][0]["role"], "user");
        let words = r["messages"][0]["content"]
            .as_str()
            .unwrap()
            .split(' ')
            .count()
            - 1;
        let ids = 1 + i % 4;
        assert_eq!(words, ids * 16 - i % 5, "row {i}: content tokens");
        let session = (i % 3 == 0).then(|| format!("s{}", i % 2));
        assert_eq!(r["session_id"].as_str(), session.as_deref(), "row {i}");
    }

    // Replaying the saved file sends the same bytes.
    let second = RawServer::start(Script::whole("200 OK", "application/json", ANSWER));
    let mut args = base_args(&second.url("/v1/chat/completions"), &saved, dir.path());
    args.extend([
        "--scale-factor".to_string(),
        "20".into(),
        "--no-stream".into(),
    ]);
    replay(&strs(&args));
    let resent = bodies(&second);
    assert_eq!(resent.len(), 24);
    for (a, b) in sent.iter().zip(&resent) {
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "bodies differ"
        );
    }

    // --dry-run: the same file, nothing sent.
    let dry = RawServer::start(Script::whole("200 OK", "application/json", ANSWER));
    let saved2 = dir.path().join("saved2.jsonl");
    let mut args = base_args(&dry.url("/v1/chat/completions"), &trace, dir.path());
    args.extend(common.iter().map(|s| s.to_string()));
    args.extend([
        "--dry-run".into(),
        "--save-prompts".into(),
        saved2.display().to_string(),
    ]);
    replay(&strs(&args));
    assert!(dry.requests().is_empty(), "a dry run sends nothing");
    assert_eq!(std::fs::read_to_string(&saved2).unwrap(), text);
}

const COMPLETION: &[u8] = br#"{"id":"x","object":"text_completion","choices":[{"index":0,"text":"ok","finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

#[test]
fn completions_prompts_are_saved_as_text_input_rows_and_replay_identically() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    write_trace(&trace);
    let saved = dir.path().join("saved.jsonl");
    let flags = ["--block-size", "16", "--scale-factor", "20", "--no-stream"];

    let first = RawServer::start(Script::whole("200 OK", "application/json", COMPLETION));
    let mut args = base_args(&first.url("/v1/completions"), &trace, dir.path());
    args.extend(flags.iter().map(|s| s.to_string()));
    args.extend(["--save-prompts".into(), saved.display().to_string()]);
    replay(&strs(&args));
    let sent = bodies(&first);
    assert_eq!(sent.len(), 24);
    let text = std::fs::read_to_string(&saved).unwrap();
    for (i, l) in text.lines().enumerate() {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(r.get("messages").is_none(), "{r}");
        let words = r["text_input"].as_str().unwrap().split(' ').count() - 1;
        assert_eq!(words, (1 + i % 4) * 16 - i % 5, "row {i}");
        assert_eq!(r["output_length"], 1 + i % 6);
    }

    let second = RawServer::start(Script::whole("200 OK", "application/json", COMPLETION));
    let mut args = base_args(&second.url("/v1/completions"), &saved, dir.path());
    args.extend([
        "--scale-factor".to_string(),
        "20".into(),
        "--no-stream".into(),
    ]);
    replay(&strs(&args));
    let resent = bodies(&second);
    assert_eq!(resent.len(), 24);
    for (a, b) in sent.iter().zip(&resent) {
        assert_eq!(String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    }
}

#[test]
fn token_id_prompts_are_saved_as_prompt_token_ids_rows_and_replay_identically() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    write_trace(&trace);
    let saved = dir.path().join("saved.jsonl");
    let flags = ["--block-size", "16", "--scale-factor", "20", "--no-stream"];

    let first = RawServer::start(Script::whole("200 OK", "application/json", COMPLETION));
    let mut args = base_args(&first.url("/v1/completions"), &trace, dir.path());
    args.extend(flags.iter().map(|s| s.to_string()));
    args.extend([
        "--token-ids".into(),
        "--save-prompts".into(),
        saved.display().to_string(),
    ]);
    replay(&strs(&args));
    let sent = bodies(&first);
    assert_eq!(sent.len(), 24);
    let text = std::fs::read_to_string(&saved).unwrap();
    for (i, l) in text.lines().enumerate() {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(
            r.get("messages").is_none() && r.get("text_input").is_none(),
            "{r}"
        );
        let ids = r["prompt_token_ids"].as_array().unwrap();
        assert_eq!(ids.len(), (1 + i % 4) * 16 - i % 5, "row {i}");
    }

    // Replayed without --token-ids: the rows themselves are token-id prompts.
    let second = RawServer::start(Script::whole("200 OK", "application/json", COMPLETION));
    let mut args = base_args(&second.url("/v1/completions"), &saved, dir.path());
    args.extend([
        "--scale-factor".to_string(),
        "20".into(),
        "--no-stream".into(),
    ]);
    replay(&strs(&args));
    let resent = bodies(&second);
    assert_eq!(resent.len(), 24);
    for (a, b) in sent.iter().zip(&resent) {
        assert_eq!(String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    }

    // A chat endpoint cannot take them.
    let third = RawServer::start(Script::whole("200 OK", "application/json", ANSWER));
    let args = base_args(&third.url("/v1/chat/completions"), &saved, dir.path());
    let e = try_replay(&strs(&args)).unwrap_err().to_string();
    assert!(e.contains("completions endpoint"), "{e}");
}
