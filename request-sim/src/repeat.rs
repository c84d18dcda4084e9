//! `replay --repeat N`: the same trace slice replayed N times, each repeat with its own seed
//! (fresh prompt texts of the same lengths and the same sharing between requests: prompts are
//! a function of seed, hash id and length) and the server's prefix cache emptied before it
//! (`POST /reset_prefix_cache`; the built-in simulator starts empty for every replay), each in
//! its own directory `DIR/repeat-K/` (records.jsonl, summary.json, result files with
//! `--result-dir`). Then every headline metric's mean, 95% interval and spread over the
//! repeats: `DIR/repeats.json`, the console table, `DIR/report.html`.

use std::path::{Path, PathBuf};

use crate::cli::ReplayArgs;
use crate::config::{ReplayConfig, Target};
use crate::report;
use crate::stats::repeats::{RepeatRun, RepeatSet, REPEATS_JSON};
use crate::stats::Summary;
use crate::{Error, Result};

/// `--repeat N`: `Ok(None)` for one run (no flag, or 1), `Ok(Some(n))` for a repeat set.
pub fn count(args: &ReplayArgs) -> Result<Option<u32>> {
    match args.schedule.repeat {
        None | Some(1) => Ok(None),
        Some(0) => Err(Error::config(
            "--repeat 0: a repeat set needs at least one run (give N >= 2 for intervals, or leave --repeat out)",
        )),
        Some(n) => Ok(Some(n)),
    }
}

/// The flags a repeat set sets per repeat are refused: given, they would be overwritten.
fn check_flags(a: &ReplayArgs) -> Result<()> {
    let refuse = |flag: &str, what: &str| {
        Err(Error::config(format!(
            "{flag} is set per repeat with --repeat ({what}): give the set's directory with --result-dir"
        )))
    };
    if a.output.output_path.is_some() {
        return refuse("--output-path", "DIR/repeat-K/records.jsonl");
    }
    if a.output.summary_path.is_some() {
        return refuse("--summary-path", "DIR/repeat-K/summary.json");
    }
    Ok(())
}

/// The repeat set's directory: `--result-dir`, else `results/repeat-<UTC time>`.
fn set_dir(a: &ReplayArgs) -> PathBuf {
    a.output.report.result_dir.clone().unwrap_or_else(|| {
        let ts = crate::stats::file_stamp();
        PathBuf::from(format!("results/repeat-{ts}"))
    })
}

/// Repeat `k`'s seed (0-based): the given seed's neighbours, so the set can be run again
/// identically, or fresh seeds.
pub fn repeat_seed(base: Option<u64>, k: u32) -> u64 {
    match base {
        Some(s) => s.wrapping_add(u64::from(k).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        None => crate::config::fresh_seed(),
    }
}

/// A finished repeat set.
#[derive(Debug)]
pub struct RepeatOutcome {
    pub set: RepeatSet,
    pub summaries: Vec<Summary>,
    /// The first repeat's non-zero exit status (130 when interrupted, which ends the set), else 0.
    pub exit_code: i32,
    pub dir: PathBuf,
}

/// Run `n` repeats of `base` into `dir` (see the module documentation).
pub fn run_set(base: &ReplayArgs, n: u32, dir: &Path) -> Result<RepeatOutcome> {
    check_flags(base)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    let per_repeat_files = base.output.report.result_dir.is_some();
    let mut runs = Vec::new();
    let mut summaries = Vec::new();
    let mut exit_code = 0;
    for k in 0..n {
        let rdir = dir.join(format!("repeat-{}", k + 1));
        let mut a = base.clone();
        a.schedule.repeat = None;
        a.prompts.seed = Some(repeat_seed(base.prompts.seed, k));
        a.output.output_path = Some(rdir.join("records.jsonl"));
        a.output.summary_path = Some(rdir.join("summary.json"));
        // The set's own files: a set run again into its directory replaces them.
        a.output.overwrite = true;
        a.output.report.result_dir = per_repeat_files.then(|| rdir.clone());
        // One repeat is one run: its summary re-runs that run.
        let s = &mut a.run_file.settings;
        s.set("repeat", serde_json::Value::Null);
        s.set("seed", a.prompts.seed);
        s.set("overwrite", true);
        s.set_path("output-path", a.output.output_path.as_deref());
        s.set_path("summary-path", a.output.summary_path.as_deref());
        s.set_path("result-dir", a.output.report.result_dir.as_deref());
        std::fs::create_dir_all(&rdir)
            .map_err(|e| Error::io(format!("cannot create {}", rdir.display()), e))?;
        let cfg = ReplayConfig::from_args(a)?;
        let seed = cfg.prompts.seed;
        let cache = match cfg.target.server {
            Target::BuiltinSimulator => "fresh simulator".to_string(),
            Target::Remote(_) if crate::run::reset_prefix_caches(&cfg) => "reset".to_string(),
            Target::Remote(_) => "not reset".to_string(),
        };
        eprintln!(
            "request-sim: repeat {} of {n}: seed {seed}, prefix cache {cache} -> {}",
            k + 1,
            rdir.display()
        );
        if cache == "not reset" {
            eprintln!(
                "request-sim: note: the server did not accept POST /reset_prefix_cache (it has no such route, or refused it): repeat {} starts with what the earlier repeats left in its cache; their prompts share no text with this one's (each repeat has its own seed), but the cache is fuller",
                k + 1
            );
        }
        let (records, summary) = (
            cfg.output.records_path.display().to_string(),
            cfg.output.summary_path.display().to_string(),
        );
        let out = crate::run::replay(cfg)?;
        runs.push(RepeatRun {
            repeat: k as usize + 1,
            seed,
            dir: rdir.display().to_string(),
            records,
            summary,
            cache,
            exit_code: out.exit_code,
        });
        summaries.push(out.summary);
        if exit_code == 0 {
            exit_code = out.exit_code;
        }
        if out.exit_code == 130 {
            eprintln!(
                "request-sim: interrupted: the set ends after {} of {n} repeats",
                k + 1
            );
            exit_code = 130;
            break;
        }
    }
    let set = RepeatSet::new(runs, &summaries);
    crate::util::write_json(&dir.join(REPEATS_JSON), &set)?;
    Ok(RepeatOutcome {
        set,
        summaries,
        exit_code,
        dir: dir.to_path_buf(),
    })
}

/// `replay --repeat N` (N >= 2): the set, its table on stdout, `repeats.json` and
/// `report.html`; the exit status of [`RepeatOutcome::exit_code`].
pub fn replay(args: ReplayArgs, n: u32) -> Result<u8> {
    let dir = set_dir(&args);
    let out = run_set(&args, n, &dir)?;
    report::print_stdout(&format!("{}\n", report::repeats::render_repeats(&out.set)))?;
    let page = report::html::write_repeats_html(&dir, &out.set)?;
    eprintln!(
        "request-sim: repeat set: {} and {} in {}",
        REPEATS_JSON,
        page.file_name().unwrap_or_default().to_string_lossy(),
        dir.display()
    );
    Ok(u8::try_from(out.exit_code).unwrap_or(1))
}
