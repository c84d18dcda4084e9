//! The built-in demo trace: what `replay` reads without `--dataset-path`.

/// The built-in demo trace (mooncake format, 200 requests over ~19 s, block 512).
pub const DEMO_TRACE: &str = include_str!("../../data/demo_trace.jsonl");

/// Its format, as recognised from its first line (`--dataset` without `--dataset-path` must
/// name it).
pub fn demo_format() -> Option<super::TraceFormat> {
    super::detect_format(DEMO_TRACE.lines().next()?).ok()
}
