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

/// A conversation-shaped trace as JSONL text: `sessions` sessions starting over `span_s`
/// seconds, 1..=6 turns each with think times of 1..=90 s; every prompt starts with the shared
/// block 0 and each turn extends its previous turn's full blocks by 0..=3 and a partial block
/// of its own (block 512). With `ids`, rows carry `session_id` (a generic trace); without, they are Mooncake
/// rows, in time order either way.
pub fn conversation_trace(sessions: usize, span_s: f64, seed: u64, ids: bool) -> String {
    let mut rng = crate::support::Lcg::new(seed);
    let mut rows: Vec<(f64, String)> = Vec::new();
    let mut next_id = 1u64;
    for s in 0..sessions {
        let mut t = rng.unit() * span_s * 1e3;
        // Full blocks so far; each turn adds 1..=4 and ends with a partial block of its own
        // (its hash differs from any later full block's, as in recorded traces).
        let mut blocks = vec![0u64];
        for turn in 0..1 + rng.below(6) {
            if turn > 0 {
                t += 1e3 * (1.0 + rng.below(90) as f64);
            }
            for _ in 0..rng.below(4) {
                blocks.push(next_id);
                next_id += 1;
            }
            let mut row_ids = blocks.clone();
            row_ids.push(next_id);
            next_id += 1;
            let input = (blocks.len() as u64) * 512 + 1 + rng.below(511);
            let output = 1 + rng.below(400);
            let sid = if ids {
                format!(", \"session_id\": \"s{s}\"")
            } else {
                String::new()
            };
            let t = t.round();
            rows.push((
                t,
                format!(
                    "{{\"timestamp\": {t}, \"input_length\": {input}, \"output_length\": {output}, \"hash_ids\": {row_ids:?}{sid}}}\n"
                ),
            ));
        }
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    rows.into_iter().map(|(_, r)| r).collect()
}
