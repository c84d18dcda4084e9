//! `request-sim sweep` from start to end ([`sweep`]): the flags checked, the trace slice's rate
//! measured, the points run (a `--users` list, `--scale-factors`, or the capacity search), and
//! the chart, `report.html` and the table at the end.

use std::path::Path;

use super::answer::carried;
use super::args::{check_args, sweep_dir, DEFAULT_POINT_REQUESTS, DEFAULT_POINT_SECS};
use super::point::{watch_interrupts, Sweep};
use super::result::{SweepPoint, SweepResult};
use super::search::{Search, SearchInfo};
use super::table::{render_table, write_html};
use crate::cli::SweepArgs;
use crate::config::ReplayConfig;
use crate::{Error, Result};

/// The trace slice's request rate at scale 1 (requests over the span of their timestamps).
fn trace_rate(cfg: &ReplayConfig) -> Result<f64> {
    // An agent corpus has no rate of its own: its load is closed-loop (users, arrivals).
    if let crate::config::TraceSource::File(p) = &cfg.trace.source {
        if crate::trace::formats::agents::is_agent_corpus(p, cfg.trace.load.format) {
            return Ok(0.0);
        }
    }
    let t = crate::run::load_trace(cfg)?;
    let span_s = match (t.requests.first(), t.requests.last()) {
        (Some(a), Some(b)) => (b.timestamp_ms - a.timestamp_ms) / 1e3,
        _ => 0.0,
    };
    Ok(if span_s > 0.0 {
        t.requests.len() as f64 / span_s
    } else {
        0.0
    })
}

/// An agent corpus's conversations and requests (`None` for a trace read row by row).
fn corpus_size(cfg: &ReplayConfig) -> Result<Option<(usize, usize)>> {
    let crate::config::TraceSource::File(p) = &cfg.trace.source else {
        return Ok(None);
    };
    Ok(crate::trace::formats::agents::load(p, &cfg.trace.load)?
        .map(|(corpus, _)| (corpus.conversations.len(), corpus.requests())))
}

/// Run the sweep; returns the process exit code (130 when interrupted). With
/// `--scale-factors`, each of them in order; without, the capacity search
/// ([`Search`](super::Search)).
pub fn sweep(args: SweepArgs) -> Result<u8> {
    let start = check_args(&args)?;
    let dir = sweep_dir(&args);
    let mut base = args.replay.clone();
    let users_sweep = base.trace.users.len() > 1;
    // A `--users` point with neither limit given replays the corpus once (more passes when
    // there are more users than conversations, so each user has one): its own length, not
    // 2,000 requests of repeated conversations for 300 s.
    let corpus_once =
        users_sweep && base.trace.max_requests.is_none() && base.schedule.time_in_secs.is_none();
    // Every point is bounded in requests and in time; the request limit is part of the slice
    // (the offered rate is measured on it), the time limit is set per point.
    if base.trace.max_requests.is_none() && !corpus_once {
        base.trace.max_requests = Some(DEFAULT_POINT_REQUESTS);
        eprintln!(
            "request-sim: sweep: every point replays at most {DEFAULT_POINT_REQUESTS} requests (--max-requests to change)"
        );
    }
    let mut probe_args = base.clone();
    if probe_args.trace.users.len() > 1 {
        probe_args.trace.users.truncate(1);
    }
    let probe = ReplayConfig::from_args(probe_args)?;
    let slo_words =
        (!probe.output.report.slo.is_empty()).then(|| probe.output.report.slo.describe());
    let rate = trace_rate(&probe)?;
    let corpus = if corpus_once {
        corpus_size(&probe)?
    } else {
        None
    };
    if let Some((c, r)) = corpus {
        eprintln!(
            "request-sim: sweep: every point replays the corpus once ({c} conversations, {r} requests; repeated as needed to give each user a conversation; --time-in-secs or --max-requests to change)"
        );
    }
    if base.schedule.time_in_secs.is_none() {
        eprintln!(
            "request-sim: sweep: every point stops sending after {DEFAULT_POINT_SECS:.0} s at most (--time-in-secs to change)"
        );
    }
    // Made only once the flags, the settings and the trace passed their checks: a refused
    // sweep leaves no empty directory behind.
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
    let sw = Sweep {
        rate,
        dir: dir.clone(),
        base,
        stop: watch_interrupts(),
        slo: slo_words.clone(),
        target: args.target,
        corpus,
        gpus: args.gpus,
    };
    let mut result = SweepResult {
        slo: slo_words,
        target: args.target,
        ..SweepResult::default()
    };
    let users = args.replay.trace.users.clone();
    if users.len() > 1 {
        let n = users.len();
        for (k, &u) in users.iter().enumerate() {
            if sw.stopped() {
                result.interrupted = true;
                break;
            }
            let (p, interrupted) = sw.point_with(k, 1.0, Some(u), &format!("/{n}"))?;
            result.points.push(p);
            result.interrupted = interrupted;
            sw.save(&mut result)?;
            if interrupted {
                break;
            }
        }
    } else if args.scale_factors.is_empty() {
        run_search(&sw, &args, start, &mut result)?;
    } else {
        let n = args.scale_factors.len();
        for (k, &f) in args.scale_factors.iter().enumerate() {
            if sw.stopped() {
                result.interrupted = true;
                break;
            }
            let (p, interrupted) = sw.point(k, f, &format!("/{n}"))?;
            result.points.push(p);
            result.interrupted = interrupted;
            sw.save(&mut result)?;
            if interrupted {
                break;
            }
        }
    }
    if result.interrupted {
        eprintln!("request-sim: {}", interrupted_words(&result.points));
    }
    sw.save(&mut result)?;
    finish(&dir, &result, &probe)
}

/// What an interrupted sweep keeps: the whole points, and the point Ctrl-C cut short, apart.
fn interrupted_words(points: &[SweepPoint]) -> String {
    let cut: Vec<String> = points
        .iter()
        .filter(|p| p.interrupted)
        .map(|p| format!("scale {}", p.scale_factor))
        .collect();
    let done = points.len() - cut.len();
    let mut text = format!(
        "sweep interrupted: keeping the {done} point{} done",
        if done == 1 { "" } else { "s" }
    );
    if !cut.is_empty() {
        text.push_str(&format!(
            "; the point at {} was cut short (marked interrupted, left out of the answer and the plot)",
            cut.join(", ")
        ));
    }
    text
}

/// The capacity search: points until the bracket is within the tolerance, `--max-points`
/// ran, or Ctrl-C.
fn run_search(
    sw: &Sweep,
    args: &SweepArgs,
    start: Option<(f64, f64)>,
    result: &mut SweepResult,
) -> Result<()> {
    let mut s = Search::new(start, args.tolerance);
    let of = format!(" (search, at most {})", args.max_points);
    let info = |s: &Search| {
        let (lo, hi) = s.bracket();
        SearchInfo {
            start: start.map(|(a, b)| [a, b]),
            tolerance: args.tolerance,
            max_points: args.max_points,
            lo,
            hi,
            converged: s.converged(),
        }
    };
    while result.points.len() < args.max_points {
        let Some(f) = s.next() else { break };
        if sw.stopped() {
            result.interrupted = true;
            break;
        }
        let (p, interrupted) = sw.point(result.points.len(), f, &of)?;
        if !p.interrupted {
            // A whole point (even if Ctrl-C came after it) counts; a cut one does not.
            s.record(f, carried(&p, args.target));
        }
        result.points.push(p);
        result.interrupted = interrupted;
        result.search = Some(info(&s));
        sw.save(result)?;
        if interrupted {
            break;
        }
    }
    result.search = Some(info(&s));
    Ok(())
}

/// The combined chart, `report.html` and the table on stdout (`sweep.json` is saved).
fn finish(dir: &Path, result: &SweepResult, probe: &ReplayConfig) -> Result<u8> {
    let cap = result.capacity_scale_factor;
    // A point cut short is not drawn: its numbers cover part of the point.
    let plot_points: Vec<crate::report::plots::SweepPlotPoint> = result
        .points
        .iter()
        .filter(|p| !p.interrupted)
        .map(|p| crate::report::plots::SweepPlotPoint {
            offered_rps: p.offered_rps,
            users: p.users,
            served_rps: p.request_throughput,
            goodput_rps: p.request_goodput,
            ttft_p50_ms: p.ttft_p50_ms,
            ttft_p99_ms: p.ttft_p99_ms,
            tpot_p50_ms: p.tpot_p50_ms,
            tpot_p99_ms: p.tpot_p99_ms,
            drift_p99_ms: p.drift_p99_ms,
            capacity: match p.users {
                Some(u) => Some(u) == result.capacity_users,
                None => Some(p.scale_factor) == cap,
            },
            output_tps: p.output_throughput_per_gpu.unwrap_or(p.output_throughput),
            per_user_output_tps: p.per_user_output_tps,
            valid: p.submission_valid,
        })
        .collect();
    let mut title = result.answer.clone();
    for p in result.points.iter().filter(|p| p.interrupted) {
        title.push_str(&format!(
            " (scale {} cut short by Ctrl-C: not drawn)",
            p.scale_factor
        ));
    }
    let drawn = crate::report::plots::write_sweep_plot(
        dir,
        &plot_points,
        &title,
        probe.validity.max_drift_ms,
    );
    let per_gpu = result
        .points
        .iter()
        .any(|p| p.output_throughput_per_gpu.is_some());
    let curve = crate::report::plots::write_curve_plot(dir, &plot_points, per_gpu);
    let charts = match (drawn, curve) {
        (Ok(mut files), Ok(more)) => {
            files.extend(more);
            files
        }
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("request-sim: sweep: cannot draw the plot: {e:#}");
            Vec::new()
        }
    };
    write_html(dir, result, probe, &charts);
    crate::report::print_stdout(&format!("\n{}", render_table(result)))?;
    eprintln!("request-sim: sweep: {}", dir.join("sweep.json").display());
    let nothing_succeeded =
        !result.points.is_empty() && result.points.iter().all(|p| p.exit_code == 5);
    Ok(if result.interrupted {
        130
    } else if nothing_succeeded {
        eprintln!("request-sim: sweep: exit status 5: no request succeeded at any point");
        5
    } else {
        0
    })
}
