//! Loading every format (plain and gzip), detection, forcing a format, the consistency rules
//! with their counts, and time/count slicing. Fixtures: tests/data/traces.

use std::io::Write;

use request_sim::trace::{
    load, parse_reader, LoadOptions, SessionInfo, Trace, TraceFormat, TraceStats,
};

use crate::support::trace_fixture;

fn load_default(name: &str) -> Trace {
    load(&trace_fixture(name), &LoadOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn times(t: &Trace) -> Vec<f64> {
    t.requests.iter().map(|r| r.timestamp_ms).collect()
}

fn lines(t: &Trace) -> Vec<usize> {
    t.requests.iter().map(|r| r.line).collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

#[test]
fn mooncake_plain_and_gzip() {
    for name in ["mooncake.jsonl", "mooncake.jsonl.gz"] {
        let t = load_default(name);
        assert_eq!(
            t.format,
            TraceFormat::from_name("mooncake").unwrap(),
            "{name}"
        );
        assert_eq!(t.block_size, 512);
        assert_eq!(t.requests.len(), 4);
        assert_eq!(times(&t), vec![0.0, 0.0, 1500.5, 3000.0]);
        assert_eq!(lines(&t), vec![1, 2, 3, 5]); // line 4 is blank
        let idx: Vec<usize> = t.requests.iter().map(|r| r.index).collect();
        assert_eq!(idx, vec![0, 1, 2, 3]);
        let r = &t.requests[1];
        assert_eq!((r.input_length, r.output_length), (1100, 20));
        assert_eq!(r.hash_ids, vec![0, 1, 3]);
        assert_eq!(r.session, None);
        assert_eq!(
            t.stats,
            TraceStats {
                rows: 4,
                repeated_timestamps: 1,
                ..Default::default()
            }
        );
    }
}

#[test]
fn gzip_is_detected_by_magic_bytes_not_by_name() {
    let data = std::fs::read(trace_fixture("bailian.jsonl")).unwrap();
    let plain = parse_reader("a.jsonl", data.as_slice(), &LoadOptions::default()).unwrap();
    let gz = parse_reader(
        "no-extension",
        gzip(&data).as_slice(),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(gz.format, TraceFormat::from_name("bailian").unwrap());
    assert_eq!(gz.requests, plain.requests);
    // Concatenated gzip members (e.g. `cat a.gz b.gz`) are read as one stream.
    let mut two = gzip(b"{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n");
    two.extend(gzip(
        b"{\"timestamp\": 7, \"input_length\": 6, \"output_length\": 2}\n",
    ));
    let t = parse_reader("two.gz", two.as_slice(), &LoadOptions::default()).unwrap();
    assert_eq!(times(&t), vec![0.0, 7.0]);
    assert_eq!(lines(&t), vec![1, 2]);
}

#[test]
fn bailian_sessions_seconds_and_block_16() {
    let t = load_default("bailian.jsonl");
    assert_eq!(t.format, TraceFormat::from_name("bailian").unwrap());
    assert_eq!(t.block_size, 16);
    // Seconds -> ms, rebased to the first request at 61.5 s.
    assert_eq!(times(&t), vec![0.0, 500.0, 1750.0, 3500.0, 4500.0]);
    let s = |i: usize| t.requests[i].session.clone().unwrap();
    assert_eq!(
        s(0),
        SessionInfo {
            chat_id: 10,
            parent_chat_id: -1,
            turn: 1,
            kind: Some("text".into())
        }
    );
    assert_eq!(s(2).parent_chat_id, 10);
    // Row 4 has no `turn`: its parent (chat 12) is turn 2, so it is turn 3.
    assert_eq!(s(3).turn, 3);
    assert_eq!(s(4).kind.as_deref(), Some("image"));
    // 40 tokens in 16-token blocks = 3 ids (last block 8 tokens): consistent.
    assert_eq!(t.requests[0].hash_ids, vec![100, 101, 102]);
    assert_eq!(
        t.stats,
        TraceStats {
            rows: 5,
            zero_output_length: 1,
            ..Default::default()
        }
    );
}

#[test]
fn azure_csv_quoted_fields_may_hold_commas() {
    // A quoted comma is part of its field, in the header and in rows; `""` is a quote.
    let text = "TIMESTAMP,\"Note, free text\",ContextTokens,GeneratedTokens\n\
                \"2023-11-16 18:15:46.5\",\"a, b\",374,44\n\
                2023-11-16 18:15:47,\"say \"\"hi\"\", then go\",\"396\",109\n";
    let t = parse_reader("quoted.csv", text.as_bytes(), &LoadOptions::default()).unwrap();
    assert_eq!(t.format, TraceFormat::from_name("azure").unwrap());
    let lens: Vec<(u32, u32)> = t
        .requests
        .iter()
        .map(|r| (r.input_length, r.output_length))
        .collect();
    assert_eq!(lens, vec![(374, 44), (396, 109)]);
    assert_eq!(times(&t), vec![0.0, 500.0]);
}

#[test]
fn azure_csv_with_crlf_blank_line_and_no_hash_ids() {
    let t = load_default("azure.csv");
    assert_eq!(t.format, TraceFormat::from_name("azure").unwrap());
    assert_eq!(t.requests.len(), 4);
    let ts = times(&t);
    assert_eq!(ts[0], 0.0);
    assert!((ts[1] - 4314.579).abs() < 1e-3, "{ts:?}");
    assert_eq!(ts[1], ts[2]);
    assert!((ts[3] - 14442.8667).abs() < 1e-3, "{ts:?}");
    let lens: Vec<(u32, u32)> = t
        .requests
        .iter()
        .map(|r| (r.input_length, r.output_length))
        .collect();
    assert_eq!(lens, vec![(374, 44), (396, 109), (879, 0), (2048, 55)]);
    assert!(t.requests.iter().all(|r| r.hash_ids.is_empty()));
    assert_eq!(lines(&t), vec![2, 3, 5, 6]);
    // No hash ids at all: not counted as "input beyond blocks".
    assert_eq!(
        t.stats,
        TraceStats {
            rows: 4,
            repeated_timestamps: 1,
            zero_output_length: 1,
            ..Default::default()
        }
    );
    // gzip works for CSV too.
    let data = std::fs::read(trace_fixture("azure.csv")).unwrap();
    let gz = parse_reader(
        "azure.csv.gz",
        gzip(&data).as_slice(),
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(gz.requests, t.requests);
}

#[test]
fn generic_with_optional_hash_ids_and_block_size_override() {
    let t = load_default("generic.jsonl");
    assert_eq!(t.format, TraceFormat::from_name("generic").unwrap());
    assert_eq!(t.block_size, 512);
    assert_eq!(times(&t), vec![0.0, 250.0, 500.25]);
    assert_eq!(t.requests[0].hash_ids, Vec::<u64>::new());
    // 700 tokens with 3 ids of 512: the third id is surplus and dropped.
    assert_eq!(t.requests[2].hash_ids, vec![5, 6]);
    assert_eq!(t.stats.surplus_hash_ids, 1);
    assert_eq!(t.stats.input_beyond_blocks, 0);

    let opts = LoadOptions {
        block_size: Some(256),
        ..Default::default()
    };
    let t = load(&trace_fixture("generic.jsonl"), &opts).unwrap();
    assert_eq!(t.block_size, 256);
    assert_eq!(t.requests[2].hash_ids, vec![5, 6, 7]);
    assert_eq!(t.stats.surplus_hash_ids, 0);
}

#[test]
fn detection_by_content() {
    let cases = [
        ("{\"chat_id\": 1, \"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n", TraceFormat::from_name("bailian").unwrap()),
        ("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n", TraceFormat::from_name("mooncake").unwrap()),
        ("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n", TraceFormat::from_name("generic").unwrap()),
        ("\u{feff}\n\nTIMESTAMP,ContextTokens,GeneratedTokens\n2024-01-01 00:00:00,1,1\n", TraceFormat::from_name("azure").unwrap()),
        ("\u{feff}{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n", TraceFormat::from_name("generic").unwrap()),
    ];
    for (text, want) in cases {
        let t = parse_reader("d", text.as_bytes(), &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.format, want, "{text}");
    }
}

#[test]
fn forced_format() {
    // A mooncake file read as generic: same requests, generic format.
    let opts = LoadOptions {
        format: Some(TraceFormat::from_name("generic").unwrap()),
        ..Default::default()
    };
    let t = load(&trace_fixture("mooncake.jsonl"), &opts).unwrap();
    assert_eq!(t.format, TraceFormat::from_name("generic").unwrap());
    assert_eq!(t.requests, load_default("mooncake.jsonl").requests);

    // Forcing bailian on a mooncake file fails on line 1 with the missing field.
    let opts = LoadOptions {
        format: Some(TraceFormat::from_name("bailian").unwrap()),
        ..Default::default()
    };
    let err = load(&trace_fixture("mooncake.jsonl"), &opts).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("mooncake.jsonl:1: missing field `chat_id`"),
        "{err}"
    );

    // Forcing mooncake on a generic file: hash_ids are required there.
    let opts = LoadOptions {
        format: Some(TraceFormat::from_name("mooncake").unwrap()),
        ..Default::default()
    };
    let err = load(&trace_fixture("generic.jsonl"), &opts).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("generic.jsonl:1: missing field `hash_ids`"),
        "{err}"
    );

    // Forcing azure on a JSON file: the header check says what is wrong.
    let opts = LoadOptions {
        format: Some(TraceFormat::from_name("azure").unwrap()),
        ..Default::default()
    };
    let err = load(&trace_fixture("generic.jsonl"), &opts).unwrap_err();
    assert_eq!(err.line(), Some(1));
    assert!(
        err.to_string()
            .contains("bad CSV header: no column `TIMESTAMP`"),
        "{err}"
    );

    // Bailian block size can be overridden (e.g. a trace hashed with 32-token blocks).
    let opts = LoadOptions {
        block_size: Some(32),
        ..Default::default()
    };
    let t = load(&trace_fixture("bailian.jsonl"), &opts).unwrap();
    assert_eq!(t.block_size, 32);
    assert_eq!(t.requests[0].hash_ids, vec![100, 101]); // 40 tokens = 2 blocks of 32
}

#[test]
fn consistency_rules_and_counts() {
    let t = load_default("inconsistent.jsonl");
    // File order: t = 1000, 1000, 400, 400, 2000, 1500.
    // Stable sort: 400(l3), 400(l4), 1000(l1), 1000(l2), 1500(l6), 2000(l5); rebased to 400.
    assert_eq!(lines(&t), vec![3, 4, 1, 2, 6, 5]);
    assert_eq!(times(&t), vec![0.0, 0.0, 600.0, 600.0, 1100.0, 1600.0]);
    let ids: Vec<Vec<u64>> = t.requests.iter().map(|r| r.hash_ids.to_vec()).collect();
    assert_eq!(
        ids,
        vec![
            vec![1, 2],    // l3: 1024 tokens = exactly 2 full blocks: consistent
            vec![1, 2, 3], // l4: 1025 tokens, 3 ids, last block holds 1 token: consistent
            vec![1, 2],    // l1: 2000 tokens > 2 x 512: tail of 976 tokens is unique (beyond)
            vec![1],       // l2: 100 tokens with 4 ids: 3 surplus ids dropped
            vec![],        // l6: 10 tokens, no ids: beyond
            vec![1, 2],    // l5: 1024 tokens with 3 ids: 1 surplus id dropped
        ]
    );
    assert_eq!(
        t.stats,
        TraceStats {
            rows: 6,
            input_beyond_blocks: 2,
            surplus_hash_ids: 2,
            repeated_timestamps: 2,   // l2 (= l1), l4 (= l3)
            decreasing_timestamps: 2, // l3 (< l2), l6 (< l5)
            reordered: 3,             // l3, l4 (< l1), l6 (< l5)
            zero_output_length: 1,
            ..Default::default()
        }
    );
    let idx: Vec<usize> = t.requests.iter().map(|r| r.index).collect();
    assert_eq!(idx, vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn time_window_and_max_requests() {
    // Rebased times of inconsistent.jsonl: 0, 0, 600, 600, 1100, 1600.
    let load_with = |start: Option<f64>, end: Option<f64>, max: Option<usize>| {
        let opts = LoadOptions {
            start_ms: start,
            end_ms: end,
            max_requests: max,
            ..Default::default()
        };
        load(&trace_fixture("inconsistent.jsonl"), &opts)
    };
    // [600, 1600): inclusive start, exclusive end; rebased so the first kept request is at 0.
    let t = load_with(Some(600.0), Some(1600.0), None).unwrap();
    assert_eq!(lines(&t), vec![1, 2, 6]);
    assert_eq!(times(&t), vec![0.0, 0.0, 500.0]);
    assert_eq!(t.requests[0].index, 0);
    assert_eq!(t.stats.outside_time_window, 3);
    assert_eq!(t.stats.over_max_requests, 0);
    // Counts are over the kept requests (rows counts the whole file).
    assert_eq!(t.stats.rows, 6);
    assert_eq!(t.stats.input_beyond_blocks, 2); // l1, l6
    assert_eq!(t.stats.surplus_hash_ids, 1); // l2
    assert_eq!(t.stats.repeated_timestamps, 1); // l2
    assert_eq!(t.stats.decreasing_timestamps, 1); // l6

    // A window starting between requests: rebased to the first kept one.
    let t = load_with(Some(700.0), None, None).unwrap();
    assert_eq!(times(&t), vec![0.0, 500.0]);

    // max_requests after sorting and slicing.
    let t = load_with(None, Some(1100.0), Some(3)).unwrap();
    assert_eq!(lines(&t), vec![3, 4, 1]);
    assert_eq!(t.stats.outside_time_window, 2);
    assert_eq!(t.stats.over_max_requests, 1);
    let t = load_with(None, None, Some(100)).unwrap();
    assert_eq!(t.requests.len(), 6);
    assert_eq!(t.stats.over_max_requests, 0);

    // An empty window is an error that says where the trace is.
    let err = load_with(Some(5000.0), None, None).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("inconsistent.jsonl: no requests to replay: no request in the time window [5000, inf) ms; the trace spans 0 to 1600 ms"),
        "{err}"
    );
}

#[test]
fn negative_and_float_timestamps_are_rebased() {
    let text = "{\"timestamp\": -2.5, \"input_length\": 3, \"output_length\": 1}\n{\"timestamp\": -10, \"input_length\": 3, \"output_length\": 1}\n";
    let t = parse_reader("n", text.as_bytes(), &LoadOptions::default()).unwrap();
    assert_eq!(times(&t), vec![0.0, 7.5]);
    assert_eq!(t.stats.decreasing_timestamps, 1);
}
