//! A corpus of broken trace files (tests/data/traces/bad): each must give exactly one clear error
//! naming the file (and the line when one line is at fault), never a panic.

use std::path::Path;

use request_sim::trace::{load, parse_reader, LoadOptions, TraceError, TraceFormat};

use crate::support::{bad_traces_dir, data_path, run_cli, trace_fixture};

/// (file, line at fault (None: file-level error), the message after `path:line: `).
const CORPUS: &[(&str, Option<usize>, &str)] = &[
    ("empty.jsonl", None, "the file is empty (no data lines)"),
    ("blank_lines_only.jsonl", None, "the file is empty (no data lines)"),
    ("wrong_type_input.jsonl", Some(2), "field `input_length`: expected a non-negative integer, found the string \"600\""),
    ("missing_field.jsonl", Some(3), "missing field `output_length`"),
    ("negative_output.jsonl", Some(2), "field `output_length`: must not be negative, found -5"),
    ("absurd_input.jsonl", Some(2), "field `input_length`: 20000000 tokens is absurd (the limit is 10000000)"),
    ("zero_input.jsonl", Some(3), "field `input_length`: must be at least 1 (an empty prompt cannot be sent), found 0"),
    ("fractional_length.jsonl", Some(1), "field `input_length`: expected a non-negative integer, found the fractional number 600.5"),
    ("null_length.jsonl", Some(2), "field `output_length`: expected a non-negative integer, found null"),
    ("nan_timestamp.jsonl", Some(4), "field `timestamp`: NaN is not a number JSON allows (column 15)"),
    ("infinity_timestamp.jsonl", Some(2), "field `timestamp`: Infinity is not a number JSON allows (column 15)"),
    ("absurd_timestamp.jsonl", Some(2), "field `timestamp`: 1e300 ms is absurd (more than 1e15 ms away from 0)"),
    ("string_timestamp.jsonl", Some(1), "field `timestamp`: expected a number, found the string \"2024-01-01\""),
    ("negative_hash_id.jsonl", Some(2), "field `hash_ids`: element 1 is negative (-2); expected an array of non-negative integers"),
    ("hash_ids_not_array.jsonl", Some(2), "field `hash_ids`: expected an array of non-negative integers, found the string \"1 2\""),
    ("duplicate_field.jsonl", Some(2), "duplicate field `timestamp`"),
    ("truncated_line.jsonl", Some(3), "invalid JSON: the line ends in the middle of a value (EOF while parsing a string)"),
    ("broken_json.jsonl", Some(2), "invalid JSON near field `timestamp`: expected `,` or `}` (column 18)"),
    ("not_an_object.jsonl", Some(2), "expected a JSON object, found a number"),
    ("json_array_file.json", Some(1), "cannot detect the trace format: the first data line is a JSON array, not one object per line (JSONL); force one with --dataset"),
    ("plain_text.txt", Some(1), "cannot detect the trace format: the first data line (\"this is not a trace\") is neither a JSON object nor a CSV header; force one with --dataset"),
    ("not_utf8.jsonl", Some(2), "line is not valid UTF-8 (invalid byte at column 89)"),
    ("binary_garbage.bin", Some(1), "line is not valid UTF-8 (invalid byte at column 1)"),
    ("bailian_bad_parent.jsonl", Some(2), "field `parent_chat_id`: expected a chat id (>= 0) or -1 for a root turn, found -3"),
    ("bailian_turn_string.jsonl", Some(1), "field `turn`: expected a turn number (non-negative integer), found the string \"first\""),
    ("bailian_missing_chat_id_later.jsonl", Some(2), "missing field `chat_id`"),
    ("azure_wrong_header.csv", Some(1), "bad CSV header: no column `TIMESTAMP` (found \"time\", \"context_tokens\", \"generated_tokens\"); the first line must be the header `TIMESTAMP,ContextTokens,GeneratedTokens`"),
    ("azure_no_header.csv", Some(1), "bad CSV header: no column `TIMESTAMP` (found \"2023-11-16 18:15:46.6805900\", \"374\", \"44\"); the first line must be the header `TIMESTAMP,ContextTokens,GeneratedTokens`"),
    ("azure_header_only.csv", None, "no requests to replay: the CSV file has a header but no data rows"),
    ("azure_lmm_negative_images.csv", Some(3), "field `NumImages`: must not be negative, found -1"),
    ("azure_lmm_images_exceed_context.csv", Some(2), "field `NumImages`: 4 images take at least 24 prompt tokens (the smallest image costs 6), more than the row's 20 tokens"),
    ("messages_image_not_data.jsonl", Some(2), "field `messages[0].content[0].image_url.url`: expected a data: URL (request-sim sends images inline and counts their tokens), found \"https://example.com/a.png\""),
    ("azure_bad_timestamp.csv", Some(3), "field `TIMESTAMP`: \"2023-11-31 18:15:46.6805900\" is not a valid date-time (parsed date is not valid: parameter 'day' for `2023-11` is invalid, must be in range `1..=30`)"),
    ("azure_missing_column.csv", Some(3), "expected at least 3 CSV columns, found 2"),
    ("azure_negative_tokens.csv", Some(2), "field `GeneratedTokens`: must not be negative, found -44"),
    ("azure_text_tokens.csv", Some(2), "field `ContextTokens`: expected a non-negative integer, found \"lots\""),
    ("gzip_truncated.jsonl.gz", None, "read error after line"),
    ("gzip_corrupt.jsonl.gz", None, "read error after line 0 (gzip: truncated or corrupt file?): corrupt deflate stream"),
    ("gzip_empty.jsonl.gz", None, "the file is empty (no data lines)"),
    ("gzip_bad_row.jsonl.gz", Some(3), "field `input_length`: must not be negative, found -1"),
    ("parquet_negative_input.parquet", Some(3), "field `input_tokens`: must not be negative, found -5"),
    ("parquet_two_block_sizes.parquet", Some(2), "field `block_size`: is 32, but the first row's is 16: one trace has one hash block size (give --block-size to read every row with one)"),
    ("parquet_no_trace_columns.parquet", None, "a Parquet trace needs Baseten's columns (timestamp_start_unix_ms, input_tokens, output_tokens) or Mooncake's (timestamp, input_length, output_length); this file has ts, tokens"),
    ("parquet_missing_output.parquet", None, "a Parquet trace with column timestamp_start_unix_ms needs column output_tokens"),
    ("parquet_truncated.parquet", None, "not a readable Parquet file (Parquet error: Invalid Parquet file. Corrupt footer)"),
];

#[test]
fn every_bad_file_gives_one_clear_error() {
    let dir = bad_traces_dir();
    let mut listed: Vec<&str> = CORPUS.iter().map(|c| c.0).collect();
    listed.sort_unstable();
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    on_disk.sort_unstable();
    assert_eq!(
        listed, on_disk,
        "every file in bad/ has an expectation and vice versa"
    );

    for &(file, line, what) in CORPUS {
        let path = dir.join(file);
        let err = load(&path, &LoadOptions::default()).expect_err(file);
        let msg = err.to_string();
        let shown = path.display().to_string();
        assert_eq!(err.line(), line, "{file}: {msg}");
        let prefix = match line {
            Some(l) => format!("{shown}:{l}: "),
            None => format!("{shown}: "),
        };
        assert!(msg.starts_with(&prefix), "{file}: {msg}");
        let rest = &msg[prefix.len()..];
        if what.ends_with(':') || what == "read error after line" {
            assert!(rest.starts_with(what), "{file}: {msg}");
        } else {
            assert_eq!(rest, what, "{file}");
        }
        assert!(!msg.contains('\n'), "one line: {msg}");
    }
}

#[test]
fn skip_invalid_counts_bad_rows_and_keeps_good_ones() {
    let dir = bad_traces_dir();
    let opts = LoadOptions {
        skip_invalid: true,
        ..Default::default()
    };
    // (file, requests kept, rows skipped)
    let cases: &[(&str, usize, usize)] = &[
        ("wrong_type_input.jsonl", 2, 1),
        ("missing_field.jsonl", 2, 1),
        ("nan_timestamp.jsonl", 3, 1),
        ("truncated_line.jsonl", 2, 1),
        ("not_utf8.jsonl", 1, 1),
        ("not_an_object.jsonl", 1, 1),
        ("azure_bad_timestamp.csv", 1, 1),
        ("azure_missing_column.csv", 1, 1),
        ("gzip_bad_row.jsonl.gz", 2, 1),
    ];
    for &(file, kept, skipped) in cases {
        let path = dir.join(file);
        let t = load(&path, &opts).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(t.requests.len(), kept, "{file}");
        assert_eq!(t.stats.skipped_invalid, skipped, "{file}");
        assert_eq!(t.stats.rows, kept + skipped, "{file}");
        assert_eq!(t.stats.invalid_examples.len(), skipped, "{file}");
        assert!(
            t.stats.invalid_examples[0].starts_with(&path.display().to_string()),
            "{file}: {:?}",
            t.stats.invalid_examples
        );
    }
    // A bad header stays fatal: no row could be read correctly.
    let err = load(&dir.join("azure_wrong_header.csv"), &opts).unwrap_err();
    assert_eq!(err.line(), Some(1));
    // Only invalid rows: an error that says so.
    let err = load(&dir.join("string_timestamp.jsonl"), &opts).unwrap_err();
    assert!(
        err.to_string()
            .contains("no requests to replay: all 1 data rows are invalid (skipped); first: "),
        "{err}"
    );
    // Undetectable first line is skipped, detection goes on with the next line.
    let text = "garbage\n{\"timestamp\": 5, \"input_length\": 3, \"output_length\": 1}\n";
    let t = parse_reader("x", text.as_bytes(), &opts).unwrap();
    assert_eq!(t.format, TraceFormat::from_name("generic").unwrap());
    assert_eq!((t.requests.len(), t.stats.skipped_invalid), (1, 1));
}

#[test]
fn huge_lines_are_rejected_without_buffering_them() {
    let opts = LoadOptions {
        max_line_bytes: Some(100),
        ..Default::default()
    };
    let good = "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1}\n";
    let long = format!(
        "{{\"timestamp\": 1, \"input_length\": 3, \"output_length\": 1, \"pad\": \"{}\"}}\n",
        "x".repeat(200)
    );
    let text = format!("{good}{long}{good}");
    let err = parse_reader("big.jsonl", text.as_bytes(), &opts).unwrap_err();
    assert_eq!(
        err.to_string(),
        "big.jsonl:2: line is longer than 100 bytes (is this really a trace file?)"
    );
    let t = parse_reader(
        "big.jsonl",
        text.as_bytes(),
        &LoadOptions {
            skip_invalid: true,
            ..opts
        },
    )
    .unwrap();
    assert_eq!((t.requests.len(), t.stats.skipped_invalid), (2, 1));
    assert_eq!(t.requests[1].line, 3);
}

#[test]
fn default_line_cap_is_64_mib() {
    // One line of 64 MiB + 1 byte of JSON-ish text: a clear error, not an allocation of the
    // whole line.
    let mut text = Vec::with_capacity((64 << 20) + 100);
    text.extend_from_slice(
        b"{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1, \"pad\": \"",
    );
    text.resize((64 << 20) + 1, b'x');
    text.extend_from_slice(b"\"}\n");
    let err = parse_reader("huge.jsonl", text.as_slice(), &LoadOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "huge.jsonl:1: line is longer than 67108864 bytes (is this really a trace file?)"
    );
}

#[test]
fn invalid_options_are_rejected() {
    let text = "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1}\n";
    let cases = [
        (
            LoadOptions {
                block_size: Some(0),
                ..Default::default()
            },
            "block size must be at least 1",
        ),
        (
            LoadOptions {
                max_requests: Some(0),
                ..Default::default()
            },
            "max requests must be at least 1",
        ),
        (
            LoadOptions {
                start_ms: Some(f64::NAN),
                ..Default::default()
            },
            "start ms must be a finite number >= 0, got NaN",
        ),
        (
            LoadOptions {
                start_ms: Some(-1.0),
                ..Default::default()
            },
            "start ms must be a finite number >= 0, got -1",
        ),
        (
            LoadOptions {
                start_ms: Some(5.0),
                end_ms: Some(5.0),
                ..Default::default()
            },
            "start ms (5) must be before end ms (5)",
        ),
        (
            LoadOptions {
                end_ms: Some(0.0),
                ..Default::default()
            },
            "end ms must be a number > 0, got 0",
        ),
    ];
    for (opts, what) in cases {
        let err = parse_reader("o.jsonl", text.as_bytes(), &opts).unwrap_err();
        assert!(matches!(err, TraceError::Options { .. }));
        assert_eq!(
            err.to_string(),
            format!("o.jsonl: invalid trace options: {what}")
        );
    }
}

#[test]
fn missing_file_and_directory() {
    let err = load(
        Path::new("/nonexistent/dir/trace.jsonl"),
        &LoadOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/dir/trace.jsonl: cannot open: "),
        "{err}"
    );
    let err = load(&bad_traces_dir(), &LoadOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains(": cannot open: is a directory of .json or .json.gz files, a Weka agent corpus: `replay`, `sweep`, `analyze` (without --against) and `transform` (a Weka directory out) read it"),
        "{err}"
    );
}

/// Issue #39: a directory of `dag_jsonl` files (`replay`) and `analyze <weka dir> --against
/// T` said only "cannot open: is a directory"; each says what a
/// directory can be. An agent corpus file where a request trace goes says which commands read
/// it ("read as a whole, not row by row" named none).
#[test]
fn a_directory_where_a_trace_file_goes_says_what_a_directory_can_be() {
    let dir = tempfile::tempdir().unwrap();
    let dags = dir.path().join("dags");
    std::fs::create_dir_all(&dags).unwrap();
    std::fs::copy(trace_fixture("agent/dag.jsonl"), dags.join("a.jsonl")).unwrap();
    let weka = data_path("agents");
    let (weka, dags) = (weka.to_str().unwrap(), dags.to_str().unwrap());
    let out = dir.path().join("out.jsonl");
    let trace = trace_fixture("mooncake.jsonl");
    let no_corpus = "is a directory, and no Weka agent corpus (no .json or .json.gz files): a directory is read only as a Weka corpus (by `replay`, `sweep` and `analyze`); every other trace, a tracelab, dynamo or dag_jsonl corpus included, is one file";
    let corpus = "is a directory of .json or .json.gz files, a Weka agent corpus: `replay`, `sweep`, `analyze` (without --against) and `transform` (a Weka directory out) read it; `analyze --against` and `verify-prompts` take a request trace, one file, not an agent corpus";
    let cases: [(Vec<&str>, &str); 2] = [
        (
            vec!["replay", "--dataset-path", dags, "--dry-run"],
            no_corpus,
        ),
        (
            vec!["analyze", weka, "--against", trace.to_str().unwrap()],
            corpus,
        ),
    ];
    for (args, want) in cases {
        let (code, _, err) = run_cli(&args, &[]);
        assert_ne!(code, 0, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {want} in\n{err}");
    }
    assert!(!out.exists());
}

/// Deterministic pseudo-random mutations of valid traces: never a panic, always Ok or a
/// one-line error with the file name.
#[test]
fn mutated_inputs_never_panic() {
    let base: Vec<Vec<u8>> = [
        "mooncake.jsonl",
        "bailian.jsonl",
        "azure.csv",
        "generic.jsonl",
        "mooncake.jsonl.gz",
    ]
    .iter()
    .map(|f| std::fs::read(trace_fixture(f)).unwrap())
    .collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let specials: &[&[u8]] = &[
        b"-",
        b"NaN",
        b"1e999",
        b"\xff",
        b"\n",
        b",",
        b"\"",
        b"{",
        b"]",
        b"-1",
        b"99999999999999999999",
        b"null",
    ];
    // TRACE_MUTATIONS=N runs a longer session (e.g. 200000) by hand.
    let rounds: usize = std::env::var("TRACE_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    for i in 0..rounds {
        let mut data = base[i % base.len()].clone();
        for _ in 0..(1 + rnd() % 4) {
            if data.is_empty() {
                break;
            }
            let at = (rnd() as usize) % data.len();
            match rnd() % 4 {
                0 => data[at] = rnd() as u8,
                1 => {
                    data.remove(at);
                }
                2 => {
                    let s = specials[(rnd() as usize) % specials.len()];
                    data.splice(at..at, s.iter().copied());
                }
                _ => data.truncate(at),
            }
        }
        let opts = LoadOptions {
            skip_invalid: i % 2 == 0,
            ..Default::default()
        };
        match parse_reader("m", data.as_slice(), &opts) {
            Ok(t) => {
                assert!(!t.requests.is_empty());
                assert!(t
                    .requests
                    .windows(2)
                    .all(|w| w[0].timestamp_ms <= w[1].timestamp_ms));
                assert_eq!(t.requests[0].timestamp_ms, 0.0);
            }
            Err(e) => {
                let m = e.to_string();
                assert!(m.starts_with("m:") && !m.contains('\n'), "{m}");
            }
        }
    }
}

#[test]
#[ignore = "prints the corpus messages"]
fn print_corpus_messages() {
    for &(file, _, _) in CORPUS {
        let e = load(&bad_traces_dir().join(file), &LoadOptions::default()).unwrap_err();
        println!("{e}");
    }
}
