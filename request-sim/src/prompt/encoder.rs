//! What prompts are checked against: something that turns texts into token ids — the local
//! `tokenizer.json`, or the server's own `POST /tokenize` (see `backend::tokenize`).

use rayon::prelude::*;
use tokenizers::Tokenizer;

use super::PromptError;

/// A source of truth for token counts. Implementations encode many texts at once (in parallel
/// locally, in concurrent batched requests against a server), without special tokens.
pub trait Encoder: Sync {
    /// The token ids of each text, without BOS/EOS or other added special tokens.
    fn encode_many(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, PromptError>;
}

impl Encoder for Tokenizer {
    fn encode_many(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, PromptError> {
        texts
            .par_iter()
            .with_max_len(1)
            .map(|t| {
                self.encode_fast(t.as_str(), false)
                    .map(|e| e.get_ids().to_vec())
                    .map_err(|e| PromptError::Tokenizer(e.to_string()))
            })
            .collect()
    }
}
