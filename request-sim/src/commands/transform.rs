//! `transform`: a trace reshaped and written as JSONL, or an agent corpus reshaped and written
//! as a Weka directory (`--synthesize` is in [`super::synthesize`]).

use std::path::Path;

use super::analyze_pair;
use crate::analyze::{read_columns, Columns};
use crate::cli::TransformArgs;
use crate::config::{load_options, reshape_settings};
use crate::report;
use crate::trace::{self, LoadOptions};
use crate::{Error, Result};

/// `transform TRACE -o OUT`: the trace reshaped (or synthesized from a fit of it), written.
pub fn transform(args: TransformArgs) -> Result<u8> {
    let t = std::time::Instant::now();
    crate::util::refuse_input_as_output(&args.output, "-o", &args.trace, "trace")?;
    let (start_ms, end_ms) = match &args.reshape.time_window {
        Some(w) => trace::options::parse_time_window(w).map_err(Error::config)?,
        None => (None, None),
    };
    if args.synthesize {
        return super::synthesize::synthesize(&args, start_ms, end_ms);
    }
    if let Some(d) = args.duration {
        return Err(Error::config(format!(
            "--duration {d} is the length of a --synthesize trace; without --synthesize it does nothing (to keep a part of the trace, use --time-window START..END)"
        )));
    }
    let reshape = reshape_settings(&args.reshape, args.max_idle_gap, args.seed)?;
    let opts = LoadOptions {
        start_ms,
        end_ms,
        reshape,
        ..load_options(&args.format)
    };
    if trace::formats::agents::is_agent_corpus(&args.trace, opts.format) {
        return transform_corpus(&args, &opts, t);
    }
    let out = trace::load(&args.trace, &opts)?;
    write_trace(&args.output, &out)?;
    let st = &out.stats;
    eprintln!(
        "request-sim: wrote {} requests over {:.1} s to {} ({} rows read; {} rows added by --amplify, {} sampled out, {} prompts cut, {} think times capped, {} outside the time window) in {:.2} s",
        out.requests.len(),
        out.requests.last().map_or(0.0, |r| r.timestamp_ms / 1e3),
        args.output.display(),
        st.rows,
        st.amplified,
        st.sampled_out,
        st.capped_inputs,
        st.capped_gaps,
        st.outside_time_window,
        t.elapsed().as_secs_f64()
    );
    if opts.reshape.infer_sessions {
        eprintln!("request-sim: {}", infer_report(st));
    }
    if let (Some(rate), true) = (args.reshape.rate, out.sessions.any()) {
        eprintln!("request-sim: note: {}", session_rate_note(rate, &out));
    }
    if let (Some(gap), false) = (args.max_idle_gap, out.sessions.any()) {
        eprintln!(
            "request-sim: note: --max-idle-gap {gap}: the trace has no sessions, so nothing was capped (it caps the think time between a session's turns; --infer-sessions finds sessions from hash ids)"
        );
    }
    if out.block_size != trace::formats::write::read_back_block_size(&out) {
        eprintln!(
            "request-sim: note: the trace's block size is {}: read the new trace with --block-size {}",
            out.block_size, out.block_size
        );
    }
    if args.compare {
        let original = read_columns(&args.trace, &load_options(&args.format))?;
        let (aa, ab) = analyze_pair(original, Columns::from_trace(&out), &[]);
        let names = (
            args.trace.display().to_string(),
            args.output.display().to_string(),
        );
        report::print_stdout(&report::against::render_against(
            &aa,
            &ab,
            (&names.0, &names.1),
        ))?;
    }
    Ok(0)
}

/// `--retime --rate R` on a trace with sessions: R is the rate of session starts, and the
/// requests arrive faster; the rate they arrive at in the new trace, in one sentence.
fn session_rate_note(rate: f64, out: &trace::Trace) -> String {
    let first = out.requests.first().map_or(0.0, |r| r.timestamp_ms);
    let last = out.requests.last().map_or(0.0, |r| r.timestamp_ms);
    let span_s = (last - first) / 1e3;
    let per_s = if span_s > 0.0 {
        format!("{:.1} req/s", out.requests.len() as f64 / span_s)
    } else {
        "n/a req/s".to_string()
    };
    format!(
        "--rate {rate}: {rate} session starts per second (the trace has sessions; their later turns keep their gaps); requests arrive at {per_s} on average ({} requests over {span_s:.1} s)",
        out.requests.len()
    )
}

/// What `--infer-sessions` found, in one sentence (counts of the rows read, before copies).
fn infer_report(st: &trace::TraceStats) -> String {
    let mut s = format!(
        "--infer-sessions: {} sessions inferred from hash ids ({} with more than one turn; branches joined to the conversation they share a prefix with: {})",
        st.inferred_sessions, st.inferred_multi_turn, st.inferred_branches
    );
    if st.infer_had_session > 0 {
        s.push_str(&format!(
            "; {} rows already had a session and kept it (nothing inferred for them)",
            st.infer_had_session
        ));
    }
    if st.infer_without_ids > 0 {
        s.push_str(&format!(
            "; {} rows have no hash ids: each stays a request of its own",
            st.infer_without_ids
        ));
    }
    s
}

/// `transform` of an agent corpus: the replay's reshaping rules (`run::reshape_corpus`), then
/// the corpus written as a Weka directory, one file per conversation (docs/transform.md).
fn transform_corpus(args: &TransformArgs, opts: &LoadOptions, t: std::time::Instant) -> Result<u8> {
    let name = args.trace.display().to_string();
    let refuse = |what: &str| Err(Error::config(format!("{name} is an agent corpus: {what}")));
    if args.max_idle_gap.is_some() {
        return refuse("--max-idle-gap caps gaps when a corpus is laid out for a replay; give it to `replay` (the written corpus keeps the trace's gaps)");
    }
    if opts.start_ms.is_some() || opts.end_ms.is_some() || args.compare {
        return refuse("--time-window and --compare work on flat traces; --sample-sessions, --amplify, --prefix-scale, --prompt-scale and --max-input-length reshape a corpus");
    }
    let (mut corpus, format) = trace::formats::agents::load(&args.trace, opts)?
        .ok_or_else(|| Error::config(format!("{name}: not an agent corpus")))?;
    let before = (corpus.conversations.len(), corpus.requests());
    let reshaped = crate::run::reshape_corpus(&opts.reshape, false, &name, &mut corpus)?;
    let files = corpus
        .conversations
        .iter()
        .map(trace::formats::weka_write::conversation_json)
        .collect::<std::result::Result<Vec<_>, String>>()
        .map_err(|e| Error::config(format!("{name}: {e}")))?;
    crate::util::write_directory(&args.output, &args.trace, &files)?;
    eprintln!(
        "request-sim: wrote {} conversations, {} requests (read: {} conversations, {} requests of a {} corpus; {reshaped}) as a Weka directory {} (one file per conversation) in {:.2} s",
        corpus.conversations.len(),
        corpus.requests(),
        before.0,
        before.1,
        format.name(),
        args.output.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(0)
}

/// Writes a trace as JSONL to `path` (`-`: standard output); on an error, a file already at
/// `path` is left as it was.
fn write_trace(path: &Path, t: &trace::Trace) -> Result<()> {
    let mut out = crate::util::create_output(path)?;
    trace::formats::write::write_jsonl(t, &mut out)
        .map_err(|e| Error::Report(format!("cannot write {}: {e}", path.display())))?;
    out.commit()
}
