//! The prompts group of the settings ([`PromptConfig`]): tokenizer files, seed, chat overhead,
//! token ids, the real-text corpus and the exactness rules.

use std::path::PathBuf;

use super::check::must_exist;
use crate::cli::PromptArgs;
use crate::{Error, Result};

/// How prompts are made.
#[derive(Debug, Clone)]
pub struct PromptConfig {
    pub tokenizer: Option<PathBuf>,
    pub tokenizer_config: Option<PathBuf>,
    pub seed: u64,
    pub chat_overhead: Option<u32>,
    pub token_ids: bool,
    /// `--prompt-corpus` (with `--prompt-source`, `--prompt-corpus-field`): real-text prompts.
    pub corpus: Option<crate::prompt::CorpusSpec>,
    /// `--no-server-tokenize`: never use the server's `/tokenize`.
    pub no_server_tokenize: bool,
    /// `--allow-inexact-prompts`: run with the built-in word list against a real model.
    pub allow_inexact_prompts: bool,
    /// `--image-rule`, `--image-tokens` (`None`: `--no-images`).
    pub images: Option<crate::prompt::image::ImageSettings>,
}

impl PromptConfig {
    /// The group from its flags, with the tokenizer files ([`tokenizer_files`]) and the corpus
    /// ([`corpus_spec`]) checked; without `--seed`, a [`fresh_seed`].
    pub(super) fn new(
        p: PromptArgs,
        (tokenizer, tokenizer_config): (Option<PathBuf>, Option<PathBuf>),
        corpus: Option<crate::prompt::CorpusSpec>,
    ) -> PromptConfig {
        let seed = p.seed.unwrap_or_else(fresh_seed);
        PromptConfig {
            images: (!p.no_images).then_some(crate::prompt::image::ImageSettings {
                rule: p.image_rule,
                tokens: p.image_tokens,
                seed,
            }),
            tokenizer,
            tokenizer_config,
            seed,
            chat_overhead: p.chat_overhead,
            token_ids: p.token_ids,
            corpus,
            no_server_tokenize: p.no_server_tokenize,
            allow_inexact_prompts: p.allow_inexact_prompts,
        }
    }
}

/// A fresh seed: wall-clock nanoseconds mixed with the process id.
pub fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut z = nanos ^ ((std::process::id() as u64) << 32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `--tokenizer` (a file or a model directory) and `--tokenizer-config`.
pub(super) fn tokenizer_files(a: &PromptArgs) -> Result<(Option<PathBuf>, Option<PathBuf>)> {
    // A model directory stands for its tokenizer.json and, unless --tokenizer-config is
    // given, its tokenizer_config.json.
    let (tokenizer, dir_config) = match &a.tokenizer {
        Some(t) => {
            must_exist("--tokenizer", t)?;
            let (file, config) = crate::prompt::tokenizer_files(t)?;
            (Some(file), config)
        }
        None => (None, None),
    };
    if let Some(t) = &a.tokenizer_config {
        must_exist("--tokenizer-config", t)?;
        if a.tokenizer.is_none() {
            return Err(Error::config("--tokenizer-config needs --tokenizer"));
        }
    }
    Ok((tokenizer, a.tokenizer_config.clone().or(dir_config)))
}

/// `--prompt-source`, `--prompt-corpus` and `--prompt-corpus-field`.
pub(super) fn corpus_spec(p: &PromptArgs) -> Result<Option<crate::prompt::CorpusSpec>> {
    crate::prompt::corpus_spec(
        p.prompt_source,
        p.prompt_corpus.as_deref(),
        &p.prompt_corpus_field,
    )
    .map_err(Error::config)
}
