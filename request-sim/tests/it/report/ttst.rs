//! A latency metric added through its row of `stats/latency.rs` (time to second token, the
//! record's `ttst_ms`) reaches every output: the summary's flat keys, the console and HTML,
//! `requests.csv`, and the AIPerf export (per request and aggregated, with AIPerf's own TTST:
//! the gap after the first token), next to the AIPerf gaps of issue #55 (the reasoning token
//! count aggregated, the time to first output token exported).

use request_sim::record::Record;
use request_sim::report::export::{write_exports, ExportKind};
use request_sim::report::{render_console, write_result_dir};
use request_sim::stats::{report_from_records, Metric, ReportConfig};

use crate::support::{base_record, np_percentile, read_json, read_json_lines, write_jsonl};

/// `n` completed streamed records of 8 tokens; the odd ones thought for 3 tokens first.
fn records(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let mut r = base_record(i);
            let ttft = 20.0 + i as f64;
            r.sent_ms = Some(i as f64 * 10.0);
            r.drift_ms = Some(0.0);
            r.ttft_ms = Some(ttft);
            r.ttfc_ms = Some(ttft);
            r.ttst_ms = Some(ttft + 5.0 + (i % 3) as f64);
            r.e2e_ms = Some(ttft + 70.0);
            r.done_ms = r.e2e_ms;
            r.output_tokens = Some(8);
            r.chunks = 8;
            r.prompt_tokens = Some(1000);
            if i % 2 == 1 {
                r.reasoning_tokens = Some(3);
                r.answer_tokens = Some(5);
                r.ttfa_ms = Some(ttft + 30.0);
            }
            r
        })
        .collect()
}

#[test]
fn time_to_second_token_reaches_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let recs = records(10);
    let path = dir.path().join("records.jsonl");
    write_jsonl(&path, &recs);
    let s = report_from_records(&path, &ReportConfig::default(), None).unwrap();
    let ttst: Vec<f64> = recs.iter().filter_map(|r| r.ttst_ms).collect();

    // Summary: vLLM-style flat keys.
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["count_ttst"], 10);
    let p99 = json["p99_ttst_ms"].as_f64().unwrap();
    assert!((p99 - np_percentile(&ttst, 99.0)).abs() < 1e-9, "{p99}");
    assert_eq!(s.latency[Metric::Ttst].count, 10);

    // Console (and so HTML): its own section.
    let text = render_console(&s);
    assert!(text.contains("Time to Second Token"), "{text}");
    let median = format!("{:.2}", np_percentile(&ttst, 50.0));
    assert!(
        text.lines()
            .any(|l| l.starts_with("Median TTST (ms):") && l.trim_end().ends_with(&median)),
        "{text}"
    );

    // requests.csv: its column, one value per record.
    let out = dir.path().join("out");
    write_result_dir(&out, &s, &path).unwrap();
    let mut csv = csv::Reader::from_path(out.join("requests.csv")).unwrap();
    let head = csv.headers().unwrap().clone();
    let col = head
        .iter()
        .position(|h| h == "ttst_ms")
        .expect("ttst_ms column");
    let cells: Vec<f64> = csv
        .records()
        .map(|r| r.unwrap()[col].parse().unwrap())
        .collect();
    assert_eq!(cells, ttst);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Median TTST (ms)"), "TTST in the HTML");

    // AIPerf: its TTST is the gap after the first token.
    let files = write_exports(&out, &[ExportKind::Aiperf], &s, &recs).unwrap();
    assert!(!files.is_empty());
    let lines = read_json_lines(&out.join("profile_export.jsonl"));
    for (l, r) in lines.iter().zip(&recs) {
        let m = &l["metrics"];
        let gap = r.ttst_ms.unwrap() - r.ttft_ms.unwrap();
        assert_eq!(m["time_to_second_token"]["value"].as_f64(), Some(gap));
        // The time to the first output token: the answer's after thinking, else the TTFT.
        let ttfo = r.ttfa_ms.or(r.ttft_ms).unwrap();
        assert_eq!(
            m["time_to_first_output_token"]["value"].as_f64(),
            Some(ttfo)
        );
        assert_eq!(
            m["reasoning_token_count"]["value"].as_u64(),
            r.reasoning_tokens.map(u64::from)
        );
    }
    let agg = read_json(&out.join("profile_export_aiperf.json"));
    assert_eq!(agg["time_to_second_token"]["count"], 10);
    assert_eq!(agg["time_to_first_output_token"]["count"], 10);
    assert_eq!(agg["time_to_first_output_token"]["unit"], "ms");
    // Thinking tokens of the 5 records that thought: in the aggregates too.
    assert_eq!(agg["reasoning_token_count"]["count"], 5);
    assert_eq!(agg["reasoning_token_count"]["avg"], 3.0);
    let csv = std::fs::read_to_string(out.join("profile_export_aiperf.csv")).unwrap();
    for header in [
        "Time to Second Token (ms)",
        "Time to First Output Token (ms)",
        "Reasoning Token Count (tokens)",
    ] {
        assert!(csv.contains(header), "{header}\n{csv}");
    }
}
