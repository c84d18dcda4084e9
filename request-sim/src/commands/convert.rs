//! `convert`: a request log into an anonymized generic trace, with its report and analysis.

use crate::analyze::AnalyzeOptions;
use crate::cli::ConvertArgs;
use crate::report;
use crate::trace::{self, LoadOptions};
use crate::{Error, Result};

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
