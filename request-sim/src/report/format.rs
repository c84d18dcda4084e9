//! Number formatting shared by the console text and the charts.

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
