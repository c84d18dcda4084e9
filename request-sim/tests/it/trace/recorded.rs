//! The two recorded formats without hash ids: BurstGPT (CSV, seconds from the first day's
//! midnight, failed requests with 0 response tokens kept or dropped) and Azure 2024 (the
//! week-long CSVs: Azure 2023's columns, timestamps with a `+00:00` offset). Fixtures:
//! tests/data/traces/burstgpt.csv, azure2024.csv.

use request_sim::analyze::{analyze, AnalyzeOptions};
use request_sim::trace::{load, LoadOptions, ReorderWindow, TraceFormat, TraceStream};

use crate::support::{run_cli, trace_fixture};

#[test]
fn burstgpt_keeps_or_drops_failed_requests_and_counts_them() {
    let path = trace_fixture("burstgpt.csv");
    let t = load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(t.format, TraceFormat::from_name("burstgpt").unwrap());
    let times: Vec<f64> = t.requests.iter().map(|r| r.timestamp_ms).collect();
    assert_eq!(
        times,
        vec![0.0, 40_000.0, 40_000.0, 105_500.0, 3_595_000.0, 3_656_000.0]
    );
    let lengths: Vec<(u32, u32)> = t
        .requests
        .iter()
        .map(|r| (r.input_length, r.output_length))
        .collect();
    assert_eq!(
        lengths,
        vec![
            (472, 18),
            (1087, 0),
            (230, 75),
            (417, 505),
            (96, 0),
            (2048, 301)
        ]
    );
    assert!(t.requests.iter().all(|r| r.hash_ids.is_empty()));
    assert_eq!((t.stats.failed_requests, t.stats.dropped_failed), (2, 0));
    assert_eq!(t.stats.rows, 6);

    let opts = LoadOptions {
        drop_failed: true,
        ..LoadOptions::default()
    };
    let t = load(&path, &opts).unwrap();
    let lines: Vec<usize> = t.requests.iter().map(|r| r.line).collect();
    assert_eq!(lines, vec![2, 4, 5, 7]);
    assert_eq!((t.stats.failed_requests, t.stats.dropped_failed), (2, 2));
    // The streamed form agrees.
    let s = TraceStream::open(&path, &opts, ReorderWindow::default()).unwrap();
    let n = s.collect::<Result<Vec<_>, _>>().unwrap().len();
    assert_eq!(n, 4);
}

#[test]
fn burstgpt_and_azure_2024_in_analyze_say_there_are_no_hash_ids() {
    for (name, extra, failed) in [
        (
            "burstgpt.csv",
            None,
            Some("2 (kept; --drop-failed drops them)"),
        ),
        (
            "burstgpt.csv",
            Some("--drop-failed"),
            Some("2 (dropped by --drop-failed)"),
        ),
        ("azure2024.csv", None, None),
    ] {
        let path = trace_fixture(name);
        let mut args = vec!["analyze", path.to_str().unwrap()];
        args.extend(extra);
        let (code, stdout, stderr) = run_cli(&args, &[]);
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout.contains("none (no hash ids: every prompt is unique)"),
            "{name}: {stdout}"
        );
        match failed {
            Some(f) => assert!(
                stdout.contains(&format!("Failed requests (0 response tokens):  {f}"))
                    || stdout.contains(f),
                "{stdout}"
            ),
            None => assert!(!stdout.contains("Failed requests"), "{stdout}"),
        }
    }
}

#[test]
fn azure_2024_week_csv_with_offsets() {
    let t = load(&trace_fixture("azure2024.csv"), &LoadOptions::default()).unwrap();
    assert_eq!(t.format, TraceFormat::from_name("azure").unwrap());
    let times: Vec<f64> = t.requests.iter().map(|r| r.timestamp_ms).collect();
    let want = [0.0, 3.618, 990.07, 2490.07, 86_399_990.069, 86_400_240.07];
    // Epoch milliseconds in an f64 keep about 0.2 µs: compared to 1 µs.
    for (got, want) in times.iter().zip(want) {
        assert!((got - want).abs() < 1e-3, "{times:?}");
    }
    assert_eq!(t.requests[5].output_length, 0);
    assert_eq!(t.stats.zero_output_length, 1);
    let a = analyze(&t, &AnalyzeOptions::default());
    assert_eq!(a.requests_with_hash_ids, 0);
    assert!(
        (a.duration_s - 86_400.240_07).abs() < 1e-6,
        "{}",
        a.duration_s
    );
}
