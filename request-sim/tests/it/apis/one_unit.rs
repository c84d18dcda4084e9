//! "An API is one unit": outside the API modules, their types (`backend/api.rs`) and their one
//! dispatch (`backend/dispatch.rs`), no
//! source file names an API variant (`ApiKind::Chat`, `ApiFlavor::Tgi`, `Api::OpenaiChat`, ...):
//! the rest of the crate asks the dispatch what an API does (`ep.kind.takes_token_ids()`,
//! `ep.kind.transport()`), so a new API is its module and its arms in the dispatch.

use std::path::{Path, PathBuf};

/// The files that may name API variants: the dispatch and the API modules (one per API: its
/// bodies, its answer reading, its usage and errors, its path and calibration facts). No
/// API-neutral file is listed: the SSE parser, the stream reader, the state, the body writer,
/// the endpoint, the server tokenizer and the calibration steps ask the dispatch.
const API_MODULES: &[&str] = &["backend/api.rs", "backend/dispatch.rs", "backend/apis/"];

/// Files outside this helper's area that still name a variant, each with its count and the
/// dispatch method that replaces it (the merge replaces them; the count may only go down).
const PENDING: &[(&str, usize, &str)] = &[];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The mentions of `Api::X`, `ApiKind::X`, `ApiFlavor::X` (X a variant: capitalised) in `text`,
/// outside `//` comments.
fn variant_mentions(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for ty in ["ApiKind::", "ApiFlavor::", "Api::"] {
            let mut rest = code;
            while let Some(at) = rest.find(ty) {
                let before = rest[..at].chars().last();
                let after = &rest[at + ty.len()..];
                let word: String = after
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let is_ident_start =
                    before.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
                if is_ident_start && word.starts_with(|c: char| c.is_ascii_uppercase()) {
                    found.push(format!("{ty}{word}"));
                }
                rest = &after[word.len()..];
            }
        }
    }
    found
}

#[test]
fn no_file_outside_the_api_modules_names_an_api_variant() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 100,
        "the source tree was not found at {}",
        src.display()
    );
    let mut outside = Vec::new();
    let mut inside = 0;
    for f in &files {
        let rel = f
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let n = variant_mentions(&std::fs::read_to_string(f).unwrap());
        if API_MODULES
            .iter()
            .any(|m| rel == *m || (m.ends_with('/') && rel.starts_with(m)))
        {
            inside += n.len();
            continue;
        }
        if n.is_empty() {
            continue;
        }
        match PENDING.iter().find(|(p, _, _)| *p == rel) {
            Some((_, max, instead)) => assert!(
                n.len() <= *max,
                "{rel} names {n:?}: at most {max} until the merge replaces them with {instead}"
            ),
            None => outside.push(format!("{rel}: {n:?}")),
        }
    }
    assert!(
        outside.is_empty(),
        "these files name API variants; ask the dispatch (backend/api.rs) instead:\n{}",
        outside.join("\n")
    );
    assert!(inside > 0, "the API modules name their variants");
}

#[test]
fn the_mention_finder_finds_what_it_must() {
    let text = "if k == ApiKind::Chat { MyApiKind::Nope } // ApiKind::Comment\nlet a = Api::OpenaiChat; x.api::y";
    assert_eq!(variant_mentions(text), ["ApiKind::Chat", "Api::OpenaiChat"]);
}
