//! Server-side percentiles only as fine as the histogram's buckets (issue #26, defect 3): with
//! vLLM's request-latency bounds (the first bucket is `(0, 0.3 s]`) and latencies far below the
//! first bound, interpolating inside the bucket invented 150 ms medians next to a 0.1 ms mean.

use std::io::Write;

use request_sim::observe::summary::HistSummary;
use request_sim::observe::{parse, HistTotals, ServerView};
use request_sim::report::server::render_hist;

/// vLLM's `request_latency` buckets (e2e, queue, prefill, decode), seconds.
const VLLM_LATENCY: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A vLLM page with one histogram `name` holding `values` (seconds).
fn page(name: &str, values: &[f64]) -> String {
    let mut s = format!("# TYPE vllm:{name} histogram\n");
    for le in VLLM_LATENCY {
        let n = values.iter().filter(|v| **v <= *le).count();
        s += &format!("vllm:{name}_bucket{{engine=\"0\",le=\"{le}\"}} {n}\n");
    }
    s += &format!(
        "vllm:{name}_bucket{{engine=\"0\",le=\"+Inf\"}} {n}\nvllm:{name}_sum{{engine=\"0\"}} {}\nvllm:{name}_count{{engine=\"0\"}} {n}\n",
        values.iter().sum::<f64>(),
        n = values.len()
    );
    s
}

/// The run's histogram of `values` (seconds), as the summary sees it: the delta from an empty
/// page.
fn hist(name: &str, values: &[f64]) -> HistTotals {
    let view = |v: &[f64]| ServerView::of(&parse(&page(name, v)).unwrap());
    let (a, b) = (view(&[]), view(values));
    let pick = |v: ServerView| match name {
        "e2e_request_latency_seconds" => v.e2e,
        _ => v.queue,
    };
    pick(a).unwrap().delta(&pick(b).unwrap())
}

#[test]
fn sub_bucket_latencies_give_bounds_not_invented_percentiles() {
    // 20 requests of 50..145 ms end to end (mean 97.5 ms), all inside (0, 300 ms].
    let e2e: Vec<f64> = (0..20).map(|i| 0.050 + 0.005 * i as f64).collect();
    let h = HistSummary::of(&hist("e2e_request_latency_seconds", &e2e));
    // Interpolation would say 150 ms (half-way into the first bucket).
    assert!(
        (hist("e2e_request_latency_seconds", &e2e)
            .quantile_ms(0.5)
            .unwrap()
            - 150.0)
            .abs()
            < 1e-9
    );
    assert_eq!((h.p50_ms, h.p99_ms), (None, None), "{h:?}");
    let mean = h.mean_ms.unwrap();
    assert!((mean - 97.5).abs() < 1e-6);
    // The median is at most twice the mean (Markov); p99 at most the bucket's bound.
    let (lo, hi) = h.p50_bounds_ms.unwrap();
    assert_eq!(lo, 0.0);
    assert!((hi.unwrap() - 2.0 * mean).abs() < 1e-6, "{h:?}");
    assert_eq!(h.p99_bounds_ms, Some((0.0, Some(300.0))));
    assert!(h.coarse);
    assert_eq!(render_hist(&h), "97.5 / 0–195 / 0–300");

    // Queue times of ~0.1 ms: never a 150 ms median.
    let queue = vec![0.0001; 30];
    let q = HistSummary::of(&hist("request_queue_time_seconds", &queue));
    assert_eq!(q.p50_ms, None);
    assert_eq!(render_hist(&q), "0.1 / 0–0.2 / 0–10");
}

#[test]
fn wide_buckets_give_ranges_and_narrow_ones_values() {
    // Half at 0.6 s, half at 3 s: the median lies in (0.5, 0.8], p99 in (2.5, 5].
    let mut v = vec![0.6; 10];
    v.extend([3.0; 10]);
    let h = HistSummary::of(&hist("e2e_request_latency_seconds", &v));
    assert_eq!(h.p50_bounds_ms, Some((500.0, Some(800.0))));
    assert_eq!(h.p99_bounds_ms, Some((2500.0, Some(5000.0))));
    assert_eq!(render_hist(&h), "1800.0 / 500–800 / 2500–5000");
    // Beyond the last finite bound: only a lower bound (and the mean's).
    let far = HistSummary::of(&hist("e2e_request_latency_seconds", &[8000.0; 4]));
    assert_eq!(far.p50_bounds_ms, Some((7_680_000.0, Some(16_000_000.0))));
    assert_eq!(far.p50_ms, None);

    // A narrow bucket ((1.0, 1.1] s: 10% of its bound) supports an interpolated value.
    let fine = HistTotals {
        sum: 10.5,
        count: 10.0,
        buckets: vec![(1.0, 0.0), (1.1, 10.0)],
    };
    let f = HistSummary::of(&fine);
    assert!((f.p50_ms.unwrap() - 1050.0).abs() < 1e-9, "{f:?}");
    assert!(!f.coarse);
    // One format all the same: the range (here tightened to the bucket, 1000–1100 ms).
    assert_eq!(render_hist(&f), "1050.0 / 1000–1100 / 1000–1100");
    let far_text = render_hist(&far);
    assert_eq!(far_text, "8000000.0 / 7680000–16000000 / 7680000–800000000");
}

/// The demo (a replay against the built-in simulator, whose histograms use vLLM's bounds): no
/// server percentile the summary reports may exceed what its mean allows (a latency's
/// q-quantile is at most mean / (1 - q)).
#[test]
fn demo_summary_reports_no_percentile_the_histogram_cannot_support() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let mut f = std::fs::File::create(&trace).unwrap();
    for i in 0..40 {
        writeln!(
            f,
            r#"{{"timestamp": {}, "input_length": 100, "output_length": 2, "hash_ids": [{i}, {}]}}"#,
            i * 25,
            100 + i
        )
        .unwrap();
    }
    drop(f);
    let out = dir.path().join("out.jsonl");
    let argv = [
        "--quiet",
        "--block-size",
        "64",
        "--dataset-path",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    let outcome = crate::support::replay(&argv);
    let srv = outcome
        .summary
        .server
        .expect("the demo scrapes the simulator");
    let json = serde_json::to_value(&srv.cluster).unwrap();
    let mut seen = 0;
    for name in ["ttft", "e2e", "queue"] {
        let h = &json[name];
        let Some(mean) = h["mean_ms"].as_f64() else {
            continue;
        };
        for (field, q) in [("p50_ms", 0.5), ("p90_ms", 0.9), ("p99_ms", 0.99)] {
            if let Some(p) = h[field].as_f64() {
                assert!(
                    p <= mean / (1.0 - q) + 1e-9,
                    "server {name} {field} = {p} ms with a mean of {mean} ms: {h}"
                );
            }
        }
        seen += 1;
    }
    assert_eq!(seen, 3, "{json}");
}
