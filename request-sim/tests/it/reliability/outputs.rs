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

/// `replay` with `args` (after `--dataset-path trace`) against a server that must see nothing:
/// exit 1, the refusal on stderr (returned), no connection made.
fn refused_replay(trace: &Path, dir: &Path, args: &[&str]) -> String {
    use std::sync::atomic::Ordering;
    let server = RawServer::start(Script::default());
    let mut all = vec!["replay".to_string()];
    let mut base = base_args(&server.url(""), trace, dir);
    // Without base_args' `--overwrite`: an existing records file is refused.
    base.retain(|a| a != "--overwrite");
    if args.contains(&"-o") {
        // Without base_args' `--output-path DIR/records.jsonl`.
        let at = base.iter().position(|a| a == "--output-path").unwrap();
        base.drain(at..at + 2);
    }
    all.extend(base);
    all.extend(args.iter().map(|s| s.to_string()));
    let out = run_bin(&strs(&all), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{args:?} accepted: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        0,
        "sent: {args:?}"
    );
    stderr
}

/// `-o rd/summary.json --result-dir rd`: the result directory's summary would replace the
/// records. Refused before anything is sent; the same with `./x/../rd` spelling the same
/// file, and with `--save-prompts` on the result directory's CSV.
#[test]
fn result_dir_files_never_land_on_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = trace_copy(dir.path());
    let rd = dir.path().join("rd");
    let rd_s = rd.to_str().unwrap().to_string();
    let on_summary = rd.join("summary.json");
    let stderr = refused_replay(
        &trace,
        dir.path(),
        &["-o", on_summary.to_str().unwrap(), "--result-dir", &rd_s],
    );
    assert!(
        stderr.contains(&format!(
            "{}: --output-path ({}) and --result-dir name the same file",
            on_summary.display(),
            on_summary.display()
        )),
        "{stderr}"
    );
    assert!(!on_summary.exists() && !rd.exists());
    let spelled = dir
        .path()
        .join("x")
        .join("..")
        .join("rd")
        .join("requests.csv");
    let stderr = refused_replay(
        &trace,
        dir.path(),
        &[
            "--save-prompts",
            spelled.to_str().unwrap(),
            "--result-dir",
            &rd_s,
        ],
    );
    assert!(
        stderr.contains("--save-prompts") && stderr.contains("--result-dir name the same file"),
        "{stderr}"
    );
    // The server metrics beside the records are an output too.
    let records = dir.path().join("r.jsonl");
    let beside = dir.path().join("r.jsonl.server_metrics.jsonl");
    let stderr = refused_replay(
        &trace,
        dir.path(),
        &[
            "-o",
            records.to_str().unwrap(),
            "--summary-path",
            beside.to_str().unwrap(),
        ],
    );
    assert!(
        stderr.contains("the server metrics (beside --output-path)"),
        "{stderr}"
    );
}

/// A trace named `D/requests.csv` replayed with `--result-dir D` (and one at a hard link's
/// other name, `D/summary.json`): refused, the trace untouched.
#[test]
fn result_dir_files_never_land_on_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("D");
    std::fs::create_dir(&d).unwrap();
    let trace = d.join("requests.csv");
    std::fs::copy(trace_fixture("generic.jsonl"), &trace).unwrap();
    let before = std::fs::read(&trace).unwrap();
    let d_s = d.to_str().unwrap().to_string();
    let args = ["--dataset", "generic", "--result-dir", d_s.as_str()];
    let stderr = refused_replay(&trace, dir.path(), &args);
    assert!(
        stderr.contains(&format!(
            "{}: --result-dir names the trace (--dataset-path) {} itself",
            trace.display(),
            trace.display()
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&trace).unwrap(), before);
    // A hard link of the trace at another result file's name.
    let other = dir.path().join("trace.jsonl");
    std::fs::copy(trace_fixture("generic.jsonl"), &other).unwrap();
    std::fs::hard_link(&other, d.join("summary.json")).unwrap();
    let stderr = refused_replay(&other, dir.path(), &args);
    assert!(
        stderr.contains("--result-dir names the trace (--dataset-path)"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&other).unwrap(), before);
    assert!(!dir.path().join("records.jsonl").exists());
}

/// The one pair of outputs allowed on one file: `--summary-path` at the result directory's
/// `summary.json` (as `--repeat` writes each repeat's), the same summary twice.
#[test]
fn the_summary_may_be_the_result_dirs_summary() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = trace_copy(dir.path());
    let rd = dir.path().join("rd");
    let (code, _, stderr) = run_cli(
        [
            "replay",
            "--dry-run",
            "--quiet",
            "--dataset-path",
            trace.to_str().unwrap(),
            "-o",
            rd.join("records.jsonl").to_str().unwrap(),
            "--summary-path",
            rd.join("summary.json").to_str().unwrap(),
            "--result-dir",
            rd.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let s = read_summary_file(&rd.join("summary.json"));
    assert_eq!(s.scheduled, read_records(&rd.join("records.jsonl")).len());
    assert!(s.scheduled > 0);
}

/// A records file already at `-o` (or at a symbolic link's target) is refused before anything
/// is sent and left as it was; `--overwrite` replaces it.
#[test]
fn an_existing_records_file_is_kept_unless_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, _) = trace_copy(dir.path());
    let old = dir.path().join("old.jsonl");
    std::fs::write(&old, b"{\"index\": 0}\n").unwrap();
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&old, &link).unwrap();
    for (path, words) in [
        (&old, String::new()),
        (&link, format!(" (a symbolic link to {})", old.display())),
    ] {
        let stderr = refused_replay(&trace, dir.path(), &["-o", path.to_str().unwrap()]);
        assert!(
            stderr.contains(&format!(
                "{}{words}: --output-path names a file that exists: the run would replace it; give another path, remove it, or pass --overwrite to replace it",
                path.display()
            )),
            "{stderr}"
        );
        assert_eq!(std::fs::read(&old).unwrap(), b"{\"index\": 0}\n");
    }
    let (code, _, stderr) = run_cli(
        [
            "replay",
            "--dry-run",
            "--quiet",
            "--dataset-path",
            trace.to_str().unwrap(),
            "-o",
            link.to_str().unwrap(),
            "--overwrite",
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let records = read_records(&old);
    // The dry run's records replaced the old file (the link's target).
    assert!(records.len() > 1, "{records:?}");
    assert!(records
        .iter()
        .all(|r| r.status == request_sim::record::Status::DryRun));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
}

/// A records path that cannot be written is named itself, not the server-metrics file beside
/// it (the scraper opens that first).
#[test]
fn an_unwritable_records_path_is_named_itself() {
    let (code, _, stderr) = run_cli(
        ["replay", "-o", "/sys/rec.jsonl", "--max-requests", "3"],
        &[],
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cannot write /sys/rec.jsonl:"), "{stderr}");
    assert!(!stderr.contains("server_metrics"), "{stderr}");
}

/// Without `--output-path`, every run gets a new file, even two in the same second (a script,
/// a sweep's points): the default never names another run's records.
#[test]
fn the_default_records_path_is_never_an_earlier_runs() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..3 {
        let out = std::process::Command::new(BIN)
            .args(["replay", "--dry-run", "--max-requests", "3", "--quiet"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let records = std::fs::read_dir(dir.path().join("results"))
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name().into_string().unwrap();
            n.ends_with(".jsonl") && !n.contains("server_metrics")
        })
        .count();
    assert_eq!(records, 3);
}
