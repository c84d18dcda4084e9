//! `request-sim report` over several shards' records: exact merge, union check, exit codes.

use std::ffi::OsStr;
use std::path::Path;

use crate::support::{
    command, default_sim, read_json, read_json_lines, replay_cli, run_cli, synthetic, write_jsonl,
    BIN,
};
use serde_json::Value;

/// `request-sim report ARGS...`: exit code, stdout, stderr.
fn report(args: &[&OsStr]) -> (i32, String, String) {
    run_cli([&[OsStr::new("report")], args].concat(), &[])
}

/// The summary without the parts that describe the input rather than the requests.
fn stats_only(mut v: Value) -> Value {
    let o = v.as_object_mut().unwrap();
    o.remove("run");
    o.remove("warnings");
    v
}

#[test]
fn shards_merge_exactly_and_a_lost_shard_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let all = synthetic(400, 7);
    let shards = tmp.path().join("shards");
    std::fs::create_dir(&shards).unwrap();
    for k in 0..4 {
        let part: Vec<_> = all.iter().filter(|r| r.index % 4 == k).cloned().collect();
        write_jsonl(&shards.join(format!("shard-{k}.jsonl")), &part);
    }
    let concat = tmp.path().join("all.jsonl");
    let mut shuffled = all.clone();
    shuffled.reverse();
    write_jsonl(&concat, &shuffled);

    let (code, merged, err) = report(&[shards.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("every index 0..400 exactly once"), "{err}");
    let (code, single, err1) = report(&[concat.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 0, "{err1}");
    let merged: Value = serde_json::from_str(&merged).unwrap();
    let single: Value = serde_json::from_str(&single).unwrap();
    assert_eq!(merged["status"]["total"], 400);
    assert_eq!(stats_only(merged), stats_only(single));

    // Shard 2 killed mid-run: half its records and a cut-off last line.
    let part: Vec<_> = all
        .iter()
        .filter(|r| r.index % 4 == 2 && r.index < 200)
        .cloned()
        .collect();
    let path2 = shards.join("shard-2.jsonl");
    write_jsonl(&path2, &part);
    let mut text = std::fs::read_to_string(&path2).unwrap();
    text.push_str("{\"index\": 20");
    std::fs::write(&path2, text).unwrap();
    let (code, out, err) = report(&[
        shards.as_os_str(),
        "--expected-requests".as_ref(),
        "400".as_ref(),
    ]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("missing 50: 202, 206, 210"), "{out}");
    assert!(
        out.contains("50 missing from shard 2 (") && out.contains("shard-2.jsonl): 202, 206"),
        "{out}"
    );
    assert!(out.contains("incomplete line 51 ignored"), "{out}");

    // A shard's file given twice: every index of it is duplicated.
    let (code, out, _) = report(&[
        shards.join("shard-0.jsonl").as_os_str(),
        shards.join("shard-1.jsonl").as_os_str(),
        shards.join("shard-1.jsonl").as_os_str(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("duplicated 100:"), "{out}");
    assert!(out.contains("index 1 in shards 1 ("), "{out}");
}

#[test]
fn shards_of_a_dry_run_cover_the_trace_once_with_sessions_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.jsonl");
    let mut text = String::new();
    for i in 0..120 {
        let session = if i % 3 == 0 {
            String::new()
        } else {
            format!(", \"session_id\": \"s{}\"", i % 11)
        };
        text.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": 40, \"output_length\": 4{session}}}\n",
            i * 2
        ));
    }
    std::fs::write(&trace, text).unwrap();
    let dir = tmp.path().join("records");
    std::fs::create_dir(&dir).unwrap();
    for k in 0..3 {
        let out = dir.join(format!("shard-{k}.jsonl"));
        let shard = format!("{k}/3");
        let mut args: Vec<&OsStr> = vec![
            "--dataset-path".as_ref(),
            trace.as_os_str(),
            "--dry-run".as_ref(),
            "--scale-factor".as_ref(),
            "100".as_ref(),
            "--seed".as_ref(),
            "5".as_ref(),
            "--quiet".as_ref(),
            "--output-path".as_ref(),
            out.as_os_str(),
        ];
        // Shard 2 takes its place from the environment, as in a Kubernetes Indexed Job.
        let envs: Vec<(&str, &str)> = if k == 2 {
            vec![
                ("JOB_COMPLETION_INDEX", "2"),
                ("REQUEST_SIM_SHARD_COUNT", "3"),
            ]
        } else {
            args.push(OsStr::new("--shard"));
            args.push(OsStr::new(&shard));
            vec![]
        };
        let (code, err) = replay_cli(&args, &envs);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains(&format!("shard {k}/3")), "{err}");
    }
    let (code, out, err) = report(&[
        dir.as_os_str(),
        "--expected-requests".as_ref(),
        "120".as_ref(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("every index 0..120 exactly once"), "{out}");
    // Every session on exactly one shard; rows without a session dealt round-robin.
    let mut owner = std::collections::HashMap::new();
    for k in 0..3usize {
        for v in read_json_lines(&dir.join(format!("shard-{k}.jsonl"))) {
            let index = v["index"].as_u64().unwrap() as usize;
            match v["session_id"].as_str() {
                Some(s) => assert_eq!(*owner.entry(s.to_string()).or_insert(k), k, "{s}"),
                None => assert_eq!(index % 3, k),
            }
        }
    }
    assert_eq!(owner.len(), 11);

    // Several shards without --seed: refused.
    let (code, err) = replay_cli(
        &[
            "--dataset-path".as_ref(),
            trace.as_os_str(),
            "--dry-run".as_ref(),
            "--shard".as_ref(),
            "0/2".as_ref(),
        ],
        &[],
    );
    assert_ne!(code, 0);
    assert!(err.contains("needs --seed"), "{err}");
}

/// Three shard processes against one server with a common `--start-at` (RFC 3339, Unix
/// seconds, and the environment): none sends before the common start, each reports how far
/// from it its clock started, and the merge holds every index once. A start already past is
/// refused before anything is sent.
#[test]
fn shards_with_a_common_start_never_send_before_it_and_merge_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.jsonl");
    let mut text = String::new();
    for i in 0..90 {
        text.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": 40, \"output_length\": 3, \"hash_ids\": [{i}]}}\n",
            (i / 6) * 100
        ));
    }
    std::fs::write(&trace, text).unwrap();
    let sim = default_sim();
    let base = sim.base_url();
    let dir = tmp.path().join("records");
    std::fs::create_dir(&dir).unwrap();
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(5);
    let rfc = format!("{at:.3}");
    let unix = format!("{:.3}", at.as_millisecond() as f64 / 1e3);
    let children: Vec<_> = (0..3)
        .map(|k| {
            let (shard, out) = (format!("{k}/3"), dir.join(format!("shard-{k}.jsonl")));
            let mut args: Vec<&OsStr> = [
                "replay",
                "--endpoint",
                &base,
                "--block-size",
                "16",
                "--seed",
                "3",
                "--shard",
                &shard,
                "--quiet",
                "--no-pin",
                "--dataset-path",
            ]
            .into_iter()
            .map(OsStr::new)
            .collect();
            args.extend([trace.as_os_str(), "--output-path".as_ref(), out.as_os_str()]);
            let env = [("REQUEST_SIM_START_AT", rfc.as_str())];
            let envs: &[(&str, &str)] = match k {
                0 => {
                    args.extend(["--start-at", &rfc].map(OsStr::new));
                    &[]
                }
                1 => {
                    args.extend(["--start-at", &unix].map(OsStr::new));
                    &[]
                }
                _ => &env,
            };
            command(BIN, args, envs).spawn().unwrap()
        })
        .collect();
    for (k, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "shard {k}: {err}");
        assert!(
            err.contains("waiting") && err.contains("common start"),
            "{err}"
        );
        let summary = read_json(&dir.join(format!("shard-{k}.jsonl.summary.json")));
        let sa = &summary["run"]["start_at"];
        assert_eq!(sa["at"], rfc.as_str(), "shard {k}");
        let offset = sa["clock_start_offset_ms"].as_f64().unwrap();
        let first = sa["first_send_ms"].as_f64().unwrap();
        assert!(
            offset >= 0.0,
            "shard {k} started its clock {offset} ms early"
        );
        assert!(first >= offset, "shard {k} sent at {first} ms");
        assert!(sa["waited_ms"].as_f64().unwrap() > 0.0);
        assert_eq!(summary["completed"], 30, "shard {k}");
    }
    let (code, out, err) = report(&[
        dir.as_os_str(),
        "--expected-requests".as_ref(),
        "90".as_ref(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("every index 0..90 exactly once"), "{out}");

    // A start already past: refused with the time, nothing sent.
    let finished = || {
        sim.metrics()
            .requests_finished
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let before = finished();
    let past = format!(
        "{:.3}",
        jiff::Timestamp::now() - jiff::SignedDuration::from_secs(2)
    );
    let (code, err) = replay_cli(
        &[
            "--endpoint".as_ref(),
            base.as_ref(),
            "--dataset-path".as_ref(),
            trace.as_os_str(),
            "--start-at".as_ref(),
            past.as_ref(),
        ],
        &[],
    );
    assert_ne!(code, 0);
    assert!(err.contains("in the past"), "{err}");
    assert_eq!(finished(), before);
}

/// `request-sim compare A B`: exit code, stdout, stderr.
fn compare(a: &Path, b: &Path) -> (i32, String, String) {
    run_cli([OsStr::new("compare"), a.as_os_str(), b.as_os_str()], &[])
}

/// The A and B columns of a `compare` row (`-` is `None`).
fn compare_row(table: &str, label: &str) -> (Option<f64>, Option<f64>) {
    let line = table
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no row {label:?} in\n{table}"));
    let cols: Vec<&str> = line[label.len()..].split_whitespace().collect();
    let num = |s: &str| s.parse::<f64>().ok();
    (num(cols[0]), num(cols[1]))
}

/// `compare DIR …`: a directory of shards is one merged run, equal to the same records in one
/// file, and different from another run's shards.
#[test]
fn compare_takes_a_directory_of_shards_as_one_merged_run() {
    let tmp = tempfile::tempdir().unwrap();
    // Runs of one trace: every seed's timings, seed 7's requests (lengths and lines), since
    // `compare` refuses runs of different traces.
    let trace = synthetic(400, 7);
    let write_shards = |name: &str, seed: u64| {
        let dir = tmp.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let mut all = synthetic(400, seed);
        for (r, t) in all.iter_mut().zip(&trace) {
            r.input_length = t.input_length;
            r.line = t.line;
        }
        for k in 0..4 {
            let part: Vec<_> = all.iter().filter(|r| r.index % 4 == k).cloned().collect();
            write_jsonl(&dir.join(format!("shard-{k}.jsonl")), &part);
        }
        (dir, all)
    };
    let (a, all_a) = write_shards("a", 7);
    let (b, _) = write_shards("b", 8);
    let concat = tmp.path().join("a-all.jsonl");
    write_jsonl(&concat, &all_a);
    let (_, single, _) = report(&[concat.as_os_str(), "--json".as_ref()]);
    let single: Value = serde_json::from_str(&single).unwrap();

    // The merged directory and the concatenated file are the same run: every row equal.
    let (code, table, err) = compare(&a, &concat);
    assert_eq!(code, 0, "{err}");
    let completed = single["completed"].as_f64().unwrap();
    assert_eq!(
        compare_row(&table, "Successful requests"),
        (Some(completed), Some(completed)),
        "{table}"
    );
    let rows = table
        .lines()
        .filter(|l| l.contains("(ms)") || l.contains("requests"))
        .count();
    assert!(rows > 10, "{table}");
    for line in table.lines().filter(|l| l.contains("(ms)")) {
        let label = line.split("  ").next().unwrap();
        let (x, y) = compare_row(&table, label);
        assert_eq!(x, y, "{line}");
    }
    // The values are the run's own (the single file's report), not just equal to each other.
    for (label, key) in [
        ("Mean TTFT (ms)", "mean_ttft_ms"),
        ("P99 TTFT (ms)", "p99_ttft_ms"),
        ("Mean E2EL (ms)", "mean_e2el_ms"),
    ] {
        let want = single["latency"][key]
            .as_f64()
            .or_else(|| single[key].as_f64())
            .unwrap_or_else(|| panic!("{key} in {single}"));
        let (x, _) = compare_row(&table, label);
        assert!(
            (x.unwrap() - want).abs() < 0.006,
            "{label}: {x:?} vs {want}"
        );
    }

    // Two different merged runs of the trace: their rows differ.
    let (code, table, err) = compare(&a, &b);
    assert_eq!(code, 0, "{err}");
    let (x, y) = compare_row(&table, "Mean TTFT (ms)");
    assert!(x.is_some() && y.is_some() && x != y, "{table}");
}

/// A server whose `GET /v1/models` answers after `delay` (a slow start-up), counting the
/// POST (generation) requests it gets.
fn slow_models_server(
    delay: std::time::Duration,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let others = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = others.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let counted = counted.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut out = stream;
                let mut first = String::new();
                if reader.read_line(&mut first).unwrap_or(0) == 0 {
                    return;
                }
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 2 {
                    line.clear();
                }
                let body: &[u8] = if first.starts_with("GET /v1/models") {
                    std::thread::sleep(delay);
                    br#"{"object":"list","data":[{"id":"m","object":"model"}]}"#
                } else {
                    if first.starts_with("POST ") {
                        counted.fetch_add(1, Ordering::SeqCst);
                    }
                    b"{}"
                };
                let _ = write!(
                    out,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = out.write_all(body);
            });
        }
    });
    (base, others)
}

/// A start-up that ends after `--start-at` (the model lookup takes 2 s, the common start is
/// 1 s ahead): a clear error naming the start and how late start-up ended, and nothing sent.
#[test]
fn start_up_ending_after_the_common_start_is_an_error_and_sends_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("t.jsonl");
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"input_length\": 20, \"output_length\": 2}\n\
         {\"timestamp\": 10, \"input_length\": 20, \"output_length\": 2}\n",
    )
    .unwrap();
    let (base, others) = slow_models_server(std::time::Duration::from_secs(2));
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_millis(1000);
    let at = format!("{at:.3}");
    let out = tmp.path().join("r.jsonl");
    let (code, err) = replay_cli(
        &[
            "--endpoint".as_ref(),
            base.as_ref(),
            "--no-server-tokenize".as_ref(),
            "--allow-inexact-prompts".as_ref(),
            "--chat-overhead".as_ref(),
            "0".as_ref(),
            "--dataset-path".as_ref(),
            trace.as_os_str(),
            "--start-at".as_ref(),
            at.as_ref(),
            "--quiet".as_ref(),
            "--no-pin".as_ref(),
            "--output-path".as_ref(),
            out.as_os_str(),
        ],
        &[],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("start-up ended")
            && err.contains(&format!("after --start-at {at}"))
            && err.contains("nothing was sent")
            && err.contains("choose a later start"),
        "{err}"
    );
    assert_eq!(
        others.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "generation requests reached the server"
    );
    let records = std::fs::read_to_string(&out).unwrap_or_default();
    assert_eq!(records.lines().count(), 0, "{records}");
}
