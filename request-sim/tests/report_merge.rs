//! `request-sim report` over several shards' records: exact merge, union check, exit codes.

mod report_support;

use std::process::Command;

use report_support::{synthetic, write_jsonl};
use serde_json::Value;

fn report(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_request-sim"))
        .arg("report")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
