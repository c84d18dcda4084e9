//! `verify-prompts`: every built prompt re-tokenized and checked for its length and sharing.

use crate::cli::VerifyArgs;
use crate::config::load_options;
use crate::prompt;
use crate::report;
use crate::trace::{self, LoadOptions};
use crate::{Error, Result};

/// `verify-prompts TRACE --tokenizer T`: the full exactness and sharing check.
pub fn verify_prompts(args: VerifyArgs) -> Result<u8> {
    let opts = LoadOptions {
        max_requests: args.max_requests,
        ..load_options(&args.format)
    };
    let trace = trace::load(&args.trace, &opts)?;
    let t = std::time::Instant::now();
    let tok = prompt::load_tokenizer(&args.tokenizer)?;
    let vocab = prompt::Vocab::from_tokenizer(&tok)?;
    eprintln!(
        "request-sim: tokenizer loaded and {} prompt words ({}) found in {:.0} ms",
        vocab.len(),
        vocab.method(),
        t.elapsed().as_secs_f64() * 1e3
    );
    let spec = prompt::corpus_spec(
        None,
        args.prompt_corpus.as_deref(),
        &args.prompt_corpus_field,
    )
    .map_err(Error::config)?;
    let corpus = prompt::load_corpus(spec.as_ref(), Some(&tok), &vocab)?;
    let builder = prompt::PromptBuilder::with_corpus(
        std::sync::Arc::new(vocab),
        corpus,
        args.seed,
        trace.block_size,
    );
    if let Some(r) = prompt::CorpusReport::new(&builder, &trace.requests, 0) {
        eprintln!("request-sim: {}", r.line());
    }
    // Rows sent as written (messages, text_input, prompt_token_ids) have no prompt to check.
    let synthetic = trace.synthetic_requests();
    let as_written = trace.requests.len() - synthetic.len();
    if synthetic.is_empty() {
        eprintln!("request-sim: nothing to verify (n/a): all {as_written} rows of {} are sent as written (messages, text_input or prompt_token_ids), none has a prompt request-sim builds", args.trace.display());
        return Ok(0);
    }
    let rep = prompt::verify_trace(&builder, &tok, &synthetic);
    report::print_json(&rep)?;
    eprintln!(
        "request-sim: {} of {} built prompts ({:.2}%) re-tokenize to exactly their length{}; {} shared blocks compared, {} mismatches; {} branch points, {} with equal first tokens",
        rep.exact_length,
        rep.requests,
        rep.pct_exact,
        if as_written > 0 {
            format!(" ({as_written} rows sent as written not checked)")
        } else {
            String::new()
        },
        rep.shared_blocks_compared,
        rep.shared_block_mismatches,
        rep.branch_points,
        rep.first_token_collisions
    );
    Ok(if rep.ok() { 0 } else { 1 })
}
