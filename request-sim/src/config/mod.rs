//! Validated replay settings, parsed once from the command line. Every invalid combination
//! is rejected here, before anything is sent.
//!
//! [`ReplayConfig`] holds one group per phase of the run, as [`ReplayArgs`] holds one flag group
//! per phase; each group, its checks and the values it derives are in the file of its name:
//! `trace`, `prompts`, `target`, `schedule`, `requests`, `output`, `validity` (`check`: the
//! checks of one value that several groups share). [`ReplayConfig::from_args`] runs the checks
//! in one fixed order, so that of several bad flags the same one is always reported.

mod check;
mod output;
mod prompts;
mod requests;
mod scenario;
mod schedule;
mod target;
mod trace;
mod validity;

pub use output::{report_config, LiveMetricsConfig, OutputConfig};
pub use prompts::{fresh_seed, PromptConfig};
pub use requests::{EarlyStop, RequestPolicy, TimeoutRule};
pub use schedule::ScheduleConfig;
pub use target::{Target, TargetConfig};
pub use trace::{load_options, reshape_settings, AgentSettings, TraceConfig, TraceSource};
pub use validity::{parse_interval, ServerMetrics, ValidityConfig};

use crate::backend::Endpoint;
use crate::cli::{IgnoredArgs, ReplayArgs};
use crate::{Error, Result};

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
    /// Every flag's value as given or defaulted (the summary's `rerun.settings`).
    pub settings: crate::runfile::Settings,
    /// `--scenario`: the rules applied to the flags, and the stamp (`crate::scenario`).
    pub scenario: Option<crate::scenario::Stamp>,
}

impl ReplayConfig {
    /// Validate the flags once; every contradiction is an [`Error::Config`] naming the flag.
    /// (The `client` binary's defaults are set by [`crate::compat::blitz`] before this.)
    pub fn from_args(mut a: ReplayArgs) -> Result<ReplayConfig> {
        let scenario = scenario::apply(&mut a).map_err(Error::config)?;
        schedule::single_run(&a.schedule)?;
        let (source, load) = trace::trace_settings(&a)?;
        let start_at = schedule::start_at(&a.schedule)?;
        let shard = trace::shard(&a.trace, a.prompts.seed)?;
        let tokenizer_files = prompts::tokenizer_files(&a.prompts)?;
        let api_key = target::api_key(&a.target)?;
        let stream = !a.requests.no_stream;
        let server = target::target(&a, stream, &api_key)?;
        // An API that takes only token ids (vLLM's gRPC engine) implies --token-ids.
        if matches!(&server, Target::Remote(ep) if ep.kind.needs_token_ids()) {
            a.prompts.token_ids = true;
        }
        let speed = schedule::speed(&a.schedule)?;
        let timeout = requests::timeout_rule(&a.requests, &a.output)?;
        target::check_pool_idle_timeout(&a.target)?;
        let early_stop = requests::early_stop(&a.requests)?;
        let threads = schedule::threads(&a.schedule)?;
        // The demo (the built-in simulator and trace, no output named) writes its result
        // directory, report.html included, into a new directory beside its records.
        let demo_page = matches!(source, TraceSource::BuiltinDemo)
            && matches!(server, Target::BuiltinSimulator)
            && a.output.output_path.is_none()
            && a.output.report.result_dir.is_none();
        let paths = output::output_paths(&a.output, demo_page)?;
        if demo_page {
            a.output.report.result_dir = Some(output::demo_result_dir(&paths.0));
        }
        let trace_file = match &source {
            TraceSource::File(p) => Some(p.as_path()),
            TraceSource::BuiltinDemo => None,
        };
        let mut inputs = Vec::new();
        if let Some(t) = trace_file {
            inputs.push((t, "trace (--dataset-path)"));
        }
        if let Some(c) = &a.run_file.config {
            inputs.push((c.as_path(), "run file (--config)"));
        }
        output::check_output_files(&a.output, (&paths.0, &paths.1), &inputs)?;
        let report = output::report_settings(&a.output)?;
        let server_metrics = validity::server_metrics(&a.validity)?;
        let live_metrics = output::live_metrics(&a.output.live_metrics)?;
        let sessions = requests::session_options(&a.requests.sessions)?;
        let sessions = requests::agent_sessions(&a, &source, &load, sessions)?;
        let corpus = prompts::corpus_spec(&a.prompts)?;
        let reorder = trace::reorder_window(&a.trace)?;
        let trace = TraceConfig {
            source,
            load,
            reorder,
            shard,
            max_idle_gap_ms: trace::max_idle_gap(&a.trace)?,
            agents: trace::agent_settings(&a.trace, a.requests.dry_run)?,
        };
        let mut notes = ignored_flags(&a.ignored);
        if let Some(s) = &scenario {
            notes.extend(s.notes.iter().cloned());
        }
        let settings = std::mem::take(&mut a.run_file.settings);
        Ok(ReplayConfig {
            target: TargetConfig::new(a.target, server, api_key)?,
            trace,
            prompts: PromptConfig::new(a.prompts, tokenizer_files, corpus),
            schedule: ScheduleConfig::new(a.schedule, speed, start_at, threads),
            requests: RequestPolicy::new(a.requests, stream, timeout, early_stop, sessions),
            output: OutputConfig::new(a.output, paths, report, live_metrics),
            validity: ValidityConfig::new(a.validity, server_metrics),
            notes,
            settings,
            scenario,
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
