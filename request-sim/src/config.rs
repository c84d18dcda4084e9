//! Validated replay settings, parsed once from the command line. Every invalid combination
//! is rejected here, before anything is sent.

use std::path::PathBuf;
use std::time::Duration;

use crate::backend::{ApiFlavor, ApiKind, Endpoint};
use crate::cli::ReplayArgs;
use crate::report::ReportConfig;
use crate::schedule::StartAt;
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

/// Everything a replay needs, validated.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    pub trace: TraceSource,
    pub load: LoadOptions,
    /// `--reorder-window-ms/-rows`: how far out of time order a streamed trace may be.
    pub reorder: ReorderWindow,
    pub tokenizer: Option<PathBuf>,
    pub tokenizer_config: Option<PathBuf>,
    pub seed: u64,
    /// `--shard K/N` (or from the environment): replay only this share of the trace.
    pub shard: Option<Shard>,
    /// `--start-at`: the wall-clock start of the trace clock.
    pub start_at: Option<StartAt>,
    pub chat_overhead: Option<u32>,
    pub token_ids: bool,
    /// `--prompt-corpus` (with `--prompt-source`, `--prompt-corpus-field`): real-text prompts.
    pub prompt_corpus: Option<crate::prompt::CorpusSpec>,
    pub target: Target,
    /// `--api` (the resolved endpoint has it too; kept for the built-in simulator's).
    pub api: ApiFlavor,
    pub model_name: Option<String>,
    pub route: Option<String>,
    pub api_key: Option<String>,
    pub stream: bool,
    pub exact_output: bool,
    pub allow_missing_usage: bool,
    pub insecure: bool,
    /// `--pool-idle-timeout`.
    pub pool_idle_timeout: Duration,
    /// Open connections before bursts the pool is too small for (`--no-warm-connections`
    /// turns it off).
    pub warm_connections: bool,
    pub scale_factor: f64,
    pub time_limit: Option<Duration>,
    pub timeout: TimeoutRule,
    pub grace: Duration,
    pub early_stop: Option<EarlyStop>,
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
    pub dry_run: bool,
    /// `--no-server-tokenize`: never use the server's `/tokenize`.
    pub no_server_tokenize: bool,
    /// `--allow-inexact-prompts`: run with the built-in word list against a real model.
    pub allow_inexact_prompts: bool,
    /// `--max-output-tokens`: cap on every request's output_length.
    pub max_output_tokens: Option<u32>,
    pub output_path: PathBuf,
    pub summary_path: PathBuf,
    pub result_dir: Option<PathBuf>,
    /// `--save-prompts`: where the built prompts are saved as a `messages` trace.
    pub save_prompts: Option<PathBuf>,
    pub record_itl: bool,
    /// Percentiles and goodput SLOs of the summary.
    pub report: ReportConfig,
    pub quiet: bool,
    /// `--timing`, `--think-time`, `--skip-after-failed-parent`, `--session-user`.
    pub sessions: crate::schedule::SessionOptions,
    /// Notes about accepted-but-ignored flags, printed at start-up.
    pub notes: Vec<String>,
    /// Server-metrics scraping (`None`: `--no-server-metrics`).
    pub server_metrics: Option<ServerMetrics>,
    /// `--max-drift-ms`: drift p99 above it makes the run invalid.
    pub max_drift_ms: f64,
    /// `--strict`: an invalid run exits with status 4.
    pub strict: bool,
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

/// Defaults that differ between `request-sim replay` and the anchor-compatible `client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Replay,
    Client,
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
    pub fn from_args(a: ReplayArgs, flavor: Flavor) -> Result<ReplayConfig> {
        let client = flavor == Flavor::Client;
        let (trace, load) = trace_settings(&a)?;
        let (shard, start_at) = scale_out(&a)?;
        let (tokenizer, tokenizer_config) = tokenizer_files(&a)?;
        let api_key = api_key(&a)?;
        let stream = !a.no_stream && (a.stream || !client);
        let target = target(&a, stream, &api_key)?;
        let timing = timing(&a, client)?;
        let (lookahead_bytes, lookahead, threads) = pipeline_settings(&a)?;
        let (output_path, summary_path) = output_paths(&a, client)?;
        let report = report_settings(&a, client)?;
        let server_metrics = server_metrics(&a)?;
        let sessions = session_options(&a)?;
        let prompt_corpus = crate::prompt::corpus_spec(
            a.prompt_source,
            a.prompt_corpus.as_deref(),
            &a.prompt_corpus_field,
        )
        .map_err(Error::config)?;
        let mut notes = Vec::new();
        if a.tracing_path.is_some() || a.cache.is_some() || a.cache_path.is_some() {
            notes.push("--tracing-path/--cache/--cache-path are accepted for compatibility and have no effect: prompts are built on the fly by producer threads".into());
        }
        let reorder = reorder_window(&a)?;
        Ok(ReplayConfig {
            prompt_corpus,
            trace,
            load,
            reorder,
            tokenizer,
            tokenizer_config,
            shard,
            start_at,
            seed: a.seed.unwrap_or_else(fresh_seed),
            chat_overhead: a.chat_overhead,
            token_ids: a.token_ids,
            target,
            api: a.api,
            model_name: a.model_name,
            route: a.aibrix_route,
            api_key,
            stream,
            exact_output: !a.no_exact_output,
            allow_missing_usage: a.allow_missing_usage,
            insecure: a.insecure,
            pool_idle_timeout: Duration::from_secs_f64(a.pool_idle_timeout),
            warm_connections: !a.no_warm_connections,
            scale_factor: timing.scale_factor,
            time_limit: timing.time_limit,
            timeout: timing.timeout,
            grace: Duration::from_secs_f64(a.grace_secs),
            early_stop: timing.early_stop,
            producers: a.num_producer,
            channel_capacity: a.channel_capacity,
            lookahead_bytes,
            lookahead,
            threads,
            spin: Duration::from_micros(a.spin_us),
            pin: !a.no_pin,
            realtime: a.realtime,
            rt_priority: a.rt_priority,
            keep_awake: !a.no_keep_awake,
            dry_run: a.dry_run,
            no_server_tokenize: a.no_server_tokenize,
            allow_inexact_prompts: a.allow_inexact_prompts,
            max_output_tokens: a.max_output_tokens,
            output_path,
            summary_path,
            result_dir: a.report.result_dir,
            save_prompts: a.save_prompts,
            sessions,
            record_itl: a.record_itl,
            report,
            quiet: a.quiet,
            notes,
            server_metrics,
            max_drift_ms: a.max_drift_ms,
            strict: a.strict,
        })
    }

    /// The endpoint of the built-in simulator listening at `base_url` (its chat completions,
    /// or completions with `--token-ids`), with this run's API settings.
    pub fn simulator_endpoint(&self, base_url: &str) -> Result<Endpoint> {
        let url = if self.token_ids {
            format!("{base_url}/v1/completions")
        } else {
            base_url.to_string()
        };
        let mut ep = Endpoint::resolve(
            &url,
            self.api,
            self.stream,
            self.route.clone(),
            self.api_key.clone(),
        )
        .map_err(Error::config)?;
        ep.session_header = self.sessions.session_header.clone();
        Ok(ep)
    }
}

/// The trace file and how to read it.
fn trace_settings(a: &ReplayArgs) -> Result<(TraceSource, LoadOptions)> {
    let trace = match &a.dataset_path {
        Some(p) => {
            must_exist("--dataset-path", p)?;
            TraceSource::File(p.clone())
        }
        None => TraceSource::BuiltinDemo,
    };
    if matches!(trace, TraceSource::BuiltinDemo)
        && a.trace.dataset.is_some_and(|d| d != TraceFormat::Mooncake)
    {
        return Err(Error::config(
            "--dataset given without --dataset-path (the built-in demo trace is mooncake)",
        ));
    }
    if let (Some(s), Some(e)) = (a.start_ms, a.end_ms) {
        if e <= s {
            return Err(Error::config(format!(
                "--end-ms ({e}) must be greater than --start-ms ({s})"
            )));
        }
    }
    for (n, v) in [("--start-ms", a.start_ms), ("--end-ms", a.end_ms)] {
        if let Some(v) = v {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::config(format!(
                    "{n} must be a non-negative number, got {v}"
                )));
            }
        }
    }
    if a.max_requests == Some(0) {
        return Err(Error::config("--max-requests must be at least 1"));
    }
    if a.max_output_tokens == Some(0) {
        return Err(Error::config("--max-output-tokens must be at least 1"));
    }
    let load = LoadOptions {
        start_ms: a.start_ms,
        end_ms: a.end_ms,
        max_requests: a.max_requests,
        ..a.trace.load_options()
    };
    Ok((trace, load))
}

/// `--reorder-window-ms` and `--reorder-window-rows`.
fn reorder_window(a: &ReplayArgs) -> Result<ReorderWindow> {
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
    let start_at = match &a.start_at {
        Some(s) => {
            let at = StartAt::parse(s).map_err(Error::config)?;
            if let Err(late) = at.remaining() {
                return Err(Error::config(format!(
                    "--start-at {}: that is {:.1} s in the past (now {})",
                    at.rfc3339(),
                    late.as_secs_f64(),
                    crate::report::now_rfc3339()
                )));
            }
            Some(at)
        }
        None => None,
    };
    let shard = match &a.shard {
        Some(spec) => Some(Shard::parse(spec).map_err(Error::config)?),
        None => Shard::from_env(|k| std::env::var(k).ok()).map_err(Error::config)?,
    };
    if shard.is_some_and(|s| s.count > 1) && a.seed.is_none() {
        return Err(Error::config(
            "--shard with more than one shard needs --seed: every shard must build the same prompts",
        ));
    }
    Ok((shard, start_at))
}

/// `--tokenizer` (a file or a model directory) and `--tokenizer-config`.
fn tokenizer_files(a: &ReplayArgs) -> Result<(Option<PathBuf>, Option<PathBuf>)> {
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
fn api_key(a: &ReplayArgs) -> Result<Option<String>> {
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
    if a.api == ApiFlavor::Aibrix && a.endpoint.is_none() {
        return Err(Error::config("--api aibrix needs --endpoint"));
    }
    if a.api == ApiFlavor::Aibrix && a.aibrix_route.is_none() {
        return Err(Error::config(
            "--api aibrix needs --aibrix-route (e.g. prefix-cache, throughput)",
        ));
    }
    if a.token_ids && a.api == ApiFlavor::Tgi {
        return Err(Error::config(
            "--token-ids works only with OpenAI completions endpoints",
        ));
    }
    let Some(e) = &a.endpoint else {
        return Ok(Target::BuiltinSimulator);
    };
    let mut ep = Endpoint::resolve(e, a.api, stream, a.aibrix_route.clone(), api_key.clone())
        .map_err(Error::config)?;
    if a.token_ids && ep.kind != ApiKind::Completions {
        return Err(Error::config(format!(
            "--token-ids needs a completions endpoint (…/v1/completions), not {}",
            ep.display_url()
        )));
    }
    ep.session_header = session_header(a)?;
    Ok(Target::Remote(ep))
}

/// `--session-header NAME`, checked as an HTTP header name.
fn session_header(a: &ReplayArgs) -> Result<Option<reqwest::header::HeaderName>> {
    match &a.sessions.session_header {
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
fn session_options(a: &ReplayArgs) -> Result<crate::schedule::SessionOptions> {
    if a.sessions.live_history && a.sessions.timing != crate::schedule::Timing::Closed {
        return Err(Error::config(
            "--live-history needs --timing closed: a turn can carry the server's earlier answers only when it is sent after them",
        ));
    }
    Ok(crate::schedule::SessionOptions {
        timing: a.sessions.timing,
        think: a.sessions.think_time,
        skip_after_failed_parent: a.sessions.skip_after_failed_parent,
        session_user: a.sessions.session_user,
        session_header: session_header(a)?,
        live_history: a.sessions.live_history,
    })
}

/// Speed, limits and timeouts.
struct Timing {
    scale_factor: f64,
    time_limit: Option<Duration>,
    timeout: TimeoutRule,
    early_stop: Option<EarlyStop>,
}

fn timing(a: &ReplayArgs, client: bool) -> Result<Timing> {
    let scale_factor = positive("--scale-factor", a.scale_factor)?;
    let time_in_secs = match (a.time_in_secs, client) {
        (Some(t), _) => Some(positive("--time-in-secs", t)?),
        (None, true) => Some(60.0),
        (None, false) => None,
    };
    let (ttft_slo, tpot_slo) = slo_seconds(a, client);
    for (name, v) in [("--ttft-slo", ttft_slo), ("--tpot-slo", tpot_slo)] {
        if let Some(v) = v {
            positive(name, v)?;
        }
    }
    let timeout = match (a.request_timeout, ttft_slo, tpot_slo) {
        (Some(t), _, _) => {
            TimeoutRule::Fixed(Duration::from_secs_f64(positive("--request-timeout", t)?))
        }
        (None, None, None) => TimeoutRule::Fixed(Duration::from_secs(600)),
        (None, t, p) => TimeoutRule::FromSlo {
            ttft_s: t.unwrap_or(0.0),
            tpot_s: p.unwrap_or(0.0),
        },
    };
    if !a.pool_idle_timeout.is_finite() || a.pool_idle_timeout <= 0.0 {
        return Err(Error::config(format!(
            "--pool-idle-timeout must be > 0 seconds, got {}",
            a.pool_idle_timeout
        )));
    }
    if !a.grace_secs.is_finite() || a.grace_secs < 0.0 {
        return Err(Error::config(format!(
            "--grace-secs must be >= 0, got {}",
            a.grace_secs
        )));
    }
    let early_stop = a
        .early_stop_error_threshold
        .as_deref()
        .map(EarlyStop::parse)
        .transpose()
        .map_err(Error::config)?;
    if !(1..=48).contains(&a.rt_priority) {
        return Err(Error::config(format!(
            "--rt-priority must be between 1 and 48, got {}",
            a.rt_priority
        )));
    }
    if a.spin_us > 100_000 {
        return Err(Error::config(format!(
            "--spin-us must be at most 100000, got {}",
            a.spin_us
        )));
    }
    Ok(Timing {
        scale_factor,
        time_limit: time_in_secs.map(Duration::from_secs_f64),
        timeout,
        early_stop,
    })
}

/// `--ttft-slo`/`--tpot-slo` in seconds (the `client` binary defaults them as the anchor does).
fn slo_seconds(a: &ReplayArgs, client: bool) -> (Option<f64>, Option<f64>) {
    match client {
        true => (
            Some(a.ttft_slo.unwrap_or(5.0)),
            Some(a.tpot_slo.unwrap_or(0.06)),
        ),
        false => (a.ttft_slo, a.tpot_slo),
    }
}

/// Producers, lookahead and I/O threads: (lookahead bytes, lookahead time, threads).
fn pipeline_settings(a: &ReplayArgs) -> Result<(u64, Duration, usize)> {
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
fn output_paths(a: &ReplayArgs, client: bool) -> Result<(PathBuf, PathBuf)> {
    let output_path = match (&a.output_path, client) {
        (Some(p), _) => p.clone(),
        (None, true) => PathBuf::from("./log/output.jsonl"),
        (None, false) => {
            let ts: String = crate::report::now_rfc3339()
                .chars()
                .take(19)
                .filter(|c| c.is_ascii_digit() || *c == 'T')
                .map(|c| if c == 'T' { '-' } else { c })
                .collect();
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

/// Percentiles and goodput SLOs (`--goodput`, or the anchor's `--ttft-slo`/`--tpot-slo`).
fn report_settings(a: &ReplayArgs, client: bool) -> Result<ReportConfig> {
    let defaults: &[f64] = if client {
        &[90.0, 95.0, 99.0]
    } else {
        &crate::report::DEFAULT_PERCENTILES
    };
    let mut report = a.report.report_config(defaults)?;
    if report.slo.ttft_ms.is_none() {
        report.slo.ttft_ms = a.ttft_slo.map(|s| s * 1e3);
    }
    if report.slo.tpot_ms.is_none() {
        report.slo.tpot_ms = a.tpot_slo.map(|s| s * 1e3);
    }
    Ok(report)
}

/// `--server-metrics`, `--metrics-interval`, `--max-drift-ms`.
fn server_metrics(a: &ReplayArgs) -> Result<Option<ServerMetrics>> {
    if !a.max_drift_ms.is_finite() || a.max_drift_ms < 0.0 {
        return Err(Error::config(format!(
            "--max-drift-ms must be a number >= 0, got {}",
            a.max_drift_ms
        )));
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
