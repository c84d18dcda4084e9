//! The built-in vocabulary shared by `llm-sim` (its tokenizer when no `--tokenizer` is given)
//! and `request-sim` (its prompt words when no tokenizer is given).
//!
//! Every word is lowercase ASCII, at least four letters, and distinct, so a text made of
//! space-separated built-in words tokenizes in the simulator to exactly one token per word.
//! The list is generated, not stored: consonant-vowel-consonant-vowel pseudo-words.

use std::sync::OnceLock;

const CONSONANTS: &[u8] = b"bdfgklmnprstvz";
const VOWELS: &[u8] = b"aeiou";

/// Number of words in the built-in vocabulary.
pub const BUILTIN_VOCAB_SIZE: usize =
    CONSONANTS.len() * VOWELS.len() * CONSONANTS.len() * VOWELS.len();

/// The built-in word list (token id = position in the list).
pub fn builtin_words() -> &'static [String] {
    static WORDS: OnceLock<Vec<String>> = OnceLock::new();
    WORDS.get_or_init(|| {
        let mut out = Vec::with_capacity(BUILTIN_VOCAB_SIZE);
        for &c1 in CONSONANTS {
            for &v1 in VOWELS {
                for &c2 in CONSONANTS {
                    for &v2 in VOWELS {
                        let w = [c1, v1, c2, v2];
                        out.push(String::from_utf8(w.to_vec()).expect("ascii"));
                    }
                }
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn words_are_distinct_lowercase() {
        let w = builtin_words();
        assert_eq!(w.len(), BUILTIN_VOCAB_SIZE);
        assert_eq!(w.len(), 4900);
        let set: HashSet<&String> = w.iter().collect();
        assert_eq!(set.len(), w.len());
        assert!(w
            .iter()
            .all(|s| s.len() == 4 && s.bytes().all(|b| b.is_ascii_lowercase())));
    }
}
