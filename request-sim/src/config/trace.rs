//! The trace group of the settings ([`TraceConfig`]): which trace, how it is read and reshaped,
//! the part of it replayed, this shard's share, and how an agent corpus is replayed. Also the
//! load options and the reshaping that `analyze`, `transform` and `verify-prompts` ask for with
//! the same flags.

use std::path::PathBuf;

use super::check::must_exist;
use crate::cli::{ReplayArgs, ReplayTraceArgs, ReshapeArgs, TraceArgs};
use crate::trace::pipeline::shard::Shard;
use crate::trace::{LoadOptions, ReorderWindow};
use crate::{Error, Result};

/// Where the trace comes from.
#[derive(Debug, Clone)]
pub enum TraceSource {
    File(PathBuf),
    /// The small mooncake-format trace shipped in the binary (`request-sim/data/demo_trace.jsonl`).
    BuiltinDemo,
}

/// The trace and the part of it this run replays.
#[derive(Debug, Clone)]
pub struct TraceConfig {
    pub source: TraceSource,
    /// Format, block size, `--start-ms`/`--end-ms`/`--max-requests`.
    pub load: LoadOptions,
    /// `--reorder-window-ms/-rows`: how far out of time order a streamed trace may be.
    pub reorder: ReorderWindow,
    /// `--shard K/N` (or from the environment): replay only this share of the trace.
    pub shard: Option<Shard>,
    /// `--max-idle-gap` (ms): client gaps are cut to this (an agent corpus's plan; a trace's
    /// sessions through `load.reshape`).
    pub max_idle_gap_ms: Option<f64>,
    /// Agent corpora: `--users`/`--session-rate` and `--share-system-prefix`.
    pub agents: AgentSettings,
}

/// How an agent corpus is replayed (`trace::pipeline::plan`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentSettings {
    pub population: crate::trace::pipeline::plan::Population,
    pub share_system_prefix: bool,
    /// `--trajectory-start` and `--warmup-requests-per-lane`.
    pub trajectory: Option<crate::trace::pipeline::plan::TrajectoryStart>,
}

/// The load options a trace's format flags ask for (the rest at their defaults): `replay`,
/// `analyze`, `transform` and `verify-prompts`.
pub fn load_options(a: &TraceArgs) -> LoadOptions {
    LoadOptions {
        format: a.dataset,
        block_size: a.block_size,
        skip_invalid: a.skip_invalid,
        drop_failed: a.drop_failed,
        ..LoadOptions::default()
    }
}

/// The trace file and how to read it.
pub(super) fn trace_settings(a: &ReplayArgs) -> Result<(TraceSource, LoadOptions)> {
    let t = &a.trace;
    let trace = match &t.dataset_path {
        Some(p) => {
            // `-` is standard input (docs/traces.md).
            if p.as_os_str() != "-" {
                must_exist("--dataset-path", p)?;
            }
            TraceSource::File(p.clone())
        }
        None => TraceSource::BuiltinDemo,
    };
    if matches!(trace, TraceSource::BuiltinDemo)
        && t.format
            .dataset
            .is_some_and(|d| Some(d) != crate::trace::demo::demo_format())
    {
        return Err(Error::config(format!(
            "--dataset given without --dataset-path (the built-in demo trace is {})",
            crate::trace::demo::demo_format().map_or("unrecognised", |f| f.name())
        )));
    }
    if let (Some(s), Some(e)) = (t.start_ms, t.end_ms) {
        if e <= s {
            return Err(Error::config(format!(
                "--end-ms ({e}) must be greater than --start-ms ({s})"
            )));
        }
    }
    for (n, v) in [("--start-ms", t.start_ms), ("--end-ms", t.end_ms)] {
        if let Some(v) = v {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::config(format!(
                    "{n} must be a non-negative number, got {v}"
                )));
            }
        }
    }
    if t.max_requests == Some(0) {
        return Err(Error::config("--max-requests must be at least 1"));
    }
    if a.requests.max_output_tokens == Some(0) {
        return Err(Error::config("--max-output-tokens must be at least 1"));
    }
    let (mut start_ms, mut end_ms) = (t.start_ms, t.end_ms);
    if let Some(w) = &t.reshape.time_window {
        if start_ms.is_some() || end_ms.is_some() {
            return Err(Error::config(
                "--time-window and --start-ms/--end-ms say the same thing: give one of them",
            ));
        }
        (start_ms, end_ms) = crate::trace::options::parse_time_window(w).map_err(Error::config)?;
    }
    let load = LoadOptions {
        start_ms,
        end_ms,
        max_requests: t.max_requests,
        reshape: reshape_settings(
            &t.reshape,
            max_idle_gap(t)?.map(|ms| ms / 1e3),
            a.prompts.seed.unwrap_or(0),
        )?,
        ..load_options(&t.format)
    };
    Ok((trace, load))
}

/// `--shard` (or the environment); more than one shard needs `--seed` (`seed`).
pub(super) fn shard(a: &ReplayTraceArgs, seed: Option<u64>) -> Result<Option<Shard>> {
    let shard = match &a.shard {
        Some(spec) => Some(Shard::parse(spec).map_err(Error::config)?),
        None => Shard::from_env(|k| std::env::var(k).ok()).map_err(Error::config)?,
    };
    if shard.is_some_and(|s| s.count > 1) && seed.is_none() {
        return Err(Error::config(
            "--shard with more than one shard needs --seed: every shard must build the same prompts",
        ));
    }
    Ok(shard)
}

/// `--max-idle-gap SECS`, in ms.
pub(super) fn max_idle_gap(a: &ReplayTraceArgs) -> Result<Option<f64>> {
    match a.max_idle_gap {
        Some(s) if !(s.is_finite() && s >= 0.0) => Err(Error::config(format!(
            "--max-idle-gap must be a number of seconds >= 0, got {s}"
        ))),
        s => Ok(s.map(|s| s * 1e3)),
    }
}

/// `--users`, `--session-rate`, `--share-system-prefix`.
pub(super) fn agent_settings(a: &ReplayTraceArgs, dry_run: bool) -> Result<AgentSettings> {
    use crate::trace::pipeline::plan::{check_users_fit, open_file_limit, Population};
    let users = match a.users.as_slice() {
        [] => None,
        &[n] => Some(n),
        _ => {
            return Err(Error::config(
                "--users takes one number in a replay (a list, --users 1,2,4, is for `sweep`)",
            ))
        }
    };
    let population = match (users, a.session_rate) {
        (Some(0), _) => return Err(Error::config("--users must be at least 1")),
        (Some(n), None) => {
            // Refused from the flags, before the corpus is read (a dry run opens no
            // connection).
            if !dry_run {
                check_users_fit(n, open_file_limit()).map_err(Error::config)?;
            }
            Population::Users(n)
        }
        (None, Some(r)) if !(r.is_finite() && r > 0.0) => {
            return Err(Error::config(format!(
                "--session-rate must be a number > 0 (conversations per second), got {r}"
            )))
        }
        (None, Some(r)) => Population::Rate(r),
        (None, None) => Population::All,
        (Some(_), Some(_)) => {
            return Err(Error::config("give --users or --session-rate, not both"))
        }
    };
    let trajectory = match (a.trajectory_start, population) {
        (None, _) if a.warmup_requests_per_lane > 0 => {
            return Err(Error::config(
                "--warmup-requests-per-lane needs --trajectory-start (the warm-up continues a warm start)",
            ))
        }
        (None, _) => None,
        (Some(_), Population::Users(_)) => a.trajectory_start.map(|(lo, hi)| {
            crate::trace::pipeline::plan::TrajectoryStart {
                min_ratio: lo,
                max_ratio: hi,
                warmup_requests: a.warmup_requests_per_lane,
            }
        }),
        (Some(_), _) => {
            return Err(Error::config(
                "--trajectory-start needs --users N (each user's first conversation starts warm)",
            ))
        }
    };
    Ok(AgentSettings {
        population,
        share_system_prefix: a.share_system_prefix,
        trajectory,
    })
}

/// The reshaping the transform flags ask for (`transform` and `replay`); `seed` is `--seed`.
pub fn reshape_settings(
    r: &ReshapeArgs,
    max_idle_gap_s: Option<f64>,
    seed: u64,
) -> Result<crate::trace::Reshape> {
    use crate::cli::RetimeKind;
    use crate::trace::{Arrivals, RateSeries};
    let retime = match (r.retime, r.rate, &r.rate_series) {
        (None, None, None) => None,
        (_, Some(_), Some(_)) => {
            return Err(Error::config(
                "--rate and --rate-series both set the rate: give one of them",
            ))
        }
        (Some(RetimeKind::Gamma), _, Some(_)) => {
            return Err(Error::config(
                "--rate-series re-times with a Poisson process whose rate follows the file; --retime gamma takes a constant --rate",
            ))
        }
        (_, None, Some(p)) => Some(Arrivals::Series(
            RateSeries::read(p).map_err(Error::config)?,
        )),
        (None, Some(_), None) => {
            return Err(Error::config(
                "--rate needs --retime poisson|gamma (or --synthesize)",
            ))
        }
        (Some(_), None, None) => {
            return Err(Error::config(
                "--retime needs --rate REQ/S (or --rate-series FILE)",
            ))
        }
        (Some(RetimeKind::Poisson), Some(rate), None) => Some(Arrivals::Poisson { rate }),
        (Some(RetimeKind::Gamma), Some(rate), None) => Some(Arrivals::Gamma {
            rate,
            cv: r.burstiness.unwrap_or(1.0),
        }),
    };
    if r.burstiness.is_some() && r.retime != Some(RetimeKind::Gamma) {
        return Err(Error::config("--burstiness needs --retime gamma"));
    }
    let reshape = crate::trace::Reshape {
        amplify: r.amplify,
        amplify_phase_ms: r.amplify_phase * 1e3,
        prefix_scale: r.prefix_scale,
        prompt_scale: r.prompt_scale,
        max_input_length: r.max_input_length,
        retime,
        max_idle_gap_ms: max_idle_gap_s.map(|s| s * 1e3),
        sample_sessions: r.sample_sessions,
        infer_sessions: r.infer_sessions,
        seed,
    };
    reshape.check().map_err(Error::config)?;
    Ok(reshape)
}

/// `--reorder-window-ms` and `--reorder-window-rows`.
pub(super) fn reorder_window(a: &ReplayTraceArgs) -> Result<ReorderWindow> {
    let ms = a.reorder_window_ms;
    if !ms.is_finite() || ms < 0.0 {
        return Err(Error::config(format!(
            "--reorder-window-ms must be a number >= 0, got {ms}"
        )));
    }
    if a.reorder_window_rows == 0 {
        return Err(Error::config("--reorder-window-rows must be at least 1"));
    }
    Ok(ReorderWindow {
        ms,
        rows: a.reorder_window_rows,
    })
}
