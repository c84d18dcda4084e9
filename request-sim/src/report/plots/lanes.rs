//! The swim lanes of an agent run with `--users` (`lanes.png`/`.svg`): one row per user (lane),
//! each request a bar from its send to its end on the run's clock; the main agent's requests on
//! the row's line, its subagents' just below it; warm-up requests grey, failed ones red.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::axes::upper;
use super::{err, legend, Chart, DrawResult, Frame, BLUE_, GREY, ORANGE, RED_, RUN_CLOCK};
use crate::record::{Record, Status};
use crate::stats::per_record::end_ms;

/// Most lanes drawn (the first ones).
const MAX_LANES: u32 = 64;

/// One request's bar.
struct Bar {
    lane: u32,
    from_s: f64,
    to_s: f64,
    sub: bool,
    color: RGBColor,
}

pub(super) struct Lanes {
    bars: Vec<Bar>,
    lanes: u32,
}

impl Lanes {
    /// The lanes of `records`; `None` when no record names its user.
    pub(super) fn of(records: &[Record]) -> Option<Lanes> {
        let bars: Vec<Bar> = records
            .iter()
            .filter_map(|r| {
                let lane = r.user.filter(|&u| u < MAX_LANES)?;
                let sent = r.sent_ms?;
                let end = end_ms(r).unwrap_or(sent);
                let color = match (r.is_warmup(), r.status) {
                    (_, s) if s != Status::Ok => RED_,
                    (true, _) => GREY,
                    (false, _) if r.agent.as_deref() != Some("main") => ORANGE,
                    _ => BLUE_,
                };
                Some(Bar {
                    lane,
                    from_s: sent / 1e3,
                    to_s: (end / 1e3).max(sent / 1e3 + 0.002),
                    sub: r.agent.as_deref().is_some_and(|a| a != "main"),
                    color,
                })
            })
            .collect();
        let lanes = bars.iter().map(|b| b.lane + 1).max()?;
        Some(Lanes { bars, lanes })
    }
}

/// A y tick's label: `user N` on a lane's line, nothing between lanes (where subagents are).
fn lane_label(y: &f64) -> String {
    match (*y >= 0.0, (y - y.round()).abs() < 1e-9) {
        (true, true) => format!("user {}", y.round() as u64),
        _ => String::new(),
    }
}

impl Chart for Lanes {
    fn size(&self) -> (u32, u32) {
        (1000, 160 + 26 * self.lanes)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        // A fifth more time than the last bar: the legend sits there, over no request.
        let x_max = upper(self.bars.iter().map(|b| b.to_s).fold(0.0, f64::max) * 1.25);
        let y_max = f64::from(self.lanes);
        let mut chart = Frame::figure(
            "Lanes: each user's requests (main agent on the line, subagents below)",
            RUN_CLOCK,
            "user (lane)",
        )
        .x(0.0..x_max)
        .y(-0.6..y_max)
        .y_fmt(lane_label)
        .build(root)?;
        for (color, label) in [
            (GREY, "warm-up"),
            (BLUE_, "main agent"),
            (ORANGE, "subagent"),
            (RED_, "failed"),
        ] {
            let these = self.bars.iter().filter(|b| b.color == color);
            let rects: Vec<Rectangle<(f64, f64)>> = these
                .map(|b| {
                    let y = f64::from(b.lane) - if b.sub { 0.3 } else { 0.0 };
                    Rectangle::new([(b.from_s, y - 0.12), (b.to_s, y + 0.12)], color.filled())
                })
                .collect();
            if rects.is_empty() {
                continue;
            }
            chart
                .draw_series(rects)
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x - 8, y - 4), (x + 8, y + 4)], color.filled())
                });
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    }
}
