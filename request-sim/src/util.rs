//! Helpers below every stage of the pipeline (trace → … → report), holding no stage's types:
//! the one percentile interpolation both the trace analysis and the run statistics use, and the
//! one way JSON files and JSON on stdout are written.
//! (The workspace's one SplitMix64 mixer is `llm_common::util`, the lowest crate.)

/// Give the memory freed so far back to the operating system. mimalloc (the binaries' global
/// allocator) keeps freed pages for reuse; start-up's tokenizer, once dropped, would otherwise
/// stay in the resident set for the whole run. No effect on memory of another allocator.
#[allow(unsafe_code)]
pub fn release_freed_memory() {
    // SAFETY: `mi_collect` takes no pointers; it only walks mimalloc's own heaps and arenas.
    // Hand-written: the `mimalloc` crate does not expose it.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// Linear-interpolation percentile of sorted values (numpy's default).
/// `p` in [0, 100]; returns 0 for no values.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let (lo, hi, frac) = rank(sorted.len() as u64, p);
    let a = sorted[lo as usize];
    let b = sorted[hi as usize];
    lerp(a, b, frac)
}

/// Index pair and fraction for percentile `p` of `n` values.
pub(crate) fn rank(n: u64, p: f64) -> (u64, u64, f64) {
    let p = p.clamp(0.0, 100.0);
    let pos = p / 100.0 * (n - 1) as f64;
    let lo = pos.floor() as u64;
    let lo = lo.min(n - 1);
    let hi = (lo + 1).min(n - 1);
    (lo, hi, pos - lo as f64)
}

pub(crate) fn lerp(a: f64, b: f64, frac: f64) -> f64 {
    if frac == 0.0 || a == b {
        a
    } else {
        // numpy's _lerp: a + (b - a) * t, evaluated from the nearer end for t >= 0.5.
        if frac >= 0.5 {
            b - (b - a) * (1.0 - frac)
        } else {
            a + (b - a) * frac
        }
    }
}

/// Write `value` as pretty JSON (and a newline) to `path`, creating its directory.
pub fn write_json(path: &std::path::Path, value: &impl serde::Serialize) -> crate::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(|e| {
        crate::Error::internal(format!("{}: cannot encode JSON: {e}", path.display()))
    })?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| crate::Error::io(format!("cannot create {}", dir.display()), e))?;
    }
    std::fs::write(path, text + "\n").map_err(|e| crate::Error::write(path, e))
}

/// A buffered writer to `path`, or to standard output when `path` is `-` (the commands that
/// write a trace).
pub fn create_output(path: &std::path::Path) -> crate::Result<Box<dyn std::io::Write>> {
    Ok(if path.as_os_str() == "-" {
        Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
    } else {
        let file = std::fs::File::create(path)
            .map_err(|e| crate::Error::io(format!("cannot write {}", path.display()), e))?;
        Box::new(std::io::BufWriter::new(file))
    })
}

/// Write `text` to stdout. A closed pipe (`request-sim analyze ... | head`) is not an error: the
/// reader has what it wanted, so the rest of the output is dropped (no panic, exit code 0).
pub fn print_stdout(text: &str) -> crate::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(crate::Error::io("cannot write to stdout", e))
        }
        _ => Ok(()),
    }
}

/// Print `value` as pretty JSON on stdout (see [`print_stdout`]).
pub fn print_json(value: &impl serde::Serialize) -> crate::Result<()> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| crate::Error::internal(format!("cannot encode JSON: {e}")))?;
    print_stdout(&(text + "\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_linear_percentiles() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile_sorted(&v, 50.0), 2.5);
        assert_eq!(percentile_sorted(&v, 0.0), 1.0);
        assert_eq!(percentile_sorted(&v, 100.0), 4.0);
        assert!((percentile_sorted(&v, 99.0) - 3.97).abs() < 1e-12);
        assert!((percentile_sorted(&v, 90.0) - 3.7).abs() < 1e-12);
        assert_eq!(percentile_sorted(&[7.0], 99.0), 7.0);
        assert_eq!(percentile_sorted(&[], 99.0), 0.0);
    }
}
