//! Charts of a run, each written as PNG and SVG:
//! - `ttft_over_time`, `e2el_over_time`: per-request latency against trace time, with a
//!   per-interval median line and failed requests marked on the time axis;
//! - `latency_cdf`: cumulative distributions of TTFT, TPOT, ITL and E2EL;
//! - `throughput_inflight`: output tokens/s, requests sent/completed per second and requests
//!   in flight over the run;
//! - `drift_histogram`: send drift distribution;
//! - `server_over_time` (when `server_metrics.jsonl` is there): requests running and waiting,
//!   KV-cache usage, prefix-cache hit ratio, generation tokens/s and requests finished/s, one
//!   line per instance, on the throughput chart's time axis.
//!
//! and of a trace analysis (`request-sim analyze --plot-dir`, [`write_analysis_plots`]):
//! - `trace_cache_capacity`: LRU prefix-cache hit ratio against capacity (log axis) with the
//!   infinite-cache ratio;
//! - `trace_request_rate`: request rate over trace time;
//! - `trace_lengths`: input and output length histograms with CDFs.
//!
//! and of a sweep (`request-sim sweep`, [`write_sweep_plot`]): `sweep`, throughput and goodput,
//! TTFT p50/p99, TPOT p50/p99 and send drift p99 against the offered rate, capacity marked.
//!
//! PNG text uses a bundled DejaVu Sans (no system fonts needed).
//!
//! Files: [`run`] (the run charts), [`server`] (the servers over the run), [`sweep`] (the
//! sweep chart), [`trace`] (the trace-analysis charts), [`axes`] (tick
//! positions and a ticked axis); this file holds what every chart shares (the [`Chart`] trait,
//! saving as PNG and SVG, the font, the [`Frame`] of a linear chart, legend and colours). Number formats are
//! [`super::format`].

use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::format::fmt_num;

mod axes;
mod lanes;
mod run;
mod server;
mod sweep;
mod trace;

pub use run::write_plots;
pub use sweep::{write_curve_plot, write_sweep_plot, SweepPlotPoint};
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

fn save<C: Chart>(dir: &Path, name: &str, chart: &C) -> crate::Result<Vec<PathBuf>> {
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
) -> crate::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    root.fill(&WHITE)
        .map_err(|e| crate::Error::report(format!("{name}: {e}")))?;
    chart
        .draw(&root)
        .map_err(|e| crate::Error::report(format!("{name}: {e}")))?;
    root.present()
        .map_err(|e| crate::Error::report(format!("{name}: {e}")))
}

/// Makes the bundled font the one charts use.
fn register_font() -> crate::Result<()> {
    plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
        .map_err(|_| crate::Error::report("bundled font is invalid"))
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

/// A chart with linear f64 axes, as [`Frame::build`] makes it.
type Chart2d<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The frame every linear chart shares: caption, axes from `x` and `y`, axis descriptions,
/// round-number labels and a light grid, in the sizes of a whole figure or of one panel of
/// several (panels of one width line their plotting areas up, so time axes align).
struct Frame<'s> {
    caption: &'s str,
    x_desc: &'s str,
    y_desc: &'s str,
    x: Range<f64>,
    y: Range<f64>,
    panel: bool,
    x_fmt: fn(&f64) -> String,
    y_fmt: fn(&f64) -> String,
}

impl<'s> Frame<'s> {
    /// A whole figure: axes from 0 to 1 until set.
    fn figure(caption: &'s str, x_desc: &'s str, y_desc: &'s str) -> Self {
        Frame {
            caption,
            x_desc,
            y_desc,
            x: 0.0..1.0,
            y: 0.0..1.0,
            panel: false,
            x_fmt: fmt_num,
            y_fmt: fmt_num,
        }
    }

    /// One panel of a figure of several.
    fn panel(caption: &'s str, x_desc: &'s str, y_desc: &'s str) -> Self {
        Frame {
            panel: true,
            ..Frame::figure(caption, x_desc, y_desc)
        }
    }

    fn x(self, x: Range<f64>) -> Self {
        Frame { x, ..self }
    }

    fn y(self, y: Range<f64>) -> Self {
        Frame { y, ..self }
    }

    fn x_fmt(self, x_fmt: fn(&f64) -> String) -> Self {
        Frame { x_fmt, ..self }
    }

    fn y_fmt(self, y_fmt: fn(&f64) -> String) -> Self {
        Frame { y_fmt, ..self }
    }

    /// Draws the frame (caption, grid, labels) on `area` and returns the chart to draw into.
    fn build<'a, DB: DrawingBackend>(
        &self,
        area: &'a DrawingArea<DB, Shift>,
    ) -> Result<Chart2d<'a, DB>, String> {
        let (caption_px, margin, x_area, y_area, label_px) = if self.panel {
            (17, 10, 40, 65, 13)
        } else {
            (22, 15, 45, 70, 14)
        };
        let (caption, caption_px) = fit_caption(area, self.caption, caption_px, margin);
        let mut chart = ChartBuilder::on(area)
            .caption(caption, (FAMILY, caption_px))
            .margin(margin)
            .x_label_area_size(x_area)
            .y_label_area_size(y_area)
            .build_cartesian_2d(self.x.clone(), self.y.clone())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .x_label_formatter(&self.x_fmt)
            .y_label_formatter(&self.y_fmt)
            .label_style((FAMILY, label_px))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(err)?;
        Ok(chart)
    }
}

/// The smallest caption size a frame shrinks to before it shortens the caption.
const MIN_CAPTION_PX: u32 = 10;

/// `caption` at the largest size from `px` down to [`MIN_CAPTION_PX`] whose width fits `area`
/// less its margins (plotters centres a caption and cuts what overflows both edges: a long
/// panel caption lost its start and end); shortened with an ellipsis if even the smallest does
/// not fit.
fn fit_caption<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    caption: &str,
    px: u32,
    margin: u32,
) -> (String, u32) {
    let room = area.dim_in_pixel().0.saturating_sub(2 * margin);
    let width = |text: &str, px: u32| {
        area.estimate_text_size(text, &TextStyle::from((FAMILY, px).into_font()))
            .map_or(0, |(w, _)| w)
    };
    if let Some(px) = (MIN_CAPTION_PX..=px.max(MIN_CAPTION_PX))
        .rev()
        .find(|&p| width(caption, p) <= room)
    {
        return (caption.to_owned(), px);
    }
    let mut chars: Vec<char> = caption.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let short = format!("{}…", chars.iter().collect::<String>().trim_end());
        if width(&short, MIN_CAPTION_PX) <= room {
            return (short, MIN_CAPTION_PX);
        }
    }
    (String::new(), MIN_CAPTION_PX)
}

/// A line series with its legend entry.
fn line<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    label: &str,
) -> DrawResult {
    chart
        .draw_series(LineSeries::new(points, color.stroke_width(2)))
        .map_err(err)?
        .label(label)
        .legend(move |(x, y)| {
            PathElement::new(vec![(x - 10, y), (x + 10, y)], color.stroke_width(2))
        });
    Ok(())
}

/// A step line through intervals `(from, to, value)`: flat over each interval.
fn stairs(steps: impl Iterator<Item = (f64, f64, f64)>) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for (a, b, v) in steps {
        out.push((a, v));
        out.push((b, v));
    }
    out
}

/// The x axis of every chart over the run: the records' `sent_ms` clock and the scrapes' `t_ms`.
const RUN_CLOCK: &str = "time since the run's start (s)";

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
const PURPLE: RGBColor = RGBColor(148, 103, 189);
/// One colour per instance (repeating after ten).
const PALETTE: [RGBColor; 10] = [
    BLUE_,
    ORANGE,
    GREEN_,
    RED_,
    PURPLE,
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #39: the ITL panel's caption of `latency_cdf.png` (a 600-pixel panel of the
    /// 1200 × 800 figure) was wider than its panel at the panels' 17 px and lost both ends.
    #[test]
    fn a_long_panel_caption_is_shrunk_to_fit_its_panel() {
        register_font().unwrap();
        let mut buf = vec![0u8; 600 * 400 * 3];
        let area = BitMapBackend::with_buffer(&mut buf, (600, 400)).into_drawing_area();
        let caption =
            "ITL: mean gap per request, n=2000 (all 30000 gaps: mean 12.34 ms, as the summary)";
        let width = |text: &str, px: u32| {
            area.estimate_text_size(text, &TextStyle::from((FAMILY, px).into_font()))
                .unwrap()
                .0
        };
        let room = 600 - 2 * 10;
        assert!(width(caption, 17) > room, "the case no longer overflows");
        let (text, px) = fit_caption(&area, caption, 17, 10);
        assert_eq!(text, caption);
        assert!((MIN_CAPTION_PX..17).contains(&px), "{px}");
        assert!(width(&text, px) <= room);
        // A short caption keeps its size.
        assert_eq!(fit_caption(&area, "TTFT", 17, 10), ("TTFT".to_owned(), 17));
        // One too long for any size is shortened, never cut at both ends.
        let long = "x".repeat(400);
        let (text, px) = fit_caption(&area, &long, 17, 10);
        assert_eq!(px, MIN_CAPTION_PX);
        assert!(text.ends_with('…') && text.starts_with('x'), "{text}");
        assert!(width(&text, px) <= room);
    }
}
