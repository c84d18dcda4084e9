//! `analyze` on the small fixtures, with every number worked out by hand.

use request_sim::analyze::{analyze, ideal_prefix_hits, AnalyzeOptions};
use request_sim::report::render_analysis;
use request_sim::trace::{load, LoadOptions};

use crate::support::trace_fixture;

fn fixture(name: &str) -> request_sim::trace::Trace {
    load(&trace_fixture(name), &LoadOptions::default()).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn mooncake_fixture_numbers() {
    // Requests (block 512), replay order:
    //   r0 t=0      1200 tok [0,1,2]  blocks 512,512,176
    //   r1 t=0      1100 tok [0,1,3]  blocks 512,512,76   hits (0),(0,1)          = 1024
    //   r2 t=1500.5  600 tok [0,4]    blocks 512,88       hits (0)                = 512
    //   r3 t=3000   1536 tok [0,1,2]  blocks 512,512,512  hits (0),(0,1), and 176 tokens of
    //                                 (0,1,2), which r0 cached as a partial block = 1200
    let t = fixture("mooncake.jsonl");
    assert_eq!(ideal_prefix_hits(&t), vec![0, 1024, 512, 1200]);
    let opts = AnalyzeOptions {
        cache_sizes_tokens: vec![1024, 1536, 2560],
        ..Default::default()
    };
    let a = analyze(&t, &opts);
    assert_eq!(a.requests, 4);
    assert_eq!(a.duration_s, 3.0);
    assert!(close(a.mean_rate_per_s.unwrap(), 4.0 / 3.0));
    assert_eq!((a.peak_rate_per_s, a.peak_rate_at_s), (2, 0.0));
    assert_eq!(
        (a.distinct_timestamps, a.max_requests_per_timestamp),
        (3, 2)
    );
    // Input lengths sorted: 600, 1100, 1200, 1536.
    assert_eq!(a.input_length.mean, 1109.0);
    assert_eq!(a.input_length.percentiles.get(50.0), Some(1150.0));
    assert!(close(a.input_length.percentiles.get(90.0).unwrap(), 1435.2));
    assert!(close(
        a.input_length.percentiles.get(99.0).unwrap(),
        1525.92
    ));
    assert_eq!(
        (a.input_length.min, a.input_length.max, a.input_length.total),
        (600, 1536, 4436)
    );
    assert_eq!(a.output_length.mean, 25.0);
    assert_eq!((a.distinct_hash_ids, a.distinct_prefix_blocks), (5, 5));
    assert_eq!(a.requests_with_hash_ids, 4);
    let p = &a.prefix_cache;
    assert_eq!((p.hit_tokens, p.input_tokens), (2736, 4436));
    assert!(close(p.hit_ratio, 2736.0 / 4436.0));
    assert_eq!((p.hit_blocks, p.blocks), (5, 11));
    assert!(close(p.warm_hit_ratio, 1712.0 / 2136.0));
    assert_eq!(p.footprint_tokens, 5 * 512);
    // LRU, 2 blocks: r1 1024, r2 512, r3 512 (only (0) survives); 3 blocks: r1 1024, r2 512,
    // r3 1024; 5 blocks hold everything = infinite.
    let sweep: Vec<(u64, u64, u64)> = a
        .lru_sweep
        .iter()
        .map(|l| (l.capacity_tokens, l.capacity_blocks, l.hit_tokens))
        .collect();
    assert_eq!(
        sweep,
        vec![(1024, 2, 2048), (1536, 3, 2560), (2560, 5, 2736)]
    );
    assert!(close(a.lru_sweep[0].block_hit_ratio, 4.0 / 11.0));
    assert!(close(a.lru_sweep[1].block_hit_ratio, 5.0 / 11.0));
    assert_eq!(a.sessions, None);
    // Rate series: one 60-s bucket with 4 requests.
    assert_eq!(a.rate_series.points.len(), 1);
    assert_eq!(a.rate_series.points[0].requests, 4);

    // JSON and text output.
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["requests"], 4);
    assert_eq!(json["format"], "mooncake");
    assert_eq!(json["prefix_cache"]["hit_tokens"], 2736);
    assert_eq!(json["lru_sweep"][1]["capacity_blocks"], 3);
    assert_eq!(json["input_length"]["percentiles"]["p50"], 1150.0);
    assert_eq!(json["sessions"], serde_json::Value::Null);
    let text = render_analysis(&a);
    for want in [
        "Requests:                                4\n",
        "Infinite-cache hit ratio (tokens):       61.68%\n",
        "           1,536              3    57.71%    45.45%\n",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

#[test]
fn default_sweep_reaches_the_whole_footprint() {
    let t = fixture("mooncake.jsonl");
    let a = analyze(&t, &AnalyzeOptions::default());
    // Footprint 2,560 tokens < 16 Ki: a single point that holds everything.
    assert_eq!(a.lru_sweep.len(), 1);
    assert_eq!(a.lru_sweep[0].capacity_tokens, 16 << 10);
    assert_eq!(a.lru_sweep[0].hit_tokens, a.prefix_cache.hit_tokens);
}

#[test]
fn bailian_sessions() {
    let t = fixture("bailian.jsonl");
    let a = analyze(&t, &AnalyzeOptions::default());
    let s = a.sessions.clone().expect("bailian has sessions");
    // Sessions: {10, 12, 13}, {11}, {14 (parent 999 not in the trace)}.
    assert_eq!(s.sessions, 3);
    assert_eq!(s.multi_turn_sessions, 1);
    assert_eq!(s.max_turns_per_session, 3);
    assert!(close(s.mean_turns_per_session, 5.0 / 3.0));
    assert_eq!(s.max_turn, 4);
    assert_eq!((s.root_requests, s.orphan_requests), (2, 1));
    let types: Vec<(&str, usize)> = s.types.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(types, vec![("image", 1), ("search", 1), ("text", 3)]);
    // Block 16: chat 12 reuses chat 10's 3 blocks (16+16+8 cached; it needs 16+16+16, so
    // the partial third block gives 8 tokens and ends the match) = 40; chat 13 reuses chat 12's
    // 5 blocks (16*4 + 6 cached, it needs 16*5) = 70.
    assert_eq!(ideal_prefix_hits(&t), vec![0, 0, 40, 70, 0]);
    assert_eq!(a.prefix_cache.hit_tokens, 110);
    assert_eq!(a.prefix_cache.input_tokens, 236);
    assert_eq!(a.block_size, 16);
    let text = render_analysis(&a);
    assert!(
        text.contains("Sessions:                                3\n"),
        "{text}"
    );
    assert!(
        text.contains("Request types:                           image 1, search 1, text 3\n"),
        "{text}"
    );
}

#[test]
fn azure_has_no_cache_hits() {
    let t = fixture("azure.csv");
    let a = analyze(&t, &AnalyzeOptions::default());
    assert_eq!(a.requests, 4);
    assert_eq!(a.requests_with_hash_ids, 0);
    assert_eq!(a.prefix_cache.hit_ratio, 0.0);
    assert_eq!(a.distinct_prefix_blocks, 0);
    assert!(a.lru_sweep.iter().all(|l| l.hit_tokens == 0));
    assert!((a.duration_s - 14.4428667).abs() < 1e-6);
    assert_eq!(a.output_length.max, 109);
}

/// `analyze` streams a trace into compact columns (`read_columns`); every number must be what
/// the analysis of the loaded trace gives, for every format, with sessions, through the
/// whole-file fallbacks (Bailian links; a file out of time order by more than the window).
#[test]
fn streamed_analysis_equals_the_loaded_one() {
    use request_sim::analyze::RoutingOptions;
    use request_sim::analyze::{analyze_columns, read_columns};
    let opts = AnalyzeOptions {
        routing: Some(RoutingOptions {
            instances: 2,
            policies: Vec::new(),
            capacity_tokens: 2048,
        }),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions.jsonl");
    let mut text = String::new();
    for i in 0..40u64 {
        let s = i % 5;
        text.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": {}, \"hash_ids\": [{s}, {}], \"session_id\": \"s{s}\"}}\n",
            i * 700 + s * 13,
            900 + i * 7,
            10 + i,
            100 + i,
        ));
    }
    std::fs::write(&sessions, &text).unwrap();
    // Row 4 is 35 s before row 3: beyond the default 10 s reorder window.
    let shuffled = dir.path().join("shuffled.jsonl");
    std::fs::write(
        &shuffled,
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1]}\n\
         {\"timestamp\": 20000, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}\n\
         {\"timestamp\": 40000, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [1, 3]}\n\
         {\"timestamp\": 5000, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [1, 2, 4]}\n",
    )
    .unwrap();
    let mut paths: Vec<std::path::PathBuf> = [
        "mooncake.jsonl",
        "mooncake.jsonl.gz",
        "generic.jsonl",
        "bailian.jsonl",
        "azure.csv",
        "azure2024.csv",
        "burstgpt.csv",
        "conversations_no_sessions.jsonl",
    ]
    .into_iter()
    .map(trace_fixture)
    .collect();
    paths.extend([sessions, shuffled]);
    for path in paths {
        let lopts = LoadOptions::default();
        let loaded = analyze(&load(&path, &lopts).unwrap(), &opts);
        let streamed = analyze_columns(read_columns(&path, &lopts).unwrap(), &opts);
        assert_eq!(streamed, loaded, "{}", path.display());
    }
}
