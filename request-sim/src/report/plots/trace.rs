//! The charts of a trace analysis (`request-sim analyze TRACE --plot-dir DIR`):
//! - `trace_cache_capacity`: prefix-cache hit ratio of an LRU cache against its capacity in
//!   tokens (log axis), with the infinite-cache ratio as a reference line;
//! - `trace_request_rate`: requests per second over trace time;
//! - `trace_lengths`: input and output length histograms with their CDFs.

use std::path::{Path, PathBuf};

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axes::{log10_ticks, nice_ticks, spaced, upper, TickedAxis};
use super::CDF_POINTS;
use super::{
    bars, err, legend, register_font, save, Chart, DrawResult, BLUE_, FAMILY, GREEN_, GREY, ORANGE,
    RED_,
};
use crate::report::format::{fmt_num, fmt_si, fmt_tokens, requests, thousands};
use crate::stats::samples::percentile_sorted;

/// Hit ratio of an LRU cache against its capacity, as in the Mooncake paper's cache-capacity
/// figure; the x axis is log2 of the capacity in tokens.
struct CacheCapacity {
    requests: usize,
    block_size: usize,
    /// (capacity tokens, token hit ratio %), capacity > 0, ascending.
    points: Vec<(f64, f64)>,
    /// Sweep sizes of zero tokens (left out: not on a log axis).
    zero_sizes: usize,
    infinite_pct: f64,
    /// Tokens of all distinct prefix blocks: an LRU cache this large never evicts.
    footprint_tokens: f64,
}

impl Chart for CacheCapacity {
    fn size(&self) -> (u32, u32) {
        (1100, 650)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let xs: Vec<f64> = self.points.iter().map(|p| p.0.log2()).collect();
        let (lo, hi) = match (xs.first(), xs.last()) {
            (Some(&a), Some(&b)) => (a - 0.5, b + 0.5),
            _ => {
                let f = self.footprint_tokens.max(1024.0).log2();
                (f - 1.0, f + 1.0)
            }
        };
        let top = self
            .points
            .iter()
            .map(|p| p.1)
            .fold(self.infinite_pct, f64::max);
        let y_max = ((top * 1.15 / 10.0).ceil() * 10.0).clamp(10.0, 100.0);
        let ticks = spaced(&xs, (hi - lo) / 16.0);
        let mut caption = format!(
            "Prefix-cache hit ratio vs LRU cache capacity ({}, {} tokens per block)",
            requests(self.requests),
            self.block_size
        );
        if self.zero_sizes > 0 {
            caption.push_str(" (size 0 not drawn)");
        }
        let mut chart = figure(root, caption)
            .build_cartesian_2d(
                TickedAxis::new(lo, hi, ticks.clone(), Vec::new()),
                0.0..y_max,
            )
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(format!(
                "LRU cache capacity (tokens, log scale; Ki = 1024, Mi = 1024²; 1 block = {} tokens)",
                self.block_size
            ))
            .y_desc("hit ratio (% of input tokens)")
            .y_max_light_lines(4)
            .x_label_formatter(&|x| fmt_tokens(x.exp2().round()))
            .y_label_formatter(&|y| format!("{y:.0}%"))
            .label_style((FAMILY, 14))
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(RGBColor(242, 242, 242))
            .draw()
            .map_err(err)?;

        let inf = self.infinite_pct;
        dashed(
            &mut chart,
            vec![(lo, inf), (hi, inf)],
            (10, 6),
            RED_.stroke_width(2),
            format!("infinite cache: {inf:.2}%"),
        )?;
        let f = self.footprint_tokens;
        if f > 0.0 && (lo..=hi).contains(&f.log2()) {
            dashed(
                &mut chart,
                vec![(f.log2(), 0.0), (f.log2(), y_max)],
                (4, 4),
                GREY.stroke_width(1),
                format!("all distinct blocks fit: {} tokens", fmt_si(f)),
            )?;
        }
        let pts: Vec<(f64, f64)> = self.points.iter().map(|p| (p.0.log2(), p.1)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), BLUE_.stroke_width(2)))
            .map_err(err)?
            .label("LRU cache")
            .legend(|(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(-10, 0), (10, 0)], BLUE_.stroke_width(2))
                    + Circle::new((0, 0), 4, BLUE_.filled())
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, BLUE_.filled())))
            .map_err(err)?;
        // Value labels on the points that have an axis tick (the others would crowd).
        let style = TextStyle::from((FAMILY, 12).into_font())
            .pos(Pos::new(HPos::Center, VPos::Bottom))
            .color(&BLUE_);
        chart
            .draw_series(pts.iter().filter(|p| ticks.contains(&p.0)).map(|&(x, y)| {
                EmptyElement::at((x, y)) + Text::new(format!("{y:.1}%"), (0, -8), &style)
            }))
            .map_err(err)?;
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    }
}

/// Requests per second over trace time, one bar per rate-series bucket.
struct RateOverTime {
    bucket_s: f64,
    /// (bucket start s, requests/s).
    points: Vec<(f64, f64)>,
    mean: Option<f64>,
    peak: u64,
    peak_at_s: f64,
}

impl Chart for RateOverTime {
    fn size(&self) -> (u32, u32) {
        (1100, 550)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let end_s = self.points.len() as f64 * self.bucket_s;
        let (unit, div) = if end_s <= 900.0 {
            ("s", 1.0)
        } else if end_s <= 48.0 * 3600.0 {
            ("min", 60.0)
        } else {
            ("h", 3600.0)
        };
        let x_max = (end_s / div).max(f64::MIN_POSITIVE);
        let top = self
            .points
            .iter()
            .map(|p| p.1)
            .fold(self.mean.unwrap_or(0.0), f64::max);
        // Headroom above the bars for the legend.
        let y_max = upper(top * 1.3);
        let caption = format!(
            "Request rate over trace time ({} s buckets; peak {} req/s in a 1-s window at {:.0} s)",
            fmt_num(&self.bucket_s),
            self.peak,
            self.peak_at_s
        );
        let mut chart = figure(root, caption)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(format!("trace time ({unit})"))
            .y_desc("requests/s")
            .x_label_formatter(&fmt_num)
            .y_label_formatter(&|y| fmt_si(*y))
            .max_light_lines(4)
            .label_style((FAMILY, 14))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(err)?;
        let w = self.bucket_s / div;
        chart
            .draw_series(self.points.iter().map(|&(s, r)| {
                Rectangle::new([(s / div, 0.0), (s / div + w, r)], BLUE_.mix(0.35).filled())
            }))
            .map_err(err)?;
        let mut step = Vec::with_capacity(self.points.len() * 2);
        for &(s, r) in &self.points {
            step.push((s / div, r));
            step.push((s / div + w, r));
        }
        chart
            .draw_series(LineSeries::new(step, BLUE_.stroke_width(2)))
            .map_err(err)?
            .label(format!(
                "requests/s per {} s bucket",
                fmt_num(&self.bucket_s)
            ))
            .legend(|(x, y)| {
                Rectangle::new([(x - 10, y - 5), (x + 10, y + 5)], BLUE_.mix(0.5).filled())
            });
        if let Some(m) = self.mean {
            dashed(
                &mut chart,
                vec![(0.0, m), (x_max, m)],
                (10, 6),
                ORANGE.stroke_width(2),
                format!("mean over the trace: {m:.2} req/s"),
            )?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

/// Bins of a length histogram.
const BINS: usize = 50;

/// A length panel's chart: the histogram's axes and the CDF's (right).
type PanelChart<'a, DB> = plotters::chart::DualCoordChartContext<
    'a,
    DB,
    Cartesian2d<TickedAxis, RangedCoordf64>,
    Cartesian2d<RangedCoordf64, RangedCoordf64>,
>;

/// One length distribution: histogram (left axis) and CDF (right axis).
struct LengthPanel {
    name: &'static str,
    sorted: Vec<u32>,
    mean: f64,
    /// Bins of equal width on a log10 axis (heavy-tailed prompt lengths), else linear from 0.
    log_x: bool,
}

impl LengthPanel {
    fn pos(&self, v: f64) -> f64 {
        if self.log_x {
            v.max(1.0).log10()
        } else {
            v
        }
    }

    /// The shortest and longest length (0 and 1 without requests).
    fn min_max(&self) -> (f64, f64) {
        match (self.sorted.first(), self.sorted.last()) {
            (Some(&a), Some(&b)) => (f64::from(a), f64::from(b)),
            _ => (0.0, 1.0),
        }
    }

    /// The x axis from the lengths `min..max`: log10 of them, or linear from 0; never empty.
    fn x_range(&self, min: f64, max: f64) -> (f64, f64) {
        let (mut lo, mut hi) = if self.log_x {
            (self.pos(min), self.pos(max))
        } else {
            (0.0, max)
        };
        if hi - lo < 1e-9 {
            if self.log_x {
                (lo, hi) = (lo - 0.5, hi + 0.5);
            } else {
                hi = lo + 1.0;
            }
        }
        (lo, hi)
    }

    /// Requests per bin: [`BINS`] bins of width `w` from `lo` on the x axis.
    fn histogram(&self, lo: f64, w: f64) -> Vec<u64> {
        let mut counts = vec![0u64; BINS];
        for &v in &self.sorted {
            let i = ((self.pos(f64::from(v)) - lo) / w).floor().max(0.0) as usize;
            counts[i.min(BINS - 1)] += 1;
        }
        counts
    }

    /// The CDF at evenly spaced ranks (exact at the ends), starting at 0 at `min`.
    fn cdf(&self, min: f64) -> Vec<(f64, f64)> {
        let n = self.sorted.len();
        let k = CDF_POINTS.min(n);
        let mut cdf = Vec::with_capacity(k + 1);
        cdf.push((self.pos(min), 0.0));
        for i in 0..k {
            let r = if k == 1 { n - 1 } else { i * (n - 1) / (k - 1) };
            cdf.push((
                self.pos(f64::from(self.sorted[r])),
                (r + 1) as f64 / n as f64,
            ));
        }
        cdf
    }

    /// The mean, p50 and p99 lines: label, length and colour.
    fn markers(&self) -> [(String, f64, RGBColor); 3] {
        let v: Vec<f64> = self.sorted.iter().map(|&x| f64::from(x)).collect();
        let (p50, p99) = (percentile_sorted(&v, 50.0), percentile_sorted(&v, 99.0));
        [
            (
                format!("mean: {}", thousands(self.mean.round() as u64)),
                self.mean,
                ORANGE,
            ),
            (
                format!("p50: {}", thousands(p50.round() as u64)),
                p50,
                GREEN_,
            ),
            (format!("p99: {}", thousands(p99.round() as u64)), p99, RED_),
        ]
    }

    /// The panel's frame on `area`: caption, the histogram's axes (x from `lo` to `hi`, y to
    /// `y_max`) and the CDF's on the right.
    fn frame<'a, DB: DrawingBackend>(
        &self,
        area: &'a DrawingArea<DB, Shift>,
        (lo, hi): (f64, f64),
        max: f64,
        y_max: f64,
    ) -> Result<PanelChart<'a, DB>, String> {
        let n = self.sorted.len();
        let (bold, light) = if self.log_x {
            log10_ticks(lo, hi)
        } else {
            (nice_ticks(lo, hi, 8), Vec::new())
        };
        let caption = if n == 0 {
            format!("{} length: no requests", self.name)
        } else {
            format!(
                "{} length ({}, max {})",
                self.name,
                requests(n),
                thousands(max as u64)
            )
        };
        let mut chart = ChartBuilder::on(area)
            .caption(caption, (FAMILY, 18))
            .margin(12)
            .margin_right(20)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .right_y_label_area_size(55)
            .build_cartesian_2d(TickedAxis::new(lo, hi, bold, light), 0.0..y_max)
            .map_err(err)?
            .set_secondary_coord(lo..hi, 0.0..1.0);
        let log = self.log_x;
        let lname = self.name.to_lowercase();
        chart
            .configure_mesh()
            .x_desc(if log {
                format!("{lname} length (tokens, log scale)")
            } else {
                format!("{lname} length (tokens)")
            })
            .y_desc("requests per bin")
            .y_max_light_lines(4)
            .x_label_formatter(&|x| {
                if log {
                    fmt_si(10f64.powf(*x).round())
                } else {
                    fmt_si(*x)
                }
            })
            .y_label_formatter(&fmt_num)
            .label_style((FAMILY, 13))
            .bold_line_style(RGBColor(225, 225, 225))
            .light_line_style(RGBColor(243, 243, 243))
            .draw()
            .map_err(err)?;
        chart
            .configure_secondary_axes()
            .y_desc("cumulative fraction of requests")
            .label_style((FAMILY, 13))
            .draw()
            .map_err(err)?;
        Ok(chart)
    }

    /// The histogram, its CDF and the mean, p50 and p99 lines on `area`.
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let (min, max) = self.min_max();
        let (lo, hi) = self.x_range(min, max);
        let w = (hi - lo) / BINS as f64;
        let counts = self.histogram(lo, w);
        // Headroom above the bars for the legend.
        let y_max = upper((counts.iter().copied().max().unwrap_or(0) as f64 * 1.35).max(4.0));
        let mut chart = self.frame(area, (lo, hi), max, y_max)?;
        if self.sorted.is_empty() {
            return Ok(());
        }
        chart
            .draw_series(bars(&counts, lo, w, BLUE_.mix(0.55).filled()))
            .map_err(err)?
            .label(format!("requests per bin ({BINS} bins)"))
            .legend(|(x, y)| {
                Rectangle::new([(x - 10, y - 5), (x + 10, y + 5)], BLUE_.mix(0.55).filled())
            });
        chart
            .draw_secondary_series(LineSeries::new(self.cdf(min), BLACK.stroke_width(2)))
            .map_err(err)?
            .label("CDF (right axis)")
            .legend(|(x, y)| {
                PathElement::new(vec![(x - 10, y), (x + 10, y)], BLACK.stroke_width(2))
            });
        for (label, v, color) in self.markers() {
            let x = self.pos(v);
            dashed(
                &mut chart,
                vec![(x, 0.0), (x, y_max)],
                (6, 4),
                color.stroke_width(2),
                label,
            )?;
        }
        chart
            .configure_series_labels()
            .position(if self.log_x {
                SeriesLabelPosition::UpperLeft
            } else {
                SeriesLabelPosition::MiddleRight
            })
            .label_font((FAMILY, 13))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(err)
    }
}

/// Input and output length distributions side by side.
struct Lengths {
    panels: [LengthPanel; 2],
}

impl Chart for Lengths {
    fn size(&self) -> (u32, u32) {
        (1400, 600)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let root = root
            .titled("Request length distributions", (FAMILY, 22))
            .map_err(err)?;
        for (area, panel) in root.split_evenly((1, 2)).iter().zip(&self.panels) {
            panel.draw(area)?;
        }
        Ok(())
    }
}

/// The builder of a whole trace chart: its caption, margins and label areas.
fn figure<'a, 'b, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    caption: String,
) -> ChartBuilder<'a, 'b, DB> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(caption, (FAMILY, 21))
        .margin(15)
        .margin_right(30)
        .x_label_area_size(50)
        .y_label_area_size(70);
    builder
}

/// A dashed reference line (`dash` drawn, `gap` skipped) with its legend entry.
fn dashed<'a, DB: DrawingBackend + 'a, X: Ranged<ValueType = f64>>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, RangedCoordf64>>,
    points: Vec<(f64, f64)>,
    (dash, gap): (u32, u32),
    style: ShapeStyle,
    label: String,
) -> DrawResult {
    chart
        .draw_series(DashedLineSeries::new(points, dash, gap, style))
        .map_err(err)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x - 10, y), (x + 10, y)], style));
    Ok(())
}

/// Plots of a trace analysis into `dir` (created if missing), PNG and SVG of each: the
/// cache-capacity curve, the request rate over time and the length distributions. Returns the
/// files written.
pub fn write_analysis_plots(
    dir: &Path,
    a: &crate::analyze::Analysis,
) -> crate::Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir)
        .map_err(|e| crate::Error::io(format!("cannot create {}", dir.display()), e))?;
    let mut files = Vec::new();

    let mut points: Vec<(f64, f64)> = a
        .lru_sweep
        .iter()
        .filter(|p| p.capacity_tokens > 0)
        .map(|p| (p.capacity_tokens as f64, p.hit_ratio * 100.0))
        .collect();
    points.sort_by(|x, y| x.0.total_cmp(&y.0));
    points.dedup_by(|x, y| x.0 == y.0);
    let cache = CacheCapacity {
        requests: a.requests,
        block_size: a.block_size,
        points,
        zero_sizes: a
            .lru_sweep
            .iter()
            .filter(|p| p.capacity_tokens == 0)
            .count(),
        infinite_pct: a.prefix_cache.hit_ratio * 100.0,
        footprint_tokens: a.prefix_cache.footprint_tokens as f64,
    };
    files.extend(save(dir, "trace_cache_capacity", &cache)?);

    let rate = RateOverTime {
        bucket_s: a.rate_series.bucket_s,
        points: a
            .rate_series
            .points
            .iter()
            .map(|p| (p.start_s, p.rate_per_s))
            .collect(),
        mean: a.mean_rate_per_s,
        peak: a.peak_rate_per_s,
        peak_at_s: a.peak_rate_at_s,
    };
    files.extend(save(dir, "trace_request_rate", &rate)?);

    let lengths = Lengths {
        panels: [
            LengthPanel {
                name: "Input",
                sorted: a.input_length.sorted.clone(),
                mean: a.input_length.mean,
                log_x: true,
            },
            LengthPanel {
                name: "Output",
                sorted: a.output_length.sorted.clone(),
                mean: a.output_length.mean,
                log_x: false,
            },
        ],
    };
    files.extend(save(dir, "trace_lengths", &lengths)?);
    Ok(files)
}
