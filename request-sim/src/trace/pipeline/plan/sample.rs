//! `--sample-sessions P` on an agent corpus: each whole conversation (its subagents with it)
//! is kept with probability P, seeded by `--seed` and the conversation's id, so the same seed
//! keeps the same conversations whatever the order of the files.

use llm_common::util::{hash3, mix64, unit};

use crate::trace::model::Corpus;

/// Keeps each conversation of `corpus` with probability `p` (see the module); returns how many
/// were sampled out. Refused when none is kept.
pub fn sample_conversations(corpus: &mut Corpus, p: f64, seed: u64) -> Result<usize, String> {
    let before = corpus.conversations.len();
    corpus
        .conversations
        .retain(|c| unit(hash3(seed, id_key(&c.id), 0x5a_3b1e)) < p);
    let out = before - corpus.conversations.len();
    if corpus.conversations.is_empty() && before > 0 {
        return Err(format!(
            "--sample-sessions {p} kept none of the corpus's {before} conversations (--seed {seed}): raise it, or try another seed"
        ));
    }
    Ok(out)
}

/// A conversation id as a number (FNV-1a folded through SplitMix64).
fn id_key(id: &str) -> u64 {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    mix64(h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::formats::weka;

    fn corpus(n: usize) -> Corpus {
        let conv = |i: usize| {
            let text = format!(
                r#"{{"id":"c{i}","block_size":16,"requests":[{{"t":0.0,"type":"s","in":24,"out":2,"hash_ids":[1,2],"api_time":1.0,"think_time":0.0}}]}}"#
            );
            weka::parse(&format!("c{i}.json"), text.as_bytes()).unwrap()
        };
        Corpus {
            conversations: (0..n).map(conv).collect(),
            notes: Vec::new(),
            ..Corpus::default()
        }
    }

    #[test]
    fn keeps_a_seeded_share_of_whole_conversations() {
        let mut c = corpus(200);
        let out = sample_conversations(&mut c, 0.25, 7).unwrap();
        assert_eq!(out + c.conversations.len(), 200);
        assert!((30..=70).contains(&c.conversations.len()), "{out}");
        // The same seed keeps the same conversations.
        let mut again = corpus(200);
        sample_conversations(&mut again, 0.25, 7).unwrap();
        let ids = |c: &Corpus| {
            c.conversations
                .iter()
                .map(|c| c.id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&c), ids(&again));
        // All kept at 1; none kept is refused.
        assert_eq!(sample_conversations(&mut corpus(5), 1.0, 7), Ok(0));
        let e = sample_conversations(&mut corpus(3), 1e-9, 7).unwrap_err();
        assert!(
            e.contains("kept none of the corpus's 3 conversations"),
            "{e}"
        );
    }
}
