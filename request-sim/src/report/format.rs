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
