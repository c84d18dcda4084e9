//! `request-sim experiment FILE` (the file: `runfile::experiment`): each point run as `replay`
//! into its own directory, then every point compared with the baseline, on the console, in
//! `DIR/experiment.json` and on one page (`report::experiment`, `report::html`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::report::experiment::{render, ExperimentResult, PointComparison, PointRun};
use crate::runfile::experiment::{self, Experiment, EXPERIMENT_JSON};
use crate::{Error, Result};

/// Run the experiment of `file` into `dir` (`None`: its `[experiment] dir`, else
/// `results/experiment-<UTC time>`): each point, then the comparisons. The exit status: the
/// first point's non-zero one, 130 when interrupted (the points done are kept and compared).
pub fn run(file: &Path, dir: Option<PathBuf>) -> Result<u8> {
    let keys = crate::cli::replay_keys();
    let exp = Experiment::read(file, &keys)?;
    let dir = dir.or_else(|| exp.dir.clone()).unwrap_or_else(|| {
        PathBuf::from(format!("results/experiment-{}", crate::stats::file_stamp()))
    });
    if crate::util::same_output(&dir.join(EXPERIMENT_JSON), file) {
        return Err(Error::config(format!(
            "{}: the experiment's directory holds its own file: give another directory",
            dir.display()
        )));
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    let started_at = crate::stats::now_rfc3339();
    let n = exp.points.len();
    let mut runs: Vec<PointRun> = Vec::new();
    let mut code = 0u8;
    for (k, p) in exp.points.iter().enumerate() {
        let pdir = dir.join(&p.name);
        let mut argv: Vec<OsString> = vec!["request-sim".into(), "replay".into()];
        argv.extend(exp.point_argv(p, &pdir, &keys));
        let mut a = match Cli::try_parse_from(&argv) {
            Ok(Cli {
                command: Command::Replay(a),
            }) => *a,
            Ok(_) => return Err(Error::internal("an experiment point is not a replay")),
            Err(e) => {
                return Err(Error::config(format!(
                    "{}: point {:?}: {}",
                    file.display(),
                    p.name,
                    e.to_string().lines().next().unwrap_or_default()
                )))
            }
        };
        // The experiment file is an input no point may write over.
        a.run_file.config = Some(file.to_path_buf());
        let words = experiment::overrides(p);
        eprintln!(
            "request-sim: experiment point {} of {n}: {}{}{} -> {}",
            k + 1,
            p.name,
            if words.is_empty() {
                String::new()
            } else {
                format!(" ({})", words.join(" "))
            },
            if p.repeats > 1 {
                format!(", {} repeats", p.repeats)
            } else {
                String::new()
            },
            pdir.display()
        );
        let exit = super::replay(a)?;
        runs.push(PointRun {
            name: p.name.clone(),
            repeats: p.repeats,
            dir: pdir.display().to_string(),
            overrides: words,
            exit_code: exit,
        });
        if code == 0 {
            code = exit;
        }
        if exit == 130 {
            eprintln!(
                "request-sim: interrupted: the experiment ends after {} of {n} points",
                k + 1
            );
            code = 130;
            break;
        }
    }
    let comparisons = compare_points(&runs, exp.baseline);
    let result = ExperimentResult {
        file: file.display().to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        points: runs,
        comparisons,
    };
    crate::util::write_json(&dir.join(EXPERIMENT_JSON), &result)?;
    crate::util::print_stdout(&format!("{}\n", render(&result)))?;
    let page = crate::report::html::write_experiment_html(&dir, &result)?;
    eprintln!(
        "request-sim: experiment: {} and {} in {}",
        EXPERIMENT_JSON,
        page.file_name().unwrap_or_default().to_string_lossy(),
        dir.display()
    );
    Ok(code)
}

/// A point's side of a comparison: its summary (one run) or its repeat set.
fn side_path(run: &PointRun) -> PathBuf {
    let dir = Path::new(&run.dir);
    if run.repeats > 1 {
        dir.to_path_buf()
    } else {
        dir.join("summary.json")
    }
}

/// Every point against the baseline (when the baseline ran).
fn compare_points(runs: &[PointRun], baseline: usize) -> Vec<PointComparison> {
    let Some(base) = runs.get(baseline) else {
        return Vec::new();
    };
    let base_side = super::load_side(&side_path(base));
    runs.iter()
        .enumerate()
        .filter(|(k, _)| *k != baseline)
        .map(|(_, r)| {
            let result = base_side.as_ref().map_err(|e| e.to_string()).and_then(|a| {
                let b = super::load_side(&side_path(r)).map_err(|e| e.to_string())?;
                crate::stats::compare::compare(a, &b)
            });
            let (comparison, error) = match result {
                Ok(c) => (Some(c), None),
                Err(e) => (None, Some(e)),
            };
            PointComparison {
                baseline: base.name.clone(),
                point: r.name.clone(),
                comparison,
                error,
            }
        })
        .collect()
}
