//! The sweep's answer: whether each point was carried, and the capacity in one line (the
//! highest scale factor, or the most `--users`, carried with every lower one carried too; the
//! capacity search's bracket after it).

use super::result::{SweepPoint, SweepResult};
use super::search::SearchInfo;

/// Throughput below this fraction of the offered rate: the server no longer keeps up.
const KEEPS_UP: f64 = 0.9;

/// Whether a point was carried: within the SLO target when there is one, else the server
/// kept up with the offered rate (a `--users` point, whose load is closed-loop: at least 90%
/// of the requests sent completed).
pub(super) fn carried(p: &SweepPoint, target: f64) -> bool {
    match (p.good_fraction, p.users) {
        (Some(g), _) => g >= target,
        (None, Some(_)) => {
            p.completed > 0 && p.completed as f64 >= KEEPS_UP * (p.completed + p.failed) as f64
        }
        (None, None) => p.offered_rps > 0.0 && p.request_throughput >= KEEPS_UP * p.offered_rps,
    }
}

/// A `--users` sweep's answer: the most concurrent users carried with every smaller number
/// carried too.
pub fn users_answer(
    points: &[SweepPoint],
    slo: Option<&str>,
    target: f64,
) -> (Option<usize>, String) {
    let mut sorted: Vec<&SweepPoint> = points.iter().filter(|p| !p.interrupted).collect();
    sorted.sort_by_key(|p| p.users);
    let best = sorted.iter().take_while(|p| carried(p, target)).last();
    let next = sorted.iter().find(|p| !carried(p, target));
    let what = match slo {
        Some(s) => format!("{:.0}% of requests within {s}", target * 100.0),
        None => format!("{:.0}% of the requests sent completed", KEEPS_UP * 100.0),
    };
    let users = |p: &SweepPoint| p.users.unwrap_or(0);
    let load = |p: &SweepPoint| {
        format!(
            "{:.2} req/s served{}",
            p.request_throughput,
            p.good_fraction
                .map(|g| format!(", {:.1}% good", g * 100.0))
                .unwrap_or_default()
        )
    };
    let text = match (best, next) {
        (Some(b), Some(n)) => format!(
            "capacity: {} concurrent users ({}) is the most with {what}; {} users fell short ({})",
            users(b),
            load(b),
            users(n),
            load(n)
        ),
        (Some(b), None) => format!(
            "capacity: every point up to {} users ({}) had {what}: the capacity is higher, sweep further",
            users(b),
            load(b)
        ),
        (None, Some(n)) => format!(
            "capacity: below {} users: even the fewest fell short of {what} ({})",
            users(n),
            load(n)
        ),
        (None, None) => "capacity: no point was run".to_string(),
    };
    (best.map(|p| users(p)), text)
}

/// The answer in one line, and the capacity point (the highest scale factor carried with every
/// lower one carried too; a point cut short by Ctrl-C is not judged).
pub fn answer(points: &[SweepPoint], slo: Option<&str>, target: f64) -> (Option<f64>, String) {
    // A point Ctrl-C cut short is kept in sweep.json but not judged.
    let mut sorted: Vec<&SweepPoint> = points.iter().filter(|p| !p.interrupted).collect();
    sorted.sort_by(|a, b| a.scale_factor.total_cmp(&b.scale_factor));
    let best = sorted
        .iter()
        .take_while(|p| carried(p, target))
        .last()
        .copied();
    let next = sorted.iter().find(|p| !carried(p, target)).copied();
    let what = match slo {
        Some(s) => format!("{:.0}% of requests within {s}", target * 100.0),
        None => format!("throughput >= {:.0}% of the offered rate", KEEPS_UP * 100.0),
    };
    let measure = |p: &SweepPoint| match p.good_fraction {
        Some(g) => format!("{:.1}% good", g * 100.0),
        None => format!(
            "{:.2} of {:.2} req/s served",
            p.request_throughput, p.offered_rps
        ),
    };
    let good = |p: &SweepPoint| {
        p.good_fraction
            .map(|g| format!(", {:.1}% good", g * 100.0))
            .unwrap_or_default()
    };
    let text = match (best, next) {
        (Some(b), Some(n)) => format!(
            "capacity: scale {} ({:.2} req/s offered, {:.2} req/s served{}) is the highest point with {what}; scale {} fell short ({})",
            b.scale_factor,
            b.offered_rps,
            b.request_throughput,
            good(b),
            n.scale_factor,
            measure(n)
        ),
        (Some(b), None) => format!(
            "capacity: every point up to scale {} ({:.2} req/s offered, {}) had {what}: the capacity is higher, sweep further",
            b.scale_factor,
            b.offered_rps,
            measure(b)
        ),
        (None, Some(n)) => format!(
            "capacity: below scale {}: even the lowest point fell short of {what} ({})",
            n.scale_factor,
            measure(n)
        ),
        (None, None) => "capacity: no point was run".to_string(),
    };
    (best.map(|p| p.scale_factor), text)
}

/// What kind of answer a sweep gave, from its judged points (those Ctrl-C did not cut short),
/// the lowest load first: the capacity found, or a bound of it only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The lowest points were carried and a higher one fell short: the capacity is known.
    Found,
    /// Every point was carried: the capacity is above the sweep's range.
    AboveRange,
    /// Even the lowest point fell short: the capacity is below the sweep's range.
    BelowRange,
    /// No point was judged.
    NoPoint,
}

/// The sweep's [`Verdict`], by the rule of [`answer`] and [`users_answer`].
pub fn verdict(r: &SweepResult) -> Verdict {
    let mut judged: Vec<&SweepPoint> = r.points.iter().filter(|p| !p.interrupted).collect();
    judged.sort_by(|a, b| {
        a.users
            .cmp(&b.users)
            .then(a.scale_factor.total_cmp(&b.scale_factor))
    });
    match judged.first() {
        None => Verdict::NoPoint,
        Some(p) if !carried(p, r.target) => Verdict::BelowRange,
        Some(_) if judged.iter().all(|p| carried(p, r.target)) => Verdict::AboveRange,
        Some(_) => Verdict::Found,
    }
}

/// The search's end in words, after the answer: the bracket and how the search ended.
pub(super) fn search_words(s: &SearchInfo, points: usize) -> String {
    let how = if s.converged {
        format!("within {:.0}%", s.tolerance * 100.0)
    } else {
        format!(
            "not within {:.0}%: stopped after {points} of --max-points {}",
            s.tolerance * 100.0,
            s.max_points
        )
    };
    match (s.lo, s.hi) {
        (Some(lo), Some(hi)) => {
            format!("; search bracket [{lo}, {hi}) {how}, {points} points")
        }
        _ => format!("; search found no bracket ({how}), {points} points"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(f: f64, good: f64) -> SweepPoint {
        SweepPoint {
            scale_factor: f,
            offered_rps: 10.0 * f,
            request_throughput: 10.0 * f,
            good_fraction: Some(good),
            ..SweepPoint::default()
        }
    }

    #[test]
    fn the_verdict_says_whether_the_capacity_was_found_or_only_bounded() {
        let result = |points: Vec<SweepPoint>| SweepResult {
            points,
            target: 0.95,
            ..SweepResult::default()
        };
        let v = |pts: Vec<SweepPoint>| verdict(&result(pts));
        assert_eq!(v(vec![point(2.0, 0.5), point(1.0, 0.99)]), Verdict::Found);
        assert_eq!(
            v(vec![point(1.0, 0.99), point(2.0, 0.96)]),
            Verdict::AboveRange
        );
        assert_eq!(
            v(vec![point(2.0, 0.1), point(1.0, 0.5)]),
            Verdict::BelowRange
        );
        // A dip at the lowest point is below the range, whatever a higher point did.
        assert_eq!(
            v(vec![point(1.0, 0.9), point(2.0, 0.99)]),
            Verdict::BelowRange
        );
        assert_eq!(v(vec![]), Verdict::NoPoint);
        // A point cut short by Ctrl-C is not judged.
        let mut cut = point(0.5, 0.0);
        cut.interrupted = true;
        assert_eq!(v(vec![cut.clone(), point(1.0, 0.99)]), Verdict::AboveRange);
        assert_eq!(v(vec![cut]), Verdict::NoPoint);
    }
}
