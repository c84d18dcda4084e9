//! Reading what a run wrote (records JSONL, summaries, any JSON lines, PNG headers) and writing
//! records files for the report tests. Readers are strict: a line that does not parse fails the
//! test with its file and line.

use std::io::Write;
use std::path::{Path, PathBuf};

use request_sim::record::Record;
use request_sim::stats::Summary;
use request_sim::sweep::SweepResult;
use serde_json::Value;

/// Every line of a records file, in file order: each must be complete (newline-terminated) and
/// parse as a record.
pub fn read_records(path: &Path) -> Vec<Record> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.is_empty() || bytes.ends_with(b"\n"),
        "{}: last line is incomplete",
        path.display()
    );
    bytes
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_slice::<Record>(l).unwrap_or_else(|e| {
                panic!(
                    "{}:{}: not a record ({e}): {}",
                    path.display(),
                    i + 1,
                    String::from_utf8_lossy(l)
                )
            })
        })
        .collect()
}

/// [`read_records`] sorted by request index.
pub fn read_records_by_index(path: &Path) -> Vec<Record> {
    let mut v = read_records(path);
    v.sort_by_key(|r| r.index);
    v
}

/// Every line of a JSON-lines file as a JSON value.
pub fn read_json_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: {e}: {l}", path.display(), i + 1))
        })
        .collect()
}

/// A JSON file as a value.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A summary file (`summary.json`, `OUT.summary.json`).
pub fn read_summary_file(path: &Path) -> Summary {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `sweep.json` of a sweep directory.
pub fn read_sweep(sweep_dir: &Path) -> SweepResult {
    let path = sweep_dir.join("sweep.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Where a replay writing records to `out` puts its summary: `OUT.summary.json`.
pub fn summary_path(out: &Path) -> PathBuf {
    let mut p = out.as_os_str().to_owned();
    p.push(".summary.json");
    PathBuf::from(p)
}

/// Write records as JSONL, one per line.
pub fn write_jsonl(path: &Path, records: &[Record]) {
    let mut f = std::fs::File::create(path).unwrap();
    for r in records {
        writeln!(f, "{}", serde_json::to_string(r).unwrap()).unwrap();
    }
}

/// Indices 0..n each exactly once.
pub fn assert_one_record_per_index(records: &[Record], n: usize) {
    let mut seen = vec![0u32; n];
    for r in records {
        assert!(r.index < n, "record index {} out of range {n}", r.index);
        seen[r.index] += 1;
    }
    let bad: Vec<usize> = (0..n).filter(|&i| seen[i] != 1).collect();
    assert!(
        bad.is_empty(),
        "indices without exactly one record: {bad:?}"
    );
}

/// Width and height from a PNG's IHDR chunk, after checking the signature.
pub fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(
        &b[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    assert_eq!(&b[12..16], b"IHDR");
    let w = u32::from_be_bytes(b[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(b[20..24].try_into().unwrap());
    (w, h)
}

/// An agent corpus's record names its conversation and agent as the trace does, and a
/// subagent's session id is `<conversation>::sa:<agent>`.
pub fn assert_record_names_its_agent(r: &Record, turn: &request_sim::trace::SessionTurn) {
    let agent = turn
        .agent
        .as_ref()
        .expect("an agent corpus's turn names its agent");
    assert_eq!(
        r.conversation.as_deref(),
        Some(&*agent.conversation),
        "{r:?}"
    );
    assert_eq!(r.agent.as_deref(), Some(&*agent.agent), "{r:?}");
    if &*agent.agent != "main" {
        assert_eq!(
            r.session_id.clone().unwrap(),
            format!("{}::sa:{}", agent.conversation, agent.agent)
        );
    }
}
