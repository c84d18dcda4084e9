//! `--prefix-scale` and `--prompt-scale` on an agent corpus, by the flat trace's rule
//! (`pipeline/reshape.rs`): each hash id becomes `scale` copies (rounded by a seeded coin per
//! id), `--prefix-scale` for a block two or more requests hold, `--prompt-scale` for a block of
//! one request only; tokens past the hashed blocks scale by `--prompt-scale`. An id becomes the
//! same copies wherever it appears, so a conversation stays a prefix chain. With `local` ids a
//! block's holders are counted within its conversation. Requests given as messages are sent as
//! written (counted).

use std::collections::HashMap;

use llm_common::util::hash3;

use crate::trace::model::{Corpus, HashScope};
use crate::trace::pipeline::reshape::{rounded, scale_tokens, FRESH_BIT};

/// The scales and the seed of their coins.
#[derive(Debug, Clone, Copy)]
pub struct Scales {
    pub prefix: f64,
    pub prompt: f64,
    pub seed: u64,
}

/// Scales every prompt of `corpus` (see the module); returns (prompts scaled, requests given
/// as messages left as written).
pub fn scale_prompts(corpus: &mut Corpus, s: Scales) -> (usize, usize) {
    corpus.dense_ids = None;
    let key = |ci: usize, scope: HashScope, h: u64| match scope {
        HashScope::Local => hash3(ci as u64, h, 0x10ca1),
        HashScope::Global => h,
    };
    let mut holders: HashMap<u64, u32> = HashMap::new();
    for (ci, c) in corpus.conversations.iter().enumerate() {
        for r in c.agents.iter().flat_map(|a| &a.requests) {
            for &h in &r.hash_ids.to_vec() {
                *holders.entry(key(ci, c.hash_scope, h)).or_insert(0) += 1;
            }
        }
    }
    let (mut scaled, mut messages) = (0, 0);
    for (ci, c) in corpus.conversations.iter_mut().enumerate() {
        let (b, scope) = (c.block_size.max(1) as u64, c.hash_scope);
        for r in c.agents.iter_mut().flat_map(|a| a.requests.iter_mut()) {
            if r.messages.is_some() {
                messages += 1;
                continue;
            }
            let len = u64::from(r.input_length);
            let n = r.hash_ids.len() as u64;
            let mut out = Vec::with_capacity(r.hash_ids.len());
            let mut tokens = 0u64;
            for (i, &h) in r.hash_ids.to_vec().iter().enumerate() {
                let shared = holders.get(&key(ci, scope, h)).copied().unwrap_or(0) >= 2;
                let copies = rounded(if shared { s.prefix } else { s.prompt }, s.seed, h);
                let in_block = b.min(len.saturating_sub(i as u64 * b));
                for j in 0..copies {
                    out.push(if j == 0 {
                        h
                    } else {
                        FRESH_BIT | (hash3(s.seed, h, j) >> 1)
                    });
                    // Only the last copy of a partial (last) block is partial.
                    tokens += if j + 1 == copies { in_block } else { b };
                }
            }
            tokens += scale_tokens(len.saturating_sub(n * b), s.prompt, s.seed, u64::MAX - 1);
            r.input_length = tokens.clamp(1, u64::from(u32::MAX)) as u32;
            r.hash_ids = out.into();
            scaled += 1;
        }
    }
    (scaled, messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::IdealCache;
    use crate::trace::formats::weka;
    use crate::trace::pipeline::plan::{plan, PlanOptions};
    use crate::trace::TraceFormat;

    /// Three requests extending one another (blocks of 16): `--prefix-scale 2` doubles the
    /// blocks they share, `--prompt-scale 3` triples the last request's own block; every
    /// prompt still extends the one before it.
    #[test]
    fn scaled_prompts_stay_a_prefix_chain() {
        let text = r#"{"id":"c","block_size":16,"requests":[
            {"t":0.0,"type":"s","in":32,"out":2,"hash_ids":[1,2],"api_time":1.0,"think_time":0.0},
            {"t":2.0,"type":"s","in":48,"out":2,"hash_ids":[1,2,3],"api_time":1.0,"think_time":1.0},
            {"t":4.0,"type":"s","in":64,"out":2,"hash_ids":[1,2,3,4],"api_time":1.0,"think_time":1.0}]}"#;
        let mut corpus = Corpus {
            conversations: vec![weka::parse("c.json", text.as_bytes()).unwrap()],
            notes: Vec::new(),
            ..Corpus::default()
        };
        let s = Scales {
            prefix: 2.0,
            prompt: 3.0,
            seed: 7,
        };
        assert_eq!(scale_prompts(&mut corpus, s), (3, 0));
        let (t, _) = plan(
            &corpus,
            TraceFormat::from_name("weka").unwrap(),
            &PlanOptions::default(),
        )
        .unwrap();
        let lens: Vec<u32> = t.requests.iter().map(|r| r.input_length).collect();
        assert_eq!(lens, [64, 96, 144]);
        for w in t.requests.windows(2) {
            assert!(w[1].hash_ids.ids().starts_with(&w[0].hash_ids.ids()));
        }
        let mut cache = IdealCache::new(16, IdealCache::MAX_BLOCKS);
        let hits: Vec<u32> = t.requests.iter().map(|r| cache.hits(r).unwrap()).collect();
        assert_eq!(hits, [0, 64, 96]);
    }
}
