//! The shards table of a merged run (`request-sim report A.jsonl B.jsonl ...` or a
//! directory): each shard's records and send drift, and the union check, as text.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::format::num_or_dash;
use crate::stats::merge::Merged;

/// How many indexes a message lists before it abbreviates.
const LIST_MAX: usize = 20;

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
        let first = num_or_dash(p.file.first_sent_ms, 3);
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
    use crate::stats::merge::merge_shards;
    use crate::stats::ReportConfig;

    #[test]
    fn complete_union_is_named() {
        let m = merge_shards(
            test_shards(4, 103, &[]),
            Some(103),
            &ReportConfig::default(),
        );
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
