//! Coming from AIPerf and vLLM bench: the `aiperf` binary runs AIPerf's trace-replay command
//! line unchanged against llm-sim (its flags mapped onto a replay), and the result files of
//! `--export aiperf,vllm-bench` have those tools' shapes with values equal to the summary's.
//! (The check against AIPerf's own pydantic models is `scripts/aiperf-check.sh`, which needs
//! AIPerf installed.)

use std::path::Path;
use std::process::Command;

use request_sim::compat::aiperf::{split_ignored, AiperfCli, AiperfCommand};
use serde_json::Value;

use crate::support::{data_path, read_json, read_json_lines, read_records, run_cli, start_sim};

const AIPERF_BIN: &str = env!("CARGO_BIN_EXE_aiperf");

/// The first 20 rows of the Mooncake conversation trace (timestamps 0 to 3,000 ms).
fn trace() -> std::path::PathBuf {
    data_path("traces/conversation_20.jsonl")
}

/// A statistic of the summary (`p50_ttft_ms`, `mean_itl_ms`, ...).
fn stat(summary: &Value, key: &str) -> f64 {
    summary[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} in the summary"))
}

fn close(a: f64, b: f64, tol: f64, what: &str) {
    assert!((a - b).abs() <= tol, "{what}: {a} vs {b}");
}

/// The seed command line, unchanged, in a fresh directory (AIPerf's default artifact
/// directory `artifacts` is relative to it).
fn run_seed_command(dir: &Path, url: &str) -> std::process::Output {
    let o = Command::new(AIPERF_BIN)
        .current_dir(dir)
        .args([
            "profile",
            "--model",
            "llm-sim",
            "--endpoint-type",
            "chat",
            "--streaming",
            "--url",
            url,
            "--input-file",
            trace().to_str().unwrap(),
            "--custom-dataset-type",
            "mooncake_trace",
            "--fixed-schedule",
        ])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

#[test]
fn the_seed_command_writes_aiperfs_files_with_the_summarys_values() {
    let sim = start_sim(llm_sim::SimConfig::default());
    let url = sim.base_url().trim_start_matches("http://").to_string();
    let tmp = tempfile::tempdir().unwrap();
    run_seed_command(tmp.path(), &url);
    let art = tmp.path().join("artifacts");
    let recs = read_records(&art.join("request_sim_records.jsonl"));
    assert_eq!(recs.len(), 20);
    let lines = read_json_lines(&art.join("profile_export.jsonl"));
    assert_eq!(lines.len(), 20);
    for (l, r) in lines.iter().zip(&recs) {
        assert!(l["metadata"]["request_start_ns"].as_i64().unwrap() > 1_700_000_000_000_000_000);
        assert_eq!(l["metadata"]["benchmark_phase"], "profiling");
        assert_eq!(l["metrics"]["time_to_first_token"]["unit"], "ms");
        assert_eq!(
            l["metrics"]["input_sequence_length"]["value"],
            r.input_length
        );
        // Streaming with --record-itl: the chunk gaps are there.
        assert!(
            l["metrics"]["inter_chunk_latency"]["value"].is_array(),
            "{l}"
        );
        assert!(l.get("error").is_none());
    }
    let summary = read_json(&art.join("summary.json"));
    let agg = read_json(&art.join("profile_export_aiperf.json"));
    assert_eq!(agg["schema_version"], "1.4");
    assert_eq!(agg["request_count"]["avg"].as_f64(), Some(20.0));
    for (tag, ours) in [
        ("time_to_first_token", "ttft"),
        ("inter_token_latency", "tpot"),
        ("request_latency", "e2el"),
    ] {
        for p in ["p50", "p99"] {
            let key = format!("{p}_{ours}_ms");
            close(
                agg[tag][p].as_f64().unwrap(),
                stat(&summary, &key),
                1e-9,
                &key,
            );
        }
        close(
            agg[tag]["avg"].as_f64().unwrap(),
            stat(&summary, &format!("mean_{ours}_ms")),
            1e-9,
            tag,
        );
    }
    // ITL: the summary keeps it to the microsecond.
    for p in ["p50", "p99"] {
        let key = format!("{p}_itl_ms");
        close(
            agg["inter_chunk_latency"][p].as_f64().unwrap(),
            stat(&summary, &key),
            1e-3,
            &key,
        );
    }
    let csv = std::fs::read_to_string(art.join("profile_export_aiperf.csv")).unwrap();
    assert!(csv.starts_with("Metric,avg,min,max,sum,p1,p5,p10,p25,p50,p75,p90,p95,p99,std\n"));
    let ttft_row = format!(
        "Time to First Token (ms),{:.2},",
        stat(&summary, "mean_ttft_ms")
    );
    assert!(csv.contains(&ttft_row), "{csv}");
    assert!(
        csv.contains("\nMetric,Value\nBenchmark Duration (sec),"),
        "{csv}"
    );
    // inputs.json: every body sent, one session each, in AIPerf's InputsFile shape.
    let inputs = read_json(&art.join("inputs.json"));
    let data = inputs["data"].as_array().unwrap();
    assert_eq!(data.len(), 20);
    for s in data {
        let p = &s["payloads"][0];
        assert_eq!(p["model"], "llm-sim");
        assert_eq!(p["stream"], true);
        assert!(p["messages"].is_array(), "{p}");
    }
}

/// `aiperf profile ...` parsed and translated: the replay arguments and the flags accepted
/// without effect.
fn plan(args: &str) -> (Vec<String>, Vec<String>) {
    use clap::Parser;
    let argv: Vec<String> = args.split_whitespace().map(String::from).collect();
    let (kept, ignored) = split_ignored(&argv[1..]);
    let cli = AiperfCli::try_parse_from(argv[..1].iter().cloned().chain(kept)).unwrap();
    let AiperfCommand::Profile(p) = cli.command;
    (p.replay_argv().unwrap().argv, ignored)
}

fn value<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.iter()
        .position(|a| a == flag)
        .map(|i| argv[i + 1].as_str())
}

#[test]
fn aiperf_flags_map_to_replay_flags_with_aiperfs_defaults() {
    let t = trace().display().to_string();
    let (a, ignored) = plan(&format!(
        "aiperf profile -m M --input-file {t} --concurrency 8 --request-rate 3 \
         --fixed-schedule-start-offset 1000 --fixed-schedule-end-offset 2000 --request-count 7 \
         --benchmark-duration 60 --extra-inputs temperature:0.5 top_k:20 --header X-Team:infra \
         --goodput time_to_first_token:250 output_token_throughput_per_user:50 \
         --artifact-dir out --endpoint-type completions"
    ));
    // AIPerf's defaults: localhost:8000, no streaming, 30 s grace after the duration.
    assert_eq!(
        value(&a, "--endpoint"),
        Some("http://localhost:8000/v1/completions")
    );
    assert!(a.iter().any(|x| x == "--no-stream"));
    assert_eq!(value(&a, "--grace-secs"), Some("30"));
    assert_eq!(value(&a, "--request-timeout"), Some("21600"));
    assert_eq!(value(&a, "--model-name"), Some("M"));
    assert_eq!(value(&a, "--start-ms"), Some("1000"));
    assert_eq!(value(&a, "--end-ms"), Some("2000.000001"));
    assert_eq!(value(&a, "--max-requests"), Some("7"));
    assert_eq!(value(&a, "--time-in-secs"), Some("60"));
    assert_eq!(value(&a, "--header"), Some("X-Team:infra"));
    let body: Value = serde_json::from_str(value(&a, "--extra-body").unwrap()).unwrap();
    assert_eq!(body, serde_json::json!({"temperature": 0.5, "top_k": 20}));
    let i = a.iter().position(|x| x == "--goodput").unwrap();
    assert_eq!(&a[i + 1..i + 3], ["ttft:250", "tpot:20"]);
    assert_eq!(value(&a, "--result-dir"), Some("out"));
    assert_eq!(value(&a, "--export"), Some("aiperf"));
    assert_eq!(ignored, ["--request-rate"]);
    // --concurrency is the lanes of a Weka corpus; on a timestamped trace, a note.
    assert!(value(&a, "--users").is_none());
    // The seed command: streaming chat at the URL given, http:// added.
    let (a, _) = plan(&format!(
        "aiperf profile --model M --endpoint-type chat --streaming --url h:9 --input-file {t} \
         --custom-dataset-type mooncake_trace --fixed-schedule"
    ));
    assert_eq!(
        value(&a, "--endpoint"),
        Some("http://h:9/v1/chat/completions")
    );
    assert!(!a.iter().any(|x| x == "--no-stream"));
    assert_eq!(value(&a, "--result-dir"), Some("artifacts"));
    assert!(a.iter().any(|x| x == "--record-itl"));
}

#[test]
fn a_name_aiperf_does_not_have_is_refused() {
    let o = Command::new(AIPERF_BIN)
        .args(["profile", "--model", "M", "--concurency", "4"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--concurency"));
    let o = Command::new(AIPERF_BIN)
        .args([
            "profile",
            "--model",
            "M",
            "--input-file",
            "/no/such.jsonl",
            "--concurrency",
            "4",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--input-file /no/such.jsonl: no such file"),
        "{err}"
    );
    // A body field request-sim sets itself, named in AIPerf's words.
    let t = trace();
    let o = Command::new(AIPERF_BIN)
        .args([
            "profile",
            "--model",
            "M",
            "--input-file",
            t.to_str().unwrap(),
        ])
        .args(["--extra-inputs", "stream:false"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--extra-inputs") && !err.contains("--extra-body"),
        "{err}"
    );
}

#[test]
fn vllm_bench_json_from_replay_and_report_has_vllms_keys_and_the_summarys_values() {
    let sim = start_sim(llm_sim::SimConfig::default());
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let t = trace();
    let mut args = crate::support::base_args(&sim.base_url(), &t, &out);
    args.extend(
        [
            "--record-itl",
            "--export",
            "vllm-bench,aiperf",
            "--result-dir",
        ]
        .map(String::from),
    );
    args.push(out.display().to_string());
    crate::support::replay(&crate::support::strs(&args));
    let v = read_json(&out.join("vllm-bench.json"));
    let s = read_json(&out.join("summary.json"));
    for k in [
        "date",
        "backend",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "max_concurrent_requests",
        "input_lens",
        "output_lens",
        "ttfts",
        "itls",
        "errors",
    ] {
        assert!(v.get(k).is_some(), "{k} missing");
    }
    assert_eq!(v["completed"], 20);
    assert_eq!(v["model_id"], "llm-sim");
    for k in [
        "mean_ttft_ms",
        "p99_ttft_ms",
        "median_tpot_ms",
        "p50_itl_ms",
        "p99_e2el_ms",
    ] {
        close(stat(&v, k), stat(&s, k), 1e-12, k);
    }
    close(
        stat(&v, "request_throughput"),
        stat(&s, "request_throughput"),
        1e-12,
        "rps",
    );
    let recs = read_records(&out.join("records.jsonl"));
    let ttfts = v["ttfts"].as_array().unwrap();
    assert_eq!(ttfts.len(), 20);
    for (x, r) in ttfts.iter().zip(&recs) {
        close(x.as_f64().unwrap() * 1e3, r.ttft_ms.unwrap(), 1e-9, "ttft");
    }
    let itls = v["itls"].as_array().unwrap();
    assert_eq!(
        itls[3].as_array().unwrap().len(),
        recs[3].itl_ms.as_ref().unwrap().len()
    );
    assert!(v["errors"].as_array().unwrap().iter().all(|e| e == ""));
    // `report` writes the same from the records.
    let again = tmp.path().join("again");
    let (code, _, err) = run_cli(
        [
            "report",
            out.join("records.jsonl").to_str().unwrap(),
            "--export",
            "vllm-bench",
            "--result-dir",
            again.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let w = read_json(&again.join("vllm-bench.json"));
    assert_eq!(w["completed"], 20);
    close(
        stat(&w, "p99_ttft_ms"),
        stat(&v, "p99_ttft_ms"),
        1e-9,
        "p99 ttft",
    );
    assert_eq!(w["ttfts"], v["ttfts"]);
    // --export without --result-dir is refused.
    let (code, _, err) = run_cli(
        [
            "report",
            out.join("records.jsonl").to_str().unwrap(),
            "--export",
            "aiperf",
        ],
        &[],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("--export writes its files into --result-dir"),
        "{err}"
    );
}

#[test]
fn headers_reach_the_server_and_failed_requests_are_aiperf_error_details() {
    use crate::support::{RawServer, Script};
    // Every answer a 503: each record an error, each line of profile_export.jsonl an
    // ErrorDetails; the --header sent with every request.
    let server = RawServer::start(Script::whole(
        "503 Service Unavailable",
        "application/json",
        br#"{"error": "overloaded"}"#,
    ));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let t = crate::support::write_trace(tmp.path(), "t.jsonl", 4, 30.0, 16, 4);
    let mut args = crate::support::base_args(&server.url(""), &t, &out);
    args.extend(
        [
            "--header",
            "X-Team: infra",
            "--export",
            "aiperf",
            "--result-dir",
        ]
        .map(String::from),
    );
    args.push(out.display().to_string());
    crate::support::replay(&crate::support::strs(&args));
    let posts = server.generation_requests();
    assert_eq!(posts.len(), 4);
    assert!(posts
        .iter()
        .all(|r| r.header("x-team").as_deref() == Some("infra")));
    let lines = read_json_lines(&out.join("profile_export.jsonl"));
    assert_eq!(lines.len(), 4);
    for l in &lines {
        assert_eq!(l["error"]["code"], 503, "{l}");
        assert_eq!(l["error"]["type"], "http_error", "{l}");
        assert!(
            l["error"]["message"]
                .as_str()
                .unwrap()
                .contains("overloaded"),
            "{l}"
        );
        assert!(l["metrics"].get("request_latency").is_none(), "{l}");
    }
    let agg = read_json(&out.join("profile_export_aiperf.json"));
    assert_eq!(agg["error_request_count"]["avg"].as_f64(), Some(4.0));
    assert_eq!(agg["error_summary"][0]["count"], 4);
    assert_eq!(agg["error_summary"][0]["error_details"]["code"], 503);
    // A malformed header is refused before anything is sent.
    let e = crate::support::try_replay(&["--endpoint", &server.url(""), "--header", "no-colon"])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("--header \"no-colon\": expected NAME:VALUE"),
        "{e}"
    );
}
