//! The chart of a capacity sweep (`request-sim sweep`), four panels against the offered rate
//! (or, for a `--users` sweep, the number of concurrent users), the capacity point marked on
//! each: served throughput and goodput (against the rate, the diagonal is "keeps up"), TTFT
//! p50/p99, TPOT p50/p99, and the client's send drift p99 with `--max-drift-ms`.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axes::upper;
use super::{
    err, legend, line, register_font, save, Chart, Chart2d, DrawResult, Frame, BLUE_, FAMILY,
    GREEN_, GREY, ORANGE, PURPLE, RED_,
};
use crate::report::format::fmt_num;

const OFFERED: &str = "offered requests/s";
const USERS: &str = "concurrent users";

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
    /// A `--users` point's number of users: when every point has one, it is the x axis.
    pub users: Option<usize>,
    pub served_rps: f64,
    pub goodput_rps: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    pub tpot_p99_ms: Option<f64>,
    pub drift_p99_ms: f64,
    /// The capacity point.
    pub capacity: bool,
    /// InferenceX's curve (a `--users` sweep): output tokens/s (per GPU with `--gpus`)
    /// against the median output tokens/s per user, and the scenario stamp.
    pub output_tps: f64,
    pub per_user_output_tps: Option<f64>,
    pub valid: Option<bool>,
}

struct SweepChart {
    points: Vec<SweepPlotPoint>,
    answer: String,
    max_drift_ms: f64,
}

impl SweepChart {
    /// Whether the x axis is the number of users (a `--users` sweep) rather than the rate.
    fn by_users(&self) -> bool {
        !self.points.is_empty() && self.points.iter().all(|p| p.users.is_some())
    }

    fn x_of(&self, p: &SweepPlotPoint) -> f64 {
        match (self.by_users(), p.users) {
            (true, Some(u)) => u as f64,
            _ => p.offered_rps,
        }
    }

    fn x_desc(&self) -> &'static str {
        if self.by_users() {
            USERS
        } else {
            OFFERED
        }
    }

    /// A panel's title: `what` vs the x axis.
    fn title(&self, what: &str) -> String {
        let x = if self.by_users() { "users" } else { "offered" };
        format!("{what} vs {x}")
    }

    fn x_max(&self) -> f64 {
        upper(self.points.iter().map(|p| self.x_of(p)).fold(0.0, f64::max) * 1.05)
    }

    fn rates<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let x_max = self.x_max();
        let y_top = self
            .points
            .iter()
            .map(|p| p.served_rps.max(p.offered_rps))
            .fold(0.0, f64::max);
        let y_max = upper(y_top * 1.15);
        let title = self.title("Served");
        let mut chart = Frame::panel(&title, self.x_desc(), "requests/s")
            .x(0.0..x_max)
            .y(0.0..y_max)
            .build(area)?;
        if !self.by_users() {
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
        }
        let served: Vec<(f64, f64)> = self
            .points
            .iter()
            .map(|p| (self.x_of(p), p.served_rps))
            .collect();
        dots(&mut chart, served, BLUE_, "throughput")?;
        let good: Vec<(f64, f64)> = self
            .points
            .iter()
            .filter_map(|p| Some((self.x_of(p), p.goodput_rps?)))
            .collect();
        if !good.is_empty() {
            dots(&mut chart, good, GREEN_, "goodput (within the SLOs)")?;
        }
        self.mark(&mut chart, y_max)?;
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }

    /// Lines of `(name, value, colour)` against the offered rate, with a dashed horizontal
    /// `limit` when given (the legend then sits in the middle, clear of the limit and of low
    /// values), the capacity marked.
    fn metric<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        (title, y_desc): (&str, &str),
        lines: &[(&str, Get, RGBColor)],
        limit: Option<(f64, String)>,
    ) -> DrawResult {
        let x_max = self.x_max();
        let has_limit = limit.is_some();
        let y_top = self
            .points
            .iter()
            .flat_map(|p| lines.iter().filter_map(|l| (l.1)(p)))
            .chain(limit.as_ref().map(|l| l.0))
            .fold(0.0, f64::max);
        let y_max = upper(y_top * 1.15);
        let title = self.title(title);
        let mut chart = Frame::panel(&title, self.x_desc(), y_desc)
            .x(0.0..x_max)
            .y(0.0..y_max)
            .build(area)?;
        for &(name, get, color) in lines {
            let pts: Vec<(f64, f64)> = self
                .points
                .iter()
                .filter_map(|p| Some((self.x_of(p), get(p)?)))
                .collect();
            if !pts.is_empty() {
                dots(&mut chart, pts, color, name)?;
            }
        }
        if let Some((y, label)) = limit {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, y), (x_max, y)],
                    8,
                    6,
                    GREY.stroke_width(2),
                ))
                .map_err(err)?
                .label(label)
                .legend(|(x, y)| PathElement::new(vec![(x - 10, y), (x + 10, y)], GREY));
        }
        self.mark(&mut chart, y_max)?;
        let pos = if has_limit {
            SeriesLabelPosition::MiddleRight
        } else {
            SeriesLabelPosition::UpperLeft
        };
        legend(&mut chart, pos)
    }

    /// A vertical line at the capacity point.
    fn mark<DB: DrawingBackend>(&self, chart: &mut Chart2d<'_, DB>, y_max: f64) -> DrawResult {
        if let Some(c) = self.points.iter().find(|p| p.capacity) {
            let x = self.x_of(c);
            let label = match (self.by_users(), c.users) {
                (true, Some(u)) => format!("capacity: {u} users"),
                _ => format!("capacity: {} req/s offered", fmt_num(&c.offered_rps)),
            };
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x, 0.0), (x, y_max)],
                    6,
                    4,
                    GREEN_.stroke_width(2),
                ))
                .map_err(err)?
                .label(label)
                .legend(|(x, y)| {
                    PathElement::new(vec![(x - 10, y), (x + 10, y)], GREEN_.stroke_width(2))
                });
        }
        Ok(())
    }
}

type Get = fn(&SweepPlotPoint) -> Option<f64>;

impl Chart for SweepChart {
    fn size(&self) -> (u32, u32) {
        (1300, 1000)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let root = root.titled(&self.answer, (FAMILY, 15)).map_err(err)?;
        let areas = root.split_evenly((2, 2));
        self.rates(&areas[0])?;
        self.metric(
            &areas[1],
            ("TTFT", "ms"),
            &[
                ("TTFT p50", |p| p.ttft_p50_ms, BLUE_),
                ("TTFT p99", |p| p.ttft_p99_ms, RED_),
            ],
            None,
        )?;
        self.metric(
            &areas[2],
            ("TPOT", "ms"),
            &[
                ("TPOT p50", |p| p.tpot_p50_ms, ORANGE),
                ("TPOT p99", |p| p.tpot_p99_ms, PURPLE),
            ],
            None,
        )?;
        self.metric(
            &areas[3],
            ("Send drift p99", "ms"),
            &[("drift p99", |p| Some(p.drift_p99_ms), GREY)],
            Some((
                self.max_drift_ms,
                format!(
                    "--max-drift-ms {}: above it a run is invalid",
                    self.max_drift_ms
                ),
            )),
        )
    }
}

/// InferenceX's chart: throughput against interactivity, one dot per `--users` point (green:
/// stamped valid, red: invalid, blue: no scenario), labelled with its users.
struct CurveChart {
    points: Vec<SweepPlotPoint>,
    per_gpu: bool,
}

impl Chart for CurveChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let pts: Vec<(f64, f64, &SweepPlotPoint)> = self
            .points
            .iter()
            .filter_map(|p| Some((p.per_user_output_tps?, p.output_tps, p)))
            .collect();
        let x_max = upper(pts.iter().map(|p| p.0).fold(0.0, f64::max) * 1.1);
        let y_max = upper(pts.iter().map(|p| p.1).fold(0.0, f64::max) * 1.15);
        let y_desc = if self.per_gpu {
            "output tokens/s per GPU"
        } else {
            "output tokens/s"
        };
        let mut chart = Frame::panel(
            "Throughput vs interactivity",
            "median output tokens/s per user",
            y_desc,
        )
        .x(0.0..x_max)
        .y(0.0..y_max)
        .build(root)?;
        line(
            &mut chart,
            pts.iter().map(|p| (p.0, p.1)).collect(),
            GREY,
            "sweep (fewer users: right)",
        )?;
        for (valid, color, label) in [
            (Some(true), GREEN_, "submission valid"),
            (Some(false), RED_, "submission invalid"),
            (None, BLUE_, "no scenario"),
        ] {
            let these: Vec<&(f64, f64, &SweepPlotPoint)> =
                pts.iter().filter(|p| p.2.valid == valid).collect();
            if these.is_empty() {
                continue;
            }
            chart
                .draw_series(
                    these
                        .iter()
                        .map(|p| Circle::new((p.0, p.1), 6, color.filled())),
                )
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| Circle::new((x, y), 5, color.filled()));
            chart
                .draw_series(these.iter().map(|p| {
                    Text::new(
                        format!("{} users", p.2.users.unwrap_or(0)),
                        (p.0, p.1),
                        (FAMILY, 13),
                    )
                }))
                .map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

/// `curve.png` and `curve.svg` in `dir` for a `--users` sweep whose points have an
/// interactivity (`per_gpu`: the throughput is per GPU); none otherwise.
pub fn write_curve_plot(
    dir: &Path,
    points: &[SweepPlotPoint],
    per_gpu: bool,
) -> crate::Result<Vec<PathBuf>> {
    let points: Vec<SweepPlotPoint> = points
        .iter()
        .filter(|p| p.users.is_some() && p.per_user_output_tps.is_some())
        .copied()
        .collect();
    if points.is_empty() {
        return Ok(Vec::new());
    }
    register_font()?;
    save(dir, "curve", &CurveChart { points, per_gpu })
}

/// `sweep.png` and `sweep.svg` in `dir`; `answer` is the title, `max_drift_ms` the drift
/// above which a point's run is invalid (drawn on the drift panel).
pub fn write_sweep_plot(
    dir: &Path,
    points: &[SweepPlotPoint],
    answer: &str,
    max_drift_ms: f64,
) -> crate::Result<Vec<PathBuf>> {
    register_font()?;
    let mut points = points.to_vec();
    points.sort_by(|a, b| {
        (a.users, a.offered_rps)
            .partial_cmp(&(b.users, b.offered_rps))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    save(
        dir,
        "sweep",
        &SweepChart {
            points,
            answer: answer.to_string(),
            max_drift_ms,
        },
    )
}
