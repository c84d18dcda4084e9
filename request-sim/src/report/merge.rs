//! Merging the records of several shards (`request-sim report A.jsonl B.jsonl ...` or a
//! directory) into one run, exactly: every statistic is recomputed from the union of the raw
//! records (never an average of per-shard percentiles), and the union is checked to hold every
//! request index exactly once (the records themselves are merged by [`crate::record::merge`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::summary::DriftStats;
use super::{summarize_records, ReportConfig};
use crate::record::merge::{merge_shards as merge_records, read_shards, Shard, ShardFacts};
use crate::record::{ReadStats, Record};

pub use crate::record::merge::UnionCheck;

/// How many indexes a message lists before it abbreviates.
const LIST_MAX: usize = 20;

/// One input file of a merge and its send drift.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardPart {
    #[serde(flatten)]
    pub file: ShardFacts,
    pub drift: DriftStats,
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

/// Read and merge `files`. `expected`: the number of requests of the whole run (indexes
/// `0..expected`); `None` takes the highest index seen + 1, which cannot notice missing
/// requests at the very end.
pub fn merge_files(
    files: &[PathBuf],
    expected: Option<usize>,
    cfg: &ReportConfig,
) -> crate::Result<Merged> {
    Ok(merge_shards(read_shards(files)?, expected, cfg))
}

/// [`merge_files`] over records already read.
pub fn merge_shards(shards: Vec<Shard>, expected: Option<usize>, cfg: &ReportConfig) -> Merged {
    // Per-shard drift from the same accumulator as the whole run.
    let drift: Vec<DriftStats> = shards
        .iter()
        .map(|s| summarize_records(&s.records, &s.read, cfg, None).drift)
        .collect();
    let m = merge_records(shards, expected);
    Merged {
        records: m.records,
        stats: m.stats,
        parts: m
            .files
            .into_iter()
            .zip(drift)
            .map(|(file, drift)| ShardPart { file, drift })
            .collect(),
        union: m.union,
    }
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
        let range = match (p.file.lowest_index, p.file.highest_index) {
            (Some(a), Some(b)) => format!("{a}-{b}"),
            _ => "-".into(),
        };
        let first = p
            .file
            .first_sent_ms
            .map_or("-".to_string(), |v| format!("{v:.3}"));
        let _ = writeln!(
            s,
            "{:<4} {:>8} {:>10} {:>10} {:>9.3} {:>9.3} {:>9.3}  {}{}",
            pos,
            p.file.records,
            range,
            first,
            p.drift.p50_ms,
            p.drift.p99_ms,
            p.drift.max_ms,
            p.file.path.display(),
            p.file
                .partial_last_line
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
                m.parts[o].file.path.display(),
                list(idx.iter().copied(), idx.len())
            );
        }
    }
    if !u.duplicated.is_empty() {
        let _ = writeln!(s, "  duplicated {}:", u.duplicated.len());
        for (i, files) in u.duplicated.iter().take(LIST_MAX) {
            let names: Vec<String> = files
                .iter()
                .map(|p| format!("{} ({})", p, m.parts[*p].file.path.display()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::merge::{test_record, test_shards};

    #[test]
    fn union_statistics_equal_the_concatenation() {
        let cfg = ReportConfig::default();
        let shards = test_shards(4, 103, &[]);
        let mut concat: Vec<Record> = shards.iter().flat_map(|p| p.records.clone()).collect();
        let m = merge_shards(shards, Some(103), &cfg);
        assert!(m.union.complete(), "{:?}", m.union);
        assert_eq!(m.parts[2].file.records, 26);
        assert!((m.parts[2].drift.p99_ms - 0.03).abs() < 1e-9);
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
        let mut shards = test_shards(4, 40, &[6, 10, 39]);
        // Shard 3 also holds index 7 twice.
        shards[3].records.push(test_record(7, 0.0));
        let text = render_merge(&merge_shards(shards, Some(40), &cfg));
        assert!(text.contains("missing 3: 6, 10, 39"), "{text}");
        assert!(
            text.contains("2 missing from shard 2 (shard-2.jsonl): 6, 10"),
            "{text}"
        );
        assert!(
            text.contains("index 7 in shards 3 (shard-3.jsonl), 3"),
            "{text}"
        );
    }
}
