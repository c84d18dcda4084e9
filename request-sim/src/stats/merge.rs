//! Merging the records of several shards (`request-sim report A.jsonl B.jsonl ...` or a
//! directory) into one run, exactly: every statistic is recomputed from the union of the raw
//! records (never an average of per-shard percentiles); the records are merged and the union
//! checked by [`crate::record::merge`], each shard's send drift is computed here.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::config::ReportConfig;
use super::records::summarize_records;
use super::summary::DriftStats;
use crate::record::merge::{merge_shards as merge_records, read_shards, Shard, ShardFacts};
use crate::record::{ReadStats, Record};

pub use crate::record::merge::UnionCheck;

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
    // Per-shard drift from the same accumulator as the whole run, over each shard's whole run
    // (a measurement window is for the merged statistics).
    let whole = ReportConfig {
        window: None,
        ..cfg.clone()
    };
    let drift: Vec<DriftStats> = shards
        .iter()
        .map(|s| {
            summarize_records(&s.records, &s.read, &whole, None)
                .map(|s| s.drift)
                .unwrap_or_default()
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::merge::test_shards;

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
        let a = summarize_records(&m.records, &m.stats, &cfg, None).unwrap();
        let b = summarize_records(&concat, &st, &cfg, None).unwrap();
        assert_eq!(a.latency, b.latency);
        assert_eq!(a.drift, b.drift);
        assert_eq!(a.status, b.status);
    }
}
