//! The command line as a user drives it: output into a pipe that the reader has closed
//! (`request-sim analyze trace.jsonl | head`) ends the command quietly, without a panic.

use std::ffi::OsStr;
use std::path::Path;

use crate::support::{command, BIN};

/// A Mooncake trace long enough that `analyze` prints well past one pipe write.
fn write_trace(path: &Path) {
    let mut text = String::new();
    for i in 0..200u64 {
        let ids: Vec<String> = (0..4).map(|b| (i % 7 * 10 + b).to_string()).collect();
        text.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": 2048, \"output_length\": {}, \"hash_ids\": [{}]}}\n",
            i * 50,
            1 + i % 90,
            ids.join(", ")
        ));
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn closed_stdout_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    write_trace(&trace);
    for extra in [&[][..], &["--json"][..]] {
        // The read end is closed before the command starts, so its first write fails with
        // EPIPE every time (what `| head` does once it has its lines).
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut args = vec![OsStr::new("analyze"), trace.as_os_str()];
        args.extend(extra.iter().map(OsStr::new));
        let out = command(BIN, args, &[]).stdout(writer).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{extra:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {stderr}");
    }
}
