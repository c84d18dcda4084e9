//! A trace format is one unit: nothing outside `src/trace/formats/` names one (a format is a
//! handle, asked for its facts), and every format file that declares a `Format` is in the
//! registry. Read from the source tree, so a new file that names a format fails here.

use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The enum path followed by a capitalised name: a variant, as the closed enum had them.
fn names_a_variant(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("TraceFormat::") {
        let after = &rest[i + "TraceFormat::".len()..];
        let word: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if word.starts_with(|c: char| c.is_ascii_uppercase()) {
            found.push(word);
        }
        rest = after;
    }
    found
}

#[test]
fn no_file_outside_the_formats_names_a_format() {
    let root = crate_dir();
    let formats = root.join("src/trace/formats");
    let mut files = Vec::new();
    for d in ["src", "tests", "benches", "examples", "../fuzz", "../tools"] {
        rust_files(&root.join(d), &mut files);
    }
    assert!(files.len() > 100, "read the tree: {} files", files.len());
    let mut bad = Vec::new();
    for f in &files {
        if f.starts_with(&formats) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for v in names_a_variant(&text) {
            bad.push(format!("{}: TraceFormat::{v}", f.display()));
        }
        // The format files themselves are private to the formats: reached through the
        // registry and the front door only.
        for m in [
            "mooncake", "bailian", "azure", "burstgpt", "generic", "messages", "parquet",
        ] {
            let path = format!("formats::{m}::");
            if text.contains(&path) {
                bad.push(format!("{}: {path}", f.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "formats named outside trace/formats/:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_format_file_is_in_the_registry() {
    let dir = crate_dir().join("src/trace/formats");
    let registry = std::fs::read_to_string(dir.join("registry.rs")).unwrap();
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let mut declared = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        if !text.contains("pub(crate) static FORMAT: Format = Format {") {
            continue;
        }
        declared += 1;
        let module = f.file_stem().unwrap().to_str().unwrap();
        assert!(
            registry.contains(&format!("&super::{module}::FORMAT,")),
            "{module}.rs declares a Format that registry::ALL does not list"
        );
    }
    let listed = request_sim::trace::formats::registry::all().count();
    assert_eq!(declared, listed, "one Format per file, each listed once");
}

#[test]
fn the_dataset_flag_lists_every_format_the_registry_has() {
    let (code, out, err) = crate::support::run_cli(["replay", "--help"], &[]);
    assert_eq!(code, 0, "{err}");
    for f in request_sim::trace::formats::registry::all() {
        assert!(out.contains(f.name()), "--help lacks {}: {out}", f.name());
    }
    let (code, _, err) = crate::support::run_cli(["analyze", "x", "--dataset", "nope"], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("servegen") && err.contains("parquet"), "{err}");
}
