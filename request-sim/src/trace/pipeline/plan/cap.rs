//! `--max-input-length` on an agent corpus: every longer prompt is **cut** to the limit (as on
//! a flat trace, `pipeline/reshape.rs`), never dropped: its input length becomes the limit and
//! its hash ids the first `ceil(limit / block)` (the last block a prefix of the full one). A
//! request's prompt extends its predecessor's, and the first `limit` tokens of a prompt are a
//! prefix of the first `limit` tokens of any prompt extending it, so a cut conversation stays
//! a consistent prefix chain (past the limit its requests send the same capped prompt).
//! Requests given as messages are sent as written: counted, not cut.

use crate::trace::model::Corpus;

/// What [`cap_inputs`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Capped {
    /// Prompts cut to the limit.
    pub cut: usize,
    /// Requests over the limit given as messages (sent as written).
    pub messages_over: usize,
}

/// Cuts every prompt of `corpus` longer than `max` tokens to `max` (see the module).
pub fn cap_inputs(corpus: &mut Corpus, max: u32) -> Capped {
    corpus.dense_ids = None;
    let mut out = Capped::default();
    for c in &mut corpus.conversations {
        let block = c.block_size.max(1);
        for r in c.agents.iter_mut().flat_map(|a| a.requests.iter_mut()) {
            if r.input_length <= max {
                continue;
            }
            if r.messages.is_some() {
                out.messages_over += 1;
                continue;
            }
            r.input_length = max;
            r.hash_ids = r.hash_ids.truncated((max as usize).div_ceil(block));
            out.cut += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::IdealCache;
    use crate::trace::formats::weka;
    use crate::trace::pipeline::plan::{plan, PlanOptions};
    use crate::trace::TraceFormat;

    /// Three requests of 24, 40 and 56 tokens (blocks of 16) extending one another, cut at 32:
    /// the last two are cut, and each prompt still extends the one before it (the second and
    /// third are the same 32 tokens: an ideal cache hits all of the third).
    #[test]
    fn a_cut_conversation_stays_a_prefix_chain() {
        let text = r#"{"id":"c","block_size":16,"requests":[
            {"t":0.0,"type":"s","in":24,"out":2,"hash_ids":[1,2],"api_time":1.0,"think_time":0.0},
            {"t":2.0,"type":"s","in":40,"out":2,"hash_ids":[1,3,4],"api_time":1.0,"think_time":1.0},
            {"t":4.0,"type":"s","in":56,"out":2,"hash_ids":[1,3,4,5],"api_time":1.0,"think_time":1.0}]}"#;
        let mut corpus = Corpus {
            conversations: vec![weka::parse("c.json", text.as_bytes()).unwrap()],
            notes: Vec::new(),
            ..Corpus::default()
        };
        let got = cap_inputs(&mut corpus, 32);
        assert_eq!(
            got,
            Capped {
                cut: 2,
                messages_over: 0
            }
        );
        let (t, _) = plan(
            &corpus,
            TraceFormat::from_name("weka").unwrap(),
            &PlanOptions::default(),
        )
        .unwrap();
        let lens: Vec<u32> = t.requests.iter().map(|r| r.input_length).collect();
        assert_eq!(lens, [24, 32, 32]);
        assert!(t.requests.iter().all(|r| r.hash_ids.len() == 2));
        assert_eq!(t.requests[1].hash_ids, t.requests[2].hash_ids);
        assert_eq!(
            t.requests[0].hash_ids.ids()[0],
            t.requests[1].hash_ids.ids()[0]
        );
        let mut cache = IdealCache::new(16, IdealCache::MAX_BLOCKS);
        let hits: Vec<u32> = t.requests.iter().map(|r| cache.hits(r).unwrap()).collect();
        assert_eq!(hits, [0, 16, 32]);
        // Under the limit: nothing cut.
        assert_eq!(cap_inputs(&mut corpus, 100), Capped::default());
    }
}
