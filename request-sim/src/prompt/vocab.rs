//! The word list prompts are built from.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tokenizers::Tokenizer;

use super::{Encoder, PromptError};

/// Fewest qualifying words a tokenizer must yield for [`Vocab::from_tokenizer`] to succeed.
/// It bounds how many distinct hash ids are guaranteed to get distinct first tokens.
pub const MIN_WORDS: usize = 1000;

/// Fewest pieces [`Vocab::from_pieces`] must find (the first-token guarantee holds for hash
/// ids less than the piece count apart).
pub const MIN_PIECES: usize = 16;

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
    /// The words are single-token pieces without spaces ([`Vocab::from_pieces`]).
    pieces: bool,
}

impl Vocab {
    /// The built-in word list of `llm-sim` (4,900 pseudo-words; token id = position in the
    /// list). Exact against the built-in simulator, which counts one token per word;
    /// approximate for real models.
    pub fn builtin() -> Vocab {
        let words = llm_common::vocab::builtin_words();
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
        let found = match Vocab::from_candidates(tok, plain) {
            Ok(mut v) => {
                v.plain = true;
                return Ok(v);
            }
            Err(PromptError::TooFewWords { found, .. }) => match err {
                PromptError::TooFewWords { found: f0, .. } => found.max(f0),
                e => return Err(e),
            },
            Err(e) => return Err(e),
        };
        // Last: single tokens that cannot merge with their neighbours (see `from_pieces`).
        match Vocab::from_pieces(tok) {
            Ok(v) => Ok(v),
            Err(PromptError::TooFewWords { .. }) => Err(PromptError::TooFewWords {
                found,
                min: MIN_WORDS,
            }),
            Err(e) => Err(e),
        }
    }

    /// The fallback for tokenizers without enough one-token words: **pieces**, single tokens
    /// concatenated without separators, chosen so that no vocabulary token can span the
    /// boundary between two of them. A character that occurs in the model's token strings
    /// only at their start is a *starter* (a token spanning a boundary would hold the next
    /// piece's first character inside); one that occurs only at their end is a *terminator*.
    /// Candidates are the tokens that start with a starter (or all end with a terminator,
    /// whichever gives more), whose decoded text is printable and encodes back to exactly
    /// that token; then they are checked in concatenation like words (groups of 512 in two
    /// orders, failing groups halved, offenders dropped). Returns [`PromptError::TooFewWords`]
    /// with fewer than [`MIN_PIECES`].
    pub fn from_pieces(tok: &Tokenizer) -> Result<Vocab, PromptError> {
        let n_ids = tok.get_vocab_size(false) as u32;
        let tokens: Vec<(u32, String)> = (0..n_ids)
            .filter_map(|id| tok.id_to_token(id).map(|t| (id, t)))
            .filter(|(_, t)| !t.is_empty())
            .collect();
        let (mut inner_start, mut inner_end) = (HashSet::new(), HashSet::new());
        for (_, t) in &tokens {
            let cs: Vec<char> = t.chars().collect();
            inner_start.extend(cs[1..].iter().copied()); // not a starter
            inner_end.extend(cs[..cs.len() - 1].iter().copied()); // not a terminator
        }
        let pick = |at_end: bool| -> Vec<(u32, String)> {
            tokens
                .par_iter()
                .filter(|(_, t)| match at_end {
                    false => !inner_start.contains(&t.chars().next().unwrap_or(' ')),
                    true => !inner_end.contains(&t.chars().last().unwrap_or(' ')),
                })
                .filter_map(|(id, _)| {
                    let text = tok.decode(&[*id], false).ok()?;
                    let printable = !text.is_empty()
                        && !text.chars().any(|c| c.is_control() || c == '\u{FFFD}');
                    let alone = tok.encode_fast(text.as_str(), false).ok()?;
                    (printable && alone.get_ids() == [*id]).then_some((*id, text))
                })
                .collect()
        };
        let mut best: Option<Vocab> = None;
        for at_end in [false, true] {
            let mut cands = pick(at_end);
            let mut seen = HashSet::new();
            cands.retain(|(_, t)| seen.insert(t.clone()));
            // Two orders, so each piece meets different neighbours.
            for round in 0..2 {
                if round == 1 {
                    cands.reverse();
                    let half = cands.len() / 2;
                    cands.rotate_left(half);
                }
                let ok = check_groups(tok, &cands, false)?;
                let mut ok = ok.into_iter();
                cands.retain(|_| ok.next().unwrap_or(false));
            }
            cands.sort_by_key(|(id, _)| *id);
            let v = Vocab::from_pieces_list(cands);
            if best.as_ref().is_none_or(|b| v.len() > b.len()) {
                best = Some(v);
            }
        }
        match best {
            Some(v) if v.len() >= MIN_PIECES => Ok(v),
            b => Err(PromptError::TooFewWords {
                found: b.map_or(0, |b| b.len()),
                min: MIN_PIECES,
            }),
        }
    }

    /// A vocabulary of pieces (any non-empty text, used as given, no space added).
    fn from_pieces_list(pieces: Vec<(u32, String)>) -> Vocab {
        let mut v = Vocab::from_words(std::iter::empty(), false);
        let mut text = String::new();
        for (id, p) in pieces.into_iter().take(MAX_WORDS) {
            let start = text.len() as u32;
            text.push_str(&p);
            v.spans.push((start, text.len() as u32));
            v.ids.push(id);
            v.max_word_len = v.max_word_len.max(p.len());
        }
        v.reserve_per_token = text.len().div_ceil(v.spans.len().max(1)) + 1;
        v.text = text;
        v.pieces = true;
        v
    }

    /// True for the [`from_pieces`](Self::from_pieces) fallback (prompts are runs of single
    /// tokens without spaces).
    pub fn is_pieces(&self) -> bool {
        self.pieces
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
            _ if self.pieces => {
                "single-token pieces without spaces (fallback: tokens no vocabulary token can \
                 merge across; hash ids less than the piece count apart differ at once)"
            }
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
            pieces: false,
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
pub fn tokenizer_files(path: &Path) -> Result<(PathBuf, Option<PathBuf>), PromptError> {
    if !path.is_dir() {
        return Ok((path.to_path_buf(), None));
    }
    let json = path.join("tokenizer.json");
    if !json.is_file() {
        return Err(PromptError::NoTokenizerJson {
            dir: path.to_path_buf(),
        });
    }
    let config = path.join("tokenizer_config.json");
    Ok((json, config.is_file().then_some(config)))
}

/// Load a Hugging Face `tokenizer.json` (or the one in a model directory).
pub fn load_tokenizer(path: &Path) -> Result<Tokenizer, PromptError> {
    let (file, _) = tokenizer_files(path)?;
    let path = file.as_path();
    let bytes = std::fs::read(path).map_err(|source| PromptError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    super::tokenizer_json::from_bytes(&bytes)
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
            let r = crate::trace::test_request(n, vec![1, 2, 3], n as u32);
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
        let r = crate::trace::test_request(0, vec![4, 5], 100);
        let ids = tok.encode_fast(b.text(&r, 100).as_str(), false).unwrap();
        assert_eq!(ids.get_ids(), b.token_ids(&r, 100).as_slice());
    }
}

#[cfg(test)]
mod pieces_tests {
    use super::*;

    /// A BPE tokenizer without pre-tokenizer: single characters (letters, space, punctuation)
    /// and merged words. Lowercase words merge freely (so concatenated lowercase tokens would
    /// re-merge), no token is `Ġword`/`▁word`, and a space is a token of its own: all three
    /// word methods fail. Capitalised words start with an upper-case letter that no token has
    /// inside, so they are pieces.
    fn bpe_without_words() -> Tokenizer {
        let mut vocab = serde_json::Map::new();
        let mut merges: Vec<String> = Vec::new();
        let add = |t: &str, vocab: &mut serde_json::Map<String, serde_json::Value>| {
            if !vocab.contains_key(t) {
                let id = vocab.len();
                vocab.insert(t.to_string(), id.into());
            }
        };
        for c in ('a'..='z').chain('A'..='Z').chain([' ', '.', ',']) {
            add(&c.to_string(), &mut vocab);
        }
        let letters: Vec<char> = ('a'..='z').collect();
        let mut words = Vec::new();
        for i in 0..400usize {
            let upper = (b'A' + (i % 26) as u8) as char;
            words.push(format!(
                "{upper}{}{}",
                letters[(i / 26) % 26],
                letters[(i * 7 + 3) % 26]
            ));
        }
        words.extend(["the", "and", "then", "than", "at", "ate"].map(String::from));
        for w in &words {
            let cs: Vec<char> = w.chars().collect();
            let mut left = cs[0].to_string();
            for c in &cs[1..] {
                let right = c.to_string();
                let merged = format!("{left}{right}");
                if !vocab.contains_key(&merged) {
                    merges.push(format!("{left} {right}"));
                    add(&merged, &mut vocab);
                }
                left = merged;
            }
        }
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
            "model": {"type": "BPE", "vocab": vocab, "merges": merges, "dropout": null,
                      "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false}
        });
        json.to_string().parse().unwrap()
    }

    #[test]
    fn pieces_are_the_fallback_and_prompts_are_exact() {
        let tok = bpe_without_words();
        // The word methods fail: " the" is a space token and `the`.
        assert_eq!(tok.encode_fast(" the", false).unwrap().len(), 2);
        assert!(matches!(
            Vocab::from_candidates(&tok, vec![(1, " the".into())]),
            Err(PromptError::TooFewWords { .. })
        ));
        let v = Vocab::from_tokenizer(&tok).unwrap();
        assert!(v.is_pieces(), "{}", v.method());
        assert!(v.method().contains("pieces"), "{}", v.method());
        // Capitalised words (and their prefixes), space and punctuation; nothing lower-case.
        assert!(v.len() >= 400, "{}", v.len());
        assert!((0..v.len()).all(|i| !v.word(i).starts_with(|c: char| c.is_ascii_lowercase())));
        let b = crate::prompt::PromptBuilder::new(std::sync::Arc::new(v), 4, 16);
        for n in [1usize, 2, 3, 16, 17, 100, 700] {
            let r = crate::trace::test_request(n, vec![9, 10, 11], n as u32);
            let text = b.text(&r, n);
            let ids = tok.encode_fast(text.as_str(), false).unwrap();
            assert_eq!(ids.get_ids(), b.token_ids(&r, n).as_slice(), "{n}: {text}");
            let rep = crate::prompt::verify_sample(&b, &tok, &[r], 1);
            assert!(rep.ok(), "{rep:?}");
        }
    }

    #[test]
    fn a_tokenizer_without_pieces_is_refused_with_a_message() {
        // Only lower-case letters that all merge with each other: no starter, no terminator.
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": null, "post_processor": null, "decoder": null,
            "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "ba": 3},
                      "merges": ["a b", "b a"], "dropout": null, "unk_token": null,
                      "continuing_subword_prefix": null, "end_of_word_suffix": null,
                      "fuse_unk": false, "byte_fallback": false}
        });
        let tok: Tokenizer = json.to_string().parse().unwrap();
        let e = Vocab::from_tokenizer(&tok).unwrap_err();
        assert!(e.to_string().contains("send token ids"), "{e}");
    }
}
