//! Validated replay settings, parsed once from the command line. Every invalid combination
//! is rejected here, before anything is sent.

use std::path::PathBuf;
use std::time::Duration;

use crate::backend::{ApiFlavor, ApiKind, Endpoint};
use crate::cli::{
    IgnoredArgs, OutputArgs, PromptArgs, ReplayArgs, ReplayTraceArgs, ScheduleArgs, SessionArgs,
    TargetArgs, ValidityArgs,
};
use crate::schedule::StartAt;
use crate::stats::ReportConfig;
use crate::trace::shard::Shard;
use crate::trace::{LoadOptions, ReorderWindow, TraceFormat};
use crate::{Error, Result};

/// Where the trace comes from.
#[derive(Debug, Clone)]
pub enum TraceSource {
    File(PathBuf),
    /// The small mooncake-format trace shipped in the binary (`request-sim/data/demo_trace.jsonl`).
    BuiltinDemo,
}

/// Which server requests go to.
#[derive(Debug, Clone)]
pub enum Target {
    /// Start llm-sim in-process on 127.0.0.1 (ephemeral port); its endpoint is known once it
    /// listens ([`ReplayConfig::simulator_endpoint`]).
    BuiltinSimulator,
    /// `--endpoint`, resolved for `--api` (and `--session-header`).
    Remote(Endpoint),
}

/// When a run stops early because of failed requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EarlyStop {
    /// After this many failed requests.
    Count(u64),
    /// When the failed fraction of finished requests exceeds this (after at least 20 finished).
    Rate(f64),
}

/// The threshold as a user reads it (`5 failed requests`, `more than 5% of the finished
/// requests failed (after 20 finished)`), never the type's debug form.
impl std::fmt::Display for EarlyStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            EarlyStop::Count(1) => write!(f, "1 failed request"),
            EarlyStop::Count(n) => write!(f, "{n} failed requests"),
            EarlyStop::Rate(r) => write!(
                f,
                "more than {}% of the finished requests failed (after 20 finished)",
                (r * 1e4).round() / 1e2
            ),
        }
    }
}

impl EarlyStop {
    pub fn parse(s: &str) -> Result<EarlyStop, String> {
        let t = s.trim();
        let bad = || {
            format!("--early-stop-error-threshold {s:?}: use a count (50), a percentage (5%) or a fraction (0.05)")
        };
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(0.0..=100.0).contains(&v) {
                return Err(bad());
            }
            return Ok(EarlyStop::Rate(v / 100.0));
        }
        if let Ok(n) = t.parse::<u64>() {
            if n == 0 {
                return Err(bad());
            }
            return Ok(EarlyStop::Count(n));
        }
        let v: f64 = t.parse().map_err(|_| bad())?;
        if v > 0.0 && v < 1.0 {
            Ok(EarlyStop::Rate(v))
        } else {
            Err(bad())
        }
    }

    /// Should the run stop with `failed` failures out of `finished` requests?
    pub fn triggered(&self, failed: u64, finished: u64) -> bool {
        match *self {
            EarlyStop::Count(n) => failed >= n,
            EarlyStop::Rate(r) => finished >= 20 && (failed as f64) > r * finished as f64,
        }
    }
}

/// Per-request timeout rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeoutRule {
    Fixed(Duration),
    /// max(15 s, ttft + tpot × output_length), as the anchor does.
    FromSlo {
        ttft_s: f64,
        tpot_s: f64,
    },
}

impl TimeoutRule {
    pub fn for_output(&self, output_length: u32) -> Duration {
        match *self {
            TimeoutRule::Fixed(d) => d,
            TimeoutRule::FromSlo { ttft_s, tpot_s } => {
                Duration::from_secs_f64((ttft_s + tpot_s * output_length as f64).max(15.0))
            }
        }
    }
}

/// Everything a replay needs, validated, in groups that follow the run's phases (each group is
/// a flag group of [`ReplayArgs`] and a heading of `--help`).
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// Which server, how to reach it.
    pub target: TargetConfig,
    /// Which trace, which part of it, this shard's share.
    pub trace: TraceConfig,
    /// How prompts are made.
    pub prompts: PromptConfig,
    /// When requests are sent, and the threads that build and send them.
    pub schedule: ScheduleConfig,
    /// What each request asks for, how long it may take, the sessions' rules.
    pub requests: RequestPolicy,
    /// Records, summary, result files, console.
    pub output: OutputConfig,
    /// Server metrics and what makes a run invalid.
    pub validity: ValidityConfig,
    /// Notes about accepted-but-ignored flags, printed at start-up.
    pub notes: Vec<String>,
}

/// The server requests go to (`--endpoint`, `--api`, ...).
#[derive(Debug, Clone)]
pub struct TargetConfig {
    pub server: Target,
    /// `--api` (the resolved endpoint has it too; kept for the built-in simulator's).
    pub api: ApiFlavor,
    pub model_name: Option<String>,
    pub route: Option<String>,
    pub api_key: Option<String>,
    pub insecure: bool,
    /// `--pool-idle-timeout`.
    pub pool_idle_timeout: Duration,
    /// Open connections before bursts the pool is too small for (`--no-warm-connections`
    /// turns it off).
    pub warm_connections: bool,
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

/// How an agent corpus is replayed (`trace::agent::plan`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentSettings {
    pub population: crate::trace::agent::plan::Population,
    pub share_system_prefix: bool,
}

/// How prompts are made.
#[derive(Debug, Clone)]
pub struct PromptConfig {
    pub tokenizer: Option<PathBuf>,
    pub tokenizer_config: Option<PathBuf>,
    pub seed: u64,
    pub chat_overhead: Option<u32>,
    pub token_ids: bool,
    /// `--prompt-corpus` (with `--prompt-source`, `--prompt-corpus-field`): real-text prompts.
    pub corpus: Option<crate::prompt::CorpusSpec>,
    /// `--no-server-tokenize`: never use the server's `/tokenize`.
    pub no_server_tokenize: bool,
    /// `--allow-inexact-prompts`: run with the built-in word list against a real model.
    pub allow_inexact_prompts: bool,
}

/// When requests are sent, and the threads that build and send them.
#[derive(Debug, Clone)]
pub struct ScheduleConfig {
    pub scale_factor: f64,
    pub time_limit: Option<Duration>,
    /// `--start-at`: the wall-clock start of the trace clock.
    pub start_at: Option<StartAt>,
    pub producers: usize,
    pub channel_capacity: usize,
    /// `--lookahead-mb`, in bytes.
    pub lookahead_bytes: u64,
    /// `--lookahead-secs`.
    pub lookahead: Duration,
    pub threads: usize,
    pub spin: Duration,
    pub pin: bool,
    /// `--realtime` and `--rt-priority`.
    pub realtime: crate::schedule::RealtimeMode,
    pub rt_priority: u8,
    /// Spin a SCHED_IDLE thread per core while the I/O threads are raised (`--no-keep-awake`
    /// turns it off).
    pub keep_awake: bool,
}

/// What each request asks for and how long it may take.
#[derive(Debug, Clone)]
pub struct RequestPolicy {
    pub stream: bool,
    pub exact_output: bool,
    /// `--max-output-tokens`: cap on every request's output_length.
    pub max_output_tokens: Option<u32>,
    pub timeout: TimeoutRule,
    pub grace: Duration,
    pub early_stop: Option<EarlyStop>,
    pub allow_missing_usage: bool,
    /// `--timing`, `--think-time`, `--skip-after-failed-parent`, `--session-user`.
    pub sessions: crate::schedule::SessionOptions,
    /// `--dry-run`: build and schedule everything, send nothing.
    pub dry_run: bool,
}

/// Where the run's records, summary and files go, and what the console shows.
#[derive(Debug, Clone)]
pub struct OutputConfig {
    /// `--output-path`: the records JSONL.
    pub records_path: PathBuf,
    pub summary_path: PathBuf,
    pub result_dir: Option<PathBuf>,
    /// `--save-prompts`: where the built prompts are saved as a `messages` trace.
    pub save_prompts: Option<PathBuf>,
    pub record_itl: bool,
    /// Percentiles and goodput SLOs of the summary.
    pub report: ReportConfig,
    pub quiet: bool,
    /// `--metrics-port`: the live client metrics page (`None`: not served).
    pub live_metrics: Option<LiveMetricsConfig>,
}

/// `--metrics-port`, `--metrics-host`, `--metrics-run-id`, `--metrics-linger`.
#[derive(Debug, Clone)]
pub struct LiveMetricsConfig {
    pub addr: std::net::SocketAddr,
    pub run_id: Option<String>,
    pub linger: Duration,
}

/// The live metrics page's settings (`None` without `--metrics-port`).
fn live_metrics(f: &crate::cli::LiveMetricsFlags) -> Result<Option<LiveMetricsConfig>> {
    let Some(port) = f.metrics_port else {
        return Ok(None);
    };
    let host: std::net::IpAddr = f.metrics_host.trim().parse().map_err(|_| {
        Error::config(format!(
            "--metrics-host {:?}: not an IP address (e.g. 127.0.0.1, or 0.0.0.0 for every interface)",
            f.metrics_host
        ))
    })?;
    if !(f.metrics_linger.is_finite() && (0.0..=3600.0).contains(&f.metrics_linger)) {
        return Err(Error::config(format!(
            "--metrics-linger {}: expected seconds from 0 to 3600",
            f.metrics_linger
        )));
    }
    if f.metrics_run_id
        .as_deref()
        .is_some_and(|r| r.trim().is_empty())
    {
        return Err(Error::config("--metrics-run-id: empty"));
    }
    Ok(Some(LiveMetricsConfig {
        addr: std::net::SocketAddr::new(host, port),
        run_id: f.metrics_run_id.clone(),
        linger: Duration::from_secs_f64(f.metrics_linger),
    }))
}

/// Server metrics and what makes a run invalid.
#[derive(Debug, Clone)]
pub struct ValidityConfig {
    /// Server-metrics scraping (`None`: `--no-server-metrics`).
    pub server_metrics: Option<ServerMetrics>,
    /// `--max-drift-ms`: drift p99 above it makes the run invalid.
    pub max_drift_ms: f64,
    /// `--strict`: an invalid run exits with status 4.
    pub strict: bool,
    /// `--max-error-rate`: a larger share of errored requests exits with status 6.
    pub max_error_rate: Option<f64>,
}

/// `--server-metrics`, `--metrics-interval`.
#[derive(Debug, Clone)]
pub struct ServerMetrics {
    /// Always scraped.
    pub urls: Vec<reqwest::Url>,
    pub interval: Duration,
}

/// Parse a `--metrics-interval` value: seconds (`0.5`) or with a unit (`100ms`, `2s`).
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("--metrics-interval {s:?}: use seconds (0.5) or a unit (100ms, 2s)")
    })?;
    let secs = v * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > 3600.0 {
        return Err(format!(
            "--metrics-interval {s:?}: must be between 100 ms and 1 hour"
        ));
    }
    let d = Duration::from_secs_f64(secs);
    if d < crate::observe::scrape::MIN_INTERVAL {
        return Err(format!(
            "--metrics-interval {s:?} is below the minimum of 100 ms: scraping faster loads the servers and this machine without telling more"
        ));
    }
    Ok(d)
}

/// A fresh seed: wall-clock nanoseconds mixed with the process id.
pub fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut z = nanos ^ ((std::process::id() as u64) << 32);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn positive(name: &str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(Error::config(format!(
            "{name} must be a positive number, got {v}"
        )))
    }
}

fn must_exist(flag: &str, p: &std::path::Path) -> Result<()> {
    if p.exists() {
        Ok(())
    } else {
        Err(Error::config(format!(
            "{flag} {}: no such file",
            p.display()
        )))
    }
}

impl ReplayConfig {
    /// Validate the flags once; every contradiction is an [`Error::Config`] naming the flag.
    /// (The `client` binary's defaults are set by [`crate::compat::blitz`] before this.)
    pub fn from_args(a: ReplayArgs) -> Result<ReplayConfig> {
        single_run(&a)?;
        let (source, load) = trace_settings(&a)?;
        let (shard, start_at) = scale_out(&a)?;
        let (tokenizer, tokenizer_config) = tokenizer_files(&a.prompts)?;
        let api_key = api_key(&a.target)?;
        let stream = !a.requests.no_stream;
        let server = target(&a, stream, &api_key)?;
        let timing = timing(&a)?;
        let (lookahead_bytes, lookahead, threads) = pipeline_settings(&a.schedule)?;
        let (records_path, summary_path) = output_paths(&a.output)?;
        let report = report_settings(&a.output)?;
        let server_metrics = server_metrics(&a.validity)?;
        let live_metrics = live_metrics(&a.output.live_metrics)?;
        let sessions = session_options(&a.requests.sessions)?;
        let sessions = agent_sessions(&a, &source, &load, sessions)?;
        let p = a.prompts;
        let corpus = crate::prompt::corpus_spec(
            p.prompt_source,
            p.prompt_corpus.as_deref(),
            &p.prompt_corpus_field,
        )
        .map_err(Error::config)?;
        let reorder = reorder_window(&a.trace)?;
        let (t, s, r, o, v) = (a.target, a.schedule, a.requests, a.output, a.validity);
        Ok(ReplayConfig {
            target: TargetConfig {
                server,
                api: t.api,
                model_name: t.model_name,
                route: t.aibrix_route,
                api_key,
                insecure: t.insecure,
                pool_idle_timeout: Duration::from_secs_f64(t.pool_idle_timeout),
                warm_connections: !t.no_warm_connections,
            },
            trace: TraceConfig {
                source,
                load,
                reorder,
                shard,
                max_idle_gap_ms: max_idle_gap(&a.trace)?,
                agents: agent_settings(&a.trace)?,
            },
            prompts: PromptConfig {
                tokenizer,
                tokenizer_config,
                seed: p.seed.unwrap_or_else(fresh_seed),
                chat_overhead: p.chat_overhead,
                token_ids: p.token_ids,
                corpus,
                no_server_tokenize: p.no_server_tokenize,
                allow_inexact_prompts: p.allow_inexact_prompts,
            },
            schedule: ScheduleConfig {
                scale_factor: timing.scale_factor,
                time_limit: timing.time_limit,
                start_at,
                producers: s.num_producer,
                channel_capacity: s.channel_capacity,
                lookahead_bytes,
                lookahead,
                threads,
                spin: Duration::from_micros(s.spin_us),
                pin: !s.no_pin,
                realtime: s.realtime,
                rt_priority: s.rt_priority,
                keep_awake: !s.no_keep_awake,
            },
            requests: RequestPolicy {
                stream,
                exact_output: !r.no_exact_output,
                max_output_tokens: r.max_output_tokens,
                timeout: timing.timeout,
                grace: Duration::from_secs_f64(r.grace_secs),
                early_stop: timing.early_stop,
                allow_missing_usage: r.allow_missing_usage,
                sessions,
                dry_run: r.dry_run,
            },
            output: OutputConfig {
                records_path,
                summary_path,
                result_dir: o.report.result_dir,
                save_prompts: o.save_prompts,
                record_itl: o.record_itl,
                report,
                quiet: o.quiet,
                live_metrics,
            },
            validity: ValidityConfig {
                server_metrics,
                max_drift_ms: v.max_drift_ms,
                strict: v.strict,
                max_error_rate: v.max_error_rate,
            },
            notes: ignored_flags(&a.ignored),
        })
    }

    /// The endpoint of the built-in simulator listening at `base_url` (its chat completions,
    /// or completions with `--token-ids`), with this run's API settings.
    pub fn simulator_endpoint(&self, base_url: &str) -> Result<Endpoint> {
        let url = if self.prompts.token_ids {
            format!("{base_url}/v1/completions")
        } else {
            base_url.to_string()
        };
        let mut ep = Endpoint::resolve(
            &url,
            self.target.api,
            self.requests.stream,
            self.target.route.clone(),
            self.target.api_key.clone(),
        )
        .map_err(Error::config)?;
        ep.session_header = self.requests.sessions.session_header.clone();
        Ok(ep)
    }
}

/// Notes about the anchor's flags that are accepted and have no effect.
fn ignored_flags(a: &IgnoredArgs) -> Vec<String> {
    let mut notes = Vec::new();
    if a.tracing_path.is_some() || a.cache.is_some() || a.cache_path.is_some() {
        notes.push("--tracing-path/--cache/--cache-path are accepted for compatibility and have no effect: prompts are built on the fly by producer threads".into());
    }
    notes
}

/// The trace file and how to read it.
fn trace_settings(a: &ReplayArgs) -> Result<(TraceSource, LoadOptions)> {
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
        && t.format.dataset.is_some_and(|d| d != TraceFormat::Mooncake)
    {
        return Err(Error::config(
            "--dataset given without --dataset-path (the built-in demo trace is mooncake)",
        ));
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
        (start_ms, end_ms) = crate::trace::reshape::parse_time_window(w).map_err(Error::config)?;
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
        ..t.format.load_options()
    };
    Ok((trace, load))
}

/// An agent corpus (`trace::agent`) replays closed-loop with the trace's client gaps: each
/// request waits for what it follows. The agent flags need one.
fn agent_sessions(
    a: &ReplayArgs,
    source: &TraceSource,
    load: &LoadOptions,
    sessions: crate::schedule::SessionOptions,
) -> Result<crate::schedule::SessionOptions> {
    let agentic = match source {
        TraceSource::File(p) => crate::trace::agent::is_agent_corpus(p, load.format),
        TraceSource::BuiltinDemo => false,
    };
    let t = &a.trace;
    if !agentic {
        let flag = [
            (!t.users.is_empty(), "--users"),
            (t.session_rate.is_some(), "--session-rate"),
            (t.share_system_prefix, "--share-system-prefix"),
        ]
        .into_iter()
        .find(|(on, _)| *on);
        if let Some((_, flag)) = flag {
            return Err(Error::config(format!(
                "{flag} needs an agent corpus (a weka trace file or directory): this trace has no conversations of agents"
            )));
        }
        return Ok(sessions);
    }
    if a.requests.sessions.timing == crate::schedule::Timing::Open
        && a.requests.sessions.think_time.is_some()
    {
        return Err(Error::config(
            "--think-time with an agent corpus: its requests wait for the trace's own client gaps (cap them with --max-idle-gap)",
        ));
    }
    Ok(crate::schedule::SessionOptions {
        timing: crate::schedule::Timing::Closed,
        think: crate::schedule::ThinkTime::Trace,
        ..sessions
    })
}

/// `--max-idle-gap SECS`, in ms.
fn max_idle_gap(a: &ReplayTraceArgs) -> Result<Option<f64>> {
    match a.max_idle_gap {
        Some(s) if !(s.is_finite() && s >= 0.0) => Err(Error::config(format!(
            "--max-idle-gap must be a number of seconds >= 0, got {s}"
        ))),
        s => Ok(s.map(|s| s * 1e3)),
    }
}

/// `--users`, `--session-rate`, `--share-system-prefix`.
fn agent_settings(a: &ReplayTraceArgs) -> Result<AgentSettings> {
    use crate::trace::agent::plan::Population;
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
        (Some(n), None) => Population::Users(n),
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
    Ok(AgentSettings {
        population,
        share_system_prefix: a.share_system_prefix,
    })
}

/// The reshaping the transform flags ask for (`transform` and `replay`); `seed` is `--seed`.
pub fn reshape_settings(
    r: &crate::cli::ReshapeArgs,
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
fn reorder_window(a: &ReplayTraceArgs) -> Result<ReorderWindow> {
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

/// `--shard` (or the environment) and `--start-at`.
fn scale_out(a: &ReplayArgs) -> Result<(Option<Shard>, Option<StartAt>)> {
    let start_at = match &a.schedule.start_at {
        Some(s) => {
            let at = StartAt::parse(s).map_err(Error::config)?;
            if let Err(late) = at.remaining() {
                return Err(Error::config(format!(
                    "--start-at {}: that is {:.1} s in the past (now {})",
                    at.rfc3339(),
                    late.as_secs_f64(),
                    crate::stats::now_rfc3339()
                )));
            }
            Some(at)
        }
        None => None,
    };
    let shard = match &a.trace.shard {
        Some(spec) => Some(Shard::parse(spec).map_err(Error::config)?),
        None => Shard::from_env(|k| std::env::var(k).ok()).map_err(Error::config)?,
    };
    if shard.is_some_and(|s| s.count > 1) && a.prompts.seed.is_none() {
        return Err(Error::config(
            "--shard with more than one shard needs --seed: every shard must build the same prompts",
        ));
    }
    Ok((shard, start_at))
}

/// `--tokenizer` (a file or a model directory) and `--tokenizer-config`.
fn tokenizer_files(a: &PromptArgs) -> Result<(Option<PathBuf>, Option<PathBuf>)> {
    // A model directory stands for its tokenizer.json and, unless --tokenizer-config is
    // given, its tokenizer_config.json.
    let (tokenizer, dir_config) = match &a.tokenizer {
        Some(t) => {
            must_exist("--tokenizer", t)?;
            let (file, config) = crate::prompt::tokenizer_files(t)?;
            (Some(file), config)
        }
        None => (None, None),
    };
    if let Some(t) = &a.tokenizer_config {
        must_exist("--tokenizer-config", t)?;
        if a.tokenizer.is_none() {
            return Err(Error::config("--tokenizer-config needs --tokenizer"));
        }
    }
    Ok((tokenizer, a.tokenizer_config.clone().or(dir_config)))
}

/// `--api-key-file` or `--api-key` (`$OPENAI_API_KEY`).
fn api_key(a: &TargetArgs) -> Result<Option<String>> {
    Ok(match (&a.api_key, &a.api_key_file) {
        (_, Some(f)) => {
            let k = std::fs::read_to_string(f)
                .map_err(|e| Error::config(format!("--api-key-file {}: {e}", f.display())))?;
            let k = k.trim().to_string();
            if k.is_empty() {
                return Err(Error::config(format!(
                    "--api-key-file {}: file is empty",
                    f.display()
                )));
            }
            Some(k)
        }
        (Some(k), None) if !k.trim().is_empty() => Some(k.trim().to_string()),
        _ => None,
    })
}

/// `--endpoint` resolved (once) for `--api`, or the built-in simulator.
fn target(a: &ReplayArgs, stream: bool, api_key: &Option<String>) -> Result<Target> {
    let (t, token_ids) = (&a.target, a.prompts.token_ids);
    if t.api == ApiFlavor::Aibrix && t.endpoint.is_none() {
        return Err(Error::config("--api aibrix needs --endpoint"));
    }
    if t.api == ApiFlavor::Aibrix && t.aibrix_route.is_none() {
        return Err(Error::config(
            "--api aibrix needs --aibrix-route (e.g. prefix-cache, throughput)",
        ));
    }
    if t.aibrix_route.is_some() && t.api != ApiFlavor::Aibrix {
        return Err(Error::config(
            "--aibrix-route sets AIBrix's routing-strategy header: it needs --api aibrix",
        ));
    }
    if token_ids && t.api == ApiFlavor::Tgi {
        return Err(Error::config(
            "--token-ids works only with OpenAI completions endpoints",
        ));
    }
    let Some(e) = &t.endpoint else {
        return Ok(Target::BuiltinSimulator);
    };
    let mut ep = Endpoint::resolve(e, t.api, stream, t.aibrix_route.clone(), api_key.clone())
        .map_err(Error::config)?;
    if token_ids && ep.kind != ApiKind::Completions {
        return Err(Error::config(format!(
            "--token-ids needs a completions endpoint (…/v1/completions), not {}",
            ep.display_url()
        )));
    }
    ep.session_header = session_header(&a.requests.sessions)?;
    Ok(Target::Remote(ep))
}

/// `--session-header NAME`, checked as an HTTP header name.
fn session_header(a: &SessionArgs) -> Result<Option<reqwest::header::HeaderName>> {
    match &a.session_header {
        Some(name) => reqwest::header::HeaderName::from_bytes(name.trim().as_bytes())
            .map(Some)
            .map_err(|_| {
                Error::config(format!(
                    "--session-header {name:?}: not a valid HTTP header name"
                ))
            }),
        None => Ok(None),
    }
}

/// The session flags.
fn session_options(a: &SessionArgs) -> Result<crate::schedule::SessionOptions> {
    if a.live_history && a.timing != crate::schedule::Timing::Closed {
        return Err(Error::config(
            "--live-history needs --timing closed: a turn can carry the server's earlier answers only when it is sent after them",
        ));
    }
    if a.timing != crate::schedule::Timing::Closed {
        let inert = [
            (a.think_time.is_some(), "--think-time"),
            (a.skip_after_failed_parent, "--skip-after-failed-parent"),
        ];
        if let Some((_, flag)) = inert.iter().find(|(on, _)| *on) {
            return Err(Error::config(format!(
                "{flag} acts only with --timing closed (a turn waits for its parent's answer); with --timing open every request is sent at its trace time"
            )));
        }
    }
    Ok(crate::schedule::SessionOptions {
        timing: a.timing,
        think: a.think_time.unwrap_or_default(),
        skip_after_failed_parent: a.skip_after_failed_parent,
        session_user: a.session_user,
        session_header: session_header(a)?,
        live_history: a.live_history,
    })
}

/// Speed, limits and timeouts.
struct Timing {
    scale_factor: f64,
    time_limit: Option<Duration>,
    timeout: TimeoutRule,
    early_stop: Option<EarlyStop>,
}

fn timing(a: &ReplayArgs) -> Result<Timing> {
    let (s, r, o) = (&a.schedule, &a.requests, &a.output);
    let scale_factor = positive("--scale-factor", s.scale_factor)?;
    let time_in_secs = s
        .time_in_secs
        .map(|t| positive("--time-in-secs", t))
        .transpose()?;
    let (ttft_slo, tpot_slo) = (o.ttft_slo, o.tpot_slo);
    for (name, v) in [("--ttft-slo", ttft_slo), ("--tpot-slo", tpot_slo)] {
        if let Some(v) = v {
            positive(name, v)?;
        }
    }
    let timeout = match (r.request_timeout, ttft_slo, tpot_slo) {
        (Some(t), _, _) => {
            TimeoutRule::Fixed(Duration::from_secs_f64(positive("--request-timeout", t)?))
        }
        (None, None, None) => TimeoutRule::Fixed(Duration::from_secs(600)),
        (None, t, p) => TimeoutRule::FromSlo {
            ttft_s: t.unwrap_or(0.0),
            tpot_s: p.unwrap_or(0.0),
        },
    };
    let pool_idle = a.target.pool_idle_timeout;
    if !pool_idle.is_finite() || pool_idle <= 0.0 {
        return Err(Error::config(format!(
            "--pool-idle-timeout must be > 0 seconds, got {pool_idle}"
        )));
    }
    if !r.grace_secs.is_finite() || r.grace_secs < 0.0 {
        return Err(Error::config(format!(
            "--grace-secs must be >= 0, got {}",
            r.grace_secs
        )));
    }
    let early_stop = r
        .early_stop_error_threshold
        .as_deref()
        .map(EarlyStop::parse)
        .transpose()
        .map_err(Error::config)?;
    if !(1..=48).contains(&s.rt_priority) {
        return Err(Error::config(format!(
            "--rt-priority must be between 1 and 48, got {}",
            s.rt_priority
        )));
    }
    if s.spin_us > 100_000 {
        return Err(Error::config(format!(
            "--spin-us must be at most 100000, got {}",
            s.spin_us
        )));
    }
    Ok(Timing {
        scale_factor,
        time_limit: time_in_secs.map(Duration::from_secs_f64),
        timeout,
        early_stop,
    })
}

/// Producers, lookahead and I/O threads: (lookahead bytes, lookahead time, threads).
fn pipeline_settings(a: &ScheduleArgs) -> Result<(u64, Duration, usize)> {
    if a.num_producer == 0 || a.num_producer > 256 {
        return Err(Error::config(format!(
            "--num-producer must be between 1 and 256, got {}",
            a.num_producer
        )));
    }
    if a.channel_capacity == 0 {
        return Err(Error::config("--channel-capacity must be at least 1"));
    }
    if !a.lookahead_mb.is_finite() || a.lookahead_mb <= 0.0 {
        return Err(Error::config(format!(
            "--lookahead-mb must be > 0, got {}",
            a.lookahead_mb
        )));
    }
    if !a.lookahead_secs.is_finite() || a.lookahead_secs < 0.0 {
        return Err(Error::config(format!(
            "--lookahead-secs must be >= 0, got {}",
            a.lookahead_secs
        )));
    }
    let threads = a.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
    });
    if threads == 0 || threads > 1024 {
        return Err(Error::config(format!(
            "--threads must be between 1 and 1024, got {threads}"
        )));
    }
    Ok((
        (a.lookahead_mb * 1e6) as u64,
        Duration::from_secs_f64(a.lookahead_secs),
        threads,
    ))
}

/// The records file and the summary beside it.
fn output_paths(a: &OutputArgs) -> Result<(PathBuf, PathBuf)> {
    let output_path = match &a.output_path {
        Some(p) => p.clone(),
        None => {
            let ts = crate::stats::file_stamp();
            PathBuf::from(format!("results/replay-{ts}.jsonl"))
        }
    };
    let summary_path = a
        .summary_path
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.summary.json", output_path.display())));
    if summary_path == output_path {
        return Err(Error::config(
            "--summary-path must differ from --output-path",
        ));
    }
    Ok((output_path, summary_path))
}

/// One replay: `--repeat N` is run by `replay` and `sweep` ([`crate::repeat`]), which clear it
/// for each run; another front end (the `client`, `trace_replay` binaries) refuses it.
fn single_run(a: &ReplayArgs) -> Result<()> {
    match a.schedule.repeat {
        None | Some(1) => Ok(()),
        Some(0) => Err(Error::config(
            "--repeat 0: a repeat set needs at least one run (give N >= 2 for intervals, or leave --repeat out)",
        )),
        Some(n) => Err(Error::config(format!(
            "--repeat {n}: repeat sets are run by `request-sim replay` and `request-sim sweep`"
        ))),
    }
}

/// Percentiles and goodput SLOs (`--goodput`, or the anchor's `--ttft-slo`/`--tpot-slo`).
fn report_settings(a: &OutputArgs) -> Result<ReportConfig> {
    let mut report = a.report.report_config(&crate::stats::DEFAULT_PERCENTILES)?;
    if report.slo.ttft_ms.is_none() {
        report.slo.ttft_ms = a.ttft_slo.map(|s| s * 1e3);
    }
    if report.slo.tpot_ms.is_none() {
        report.slo.tpot_ms = a.tpot_slo.map(|s| s * 1e3);
    }
    Ok(report)
}

/// `--server-metrics`, `--metrics-interval`, `--max-drift-ms`, `--max-error-rate`.
fn server_metrics(a: &ValidityArgs) -> Result<Option<ServerMetrics>> {
    if !a.max_drift_ms.is_finite() || a.max_drift_ms < 0.0 {
        return Err(Error::config(format!(
            "--max-drift-ms must be a number >= 0, got {}",
            a.max_drift_ms
        )));
    }
    if let Some(r) = a.max_error_rate {
        if !(0.0..=1.0).contains(&r) {
            return Err(Error::config(format!(
                "--max-error-rate must be a fraction in [0, 1] (0.05 = 5%), got {r}"
            )));
        }
    }
    if a.no_server_metrics {
        return Ok(None);
    }
    let interval = parse_interval(&a.metrics_interval).map_err(Error::config)?;
    let urls = a
        .server_metrics
        .iter()
        .filter(|u| !u.trim().is_empty())
        .map(|u| crate::observe::scrape::metrics_url(u))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(ServerMetrics { urls, interval }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_stop_parsing() {
        assert_eq!(EarlyStop::parse("50"), Ok(EarlyStop::Count(50)));
        assert_eq!(EarlyStop::Count(5).to_string(), "5 failed requests");
        assert_eq!(
            EarlyStop::parse("5%").unwrap().to_string(),
            "more than 5% of the finished requests failed (after 20 finished)"
        );
        assert_eq!(EarlyStop::parse("5%"), Ok(EarlyStop::Rate(0.05)));
        assert_eq!(EarlyStop::parse("0.1"), Ok(EarlyStop::Rate(0.1)));
        assert!(EarlyStop::parse("0").is_err());
        assert!(EarlyStop::parse("abc").is_err());
        assert!(EarlyStop::parse("150%").is_err());
        assert!(EarlyStop::Count(3).triggered(3, 3));
        assert!(!EarlyStop::Rate(0.5).triggered(10, 19));
        assert!(EarlyStop::Rate(0.5).triggered(11, 20));
    }

    #[test]
    fn anchor_timeout_rule() {
        let r = TimeoutRule::FromSlo {
            ttft_s: 5.0,
            tpot_s: 0.06,
        };
        assert_eq!(r.for_output(100), Duration::from_secs(15));
        assert_eq!(r.for_output(1000), Duration::from_secs_f64(65.0));
    }
}
