//! A repeat set (`replay --repeat N`): the runs of the same slice, each with its own seed and
//! files, and every headline metric as the mean over the repeats with its 95% Student-t
//! interval and spread. Written as `repeats.json` in the set's directory; `compare` reads it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::headline::{headlines, Better};
use super::inference::{mean_ci, MeanCi};
use super::summary::Summary;

/// The file a repeat set is described in.
pub const REPEATS_JSON: &str = "repeats.json";

/// One repeat of a set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatRun {
    /// 1-based.
    pub repeat: usize,
    pub seed: u64,
    /// Its directory, records and summary (paths as given to the run).
    pub dir: String,
    pub records: String,
    pub summary: String,
    /// How the server's prefix cache was emptied before it: `fresh simulator`, `reset`
    /// (`POST /reset_prefix_cache` answered 2xx), or `not reset` (the server has no such
    /// route, or refused it).
    pub cache: String,
    pub exit_code: i32,
}

/// One headline metric over the repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatMetric {
    /// Summary JSON key (`p99_ttft_ms`).
    pub key: String,
    pub label: String,
    pub better: Better,
    /// Each repeat's value, in repeat order (`null`: that repeat could not measure it).
    pub values: Vec<Option<f64>>,
    /// Mean, 95% interval and spread over the repeats that measured it (`null`: none did).
    pub ci: Option<MeanCi>,
}

impl RepeatMetric {
    /// The values known in every repeat (an interval over fewer would hide a failed repeat).
    pub fn known_values(&self) -> Option<Vec<f64>> {
        self.values.iter().copied().collect()
    }
}

/// A repeat set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatSet {
    pub repeats: Vec<RepeatRun>,
    /// Confidence level of the intervals (0.95).
    pub level: f64,
    pub metrics: Vec<RepeatMetric>,
}

impl RepeatSet {
    /// The set of `runs` with their summaries (same order, at least one).
    pub fn new(runs: Vec<RepeatRun>, summaries: &[Summary]) -> RepeatSet {
        let per: Vec<_> = summaries.iter().map(headlines).collect();
        let mut metrics: Vec<RepeatMetric> = Vec::new();
        // Keys in the first repeat's order, then any only later ones have.
        for h in per.iter().flatten() {
            if metrics.iter().any(|m| m.key == h.key) {
                continue;
            }
            let values: Vec<Option<f64>> = per
                .iter()
                .map(|hs| hs.iter().find(|x| x.key == h.key).and_then(|x| x.value))
                .collect();
            let known: Vec<f64> = values.iter().flatten().copied().collect();
            metrics.push(RepeatMetric {
                key: h.key.clone(),
                label: h.label.clone(),
                better: h.better,
                ci: mean_ci(&known),
                values,
            });
        }
        RepeatSet {
            repeats: runs,
            level: super::inference::LEVEL,
            metrics,
        }
    }

    /// Read `repeats.json` (a file or the directory holding it).
    pub fn read(path: &Path) -> crate::Result<RepeatSet> {
        let file = if path.is_dir() {
            path.join(REPEATS_JSON)
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read_to_string(&file)
            .map_err(|e| crate::Error::io(format!("cannot read {}", file.display()), e))?;
        serde_json::from_str(&text)
            .map_err(|e| crate::Error::report(format!("{}: not a repeat set: {e}", file.display())))
    }

    /// The metric with summary key `key`.
    pub fn metric(&self, key: &str) -> Option<&RepeatMetric> {
        self.metrics.iter().find(|m| m.key == key)
    }
}
