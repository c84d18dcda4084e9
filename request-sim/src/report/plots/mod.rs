//! Charts of a run, each written as PNG and SVG:
//! - `ttft_over_time`, `e2el_over_time`: per-request latency against trace time, with a
//!   per-interval median line and failed requests marked on the time axis;
//! - `latency_cdf`: cumulative distributions of TTFT, TPOT, ITL and E2EL;
//! - `throughput_inflight`: output tokens/s, requests sent/completed per second and requests
//!   in flight over the run;
//! - `drift_histogram`: send drift distribution.
//!
//! and of a trace analysis (`request-sim analyze --plot-dir`, [`write_analysis_plots`]):
//! - `trace_cache_capacity`: LRU prefix-cache hit ratio against capacity (log axis) with the
//!   infinite-cache ratio;
//! - `trace_request_rate`: request rate over trace time;
//! - `trace_lengths`: input and output length histograms with CDFs.
//!
//! and of a sweep (`request-sim sweep`, [`write_sweep_plot`]): `sweep`, throughput, goodput and
//! TTFT/TPOT against the offered rate with the capacity marked.
//!
//! PNG text uses a bundled DejaVu Sans (no system fonts needed).
//!
//! Files: [`run`] (the run charts), [`trace`] (the trace-analysis charts), [`axes`] (tick
//! positions and a ticked axis); this file holds what every chart shares (the [`Chart`] trait,
//! saving as PNG and SVG, the font, legend and colours). Number formats are
//! [`super::format`].

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

mod axes;
mod run;
mod sweep;
mod trace;

pub use run::write_plots;
pub use sweep::{write_sweep_plot, SweepPlotPoint};
pub use trace::write_analysis_plots;

const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
/// Most points of one CDF curve.
const CDF_POINTS: usize = 1_000;

type DrawResult = Result<(), String>;

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A chart that can be drawn on any backend.
trait Chart {
    fn size(&self) -> (u32, u32) {
        (1000, 600)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult;
}

fn save<C: Chart>(dir: &Path, name: &str, chart: &C) -> anyhow::Result<Vec<PathBuf>> {
    let png = dir.join(format!("{name}.png"));
    let svg = dir.join(format!("{name}.svg"));
    render(
        BitMapBackend::new(&png, chart.size()).into_drawing_area(),
        chart,
        &png,
    )?;
    render(
        SVGBackend::new(&svg, chart.size()).into_drawing_area(),
        chart,
        &svg,
    )?;
    Ok(vec![png, svg])
}

/// Draws `chart` on a white `root` and writes it to `path`.
fn render<DB: DrawingBackend, C: Chart>(
    root: DrawingArea<DB, Shift>,
    chart: &C,
    path: &Path,
) -> anyhow::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    root.fill(&WHITE)
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    chart
        .draw(&root)
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    root.present().map_err(|e| anyhow::anyhow!("{name}: {e}"))
}

/// Makes the bundled font the one charts use.
fn register_font() -> anyhow::Result<()> {
    plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
        .map_err(|_| anyhow::anyhow!("bundled font is invalid"))
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    pos: SeriesLabelPosition,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(pos)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

/// Histogram bars: one per non-empty bin, bin `i` spanning `lo + i·w .. lo + (i+1)·w`.
fn bars(
    counts: &[u64],
    lo: f64,
    w: f64,
    style: ShapeStyle,
) -> impl Iterator<Item = Rectangle<(f64, f64)>> + '_ {
    counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(move |(i, &c)| {
            let x0 = lo + i as f64 * w;
            Rectangle::new([(x0, 0.0), (x0 + w, c as f64)], style)
        })
}

const BLUE_: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREEN_: RGBColor = RGBColor(44, 160, 44);
const RED_: RGBColor = RGBColor(214, 39, 40);
const GREY: RGBColor = RGBColor(110, 110, 110);
