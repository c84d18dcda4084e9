//! What is not known is said so: a statistic without values is "n/a" in every rendering
//! (console, JSON null, xlsx, HTML, compare, which ranks nothing unknown), never 0; `report`
//! of a file without records is an error; `compare` shows whole start times; the ITL panel of
//! `latency_cdf` shows what the records hold.

use std::path::Path;

use crate::support::*;
use calamine::{open_workbook, Data, Reader, Xlsx};
use request_sim::record::{Record, Status};
use request_sim::report::{render_compare, render_console, write_result_dir};
use request_sim::stats::{report_from_records, Metric, ReportConfig, Summary};

/// `n` completed records of 8 output tokens: streamed in 8 chunks (ITL values not kept) when
/// `streamed`, else in one piece (a non-streaming answer).
fn records(n: usize, streamed: bool) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let mut r = base_record(i);
            r.sent_ms = Some(i as f64 * 10.0);
            r.drift_ms = Some(0.01);
            r.ttft_ms = Some(if streamed { 20.0 } else { 90.0 + i as f64 });
            r.ttfc_ms = r.ttft_ms;
            r.e2e_ms = Some(90.0 + i as f64);
            r.done_ms = r.e2e_ms;
            r.output_tokens = Some(8);
            r.chunks = if streamed { 8 } else { 1 };
            r.prompt_tokens = Some(1000);
            r
        })
        .collect()
}

/// The summary of `recs` written to `dir/name.jsonl`, and the file.
fn summarize(dir: &Path, name: &str, recs: &[Record]) -> (Summary, std::path::PathBuf) {
    let path = dir.join(format!("{name}.jsonl"));
    write_jsonl(&path, recs);
    let s = report_from_records(&path, &ReportConfig::default(), None).unwrap();
    (s, path)
}

/// The value of the console row `label` (vLLM's `{:<40} {:<10}` rows).
fn console_value(text: &str, label: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(label) && l[label.len()..].starts_with(' '))
        .map(|l| l[label.len()..].trim().to_string())
}

#[test]
fn unknown_is_na_in_every_rendering() {
    let dir = tempfile::tempdir().unwrap();
    let (nonstream, nonstream_path) = summarize(dir.path(), "nonstream", &records(20, false));
    let (streamed, streamed_path) = summarize(dir.path(), "streamed", &records(20, true));
    // (run, metric, known): a non-streaming answer has no time between tokens (TPOT and ITL
    // unknown); records streamed without --record-itl have TPOT, not ITL.
    let cases = [
        (
            "nonstream",
            &nonstream,
            &nonstream_path,
            "TPOT",
            "tpot",
            false,
        ),
        (
            "nonstream",
            &nonstream,
            &nonstream_path,
            "ITL",
            "itl",
            false,
        ),
        (
            "nonstream",
            &nonstream,
            &nonstream_path,
            "TTFT",
            "ttft",
            true,
        ),
        ("streamed", &streamed, &streamed_path, "TPOT", "tpot", true),
        ("streamed", &streamed, &streamed_path, "ITL", "itl", false),
        ("streamed", &streamed, &streamed_path, "E2EL", "e2el", true),
    ];
    for (run, s, path, label, key, known) in cases {
        let at = format!("{run} {label}");
        // Console.
        let text = render_console(s);
        for stat in ["Mean", "Median", "P99"] {
            let v = console_value(&text, &format!("{stat} {label} (ms):"))
                .unwrap_or_else(|| panic!("{at}: no {stat} row\n{text}"));
            assert_eq!(v == "n/a", !known, "{at} {stat}: {v}\n{text}");
        }
        // JSON: null, never 0.
        let json = serde_json::to_value(s).unwrap();
        for k in [format!("mean_{key}_ms"), format!("p99_{key}_ms")] {
            assert_eq!(json[&k].is_null(), !known, "{at} {k}: {}", json[&k]);
        }
        // And back: the summary reads again with the same statistics.
        let back: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(back.latency, s.latency, "{at}");
        // xlsx and HTML of the result directory.
        let out = dir.path().join(format!("out-{run}"));
        write_result_dir(&out, s, path).unwrap();
        let mut wb: Xlsx<_> = open_workbook(out.join("results.xlsx")).unwrap();
        let metrics = wb.worksheet_range("Metrics").unwrap();
        let cell = metrics
            .rows()
            .find(|r| r[0] == Data::String(format!("mean_{key}_ms")))
            .map(|r| r[1].clone())
            .unwrap_or_else(|| panic!("{at}: no xlsx row"));
        if known {
            assert!(matches!(cell, Data::Float(_)), "{at}: {cell:?}");
        } else {
            assert_eq!(cell, Data::String("n/a".into()), "{at}");
        }
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        let row = format!("<th>Mean {label} (ms)</th><td>n&#x2f;a</td>");
        assert_eq!(html.contains(&row), !known, "{at}: {row}");
        // Compare: unknown is shown as such and never ranked.
        let other = if run == "nonstream" {
            &streamed
        } else {
            &nonstream
        };
        let cmp = render_compare(s, other);
        let line = cmp
            .lines()
            .find(|l| l.starts_with(&format!("Mean {label} (ms)")))
            .unwrap_or_else(|| panic!("{at}\n{cmp}"));
        let other_known = (other.latency.get(metric_of(key)).count) > 0;
        if !known || !other_known {
            assert!(line.contains("n/a"), "{at}: {line}");
            assert!(!line.ends_with('+') && !line.ends_with('!'), "{at}: {line}");
            assert!(!line.contains('%'), "{at}: {line}");
        }
    }
    // The console says why TPOT is missing.
    let text = render_console(&nonstream);
    assert!(
        text.contains("WARNING: TPOT and ITL are unknown for the 20 completed requests whose output came in one piece"),
        "{text}"
    );
    // Peak output tokens/s needs every token's time: unknown without the ITL values.
    assert_eq!(
        console_value(
            &render_console(&streamed),
            "Peak output token throughput (tok/s):"
        )
        .as_deref(),
        Some("n/a")
    );
}

/// Nothing sent: the send drift is unknown too, in the console and in the JSON.
#[test]
fn drift_of_a_run_that_sent_nothing_is_na() {
    let dir = tempfile::tempdir().unwrap();
    let recs: Vec<Record> = (0..3)
        .map(|i| {
            let mut r = base_record(i);
            r.status = Status::Cancelled;
            r
        })
        .collect();
    let (s, _) = summarize(dir.path(), "unsent", &recs);
    let text = render_console(&s);
    for label in ["Mean drift (ms):", "P99 drift (ms):", "Max drift (ms):"] {
        assert_eq!(
            console_value(&text, label).as_deref(),
            Some("n/a"),
            "{text}"
        );
    }
    let json = serde_json::to_value(&s).unwrap();
    assert!(json["drift"]["p99_ms"].is_null(), "{}", json["drift"]);
    assert_eq!(json["drift"]["count"], 0);
    let back: Summary = serde_json::from_value(json).unwrap();
    assert_eq!(back.drift, s.drift);
    // A run that sent: numbers.
    let (sent, _) = summarize(dir.path(), "sent", &records(3, true));
    let json = serde_json::to_value(&sent).unwrap();
    assert_eq!(json["drift"]["p99_ms"], 0.01);
}

fn metric_of(key: &str) -> request_sim::stats::Metric {
    request_sim::stats::Metric::from_key(key).unwrap()
}

#[test]
fn report_of_an_empty_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    // Only a cut-off line: no record either.
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, "{\"index\": 0, \"line\"").unwrap();
    for (path, why) in [(&empty, "no records"), (&cut, "line 1 is incomplete")] {
        let (code, stdout, stderr) = run_cli(["report", path.to_str().unwrap()], &[]);
        assert_ne!(code, 0, "{stdout}");
        assert!(!stdout.contains("Records = scheduled"), "{stdout}");
        assert!(
            stderr.contains(&format!("{}: no records", path.display())),
            "{stderr}"
        );
        assert!(stderr.contains(why), "{stderr}");
    }
    // A directory of empty shards too.
    let shards = dir.path().join("shards");
    std::fs::create_dir(&shards).unwrap();
    std::fs::write(shards.join("a.jsonl"), "").unwrap();
    let (code, _, stderr) = run_cli(["report", shards.to_str().unwrap()], &[]);
    assert_ne!(code, 0);
    assert!(stderr.contains("no records"), "{stderr}");
}

#[test]
fn compare_shows_whole_start_times() {
    let dir = tempfile::tempdir().unwrap();
    let (mut a, _) = summarize(dir.path(), "a", &records(5, true));
    let mut b = a.clone();
    a.run.started_at = Some("2026-11-25T16:21:37.123Z".into());
    b.run.started_at = Some("2026-11-25T18:02:09.456Z".into());
    let cmp = render_compare(&a, &b);
    assert!(cmp.contains("2026-11-25T16:21:37.123Z"), "{cmp}");
    assert!(cmp.contains("2026-11-25T18:02:09.456Z"), "{cmp}");
}

#[test]
fn itl_panel_shows_what_the_records_hold() {
    let dir = tempfile::tempdir().unwrap();
    let sim = start_sim(llm_sim::SimConfig {
        step_fixed_us: 2_000.0,
        ..llm_sim::SimConfig::default()
    });
    let trace = write_trace(dir.path(), "trace.jsonl", 30, 300.0, 16, 6);
    let results = dir.path().join("results");
    let mut args = base_args(&sim.base_url(), &trace, dir.path());
    args.extend(["--result-dir".into(), results.display().to_string()]);
    let out = replay(&strs(&args));
    let itl = &out.summary.latency[Metric::Itl];
    assert_eq!(
        itl.count,
        30 * 5,
        "6 tokens: 5 gaps per request (the role preamble is no token)"
    );
    let svg = std::fs::read_to_string(results.join("latency_cdf.svg")).unwrap();
    assert!(
        !svg.contains("no per-chunk values"),
        "the panel is not empty"
    );
    // The panel draws each request's mean gap, and its caption gives the summary's own ITL
    // figures, which the console prints.
    let caption = format!(
        "ITL: mean gap per request, n=30 (all {} gaps: mean {:.2} ms",
        itl.count, itl.mean
    );
    assert!(svg.contains(&caption), "{caption}");
    let text = render_console(&out.summary);
    assert_eq!(
        console_value(&text, "Mean ITL (ms):"),
        Some(format!("{:.2}", itl.mean))
    );
    // Re-summarised without the values: the console says n/a, the panel still shows the
    // per-request means and says where the per-chunk values went.
    let again = dir.path().join("again");
    let (code, stdout, stderr) = run_cli(
        [
            "report",
            dir.path().join("records.jsonl").to_str().unwrap(),
            "--result-dir",
            again.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        console_value(&stdout, "Mean ITL (ms):").as_deref(),
        Some("n/a")
    );
    let svg = std::fs::read_to_string(again.join("latency_cdf.svg")).unwrap();
    assert!(
        svg.contains(
            "ITL: mean gap per request, n=30 (per-chunk values not recorded: --record-itl)"
        ),
        "{svg}"
    );
}

/// Completed records of answers that were all thinking (6 thinking token events, no answer
/// text) and made no tool call: the answer's statistics and the tool call's have no values.
fn all_thinking(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let mut r = base_record(i);
            r.sent_ms = Some(i as f64 * 10.0);
            r.drift_ms = Some(0.01);
            r.ttft_ms = Some(80.0);
            r.e2e_ms = Some(580.0 + i as f64);
            r.done_ms = r.e2e_ms;
            r.output_tokens = Some(6);
            r.chunks = 6;
            r.reasoning_tokens = Some(6);
            r.answer_tokens = Some(0);
            r
        })
        .collect()
}

#[test]
fn stats_of_a_section_without_values_are_null_and_na() {
    let dir = tempfile::tempdir().unwrap();
    let (s, path) = summarize(dir.path(), "thinking", &all_thinking(5));
    let r = s.reasoning.as_ref().expect("a reasoning section");
    assert_eq!(r.answer_tpot_ms.count, 0);
    assert_eq!(r.reasoning_tpot_ms.count, 5);
    // JSON: every statistic of no values is null, the count 0; known ones are numbers.
    let json = serde_json::to_value(&s).unwrap();
    for key in ["answer_tpot_ms", "ttf_tool_ms"] {
        let m = &json["reasoning"][key];
        assert_eq!(m["count"], 0, "{key}: {m}");
        for stat in ["mean", "median", "std", "min", "max"] {
            assert!(m[stat].is_null(), "{key}.{stat}: {m}");
        }
        let ps = m["percentiles"].as_array().unwrap();
        assert_eq!(ps.len(), s.percentiles.len(), "{key}: {m}");
        assert!(ps.iter().all(|p| p[1].is_null()), "{key}: {m}");
    }
    assert!(
        json["reasoning"]["reasoning_tpot_ms"]["mean"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // No answer came: TTFA is unknown in the flat keys too.
    assert_eq!(json["count_ttfa"], 0);
    assert!(json["p99_ttfa_ms"].is_null(), "{}", json["p99_ttfa_ms"]);
    // Read back: the same statistics.
    let back: Summary = serde_json::from_value(json).unwrap();
    assert_eq!(back.reasoning, s.reasoning);
    // Console: n/a, never 0.
    let text = render_console(&s);
    assert_eq!(
        console_value(&text, "Answer TPOT P50 (ms):").as_deref(),
        Some("n/a"),
        "{text}"
    );
    assert_eq!(
        console_value(&text, "Time to first answer P50 / P99 (ms):").as_deref(),
        Some("n/a / n/a"),
        "{text}"
    );
    // xlsx Metrics sheet and the HTML page: n/a.
    let out = dir.path().join("out");
    write_result_dir(&out, &s, &path).unwrap();
    let mut wb: Xlsx<_> = open_workbook(out.join("results.xlsx")).unwrap();
    let metrics = wb.worksheet_range("Metrics").unwrap();
    for key in [
        "reasoning.answer_tpot_ms.mean",
        "reasoning.ttf_tool_ms.median",
    ] {
        let cell = metrics
            .rows()
            .find(|r| r[0] == Data::String(key.into()))
            .map(|r| r[1].clone())
            .unwrap_or_else(|| panic!("no xlsx row {key}"));
        assert_eq!(cell, Data::String("n/a".into()), "{key}");
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("<th>Answer TPOT P50 (ms)</th><td>n&#x2f;a</td>"),
        "answer TPOT in the HTML"
    );
}
