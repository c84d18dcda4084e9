//! The chart of a capacity sweep (`request-sim sweep`): served throughput and goodput against
//! the offered rate (left; the diagonal is "keeps up"), TTFT p50/p99 and TPOT p99 against the
//! offered rate (right), the capacity point marked on both.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axes::upper;
use super::{
    err, legend, line, register_font, save, Chart, Chart2d, DrawResult, Frame, BLUE_, FAMILY,
    GREEN_, GREY, ORANGE, RED_,
};
use crate::report::format::fmt_num;

const OFFERED: &str = "offered requests/s";

/// A line through the points with a dot on each.
fn dots<DB: DrawingBackend>(
    chart: &mut Chart2d<'_, DB>,
    pts: Vec<(f64, f64)>,
    color: RGBColor,
    label: &str,
) -> DrawResult {
    line(chart, pts.clone(), color, label)?;
    chart
        .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
        .map_err(err)?;
    Ok(())
}

/// One point of the sweep, as the chart needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepPlotPoint {
    pub offered_rps: f64,
    pub served_rps: f64,
    pub goodput_rps: Option<f64>,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    /// The capacity point.
    pub capacity: bool,
}

struct SweepChart {
    points: Vec<SweepPlotPoint>,
    answer: String,
}

impl SweepChart {
    fn x_max(&self) -> f64 {
        upper(
            self.points
                .iter()
                .map(|p| p.offered_rps)
                .fold(0.0, f64::max)
                * 1.05,
        )
    }

    fn rates<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let x_max = self.x_max();
        let y_top = self
            .points
            .iter()
            .map(|p| p.served_rps.max(p.offered_rps))
            .fold(0.0, f64::max);
        let y_max = upper(y_top * 1.15);
        let mut chart = Frame::panel("Served vs offered", OFFERED, "requests/s")
            .x(0.0..x_max)
            .y(0.0..y_max)
            .build(area)?;
        let m = x_max.min(y_max);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, 0.0), (m, m)],
                8,
                6,
                GREY.stroke_width(1),
            ))
            .map_err(err)?
            .label("served = offered")
            .legend(|(x, y)| PathElement::new(vec![(x - 10, y), (x + 10, y)], GREY));
        let served: Vec<(f64, f64)> = self
            .points
            .iter()
            .map(|p| (p.offered_rps, p.served_rps))
            .collect();
        dots(&mut chart, served, BLUE_, "throughput")?;
        let good: Vec<(f64, f64)> = self
            .points
            .iter()
            .filter_map(|p| Some((p.offered_rps, p.goodput_rps?)))
            .collect();
        if !good.is_empty() {
            dots(&mut chart, good, GREEN_, "goodput (within the SLOs)")?;
        }
        self.mark(&mut chart, y_max)?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }

    fn latency<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let x_max = self.x_max();
        let y_top = self
            .points
            .iter()
            .map(|p| {
                p.ttft_p99_ms
                    .unwrap_or(p.ttft_p50_ms)
                    .max(p.tpot_p99_ms.unwrap_or(0.0))
            })
            .fold(0.0, f64::max);
        let y_max = upper(y_top * 1.15).max(1.0);
        let mut chart = Frame::panel("Latency vs offered", OFFERED, "ms")
            .x(0.0..x_max)
            .y(0.0..y_max)
            .build(area)?;
        type Get = fn(&SweepPlotPoint) -> Option<f64>;
        let lines: [(&str, Get, RGBColor); 3] = [
            ("TTFT p50", |p| Some(p.ttft_p50_ms), BLUE_),
            ("TTFT p99", |p| p.ttft_p99_ms, RED_),
            ("TPOT p99", |p| p.tpot_p99_ms, ORANGE),
        ];
        for (name, get, color) in lines {
            let pts: Vec<(f64, f64)> = self
                .points
                .iter()
                .filter_map(|p| Some((p.offered_rps, get(p)?)))
                .collect();
            if pts.is_empty() {
                continue;
            }
            dots(&mut chart, pts, color, name)?;
        }
        self.mark(&mut chart, y_max)?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }

    /// A vertical line at the capacity point.
    fn mark<DB: DrawingBackend>(&self, chart: &mut Chart2d<'_, DB>, y_max: f64) -> DrawResult {
        if let Some(c) = self.points.iter().find(|p| p.capacity) {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(c.offered_rps, 0.0), (c.offered_rps, y_max)],
                    6,
                    4,
                    GREEN_.stroke_width(2),
                ))
                .map_err(err)?
                .label(format!(
                    "capacity: {} req/s offered",
                    fmt_num(&c.offered_rps)
                ))
                .legend(|(x, y)| {
                    PathElement::new(vec![(x - 10, y), (x + 10, y)], GREEN_.stroke_width(2))
                });
        }
        Ok(())
    }
}

impl Chart for SweepChart {
    fn size(&self) -> (u32, u32) {
        (1300, 600)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let root = root.titled(&self.answer, (FAMILY, 15)).map_err(err)?;
        let areas = root.split_evenly((1, 2));
        self.rates(&areas[0])?;
        self.latency(&areas[1])
    }
}

/// `sweep.png` and `sweep.svg` in `dir`; `answer` is the title.
pub fn write_sweep_plot(
    dir: &Path,
    points: &[SweepPlotPoint],
    answer: &str,
) -> anyhow::Result<Vec<PathBuf>> {
    register_font()?;
    let mut points = points.to_vec();
    points.sort_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps));
    save(
        dir,
        "sweep",
        &SweepChart {
            points,
            answer: answer.to_string(),
        },
    )
}
