//! [`Table`]: a console table in the shape of vLLM's `bench serve` output (`{:<40} {:<10.2f}`
//! rows, `=`/`-` centred headers, 50 columns), which keeps what was written as [`Item`]s for
//! the HTML report.

use std::fmt::Write;

use super::format::num;
use crate::stats::latency::{p_word, Metric};
use crate::stats::MetricStats;

/// Width of the tables and their `=`/`-` rules.
pub(super) const WIDTH: usize = 50;

/// A console table in the shape of vLLM's: centred `=`/`-` headers, `{:<40} {:<10}` rows.
/// Besides the text it keeps what was written as [`Item`]s, for the HTML report.
pub(super) struct Table {
    text: String,
    /// Rows without the trailing padding vLLM prints.
    trim: bool,
    items: Vec<Item>,
}

/// One piece of a [`Table`], as written.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(super) enum Item {
    /// A header line's title (trimmed).
    Header { title: String },
    /// A `label value` row.
    Row { label: String, value: String },
    /// A table of columns (the per-instance server lines).
    Grid {
        head: Vec<String>,
        rows: Vec<Vec<String>>,
    },
    /// Free-form text.
    Text { text: String },
}

impl Table {
    /// Rows padded exactly as vLLM prints them.
    pub(super) fn new() -> Table {
        Table {
            text: String::new(),
            trim: false,
            items: Vec::new(),
        }
    }
    /// Rows without trailing blanks.
    pub(super) fn trimmed() -> Table {
        Table {
            trim: true,
            ..Table::new()
        }
    }
    /// `title` centred in a line of `fill`.
    pub(super) fn header(&mut self, title: &str, fill: char) {
        let t = title.chars().count();
        let pad = WIDTH.saturating_sub(t);
        let left = pad / 2;
        let right = pad - left;
        let f = fill.to_string();
        let _ = writeln!(self.text, "{}{}{}", f.repeat(left), title, f.repeat(right));
        self.items.push(Item::Header {
            title: title.trim().to_string(),
        });
    }
    /// `label` and `v` with two decimals.
    pub(super) fn float(&mut self, label: &str, v: f64) {
        self.row(label, format!("{v:.2}"));
    }
    /// `label` and `v` with two decimals, or `n/a` when unknown.
    pub(super) fn maybe(&mut self, label: &str, v: Option<f64>) {
        self.row(label, num(v, 2));
    }
    /// `label` and `v`.
    pub(super) fn row(&mut self, label: &str, v: impl std::fmt::Display) {
        let start = self.text.len();
        let value = v.to_string();
        let _ = write!(self.text, "{:<40} {:<10}", label, value);
        if self.trim {
            let end = self.text[start..].trim_end().len();
            self.text.truncate(start + end);
        }
        self.text.push('\n');
        self.items.push(Item::Row {
            label: label.trim_end_matches(':').to_string(),
            value: value.trim().to_string(),
        });
    }
    /// Columns: the head and each row as one line made by `line`.
    pub(super) fn grid(
        &mut self,
        head: Vec<String>,
        rows: Vec<Vec<String>>,
        line: fn(&[String]) -> String,
    ) {
        for r in std::iter::once(&head).chain(&rows) {
            self.text.push_str(&line(r));
            self.text.push('\n');
        }
        self.items.push(Item::Grid { head, rows });
    }
    /// A closing line of `fill`.
    pub(super) fn rule(&mut self, fill: char) {
        let _ = writeln!(self.text, "{}", fill.to_string().repeat(WIDTH));
    }
    pub(super) fn finish(self) -> String {
        self.text
    }
    /// What was written, piece by piece.
    pub(super) fn items(self) -> Vec<Item> {
        self.items
    }
    /// A latency metric's header and its mean, median and percentile rows (in its unit).
    pub(super) fn metric(&mut self, metric: Metric, m: &MetricStats) {
        let (label, unit) = (metric.label(), metric.unit());
        // No values: every statistic is unknown, never 0.
        let known = |v: f64| m.known().then_some(v);
        self.header(metric.title(), '-');
        self.maybe(&format!("Mean {label} ({unit}):"), known(m.mean));
        self.maybe(&format!("Median {label} ({unit}):"), known(m.median));
        for (p, v) in &m.percentiles {
            self.maybe(&format!("P{} {label} ({unit}):", p_word(*p)), known(*v));
        }
    }
}

/// Free-form lines (`writeln!(table, ...)`).
impl Write for Table {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.text.push_str(s);
        match self.items.last_mut() {
            Some(Item::Text { text }) => text.push_str(s),
            _ => self.items.push(Item::Text {
                text: s.to_string(),
            }),
        }
        Ok(())
    }
}
