//! Running request-sim: a replay or sweep in-process through the library (the command line
//! parsed as a user's would be), or the built binaries as subprocesses with a clean environment.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use request_sim::run::RunOutcome;
use request_sim::sweep::SweepResult;

use super::args::{config, sweep_args};
use super::files::read_sweep;

/// The `request-sim` binary.
pub const BIN: &str = env!("CARGO_BIN_EXE_request-sim");
/// The `client` binary (the blitz-serving trace-replayer's command line).
pub const CLIENT_BIN: &str = env!("CARGO_BIN_EXE_client");
/// The `trace_replay` binary (UCM's command line).
pub const TRACE_REPLAY_BIN: &str = env!("CARGO_BIN_EXE_trace_replay");

/// Run `request-sim replay ARGS...` in-process, through the library; the command line must
/// parse, the refusals of validation and of the run are returned. Tests run again into their
/// own files, so `--overwrite` is added (the refusal of an existing file is tested with the
/// binary, `reliability/outputs.rs`).
pub fn try_replay(args: &[&str]) -> request_sim::Result<RunOutcome> {
    let mut args = args.to_vec();
    if !args.contains(&"--overwrite") {
        args.push("--overwrite");
    }
    request_sim::run::replay(config(&args)?)
}

/// Run `request-sim replay ARGS...` in-process; panics on any error.
pub fn replay(args: &[&str]) -> RunOutcome {
    try_replay(args).unwrap_or_else(|e| panic!("request-sim replay {args:?}: {e}"))
}

/// Run `request-sim sweep ARGS...` (with `--sweep-dir`) in-process: its exit code and the
/// sweep.json it wrote.
pub fn sweep(args: &[&str]) -> (u8, SweepResult) {
    let a = sweep_args(args);
    let dir = a.sweep_dir.clone().expect("sweep tests give --sweep-dir");
    let code = request_sim::sweep::sweep(a).unwrap();
    (code, read_sweep(&dir))
}

/// The environment variables the binaries read: removed, so the test's own environment does
/// not leak in (a test sets them through `envs`).
const READ_ENV: [&str; 4] = [
    "OPENAI_API_KEY",
    "JOB_COMPLETION_INDEX",
    "REQUEST_SIM_SHARD_COUNT",
    "REQUEST_SIM_START_AT",
];

/// The binary `bin` with `args` and `envs`, stdin empty, stdout and stderr captured.
pub fn command<I, S>(bin: &str, args: I, envs: &[(&str, &str)]) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = Command::new(bin);
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for k in READ_ENV {
        c.env_remove(k);
    }
    for (k, v) in envs {
        c.env(k, v);
    }
    c
}

/// Start `request-sim ARGS...`, stdout/stderr captured.
pub fn spawn_bin(args: &[&str], envs: &[(&str, &str)]) -> Child {
    command(BIN, args, envs).spawn().expect("start request-sim")
}

/// Run `request-sim ARGS...` to the end.
pub fn run_bin(args: &[&str], envs: &[(&str, &str)]) -> Output {
    spawn_bin(args, envs)
        .wait_with_output()
        .expect("run request-sim")
}

/// Run `request-sim ARGS...` to the end: exit code (-1 when a signal ended it), stdout, stderr.
pub fn run_cli<I, S>(args: I, envs: &[(&str, &str)]) -> (i32, String, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = command(BIN, args, envs).output().expect("run request-sim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run `request-sim replay ARGS...` as a subprocess: exit code and stderr.
pub fn replay_cli(args: &[&OsStr], envs: &[(&str, &str)]) -> (i32, String) {
    let all = std::iter::once(OsStr::new("replay")).chain(args.iter().copied());
    let (code, _, stderr) = run_cli(all, envs);
    (code, stderr)
}

/// Run another of the built binaries (`bin`: [`CLIENT_BIN`], [`TRACE_REPLAY_BIN`]) with
/// `args` to the end.
pub fn run_program(bin: &str, args: &[&str]) -> Output {
    command(bin, args, &[])
        .output()
        .unwrap_or_else(|e| panic!("run {bin}: {e}"))
}

/// Send a signal by name (`INT`, `TERM`, `KILL`) with kill(1).
pub fn signal(child: &Child, sig: &str) {
    let st = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .expect("kill(1)");
    assert!(st.success(), "kill -{sig} failed");
}

/// Wait for the child for at most `limit`; `None` if it is still running.
pub fn wait_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until `path` holds at least `lines` complete lines (or `limit` passes).
pub fn wait_for_lines(path: &Path, lines: usize, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Ok(b) = std::fs::read(path) {
            if b.iter().filter(|&&c| c == b'\n').count() >= lines {
                return true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
