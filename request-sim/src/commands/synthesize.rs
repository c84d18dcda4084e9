//! `transform --synthesize`: a new trace generated from a fit of the given one.

use super::analyze_pair;
use crate::analyze::{read_columns, Columns};
use crate::cli::{TraceArgs, TransformArgs};
use crate::config::load_options;
use crate::report;
use crate::trace::{self, LoadOptions};
use crate::{Error, Result};

/// `transform --synthesize`: fit the trace (within `--time-window`), write `--duration` of a
/// new one.
pub(super) fn synthesize(
    args: &TransformArgs,
    start_ms: Option<f64>,
    end_ms: Option<f64>,
) -> Result<u8> {
    let t = std::time::Instant::now();
    let r = &args.reshape;
    let duration = check_synthesize_args(args)?;
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

/// The flags `--synthesize` takes, checked before the trace is read: its `--duration`.
fn check_synthesize_args(args: &TransformArgs) -> Result<f64> {
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
    Ok(duration)
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
