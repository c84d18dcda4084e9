//! Number formatting shared by the console text, the result files and the charts: every
//! number, percentage and `n/a` / `-` cell of the reports is written by a function here.
//!
//! A value that is unknown is `n/a`; a value that does not exist (a row one run lacks, a
//! change that cannot be computed) is `-`.

/// Thousands separators for readability: 12,031.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string().into_bytes();
    let groups: Vec<String> = digits
        .rchunks(3)
        .rev()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    groups.join(",")
}

/// "1 request", "12,031 requests".
pub(crate) fn requests(n: usize) -> String {
    match n {
        1 => "1 request".to_string(),
        n => format!("{} requests", thousands(n as u64)),
    }
}

/// Decimal prefix, at most three significant digits: 950, 1k, 2.5k, 93.6M.
pub(crate) fn fmt_si(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// A token count with a binary prefix when it is a small whole multiple of one (16Ki, 128Mi),
/// else with a decimal one (93.6M).
pub(crate) fn fmt_tokens(v: f64) -> String {
    for (unit, suffix) in [(40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")] {
        let q = v / (1u64 << unit) as f64;
        if (1.0..1024.0).contains(&q) && q.fract() == 0.0 {
            return format!("{q}{suffix}");
        }
    }
    fmt_si(v)
}

pub(crate) fn fmt_num(v: &f64) -> String {
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{}k", fmt_num(&(v / 1000.0)))
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A time in ms at the records' microsecond resolution (`12.345`).
pub(crate) fn micros(ms: f64) -> f64 {
    (ms * 1e3).round() / 1e3
}

/// `v` with `decimals` decimals, or `n/a` when unknown.
pub(crate) fn num(v: Option<f64>, decimals: usize) -> String {
    v.map_or("n/a".to_string(), |v| format!("{v:.decimals$}"))
}

/// `v` with `decimals` decimals, or `-` when there is none.
pub(crate) fn num_or_dash(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.decimals$}"))
}

/// `x` with `decimals` decimals, without any from 100,000 up (the digits that matter fit a
/// column).
fn wide(x: f64, decimals: usize) -> String {
    if x.abs() >= 1e5 {
        format!("{x:.0}")
    } else {
        format!("{x:.decimals$}")
    }
}

/// [`wide`], or `n/a` when unknown.
pub(crate) fn wide_or_na(v: Option<f64>, decimals: usize) -> String {
    v.map_or("n/a".to_string(), |x| wide(x, decimals))
}

/// [`wide`], or `-` when unknown.
pub(crate) fn wide_or_dash(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".to_string(), |x| wide(x, decimals))
}

/// A value of a row that one run may lack: `-` when the run has no such row, `n/a` when its
/// value is unknown, a whole number without decimals (below 1e15), else two decimals.
pub(crate) fn row_value(v: Option<Option<f64>>) -> String {
    match v {
        None => "-".to_string(),
        Some(None) => "n/a".to_string(),
        Some(Some(x)) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Some(Some(x)) => format!("{x:.2}"),
    }
}

/// A ratio as a percentage with two decimals and no `%` sign (`46.40`), or `n/a` when unknown.
pub(crate) fn pct(r: Option<f64>) -> String {
    r.map_or("n/a".to_string(), |r| format!("{:.2}", r * 100.0))
}

/// A ratio as a percentage with two decimals and the `%` sign (`46.40%`).
pub(crate) fn percent(r: f64) -> String {
    format!("{:.2}%", r * 100.0)
}

/// [`percent`], or `n/a` when unknown.
pub(crate) fn percent_or_na(r: Option<f64>) -> String {
    r.map_or("n/a".to_string(), percent)
}

/// [`percent`], or `-` when there is none.
pub(crate) fn percent_or_dash(r: Option<f64>) -> String {
    r.map_or("-".to_string(), percent)
}

/// A change in percent with its sign and one decimal (`+2.5%`), or `-` when there is none.
pub(crate) fn change(pct: Option<f64>) -> String {
    pct.map_or("-".to_string(), |x| format!("{x:+.1}%"))
}

/// An interval of a change in percent (`[-1.2%, +3.4%]`), or `-` when there is none.
pub(crate) fn change_interval(pct: Option<(f64, f64)>) -> String {
    pct.map_or("-".to_string(), |(l, h)| format!("[{l:+.1}%, {h:+.1}%]"))
}

/// A number with at most three decimals and no trailing zeros (`10`, `2.5`).
pub(crate) fn trim_num(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(93_588_480), "93,588,480");
    }
}
