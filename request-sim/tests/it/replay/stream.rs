//! Streamed traces: rows out of time order within the reorder window replay in time order with
//! every index once (plain and gzip the same); a row beyond the window is a `file:line` error,
//! before anything is sent when it is among the first rows, and a clean stop with one record
//! per request sent when it comes later, the valid rows read before it and not sent counted in
//! `never_sent`.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{read_json, read_json_lines, replay_cli, summary_path};

/// `n` rows 10 ms apart in trace time, written with each block of 4 rows reversed (out of
/// order by up to 30 ms); `bad`: (row, ms) gives that row a time this far before its own.
fn write_jittered(dir: &Path, n: usize, bad: Option<(usize, f64)>) -> (PathBuf, Vec<f64>) {
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for block in (0..n).step_by(4) {
        order.extend((block..(block + 4).min(n)).rev());
    }
    let mut text = String::new();
    let mut times = Vec::new();
    for &i in &order {
        let mut t = i as f64 * 10.0;
        if let Some((row, back)) = bad {
            if row == times.len() {
                t -= back;
            }
        }
        times.push(t);
        text.push_str(&format!(
            "{{\"timestamp\": {t}, \"input_length\": {}, \"output_length\": 2, \"hash_ids\": [{}]}}\n",
            20 + i % 7,
            i % 13
        ));
    }
    let path = dir.join("t.jsonl");
    std::fs::write(&path, text).unwrap();
    (path, times)
}

/// `request-sim replay` of `trace` into `out` as a dry run at 1000x (seed 1) with `extra` flags,
/// as a subprocess: exit code and stderr.
fn dry_run(trace: &Path, out: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec![
        OsStr::new("--dataset-path"),
        trace.as_os_str(),
        OsStr::new("--output-path"),
        out.as_os_str(),
    ];
    let flags = ["--dry-run", "--quiet", "--no-pin", "--seed", "1"];
    // 1000× unless the test gives its own rate.
    let rate: &[&str] = match extra.contains(&"--scale-factor") {
        true => &[],
        false => &["--scale-factor", "1000"],
    };
    args.extend(flags.iter().chain(rate).chain(extra).map(OsStr::new));
    replay_cli(&args, &[])
}

/// Every index 0..n exactly once; by index, times never decrease and each record is the row
/// of its line.
fn check_in_order(recs: &[Value], n: usize, times: &[f64]) {
    let mut by_index: Vec<Option<&Value>> = vec![None; n];
    for r in recs {
        let i = r["index"].as_u64().unwrap() as usize;
        assert!(by_index[i].is_none(), "index {i} twice");
        by_index[i] = Some(r);
    }
    let by_index: Vec<&Value> = by_index
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|| panic!("index {i} missing")))
        .collect();
    let t0 = times.iter().copied().fold(f64::INFINITY, f64::min);
    let mut prev = f64::NEG_INFINITY;
    for r in by_index {
        let t = r["timestamp"].as_f64().unwrap();
        assert!(t >= prev, "{r}");
        prev = t;
        let line = r["line"].as_u64().unwrap() as usize;
        assert_eq!(t, times[line - 1] - t0, "{r}");
    }
}

#[test]
fn rows_out_of_order_within_the_window_replay_in_time_order() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 3000;
    let (trace, times) = write_jittered(tmp.path(), n, None);
    // A window of 40 ms (and 8 rows) covers blocks of 4 rows reversed (30 ms).
    let window = ["--reorder-window-ms", "40", "--reorder-window-rows", "8"];
    let out = tmp.path().join("r.jsonl");
    let (code, err) = dry_run(&trace, &out, &window);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("streamed"), "{err}");
    let recs = read_json_lines(&out);
    assert_eq!(recs.len(), n);
    check_in_order(&recs, n, &times);
    let s = read_json(&summary_path(&out));
    assert_eq!(s["run"]["planned"], n);
    // Three rows of each block of four come after a later one.
    assert_eq!(s["run"]["trace_stats"]["reordered"], 3 * n / 4);
    assert_eq!(s["run"]["trace_stats"]["rows"], n);

    // The same trace gzip-compressed: the same requests.
    let gz = tmp.path().join("t.jsonl.gz");
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::fast(),
    );
    enc.write_all(&std::fs::read(&trace).unwrap()).unwrap();
    enc.finish().unwrap();
    let out_gz = tmp.path().join("gz.jsonl");
    let (code, err) = dry_run(&gz, &out_gz, &window);
    assert_eq!(code, 0, "{err}");
    let key = |v: &Value| {
        (
            v["index"].clone(),
            v["line"].clone(),
            v["timestamp"].clone(),
        )
    };
    let mut a: Vec<_> = recs.iter().map(key).collect();
    let mut b: Vec<_> = read_json_lines(&out_gz).iter().map(key).collect();
    a.sort_by_key(|k| k.0.as_u64());
    b.sort_by_key(|k| k.0.as_u64());
    assert_eq!(a, b);
}

#[test]
fn a_row_beyond_the_window_is_a_line_error_first_rows_before_anything_is_sent() {
    let tmp = tempfile::tempdir().unwrap();
    // Row 51 (line 51) is 500 ms before its place: beyond a 40 ms window.
    let (trace, _) = write_jittered(tmp.path(), 400, Some((50, 500.0)));
    let out = tmp.path().join("r.jsonl");
    let (code, err) = dry_run(&trace, &out, &["--reorder-window-ms", "40"]);
    assert_eq!(code, 1, "{err}");
    let line = format!("{}:51: field `timestamp`:", trace.display());
    assert!(err.contains(&line), "{err}");
    assert!(
        err.contains("out of time order by") && err.contains("raise --reorder-window-ms"),
        "{err}"
    );
    assert!(
        !out.exists() || read_json_lines(&out).is_empty(),
        "nothing is sent"
    );
    // A window that covers it: the run completes.
    let (code, err) = dry_run(&trace, &out, &["--reorder-window-ms", "600"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(read_json_lines(&out).len(), 400);
}

#[test]
fn a_row_beyond_the_window_mid_run_stops_with_one_record_per_request_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 6000;
    let bad_row = 5000;
    let (trace, times) = write_jittered(tmp.path(), n, Some((bad_row, 500.0)));
    let out = tmp.path().join("r.jsonl");
    let (code, err) = dry_run(
        &trace,
        &out,
        &[
            "--reorder-window-ms",
            "40",
            "--reorder-window-rows",
            "8",
            "--channel-capacity",
            "32",
        ],
    );
    assert_eq!(code, 1, "{err}");
    let line = format!("{}:{}: field `timestamp`:", trace.display(), bad_row + 1);
    assert!(err.contains(&line), "{err}");
    let recs = read_json_lines(&out);
    let s = read_json(&summary_path(&out));
    assert_eq!(s["run"]["stop_reason"], "trace_error", "{err}");
    let sent = recs.len();
    // Everything before the bad row that had left the window was sent, once; the rows still
    // in the window when the bad row was read are counted as never sent.
    assert!(sent > 4000 && sent < bad_row, "{sent}");
    check_in_order(&recs, sent, &times[..]);
    assert_eq!(s["scheduled"], sent);
    let never_sent = s["run"]["never_sent"].as_u64().unwrap() as usize;
    assert_eq!(sent + never_sent, bad_row, "every row before the bad one");
    assert_eq!(s["run"]["planned"], bad_row);
    assert!(
        s["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains(&line)),
        "{}",
        s["warnings"]
    );
}

/// `n` rows 10 ms apart in time order, line `bad` (1-based) broken JSON.
fn write_with_broken_line(dir: &Path, n: usize, bad: usize) -> PathBuf {
    let path = dir.join(format!("t{n}.jsonl"));
    let mut text = String::new();
    for i in 0..n {
        if i + 1 == bad {
            text.push_str("{\"timestamp\": \n");
            continue;
        }
        text.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": 20, \"output_length\": 2, \"session_id\": \"s{}\"}}\n",
            i * 10,
            i % 37
        ));
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// Issue #39, defect 4: 3,000 rows 10 ms apart, broken JSON at line 2901, `replay --dry-run`:
/// the run stopped with 1,899 scheduled, and the 1,001 valid rows read before the bad one (held
/// in the reorder window) were neither sent nor counted (`never_sent` 0). Every valid row read
/// before the bad row is now sent or counted in `never_sent` (reason `trace_error`); on shards,
/// each run counts its own share.
///
/// At 100× the first burst (rows within 20 ms of each other, 2 s of trace) is 200 rows, so
/// start-up reads only its 1,024-row head and the bad row is met while the run goes.
#[test]
fn a_bad_row_far_into_a_stream_counts_the_rows_it_cut_off() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = write_with_broken_line(tmp.path(), 3000, 2901);
    let out = tmp.path().join("r.jsonl");
    let (code, err) = dry_run(&trace, &out, &["--scale-factor", "100"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("{}:2901: ", trace.display())),
        "{err}"
    );
    let s = read_json(&summary_path(&out));
    let (scheduled, never_sent) = (
        s["scheduled"].as_u64().unwrap(),
        s["run"]["never_sent"].as_u64().unwrap(),
    );
    assert_eq!(read_json_lines(&out).len() as u64, scheduled);
    assert!(
        scheduled > 1000 && never_sent > 900,
        "{scheduled} + {never_sent}"
    );
    assert_eq!(
        scheduled + never_sent,
        2900,
        "every valid row before the bad one"
    );
    assert_eq!(s["run"]["planned"], 2900);
    assert_eq!(s["run"]["never_sent_reason"], "trace_error");
    assert!(
        err.contains(&format!("{never_sent} valid requests read before it")),
        "{err}"
    );
    // Two shards (a longer trace: each reads its first 1,024 requests before it starts): each
    // counts its own share of the rows cut off.
    let trace = write_with_broken_line(tmp.path(), 6000, 5901);
    let mut total = 0;
    for k in 0..2 {
        let out = tmp.path().join(format!("shard{k}.jsonl"));
        let (code, err) = dry_run(
            &trace,
            &out,
            &["--shard", &format!("{k}/2"), "--scale-factor", "100"],
        );
        assert_eq!(code, 1, "{err}");
        let s = read_json(&summary_path(&out));
        let n = s["scheduled"].as_u64().unwrap() + s["run"]["never_sent"].as_u64().unwrap();
        assert!(n > 2000 && n < 4000, "shard {k}: {n}");
        assert!(s["run"]["never_sent"].as_u64().unwrap() > 300, "shard {k}");
        total += n;
    }
    assert_eq!(total, 5900);
}

/// A bad row inside a first burst larger than the head (3,000 rows due at one instant): start-up
/// reads the whole burst ahead (to open its connections and build its bodies), so the row is
/// met before anything is sent. It stops the run there, naming its line, with nothing sent.
#[test]
fn a_bad_row_inside_the_first_burst_stops_the_run_before_anything_is_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..3000 {
        text.push_str(&match i + 1 {
            2500 => "{\"timestamp\": 0, \"input_length\": \n".to_string(),
            _ => "{\"timestamp\": 0, \"input_length\": 20, \"output_length\": 2}\n".to_string(),
        });
    }
    let trace = tmp.path().join("burst.jsonl");
    std::fs::write(&trace, text).unwrap();
    let out = tmp.path().join("r.jsonl");
    let (code, err) = dry_run(&trace, &out, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("{}:2500: ", trace.display())),
        "{err}"
    );
    assert!(!summary_path(&out).exists(), "a start-up error: {err}");
    let sent = std::fs::read_to_string(&out).unwrap_or_default();
    assert_eq!(sent.lines().count(), 0, "nothing was sent");
}
