//! Counting long prompts fast with a real tokenizer: the token ids of each word, kept.
//!
//! `tokenizers` runs every request's whole text through its normalizer, pre-tokenizer regex,
//! offset bookkeeping and BPE; for a 12k-token prompt that is tens to hundreds of milliseconds
//! of CPU per request, all of it inside the client's TTFT, on the same cores as the client
//! measuring it. A replayed trace sends the same words again and again (its prompts are made of
//! the vocabulary's one-token words, and a session's turns repeat their prefix), so the ids of
//! each word are worth keeping.
//!
//! The rule that makes this exact: a byte-level BPE pre-tokenizer of the GPT-2/GPT-4 family
//! (Qwen, Llama 3, Mistral's newer tokenizers) never joins letters across a single space that
//! sits between two letters: the text before the space ends a word, the space starts the next
//! one (` word`). So the ids of a text are the ids of its pieces cut before such spaces, one
//! after the other. Whether a tokenizer obeys the rule is checked when it is loaded, on a text of
//! its own vocabulary with chat markers, newlines and punctuation; a tokenizer that does not
//! (SentencePiece families, for one) keeps the plain path. No crate offers this: it is a
//! property of replayed traffic, not of tokenizers.

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::sync::RwLock;

/// Pieces longer than this are counted each time and never kept (a text without spaces
/// between letters, such as Chinese, is one long piece).
const MAX_PIECE_BYTES: usize = 64;
/// Pieces kept at most.
const MAX_PIECES: usize = 1 << 20;
/// Texts shorter than this take the plain path (nothing to win).
const MIN_TEXT_BYTES: usize = 512;
/// Bytes of a piece kept in place.
const SHORT: usize = 16;

/// A short piece's bytes in place, zero-padded (pieces with a zero byte are not kept here): a
/// lookup reads one 20-byte slot of the table and no string elsewhere on the heap. The table
/// of a vocabulary's words then fits the CPU's caches; with strings and id lists on the heap
/// the lookups missed them (70% of a long prompt's counting time), not the tokenizer.
type Short = [u8; SHORT];

fn short(piece: &str) -> Option<Short> {
    if piece.as_bytes().contains(&0) {
        return None;
    }
    short_of_zero_free(piece)
}

/// [`short`] of a piece known to hold no zero byte (a text without one is checked once, not
/// piece by piece: the check per piece was a tenth of a long prompt's counting).
#[inline]
fn short_of_zero_free(piece: &str) -> Option<Short> {
    let b = piece.as_bytes();
    if b.len() > SHORT {
        return None;
    }
    let mut key = [0u8; SHORT];
    key[..b.len()].copy_from_slice(b);
    Some(key)
}

/// The key of a piece that has no [`short`] key (no piece is 16 zero bytes: pieces with a zero
/// byte have none).
const NO_KEY: Short = [0u8; SHORT];

/// A piece of a text: its [`short`] key (or [`NO_KEY`]) and where it lies in the text.
struct Cut {
    key: Short,
    start: u32,
    end: u32,
}

thread_local! {
    /// The cuts of the text being counted, kept between texts (a 12k-token prompt has 12k).
    static CUTS: RefCell<Vec<Cut>> = const { RefCell::new(Vec::new()) };
}

/// The pieces kept: one-token pieces of up to 16 bytes in place (nearly every word of a
/// synthetic prompt), the others on the heap.
#[derive(Default)]
struct Known {
    short: HashMap<Short, u32>,
    other: HashMap<Box<str>, Box<[u32]>>,
}

impl Known {
    fn len(&self) -> usize {
        self.short.len() + self.other.len()
    }

    /// The id of a one-token piece kept in place, by its key.
    #[inline]
    fn short_id(&self, key: &Short) -> Option<u32> {
        if *key == NO_KEY {
            return None;
        }
        self.short.get(key).copied()
    }

    /// The ids of a piece kept on the heap.
    fn other_ids(&self, piece: &str) -> Option<&[u32]> {
        self.other.get(piece).map(|ids| &ids[..])
    }

    fn keep(&mut self, piece: &str, ids: &[u32]) {
        if self.len() >= MAX_PIECES || piece.len() > MAX_PIECE_BYTES {
            return;
        }
        match (short(piece), ids) {
            (Some(key), &[id]) => {
                self.short.insert(key, id);
            }
            _ => {
                self.other.insert(piece.into(), ids.into());
            }
        }
    }
}

/// The ids of the words seen so far, and what the tokenizer adds around a text when asked for
/// its special tokens.
pub struct WordCache {
    pieces: RwLock<Known>,
    specials_before: Vec<u32>,
    specials_after: Vec<u32>,
}

/// The text cut before every space that sits between two ASCII letters.
fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 1;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        while i + 1 < bytes.len() {
            let cut = bytes[i] == b' '
                && bytes[i - 1].is_ascii_alphabetic()
                && bytes[i + 1].is_ascii_alphabetic();
            i += 1;
            if cut && i - 1 > start {
                let piece = &text[start..i - 1];
                start = i - 1;
                return Some(piece);
            }
        }
        let piece = &text[start..];
        start = bytes.len();
        Some(piece)
    })
}

fn ids(tok: &tokenizers::Tokenizer, text: &str, special: bool) -> Result<Vec<u32>, String> {
    tok.encode(text, special)
        .map(|e| e.get_ids().to_vec())
        .map_err(|e| format!("tokenization failed: {e}"))
}

impl WordCache {
    /// A cache for `tok`, or why the tokenizer cannot have one (its ids of a sample text differ
    /// from the ids of the text's pieces).
    pub fn for_tokenizer(tok: &tokenizers::Tokenizer) -> Result<WordCache, String> {
        let probe = "hello world";
        let plain = ids(tok, probe, false)?;
        let with = ids(tok, probe, true)?;
        let at = (0..=with.len().saturating_sub(plain.len()))
            .find(|&k| with[k..].starts_with(&plain))
            .ok_or("its special tokens do not wrap the text")?;
        let cache = WordCache {
            pieces: RwLock::new(Known::default()),
            specials_before: with[..at].to_vec(),
            specials_after: with[at + plain.len()..].to_vec(),
        };
        let sample = sample_text(tok);
        for special in [false, true] {
            let whole = ids(tok, &sample, special)?;
            let cut = cache.encode_pieces(tok, &sample, special, false)?;
            if whole != cut {
                return Err("its ids of a text are not the ids of the text's words".into());
            }
        }
        Ok(cache)
    }

    /// Counts the vocabulary's own words (` word`, ASCII letters) once, at load:
    /// the first requests of a replay, whose words are all new, would otherwise count them one
    /// by one inside their TTFT (as a real server is warmed up before it says it is ready).
    /// Returns how many words it counted.
    pub fn warm(&self, tok: &tokenizers::Tokenizer) -> usize {
        let vocab = tok.get_vocab_size(false) as u32;
        let mut batch = Vec::with_capacity(1024);
        let mut counted_words = 0;
        for id in 0..vocab {
            let Ok(word) = tok.decode(&[id], false) else {
                continue;
            };
            // Inside a text every word's piece starts with its space.
            let Some(letters) = word.strip_prefix(' ') else {
                continue;
            };
            if word.len() > MAX_PIECE_BYTES
                || letters.is_empty()
                || !letters.bytes().all(|b| b.is_ascii_alphabetic())
            {
                continue;
            }
            let Ok(counted) = ids(tok, &word, false) else {
                continue;
            };
            batch.push((word, counted));
            counted_words += 1;
            if batch.len() == batch.capacity() && !self.keep(&mut batch) {
                return counted_words;
            }
        }
        self.keep(&mut batch);
        counted_words
    }

    /// Keeps the counted words of `batch` (emptied); false when the cache is full.
    fn keep(&self, batch: &mut Vec<(String, Vec<u32>)>) -> bool {
        let Ok(mut known) = self.pieces.write() else {
            return false;
        };
        for (word, counted) in batch.drain(..) {
            if known.len() >= MAX_PIECES {
                return false;
            }
            known.keep(&word, &counted);
        }
        true
    }

    /// The ids of `text` (with the tokenizer's special tokens when `special`), as
    /// `tok.encode` gives them.
    pub fn encode(
        &self,
        tok: &tokenizers::Tokenizer,
        text: &str,
        special: bool,
    ) -> Result<Vec<u32>, String> {
        // (Pieces are cut at u32 offsets: a text of 4 GiB or more takes the plain path.)
        if text.len() < MIN_TEXT_BYTES || u32::try_from(text.len()).is_err() {
            return ids(tok, text, special);
        }
        self.encode_pieces(tok, text, special, true)
    }

    fn encode_pieces(
        &self,
        tok: &tokenizers::Tokenizer,
        text: &str,
        special: bool,
        keep: bool,
    ) -> Result<Vec<u32>, String> {
        let mut out = Vec::with_capacity(text.len() / 4 + 8);
        if special {
            out.extend_from_slice(&self.specials_before);
        }
        let mut new: Vec<(&str, Vec<u32>)> = Vec::new();
        // Two passes: the text is cut into pieces first, then the pieces are looked up in a
        // loop that does nothing else. Each lookup misses the CPU caches (the table of a
        // vocabulary's words is larger than L2); with nothing but lookups between them the
        // CPU has several in flight at once. Cutting and looking up in one loop cost ~35%
        // more per prompt (1.5 against 1.1 ms for the Mooncake trace's mean prompt).
        CUTS.with_borrow_mut(|cuts| -> Result<(), String> {
            cuts.clear();
            // At most one piece per 2 bytes ("a b b b…"); a vocabulary's words average ~7.
            // Reserved at once rather than grown piece by piece (each growth copied the cuts
            // so far into fresh memory, on every new blocking thread and longer prompt).
            cuts.reserve(text.len() / 4);
            let base = text.as_ptr() as usize;
            let zero_free = !text.as_bytes().contains(&0);
            for piece in pieces(text) {
                let start = piece.as_ptr() as usize - base;
                let key = if zero_free {
                    short_of_zero_free(piece)
                } else {
                    short(piece)
                };
                cuts.push(Cut {
                    key: key.unwrap_or(NO_KEY),
                    start: start as u32,
                    end: (start + piece.len()) as u32,
                });
            }
            let known = self.pieces.read().map_err(|_| "word cache poisoned")?;
            for c in cuts.iter() {
                if let Some(id) = known.short_id(&c.key) {
                    out.push(id);
                    continue;
                }
                let piece = &text[c.start as usize..c.end as usize];
                if let Some(ids) = known.other_ids(piece) {
                    out.extend_from_slice(ids);
                    continue;
                }
                let counted = ids(tok, piece, false)?;
                out.extend_from_slice(&counted);
                if keep && piece.len() <= MAX_PIECE_BYTES {
                    new.push((piece, counted));
                }
            }
            Ok(())
        })?;
        if !new.is_empty() {
            let mut known = self.pieces.write().map_err(|_| "word cache poisoned")?;
            for (piece, counted) in new {
                known.keep(piece, &counted);
            }
        }
        if special {
            out.extend_from_slice(&self.specials_after);
        }
        Ok(out)
    }
}

/// A text of the tokenizer's own words, with the shapes a chat prompt has around them: chat
/// markers, newlines, punctuation, digits, doubled spaces and a non-ASCII word.
fn sample_text(tok: &tokenizers::Tokenizer) -> String {
    let vocab = tok.get_vocab_size(false) as u32;
    let mut words = Vec::new();
    let mut id = 0u32;
    while words.len() < 600 && id < vocab {
        if let Ok(w) = tok.decode(&[id], true) {
            let w = w.trim();
            if w.len() > 1 && w.bytes().all(|b| b.is_ascii_alphabetic()) {
                words.push(w.to_string());
            }
        }
        id += 97;
    }
    let mut text = String::from("<|im_start|>system\nYou are a helper.<|im_end|>\n");
    text.push_str("<|im_start|>user\n");
    for (k, w) in words.iter().enumerate() {
        text.push_str(w);
        text.push_str(match k % 53 {
            7 => ". ",
            19 => "\n",
            23 => "  ",
            31 => " 42 ",
            41 => ", café ",
            47 => "'s ",
            _ => " ",
        });
    }
    text.push_str("end<|im_end|>\n<|im_start|>assistant\n");
    text
}

#[cfg(test)]
mod tests {
    use super::pieces;

    #[test]
    fn pieces_are_cut_before_spaces_between_letters_only() {
        let cut: Vec<&str> = pieces("ab cd  ef. gh\nij k").collect();
        assert_eq!(cut, vec!["ab", " cd  ef. gh\nij", " k"]);
        assert_eq!(pieces("x").collect::<Vec<_>>(), vec!["x"]);
        assert_eq!(pieces("").count(), 0);
        assert_eq!(pieces("a b").collect::<Vec<_>>(), vec!["a", " b"]);
        assert_eq!(pieces(" a").collect::<Vec<_>>(), vec![" a"]);
    }
}
