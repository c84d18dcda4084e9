//! `request-sim analyze --plot-dir`: the trace-analysis plots (cache-capacity curve, request
//! rate, length distributions) are written as real PNG and SVG files.
//!
//! Set `ANALYZE_PLOT_DIR=/some/dir` to keep the files for a look.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use request_sim::analyze::{analyze, AnalyzeOptions};
use request_sim::report::plots::write_analysis_plots;
use request_sim::trace::{parse_reader, LoadOptions, Trace};

use crate::support::png_size;

/// Small deterministic pseudo-random numbers (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A Mooncake-style trace: conversations whose turns resend the growing history (shared
/// prefixes), over ten minutes with a busier middle.
fn synthetic_trace(requests: usize) -> Trace {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut next_id = 0u64;
    // Each conversation: its hash ids so far.
    let mut convs: Vec<Vec<u64>> = Vec::new();
    let mut text = String::new();
    let mut t = 0.0f64;
    for _ in 0..requests {
        let busy = (200_000.0..400_000.0).contains(&t);
        t += rng.below(if busy { 800 } else { 2_500 }) as f64;
        let c = if convs.is_empty() || rng.below(3) == 0 {
            convs.push(Vec::new());
            convs.len() - 1
        } else {
            rng.below(convs.len() as u64) as usize
        };
        for _ in 0..1 + rng.below(6) {
            convs[c].push(next_id);
            next_id += 1;
        }
        let ids = &convs[c];
        let input = (ids.len() as u64 - 1) * 512 + 1 + rng.below(512);
        let output = 1 + rng.below(800);
        let list: Vec<String> = ids.iter().map(u64::to_string).collect();
        let _ = writeln!(
            text,
            r#"{{"timestamp": {t}, "input_length": {input}, "output_length": {output}, "hash_ids": [{}]}}"#,
            list.join(", ")
        );
    }
    parse_reader("synthetic.jsonl", text.as_bytes(), &LoadOptions::default()).unwrap()
}

const NAMES: [&str; 3] = [
    "trace_cache_capacity",
    "trace_request_rate",
    "trace_lengths",
];

fn check_files(dir: &Path, files: &[PathBuf]) {
    assert_eq!(files.len(), 2 * NAMES.len(), "{files:?}");
    for name in NAMES {
        let png = dir.join(format!("{name}.png"));
        let svg = dir.join(format!("{name}.svg"));
        assert!(files.contains(&png) && files.contains(&svg), "{files:?}");
        let (w, h) = png_size(&png);
        assert!(
            (800..=2000).contains(&w) && (400..=1500).contains(&h),
            "{name}: {w}x{h}"
        );
        let len = png.metadata().unwrap().len();
        assert!(len > 10_000 && len < 5_000_000, "{name}.png is {len} bytes");
        let svg = std::fs::read_to_string(&svg).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
        assert!(svg.contains("<text"), "{name}.svg has no text");
    }
}

fn out_dir(tmp: &tempfile::TempDir, sub: &str) -> PathBuf {
    match std::env::var_os("ANALYZE_PLOT_DIR") {
        Some(p) => Path::new(&p).join(sub),
        None => tmp.path().join(sub), // does not exist yet: the writer creates it
    }
}

#[test]
fn analysis_plots_are_images() {
    let trace = synthetic_trace(600);
    let a = analyze(&trace, &AnalyzeOptions::default());
    assert_eq!(a.requests, 600);
    assert!(
        a.prefix_cache.hit_ratio > 0.3,
        "{}",
        a.prefix_cache.hit_ratio
    );
    assert!(a.lru_sweep.len() >= 3);
    assert_eq!(a.input_length.sorted.len(), 600);
    assert!(a.input_length.sorted.windows(2).all(|w| w[0] <= w[1]));
    // The sorted values stay out of the JSON output.
    let json = serde_json::to_value(&a).unwrap();
    assert!(json["input_length"].get("sorted").is_none(), "{json}");

    let tmp = tempfile::tempdir().unwrap();
    let dir = out_dir(&tmp, "analysis");
    let files = write_analysis_plots(&dir, &a).unwrap();
    check_files(&dir, &files);

    // The cache-capacity curve names its reference line and uses binary token units.
    let svg = std::fs::read_to_string(dir.join("trace_cache_capacity.svg")).unwrap();
    let inf = format!("infinite cache: {:.2}%", a.prefix_cache.hit_ratio * 100.0);
    assert!(svg.contains(&inf), "no `{inf}` in the SVG");
    assert!(svg.contains("16Ki"), "no 16Ki tick");
    assert!(svg.contains("LRU cache capacity (tokens, log scale"));
    let svg = std::fs::read_to_string(dir.join("trace_request_rate.svg")).unwrap();
    assert!(svg.contains("requests/s"));
    let svg = std::fs::read_to_string(dir.join("trace_lengths.svg")).unwrap();
    assert!(svg.contains("input length (tokens, log scale)"));
    assert!(svg.contains("output length (tokens)"));
}

#[test]
fn degenerate_analyses_still_plot() {
    let tmp = tempfile::tempdir().unwrap();
    // One request; a custom sweep with a zero size, duplicates and no order.
    let one = synthetic_trace(1);
    let opts = AnalyzeOptions {
        cache_sizes_tokens: vec![1 << 20, 0, 1000, 1 << 20],
        ..AnalyzeOptions::default()
    };
    let a = analyze(&one, &opts);
    let dir = out_dir(&tmp, "one");
    check_files(&dir, &write_analysis_plots(&dir, &a).unwrap());

    // No requests at all (the loader rejects an empty file, so cut a trace down).
    let mut none = synthetic_trace(3);
    none.requests.clear();
    let a = analyze(&none, &AnalyzeOptions::default());
    let dir = out_dir(&tmp, "empty");
    let files = write_analysis_plots(&dir, &a).unwrap();
    assert_eq!(files.len(), 6);
    for f in &files {
        assert!(f.metadata().unwrap().len() > 0, "{}", f.display());
    }
}
