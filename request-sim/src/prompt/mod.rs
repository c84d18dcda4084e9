//! Prompt synthesis (`docs/prompts.md`): prompts with exactly the trace's token counts and exactly the
//! trace's prefix-block sharing, built without any cache.
//!
//! * [`Vocab`] — the word list prompts are made of: single-token words of the form `" word"`
//!   (a space then lowercase ASCII letters). From a real tokenizer ([`Vocab::from_tokenizer`])
//!   only words that re-encode to exactly their own token, alone and concatenated, are kept; without
//!   a tokenizer the built-in list of `llm-sim` is used ([`Vocab::builtin`], exact only against
//!   the built-in simulator).
//! * [`PromptBuilder`] — turns a [`TraceRequest`](crate::trace::TraceRequest) into prompt text
//!   (or token ids). Block `i` is a pure function of `(seed, hash_ids[i], length)`; a shorter
//!   block is a prefix of the longer one; tokens beyond the hashed blocks are unique to the
//!   request. Nothing is cached, so memory is flat however many distinct hash ids a trace has.
//! * [`Corpus`] — real text (`--prompt-corpus`): a local corpus cut into words with their
//!   leading space, tokenized once and checked to re-tokenize stably in sequence; with it the
//!   builder fills blocks with windows of corpus text instead of random words.
//! * [`Encoder`] — the source of truth for token counts: a local `tokenizer.json`, or the
//!   server's `POST /tokenize` (`backend::tokenize`), so prompts are exact with only an endpoint.
//! * [`verify_sample`] / [`verify_trace`] — re-tokenize built prompts with the real tokenizer
//!   (a quick start-up sample, or a whole trace slice with the block-sharing check).
//! * [`judge_fallback`] — whether the built-in word list can be exact against the server, and
//!   the one line that refuses a run when it cannot (unless `--allow-inexact-prompts`).
//! * [`chat_overhead_from_template`] — how many tokens the model's chat template adds around the
//!   user content (8 for Qwen3), so chat requests can shorten their content by it.
//!
//! See `docs/prompts.md` for the guarantees and the measured numbers.

mod builder;
mod corpus;
mod corpus_report;
mod encoder;
mod exactness;
pub mod image;
mod template;
mod tokenizer_json;
mod verify;
mod vocab;

pub use builder::{Piece, PromptBuilder, KEYED_WORDS};
pub use corpus::{
    corpus_spec, read_documents, Corpus, CorpusFormat, CorpusSpec, CorpusStats, PromptSource,
    ReadText, DEFAULT_MAX_BYTES, MAX_UNIT_BYTES, MAX_UNIT_TOKENS,
};
pub use corpus_report::{load_corpus, CorpusReport};
pub use encoder::Encoder;
pub use exactness::{judge_fallback, Fallback};
pub use template::{
    chat_messages, chat_overhead_from_template, completion_overhead, ChatCounter, ChatTemplate,
    LEAD,
};
pub use verify::{verify_sample, verify_trace, TraceVerifyReport, VerifyReport, SAMPLE_WINDOW};
pub use vocab::{
    is_word, load_tokenizer, tokenizer_files, Vocab, MAX_WORDS, MIN_PIECES, MIN_WORDS,
};

use std::path::PathBuf;

/// Everything that can go wrong while preparing prompts.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The tokenizer file could not be loaded or the tokenizer failed to encode.
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// `--tokenizer` names a directory without `tokenizer.json`.
    #[error(
        "--tokenizer {}: the directory has no tokenizer.json (a Hugging Face model directory \
         holds tokenizer.json and tokenizer_config.json)",
        dir.display()
    )]
    NoTokenizerJson { dir: PathBuf },
    /// The tokenizer has too few single-token `" word"` tokens to build exact prompts
    /// (e.g. a WordPiece or SentencePiece tokenizer without byte-level pre-splitting).
    #[error(
        "tokenizer yields only {found} single-token words that re-encode to themselves \
         (need at least {min}); exact text prompts are not possible with it \
         (send token ids instead, or use the built-in word list with approximate counts)"
    )]
    TooFewWords { found: usize, min: usize },
    /// Built prompts did not re-tokenize to their intended token ids.
    #[error("prompt verification failed: {0}")]
    Verification(String),
    /// `tokenizer_config.json` is malformed or has no usable chat template.
    #[error("tokenizer config {path}: {message}")]
    Config { path: PathBuf, message: String },
    /// The chat template failed to render.
    #[error("chat template: {0}")]
    Template(String),
    /// The `--prompt-corpus` text cannot be used (the message says why, with the line for
    /// JSONL).
    #[error("--prompt-corpus {path}: {message}")]
    Corpus { path: PathBuf, message: String },
    /// The prompts would be the built-in word list against a server that does not count those
    /// words one token each (see [`judge_fallback`]); the message is one line.
    #[error("{0}")]
    Inexact(String),
}

impl PromptError {
    /// "cannot read PATH" with the I/O error.
    pub(crate) fn read(path: &std::path::Path, source: std::io::Error) -> PromptError {
        PromptError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
