//! The subcommands, as functions returning the process exit code.

use std::path::Path;

use crate::analyze::{analyze_columns, read_columns, AnalyzeOptions, Columns, RoutingOptions};
use crate::cli::{
    AnalyzeArgs, CompareArgs, ConvertArgs, ReplayArgs, ReportArgs, TraceArgs, TransformArgs,
    VerifyArgs,
};
use crate::config::{load_options, report_config, reshape_settings, ReplayConfig};
use crate::prompt;
use crate::report;
use crate::stats::{self, ReportConfig, Summary, DEFAULT_PERCENTILES};
use crate::trace::{self, LoadOptions};
use crate::{Error, Result};

/// `replay` (`--repeat N`: a repeat set, [`crate::repeat`]).
pub fn replay(args: ReplayArgs) -> Result<u8> {
    if let Some(n) = crate::repeat::count(&args)? {
        return crate::repeat::replay(args, n);
    }
    run_replay(ReplayConfig::from_args(args)?)
}

/// Run a replay with validated settings (`replay` and the `compat` front ends): its exit code.
pub fn run_replay(cfg: ReplayConfig) -> Result<u8> {
    let out = crate::run::replay(cfg)?;
    Ok(out.exit_code as u8)
}

/// `analyze TRACE`.
pub fn analyze(args: AnalyzeArgs) -> Result<u8> {
    if let Some(b) = &args.against {
        return analyze_against(&args, b);
    }
    let t = std::time::Instant::now();
    if let Some((corpus, format)) =
        trace::formats::agents::load(&args.trace, &load_options(&args.format))?
    {
        for n in &corpus.notes {
            eprintln!("request-sim: {}: {n}", args.trace.display());
        }
        return analyze_agents(&args, &corpus, format, t);
    }
    // Streamed: a week-long trace of millions of rows is analysed in the memory of its columns.
    let columns = read_columns(&args.trace, &load_options(&args.format))?;
    let aopts = AnalyzeOptions {
        cache_sizes_tokens: args.cache_sizes.clone(),
        routing: args.instances.map(|n| RoutingOptions {
            instances: n as usize,
            policies: args.routing.clone(),
            capacity_tokens: args
                .cache_tokens
                .unwrap_or_else(default_instance_cache_tokens),
        }),
        ..AnalyzeOptions::default()
    };
    let analysis = analyze_columns(columns, &aopts);
    if args.json {
        report::print_json(&analysis)?;
    } else {
        report::print_stdout(&report::render_analysis(&analysis))?;
        eprintln!(
            "request-sim: analyzed {} in {:.2} s",
            args.trace.display(),
            t.elapsed().as_secs_f64()
        );
    }
    if let Some(dir) = &args.plot_dir {
        let files = report::plots::write_analysis_plots(dir, &analysis)?;
        eprintln!(
            "request-sim: wrote {} plot files to {}",
            files.len(),
            dir.display()
        );
    }
    Ok(0)
}

/// `analyze` of an agent corpus (Weka, TraceLab, Dynamo, `dag_jsonl`).
fn analyze_agents(
    args: &AnalyzeArgs,
    corpus: &trace::model::Corpus,
    format: trace::TraceFormat,
    t: std::time::Instant,
) -> Result<u8> {
    use crate::analyze::agents::{analyze_agents, AgentAnalyzeOptions};
    let analysis = analyze_agents(
        corpus,
        &AgentAnalyzeOptions {
            max_idle_gap_ms: args.max_idle_gap.map(|s| s * 1e3),
            users: args.users.map(|u| u as usize),
            ..AgentAnalyzeOptions::default()
        },
    );
    if args.json {
        report::print_json(&analysis)?;
    } else {
        report::print_stdout(&report::analysis::render_agent_analysis(&analysis, format))?;
        eprintln!(
            "request-sim: analyzed {} in {:.2} s",
            args.trace.display(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(0)
}

/// `analyze A --against B`: both traces' analyses side by side (B's LRU sweep at A's sizes).
fn analyze_against(args: &AnalyzeArgs, b_path: &Path) -> Result<u8> {
    let a = read_columns(&args.trace, &load_options(&args.format))?;
    let b_opts = LoadOptions {
        block_size: args.format.block_size,
        skip_invalid: args.format.skip_invalid,
        ..LoadOptions::default()
    };
    let b = read_columns(b_path, &b_opts)?;
    let (aa, ab) = analyze_pair(a, b, &args.cache_sizes);
    if args.json {
        report::print_json(&serde_json::json!({ "a": aa, "b": ab }))?;
    } else {
        let names = (
            args.trace.display().to_string(),
            b_path.display().to_string(),
        );
        report::print_stdout(&report::against::render_against(
            &aa,
            &ab,
            (&names.0, &names.1),
        ))?;
    }
    Ok(0)
}

/// Analyses of two traces with the same LRU sizes (`sizes`, else A's default sweep).
fn analyze_pair(
    a: Columns,
    b: Columns,
    sizes: &[u64],
) -> (crate::analyze::Analysis, crate::analyze::Analysis) {
    let mut opts = AnalyzeOptions {
        cache_sizes_tokens: sizes.to_vec(),
        ..AnalyzeOptions::default()
    };
    let aa = analyze_columns(a, &opts);
    opts.cache_sizes_tokens = aa.lru_sweep.iter().map(|p| p.capacity_tokens).collect();
    let ab = analyze_columns(b, &opts);
    (aa, ab)
}

/// `transform TRACE -o OUT`: the trace reshaped (or synthesized from a fit of it), written.
pub fn transform(args: TransformArgs) -> Result<u8> {
    let t = std::time::Instant::now();
    crate::util::refuse_input_as_output(&args.output, "-o", &args.trace, "trace")?;
    let (start_ms, end_ms) = match &args.reshape.time_window {
        Some(w) => trace::options::parse_time_window(w).map_err(Error::config)?,
        None => (None, None),
    };
    if args.synthesize {
        return synthesize(&args, start_ms, end_ms);
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
pub(crate) fn infer_report(st: &trace::TraceStats) -> String {
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

/// `transform --synthesize`: fit the trace (within `--time-window`), write `--duration` of a
/// new one.
pub(crate) fn synthesize(
    args: &TransformArgs,
    start_ms: Option<f64>,
    end_ms: Option<f64>,
) -> Result<u8> {
    let t = std::time::Instant::now();
    let r = &args.reshape;
    let other = [
        (r.amplify.is_some(), "--amplify"),
        (r.prefix_scale.is_some(), "--prefix-scale"),
        (r.prompt_scale.is_some(), "--prompt-scale"),
        (r.max_input_length.is_some(), "--max-input-length"),
        (r.retime.is_some(), "--retime"),
        (r.burstiness.is_some(), "--burstiness"),
        (r.rate_series.is_some(), "--rate-series"),
        (r.sample_sessions.is_some(), "--sample-sessions"),
        (args.max_idle_gap.is_some(), "--max-idle-gap"),
        (r.infer_sessions, "--infer-sessions"),
    ];
    if let Some((_, flag)) = other.iter().find(|(on, _)| *on) {
        return Err(Error::config(format!(
            "--synthesize takes --duration, --rate, --seed and --time-window (the part of the trace fitted); {flag} reshapes an existing trace: transform it first, then synthesize from the result"
        )));
    }
    if args.compare && args.output.as_os_str() == "-" {
        return Err(Error::config(
            "--synthesize --compare reads the new trace back: give -o a file, not `-`",
        ));
    }
    let duration = args.duration.unwrap_or(0.0);
    if !(duration.is_finite() && duration > 0.0) {
        return Err(Error::config(format!(
            "--duration must be a number of seconds > 0, got {duration}"
        )));
    }
    if let Some(rate) = r.rate {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(Error::config(format!(
                "--rate must be a number of requests per second > 0, got {rate}"
            )));
        }
    }
    let opts = LoadOptions {
        start_ms,
        end_ms,
        ..load_options(&args.format)
    };
    let trace = trace::load(&args.trace, &opts)?;
    let fit = trace::pipeline::synth::Fit::of(&trace);
    let path = &args.output;
    let io = |source| Error::Io {
        what: format!("cannot write {}", path.display()),
        source,
    };
    let mut out = crate::util::create_output(path)?;
    let n = fit
        .generate(duration, r.rate, args.seed, &mut out)
        .map_err(io)?;
    out.commit()?;
    let shared = fit.templates.iter().filter(|t| t.shared > 0).count();
    eprintln!(
        "request-sim: fitted {} requests over {:.1} s ({:.3} req/s, burstiness {:.2} around the rate curve, {} of them reusing an earlier prefix); wrote {n} requests over {duration} s{} to {} in {:.2} s",
        trace.requests.len(),
        fit.span_s,
        fit.mean_rate(),
        fit.burstiness,
        shared,
        r.rate.map_or(String::new(), |r| format!(" at {r} req/s")),
        path.display(),
        t.elapsed().as_secs_f64()
    );
    if fit.block_size != 512 {
        eprintln!(
            "request-sim: note: the trace's block size is {}: read the new trace with --block-size {}",
            fit.block_size, fit.block_size
        );
    }
    if args.compare {
        compare_synthesized(args, &trace, fit.block_size)?;
    }
    Ok(0)
}

/// `--synthesize --compare`: the analysis of the part of the trace fitted and of the new trace,
/// side by side.
fn compare_synthesized(
    args: &TransformArgs,
    fitted: &trace::Trace,
    block_size: usize,
) -> Result<()> {
    let written = TraceArgs {
        block_size: Some(block_size),
        ..TraceArgs::default()
    };
    let new = read_columns(&args.output, &load_options(&written))?;
    let (aa, ab) = analyze_pair(Columns::from_trace(fitted), new, &[]);
    let original = match &args.reshape.time_window {
        Some(w) => format!("{} (fitted, --time-window {w})", args.trace.display()),
        None => args.trace.display().to_string(),
    };
    let synthesized = args.output.display().to_string();
    report::print_stdout(&report::against::render_against(
        &aa,
        &ab,
        (&original, &synthesized),
    ))
}

/// Writes a trace as JSONL to `path` (`-`: standard output); on an error, a file already at
/// `path` is left as it was.
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

pub(crate) fn write_trace(path: &Path, t: &trace::Trace) -> Result<()> {
    let mut out = crate::util::create_output(path)?;
    trace::formats::write::write_jsonl(t, &mut out)
        .map_err(|e| Error::Report(format!("cannot write {}: {e}", path.display())))?;
    out.commit()
}

/// One instance's prefix cache when `analyze --instances` is not given `--cache-tokens`: the
/// KV cache of llm-sim's `qwen3-8b-h100` preset (an 8B model on one H100).
#[cfg(feature = "builtin-sim")]
fn default_instance_cache_tokens() -> u64 {
    llm_sim::SimConfig::preset("qwen3-8b-h100")
        .map(|c| u64::from(c.num_gpu_blocks) * u64::from(c.block_size))
        .unwrap_or(376_000)
}

/// Built without llm-sim: the same preset's KV cache (23,500 blocks of 16 tokens; llm-sim's
/// preset tests check the figure).
#[cfg(not(feature = "builtin-sim"))]
fn default_instance_cache_tokens() -> u64 {
    376_000
}

/// `report RECORDS.jsonl`: recompute the summary from saved records.
pub fn report(args: ReportArgs) -> Result<u8> {
    let cfg = report_config(&args.report, &DEFAULT_PERCENTILES)?;
    if crate::record::merge::is_multi(&args.records) || args.expected_requests.is_some() {
        return report_merged(&args, &cfg);
    }
    let records = &args.records[0];
    let info = report::find_run_info(records);
    let summary = stats::report_from_records(records, &cfg, info)?;
    if args.json {
        report::print_json(&summary)?;
    } else {
        report::print_stdout(&format!("{}\n", report::render_console(&summary)))?;
    }
    if let Some(dir) = &args.report.result_dir {
        let files =
            report::write_result_dir_exporting(dir, &summary, records, &args.report.export)?;
        eprintln!(
            "request-sim: wrote {} files to {}",
            files.len(),
            dir.display()
        );
    }
    Ok(0)
}

/// Several shards' records merged into one run (exit code 1 when the union is not every
/// index exactly once).
fn merged_summary(
    paths: &[std::path::PathBuf],
    expected: Option<usize>,
    cfg: &ReportConfig,
) -> Result<(Summary, stats::merge::Merged)> {
    let files = crate::record::merge::expand_inputs(paths)?;
    let merged = stats::merge::merge_files(&files, expected, cfg)?;
    if merged.records.is_empty() {
        let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        return Err(stats::no_records(&names.join(", "), &merged.stats));
    }
    let mut info = stats::RunInfo::new();
    info.outcome.scheduled = merged.union.expected.max(merged.records.len());
    info.outcome.never_sent = merged
        .records
        .iter()
        .filter(|r| r.sent_ms.is_none())
        .count();
    info.outcome.dry_run = !merged.records.is_empty()
        && merged
            .records
            .iter()
            .all(|r| r.status == crate::record::Status::DryRun);
    let mut summary = stats::summarize_records(&merged.records, &merged.stats, cfg, Some(info))?;
    if !merged.union.complete() {
        summary.warnings.push(format!(
            "the merged records are not every index 0..{} exactly once: {} missing, {} duplicated",
            merged.union.expected,
            merged.union.missing.len(),
            merged.union.duplicated.len()
        ));
    }
    Ok((summary, merged))
}

fn report_merged(args: &ReportArgs, cfg: &ReportConfig) -> Result<u8> {
    let (summary, merged) = merged_summary(&args.records, args.expected_requests, cfg)?;
    let table = report::merge::render_merge(&merged);
    if args.json {
        report::print_json(&summary)?;
        eprint!("{table}");
    } else {
        report::print_stdout(&format!("{}\n", report::render_console(&summary)))?;
        report::print_stdout(&table)?;
    }
    if let Some(dir) = &args.report.result_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        let path = dir.join("records.jsonl");
        crate::record::write_records(&path, &merged.records)?;
        let files = report::write_result_dir_exporting(dir, &summary, &path, &args.report.export)?;
        eprintln!(
            "request-sim: wrote {} files and the merged records.jsonl to {}",
            files.len(),
            dir.display()
        );
    }
    Ok(if merged.union.complete() { 0 } else { 1 })
}

/// Exit status of `compare` when a `--fail-if-worse` gate trips.
const EXIT_WORSE: u8 = 7;

/// A side of `compare`: a repeat set (a directory with `repeats.json`, or that file), a
/// directory of shard records, a records JSONL, or a summary JSON (with its records when they
/// are found at its `records_path`). Records are kept for the bootstrap, restricted to the
/// summary's measure window when it had one.
fn load_side(path: &Path) -> Result<stats::compare::Side> {
    use stats::repeats::{RepeatSet, REPEATS_JSON};
    let name = path.display().to_string();
    let set_file = if path.is_dir() {
        Some(path.join(REPEATS_JSON)).filter(|p| p.is_file())
    } else {
        path.file_name()
            .is_some_and(|f| f == REPEATS_JSON)
            .then(|| path.to_path_buf())
    };
    if let Some(f) = set_file {
        let set = RepeatSet::read(&f)?;
        let first = set
            .repeats
            .first()
            .ok_or_else(|| Error::report(format!("{}: a repeat set of no repeats", f.display())))?;
        let summary = report::read_summary(Path::new(&first.summary))?;
        let mut records = Some(Vec::new());
        for r in &set.repeats {
            match crate::record::read_records(Path::new(&r.records)) {
                Ok((rs, _)) => {
                    if let Some(v) = records.as_mut() {
                        v.extend(rs);
                    }
                }
                Err(_) => records = None,
            }
        }
        return Ok(stats::compare::Side {
            name,
            summary,
            repeats: Some(set),
            records,
        });
    }
    let (summary, records) = if path.is_dir() {
        let cfg = ReportConfig::default();
        let (s, m) = merged_summary(&[path.to_path_buf()], None, &cfg)?;
        (s, Some(m.records))
    } else {
        let as_records = || -> Result<(Summary, Option<Vec<crate::record::Record>>)> {
            let info = report::find_run_info(path);
            let s = stats::report_from_records(path, &ReportConfig::default(), info)?;
            let (rs, _) = crate::record::read_records(path)?;
            Ok((s, Some(rs)))
        };
        if path.extension().is_some_and(|e| e == "jsonl") {
            as_records()?
        } else {
            match report::read_summary(path) {
                Ok(s) => {
                    let rs = s
                        .run
                        .records_path
                        .as_deref()
                        .map(Path::new)
                        .filter(|p| p.is_file())
                        .and_then(|p| crate::record::read_records(p).ok())
                        .map(|(rs, _)| rs);
                    (s, rs)
                }
                Err(e) => as_records().map_err(|e2| {
                    Error::report(format!(
                        "{}: neither a summary ({e:#}) nor records ({e2})",
                        path.display()
                    ))
                })?,
            }
        }
    };
    // The records the summary's statistics cover.
    let records = match (&summary.measure_window, records) {
        (Some(w), Some(rs)) => {
            let end = w.end_s.map_or(f64::INFINITY, |e| e * 1e3);
            Some(
                rs.into_iter()
                    .filter(|r| stats::window::inside(r, w.start_s * 1e3, end))
                    .collect(),
            )
        }
        (_, rs) => rs,
    };
    Ok(stats::compare::Side {
        name,
        summary,
        repeats: None,
        records,
    })
}

/// `compare A B`: the values side by side (single runs), the verdicts, and the exit status of
/// `--fail-if-worse` (7 when a gate trips, 1 when one cannot be decided).
pub fn compare(args: CompareArgs) -> Result<u8> {
    let a = load_side(&args.a)?;
    let b = load_side(&args.b)?;
    let c = stats::compare::compare(&a, &b).map_err(Error::report)?;
    if args.json {
        report::print_json(&c)?;
    } else {
        let mut text = String::new();
        if a.repeats.is_none() && b.repeats.is_none() {
            text.push_str(&report::render_compare(&a.summary, &b.summary));
            text.push('\n');
        } else {
            let sets: Vec<&str> = [("A", &a), ("B", &b)]
                .iter()
                .filter(|(_, s)| s.repeats.is_some())
                .map(|(n, _)| *n)
                .collect();
            text.push_str(&format!(
                "No side-by-side table of run values: {} a repeat set, whose values are one per repeat, not one run's (each repeat's summary is in its directory, listed in repeats.json). The table below gives each headline metric's mean over the repeats.\n\n",
                if sets.len() == 2 { "A and B are each".to_string() } else { format!("{} is", sets[0]) }
            ));
        }
        text.push_str(&report::compare::render_verdicts(&c));
        report::print_stdout(&format!("{text}\n"))?;
    }
    if let Some(path) = &args.html {
        report::html::write_compare_html(path, &a.name, &b.name, &c)?;
        eprintln!("request-sim: wrote {}", path.display());
    }
    let mut code = 0;
    for gate in &args.fail_if_worse {
        match gate.check(&c) {
            Ok(Some(why)) => {
                eprintln!(
                    "request-sim: exit status {EXIT_WORSE}: {why} (--fail-if-worse {}:{})",
                    gate.key, gate.pct
                );
                code = EXIT_WORSE;
            }
            Ok(None) => {}
            Err(e) => return Err(Error::report(e)),
        }
    }
    Ok(code)
}

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

/// `convert LOG -o TRACE`: a request log into an anonymized trace, the report, and the
/// `analyze` of the result.
pub fn convert(args: ConvertArgs) -> Result<u8> {
    use crate::convert::{self, ConvertOptions, Counter};
    use crate::trace::formats::log::{pointer, LogFields};
    let t = std::time::Instant::now();
    let p = |f: &Option<String>| f.as_deref().map(pointer);
    let opts = ConvertOptions {
        input: args.log.clone(),
        output: args.output.clone(),
        shape: args.log_format,
        fields: LogFields {
            time: p(&args.time_field),
            messages: p(&args.messages_field),
            output: p(&args.output_field),
            session: p(&args.session_field),
            tools: p(&args.tools_field),
        },
        time_format: args.time_format,
        block_size: args.block_size,
        salt: args.salt.clone(),
        keep_text: args.keep_text.clone(),
        forget_after_ms: match args.forget_after {
            Some(s) if !(s.is_finite() && s > 0.0) => {
                return Err(Error::config(format!(
                    "--forget-after must be a number of seconds > 0, got {s}"
                )))
            }
            s => s.map(|s| s * 1e3),
        },
        reorder_window_ms: match args.reorder_window {
            s if s.is_finite() && s >= 0.0 => s * 1e3,
            s => {
                return Err(Error::config(format!(
                    "--reorder-window must be a number of seconds >= 0, got {s}"
                )))
            }
        },
    };
    // Before the tokenizer loads and anything is read: `-o LOG` would destroy the log.
    convert::check_paths(&opts)?;
    let counter = match (&args.tokenizer, &args.endpoint) {
        (Some(tok), _) => Counter::local(tok, args.tokenizer_config.as_deref())?,
        (None, Some(ep)) => Counter::server(ep, args.model.clone())?,
        (None, None) => return Err(Error::config("convert needs --tokenizer or --endpoint")),
    };
    let (rep, stopped) = convert::convert(&opts, &counter).inspect_err(|_| {
        eprintln!("request-sim: convert: {}", nothing_written(&opts));
    })?;
    let analysis = if args.no_analyze {
        None
    } else {
        let lopts = LoadOptions {
            format: Some(trace::formats::write::written_format()),
            block_size: Some(args.block_size),
            ..LoadOptions::default()
        };
        let tr = trace::load(&args.output, &lopts)?;
        Some(crate::analyze::analyze(&tr, &AnalyzeOptions::default()))
    };
    if args.json {
        report::print_json(&serde_json::json!({"convert": rep, "analysis": analysis}))?;
    } else {
        report::print_stdout(&convert::render_report(&rep))?;
        if let Some(a) = &analysis {
            report::print_stdout(&report::render_analysis(a))?;
        }
        eprintln!(
            "request-sim: converted {} requests of {} in {:.2} s",
            rep.converted,
            args.log.display(),
            t.elapsed().as_secs_f64()
        );
    }
    match stopped {
        None => Ok(0),
        Some(e) => {
            eprintln!(
                "request-sim: convert: the log could not be read to its end: the {} requests converted from the lines before the error are written to {}{}; the rest of the log is not converted",
                rep.converted,
                args.output.display(),
                args.keep_text
                    .as_ref()
                    .map_or(String::new(), |k| format!(" (and {})", k.display()))
            );
            Err(e.into())
        }
    }
}

/// What a failed conversion left: no output written, files already at the output paths as
/// they were.
fn nothing_written(opts: &crate::convert::ConvertOptions) -> String {
    let paths = std::iter::once(&opts.output).chain(opts.keep_text.as_ref());
    let each: Vec<String> = paths
        .map(|p| {
            if p.exists() {
                format!("{} is left as it was", p.display())
            } else {
                format!("{} is not created", p.display())
            }
        })
        .collect();
    format!("nothing written: {}", each.join(", "))
}
