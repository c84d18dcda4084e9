//! Parquet traces (Baseten's export schema and Mooncake columns), written by pyarrow
//! (`scripts/make-parquet-trace.py`): read row group by row group into the same requests as the
//! JSONL they were made from, recognised by content, refused clearly from a pipe.

use request_sim::trace::{load, parse_reader, LoadOptions, Trace, TraceFormat};

use crate::support::{run_cli, trace_fixture};

fn read(name: &str, opts: &LoadOptions) -> Trace {
    load(&trace_fixture(name), opts).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn baseten_parquet_reads_as_the_jsonl_it_was_made_from() {
    // 12 rows in 3 row groups (zstd), block 64; every 4th row has no hash ids but a prompt.
    let pq = read("baseten.parquet", &LoadOptions::default());
    let jsonl = read(
        "parquet_source.jsonl",
        &LoadOptions {
            block_size: Some(64),
            ..LoadOptions::default()
        },
    );
    assert_eq!(pq.format, TraceFormat::from_name("parquet").unwrap());
    assert_eq!(pq.format, TraceFormat::from_name("baseten").unwrap());
    assert_eq!(pq.block_size, 64, "the file's block_size column");
    assert_eq!(pq.requests.len(), 12);
    assert_eq!(pq.requests.len(), jsonl.requests.len());
    let mut literal = 0;
    for (i, (a, b)) in pq.requests.iter().zip(&jsonl.requests).enumerate() {
        // Unix ms rebased to the first row, as the JSONL's relative ms.
        assert!(
            (a.timestamp_ms - b.timestamp_ms).abs() < 0.51,
            "row {i}: {} vs {}",
            a.timestamp_ms,
            b.timestamp_ms
        );
        assert_eq!(a.input_length, b.input_length, "row {i}");
        assert_eq!(a.output_length, b.output_length, "row {i}");
        assert_eq!(a.line, i + 1, "a row's number is its line");
        assert_eq!(a.model.as_deref(), Some("baseten-model"));
        if i % 4 == 3 {
            literal += 1;
            assert!(
                a.hash_ids.is_empty(),
                "row {i}: a prompt row has no hash ids"
            );
            let chat = pq.chats[i].as_ref().expect("the literal prompt");
            let words = chat.text_input.as_deref().unwrap().split(' ').count();
            assert_eq!(words, a.input_length as usize);
        } else {
            assert_eq!(a.hash_ids, b.hash_ids, "row {i}");
            assert!(pq.chats.get(i).is_none_or(Option::is_none));
        }
        assert_eq!(
            pq.sessions.get(i).map(|t| t.id.to_string()),
            jsonl.sessions.get(i).map(|t| t.id.to_string()),
            "row {i}: provided_session_id"
        );
    }
    assert_eq!(literal, 3);
    assert!(pq.sessions.any());
}

#[test]
fn mooncake_columns_in_parquet_read_as_mooncake_jsonl() {
    let pq = read("mooncake.parquet", &LoadOptions::default());
    let jsonl = read("mooncake.jsonl", &LoadOptions::default());
    assert_eq!(pq.block_size, 512);
    let key = |t: &Trace| {
        t.requests
            .iter()
            .map(|r| {
                (
                    r.timestamp_ms,
                    r.input_length,
                    r.output_length,
                    r.hash_ids.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&pq), key(&jsonl));
    assert_eq!(
        pq.stats.input_beyond_blocks,
        jsonl.stats.input_beyond_blocks
    );
}

#[test]
fn a_forced_block_size_wins_over_the_files() {
    let t = read(
        "baseten.parquet",
        &LoadOptions {
            block_size: Some(32),
            ..LoadOptions::default()
        },
    );
    assert_eq!(t.block_size, 32);
}

#[test]
fn a_parquet_trace_from_a_pipe_is_refused_with_what_to_do() {
    let bytes = std::fs::read(trace_fixture("baseten.parquet")).unwrap();
    let e = parse_reader("<stdin>", bytes.as_slice(), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "<stdin>: a parquet trace is a binary file whose index is at its end: give its path"
        ),
        "{e}"
    );
}

#[test]
fn analyze_and_replay_read_a_parquet_trace() {
    let path = trace_fixture("baseten.parquet");
    let (code, out, err) = run_cli(["analyze", path.to_str().unwrap(), "--json"], &[]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["format"], "parquet", "{out}");
    assert_eq!(v["requests"], 12, "{out}");
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("rec.jsonl");
    let (code, _, err) = run_cli(
        [
            "replay",
            "--dataset-path",
            path.to_str().unwrap(),
            "--scale-factor",
            "20",
            "-o",
            rec.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let records = std::fs::read_to_string(&rec).unwrap();
    let ok = records
        .lines()
        .filter(|l| l.contains("\"status\":\"ok\""))
        .count();
    assert_eq!(ok, 12, "{records}");
}
