//! Flags that cannot act, or that contradict each other, are refused with one clear line
//! before anything is sent (they used to be accepted without a word).

use crate::support::*;

/// `request-sim replay ARGS...` on the demo trace in a dry run: exit code and stderr.
fn refused(extra: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let mut args = vec!["replay", "--dry-run", "-o", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, _, stderr) = run_cli(&args, &[]);
    assert!(!out.exists(), "{extra:?}: nothing is run");
    (code, stderr)
}

#[test]
fn flags_that_cannot_act_are_refused() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["--think-time", "500"],
            "--think-time acts only with --timing closed",
        ),
        (
            &["--think-time", "trace"],
            "--think-time acts only with --timing closed",
        ),
        (
            &["--skip-after-failed-parent"],
            "--skip-after-failed-parent acts only with --timing closed",
        ),
        (
            &["--stream", "--no-stream"],
            "'--stream' cannot be used with '--no-stream'",
        ),
        (
            &["--aibrix-route", "prefix-cache"],
            "--aibrix-route sets AIBrix's routing-strategy header: it needs --api aibrix",
        ),
    ];
    for (extra, want) in cases {
        let (code, stderr) = refused(extra);
        assert_ne!(code, 0, "{extra:?} accepted: {stderr}");
        assert!(stderr.contains(want), "{extra:?}: {want:?} not in {stderr}");
    }
}
