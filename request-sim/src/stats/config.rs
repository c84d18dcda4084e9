//! [`ReportConfig`]: what a summary computes (percentiles, goodput SLO, measurement window).

use serde::{Deserialize, Serialize};

use super::samples::Percentiles;
use super::slo::Slo;
use super::window::MeasureWindow;

/// What to compute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportConfig {
    /// Percentiles to report for every latency metric.
    pub percentiles: Percentiles,
    /// Goodput SLO; empty = no goodput.
    pub slo: Slo,
    /// `--measure-window`: statistics over the requests sent inside it (None: all).
    pub window: Option<MeasureWindow>,
}
