//! The step-cost model: how long one engine step takes on the simulated GPU.
//!
//! A step reads the weights once and computes its new tokens; on a GPU the two overlap, so the
//! linear part costs `max(fixed, prefill_token × new prefill tokens)`, not their sum (the
//! §14 figures of docs/llm-sim.md: Vidur's H100 operator profiles, BLIS fits of vLLM on H100, measured vLLM TPOT). On top
//! of it come attention over the context of the prefill tokens (quadratic in the prompt) and the
//! decoding sequences (a per-sequence cost and the read of each one's KV cache):
//!
//! ```text
//! step = max(fixed, prefill_token × P) + attention_pair × A + decode_seq × D + decode_ctx_token × C
//! ```
//!
//! P: uncached prompt tokens computed in the step; A: Σ over those tokens of the tokens each
//! one attends to (causal: the tokens before it in its sequence, cached or not, and itself — a
//! chunk of n tokens after c computed ones adds `n·c + n(n+1)/2`); D: decoding sequences; C: Σ
//! of their context lengths. A step that admits a request with images adds the vision encoder,
//! `vision_token × V` (V: the image tokens of its images not in the prefix cache).

/// What one engine step computes: the inputs of [`StepCost::cost_us`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepWork {
    /// Uncached prompt tokens computed in the step (chunked prefill, recomputation).
    pub prefill_tokens: u64,
    /// Σ over those tokens of the number of tokens each attends to.
    pub attention_pairs: u64,
    /// Sequences producing their next token.
    pub decodes: u64,
    /// Σ of the decoding sequences' context lengths (tokens).
    pub decode_context: u64,
    /// Image tokens the vision encoder computes in the step (images not in the prefix cache).
    pub encoder_tokens: u64,
}

impl StepWork {
    /// Adds a prefill chunk of `n` tokens computed after `computed` tokens of its sequence.
    pub fn add_prefill(&mut self, computed: u32, n: u32) {
        let (c, n) = (u64::from(computed), u64::from(n));
        self.prefill_tokens += n;
        self.attention_pairs += n * c + n * (n + 1) / 2;
    }

    /// Adds a decoding sequence with `context` tokens.
    pub fn add_decode(&mut self, context: u32) {
        self.decodes += 1;
        self.decode_context += u64::from(context);
    }
}

/// The coefficients of the step-cost model, microseconds (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepCost {
    pub fixed_us: f64,
    pub prefill_token_us: f64,
    pub attention_pair_us: f64,
    pub decode_seq_us: f64,
    pub decode_ctx_token_us: f64,
    /// The vision encoder's time per image token (before the prefill, not overlapped).
    pub vision_token_us: f64,
}

impl StepCost {
    /// The coefficients of a server's settings.
    pub fn of(cfg: &crate::SimConfig) -> StepCost {
        StepCost {
            fixed_us: cfg.step_fixed_us,
            prefill_token_us: cfg.prefill_token_us,
            attention_pair_us: cfg.attention_pair_us,
            decode_seq_us: cfg.decode_seq_us,
            decode_ctx_token_us: cfg.decode_ctx_token_us,
            vision_token_us: cfg.vision_token_us,
        }
    }

    /// Simulated duration of a step doing `w`, microseconds.
    pub fn cost_us(&self, w: &StepWork) -> f64 {
        let linear = self
            .fixed_us
            .max(self.prefill_token_us * w.prefill_tokens as f64);
        linear
            + self.attention_pair_us * w.attention_pairs as f64
            + self.decode_seq_us * w.decodes as f64
            + self.decode_ctx_token_us * w.decode_context as f64
            + self.vision_token_us * w.encoder_tokens as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COST: StepCost = StepCost {
        fixed_us: 6_500.0,
        prefill_token_us: 20.0,
        attention_pair_us: 0.001,
        decode_seq_us: 5.0,
        decode_ctx_token_us: 0.1,
        vision_token_us: 0.0,
    };

    #[test]
    fn weights_and_prefill_overlap() {
        // 100 tokens: 2 ms of compute hides under the 6.5 ms weight read.
        let mut w = StepWork::default();
        w.add_prefill(0, 100);
        assert_eq!(w.attention_pairs, 5_050);
        assert!((COST.cost_us(&w) - (6_500.0 + 5.05)).abs() < 1e-9);
        // 1,000 tokens: 20 ms of compute, the weight read is hidden instead.
        let mut w = StepWork::default();
        w.add_prefill(0, 1_000);
        assert!((COST.cost_us(&w) - (20_000.0 + 500.5)).abs() < 1e-9);
    }

    #[test]
    fn attention_counts_the_context_before_the_chunk() {
        // A second chunk of 10 after 90 computed (or cached) tokens attends to 90 + its own.
        let mut w = StepWork::default();
        w.add_prefill(90, 10);
        assert_eq!(w.attention_pairs, 10 * 90 + 55);
        // Chunks of one prompt add up to the whole prompt's pairs.
        let mut a = StepWork::default();
        a.add_prefill(0, 60);
        a.add_prefill(60, 40);
        let mut b = StepWork::default();
        b.add_prefill(0, 100);
        assert_eq!(a.attention_pairs, b.attention_pairs);
    }

    #[test]
    fn decodes_add_per_sequence_and_per_context_token() {
        let mut w = StepWork::default();
        w.add_decode(1_000);
        w.add_decode(3_000);
        assert!((COST.cost_us(&w) - (6_500.0 + 10.0 + 400.0)).abs() < 1e-9);
    }
}
