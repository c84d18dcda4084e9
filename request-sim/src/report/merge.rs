//! Merging the records of several shards (`request-sim report A.jsonl B.jsonl ...` or a
//! directory) into one run, exactly: every statistic is recomputed from the union of the raw
//! records (never an average of per-shard percentiles), and the union is checked to hold every
//! request index exactly once.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::summary::DriftStats;
use super::{read_records, summarize_records, ReadStats, ReportConfig};
use crate::record::Record;

/// How many indexes a message lists before it abbreviates.
const LIST_MAX: usize = 20;

/// One input file of a merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardPart {
    pub path: PathBuf,
    pub records: usize,
    pub lowest_index: Option<usize>,
    pub highest_index: Option<usize>,
    /// Earliest actual send, ms since the shard's start (with `--start-at`, since the common
    /// start).
    pub first_sent_ms: Option<f64>,
    pub drift: DriftStats,
    /// An incomplete last line was ignored (the shard was killed mid-write).
    pub partial_last_line: Option<usize>,
}

/// The union check: every index in `0..expected` exactly once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnionCheck {
    /// Number of requests the union must hold (`--expected-requests`, else highest index + 1).
    pub expected: usize,
    /// Indexes in `0..expected` that no file holds, each with the file (position in
    /// [`Merged::parts`]) that should have held it when that can be told (round-robin
    /// dealing), else `None`.
    pub missing: Vec<(usize, Option<usize>)>,
    /// Indexes held more than once, with the files holding them (positions in
    /// [`Merged::parts`], repeated when one file holds it twice).
    pub duplicated: Vec<(usize, Vec<usize>)>,
    /// Indexes at or beyond `expected`.
    pub out_of_range: Vec<usize>,
}

impl UnionCheck {
    pub fn complete(&self) -> bool {
        self.missing.is_empty() && self.duplicated.is_empty() && self.out_of_range.is_empty()
    }
}

/// Several records files read as one run.
#[derive(Debug, Clone)]
pub struct Merged {
    /// All records, ordered by index (stable for duplicates).
    pub records: Vec<Record>,
    /// Read statistics summed over the files.
    pub stats: ReadStats,
    pub parts: Vec<ShardPart>,
    pub union: UnionCheck,
}

/// The records files named by `inputs`: files as given, directories expanded to their
/// `*.jsonl` files (not recursive, sorted by name; the scraper's `*server_metrics.jsonl` files
/// that may sit beside the records are not records). Errors when nothing is left.
pub fn expand_inputs(inputs: &[PathBuf]) -> crate::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| crate::Error::io(format!("cannot list {}", p.display()), e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && f.extension().is_some_and(|x| x == "jsonl"))
                .filter(|f| {
                    !f.file_name()
                        .is_some_and(|n| n.to_string_lossy().ends_with("server_metrics.jsonl"))
                })
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(crate::Error::config(format!(
                    "{}: no *.jsonl records files in this directory",
                    p.display()
                )));
            }
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    if out.is_empty() {
        return Err(crate::Error::config("no records files given"));
    }
    Ok(out)
}

/// Read and merge `files`. `expected`: the number of requests of the whole run (indexes
/// `0..expected`); `None` takes the highest index seen + 1, which cannot notice missing
/// requests at the very end.
pub fn merge_files(
    files: &[PathBuf],
    expected: Option<usize>,
    cfg: &ReportConfig,
) -> crate::Result<Merged> {
    let mut parts_records = Vec::with_capacity(files.len());
    for f in files {
        let (recs, st) = read_records(f)?;
        parts_records.push((f.clone(), recs, st));
    }
    Ok(merge_parts(parts_records, expected, cfg))
}

/// [`merge_files`] over records already read.
pub fn merge_parts(
    inputs: Vec<(PathBuf, Vec<Record>, ReadStats)>,
    expected: Option<usize>,
    cfg: &ReportConfig,
) -> Merged {
    let mut parts = Vec::with_capacity(inputs.len());
    let mut stats = ReadStats::default();
    let mut tagged: Vec<(usize, Record)> = Vec::new();
    for (pos, (path, recs, st)) in inputs.into_iter().enumerate() {
        // Per-shard drift from the same accumulator as the whole run.
        let drift = summarize_records(&recs, &st, cfg, None).drift;
        parts.push(ShardPart {
            path,
            records: recs.len(),
            lowest_index: recs.iter().map(|r| r.index).min(),
            highest_index: recs.iter().map(|r| r.index).max(),
            first_sent_ms: recs.iter().filter_map(|r| r.sent_ms).reduce(f64::min),
            drift,
            partial_last_line: st.partial_last_line,
        });
        stats.lines += st.lines;
        stats.records += st.records;
        stats.with_itl += st.with_itl;
        if stats.partial_last_line.is_none() {
            stats.partial_last_line = st.partial_last_line;
        }
        tagged.extend(recs.into_iter().map(|r| (pos, r)));
    }
    tagged.sort_by_key(|(_, r)| r.index);

    let expected = expected.unwrap_or_else(|| tagged.last().map_or(0, |(_, r)| r.index + 1));
    let owner = round_robin_owner(&tagged, parts.len());
    let mut union = UnionCheck {
        expected,
        ..UnionCheck::default()
    };
    let mut next = 0usize;
    let mut i = 0;
    while i < tagged.len() {
        let idx = tagged[i].1.index;
        let mut j = i + 1;
        while j < tagged.len() && tagged[j].1.index == idx {
            j += 1;
        }
        if idx >= expected {
            union.out_of_range.push(idx);
        } else {
            for m in next..idx {
                union
                    .missing
                    .push((m, owner.as_ref().map(|o| o[m % o.len()])));
            }
            next = idx + 1;
        }
        if j - i > 1 {
            union
                .duplicated
                .push((idx, tagged[i..j].iter().map(|(p, _)| *p).collect()));
        }
        i = j;
    }
    for m in next..expected {
        union
            .missing
            .push((m, owner.as_ref().map(|o| o[m % o.len()])));
    }
    Merged {
        records: tagged.into_iter().map(|(_, r)| r).collect(),
        stats,
        parts,
        union,
    }
}

/// When every file holds only indexes of one residue class modulo the number of files, and
/// the classes differ (round-robin dealing, the default for traces without sessions), the
/// file that owns residue `k` is `owner[k]`; else `None`.
fn round_robin_owner(tagged: &[(usize, Record)], n: usize) -> Option<Vec<usize>> {
    if n < 2 {
        return (n == 1).then(|| vec![0]);
    }
    let mut residue: Vec<Option<usize>> = vec![None; n];
    for (pos, r) in tagged {
        let k = r.index % n;
        match residue[*pos] {
            None => residue[*pos] = Some(k),
            Some(prev) if prev == k => {}
            Some(_) => return None,
        }
    }
    let mut owner = vec![usize::MAX; n];
    for (pos, k) in residue.iter().enumerate() {
        let k = (*k)?;
        if owner[k] != usize::MAX {
            return None;
        }
        owner[k] = pos;
    }
    Some(owner)
}

/// A short list of indexes: `3, 7, 11 ... (+97 more)`.
fn list(idx: impl Iterator<Item = usize>, total: usize) -> String {
    let shown: Vec<String> = idx.take(LIST_MAX).map(|i| i.to_string()).collect();
    let mut s = shown.join(", ");
    if total > shown.len() {
        let _ = write!(s, " ... (+{} more)", total - shown.len());
    }
    s
}

/// The per-shard table and the union check, as text for the console.
pub fn render_merge(m: &Merged) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:=^78}\n{:<4} {:>8} {:>10} {:>10} {:>9} {:>9} {:>9}  file",
        " Shards ", "#", "records", "indexes", "first(ms)", "drift p50", "drift p99", "drift max"
    );
    for (pos, p) in m.parts.iter().enumerate() {
        let range = match (p.lowest_index, p.highest_index) {
            (Some(a), Some(b)) => format!("{a}-{b}"),
            _ => "-".into(),
        };
        let first = p
            .first_sent_ms
            .map_or("-".to_string(), |v| format!("{v:.3}"));
        let _ = writeln!(
            s,
            "{:<4} {:>8} {:>10} {:>10} {:>9.3} {:>9.3} {:>9.3}  {}{}",
            pos,
            p.records,
            range,
            first,
            p.drift.p50_ms,
            p.drift.p99_ms,
            p.drift.max_ms,
            p.path.display(),
            p.partial_last_line
                .map_or(String::new(), |l| format!(" (incomplete line {l} ignored)"))
        );
    }
    let u = &m.union;
    if u.complete() {
        let _ = writeln!(
            s,
            "Union: every index 0..{} exactly once ({} records in {} files)",
            u.expected,
            m.records.len(),
            m.parts.len()
        );
        return s;
    }
    let _ = writeln!(s, "Union INCOMPLETE (expected indexes 0..{}):", u.expected);
    if !u.missing.is_empty() {
        let _ = writeln!(
            s,
            "  missing {}: {}",
            u.missing.len(),
            list(u.missing.iter().map(|(i, _)| *i), u.missing.len())
        );
        let mut by_owner: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, o) in &u.missing {
            if let Some(o) = o {
                by_owner.entry(*o).or_default().push(*i);
            }
        }
        for (o, idx) in by_owner {
            let _ = writeln!(
                s,
                "    {} missing from shard {} ({}): {}",
                idx.len(),
                o,
                m.parts[o].path.display(),
                list(idx.iter().copied(), idx.len())
            );
        }
    }
    if !u.duplicated.is_empty() {
        let _ = writeln!(s, "  duplicated {}:", u.duplicated.len());
        for (i, files) in u.duplicated.iter().take(LIST_MAX) {
            let names: Vec<String> = files
                .iter()
                .map(|p| format!("{} ({})", p, m.parts[*p].path.display()))
                .collect();
            let _ = writeln!(s, "    index {i} in shards {}", names.join(", "));
        }
        if u.duplicated.len() > LIST_MAX {
            let _ = writeln!(s, "    ... (+{} more)", u.duplicated.len() - LIST_MAX);
        }
    }
    if !u.out_of_range.is_empty() {
        let _ = writeln!(
            s,
            "  beyond the expected count {}: {}",
            u.out_of_range.len(),
            list(u.out_of_range.iter().copied(), u.out_of_range.len())
        );
    }
    s
}

/// Write merged records as one records JSONL file (in index order).
pub fn write_records(path: &Path, records: &[Record]) -> crate::Result<()> {
    use std::io::Write as _;
    let write = || -> std::io::Result<()> {
        let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
        for r in records {
            serde_json::to_writer(&mut w, r)?;
            w.write_all(b"\n")?;
        }
        w.flush()
    };
    write().map_err(|e| crate::Error::write(path, e))
}

/// Whether `path` names more than one records file (a directory), i.e. calls for a merge.
pub fn is_multi(paths: &[PathBuf]) -> bool {
    paths.len() > 1 || paths.first().is_some_and(|p| Path::new(p).is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Status;

    fn rec(index: usize, drift: f64) -> Record {
        Record {
            timestamp: index as f64,
            scheduled_ms: index as f64,
            sent_ms: Some(index as f64 + drift),
            drift_ms: Some(drift),
            http_status: Some(200),
            ttft_ms: Some(10.0 + index as f64),
            ttfc_ms: Some(10.0 + index as f64),
            e2e_ms: Some(50.0 + index as f64),
            done_ms: Some(51.0 + index as f64),
            tpot_ms: Some(2.0),
            input_length: 100,
            prompt_tokens: Some(100),
            cached_tokens: Some(0),
            output_length: 5,
            output_tokens: Some(5),
            chunks: 5,
            ..Record::new(index, index + 1, Status::Ok)
        }
    }

    fn shards(n: usize, total: usize, skip: &[usize]) -> Vec<(PathBuf, Vec<Record>, ReadStats)> {
        (0..n)
            .map(|k| {
                let recs: Vec<Record> = (0..total)
                    .filter(|i| i % n == k && !skip.contains(i))
                    .map(|i| rec(i, 0.01 * (k + 1) as f64))
                    .collect();
                let st = ReadStats {
                    lines: recs.len(),
                    records: recs.len(),
                    ..ReadStats::default()
                };
                (PathBuf::from(format!("shard-{k}.jsonl")), recs, st)
            })
            .collect()
    }

    #[test]
    fn complete_union_equals_concatenation() {
        let cfg = ReportConfig::default();
        let parts = shards(4, 103, &[]);
        let mut concat: Vec<Record> = parts.iter().flat_map(|p| p.1.clone()).collect();
        let m = merge_parts(parts, Some(103), &cfg);
        assert!(m.union.complete(), "{:?}", m.union);
        assert_eq!(m.records.len(), 103);
        assert!(m.records.windows(2).all(|w| w[0].index + 1 == w[1].index));
        assert_eq!(m.parts[2].records, 26);
        assert!((m.parts[2].drift.p99_ms - 0.03).abs() < 1e-9);
        assert_eq!(m.parts[1].first_sent_ms, Some(1.02));
        // Statistics from the raw union equal those of the plain concatenation.
        concat.reverse();
        let st = ReadStats {
            lines: 103,
            records: 103,
            ..ReadStats::default()
        };
        let a = summarize_records(&m.records, &m.stats, &cfg, None);
        let b = summarize_records(&concat, &st, &cfg, None);
        assert_eq!(a.latency, b.latency);
        assert_eq!(a.drift, b.drift);
        assert_eq!(a.status, b.status);
        assert!(render_merge(&m).contains("every index 0..103 exactly once"));
    }

    #[test]
    fn missing_and_duplicated_are_named_with_their_shard() {
        let cfg = ReportConfig::default();
        let mut parts = shards(4, 40, &[6, 10, 39]);
        // Shard 3 also holds index 7 twice.
        parts[3].1.push(rec(7, 0.0));
        let m = merge_parts(parts, Some(40), &cfg);
        assert!(!m.union.complete());
        assert_eq!(
            m.union.missing,
            vec![(6, Some(2)), (10, Some(2)), (39, Some(3))]
        );
        assert_eq!(m.union.duplicated, vec![(7, vec![3, 3])]);
        let text = render_merge(&m);
        assert!(text.contains("missing 3: 6, 10, 39"), "{text}");
        assert!(
            text.contains("2 missing from shard 2 (shard-2.jsonl): 6, 10"),
            "{text}"
        );
        assert!(
            text.contains("index 7 in shards 3 (shard-3.jsonl), 3"),
            "{text}"
        );
        // Without the expected count, a missing tail cannot be seen, the gap can.
        let m = merge_parts(shards(2, 10, &[3, 9]), None, &cfg);
        assert_eq!(m.union.expected, 9);
        assert_eq!(m.union.missing, vec![(3, Some(1))]);
    }

    #[test]
    fn directory_inputs() {
        let dir = std::env::temp_dir().join(format!("rs-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.jsonl"), "").unwrap();
        std::fs::write(dir.join("a.jsonl"), "").unwrap();
        std::fs::write(dir.join("a.jsonl.summary.json"), "{}").unwrap();
        let files = expand_inputs(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(files, vec![dir.join("a.jsonl"), dir.join("b.jsonl")]);
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let e = expand_inputs(&[empty]).unwrap_err().to_string();
        assert!(e.contains("no *.jsonl"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
