//! `--result-dir` contents: summary.json, requests.csv, results.xlsx (read back with calamine),
//! PNG and SVG plots, report.html.
//!
//! Set `REPORT_PLOT_DIR=/some/dir` to keep the files for a look.

use std::path::Path;

use crate::support::{png_size, synthetic, write_jsonl};
use calamine::{open_workbook, Data, Reader, Xlsx};
use request_sim::report::{read_summary, write_result_dir};
use request_sim::stats::Metric;
use request_sim::stats::{report_from_records, ReportConfig, Slo};

#[test]
fn result_dir_has_all_files() {
    let keep = std::env::var_os("REPORT_PLOT_DIR");
    let tmp = tempfile::tempdir().unwrap();
    let dir = keep
        .as_ref()
        .map(|p| Path::new(p).to_path_buf())
        .unwrap_or_else(|| tmp.path().join("results"));
    let recs = synthetic(1500, 99);
    let jsonl = tmp.path().join("run.jsonl");
    write_jsonl(&jsonl, &recs);
    let cfg = ReportConfig {
        slo: Slo::parse(&["ttft:200".into()]).unwrap(),
        ..ReportConfig::default()
    };
    let summary = report_from_records(&jsonl, &cfg, None).unwrap();
    let files = write_result_dir(&dir, &summary, &jsonl).unwrap();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for f in [
        "summary.json",
        "requests.csv",
        "results.xlsx",
        "ttft_over_time.png",
        "ttft_over_time.svg",
        "e2el_over_time.png",
        "e2el_over_time.svg",
        "latency_cdf.png",
        "latency_cdf.svg",
        "throughput_inflight.png",
        "throughput_inflight.svg",
        "drift_histogram.png",
        "drift_histogram.svg",
        "report.html",
    ] {
        assert!(names.iter().any(|n| n == f), "missing {f}: {names:?}");
        assert!(dir.join(f).metadata().unwrap().len() > 0);
    }

    // summary.json reads back.
    let back = read_summary(&dir.join("summary.json")).unwrap();
    assert_eq!(back.completed, summary.completed);
    assert_eq!(back.good_requests, summary.good_requests);

    // CSV: header + one row per record.
    let csv = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    assert_eq!(csv.lines().count(), recs.len() + 1);
    assert!(csv.starts_with("index,line,timestamp_ms,"));

    // xlsx opens with a standard reader, with the expected sheets and rows.
    let mut wb: Xlsx<_> = open_workbook(dir.join("results.xlsx")).unwrap();
    assert_eq!(
        wb.sheet_names(),
        vec!["Metrics".to_string(), "Details".to_string()]
    );
    let metrics = wb.worksheet_range("Metrics").unwrap();
    let find = |key: &str| {
        metrics
            .rows()
            .find(|r| r[0] == Data::String(key.to_string()))
            .map(|r| r[1].clone())
    };
    assert_eq!(
        find("completed"),
        Some(Data::Float(summary.completed as f64))
    );
    match find("p99_ttft_ms") {
        Some(Data::Float(v)) => {
            assert!((v - summary.latency[Metric::Ttft].percentile(99.0).unwrap()).abs() < 1e-9)
        }
        other => panic!("p99_ttft_ms: {other:?}"),
    }
    assert!(find("run.tool_version").is_some());
    let details = wb.worksheet_range("Details").unwrap();
    assert_eq!(details.height(), recs.len() + 1);
    assert_eq!(details.get((0, 0)), Some(&Data::String("index".into())));
    assert_eq!(details.get((1, 6)), Some(&Data::String("ok".into())));

    // PNGs are real images of a reasonable size; SVGs are SVG.
    for name in [
        "ttft_over_time",
        "e2el_over_time",
        "latency_cdf",
        "throughput_inflight",
        "drift_histogram",
    ] {
        let png = dir.join(format!("{name}.png"));
        let (w, h) = png_size(&png);
        assert!(
            (800..=2000).contains(&w) && (500..=1500).contains(&h),
            "{name}: {w}x{h}"
        );
        let len = png.metadata().unwrap().len();
        assert!(len > 10_000 && len < 5_000_000, "{name}.png is {len} bytes");
        let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
        assert!(svg.contains("<text"), "{name}.svg has no text");
    }
    check_report_html(&dir, &summary, 5);
}

/// `report.html` holds the summary's key numbers and `charts` embedded charts, and loads
/// nothing from the network.
fn check_report_html(dir: &Path, s: &request_sim::stats::Summary, charts: usize) {
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    let row = |label: &str, value: String| {
        let cell = format!("<tr><th>{label}</th><td>{value}</td></tr>");
        assert!(html.contains(&cell), "no {cell}");
    };
    row("Successful requests", s.completed.to_string());
    row("Failed requests", s.failed.to_string());
    row(
        "Request throughput (req&#x2f;s)",
        format!("{:.2}", s.request_throughput),
    );
    row(
        "P99 TTFT (ms)",
        format!("{:.2}", s.latency[Metric::Ttft].percentile(99.0).unwrap()),
    );
    row("P99 drift (ms)", format!("{:.2}", s.drift.p99_ms));
    if let Some(g) = s.request_goodput {
        row("Request goodput (req&#x2f;s)", format!("{g:.2}"));
    }
    for w in &s.warnings {
        let first_word = w.split(' ').next().unwrap();
        assert!(html.contains(&format!("WARNING: {first_word}")), "{w}");
    }
    assert_eq!(html.matches("src=\"data:image/").count(), charts);
    assert!(!html.contains("http://") && !html.contains("https://"));
    assert!(!html.contains("<script") && !html.contains("<link"));
}

#[test]
fn plots_handle_no_completed_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let mut recs = synthetic(5, 1);
    for r in &mut recs {
        r.status = request_sim::record::Status::ConnectError;
        r.ttft_ms = None;
        r.e2e_ms = None;
        r.itl_ms = None;
    }
    let jsonl = tmp.path().join("run.jsonl");
    write_jsonl(&jsonl, &recs);
    let s = report_from_records(&jsonl, &ReportConfig::default(), None).unwrap();
    let files = write_result_dir(&tmp.path().join("out"), &s, &jsonl).unwrap();
    assert_eq!(files.len(), 14);
    // Run information is found next to the records file.
    let mut info = request_sim::stats::RunInfo::new();
    info.seed = Some(77);
    info.outcome.scheduled = 5;
    let mut with_info = s.clone();
    with_info.run = info;
    request_sim::report::write_summary_json(&tmp.path().join("run.jsonl.summary.json"), &with_info)
        .unwrap();
    let found = request_sim::report::find_run_info(&jsonl).unwrap();
    assert_eq!(found.seed, Some(77));
    // Even an empty records file (whose summary `report` refuses: nothing to report).
    let empty = tmp.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    assert!(report_from_records(&empty, &ReportConfig::default(), None).is_err());
    let s = request_sim::stats::Accumulator::new(&ReportConfig::default())
        .finish(&request_sim::stats::RunInfo::new());
    write_result_dir(&tmp.path().join("out2"), &s, &empty).unwrap();
}
