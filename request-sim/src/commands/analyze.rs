//! `analyze`: a trace's analysis (flat traces streamed into columns, agent corpora as session
//! trees), or two traces side by side with `--against`.

use std::path::Path;

use super::analyze_pair;
use crate::analyze::{analyze_columns, read_columns, AnalyzeOptions, RoutingOptions};
use crate::cli::AnalyzeArgs;
use crate::config::load_options;
use crate::report;
use crate::trace::{self, LoadOptions};
use crate::Result;

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
