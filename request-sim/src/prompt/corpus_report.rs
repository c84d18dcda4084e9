//! The run's corpus ([`load_corpus`]) and its report ([`CorpusReport`]): what was read and
//! kept, and the share of the run's prompt tokens that is corpus text.

use serde::{Deserialize, Serialize};

use super::corpus::spec::corpus_error;
use super::corpus::{Corpus, CorpusSpec, CorpusStats};
use super::encoder::Encoder;
use super::PromptError;

/// The corpus of a run, for the start-up line and the summary (`run.prompt_corpus`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorpusReport {
    #[serde(flatten)]
    pub stats: CorpusStats,
    /// Share of the run's prompt tokens (synthetic prompts, content after the chat overhead)
    /// that are corpus text; the rest are one-token words (block starts and completions).
    pub corpus_token_share: f64,
    /// The requests the share is computed over (a streamed trace's first requests, else all of
    /// the run's).
    #[serde(default)]
    pub share_of_requests: usize,
}

impl CorpusReport {
    /// The share of corpus tokens in the prompts `builder` makes for `requests` (each of
    /// `input_length - overhead` tokens), computed in parallel without building the text.
    pub fn new(
        builder: &crate::prompt::PromptBuilder,
        requests: &[crate::trace::TraceRequest],
        overhead: u32,
    ) -> Option<CorpusReport> {
        use rayon::prelude::*;
        let corpus = builder.corpus()?;
        let (corpus_tokens, total) = requests
            .par_iter()
            .map(|r| {
                let n = r.input_length.saturating_sub(overhead) as usize;
                (builder.corpus_tokens(r, n), n)
            })
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        Some(CorpusReport {
            share_of_requests: requests.len(),
            stats: corpus.stats().clone(),
            corpus_token_share: if total == 0 {
                0.0
            } else {
                corpus_tokens as f64 / total as f64
            },
        })
    }

    /// The start-up line.
    pub fn line(&self) -> String {
        let s = &self.stats;
        format!(
            "prompt text: corpus {} ({}, {} documents{}): {} units, {} tokens ({} distinct units; \
             dropped {} by shape and {} unstable at a boundary) in {:.0} ms; corpus text is {:.1}% \
             of the prompt tokens of {} requests",
            s.path,
            serde_json::to_value(s.format)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            s.documents,
            if s.truncated {
                ", read up to the byte budget"
            } else {
                ""
            },
            s.units,
            s.tokens,
            s.distinct_units,
            s.dropped_shape,
            s.dropped_unstable,
            s.read_ms + s.tokenize_ms + s.check_ms,
            100.0 * self.corpus_token_share,
            self.share_of_requests
        )
    }
}

/// The run's corpus, if it asks for one: read, tokenized with `enc` (the local tokenizer or
/// the server; `None`: built-in word list) and checked the way `vocab` makes prompts.
pub fn load_corpus(
    spec: Option<&CorpusSpec>,
    enc: Option<&dyn Encoder>,
    vocab: &crate::prompt::Vocab,
) -> Result<Option<std::sync::Arc<Corpus>>, PromptError> {
    let Some(spec) = spec else { return Ok(None) };
    if vocab.is_pieces() {
        // Pieces have no space before them: a unit's space could merge with the piece before.
        return Err(corpus_error(
            &spec.path,
            format!(
                "real text needs a vocabulary of words; this tokenizer's prompts use {}",
                vocab.method()
            ),
        ));
    }
    Ok(Some(std::sync::Arc::new(Corpus::load(
        spec,
        enc,
        vocab.strips_first_space(),
    )?)))
}
