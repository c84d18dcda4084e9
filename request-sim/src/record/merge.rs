//! Merging the records files of several shards (`request-sim report A.jsonl B.jsonl ...` or a
//! directory) into the records of one run, ordered by index, with the check that the union
//! holds every request index exactly once. The statistics of the merged run (and each shard's
//! send drift) are computed from these raw records by [`crate::stats::merge`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::reader::{read_records, ReadStats};
use super::Record;

/// One records file as read.
#[derive(Debug, Clone)]
pub struct Shard {
    pub path: PathBuf,
    pub records: Vec<Record>,
    pub read: ReadStats,
}

/// What one input file of a merge held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardFacts {
    pub path: PathBuf,
    pub records: usize,
    pub lowest_index: Option<usize>,
    pub highest_index: Option<usize>,
    /// Earliest actual send, ms since the shard's start (with `--start-at`, since the common
    /// start).
    pub first_sent_ms: Option<f64>,
    /// An incomplete last line was ignored (the shard was killed mid-write).
    pub partial_last_line: Option<usize>,
}

impl ShardFacts {
    /// The facts of `shard`.
    pub fn of(shard: &Shard) -> ShardFacts {
        let recs = &shard.records;
        ShardFacts {
            path: shard.path.clone(),
            records: recs.len(),
            lowest_index: recs.iter().map(|r| r.index).min(),
            highest_index: recs.iter().map(|r| r.index).max(),
            first_sent_ms: recs.iter().filter_map(|r| r.sent_ms).reduce(f64::min),
            partial_last_line: shard.read.partial_last_line,
        }
    }
}

/// The union check: every index in `0..expected` exactly once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnionCheck {
    /// Number of requests the union must hold (`--expected-requests`, else highest index + 1).
    pub expected: usize,
    /// Indexes in `0..expected` that no file holds, each with the file (position in the
    /// merge's inputs) that should have held it when that can be told (round-robin dealing),
    /// else `None`.
    pub missing: Vec<(usize, Option<usize>)>,
    /// Indexes held more than once, with the files holding them (positions in the merge's
    /// inputs, repeated when one file holds it twice).
    pub duplicated: Vec<(usize, Vec<usize>)>,
    /// Indexes at or beyond `expected`.
    pub out_of_range: Vec<usize>,
}

impl UnionCheck {
    pub fn complete(&self) -> bool {
        self.missing.is_empty() && self.duplicated.is_empty() && self.out_of_range.is_empty()
    }
}

/// The records of several files as one run.
#[derive(Debug, Clone)]
pub struct MergedRecords {
    /// All records, ordered by index (stable for duplicates).
    pub records: Vec<Record>,
    /// Read statistics summed over the files.
    pub stats: ReadStats,
    /// Each file's facts, in input order.
    pub files: Vec<ShardFacts>,
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

/// Whether `paths` name more than one records file (or a directory), i.e. call for a merge.
pub fn is_multi(paths: &[PathBuf]) -> bool {
    paths.len() > 1 || paths.first().is_some_and(|p| Path::new(p).is_dir())
}

/// Read every file of `files`, in order.
pub fn read_shards(files: &[PathBuf]) -> crate::Result<Vec<Shard>> {
    files
        .iter()
        .map(|f| {
            let (records, read) = read_records(f)?;
            Ok(Shard {
                path: f.clone(),
                records,
                read,
            })
        })
        .collect()
}

/// Merge `shards` into one run. `expected`: the number of requests of the whole run (indexes
/// `0..expected`); `None` takes the highest index seen + 1, which cannot notice missing
/// requests at the very end.
pub fn merge_shards(shards: Vec<Shard>, expected: Option<usize>) -> MergedRecords {
    let mut files = Vec::with_capacity(shards.len());
    let mut stats = ReadStats::default();
    let mut tagged: Vec<(usize, Record)> = Vec::new();
    for (pos, shard) in shards.into_iter().enumerate() {
        files.push(ShardFacts::of(&shard));
        let st = &shard.read;
        stats.lines += st.lines;
        stats.records += st.records;
        stats.with_itl += st.with_itl;
        if stats.partial_last_line.is_none() {
            stats.partial_last_line = st.partial_last_line;
        }
        tagged.extend(shard.records.into_iter().map(|r| (pos, r)));
    }
    tagged.sort_by_key(|(_, r)| r.index);
    let expected = expected.unwrap_or_else(|| tagged.last().map_or(0, |(_, r)| r.index + 1));
    let union = union_check(&tagged, files.len(), expected);
    MergedRecords {
        records: tagged.into_iter().map(|(_, r)| r).collect(),
        stats,
        files,
        union,
    }
}

/// The union check of records tagged with their file's position, sorted by index.
fn union_check(tagged: &[(usize, Record)], n_files: usize, expected: usize) -> UnionCheck {
    let owner = round_robin_owner(tagged, n_files);
    let owner_of = |m: usize| owner.as_ref().map(|o| o[m % o.len()]);
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
            union.missing.extend((next..idx).map(|m| (m, owner_of(m))));
            next = idx + 1;
        }
        if j - i > 1 {
            union
                .duplicated
                .push((idx, tagged[i..j].iter().map(|(p, _)| *p).collect()));
        }
        i = j;
    }
    union
        .missing
        .extend((next..expected).map(|m| (m, owner_of(m))));
    union
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

/// Test shards: `n` files dealt round-robin from indexes `0..total` without `skip`, each record
/// sent `0.01 * (file + 1)` ms late.
#[cfg(test)]
pub(crate) fn test_shards(n: usize, total: usize, skip: &[usize]) -> Vec<Shard> {
    (0..n)
        .map(|k| {
            let records: Vec<Record> = (0..total)
                .filter(|i| i % n == k && !skip.contains(i))
                .map(|i| test_record(i, 0.01 * (k + 1) as f64))
                .collect();
            let read = ReadStats {
                lines: records.len(),
                records: records.len(),
                ..ReadStats::default()
            };
            Shard {
                path: PathBuf::from(format!("shard-{k}.jsonl")),
                records,
                read,
            }
        })
        .collect()
}

/// A completed test record of request `index`, sent `drift` ms late.
#[cfg(test)]
pub(crate) fn test_record(index: usize, drift: f64) -> Record {
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
        ..Record::new(index, index + 1, super::Status::Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_union_is_every_index_in_order() {
        let m = merge_shards(test_shards(4, 103, &[]), Some(103));
        assert!(m.union.complete(), "{:?}", m.union);
        assert_eq!(m.records.len(), 103);
        assert!(m.records.windows(2).all(|w| w[0].index + 1 == w[1].index));
        assert_eq!(m.files[2].records, 26);
        assert_eq!(m.files[1].first_sent_ms, Some(1.02));
    }

    #[test]
    fn missing_and_duplicated_are_named_with_their_shard() {
        let mut shards = test_shards(4, 40, &[6, 10, 39]);
        // Shard 3 also holds index 7 twice.
        shards[3].records.push(test_record(7, 0.0));
        let m = merge_shards(shards, Some(40));
        assert!(!m.union.complete());
        assert_eq!(
            m.union.missing,
            vec![(6, Some(2)), (10, Some(2)), (39, Some(3))]
        );
        assert_eq!(m.union.duplicated, vec![(7, vec![3, 3])]);
        // Without the expected count, a missing tail cannot be seen, the gap can.
        let m = merge_shards(test_shards(2, 10, &[3, 9]), None);
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
