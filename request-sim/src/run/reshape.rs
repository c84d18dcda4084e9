//! The trace rules an agent corpus takes before it is laid out (`trace::pipeline::plan`), in
//! the flat trace's order: `--sample-sessions` (whole conversations), `--amplify`,
//! `--prefix-scale` and `--prompt-scale`, then `--max-input-length` on the final prompts; each
//! said at start-up and counted in the layout's facts. The others (`--retime`,
//! `--rate-series`) are refused.

use super::note::note;
use crate::config::ReplayConfig;
use crate::trace::pipeline::plan::{self, PlanFacts, Scales};
use crate::trace::{Corpus, Reshape};
use crate::{Error, Result};

/// What the rules did, for the layout's facts.
#[derive(Debug, Default)]
pub struct Reshaped {
    sample: Option<f64>,
    sampled_out: usize,
    amplify: Option<f64>,
    amplified: usize,
    scales: Option<(Option<f64>, Option<f64>)>,
    scaled: usize,
    max_input_length: Option<u32>,
    capped: usize,
}

impl Reshaped {
    /// Puts the counts into the layout's facts.
    pub(super) fn fill(&self, facts: &mut PlanFacts) {
        (facts.sample_sessions, facts.sampled_out) = (self.sample, self.sampled_out);
        facts.corpus_conversations += self.sampled_out;
        facts.corpus_conversations -= self.amplified;
        (facts.amplify, facts.amplified) = (self.amplify, self.amplified);
        if let Some((prefix, prompt)) = self.scales {
            (facts.prefix_scale, facts.prompt_scale) = (prefix, prompt);
            facts.scaled_prompts = self.scaled;
        }
        (facts.max_input_length, facts.capped_inputs) = (self.max_input_length, self.capped);
    }
}

impl std::fmt::Display for Reshaped {
    /// What the rules did, in words (`transform`'s line).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} conversations sampled out, {} added by --amplify, {} prompts scaled, {} prompts cut to --max-input-length",
            self.sampled_out, self.amplified, self.scaled, self.capped
        )
    }
}

/// Applies the run's trace rules to agent corpus `name` (see the module).
pub(super) fn agent_corpus(
    cfg: &ReplayConfig,
    name: &str,
    corpus: &mut Corpus,
) -> Result<Reshaped> {
    reshape_corpus(
        &cfg.trace.load.reshape,
        cfg.trace.agents.share_system_prefix,
        name,
        corpus,
    )
}

/// Applies the reshaping rules `r` to agent corpus `name`, in the replay's order (see the
/// module); `share_system_prefix`: `--share-system-prefix`, which the scales refuse. Also
/// what `transform` writes an agent corpus with.
pub fn reshape_corpus(
    r: &Reshape,
    share_system_prefix: bool,
    name: &str,
    corpus: &mut Corpus,
) -> Result<Reshaped> {
    let rest = Reshape {
        max_idle_gap_ms: None,
        max_input_length: None,
        sample_sessions: None,
        prefix_scale: None,
        prompt_scale: None,
        amplify: None,
        ..r.clone()
    };
    if !rest.is_identity() {
        return Err(Error::config(format!(
            "{name} is an agent corpus: --retime and --rate-series reshape traces, not agent corpora (--max-idle-gap, --max-input-length, --sample-sessions, --amplify, --prefix-scale, --prompt-scale, --users and --session-rate do)"
        )));
    }
    let mut out = Reshaped {
        sample: r.sample_sessions,
        amplify: r.amplify,
        max_input_length: r.max_input_length,
        ..Reshaped::default()
    };
    if let Some(p) = r.sample_sessions {
        out.sampled_out = plan::sample_conversations(corpus, p, r.seed)
            .map_err(|e| Error::config(format!("agent corpus {name}: {e}")))?;
        note(format!(
            "--sample-sessions {p}: {} of {name}'s {} conversations kept",
            corpus.conversations.len(),
            corpus.conversations.len() + out.sampled_out
        ));
    }
    if let Some(a) = r.amplify {
        let before = corpus.conversations.len();
        out.amplified = plan::amplify_conversations(corpus, a, r.seed)
            .map_err(|e| Error::config(format!("agent corpus {name}: {e}")))?;
        note(format!(
            "--amplify {a}: {name}'s {before} conversations became {} (copy k of <id> is <id>@k, with its own hash ids)",
            corpus.conversations.len()
        ));
    }
    if r.prefix_scale.is_some() || r.prompt_scale.is_some() {
        if share_system_prefix {
            return Err(Error::config(
                "--share-system-prefix keys the tools + system blocks by their declared sizes, which --prefix-scale and --prompt-scale change: use one or the other",
            ));
        }
        let s = Scales {
            prefix: r.prefix_scale.unwrap_or(1.0),
            prompt: r.prompt_scale.unwrap_or(1.0),
            seed: r.seed,
        };
        let (scaled, messages) = plan::scale_prompts(corpus, s);
        out.scales = Some((r.prefix_scale, r.prompt_scale));
        out.scaled = scaled;
        note(format!(
            "--prefix-scale {} --prompt-scale {}: {scaled} prompts of {name} scaled (each conversation still a prefix chain){}",
            s.prefix,
            s.prompt,
            as_written(messages)
        ));
    }
    if let Some(max) = r.max_input_length {
        let c = plan::cap_inputs(corpus, max);
        out.capped = c.cut;
        note(format!(
            "--max-input-length {max}: {} prompts of {name} cut to {max} tokens (each conversation still a prefix chain){}",
            c.cut,
            as_written(c.messages_over)
        ));
    }
    Ok(out)
}

/// The note's words for `n` requests given as messages, which the rules leave as written.
fn as_written(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!("; {n} requests given as messages are sent as written"),
    }
}
