//! `request-sim convert`: every log shape, every time form, compression, sessions inferred and
//! named, bad rows, and the checks of issue #28: lengths equal to what llm-sim counts when the
//! trace is replayed, the ideal hit ratio equal to the one of the real prompts' token blocks,
//! and no word of the log in the trace.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::*;
use request_sim::prompt::{chat_messages, load_tokenizer, ChatTemplate};
use request_sim::record::Status;

fn log_fixture(name: &str) -> PathBuf {
    data_path("logs").join(name)
}

/// `request-sim convert LOG -o OUT --tokenizer qwen3 --json ARGS`: exit code, the printed
/// JSON (`null` on failure), stderr.
fn convert(q: &Path, log: &Path, out: &Path, args: &[&str]) -> (i32, Value, String) {
    let mut argv: Vec<String> = vec![
        "convert".into(),
        log.to_str().unwrap().into(),
        "-o".into(),
        out.to_str().unwrap().into(),
        "--tokenizer".into(),
        q.to_str().unwrap().into(),
        "--json".into(),
    ];
    argv.extend(args.iter().map(|s| s.to_string()));
    let (code, stdout, stderr) = run_cli(&argv, &[]);
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (code, v, stderr)
}

/// Converts and expects success: the report and the trace's rows.
fn convert_ok(q: &Path, log: &Path, out: &Path, args: &[&str]) -> (Value, Vec<Value>) {
    let (code, v, stderr) = convert(q, log, out, args);
    assert_eq!(code, 0, "convert {}: {stderr}", log.display());
    (v, read_json_lines(out))
}

fn column(rows: &[Value], key: &str) -> Vec<Value> {
    rows.iter().map(|r| r[key].clone()).collect()
}

fn nums(rows: &[Value], key: &str) -> Vec<u64> {
    rows.iter().map(|r| r[key].as_u64().unwrap()).collect()
}

fn timestamps(rows: &[Value]) -> Vec<f64> {
    rows.iter()
        .map(|r| r["timestamp"].as_f64().unwrap())
        .collect()
}

/// The prompt tokens of every request of an OpenAI-shaped log (`messages` at `ptr`), counted
/// here from the log's text with the Qwen3 chat template and tokenizer.
fn real_prompts(q: &Path, log: &Path, ptr: &str) -> Vec<Vec<u32>> {
    let tok = load_tokenizer(q).unwrap();
    let tpl = ChatTemplate::from_config_file(&q.join("tokenizer_config.json")).unwrap();
    read_json_lines(log)
        .iter()
        .map(|row| {
            let msgs = row.pointer(ptr).unwrap();
            let tools = row
                .pointer(&ptr.replace("messages", "tools"))
                .filter(|t| !t.is_null());
            let chat = chat_messages(msgs).unwrap();
            let text = tpl.render_chat(&chat, tools).unwrap();
            tok.encode_fast(text.as_str(), false)
                .unwrap()
                .get_ids()
                .to_vec()
        })
        .collect()
}

/// The trace-ideal hit ratio computed straight from token sequences (no hashing): a block hits
/// when an earlier request had exactly the same tokens up to the end of that block, and
/// matching stops at the first miss (`docs/traces.md`, "Prefix-cache hit ratio").
fn ideal_from_tokens(prompts: &[Vec<u32>], block: usize) -> f64 {
    let mut seen: HashSet<Vec<u32>> = HashSet::new();
    let (mut hit, mut total) = (0usize, 0usize);
    for p in prompts {
        total += p.len();
        let mut matching = true;
        let mut end = 0;
        while end < p.len() {
            let next = (end + block).min(p.len());
            let key = p[..next].to_vec();
            if matching && seen.contains(&key) {
                hit += next - end;
            } else {
                matching = false;
            }
            seen.insert(key);
            end = next;
        }
    }
    hit as f64 / total as f64
}

#[test]
fn openai_log_converts_with_exact_lengths_and_inferred_sessions() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = log_fixture("openai.jsonl");
    let out = dir.path().join("trace.jsonl");
    let (rep, rows) = convert_ok(&q, &log, &out, &["--block-size", "16", "--salt", "s"]);
    let c = &rep["convert"];
    assert_eq!(c["log_format"], "openai");
    assert_eq!(c["time_format"], "ISO 8601 date-time (with offset)");
    assert_eq!(
        (c["converted"].as_u64(), c["skipped"].as_u64()),
        (Some(6), Some(0))
    );
    // Two conversations of two and three turns, and one single request.
    assert_eq!(
        (c["sessions"].as_u64(), c["multi_turn_sessions"].as_u64()),
        (Some(3), Some(2))
    );
    let s = column(&rows, "session_id");
    assert_eq!((&s[0], &s[2], &s[4]), (&s[2], &s[4], &s[0]));
    assert_eq!(s[1], s[3]);
    assert_ne!(s[0], s[1]);
    assert_ne!(s[5], s[0]);
    assert_ne!(s[5], s[1]);
    assert_eq!(
        timestamps(&rows),
        vec![0.0, 1500.0, 9250.0, 12000.0, 20000.0, 21125.0]
    );
    // Lengths: the Qwen3 chat template and tokenizer over the messages (and tools).
    let prompts = real_prompts(&q, &log, "/request/messages");
    for (r, p) in rows.iter().zip(&prompts) {
        assert_eq!(r["input_length"].as_u64(), Some(p.len() as u64), "{r}");
        assert_eq!(
            r["hash_ids"].as_array().unwrap().len(),
            p.len().div_ceil(16)
        );
    }
    let tok = load_tokenizer(&q).unwrap();
    let text_len = tok
        .encode_fast("Keep humidity above sixty percent.", false)
        .unwrap()
        .len();
    assert_eq!(
        nums(&rows, "output_length"),
        vec![11, 12, 10, text_len as u64, 9, 5]
    );
    assert_eq!(c["output_from_text"].as_u64(), Some(1));
    // The ideal hit ratio of the trace is the one of the real prompts' token blocks.
    let direct = ideal_from_tokens(&prompts, 16);
    let analyzed = rep["analysis"]["prefix_cache"]["hit_ratio"]
        .as_f64()
        .unwrap();
    assert!(direct > 0.2, "the fixture shares prefixes: {direct}");
    assert!((analyzed - direct).abs() < 1e-12, "{analyzed} vs {direct}");
    // The same salt gives the same trace; another salt the same ids (numbered by appearance).
    let again = dir.path().join("again.jsonl");
    convert_ok(&q, &log, &again, &["--block-size", "16", "--salt", "other"]);
    assert_eq!(read_json_lines(&again), rows);
}

/// Every alphabetic word of the log's text (message contents, tool names and descriptions).
#[test]
fn forget_after_ends_idle_sessions_and_changes_nothing_within_it() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = log_fixture("openai.jsonl");
    let exact = dir.path().join("exact.jsonl");
    let (_, rows) = convert_ok(&q, &log, &exact, &["--block-size", "16", "--salt", "s"]);
    // Every gap of the log is below 100 s: the same trace.
    let wide = dir.path().join("wide.jsonl");
    let (rep, wide_rows) = convert_ok(
        &q,
        &log,
        &wide,
        &["--block-size", "16", "--salt", "s", "--forget-after", "100"],
    );
    assert_eq!(wide_rows, rows);
    assert_eq!(rep["convert"]["sessions"].as_u64(), Some(3));
    // 5 s: each later turn of the two conversations comes 9-11 s after the one before, so
    // each starts a new session (3 more); lengths and times do not change.
    let narrow = dir.path().join("narrow.jsonl");
    let (rep, narrow_rows) = convert_ok(
        &q,
        &log,
        &narrow,
        &["--block-size", "16", "--salt", "s", "--forget-after", "5"],
    );
    let c = &rep["convert"];
    assert_eq!(c["sessions"].as_u64(), Some(6));
    assert_eq!(c["forget_after_s"].as_f64(), Some(5.0));
    let distinct: HashSet<&Value> = narrow_rows.iter().map(|r| &r["session_id"]).collect();
    assert_eq!(distinct.len(), 6);
    assert_eq!(
        column(&narrow_rows, "input_length"),
        column(&rows, "input_length")
    );
    assert_eq!(timestamps(&narrow_rows), timestamps(&rows));
    let (code, _, err) = convert(&q, &log, &narrow, &["--forget-after", "0"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--forget-after must be a number of seconds > 0"),
        "{err}"
    );
}

fn words_of(log: &Path) -> HashSet<String> {
    fn walk(v: &Value, out: &mut HashSet<String>) {
        match v {
            Value::String(s) => {
                for w in s.split(|c: char| !c.is_alphabetic()) {
                    if w.chars().count() >= 2 {
                        out.insert(w.to_lowercase());
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = HashSet::new();
    for row in read_json_lines(log) {
        walk(&row, &mut out);
    }
    out
}

#[test]
fn no_word_of_the_log_appears_in_the_trace() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // The trace's own field names are the only words it may hold.
    let own: HashSet<&str> = [
        "timestamp",
        "input",
        "length",
        "output",
        "hash",
        "ids",
        "session",
        "id",
    ]
    .into();
    for name in [
        "openai.jsonl",
        "litellm.jsonl",
        "otel.jsonl",
        "messages.jsonl",
    ] {
        let log = log_fixture(name);
        let out = dir.path().join(format!("{name}.trace"));
        convert_ok(&q, &log, &out, &["--block-size", "16"]);
        let text = std::fs::read_to_string(&out).unwrap().to_lowercase();
        let words = words_of(&log);
        assert!(words.len() > 30, "{name}: {} words", words.len());
        for w in &words {
            if own.contains(w.as_str()) {
                continue;
            }
            assert!(
                !text.contains(w.as_str()),
                "{name}: the trace holds the log's word {w:?}"
            );
        }
        // And nothing but the five fields, numbers and digit strings.
        for row in read_json_lines(&out) {
            let keys: Vec<&str> = row
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(
                keys,
                [
                    "hash_ids",
                    "input_length",
                    "output_length",
                    "session_id",
                    "timestamp"
                ]
            );
            assert!(row["session_id"]
                .as_str()
                .unwrap()
                .bytes()
                .all(|b| b.is_ascii_digit()));
        }
    }
}

#[test]
fn litellm_otel_and_messages_logs() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");

    let (rep, rows) = convert_ok(&q, &log_fixture("litellm.jsonl"), &out, &[]);
    let c = &rep["convert"];
    assert_eq!(c["log_format"], "litellm");
    assert_eq!(c["time_format"], "Unix epoch seconds");
    assert_eq!(timestamps(&rows), vec![0.0, 1750.0, 10250.0]);
    assert_eq!(nums(&rows, "output_length"), vec![11, 12, 10]);
    assert_eq!(
        (c["sessions"].as_u64(), c["multi_turn_sessions"].as_u64()),
        (Some(2), Some(1))
    );
    // LiteLLM's trace_id as the session.
    let (rep, _) = convert_ok(
        &q,
        &log_fixture("litellm.jsonl"),
        &out,
        &["--session-field", "trace_id"],
    );
    assert_eq!(rep["convert"]["sessions_named"].as_u64(), Some(2));

    // OTLP export: three spans in the first line (one is an HTTP span), one in the second.
    let (rep, rows) = convert_ok(&q, &log_fixture("otel.jsonl"), &out, &[]);
    let c = &rep["convert"];
    assert_eq!(c["log_format"], "otel");
    assert_eq!(c["time_format"], "Unix epoch nanoseconds");
    assert_eq!(
        (c["lines_read"].as_u64(), c["requests_read"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(c["spans_passed_over"].as_u64(), Some(1));
    assert_eq!(timestamps(&rows), vec![0.0, 1500.0, 9250.0]);
    assert_eq!(nums(&rows, "output_length"), vec![11, 12, 10]);
    // The same requests as the OpenAI log's first three: the same lengths.
    let openai = real_prompts(&q, &log_fixture("openai.jsonl"), "/request/messages");
    for (r, p) in rows.iter().zip(&openai) {
        assert_eq!(r["input_length"].as_u64(), Some(p.len() as u64));
    }
    let s = column(&rows, "session_id");
    assert_eq!(s[0], s[2]);
    let (rep, _) = convert_ok(
        &q,
        &log_fixture("otel.jsonl"),
        &out,
        &["--session-field", "/attributes/gen_ai.conversation.id"],
    );
    assert_eq!(rep["convert"]["sessions_named"].as_u64(), Some(2));

    // One flat span per line, ISO times without an offset (UTC).
    let (rep, rows) = convert_ok(&q, &log_fixture("otel_flat.jsonl"), &out, &[]);
    assert_eq!(
        rep["convert"]["time_format"],
        "ISO 8601 date-time (without offset, taken as UTC)"
    );
    assert_eq!(timestamps(&rows), vec![0.0, 9250.0]);
    assert_eq!(
        rows[0]["input_length"].as_u64(),
        Some(openai[0].len() as u64)
    );

    // The project's own messages trace: ms times, named sessions.
    let (rep, rows) = convert_ok(&q, &log_fixture("messages.jsonl"), &out, &[]);
    let c = &rep["convert"];
    assert_eq!(c["log_format"], "messages");
    assert_eq!(c["time_format"], "relative milliseconds");
    assert_eq!(c["sessions_named"].as_u64(), Some(2));
    assert_eq!(timestamps(&rows), vec![0.0, 1500.0, 9250.0]);
    assert_eq!(
        rows[2]["input_length"].as_u64(),
        Some(openai[2].len() as u64)
    );
}

/// Issue #39: a LiteLLM log whose rows carry no `completion_tokens` (nor `call_type` or
/// `model_parameters`) is still LiteLLM's: its times are read from `startTime` (it was taken
/// for an OpenAI log, and every row failed with "no time here"); a row's output is its
/// response's usage or text, and a row with neither is skipped saying so.
#[test]
fn a_litellm_log_without_completion_tokens_is_read_as_litellm() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("litellm_lean.jsonl");
    let user = |text: &str| serde_json::json!([{"role": "user", "content": text}]);
    let rows = [
        serde_json::json!({"startTime": 1715342400.25, "messages": user("orchids in winter"),
            "response": {"choices": [{"message": {"content": "they rebloom"}}]}}),
        serde_json::json!({"startTime": 1715342402.0, "messages": user("ferns in the sun"),
            "response": {"usage": {"completion_tokens": 12}}}),
        serde_json::json!({"startTime": 1715342403.0, "messages": user("cacti at night"),
            "status": "failure"}),
    ];
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&log, text).unwrap();
    let out = dir.path().join("t.jsonl");
    let (rep, rows) = convert_ok(&q, &log, &out, &[]);
    let c = &rep["convert"];
    assert_eq!(c["log_format"], "litellm", "{c}");
    assert_eq!(timestamps(&rows), vec![0.0, 1750.0]);
    assert_eq!(rows[1]["output_length"].as_u64(), Some(12));
    assert!(rows[0]["output_length"].as_u64().unwrap() > 0);
    assert_eq!(
        (c["converted"].as_u64(), c["skipped"].as_u64()),
        (Some(2), Some(1))
    );
    let why = c["skipped_examples"][0].as_str().unwrap();
    assert!(
        why.starts_with(&format!("{}:3: ", log.display()))
            && why.contains("no output token count (usage) here")
            && why.contains("no response text to count at /response/choices/0/message/content")
            && why.contains("--output-field"),
        "{why}"
    );
}

/// Issue #39: `convert` on a directory said only "cannot open: is a directory"; it says what
/// `convert` reads, and how to give it several logs.
#[test]
fn convert_on_a_directory_says_what_it_reads() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.jsonl");
    let (code, _, stderr) = convert(&q, &data_path("logs"), &out, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("is a directory: `convert` reads one request log, a file (plain, .gz, .zst or .bz2) or `-` for standard input; for a directory of logs, pipe them in time order into `convert -`"),
        "{stderr}"
    );
    assert!(!out.exists());
}

/// A one-request-per-line log whose times are `times` (JSON values), in the OpenAI shape.
fn log_with_times(path: &Path, times: &[Value]) {
    let mut s = String::new();
    for (i, t) in times.iter().enumerate() {
        let row = serde_json::json!({
            "time": t,
            "messages": [{"role": "user", "content": format!("question number {i}")}],
            "usage": {"completion_tokens": 3},
        });
        s.push_str(&row.to_string());
        s.push('\n');
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn every_time_format_is_detected_and_stated() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("times.jsonl");
    let out = dir.path().join("t.jsonl");
    // 2024-05-10 12:00:00 UTC, then 1.5 s and 4.25 s later, in each form.
    let s = 1_715_342_400i64;
    let cases: Vec<(&str, Vec<Value>)> = vec![
        (
            "Unix epoch seconds",
            vec![json!(s), json!(s as f64 + 1.5), json!(s as f64 + 4.25)],
        ),
        (
            "Unix epoch milliseconds",
            vec![
                json!(s * 1000),
                json!(s * 1000 + 1500),
                json!(s * 1000 + 4250),
            ],
        ),
        (
            "Unix epoch microseconds",
            vec![
                json!(s * 1_000_000),
                json!(s * 1_000_000 + 1_500_000),
                json!(s * 1_000_000 + 4_250_000),
            ],
        ),
        (
            "Unix epoch nanoseconds",
            vec![
                json!((s * 1_000_000_000).to_string()),
                json!((s * 1_000_000_000 + 1_500_000_000).to_string()),
                json!(s * 1_000_000_000 + 4_250_000_000),
            ],
        ),
        (
            "ISO 8601 date-time (with offset)",
            vec![
                json!("2024-05-10T12:00:00Z"),
                json!("2024-05-10T14:00:01.5+02:00"),
                json!("2024-05-10 12:00:04.250Z"),
            ],
        ),
        (
            "ISO 8601 date-time (without offset, taken as UTC)",
            vec![
                json!("2024-05-10T12:00:00"),
                json!("2024-05-10 12:00:01.500"),
                json!("2024-05-10T12:00:04.25"),
            ],
        ),
        (
            "relative seconds",
            vec![json!(0), json!(1.5), json!("4.25")],
        ),
    ];
    for (want, times) in cases {
        log_with_times(&log, &times);
        let (rep, rows) = convert_ok(&q, &log, &out, &["--time-field", "/time"]);
        assert_eq!(rep["convert"]["time_format"], want);
        assert_eq!(timestamps(&rows), vec![0.0, 1500.0, 4250.0], "{want}");
        assert!((rep["convert"]["span_s"].as_f64().unwrap() - 4.25).abs() < 1e-6);
    }
    // Forced: relative milliseconds.
    log_with_times(&log, &[json!(0), json!(1500), json!(4250)]);
    let (rep, rows) = convert_ok(
        &q,
        &log,
        &out,
        &["--time-field", "time", "--time-format", "relative-ms"],
    );
    assert_eq!(rep["convert"]["time_format"], "relative milliseconds");
    assert_eq!(timestamps(&rows), vec![0.0, 1500.0, 4250.0]);
    // A row in another form than the first: skipped, named.
    log_with_times(
        &log,
        &[
            json!("2024-05-10T12:00:00Z"),
            json!(5),
            json!("2024-05-10T12:00:02Z"),
        ],
    );
    let (rep, rows) = convert_ok(&q, &log, &out, &["--time-field", "/time"]);
    assert_eq!(rows.len(), 2);
    let ex = rep["convert"]["skipped_examples"][0].as_str().unwrap();
    assert!(
        ex.contains("times.jsonl:2: field `/time`: expected an ISO 8601 date-time"),
        "{ex}"
    );
}

fn compress(src: &Path, dst: &Path, how: &str) {
    let data = std::fs::read(src).unwrap();
    let f = std::fs::File::create(dst).unwrap();
    match how {
        "gz" => {
            let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::default());
            e.write_all(&data).unwrap();
            e.finish().unwrap();
        }
        "zst" => {
            let mut e = zstd::stream::write::Encoder::new(f, 3).unwrap();
            e.write_all(&data).unwrap();
            e.finish().unwrap();
        }
        "bz2" => {
            let mut e = bzip2::write::BzEncoder::new(f, bzip2::Compression::default());
            e.write_all(&data).unwrap();
            e.finish().unwrap();
        }
        _ => unreachable!(),
    }
}

#[test]
fn compressed_logs_convert_like_plain_ones() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = log_fixture("openai.jsonl");
    let plain = dir.path().join("plain.jsonl");
    convert_ok(&q, &log, &plain, &["--salt", "x"]);
    let want = std::fs::read(&plain).unwrap();
    for how in ["gz", "zst", "bz2"] {
        let c = dir.path().join(format!("log.jsonl.{how}"));
        compress(&log, &c, how);
        let out = dir.path().join(format!("{how}.jsonl"));
        convert_ok(&q, &c, &out, &["--salt", "x"]);
        assert_eq!(std::fs::read(&out).unwrap(), want, "{how}");
    }
    // A damaged compressed log is a read error, not a silent end.
    let c = dir.path().join("log.jsonl.zst");
    let mut bytes = std::fs::read(&c).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&c, bytes).unwrap();
    let (code, _, stderr) = convert(&q, &c, &dir.path().join("x.jsonl"), &[]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("(zstd: truncated or corrupt file?)"),
        "{stderr}"
    );
}

#[test]
fn bad_rows_are_skipped_with_their_line_and_reason() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = log_fixture("bad_rows.jsonl");
    let out = dir.path().join("t.jsonl");
    let (rep, rows) = convert_ok(&q, &log, &out, &[]);
    let c = &rep["convert"];
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (c["converted"].as_u64(), c["skipped"].as_u64()),
        (Some(2), Some(5))
    );
    // Issue #39: the counts add up. Lines that could not be read as a request (not JSON, no
    // time, ...) are skipped without being requests read: they are counted apart.
    let n = |k: &str| c[k].as_u64().unwrap();
    assert!(n("skipped_lines") > 0, "{c}");
    assert_eq!(
        n("requests_read") + n("skipped_lines"),
        n("converted") + n("skipped"),
        "{c}"
    );
    let skipped_line = format!(
        "skipped:             5 ({} of the requests read, {} lines not read as a request)",
        n("skipped") - n("skipped_lines"),
        n("skipped_lines")
    );
    let ex: Vec<&str> = c["skipped_examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    let name = log.display().to_string();
    let want = [
        (
            2,
            "field `/timestamp`: \"yesterday at noon\" is not a valid date-time",
        ),
        (3, "no messages here"),
        (4, "no output token count (usage) here"),
        (5, "content that is not text (an image?)"),
        (6, "not a JSON object"),
    ];
    for ((line, what), got) in want.iter().zip(&ex) {
        assert!(got.starts_with(&format!("{name}:{line}: ")), "{got}");
        assert!(got.contains(what), "{got} lacks {what}");
    }
    // The text report says the same.
    let (code, stdout, _) = run_cli(
        [
            "convert",
            log.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--tokenizer",
            q.to_str().unwrap(),
            "--no-analyze",
        ],
        &[],
    );
    assert_eq!(code, 0);
    assert!(
        stdout.contains(&skipped_line),
        "{skipped_line} in\n{stdout}"
    );
    assert!(
        stdout.contains(&format!("{name}:2: field `/timestamp`")),
        "{stdout}"
    );

    // An empty log, and a log with no good row: one clear error each, no trace left behind.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n\n").unwrap();
    let none = dir.path().join("none.jsonl");
    let (code, _, stderr) = convert(&q, &empty, &none, &[]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("empty.jsonl: the file is empty"),
        "{stderr}"
    );
    assert!(!none.exists());
    let allbad = dir.path().join("allbad.jsonl");
    std::fs::write(
        &allbad,
        "{\"timestamp\": 1, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n",
    )
    .unwrap();
    let (code, _, stderr) = convert(&q, &allbad, &none, &[]);
    assert_eq!(code, 1);
    assert!(
        stderr
            .contains("allbad.jsonl: no requests to replay: all 1 requests were skipped; first: ")
            && stderr.contains("allbad.jsonl:1: "),
        "{stderr}"
    );
    assert!(!none.exists());
}

#[test]
fn a_failing_chat_template_names_each_row() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("tokenizer_config.json");
    std::fs::write(
        &cfg,
        r#"{"chat_template": "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role here') }}{% endif %}{{ m.content }}{% endfor %}"}"#,
    )
    .unwrap();
    let out = dir.path().join("t.jsonl");
    let (code, v, stderr) = convert(
        &q,
        &log_fixture("openai.jsonl"),
        &out,
        &["--tokenizer-config", cfg.to_str().unwrap()],
    );
    // `--tokenizer` is the directory; --tokenizer-config overrides its template.
    assert_eq!(code, 0, "{stderr}");
    let c = &v["convert"];
    // Only the request without a system message renders.
    assert_eq!(
        (c["converted"].as_u64(), c["skipped"].as_u64()),
        (Some(1), Some(5))
    );
    let first = c["skipped_examples"][0].as_str().unwrap();
    assert!(
        first.contains("openai.jsonl:1: the chat template fails on this request")
            && first.contains("no system role here"),
        "{first}"
    );
}

#[test]
fn replayed_trace_prompt_tokens_equal_converted_input_length() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace.jsonl");
    let text = dir.path().join("text.jsonl");
    convert_ok(
        &q,
        &log_fixture("openai.jsonl"),
        &out,
        &["--block-size", "16", "--keep-text", text.to_str().unwrap()],
    );
    let trace = read_json_lines(&out);
    let tok = q.join("tokenizer.json");
    let sim = start_sim(llm_sim::SimConfig {
        tokenizer: Some(tok.clone()),
        tokenizer_config: Some(q.join("tokenizer_config.json")),
        ..Default::default()
    });
    // Counted by the server's /tokenize (with messages) instead: the same trace.
    let by_server = dir.path().join("server.jsonl");
    let log = log_fixture("openai.jsonl");
    let (code, _, stderr) = run_cli(
        [
            "convert",
            log.to_str().unwrap(),
            "-o",
            by_server.to_str().unwrap(),
            "--endpoint",
            &sim.base_url(),
            "--block-size",
            "16",
            "--no-analyze",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(read_json_lines(&by_server), trace);
    // The anonymized trace (prompts built from lengths and hash ids), and the kept text sent
    // as written: both must reach the server as exactly the converted input lengths.
    for (name, path) in [("trace", &out), ("text", &text)] {
        let records = dir.path().join(format!("{name}.records.jsonl"));
        let mut argv = vec![
            "--endpoint".to_string(),
            sim.base_url(),
            "--dataset-path".into(),
            path.to_str().unwrap().into(),
            "--tokenizer".into(),
            tok.to_str().unwrap().into(),
            "--tokenizer-config".into(),
            q.join("tokenizer_config.json").to_str().unwrap().into(),
            "--block-size".into(),
            "16".into(),
            "--scale-factor".into(),
            "20".into(),
            "-q".into(),
            "-o".into(),
            records.to_str().unwrap().into(),
        ];
        if name == "text" {
            argv.extend(["--dataset".into(), "messages".into()]);
        }
        let refs: Vec<&str> = argv.iter().map(String::as_str).collect();
        replay(&refs);
        let recs = read_records_by_index(&records);
        assert_eq!(recs.len(), trace.len(), "{name}");
        for (r, row) in recs.iter().zip(&trace) {
            assert_eq!(r.status, Status::Ok, "{name}: {r:?}");
            assert_eq!(
                r.prompt_tokens.map(u64::from),
                row["input_length"].as_u64(),
                "{name}: request {}",
                r.index
            );
        }
    }
}

/// The done-when check of issue #28 on a log of your own (`scripts/make_conversation_log.py`):
/// `REQUEST_SIM_CONVERT_LOG=log.jsonl cargo test -p request-sim --test it
/// convert::measure_a_log -- --ignored --nocapture`. Converts it with Qwen3 (`--block-size`
/// from `REQUEST_SIM_CONVERT_BLOCK`, default 16) and checks every `input_length` against the
/// prompt counted here and the trace's ideal hit ratio against the one of the real token blocks.
#[test]
#[ignore = "measurement on a log given by REQUEST_SIM_CONVERT_LOG"]
fn measure_a_log() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let log = PathBuf::from(
        std::env::var_os("REQUEST_SIM_CONVERT_LOG").expect("REQUEST_SIM_CONVERT_LOG"),
    );
    let block: usize = std::env::var("REQUEST_SIM_CONVERT_BLOCK")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(16);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trace.jsonl");
    let (rep, rows) = convert_ok(&q, &log, &out, &["--block-size", &block.to_string()]);
    let prompts = real_prompts(&q, &log, "/request/messages");
    assert_eq!(rows.len(), prompts.len());
    let equal = rows
        .iter()
        .zip(&prompts)
        .filter(|(r, p)| r["input_length"].as_u64() == Some(p.len() as u64))
        .count();
    let direct = ideal_from_tokens(&prompts, block);
    let analyzed = rep["analysis"]["prefix_cache"]["hit_ratio"]
        .as_f64()
        .unwrap();
    println!(
        "{}: {} requests, input_length equal to the prompt's tokens for {equal} ({:.2}%); ideal hit ratio: trace {analyzed:.6}, real token blocks {direct:.6}",
        log.display(),
        rows.len(),
        100.0 * equal as f64 / rows.len() as f64
    );
    assert_eq!(equal, rows.len());
    assert!((analyzed - direct).abs() < 1e-12);
}

/// Issue #39, defect 1: `convert LOG -o LOG` truncated the log before reading it (the log was
/// gone). An output that is the input (the same path, or another name of the same file) is
/// refused before anything is read, and the log is left whole; so is `--keep-text LOG`.
#[test]
fn an_output_that_is_the_log_is_refused_and_the_log_kept() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.jsonl");
    std::fs::copy(log_fixture("openai.jsonl"), &log).unwrap();
    let before = std::fs::read(&log).unwrap();
    let link = dir.path().join("also-log.jsonl");
    std::fs::hard_link(&log, &link).unwrap();
    let other = dir.path().join("t.jsonl");
    let spelled = dir.path().join(".").join("log.jsonl");
    for (out, extra) in [
        (&log, vec![]),
        (&spelled, vec![]),
        (&link, vec![]),
        (&other, vec!["--keep-text", log.to_str().unwrap()]),
    ] {
        let (code, _, stderr) = convert(&q, &log, out, &extra);
        assert_eq!(code, 1, "{out:?} {extra:?}: {stderr}");
        assert!(
            stderr.contains("names the log") && stderr.contains("itself"),
            "{stderr}"
        );
        assert_eq!(std::fs::read(&log).unwrap(), before, "the log was changed");
        assert!(!other.exists());
    }
}

/// Issue #39, defect 1: on an error an existing `-o` file was deleted (`convert empty.jsonl
/// -o existing.t`). A conversion that writes nothing leaves the files at its output paths as
/// they were, and says so.
#[test]
fn a_failed_convert_leaves_existing_outputs_as_they_were() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "\n").unwrap();
    let allbad = dir.path().join("allbad.jsonl");
    std::fs::write(&allbad, "{\"timestamp\": 1}\nnot json\n").unwrap();
    let existing = dir.path().join("existing.t");
    let text = dir.path().join("existing-text.t");
    for log in [&empty, &allbad] {
        std::fs::write(&existing, "precious trace\n").unwrap();
        std::fs::write(&text, "precious text\n").unwrap();
        let (code, _, stderr) =
            convert(&q, log, &existing, &["--keep-text", text.to_str().unwrap()]);
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains(&format!("{} is left as it was", existing.display())),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(&existing).unwrap(),
            "precious trace\n"
        );
        assert_eq!(std::fs::read_to_string(&text).unwrap(), "precious text\n");
        // No temporary file is left behind.
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 4, "{names:?}");
    }
}

/// A `messages` log of `n` requests with words of their own (so it compresses little).
fn varied_log(path: &Path, n: usize) {
    let mut rng = Lcg::new(39);
    let words = [
        "orchid", "fern", "moss", "lichen", "cactus", "palm", "ivy", "sedge",
    ];
    let mut text = String::new();
    for i in 0..n {
        let content: Vec<String> = (0..40)
            .map(|_| format!("{}{}", words[rng.below(8) as usize], rng.below(100_000)))
            .collect();
        let row = serde_json::json!({
            "timestamp": i * 100,
            "messages": [{"role": "user", "content": content.join(" ")}],
            "output_length": 5,
        });
        text.push_str(&row.to_string());
        text.push('\n');
    }
    std::fs::write(path, text).unwrap();
}

/// Issue #39, defect 1: a truncated `.gz` log left both outputs empty, and the good lines
/// before the damage were not written. They are now converted and written (more than a batch
/// of them, and the part of a batch before the damage), the report says where it stopped, and
/// the exit status is still 1.
#[test]
fn a_damaged_log_keeps_the_requests_before_the_damage() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("log.jsonl");
    varied_log(&plain, 800);
    let whole = dir.path().join("whole.jsonl");
    let (_, all) = convert_ok(&q, &plain, &whole, &["--salt", "s", "--no-analyze"]);
    assert_eq!(all.len(), 800);
    let gz = dir.path().join("log.jsonl.gz");
    compress(&plain, &gz, "gz");
    let mut bytes = std::fs::read(&gz).unwrap();
    bytes.truncate(bytes.len() * 6 / 10);
    std::fs::write(&gz, bytes).unwrap();
    let out = dir.path().join("t.jsonl");
    let text = dir.path().join("text.jsonl");
    std::fs::write(&out, "an older trace\n").unwrap();
    let (code, rep, stderr) = convert(
        &q,
        &gz,
        &out,
        &["--salt", "s", "--keep-text", text.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("(gzip: truncated or corrupt file?)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("could not be read to its end") && stderr.contains("are written to"),
        "{stderr}"
    );
    let rows = read_json_lines(&out);
    assert!(rows.len() > 256 && rows.len() < 800, "{} rows", rows.len());
    assert_eq!(rows[..], all[..rows.len()], "the rows before the damage");
    assert_eq!(read_json_lines(&text).len(), rows.len());
    let c = &rep["convert"];
    assert_eq!(c["converted"].as_u64(), Some(rows.len() as u64));
    assert!(
        c["stopped_by"]
            .as_str()
            .is_some_and(|s| s.contains("log.jsonl.gz: read error after line")),
        "{c}"
    );
}

/// A LiteLLM-shaped log written as requests complete (sorted by `endTime`): 12 conversations
/// of 3 turns 12 s apart, each request 0.5-39.5 s long (as in the issue: a turn may start
/// before the one it extends is logged, e.g. a slow answer the user did not wait for).
/// Returns the log's lines and each request's (start s, conversation), in start order.
fn completion_order_log() -> (String, Vec<(f64, usize)>) {
    let mut rows = Vec::new();
    for k in 0..12usize {
        let mut start = k as f64 * 1.5;
        let mut messages = vec![
            serde_json::json!({"role": "system", "content": format!("You plan trips to city number {k} of the atlas.")}),
        ];
        for j in 0..3usize {
            messages.push(serde_json::json!({"role": "user", "content": format!("Conversation {k} asks question {j} about museums and parks.")}));
            let dur = 0.5 + ((k * 11 + j * 7) % 40) as f64;
            let end = start + dur;
            let line = serde_json::json!({
                "id": format!("c{k}-{j}"), "call_type": "acompletion", "model": "qwen3",
                "startTime": 1_715_342_400.0 + start, "endTime": 1_715_342_400.0 + end,
                "messages": messages.clone(), "completion_tokens": 5 + j,
            });
            rows.push((end, start, k, line.to_string()));
            messages.push(serde_json::json!({"role": "assistant", "content": format!("Answer {j} of conversation {k}.")}));
            start += 12.0;
        }
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let log = rows.iter().map(|r| format!("{}\n", r.3)).collect();
    let mut truth: Vec<(f64, usize)> = rows.iter().map(|r| (r.1, r.2)).collect();
    truth.sort_by(|a, b| a.0.total_cmp(&b.0));
    (log, truth)
}

/// Issue #39 defect 2: a log in completion order converts into a trace in start-time order
/// (it replays without a reorder window) with the conversations as sessions; a window too
/// narrow for the log is an error naming `--reorder-window`.
#[test]
fn a_log_in_completion_order_converts_in_start_order() {
    let Some(q) = qwen3_or_skip("convert") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("litellm_by_end.jsonl");
    let (text, truth) = completion_order_log();
    std::fs::write(&log, text).unwrap();
    let out = dir.path().join("t.jsonl");
    let (rep, rows) = convert_ok(&q, &log, &out, &["--block-size", "16"]);
    let c = &rep["convert"];
    assert_eq!(c["log_format"], "litellm");
    assert!(c["out_of_order"].as_u64().unwrap() > 0, "{c}");
    // The 12 conversations (inferred in log order: 16), each request in its own one.
    assert_eq!(c["sessions"].as_u64(), Some(12), "{c}");
    assert_eq!(c["multi_turn_sessions"].as_u64(), Some(12), "{c}");
    // Start-time order, relative to the first start.
    let want: Vec<f64> = truth.iter().map(|t| (t.0 * 1000.0).round()).collect();
    assert_eq!(timestamps(&rows), want);
    let mut pairs: HashSet<(String, usize)> = HashSet::new();
    for (r, t) in rows.iter().zip(&truth) {
        pairs.insert((r["session_id"].as_str().unwrap().to_owned(), t.1));
    }
    assert_eq!(pairs.len(), 12, "a session mixes conversations: {pairs:?}");
    // It replays as it is (default reorder window).
    let (code, _, stderr) = run_cli(
        [
            "replay",
            "--dataset-path",
            out.to_str().unwrap(),
            "--dry-run",
            "--scale-factor",
            "100",
            "-o",
            dir.path().join("r.jsonl").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    // A window narrower than the log's disorder: an error naming the flag, nothing written.
    let narrow = dir.path().join("narrow.jsonl");
    let (code, _, err) = convert(&q, &log, &narrow, &["--reorder-window", "5"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("out of start-time order by more than --reorder-window 5 s")
            && err.contains("raise --reorder-window to at least"),
        "{err}"
    );
    assert!(!narrow.exists());
    let (code, _, err) = convert(&q, &log, &narrow, &["--reorder-window", "-1"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--reorder-window must be a number of seconds >= 0"),
        "{err}"
    );
}
