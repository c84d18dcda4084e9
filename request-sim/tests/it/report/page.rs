//! `report.html` and the console as a new user meets them, with the built binary: the demo
//! writes its page and says where; every page shows its charts before its tables; a sweep
//! that carried nothing is not shown as a success; the header names every model a
//! `--model-map` run served; an image run shows its `images` section on the console and the
//! page (a run without images shows none).

use std::path::{Path, PathBuf};

use crate::support::*;
use request_sim::stats::Summary;

/// `text` escaped as minijinja escapes HTML.
fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#x27;")
        .replace('/', "&#x2f;")
}

/// Runs `request-sim ARGS...` in `cwd` to its end: exit code, stdout, stderr.
fn run_in(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = command(BIN, args, &[])
        .current_dir(cwd)
        .output()
        .expect("run request-sim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The ids of the page's charts, in the page's order.
fn figures(html: &str) -> Vec<&str> {
    html.split("<figure id=\"")
        .skip(1)
        .map(|f| &f[..f.find('"').unwrap()])
        .collect()
}

/// The page's charts come before its first table, `first` the first of them.
fn assert_charts_first(html: &str, first: &[&str]) {
    let img = html.find("<img").expect("a chart");
    let table = html.find("<table").expect("a table");
    assert!(img < table, "a table before the first chart");
    assert_eq!(&figures(html)[..first.len()], first);
}

/// The path a stderr line `request-sim: WHAT: PATH...` names.
fn said(stderr: &str, what: &str) -> PathBuf {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix(&format!("request-sim: {what}: ")))
        .unwrap_or_else(|| panic!("no {what:?} line in\n{stderr}"));
    PathBuf::from(line.split(' ').next().unwrap())
}

#[test]
fn the_demo_writes_its_report_page_with_the_charts_first() {
    let cwd = tempfile::tempdir().unwrap();
    let args = ["replay", "--max-requests", "20", "--no-pin"];
    let (code, _, stderr) = run_in(cwd.path(), &args);
    assert_eq!(code, 0, "{stderr}");
    // Said at the end, beside the other outputs: the page in the result directory, which is
    // the records' name without `.jsonl`.
    let records = said(&stderr, "records");
    let page = said(&stderr, "report");
    assert_eq!(page, records.with_extension("").join("report.html"));
    assert!(page.starts_with("results"), "{}", page.display());
    let html = std::fs::read_to_string(cwd.path().join(&page)).unwrap();
    let summary = read_summary_file(&cwd.path().join(page.with_file_name("summary.json")));
    assert_eq!(summary.completed, 20);
    assert!(html.contains(&format!(
        "<tr><th>Successful requests</th><td>{}</td></tr>",
        summary.completed
    )));
    assert_charts_first(&html, &["throughput_inflight", "latency_cdf"]);
    assert!(html.find("<h2 id=\"plots\">") < html.find("<h2 id=\"summary\">"));
    // Run again: a new directory, the first run's page left as it was.
    let (code, _, stderr) = run_in(cwd.path(), &args);
    assert_eq!(code, 0, "{stderr}");
    let again = said(&stderr, "report");
    assert_ne!(again, page);
    assert_eq!(
        std::fs::read_to_string(cwd.path().join(&page)).unwrap(),
        html
    );
    assert!(cwd.path().join(&again).is_file());
}

#[test]
fn a_sweep_whose_lowest_point_fell_short_is_not_shown_as_a_success() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let lines: Vec<String> = (0..20)
        .map(|i| {
            format!(
                r#"{{"timestamp": {}, "input_length": 64, "output_length": 4, "hash_ids": [{i}]}}"#,
                i * 50
            )
        })
        .collect();
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    // Every engine step takes 5 ms: no first token comes within the 1 ms SLO at any load.
    let sim = start_sim(llm_sim::SimConfig {
        step_fixed_us: 5_000.0,
        ..llm_sim::SimConfig::default()
    });
    let sweep_dir = dir.path().join("sweep");
    let (code, _, stderr) = run_cli(
        [
            "sweep",
            "--scale-factors",
            "1,2",
            "--goodput",
            "ttft:1",
            "--target",
            "0.9",
            "--sweep-dir",
            sweep_dir.to_str().unwrap(),
            "--endpoint",
            &sim.base_url(),
            "--dataset-path",
            trace.to_str().unwrap(),
            "--block-size",
            "64",
            "--seed",
            "3",
            "--quiet",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let r = read_sweep(&sweep_dir);
    assert_eq!(r.points.len(), 2);
    assert!(
        r.points.iter().all(|p| p.good_fraction == Some(0.0)),
        "{r:?}"
    );
    assert_eq!(r.capacity_scale_factor, None);
    assert!(
        r.answer.starts_with("capacity: below scale 1:"),
        "{}",
        r.answer
    );
    let html = std::fs::read_to_string(sweep_dir.join("report.html")).unwrap();
    // Red, and said plainly before the answer; nothing green.
    assert!(
        html.contains(&format!(
            "<p class=\"answer-failed\"><b>No capacity found: even the lowest point fell short of the target, so the server did not carry any load of this sweep; sweep lower scale factors.</b>{}</p>",
            escaped(&r.answer)
        )),
        "{html}"
    );
    assert!(!html.contains("class=\"answer\""), "{html}");
    // The chart before the table of points.
    assert_charts_first(&html, &["sweep"]);
}

#[test]
fn the_page_header_names_every_model_a_model_map_served() {
    let sim = start_sim(llm_sim::SimConfig {
        model_name: "qwen3-8b".into(),
        model_aliases: vec!["llama-70b".into()],
        block_size: 16,
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("res");
    let mut args = vec!["replay".to_string()];
    args.extend(base_args(
        &sim.base_url(),
        &data_path("copilot/date=2026-06-01"),
        dir.path(),
    ));
    args.extend(
        [
            "--model-map",
            "Model A=qwen3-8b,Model B=llama-70b,Model C=qwen3-8b,*=llama-70b",
            "--max-idle-gap",
            "0.05",
            "--result-dir",
            res.to_str().unwrap(),
        ]
        .map(String::from),
    );
    let (code, _, stderr) = run_cli(&args, &[]);
    assert_eq!(code, 0, "{stderr}");
    let s: Summary = read_summary_file(&res.join("summary.json"));
    let served = &s.models.as_ref().expect("per-model rows").served;
    assert_eq!(served.len(), 2, "{served:?}");
    let each: Vec<String> = served
        .iter()
        .map(|r| format!("{} ({} requests)", r.model, r.requests))
        .collect();
    let html = std::fs::read_to_string(res.join("report.html")).unwrap();
    assert!(
        html.contains(&format!(
            "<span><b>models:</b> 2 served: {}</span>",
            each.join(", ")
        )),
        "{html}"
    );
    // Not one setting's name (`--model-name llm-sim`) for a run served as two models.
    assert!(!html.contains("<b>model:</b>"), "{html}");
}

#[test]
fn an_image_run_shows_its_images_section_on_the_console_and_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_fixture("azure_lmm.csv");
    let run = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let records = dir.path().join(format!("{name}.jsonl"));
        let mut args = vec![
            "replay",
            "--dataset-path",
            trace.to_str().unwrap(),
            "--seed",
            "5",
            "--no-pin",
            "--quiet",
            "-o",
            records.to_str().unwrap(),
            "--result-dir",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = run_cli(&args, &[]);
        assert_eq!(code, 0, "{stderr}");
        let s = read_summary_file(&out.join("summary.json"));
        let html = std::fs::read_to_string(out.join("report.html")).unwrap();
        (s, stdout, html)
    };
    let (s, console, html) = run("images", &[]);
    let i = s.images.clone().expect("an images section");
    assert!(i.requests > 0 && i.with_image_usage > 0, "{i:?}");
    let rows = [
        ("Requests with images", i.requests.to_string()),
        ("Images sent", i.images.to_string()),
        (
            "Prompt tokens exact (image requests)",
            format!("{} / {}", i.prompt_exact, i.requests),
        ),
        (
            "Image tokens (server/intended)",
            format!("{} / {}", i.image_tokens, i.image_tokens_intended),
        ),
        (
            "Image tokens exact (requests)",
            format!("{} / {}", i.image_tokens_exact, i.with_image_usage),
        ),
        (
            "Text tokens exact (requests)",
            format!("{} / {}", i.text_tokens_exact, i.with_image_usage),
        ),
    ];
    let header = format!("{0}Images{0}", "-".repeat(22));
    let at = console.find(&header).unwrap_or_else(|| panic!("{console}"));
    for (label, value) in &rows {
        let line = format!("{:<40} {value}", format!("{label}:"));
        assert!(
            console[at..].lines().any(|l| l.trim_end() == line),
            "no {line:?} in\n{console}"
        );
        let cell = format!(
            "<tr><th>{}</th><td>{}</td></tr>",
            escaped(label),
            escaped(value)
        );
        assert!(html.contains(&cell), "no {cell}");
    }
    assert!(html.contains("<h3>Images</h3>"));
    assert_charts_first(&html, &["throughput_inflight", "latency_cdf"]);
    // The same trace sent as text: no images, no section.
    let (s, console, html) = run("text", &["--no-images"]);
    assert_eq!(s.images, None);
    assert!(!console.contains("Images"), "{console}");
    assert!(!html.contains("<h3>Images</h3>"));
}
