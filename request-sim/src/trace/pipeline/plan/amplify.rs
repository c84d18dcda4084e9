//! `--amplify N` on an agent corpus: N independent copies of every conversation (a fraction:
//! the last copy is a seeded share of the conversations), as on a flat trace. Copy k >= 1 of
//! conversation `<id>` is `<id>@k`: its own sessions and, with `local` ids, its own hash-id
//! namespace; `global` ids are moved into the copy's own space (a copy shares with itself what
//! the original shares, never with the original). The copies are laid out with the rest of the
//! corpus (no `--amplify-phase`: the population decides when each starts).

use std::sync::Arc;

use llm_common::util::{hash3, mix64, unit};

use crate::trace::model::{Corpus, HashScope};
use crate::trace::pipeline::reshape::FRESH_BIT;

/// Replaces `corpus` by `a` copies of it (see the module); returns the conversations added (0
/// when a fraction below 1 left some out). Refused when no conversation is left.
pub fn amplify_conversations(corpus: &mut Corpus, a: f64, seed: u64) -> Result<usize, String> {
    corpus.dense_ids = None;
    let before = corpus.conversations.len();
    let mut out = Vec::with_capacity((before as f64 * a.ceil()) as usize);
    for c in &corpus.conversations {
        let key = mix64(llm_common::routing::session_hash(&c.id));
        let extra = unit(hash3(seed, key, 0xa3f1)) < a - a.floor();
        for k in 0..a.floor() as u64 + u64::from(extra) {
            if k == 0 {
                out.push(c.clone());
                continue;
            }
            let mut copy = c.clone();
            copy.id = Arc::from(format!("{}@{k}", c.id));
            if c.hash_scope == HashScope::Global {
                for r in copy.agents.iter_mut().flat_map(|a| a.requests.iter_mut()) {
                    r.hash_ids = r
                        .hash_ids
                        .map(|h| FRESH_BIT | (hash3(seed ^ 0xa3f1, h, k) >> 1));
                }
            }
            out.push(copy);
        }
    }
    if out.is_empty() {
        return Err(format!(
            "--amplify {a} kept none of the corpus's {before} conversations (--seed {seed})"
        ));
    }
    corpus.conversations = out;
    Ok(corpus.conversations.len().saturating_sub(before))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::formats::weka;
    use crate::trace::pipeline::plan::{plan, PlanOptions};
    use crate::trace::TraceFormat;

    fn corpus(scope: &str) -> Corpus {
        let text = format!(
            r#"{{"id":"c","block_size":16,"hash_id_scope":"{scope}","requests":[
            {{"t":0.0,"type":"s","in":32,"out":2,"hash_ids":[1,2],"api_time":1.0,"think_time":0.0}},
            {{"t":2.0,"type":"s","in":48,"out":2,"hash_ids":[1,2,3],"api_time":1.0,"think_time":1.0}}]}}"#
        );
        Corpus {
            conversations: vec![weka::parse("c.json", text.as_bytes()).unwrap()],
            notes: Vec::new(),
            ..Corpus::default()
        }
    }

    /// Three copies: three conversations, each a prefix chain of its own, sharing no block.
    #[test]
    fn copies_are_independent_conversations() {
        for scope in ["local", "global"] {
            let mut c = corpus(scope);
            assert_eq!(amplify_conversations(&mut c, 3.0, 7), Ok(2));
            let ids: Vec<&str> = c.conversations.iter().map(|c| &*c.id).collect();
            assert_eq!(ids, ["c", "c@1", "c@2"]);
            let (t, facts) = plan(
                &c,
                TraceFormat::from_name("weka").unwrap(),
                &PlanOptions::default(),
            )
            .unwrap();
            assert_eq!((facts.conversations, facts.requests), (3, 6));
            let firsts: Vec<u64> = t.requests.iter().map(|r| r.hash_ids.ids()[0]).collect();
            let distinct: std::collections::BTreeSet<u64> = firsts.iter().copied().collect();
            assert_eq!(distinct.len(), 3, "{scope}: {firsts:?}");
        }
        let e = amplify_conversations(&mut corpus("local"), 1e-9, 7).unwrap_err();
        assert!(e.contains("kept none"), "{e}");
    }
}
