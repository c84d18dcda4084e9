//! The servers over the run (`server_over_time`), from `server_metrics.jsonl`: requests running
//! and waiting, KV-cache usage, prefix-cache hit ratio, generation tokens/s and requests
//! finished/s, one line per instance, on the run's clock like the throughput chart (same width
//! and label areas, so the time axes line up).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axes::upper;
use super::{err, stairs, Chart, DrawResult, Frame, FAMILY, PALETTE, RUN_CLOCK};
use crate::observe::samples::{InstanceSeries, Step};
use crate::report::format::fmt_num;

/// Gauge samples closer than the run's span over this are merged (see `samples::series`).
pub(super) const MAX_INTERVALS: f64 = 600.0;

/// Height of one row of the instance key.
const KEY_ROW: u32 = 22;
/// Width of one entry of the instance key.
const KEY_ENTRY: u32 = 180;

pub(super) struct ServerOverTime {
    pub(super) series: Vec<InstanceSeries>,
    /// End of the x axis (s), shared with the run's throughput chart.
    pub(super) x_max: f64,
    /// Shortest interval the rates were computed over (s).
    pub(super) step_s: f64,
}

/// What one panel draws of an instance.
enum Values<'a> {
    Gauge(&'a [(f64, f64)]),
    Rate(&'a [Step]),
}

type Pick = for<'a> fn(&'a InstanceSeries) -> Values<'a>;

/// A panel: title, y axis description, the factor values are drawn at (100: a fraction shown
/// in %), and a fixed top of the y axis (else it fits the values).
type Spec = (&'static str, &'static str, f64, Option<f64>);

impl ServerOverTime {
    fn key_rows(&self) -> u32 {
        let per_row = (1100 / KEY_ENTRY).max(1) as usize;
        self.series.len().div_ceil(per_row).max(1) as u32
    }

    /// The instance key: a coloured box and `i: host:port` per instance.
    fn key<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> DrawResult {
        let font = (FAMILY, 14).into_font();
        let per_row = (area.dim_in_pixel().0 / KEY_ENTRY).max(1) as usize;
        for (k, s) in self.series.iter().enumerate() {
            let x = 70 + (k % per_row) as i32 * KEY_ENTRY as i32;
            let y = 4 + (k / per_row) as i32 * KEY_ROW as i32;
            let c = PALETTE[s.instance % PALETTE.len()];
            area.draw(&Rectangle::new([(x, y + 2), (x + 12, y + 14)], c.filled()))
                .map_err(err)?;
            let host = s
                .url
                .trim_start_matches("http://")
                .trim_start_matches("https://")
                .trim_end_matches("/metrics");
            area.draw(&Text::new(
                format!("{}: {host}", s.instance),
                (x + 17, y),
                font.clone(),
            ))
            .map_err(err)?;
        }
        Ok(())
    }

    fn panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        (title, y_desc, scale, fixed_top): Spec,
        pick: Pick,
    ) -> DrawResult {
        let top = self
            .series
            .iter()
            .flat_map(|s| match pick(s) {
                Values::Gauge(v) => v.iter().map(|p| p.1).collect::<Vec<_>>(),
                Values::Rate(v) => v.iter().map(|p| p.value).collect(),
            })
            .fold(0.0, f64::max)
            * scale;
        let y_max = fixed_top.unwrap_or_else(|| upper(top));
        let mut chart = Frame::panel(title, RUN_CLOCK, y_desc)
            .x(0.0..self.x_max)
            .y(0.0..y_max)
            .build(area)?;
        for s in &self.series {
            let c = PALETTE[s.instance % PALETTE.len()];
            let lines: Vec<Vec<(f64, f64)>> = match pick(s) {
                Values::Gauge(v) => vec![v.iter().map(|&(t, y)| (t, y * scale)).collect()],
                Values::Rate(v) => contiguous(v)
                    .into_iter()
                    .map(|run| stairs(run.iter().map(|p| (p.from_s, p.to_s, p.value * scale))))
                    .collect(),
            };
            for l in lines {
                chart
                    .draw_series(LineSeries::new(l, c.stroke_width(2)))
                    .map_err(err)?;
            }
        }
        Ok(())
    }
}

/// The runs of steps that follow each other without a gap (a gap: an interval left out).
fn contiguous(steps: &[Step]) -> Vec<&[Step]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=steps.len() {
        if i == steps.len() || (steps[i].from_s - steps[i - 1].to_s).abs() > 1e-9 {
            if i > start {
                out.push(&steps[start..i]);
            }
            start = i;
        }
    }
    out
}

impl Chart for ServerOverTime {
    fn size(&self) -> (u32, u32) {
        (1100, 1700 + self.key_rows() * KEY_ROW)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let n = self.series.len();
        let title = format!(
            "Server metrics over the run ({n} instance{}; rates from counter deltas over >= {} s)",
            if n == 1 { "" } else { "s" },
            fmt_num(&self.step_s)
        );
        let root = root.titled(&title, (FAMILY, 22)).map_err(err)?;
        let (key, rest) = root.split_vertically(self.key_rows() * KEY_ROW + 8);
        self.key(&key)?;
        let panels = rest.split_evenly((6, 1));
        let specs: [(Spec, Pick); 6] = [
            (("Requests running", "requests", 1.0, None), |s| {
                Values::Gauge(&s.running)
            }),
            (("Requests waiting", "requests", 1.0, None), |s| {
                Values::Gauge(&s.waiting)
            }),
            (
                ("KV-cache usage", "% of the KV cache", 100.0, Some(100.0)),
                |s| Values::Gauge(&s.kv_usage),
            ),
            (
                (
                    "Prefix-cache hit ratio per interval (hits / queries)",
                    "%",
                    100.0,
                    None,
                ),
                |s| Values::Rate(&s.hit_ratio),
            ),
            (("Generation tokens/s", "tokens/s", 1.0, None), |s| {
                Values::Rate(&s.generation_tps)
            }),
            (("Requests finished/s", "requests/s", 1.0, None), |s| {
                Values::Rate(&s.done_ps)
            }),
        ];
        for (area, (spec, pick)) in panels.iter().zip(specs) {
            self.panel(area, spec, pick)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_split_the_steps() {
        let s = |a, b| Step {
            from_s: a,
            to_s: b,
            value: 1.0,
        };
        let v = [s(0.0, 1.0), s(1.0, 2.0), s(3.0, 4.0)];
        let runs = contiguous(&v);
        assert_eq!(runs.len(), 2);
        assert_eq!((runs[0].len(), runs[1].len()), (2, 1));
        assert!(contiguous(&[]).is_empty());
    }
}
