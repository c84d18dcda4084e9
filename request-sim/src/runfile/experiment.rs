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

use super::argv::{self, Fragment};
use super::keys::Keys;
use super::read::{self, Doc, Item, Val};
use crate::Result;

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
    /// Read and check an experiment file against `keys` (the replay flags,
    /// `crate::cli::replay_keys`).
    pub fn read(path: &Path, keys: &Keys) -> Result<Experiment> {
        let doc = read::read(path)?;
        let base = argv::fragments(&doc, &doc.root, keys, &["experiment", "point"])?;
        refuse_per_point(&doc, keys, &base)?;
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
            let frags = argv::fragments(&doc, p, keys, &["name", "repeats"])?;
            refuse_per_point(&doc, keys, &frags)?;
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
    pub fn point_argv(&self, p: &Point, pdir: &Path, keys: &Keys) -> Vec<OsString> {
        let own: BTreeSet<String> = p.frags.iter().map(|f| f.id.clone()).collect();
        let base = argv::without_given(keys, self.base.clone(), &own);
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

/// The words of a point's own settings, for the console and the page.
pub fn overrides(p: &Point) -> Vec<String> {
    argv::words(&p.frags)
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect()
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
        let e = Experiment::read(&p, &crate::cli::replay_keys()).unwrap();
        assert_eq!(e.baseline, 1);
        assert_eq!((e.points[0].repeats, e.points[1].repeats), (1, 2));
        let w: Vec<String> = e
            .point_argv(&e.points[1], Path::new("D/b"), &crate::cli::replay_keys())
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
            .point_argv(&e.points[0], Path::new("D/a"), &crate::cli::replay_keys())
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
            let e = Experiment::read(&p, &crate::cli::replay_keys())
                .unwrap_err()
                .to_string();
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
