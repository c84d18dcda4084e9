//! The word list prompts are built from.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tokenizers::Tokenizer;

use super::{Encoder, PromptError};

/// Fewest qualifying words a tokenizer must yield for [`Vocab::from_tokenizer`] to succeed.
/// It bounds how many distinct hash ids are guaranteed to get distinct first tokens.
pub const MIN_WORDS: usize = 1000;

/// Most words a vocabulary keeps (the builder draws 21-bit word indices); extra words are
/// dropped (highest token ids first).
pub const MAX_WORDS: usize = 1 << 21;

/// Candidates verified together in one `encode` call; a failing group is split in halves.
const CHECK_GROUP: usize = 512;

/// Words of the form `" word"` (one space, then lowercase ASCII letters) that are exactly one
/// token each, with their token ids.
///
/// The words are stored in one contiguous string; `spans[i]` is where word `i` lies in it.
#[derive(Debug, Clone)]
pub struct Vocab {
    text: String,
    spans: Vec<(u32, u32)>,
    ids: Vec<u32>,
    max_word_len: usize,
    /// Bytes to reserve per token: the mean word length rounded up, plus one.
    reserve_per_token: usize,
    builtin: bool,
    /// Prompts start with their first word without its space: SentencePiece tokenizers
    /// (Llama 2, Mistral ≤ v0.3, ...) prepend `▁` to the text themselves, so `"apple banana"`
    /// is `▁apple ▁banana` while `" apple banana"` would start with an extra `▁`.
    strip_first_space: bool,
    /// The words are plain vocabulary tokens (no `Ġ`/`▁` marker) separated by spaces that a
    /// word-level pre-tokenizer drops (the fallback of [`Vocab::from_tokenizer`]).
    plain: bool,
}

impl Vocab {
    /// The built-in word list of `llm-sim` (4,900 pseudo-words; token id = position in the
    /// list). Exact against the built-in simulator, which counts one token per word;
    /// approximate for real models.
    pub fn builtin() -> Vocab {
        let words = llm_sim::vocab::builtin_words();
        Vocab::from_words(
            words
                .iter()
                .enumerate()
                .map(|(id, w)| (id as u32, format!(" {w}"))),
            true,
        )
    }

    /// Collect the tokens of `tok` whose text is `" "` + lowercase ASCII letters and that
    /// encode back to exactly themselves.
    ///
    /// Candidates are the tokens spelled `Ġword` (byte-level BPE) or `▁word` (metaspace).
    /// They are checked in groups of 512 in parallel: the group's words are concatenated and
    /// encoded once; if the result is not exactly the group's ids the group is split in halves
    /// until the offending words are isolated and dropped. So every kept word was verified
    /// both alone-or-in-a-group and in concatenation with other words.
    ///
    /// Returns [`PromptError::TooFewWords`] when fewer than [`MIN_WORDS`] words qualify.
    pub fn from_tokenizer(tok: &Tokenizer) -> Result<Vocab, PromptError> {
        // Model vocabulary only: added tokens are special (`<|im_start|>` …), never words, and
        // counting them would clone the whole vocabulary into a map.
        let n_ids = tok.get_vocab_size(false) as u32;
        let candidates: Vec<(u32, String)> = (0..n_ids)
            .into_par_iter()
            .with_min_len(4096)
            .filter_map(|id| {
                let token = tok.id_to_token(id)?;
                candidate_word(&token).map(|w| (id, w))
            })
            .collect();

        let err = match Vocab::from_candidates(tok, candidates) {
            Ok(v) => return Ok(v),
            Err(e @ PromptError::TooFewWords { .. }) => e,
            Err(e) => return Err(e),
        };
        // Fallback for word-level pre-tokenizers (WordPiece, `Whitespace`): plain lowercase
        // tokens, separated by spaces the pre-tokenizer drops.
        let plain: Vec<(u32, String)> = (0..n_ids)
            .into_par_iter()
            .with_min_len(4096)
            .filter_map(|id| {
                let token = tok.id_to_token(id)?;
                (!token.is_empty() && token.bytes().all(|b| b.is_ascii_lowercase()))
                    .then(|| (id, format!(" {token}")))
            })
            .collect();
        match Vocab::from_candidates(tok, plain) {
            Ok(mut v) => {
                v.plain = true;
                Ok(v)
            }
            Err(PromptError::TooFewWords { found, min }) => match err {
                PromptError::TooFewWords { found: f0, .. } => Err(PromptError::TooFewWords {
                    found: found.max(f0),
                    min,
                }),
                e => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// Keep the `(token id, " word")` candidates that `enc` encodes to exactly their own id,
    /// alone and concatenated with other candidates (see [`from_tokenizer`](Self::from_tokenizer);
    /// the groups of one round are encoded in one [`Encoder::encode_many`] call, so a server
    /// gets them as concurrent requests). Candidates keep their order; a word seen twice is kept
    /// once (first id).
    ///
    /// Returns [`PromptError::TooFewWords`] when fewer than [`MIN_WORDS`] words qualify.
    pub fn from_candidates<E: Encoder + ?Sized>(
        enc: &E,
        candidates: Vec<(u32, String)>,
    ) -> Result<Vocab, PromptError> {
        // Byte-level BPE first (every word keeps its space); then the SentencePiece way (the
        // text's first word without its space, as the tokenizer prepends `▁` itself).
        let mut best = None;
        for strip in [false, true] {
            let verdicts = check_groups(enc, &candidates, strip)?;
            let mut seen = std::collections::HashSet::new();
            let kept = candidates
                .iter()
                .zip(verdicts)
                .filter(|(_, ok)| *ok)
                .map(|(c, _)| c.clone())
                .filter(|(_, w)| seen.insert(w.clone()))
                .take(MAX_WORDS);
            let mut vocab = Vocab::from_words(kept, false);
            vocab.strip_first_space = strip;
            if vocab.len() >= MIN_WORDS {
                return Ok(vocab);
            }
            if best.as_ref().is_none_or(|b: &Vocab| vocab.len() > b.len()) {
                best = Some(vocab);
            }
        }
        Err(PromptError::TooFewWords {
            found: best.map_or(0, |b| b.len()),
            min: MIN_WORDS,
        })
    }

    /// True when prompts start with their first word without its space (SentencePiece
    /// tokenizers, which prepend `▁` themselves).
    pub fn strips_first_space(&self) -> bool {
        self.strip_first_space
    }

    /// How prompts are made exact with this vocabulary (for the start-up line and summary).
    pub fn method(&self) -> &'static str {
        match (self.builtin, self.strip_first_space) {
            (true, _) => "built-in word list",
            _ if self.plain => "one-token words, space-separated (word-level pre-tokenizer)",
            (false, false) => "one-token words",
            (false, true) => {
                "one-token words, SentencePiece (▁word pieces, first word without its space)"
            }
        }
    }

    /// Build a vocabulary from `(token id, text)` pairs; every text must be `" "` followed by
    /// lowercase ASCII letters (others are skipped).
    pub fn from_words<I: IntoIterator<Item = (u32, String)>>(words: I, builtin: bool) -> Vocab {
        let mut text = String::new();
        let mut spans = Vec::new();
        let mut ids = Vec::new();
        let mut max_word_len = 0;
        for (id, w) in words {
            if !is_word(&w) || spans.len() >= MAX_WORDS {
                continue;
            }
            let start = text.len() as u32;
            text.push_str(&w);
            spans.push((start, text.len() as u32));
            ids.push(id);
            max_word_len = max_word_len.max(w.len());
        }
        text.shrink_to_fit();
        let reserve_per_token = text.len().div_ceil(spans.len().max(1)) + 1;
        Vocab {
            text,
            spans,
            ids,
            max_word_len,
            reserve_per_token,
            builtin,
            strip_first_space: false,
            plain: false,
        }
    }

    /// Number of words.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when there are no words (never the case for a vocabulary built by this module).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// True for the built-in word list (counts exact only against the built-in simulator).
    pub fn is_builtin(&self) -> bool {
        self.builtin
    }

    /// Text of word `i` (with its leading space).
    #[inline]
    pub fn word(&self, i: usize) -> &str {
        let (s, e) = self.spans[i];
        &self.text[s as usize..e as usize]
    }

    /// Token id of word `i`.
    #[inline]
    pub fn id(&self, i: usize) -> u32 {
        self.ids[i]
    }

    /// Longest word in bytes (with its leading space).
    pub fn max_word_len(&self) -> usize {
        self.max_word_len
    }

    /// Bytes worth reserving per token of prompt text (mean word length rounded up, plus one;
    /// the mean is what uniformly drawn words average to).
    pub fn reserve_per_token(&self) -> usize {
        self.reserve_per_token
    }

    pub(crate) fn ids(&self) -> &[u32] {
        &self.ids
    }
}

/// A `--tokenizer` argument: a `tokenizer.json` file, or a model directory holding
/// `tokenizer.json` (and usually `tokenizer_config.json`). Returns the `tokenizer.json` path and,
/// for a directory, its `tokenizer_config.json` when present.
pub fn tokenizer_files(path: &Path) -> Result<(PathBuf, Option<PathBuf>), String> {
    if !path.is_dir() {
        return Ok((path.to_path_buf(), None));
    }
    let json = path.join("tokenizer.json");
    if !json.is_file() {
        return Err(format!(
            "--tokenizer {}: the directory has no tokenizer.json (a Hugging Face model directory \
             holds tokenizer.json and tokenizer_config.json)",
            path.display()
        ));
    }
    let config = path.join("tokenizer_config.json");
    Ok((json, config.is_file().then_some(config)))
}

/// Load a Hugging Face `tokenizer.json` (or the one in a model directory).
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer, PromptError> {
    let (file, _) = tokenizer_files(path).map_err(PromptError::Tokenizer)?;
    let path = file.as_path();
    let bytes = std::fs::read(path).map_err(|source| PromptError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Tokenizer::from_bytes(bytes)
        .map_err(|e| PromptError::Tokenizer(format!("{}: {e}", path.display())))
}

/// `" word"` for a vocabulary entry spelled `Ġword` or `▁word` with lowercase ASCII letters.
fn candidate_word(token: &str) -> Option<String> {
    let rest = token
        .strip_prefix('\u{0120}')
        .or_else(|| token.strip_prefix('\u{2581}'))?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_lowercase()) {
        return None;
    }
    Some(format!(" {rest}"))
}

/// True for a prompt word: `" "` followed by one or more lowercase ASCII letters.
pub fn is_word(w: &str) -> bool {
    let b = w.as_bytes();
    b.len() >= 2 && b[0] == b' ' && b[1..].iter().all(|c| c.is_ascii_lowercase())
}

/// Which candidates encode to exactly their own id when concatenated: groups of
/// [`CHECK_GROUP`] are encoded together; a group whose ids differ is split in halves, round by
/// round, until the offending words are isolated.
fn check_groups<E: Encoder + ?Sized>(
    enc: &E,
    candidates: &[(u32, String)],
    strip_first_space: bool,
) -> Result<Vec<bool>, PromptError> {
    let mut ok = vec![false; candidates.len()];
    let mut pending: Vec<std::ops::Range<usize>> = (0..candidates.len())
        .step_by(CHECK_GROUP)
        .map(|s| s..(s + CHECK_GROUP).min(candidates.len()))
        .collect();
    while !pending.is_empty() {
        let texts: Vec<String> = pending
            .iter()
            .map(|r| {
                let t: String = candidates[r.clone()]
                    .iter()
                    .map(|(_, w)| w.as_str())
                    .collect();
                // SentencePiece: the text starts with its first word without the space.
                match strip_first_space {
                    true => t[1..].to_string(),
                    false => t,
                }
            })
            .collect();
        let got = enc.encode_many(&texts)?;
        let mut next = Vec::new();
        for (r, ids) in pending.into_iter().zip(got) {
            let group = &candidates[r.clone()];
            if ids.len() == group.len() && ids.iter().zip(group).all(|(g, (id, _))| g == id) {
                ok[r].iter_mut().for_each(|o| *o = true);
            } else if r.len() > 1 {
                let mid = r.start + r.len() / 2;
                next.push(r.start..mid);
                next.push(mid..r.end);
            }
        }
        pending = next;
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates() {
        assert_eq!(candidate_word("\u{0120}apple").as_deref(), Some(" apple"));
        assert_eq!(candidate_word("\u{2581}apple").as_deref(), Some(" apple"));
        assert_eq!(candidate_word("apple"), None);
        assert_eq!(candidate_word("\u{0120}Apple"), None);
        assert_eq!(candidate_word("\u{0120}"), None);
        assert_eq!(candidate_word("\u{0120}ap1"), None);
    }

    #[test]
    fn builtin_vocab() {
        let v = Vocab::builtin();
        assert_eq!(v.len(), 4900);
        assert!(v.is_builtin());
        assert_eq!(v.word(0), " baba");
        assert_eq!(v.id(17), 17);
        assert_eq!(v.max_word_len(), 5);
        assert_eq!(v.reserve_per_token(), 6);
    }

    #[test]
    fn word_level_tokenizer_has_too_few_words() {
        let json = r#"{
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hello": 1, "world": 2},
                      "unk_token": "[UNK]"}
        }"#;
        let tok: Tokenizer = json.parse().unwrap();
        match Vocab::from_tokenizer(&tok) {
            // hello and world qualify as space-separated words, too few all the same.
            Err(PromptError::TooFewWords { found: 2, min }) => assert_eq!(min, MIN_WORDS),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn from_words_skips_non_words() {
        let v = Vocab::from_words(
            vec![
                (1, " ok".to_string()),
                (2, "no".to_string()),
                (3, " No".to_string()),
                (4, " fine".to_string()),
            ],
            false,
        );
        assert_eq!(v.len(), 2);
        assert_eq!(v.word(1), " fine");
        assert_eq!(v.id(1), 4);
    }
}

#[cfg(test)]
mod sentencepiece_tests {
    use super::*;

    /// A SentencePiece-style tokenizer (Unigram, the Llama 2 normalizer: prepend `▁`, spaces
    /// become `▁`) with 1,200 `▁word` pieces.
    fn unigram() -> (Tokenizer, Vec<String>) {
        let letters: Vec<char> = ('a'..='z').collect();
        let words: Vec<String> = (0..1200)
            .map(|i| {
                let (a, b, c) = (i % 26, (i / 26) % 26, i / 676);
                format!("{}{}{}q", letters[a], letters[b], letters[c])
            })
            .collect();
        let mut vocab = vec![
            serde_json::json!(["<unk>", 0.0]),
            serde_json::json!(["\u{2581}", -5.0]),
        ];
        vocab.extend(
            letters
                .iter()
                .map(|c| serde_json::json!([c.to_string(), -8.0])),
        );
        vocab.extend(
            words
                .iter()
                .map(|w| serde_json::json!([format!("\u{2581}{w}"), -1.0])),
        );
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "\u{2581}"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"}]},
            "pre_tokenizer": null, "post_processor": null, "decoder": null,
            "model": {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": false}
        });
        (json.to_string().parse().unwrap(), words)
    }

    #[test]
    fn sentencepiece_words_are_exact_without_the_first_space() {
        let (tok, words) = unigram();
        // The byte-level way fails: " abcq" becomes `▁` `▁abcq`.
        let leading = tok
            .encode_fast(format!(" {}", words[0]).as_str(), false)
            .unwrap();
        assert_eq!(leading.len(), 2);
        let v = Vocab::from_tokenizer(&tok).unwrap();
        assert_eq!(v.len(), 1200);
        assert!(v.strips_first_space());
        assert!(v.method().contains("SentencePiece"));
        let b = crate::prompt::PromptBuilder::new(std::sync::Arc::new(v), 3, 16);
        for n in [1usize, 2, 17, 100, 1500] {
            let r = crate::trace::TraceRequest {
                index: n,
                line: n,
                timestamp_ms: 0.0,
                input_length: n as u32,
                output_length: 1,
                hash_ids: vec![1, 2, 3],
                session: None,
            };
            let text = b.text(&r, n);
            assert!(!text.starts_with(' '), "{text}");
            let ids = tok.encode_fast(text.as_str(), false).unwrap();
            assert_eq!(ids.get_ids(), b.token_ids(&r, n).as_slice(), "{n} tokens");
            let rep = crate::prompt::verify_sample(&b, &tok, &[r], 1);
            assert!(rep.ok(), "{rep:?}");
        }
    }
}

#[cfg(test)]
mod word_level_tests {
    use super::*;

    #[test]
    fn word_level_tokenizer_falls_back_to_space_separated_words() {
        let letters: Vec<char> = ('a'..='z').collect();
        let mut vocab = serde_json::Map::new();
        vocab.insert("[UNK]".into(), 0.into());
        for i in 0..1100usize {
            let w = format!(
                "{}{}{}x",
                letters[i % 26],
                letters[(i / 26) % 26],
                letters[i / 676]
            );
            vocab.insert(w, (i + 1).into());
        }
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
        });
        let tok: Tokenizer = json.to_string().parse().unwrap();
        let v = Vocab::from_tokenizer(&tok).unwrap();
        assert_eq!(v.len(), 1100);
        assert!(v.method().contains("space-separated"), "{}", v.method());
        let b = crate::prompt::PromptBuilder::new(std::sync::Arc::new(v), 5, 32);
        let r = crate::trace::TraceRequest {
            index: 0,
            line: 1,
            timestamp_ms: 0.0,
            input_length: 100,
            output_length: 1,
            hash_ids: vec![4, 5],
            session: None,
        };
        let ids = tok.encode_fast(b.text(&r, 100).as_str(), false).unwrap();
        assert_eq!(ids.get_ids(), b.token_ids(&r, 100).as_slice());
    }
}
