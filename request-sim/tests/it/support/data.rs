//! Test data: small generated traces, the fixtures under `tests/data/`, and where the real
//! Qwen3 tokenizer files are.

use std::path::{Path, PathBuf};

/// A mooncake-format trace `dir/name` of `n` requests evenly spread over `span_ms`, each with
/// `input` prompt tokens (one hash block, 50 distinct prefixes) and `output` output tokens.
pub fn write_trace(
    dir: &Path,
    name: &str,
    n: usize,
    span_ms: f64,
    input: u32,
    output: u32,
) -> PathBuf {
    let path = dir.join(name);
    let mut s = String::with_capacity(n * 80);
    for i in 0..n {
        let t = if n > 1 {
            span_ms * i as f64 / (n - 1) as f64
        } else {
            0.0
        };
        s.push_str(&format!(
            "{{\"timestamp\": {t:.3}, \"input_length\": {input}, \"output_length\": {output}, \"hash_ids\": [{}]}}\n",
            i % 50
        ));
    }
    std::fs::write(&path, s).unwrap();
    path
}

/// A file under `tests/data/` (`rel` relative to it).
pub fn data_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

/// A trace fixture of `tests/data/traces/`.
pub fn trace_fixture(name: &str) -> PathBuf {
    data_path("traces").join(name)
}

/// The corpus of broken trace files, `tests/data/traces/bad/`.
pub fn bad_traces_dir() -> PathBuf {
    data_path("traces/bad")
}

/// Where the real Qwen3 tokenizer files are looked for: `$REQUEST_SIM_QWEN3_DIR`, else
/// `.cache/tokenizers/qwen3/` (filled by `scripts/fetch-tokenizer.sh`).
pub fn qwen3_dir() -> PathBuf {
    match std::env::var_os("REQUEST_SIM_QWEN3_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.cache/tokenizers/qwen3"),
    }
}

/// [`qwen3_dir`] when its files are there; otherwise a loud skip note for `what`, or a
/// failure when `CI` is set (CI fetches the tokenizer, so a missing one is a broken setup).
pub fn qwen3_or_skip(what: &str) -> Option<PathBuf> {
    let dir = qwen3_dir();
    if dir.join("tokenizer.json").is_file() && dir.join("tokenizer_config.json").is_file() {
        return Some(dir);
    }
    let msg = format!(
        "Qwen3 tokenizer not found in {} — run scripts/fetch-tokenizer.sh",
        dir.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{msg}");
    eprintln!("\n!!!!!!!! SKIPPING Qwen3 {what} test: {msg} !!!!!!!!\n");
    None
}
