//! `request-sim experiment FILE`: several runs in one file, run as one experiment into one
//! directory. The file is a run file (the base run: the same tables as `--config`) plus an
//! `[experiment]` table (`dir`, `repeats`, `baseline`) and `[[point]]`s, each a `name`, an
//! optional `repeats` and the tables of the settings it overrides:
//!
//! ```toml
//! [trace]
//! dataset-path = "traces/prod.jsonl"
//! [experiment]
//! repeats = 2
//! [[point]]
//! name = "x1"
//! [[point]]
//! name = "x2"
//! schedule.scale-factor = 2
//! ```
//!
//! Each point runs as `replay` with the base's settings and its own on top (a point's key
//! drops the base's value of that flag and of the flags it conflicts with), into `DIR/NAME/`
//! (a repeat set of `DIR/NAME/repeat-K/` with more than one repeat). Then `compare`'s
//! verdicts of every point against the baseline (the first point unless named), on the
//! console, in `DIR/experiment.json` and on one page, `DIR/report.html`.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::Parser;
use serde::Serialize;

use super::argv::{self, Fragment};
use super::keys::Keys;
use super::read::{self, Doc, Item, Val};
use crate::cli::{Cli, Command};
use crate::stats::compare::Comparison;
use crate::{Error, Result};

/// The file `DIR/experiment.json`.
pub const EXPERIMENT_JSON: &str = "experiment.json";

/// The flags the experiment sets per point (where each point writes, how often it runs).
const PER_POINT: [&str; 4] = ["output-path", "summary-path", "result-dir", "repeat"];

/// One point of an experiment.
#[derive(Debug, Clone)]
pub struct Point {
    pub name: String,
    pub repeats: u32,
    /// Its own settings' words.
    pub frags: Vec<Fragment>,
}

/// An experiment file, read and checked.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub file: PathBuf,
    pub dir: Option<PathBuf>,
    pub base: Vec<Fragment>,
    pub points: Vec<Point>,
    /// The point the others are compared with (an index of `points`).
    pub baseline: usize,
}

fn string(doc: &Doc, item: &Item, what: &str) -> Result<String> {
    match &item.val {
        Val::Str(s) if !s.trim().is_empty() => Ok(s.clone()),
        _ => Err(doc.error(item.line, format!("`{what}` takes a non-empty string"))),
    }
}

fn repeats(doc: &Doc, item: &Item) -> Result<u32> {
    match &item.val {
        Val::Number(n) => match n.parse::<u32>() {
            Ok(r) if (1..=1000).contains(&r) => Ok(r),
            _ => Err(doc.error(
                item.line,
                format!("`repeats` = {n}: a count from 1 to 1000"),
            )),
        },
        _ => Err(doc.error(
            item.line,
            format!("`repeats` takes a number, not {}", item.what()),
        )),
    }
}

/// A name that is a directory name of its own: letters, digits, `.`, `_`, `-`.
fn point_name(doc: &Doc, item: &Item) -> Result<String> {
    let name = string(doc, item, "name")?;
    let ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.starts_with('.');
    if !ok {
        return Err(doc.error(
            item.line,
            format!("point name {name:?}: letters, digits, `.`, `_` and `-` only (it names the point's directory)"),
        ));
    }
    Ok(name)
}

/// Refuse a key the experiment sets per point.
fn refuse_per_point(doc: &Doc, keys: &Keys, frags: &[Fragment]) -> Result<()> {
    for f in frags {
        if let Some(k) = keys
            .by_id(&f.id)
            .filter(|k| PER_POINT.contains(&k.long.as_str()))
        {
            return Err(doc.error(
                f.line,
                format!(
                    "`{}.{}` is set per point by the experiment (DIR/NAME/; `repeats` in [experiment] or a point)",
                    k.table, k.long
                ),
            ));
        }
    }
    Ok(())
}

impl Experiment {
    /// Read and check an experiment file.
    pub fn read(path: &Path) -> Result<Experiment> {
        let doc = read::read(path)?;
        let keys = Keys::replay();
        let base = argv::fragments(&doc, &doc.root, &keys, &["experiment", "point"])?;
        refuse_per_point(&doc, &keys, &base)?;
        let (mut dir, mut all_repeats, mut baseline) = (None, 1, None);
        if let Some(e) = doc.root.get("experiment") {
            let t = e
                .table()
                .ok_or_else(|| doc.error(e.line, "[experiment] must be a table"))?;
            for (k, v) in t {
                match k.as_str() {
                    "dir" => dir = Some(PathBuf::from(string(&doc, v, "dir")?)),
                    "repeats" => all_repeats = repeats(&doc, v)?,
                    "baseline" => baseline = Some((string(&doc, v, "baseline")?, v.line)),
                    other => {
                        return Err(doc.error(
                            v.line,
                            format!(
                                "unknown key `{other}` in [experiment]: dir, repeats, baseline"
                            ),
                        ))
                    }
                }
            }
        }
        let list = match doc.root.get("point") {
            Some(Item {
                val: Val::List(l), ..
            }) if !l.is_empty() => l,
            Some(p) => return Err(doc.error(p.line, "`point` must be [[point]] tables")),
            None => return Err(doc.error(0, "no [[point]]: an experiment needs at least one")),
        };
        let mut points: Vec<Point> = Vec::new();
        for p in list {
            if p.table().is_none() {
                return Err(doc.error(p.line, "`point` must be [[point]] tables"));
            }
            let name_item = p
                .get("name")
                .ok_or_else(|| doc.error(p.line, "a [[point]] without its `name`"))?;
            let name = point_name(&doc, name_item)?;
            if points.iter().any(|q| q.name == name) {
                return Err(doc.error(
                    name_item.line,
                    format!("point {name:?} is named twice (its directory would be shared)"),
                ));
            }
            let repeats = match p.get("repeats") {
                Some(r) => repeats(&doc, r)?,
                None => all_repeats,
            };
            let frags = argv::fragments(&doc, p, &keys, &["name", "repeats"])?;
            refuse_per_point(&doc, &keys, &frags)?;
            points.push(Point {
                name,
                repeats,
                frags,
            });
        }
        let baseline = match baseline {
            None => 0,
            Some((b, line)) => points.iter().position(|p| p.name == b).ok_or_else(|| {
                doc.error(line, format!("baseline {b:?} is not the name of a point"))
            })?,
        };
        Ok(Experiment {
            file: path.to_path_buf(),
            dir,
            base,
            points,
            baseline,
        })
    }

    /// Point `p`'s replay command line (after `request-sim replay`) into `pdir`.
    pub fn point_argv(&self, p: &Point, pdir: &Path) -> Vec<OsString> {
        let keys = Keys::replay();
        let own: BTreeSet<String> = p.frags.iter().map(|f| f.id.clone()).collect();
        let base = argv::without_given(&keys, self.base.clone(), &own);
        let mut words = argv::words(&base);
        words.extend(argv::words(&p.frags));
        let at = |f: &str| pdir.join(f).into_os_string();
        if p.repeats > 1 {
            words.push(format!("--repeat={}", p.repeats).into());
        } else {
            let mut o = OsString::from("--output-path=");
            o.push(at("records.jsonl"));
            words.push(o);
            let mut s = OsString::from("--summary-path=");
            s.push(at("summary.json"));
            words.push(s);
            words.push("--overwrite".into());
        }
        let mut r = OsString::from("--result-dir=");
        r.push(pdir.as_os_str());
        words.push(r);
        words
    }
}

/// What `experiment.json` records of one point.
#[derive(Debug, Clone, Serialize)]
pub struct PointRun {
    pub name: String,
    pub repeats: u32,
    pub dir: String,
    /// Its settings over the base's, as flags.
    pub overrides: Vec<String>,
    pub exit_code: u8,
}

/// One point compared with the baseline.
#[derive(Debug, Clone, Serialize)]
pub struct PointComparison {
    pub baseline: String,
    pub point: String,
    /// `None`: not comparable (`error` says why).
    pub comparison: Option<Comparison>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `experiment.json`.
#[derive(Debug, Clone, Serialize)]
pub struct ExperimentResult {
    pub file: String,
    pub tool_version: String,
    pub started_at: String,
    pub points: Vec<PointRun>,
    pub comparisons: Vec<PointComparison>,
}

/// The words of a point's own settings, for the console and the page.
fn overrides(p: &Point) -> Vec<String> {
    argv::words(&p.frags)
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect()
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

/// Run the experiment of `file` into `dir` (`None`: its `[experiment] dir`, else
/// `results/experiment-<UTC time>`): each point, then the comparisons. The exit status: the
/// first point's non-zero one, 130 when interrupted (the points done are kept and compared).
pub fn run(file: &Path, dir: Option<PathBuf>) -> Result<u8> {
    let exp = Experiment::read(file)?;
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
        argv.extend(exp.point_argv(p, &pdir));
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
        let words = overrides(p);
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
        let exit = crate::commands::replay(a)?;
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

/// Every point against the baseline (when the baseline ran).
fn compare_points(runs: &[PointRun], baseline: usize) -> Vec<PointComparison> {
    let Some(base) = runs.get(baseline) else {
        return Vec::new();
    };
    let base_side = crate::commands::load_side(&side_path(base));
    runs.iter()
        .enumerate()
        .filter(|(k, _)| *k != baseline)
        .map(|(_, r)| {
            let result = base_side.as_ref().map_err(|e| e.to_string()).and_then(|a| {
                let b = crate::commands::load_side(&side_path(r)).map_err(|e| e.to_string())?;
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

/// The console's text: the points, then each comparison's verdicts.
pub fn render(r: &ExperimentResult) -> String {
    let mut t = String::from("Experiment points\n");
    for p in &r.points {
        t.push_str(&format!(
            "  {:<16} repeats {:<3} exit {:<3} {}  {}\n",
            p.name,
            p.repeats,
            p.exit_code,
            p.dir,
            p.overrides.join(" ")
        ));
    }
    for c in &r.comparisons {
        t.push_str(&format!("\n{} vs {} (baseline)\n", c.point, c.baseline));
        match (&c.comparison, &c.error) {
            (Some(cmp), _) => t.push_str(&crate::report::compare::render_verdicts(cmp)),
            (None, Some(e)) => t.push_str(&format!("  not compared: {e}\n")),
            (None, None) => {}
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("exp.toml");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    #[test]
    fn points_override_the_base() {
        let (_d, p) = write(
            "[schedule]\nscale-factor = 1\nspin-us = 10\n[experiment]\nrepeats = 2\nbaseline = \"b\"\n[[point]]\nname = \"a\"\nrepeats = 1\n[[point]]\nname = \"b\"\nschedule.scale-factor = 2\n",
        );
        let e = Experiment::read(&p).unwrap();
        assert_eq!(e.baseline, 1);
        assert_eq!((e.points[0].repeats, e.points[1].repeats), (1, 2));
        let w: Vec<String> = e
            .point_argv(&e.points[1], Path::new("D/b"))
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            w,
            [
                "--spin-us=10",
                "--scale-factor=2",
                "--repeat=2",
                "--result-dir=D/b"
            ]
        );
        let w: Vec<String> = e
            .point_argv(&e.points[0], Path::new("D/a"))
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            w,
            [
                "--scale-factor=1",
                "--spin-us=10",
                "--output-path=D/a/records.jsonl",
                "--summary-path=D/a/summary.json",
                "--overwrite",
                "--result-dir=D/a"
            ]
        );
    }

    #[test]
    fn bad_experiments_name_file_and_line() {
        let err = |text: &str| {
            let (_d, p) = write(text);
            let e = Experiment::read(&p).unwrap_err().to_string();
            e.split_once("exp.toml").unwrap().1.to_string()
        };
        assert_eq!(
            err("[schedule]\nspin-us = 1\n"),
            ": no [[point]]: an experiment needs at least one"
        );
        assert_eq!(
            err("[[point]]\nname = \"a\"\n[[point]]\nname = \"a\"\n"),
            ":4: point \"a\" is named twice (its directory would be shared)"
        );
        assert_eq!(
            err("[[point]]\nname = \"a/b\"\n").split(':').nth(1),
            Some("2")
        );
        assert!(err("[[point]]\nname = \"a\"\nschedule.scale-factr = 2\n")
            .starts_with(":3: unknown key `scale-factr` in [schedule]"));
        assert!(
            err("[output]\nresult-dir = \"x\"\n[[point]]\nname = \"a\"\n")
                .starts_with(":2: `output.result-dir` is set per point")
        );
        assert_eq!(
            err("[experiment]\nbaseline = \"z\"\n[[point]]\nname = \"a\"\n"),
            ":2: baseline \"z\" is not the name of a point"
        );
        assert_eq!(
            err("[experiment]\nrepeat = 2\n[[point]]\nname = \"a\"\n"),
            ":2: unknown key `repeat` in [experiment]: dir, repeats, baseline"
        );
    }
}
