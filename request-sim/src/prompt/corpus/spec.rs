//! What a run asks of a corpus and what a corpus gave: `--prompt-source`, `--prompt-corpus` and
//! `--prompt-corpus-field` ([`corpus_spec`], [`CorpusSpec`]), the formats read
//! ([`CorpusFormat`]), the limits on a unit, the counts of the start-up line and the summary
//! ([`CorpusStats`]), and the error every corpus failure is reported as.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::prompt::PromptError;

/// Units with more tokens than this are dropped (they would make blocks coarse to fill).
pub const MAX_UNIT_TOKENS: usize = 8;

/// Units longer than this many bytes are dropped before tokenization (URLs, hashes, base64).
pub const MAX_UNIT_BYTES: usize = 48;

/// Text read from a corpus by default (the first this-many bytes of unit text): a few hundred
/// thousand tokens of real text, read and checked in well under a second with a local
/// tokenizer, and plenty for random windows.
pub const DEFAULT_MAX_BYTES: usize = 4 << 20;

/// `--prompt-corpus PATH` and `--prompt-corpus-field NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusSpec {
    /// A ShareGPT `.json`, a `.jsonl`, a text file, or a directory of `.txt` files.
    pub path: PathBuf,
    /// The text field of JSONL rows (`text` by default).
    pub field: String,
    /// Stop reading after this many bytes of text ([`DEFAULT_MAX_BYTES`]).
    pub max_bytes: usize,
}

impl CorpusSpec {
    /// A corpus at `path` read with the defaults (field `text`, [`DEFAULT_MAX_BYTES`]).
    pub fn new(path: impl Into<PathBuf>) -> CorpusSpec {
        CorpusSpec {
            path: path.into(),
            field: "text".into(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// How the corpus file was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CorpusFormat {
    /// A JSON array of `{"conversations": [{"from": .., "value": ..}, ..]}` (every value).
    ShareGpt,
    /// One JSON object per line; the text is the named field (a string or an array of strings).
    Jsonl,
    /// Plain UTF-8 text: one file, or every `.txt` file of a directory (recursively, by name).
    Text,
}

/// What the corpus gave (start-up line and summary).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusStats {
    pub path: String,
    pub format: CorpusFormat,
    /// Documents (conversation turns, rows, files) read.
    pub documents: usize,
    /// Words read (before any was dropped).
    pub words: usize,
    /// True when reading stopped at the byte budget.
    pub truncated: bool,
    /// Units kept, and their tokens.
    pub units: usize,
    pub tokens: usize,
    /// Distinct units among them.
    pub distinct_units: usize,
    /// Words dropped before tokenization (control characters, longer than [`MAX_UNIT_BYTES`]),
    /// or with no tokens or more than [`MAX_UNIT_TOKENS`].
    pub dropped_shape: usize,
    /// Units dropped because a boundary next to them did not re-tokenize stably.
    pub dropped_unstable: usize,
    /// Rounds of the stability check.
    pub check_rounds: usize,
    /// Start-up time: reading, tokenizing the distinct units, the stability check.
    pub read_ms: f64,
    pub tokenize_ms: f64,
    pub check_ms: f64,
}

/// `--prompt-source`: what prompt text is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PromptSource {
    /// One-token words of the vocabulary, drawn at random (the default without
    /// `--prompt-corpus`).
    Words,
    /// Windows of real text from `--prompt-corpus` (the default with it).
    Corpus,
}

/// The corpus a run asks for: `--prompt-source`, `--prompt-corpus`, `--prompt-corpus-field`
/// checked against each other (`Ok(None)`: word prompts).
pub fn corpus_spec(
    source: Option<PromptSource>,
    path: Option<&Path>,
    field: &str,
) -> std::result::Result<Option<CorpusSpec>, String> {
    match (source, path) {
        (Some(PromptSource::Words), Some(_)) => Err(
            "--prompt-corpus makes prompts of corpus text: it contradicts --prompt-source words"
                .into(),
        ),
        (Some(PromptSource::Corpus), None) => Err(
            "--prompt-source corpus needs --prompt-corpus PATH (ShareGPT JSON, JSONL or text)"
                .into(),
        ),
        (_, None) => Ok(None),
        (_, Some(p)) => {
            if !p.exists() {
                return Err(format!(
                    "--prompt-corpus {}: no such file or directory",
                    p.display()
                ));
            }
            if field.trim().is_empty() {
                return Err("--prompt-corpus-field must name a field".into());
            }
            Ok(Some(CorpusSpec {
                field: field.to_string(),
                ..CorpusSpec::new(p)
            }))
        }
    }
}

/// A `--prompt-corpus` error naming `path`.
pub(crate) fn corpus_error(path: &Path, message: impl Into<String>) -> PromptError {
    PromptError::Corpus {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// A file of the corpus fixtures (`tests/data/corpus/`), for the tests of `corpus/`.
#[cfg(test)]
pub(super) fn fixture(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/corpus")
        .join(p)
}

#[cfg(test)]
mod tests {
    use super::fixture as data;
    use super::*;

    #[test]
    fn spec_flags_are_checked_together() {
        let p = data("rows.jsonl");
        assert_eq!(corpus_spec(None, None, "text"), Ok(None));
        assert!(corpus_spec(Some(PromptSource::Words), Some(&p), "text").is_err());
        assert!(corpus_spec(Some(PromptSource::Corpus), None, "text").is_err());
        let s = corpus_spec(None, Some(&p), "body").unwrap().unwrap();
        assert_eq!((s.path, s.field.as_str()), (p, "body"));
        assert!(corpus_spec(None, Some(Path::new("/no/such/corpus")), "text").is_err());
    }
}
