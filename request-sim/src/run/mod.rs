//! The replay orchestrator. [`replay`] runs the phases in order; each is a function in the file
//! of its name and returns what the later ones need:
//!
//! 1. [`load`]: the trace as a stream of planned requests (this shard's share), its first
//!    requests read → `Loaded` and the `Feed` the producers take
//! 2. [`server`]: async runtime, built-in simulator, endpoint, HTTP client → `Server`
//! 3. [`prompts`]: tokenizer, prompt words, start-up check, model, chat overhead, saved
//!    prompts → `Prompts` (`calibrate`: the model lookup and the overhead; `models`:
//!    `--model-map` resolved)
//! 4. [`pipeline`]: producer threads, server-metrics scraper, record writer, run control →
//!    `Pipeline`
//! 5. [`warmup`]: keep-alive connections and the bodies due first, before the clock starts
//! 6. [`dispatch`]: the dispatcher thread hands every request over at its time → `Dispatched`
//!    (`task`: one request's life and record; `build`: trace row → request body)
//! 7. [`drain`]: requests in flight finish; the writer hands back its accumulator → `Drained`
//! 8. [`finish`]: run facts, summary, validity, files, console → [`RunOutcome`]
//!
//! Everything the run needs is set up (and can fail) before the first request is sent; after
//! that every dispatched request ends as exactly one record.
//!
//! Every phase prints its lines and times itself with `note` (its own file, so that no phase
//! imports from this one).

use std::time::Instant;

use crate::config::ReplayConfig;
use crate::stats::StartupTimes;
use crate::Result;

mod build;
mod calibrate;
mod control;
// getrusage (the client's CPU time) is a libc call no safe crate wraps with its split.
#[allow(unsafe_code)]
mod cpu;
mod dispatch;
mod drain;
mod finish;
mod load;
mod models;
mod note;
mod pipeline;
mod prompts;
mod reset;
mod reshape;
mod save;
mod server;
mod task;
mod warmup;

pub use finish::RunOutcome;
pub use load::{load_trace, DEMO_TRACE};
pub use reset::reset_prefix_caches;
pub use reshape::{reshape_corpus, Reshaped};

use note::{ms_since, note};

/// Run a replay to the end and write its records and summary.
pub fn replay(cfg: ReplayConfig) -> Result<RunOutcome> {
    let t_start = Instant::now();
    let mut startup = StartupTimes::default();
    for n in &cfg.notes {
        note(format!("note: {n}"));
    }
    // The tokenizer (hundreds of ms for a real model's) loads while the trace is read.
    let tokenizer = prompts::TokenizerJob::start(&cfg);
    let (trace, feed) = load::run(&cfg)?;
    startup.trace_load_ms = ms_since(t_start);
    let mut server = server::run(&cfg, &mut startup)?;
    let prompts = prompts::run(&cfg, &trace, &server, tokenizer, &mut startup)?;
    let inputs = inputs_sink(&cfg)?;
    let mut pipeline = pipeline::run(&cfg, &trace, feed, &server, &prompts, inputs.clone())?;
    // `--metrics-port`: served until the run is over and the linger time has passed.
    let exporter = pipeline.exporter.take();
    warmup::run(&cfg, &trace, &mut server, &pipeline, &mut startup)?;
    let dispatched = dispatch::run(&cfg, &server, &pipeline, t_start, &mut startup)?;
    let drained = drain::run(&cfg, &mut server, pipeline, dispatched)?;
    let outcome = finish::run(&cfg, &trace, &server, &prompts, drained, startup)?;
    if let (Some(sink), Some(dir)) = (&inputs, &cfg.output.result_dir) {
        let path = dir.join(crate::report::export::inputs::INPUTS_FILE);
        let n = sink.finish(&path)?;
        note(format!(
            "inputs.json: the bodies of {n} requests in {}",
            path.display()
        ));
    }
    if let Some(e) = exporter {
        if !e.linger().is_zero() {
            note(format!(
                "live metrics: the final values stay up for {:.1} s (--metrics-linger)",
                e.linger().as_secs_f64()
            ));
        }
        e.finish();
    }
    Ok(outcome)
}

/// `--export aiperf` with `--result-dir`: the sink that keeps every body built for AIPerf's
/// `inputs.json`.
fn inputs_sink(
    cfg: &ReplayConfig,
) -> Result<Option<std::sync::Arc<crate::report::export::inputs::InputsSink>>> {
    use crate::report::export::{inputs, ExportKind};
    match &cfg.output.result_dir {
        Some(dir) if cfg.output.exports.contains(&ExportKind::Aiperf) => Ok(Some(
            std::sync::Arc::new(inputs::InputsSink::create(&dir.join(inputs::INPUTS_FILE))?),
        )),
        _ => Ok(None),
    }
}
