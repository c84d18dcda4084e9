//! `compare`: two runs (or repeat sets) side by side, their verdicts, and the `--fail-if-worse`
//! gates.

use std::path::Path;

use super::merged_summary;
use crate::cli::CompareArgs;
use crate::report;
use crate::stats::{self, ReportConfig, Summary};
use crate::{Error, Result};

/// Exit status of `compare` when a `--fail-if-worse` gate trips.
const EXIT_WORSE: u8 = 7;

/// A side of `compare`: a repeat set (a directory with `repeats.json`, or that file), a
/// directory of shard records, a records JSONL, or a summary JSON (with its records when they
/// are found at its `records_path`). Records are kept for the bootstrap, restricted to the
/// summary's measure window when it had one.
pub fn load_side(path: &Path) -> Result<stats::compare::Side> {
    use stats::repeats::REPEATS_JSON;
    let name = path.display().to_string();
    let set_file = if path.is_dir() {
        Some(path.join(REPEATS_JSON)).filter(|p| p.is_file())
    } else {
        path.file_name()
            .is_some_and(|f| f == REPEATS_JSON)
            .then(|| path.to_path_buf())
    };
    if let Some(f) = set_file {
        return load_set(name, &f);
    }
    let (summary, records) = if path.is_dir() {
        let cfg = ReportConfig::default();
        let (s, m) = merged_summary(&[path.to_path_buf()], None, &cfg)?;
        (s, Some(m.records))
    } else {
        let as_records = || -> Result<(Summary, Option<Vec<crate::record::Record>>)> {
            let info = report::find_run_info(path);
            let s = stats::report_from_records(path, &ReportConfig::default(), info)?;
            let (rs, _) = crate::record::read_records(path)?;
            Ok((s, Some(rs)))
        };
        if path.extension().is_some_and(|e| e == "jsonl") {
            as_records()?
        } else {
            match report::read_summary(path) {
                Ok(s) => {
                    let rs = s
                        .run
                        .records_path
                        .as_deref()
                        .map(Path::new)
                        .filter(|p| p.is_file())
                        .and_then(|p| crate::record::read_records(p).ok())
                        .map(|(rs, _)| rs);
                    (s, rs)
                }
                Err(e) => as_records().map_err(|e2| {
                    Error::report(format!(
                        "{}: neither a summary ({e:#}) nor records ({e2})",
                        path.display()
                    ))
                })?,
            }
        }
    };
    // The records the summary's statistics cover.
    let records = match (&summary.measure_window, records) {
        (Some(w), Some(rs)) => {
            let end = w.end_s.map_or(f64::INFINITY, |e| e * 1e3);
            Some(
                rs.into_iter()
                    .filter(|r| stats::window::inside(r, w.start_s * 1e3, end))
                    .collect(),
            )
        }
        (_, rs) => rs,
    };
    Ok(stats::compare::Side {
        name,
        summary,
        repeats: None,
        records,
    })
}

/// A side of `compare` that is a repeat set (`f`: its `repeats.json`): the first repeat's
/// summary, and every repeat's records (none when one cannot be read).
fn load_set(name: String, f: &Path) -> Result<stats::compare::Side> {
    let set = stats::repeats::RepeatSet::read(f)?;
    let first = set
        .repeats
        .first()
        .ok_or_else(|| Error::report(format!("{}: a repeat set of no repeats", f.display())))?;
    let summary = report::read_summary(Path::new(&first.summary))?;
    let mut records = Some(Vec::new());
    for r in &set.repeats {
        match crate::record::read_records(Path::new(&r.records)) {
            Ok((rs, _)) => {
                if let Some(v) = records.as_mut() {
                    v.extend(rs);
                }
            }
            Err(_) => records = None,
        }
    }
    Ok(stats::compare::Side {
        name,
        summary,
        repeats: Some(set),
        records,
    })
}

/// `compare A B`: the values side by side (single runs), the verdicts, and the exit status of
/// `--fail-if-worse` (7 when a gate trips, 1 when one cannot be decided).
pub fn compare(args: CompareArgs) -> Result<u8> {
    let a = load_side(&args.a)?;
    let b = load_side(&args.b)?;
    let c = stats::compare::compare(&a, &b).map_err(Error::report)?;
    if args.json {
        report::print_json(&c)?;
    } else {
        let mut text = String::new();
        if a.repeats.is_none() && b.repeats.is_none() {
            text.push_str(&report::render_compare(&a.summary, &b.summary));
            text.push('\n');
        } else {
            let sets: Vec<&str> = [("A", &a), ("B", &b)]
                .iter()
                .filter(|(_, s)| s.repeats.is_some())
                .map(|(n, _)| *n)
                .collect();
            text.push_str(&format!(
                "No side-by-side table of run values: {} a repeat set, whose values are one per repeat, not one run's (each repeat's summary is in its directory, listed in repeats.json). The table below gives each headline metric's mean over the repeats.\n\n",
                if sets.len() == 2 { "A and B are each".to_string() } else { format!("{} is", sets[0]) }
            ));
        }
        text.push_str(&report::compare::render_verdicts(&c));
        report::print_stdout(&format!("{text}\n"))?;
    }
    if let Some(path) = &args.html {
        report::html::write_compare_html(path, &a.name, &b.name, &c)?;
        eprintln!("request-sim: wrote {}", path.display());
    }
    let mut code = 0;
    for gate in &args.fail_if_worse {
        match gate.check(&c) {
            Ok(Some(why)) => {
                eprintln!(
                    "request-sim: exit status {EXIT_WORSE}: {why} (--fail-if-worse {}:{})",
                    gate.key, gate.pct
                );
                code = EXIT_WORSE;
            }
            Ok(None) => {}
            Err(e) => return Err(Error::report(e)),
        }
    }
    Ok(code)
}
