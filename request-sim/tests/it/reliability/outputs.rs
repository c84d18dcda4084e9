//! The trace-writing commands never destroy their input nor a file already at their output
//! (issue #39, defect 1): `transform`, `transform --synthesize` and `replay --save-prompts`
//! refuse an output that is the trace they read (the same path, or another name of the same
//! file) before reading it, and an error on the way leaves a file already at the output path
//! as it was (`convert`'s cases are in `tests/it/convert.rs`).

use std::path::Path;

use crate::support::*;

/// A copy of the generic fixture trace in `dir`, and its bytes.
fn trace_copy(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let t = dir.join("in.jsonl");
    std::fs::copy(trace_fixture("generic.jsonl"), &t).unwrap();
    let bytes = std::fs::read(&t).unwrap();
    (t, bytes)
}

#[test]
fn transform_refuses_its_input_as_output() {
    let dir = tempfile::tempdir().unwrap();
    let (input, before) = trace_copy(dir.path());
    let link = dir.path().join("link.jsonl");
    std::fs::hard_link(&input, &link).unwrap();
    let i = input.to_str().unwrap();
    for out in [i, link.to_str().unwrap()] {
        for extra in [
            &["--amplify", "2"][..],
            &["--synthesize", "--duration", "5"][..],
        ] {
            let mut args = vec!["transform", i, "-o", out];
            args.extend_from_slice(extra);
            let (code, _, stderr) = run_cli(&args, &[]);
            assert_eq!(code, 1, "{args:?}: {stderr}");
            assert!(
                stderr.contains("-o names the trace") && stderr.contains("itself"),
                "{stderr}"
            );
            assert_eq!(std::fs::read(&input).unwrap(), before, "{args:?}");
        }
    }
}

/// `transform` of a trace it cannot write (a messages trace carries text) fails after the
/// output was opened: a file already there used to be left empty.
#[test]
fn a_failed_transform_leaves_the_existing_output_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.jsonl");
    std::fs::write(&out, "precious\n").unwrap();
    let (code, _, stderr) = run_cli(
        [
            "transform",
            data_path("logs/messages.jsonl").to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("a messages trace carries"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "precious\n");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left"
    );
}

#[test]
fn save_prompts_refuses_the_trace_it_replays() {
    let dir = tempfile::tempdir().unwrap();
    let (input, before) = trace_copy(dir.path());
    let i = input.to_str().unwrap();
    let (code, _, stderr) = run_cli(
        [
            "replay",
            "--dry-run",
            "--dataset-path",
            i,
            "--save-prompts",
            i,
            "--quiet",
            "-o",
            dir.path().join("r.jsonl").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("--save-prompts names the trace (--dataset-path)"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&input).unwrap(), before);
    assert!(!dir.path().join("r.jsonl").exists());
}
