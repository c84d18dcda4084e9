//! The `aiperf` binary: request-sim with the command line of AIPerf 0.13's `aiperf profile`
//! (ai-dynamo/aiperf; flags and defaults read from `aiperf profile --help` and its sources in
//! the PyPI package aiperf 0.13.0; no code is taken from it), for trace replay:
//!
//! ```text
//! aiperf profile --model M --endpoint-type chat --streaming --url HOST:PORT \
//!   --input-file trace.jsonl --custom-dataset-type mooncake_trace --fixed-schedule
//! ```
//!
//! The command line is translated into a `request-sim replay` command line
//! ([`ProfileArgs::replay_argv`]) that always writes AIPerf's result files into
//! `--output-artifact-dir` (`--export aiperf`, with `--record-itl` for its
//! `inter_chunk_latency`). AIPerf flags with no meaning for a trace replay are accepted with a
//! start-up note ([`split_ignored`], the names in [`super::aiperf_flags`]); a name AIPerf does
//! not have is refused. What each flag becomes: `docs/coming-from-aiperf.md`.

use std::path::{Path, PathBuf};

use clap::{Args, CommandFactory, Parser, Subcommand};

use super::aiperf_flags::PROFILE_FLAGS;
use crate::cli::{Cli, Command, ReplayArgs};

/// `aiperf`: AIPerf's command line.
#[derive(Debug, Parser)]
#[command(
    name = "aiperf",
    version,
    about = "request-sim with the command line of AIPerf's `aiperf profile` (trace replay)"
)]
pub struct AiperfCli {
    #[command(subcommand)]
    pub command: AiperfCommand,
}

#[derive(Debug, Subcommand)]
pub enum AiperfCommand {
    /// Replay a trace (`--input-file`) at its timestamps and write AIPerf's result files.
    Profile(Box<ProfileArgs>),
}

/// The `aiperf profile` flags a trace replay applies, with AIPerf's defaults.
#[derive(Debug, Clone, Args)]
pub struct ProfileArgs {
    /// Model name(s) (`--model-names`, `--model`, `-m`); comma-separated, the first is used.
    #[arg(
        long = "model-names",
        visible_alias = "model",
        short = 'm',
        value_delimiter = ','
    )]
    pub model: Vec<String>,
    /// Base URL of the server (http:// is added when no scheme is given).
    #[arg(long, short = 'u', default_value = "http://localhost:8000")]
    pub url: Vec<String>,
    /// API: chat, completions, responses, messages.
    #[arg(long, default_value = "chat")]
    pub endpoint_type: String,
    /// A custom API path instead of the endpoint type's (`--custom-endpoint`, `--endpoint`).
    #[arg(long = "custom-endpoint", visible_alias = "endpoint")]
    pub custom_endpoint: Option<String>,
    /// Stream the answers (AIPerf's default is not to stream).
    #[arg(long)]
    pub streaming: bool,
    #[arg(long, default_value_t = 21600.0)]
    pub request_timeout_seconds: f64,
    #[arg(long)]
    pub api_key: Option<String>,
    /// HTTP headers, Header:Value (repeatable).
    #[arg(long, short = 'H', num_args = 1..)]
    pub header: Vec<String>,
    /// Fields added to every request body: key:value pairs or a JSON object.
    #[arg(long, num_args = 1..)]
    pub extra_inputs: Vec<String>,
    #[arg(long)]
    pub input_file: Option<PathBuf>,
    /// mooncake_trace, bailian_trace, burst_gpt_trace, single_turn, dag_jsonl, tracelab,
    /// weka_trace (dashes or underscores).
    #[arg(long)]
    pub custom_dataset_type: Option<String>,
    #[command(flatten)]
    pub schedule: ScheduleFlags,
    #[command(flatten)]
    pub output: OutputFlags,
    #[command(flatten)]
    pub scenario: ScenarioFlags,
}

/// AIPerf's scenario and agentic-replay flags (agentx-harness 1.0.12).
#[derive(Debug, Clone, Args)]
pub struct ScenarioFlags {
    /// agentx or inferencex-agentx-mvp (request-sim's --scenario).
    #[arg(long)]
    pub scenario: Option<String>,
    /// Run a scenario whose rules a flag breaks; stamped submission_valid: false.
    #[arg(long)]
    pub unsafe_override: bool,
    /// Agentic replay: the lanes (request-sim's --users) of a Weka corpus.
    #[arg(long)]
    pub concurrency: Option<usize>,
    #[arg(long)]
    pub trajectory_start_min_ratio: Option<f64>,
    #[arg(long)]
    pub trajectory_start_max_ratio: Option<f64>,
    #[arg(long)]
    pub warmup_requests_per_lane: Option<usize>,
    /// The per-trace idle-gap cap (request-sim's --max-idle-gap).
    #[arg(long)]
    pub trace_idle_gap_cap_seconds: Option<f64>,
}

/// AIPerf's fixed-schedule and run-length flags.
#[derive(Debug, Clone, Args)]
pub struct ScheduleFlags {
    #[arg(long)]
    pub fixed_schedule: bool,
    #[arg(long)]
    pub no_fixed_schedule: bool,
    #[arg(long)]
    pub fixed_schedule_auto_offset: bool,
    /// Skip the rows before this trace time (ms).
    #[arg(long)]
    pub fixed_schedule_start_offset: Option<f64>,
    /// Skip the rows after this trace time (ms; a row at exactly it is sent).
    #[arg(long)]
    pub fixed_schedule_end_offset: Option<f64>,
    #[arg(long = "request-count", visible_alias = "num-requests")]
    pub request_count: Option<usize>,
    #[arg(long)]
    pub benchmark_duration: Option<f64>,
    /// Seconds in-flight requests get after --benchmark-duration (`inf`: the request timeout).
    #[arg(long, default_value = "30")]
    pub benchmark_grace_period: String,
    #[arg(long)]
    pub random_seed: Option<u64>,
}

/// AIPerf's output, tokenizer and goodput flags.
#[derive(Debug, Clone, Args)]
pub struct OutputFlags {
    /// Where every file goes (`--output-artifact-dir`, `--artifact-dir`).
    #[arg(
        long = "output-artifact-dir",
        visible_alias = "artifact-dir",
        default_value = "artifacts"
    )]
    pub artifact_dir: PathBuf,
    /// A local tokenizer directory or tokenizer.json (default: --model when it is one).
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// SLOs, TAG:VALUE in the metric's display unit: time_to_first_token:MS,
    /// inter_token_latency:MS, request_latency:MS, time_to_first_output_token:MS,
    /// output_token_throughput_per_user:TOKENS_PER_S.
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    #[arg(long)]
    pub no_server_metrics: bool,
    /// none: no progress line.
    #[arg(long = "ui-type", visible_alias = "ui")]
    pub ui_type: Option<String>,
}

/// What the translation decided, besides the replay command line.
#[derive(Debug, Clone)]
pub struct ProfilePlan {
    /// `request-sim replay ...` arguments (without the program name and subcommand).
    pub argv: Vec<String>,
    /// Lines to print at start-up.
    pub notes: Vec<String>,
}

/// Append `flag value` to a command line.
fn push(a: &mut Vec<String>, flag: &str, value: impl Into<String>) {
    a.push(flag.to_string());
    a.push(value.into());
}

/// Split `argv` (after `profile`) into the arguments this front end reads and the AIPerf flags
/// it accepts without applying (each with the values that follow it); returns both. A name
/// neither knows is kept, for clap to refuse.
pub fn split_ignored(argv: &[String]) -> (Vec<String>, Vec<String>) {
    let cmd = ProfileArgs::augment_args(clap::Command::new("profile"));
    let mut ours: Vec<String> = Vec::new();
    for a in cmd.get_arguments() {
        ours.extend(
            a.get_long_and_visible_aliases()
                .into_iter()
                .flatten()
                .map(|l| format!("--{l}")),
        );
        ours.extend(
            a.get_short_and_visible_aliases()
                .into_iter()
                .flatten()
                .map(|s| format!("-{s}")),
        );
    }
    let (mut kept, mut ignored) = (Vec::new(), Vec::new());
    let mut dropping = false;
    for arg in argv {
        if arg.starts_with('-') && arg.len() > 1 {
            let name = arg.split('=').next().unwrap_or(arg);
            dropping = !ours.iter().any(|o| o == name) && PROFILE_FLAGS.contains(&name);
            if dropping {
                ignored.push(name.to_string());
                continue;
            }
        } else if dropping {
            continue;
        }
        kept.push(arg.clone());
    }
    (kept, ignored)
}

impl ProfileArgs {
    /// Translate into a `request-sim replay` command line.
    pub fn replay_argv(&self) -> crate::Result<ProfilePlan> {
        let mut a = Vec::new();
        let mut notes = Vec::new();
        self.push_target(&mut a, &mut notes)?;
        self.push_trace(&mut a, &mut notes)?;
        self.schedule
            .push(&mut a, &mut notes, self.request_timeout_seconds)?;
        self.output.push(&mut a, &mut notes, &self.model)?;
        let weka = self
            .custom_dataset_type
            .as_deref()
            .is_some_and(|k| k.replace('-', "_") == "weka_trace");
        self.scenario.push(&mut a, &mut notes, weka)?;
        Ok(ProfilePlan { argv: a, notes })
    }

    /// The server, API, model, headers and body fields.
    fn push_target(&self, a: &mut Vec<String>, notes: &mut Vec<String>) -> crate::Result<()> {
        let path = match self.endpoint_type.replace('-', "_").as_str() {
            "chat" => "/v1/chat/completions",
            "completions" => "/v1/completions",
            "responses" => "/v1/responses",
            "messages" => "/v1/messages",
            other => {
                return Err(crate::Error::config(format!(
                    "--endpoint-type {other}: not supported for trace replay (use chat, \
                     completions, responses or messages)"
                )))
            }
        };
        let [url] = self.url.as_slice() else {
            return Err(crate::Error::config(
                "several --url: request-sim replays against one URL (put a router in front, \
                 e.g. llm-sim --router)",
            ));
        };
        let base = if url.contains("://") {
            url.trim_end_matches('/').to_string()
        } else {
            format!("http://{}", url.trim_end_matches('/'))
        };
        let path = self.custom_endpoint.as_deref().unwrap_or(path);
        let sep = if path.starts_with('/') { "" } else { "/" };
        push(a, "--endpoint", format!("{base}{sep}{path}"));
        match self.model.first() {
            Some(m) => push(a, "--model-name", m.clone()),
            None => notes.push("no --model: the first model of GET /v1/models is used".into()),
        }
        if self.model.len() > 1 {
            notes.push(format!(
                "--model {}: every request names the first (AIPerf would alternate)",
                self.model.join(",")
            ));
        }
        // A scenario turns streaming on when --streaming is not given (AgentX does).
        if !self.streaming && self.scenario.scenario.is_none() {
            a.push("--no-stream".into());
            notes.push("no --streaming: answers come whole (AIPerf's default), so TTFT is the whole answer's time".into());
        }
        push(
            a,
            "--request-timeout",
            self.request_timeout_seconds.to_string(),
        );
        if let Some(k) = &self.api_key {
            push(a, "--api-key", k.clone());
        }
        for h in &self.header {
            push(a, "--header", header(h)?);
        }
        if !self.extra_inputs.is_empty() {
            push(
                a,
                "--extra-body",
                extra_inputs(&self.extra_inputs)?.to_string(),
            );
        }
        Ok(())
    }

    /// The trace and its format.
    fn push_trace(&self, a: &mut Vec<String>, notes: &mut Vec<String>) -> crate::Result<()> {
        let Some(file) = &self.input_file else {
            return Err(crate::Error::config(
                "--input-file is needed: request-sim replays a trace (synthetic and public \
                 datasets are AIPerf's own)",
            ));
        };
        if !file.exists() {
            return Err(crate::Error::config(format!(
                "--input-file {}: no such file",
                file.display()
            )));
        }
        push(a, "--dataset-path", file.display().to_string());
        let Some(kind) = &self.custom_dataset_type else {
            notes.push("no --custom-dataset-type: the trace's format is detected".into());
            return Ok(());
        };
        let dataset =
            match kind.replace('-', "_").as_str() {
                // Hash-id rows or AIPerf's text_input/messages rows: detected.
                "mooncake_trace" => None,
                "single_turn" => Some("messages"),
                "bailian_trace" => Some("bailian"),
                "burst_gpt_trace" => Some("burstgpt"),
                "dag_jsonl" => Some("dag_jsonl"),
                "tracelab" => Some("tracelab"),
                "weka_trace" => Some("weka"),
                "multi_turn" => return Err(crate::Error::config(
                    "--custom-dataset-type multi_turn: not read by request-sim; write each turn \
                     as a row with its session_id and whole messages (request-sim's messages \
                     format, docs/traces.md)",
                )),
                other => {
                    return Err(crate::Error::config(format!(
                    "--custom-dataset-type {other}: not supported (mooncake_trace, single_turn, \
                     bailian_trace, burst_gpt_trace, dag_jsonl, tracelab, weka_trace)"
                )))
                }
            };
        if let Some(d) = dataset {
            push(a, "--dataset", d);
        }
        Ok(())
    }
}

impl ScheduleFlags {
    /// Which rows, how many, for how long.
    fn push(
        &self,
        a: &mut Vec<String>,
        notes: &mut Vec<String>,
        timeout: f64,
    ) -> crate::Result<()> {
        if self.no_fixed_schedule {
            return Err(crate::Error::config(
                "--no-fixed-schedule: request-sim sends every request at its trace time \
                 (concurrency and request-rate modes are AIPerf's)",
            ));
        }
        if self.fixed_schedule_auto_offset && self.fixed_schedule_start_offset.is_some() {
            return Err(crate::Error::config(
                "--fixed-schedule-auto-offset and --fixed-schedule-start-offset are mutually \
                 exclusive (as in AIPerf)",
            ));
        }
        if let Some(s) = self.fixed_schedule_start_offset {
            push(a, "--start-ms", s.to_string());
        }
        if let Some(e) = self.fixed_schedule_end_offset {
            // AIPerf sends a row at exactly the end offset; --end-ms is exclusive.
            push(a, "--end-ms", (e + END_INCLUSIVE_MS).to_string());
        }
        if let Some(n) = self.request_count {
            push(a, "--max-requests", n.to_string());
        }
        if let Some(d) = self.benchmark_duration {
            push(a, "--time-in-secs", d.to_string());
            let grace = match self.benchmark_grace_period.trim() {
                "inf" => timeout,
                g => g.parse::<f64>().map_err(|_| {
                    crate::Error::config(format!(
                        "--benchmark-grace-period {g:?}: expected seconds or inf"
                    ))
                })?,
            };
            push(a, "--grace-secs", grace.to_string());
        }
        if let Some(s) = self.random_seed {
            push(a, "--seed", s.to_string());
        }
        if !self.fixed_schedule {
            notes.push("requests go at the trace's timestamps (AIPerf's fixed schedule, which it picks for timestamped traces)".into());
        }
        Ok(())
    }
}

impl ScenarioFlags {
    /// The scenario and the agentic replay's lanes, warm start and gap cap.
    fn push(&self, a: &mut Vec<String>, notes: &mut Vec<String>, weka: bool) -> crate::Result<()> {
        if let Some(s) = &self.scenario {
            push(a, "--scenario", s.clone());
        }
        if self.unsafe_override {
            a.push("--scenario-override".into());
        }
        match self.concurrency {
            Some(n) if weka || self.scenario.is_some() => push(a, "--users", n.to_string()),
            Some(_) => notes.push("--concurrency: requests go at the trace's timestamps (a Weka corpus with --custom-dataset-type weka_trace or --scenario replays --concurrency lanes)".into()),
            None => {}
        }
        let default = match &self.scenario {
            Some(s) => {
                crate::scenario::Spec::named(s)
                    .map_err(crate::Error::config)?
                    .start_ratios
            }
            // AIPerf's phase defaults.
            None => (0.25, 0.75),
        };
        if self.trajectory_start_min_ratio.is_some() || self.trajectory_start_max_ratio.is_some() {
            let lo = self.trajectory_start_min_ratio.unwrap_or(default.0);
            let hi = self.trajectory_start_max_ratio.unwrap_or(default.1);
            push(a, "--trajectory-start", format!("{lo}..{hi}"));
        }
        if let Some(n) = self.warmup_requests_per_lane {
            push(a, "--warmup-requests-per-lane", n.to_string());
        }
        if let Some(g) = self.trace_idle_gap_cap_seconds {
            push(a, "--max-idle-gap", g.to_string());
        }
        Ok(())
    }
}

/// `agentx`: AgentX's command line (agentx-harness 1.0.12), AIPerf's with one default: a
/// `profile` without `--scenario` or `--config`/`-f` runs `--scenario agentx`.
pub fn run_agentx(mut argv: Vec<String>) -> crate::Result<u8> {
    if argv.get(1).map(String::as_str) == Some("profile") {
        let end = argv.iter().position(|t| t == "--").unwrap_or(argv.len());
        let chosen = argv[2..end].iter().any(|t| {
            ["--scenario", "--config", "-f"].contains(&t.as_str())
                || t.starts_with("--scenario=")
                || t.starts_with("--config=")
                || (t.starts_with("-f") && !t.starts_with("--"))
        });
        if !chosen {
            argv.splice(2..2, ["--scenario".to_string(), "agentx".to_string()]);
        }
    }
    run(argv)
}

/// Added to `--fixed-schedule-end-offset` so that request-sim's exclusive `--end-ms` keeps a
/// row at exactly the offset, as AIPerf does.
const END_INCLUSIVE_MS: f64 = 1e-6;

impl OutputFlags {
    /// The artifact directory, tokenizer, goodput and console.
    fn push(
        &self,
        a: &mut Vec<String>,
        notes: &mut Vec<String>,
        model: &[String],
    ) -> crate::Result<()> {
        let dir = &self.artifact_dir;
        push(a, "--result-dir", dir.display().to_string());
        push(
            a,
            "--output-path",
            dir.join(RECORDS_NAME).display().to_string(),
        );
        push(a, "--export", "aiperf");
        a.push("--record-itl".into());
        // AIPerf writes its artifact directory over the last run's.
        a.push("--overwrite".into());
        let local = |t: &str| {
            let p = Path::new(t);
            p.join("tokenizer.json").is_file() || (p.is_file() && t.ends_with(".json"))
        };
        match self
            .tokenizer
            .as_deref()
            .or(model.first().map(String::as_str))
        {
            Some(t) if local(t) => push(a, "--tokenizer", t.to_string()),
            Some(t) => notes.push(format!(
                "tokenizer {t} is not a local tokenizer.json or directory: prompt lengths are \
                 made exact with the server's /tokenize when it has one"
            )),
            None => {}
        }
        if !self.goodput.is_empty() {
            a.push("--goodput".into());
            for g in &self.goodput {
                a.push(goodput(g)?);
            }
        }
        if self.no_server_metrics {
            a.push("--no-server-metrics".into());
        }
        if self.ui_type.as_deref() == Some("none") {
            a.push("-q".into());
        }
        Ok(())
    }
}

/// request-sim's records file in the artifact directory (AIPerf's own names are its exports).
pub const RECORDS_NAME: &str = "request_sim_records.jsonl";

/// An AIPerf `--header` (`Name:Value`, or a JSON object of one header) as `NAME:VALUE`.
fn header(h: &str) -> crate::Result<String> {
    if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(h) {
        let pairs: Vec<String> = m
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}:{}",
                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                )
            })
            .collect();
        if let [one] = pairs.as_slice() {
            return Ok(one.clone());
        }
        return Err(crate::Error::config(format!(
            "--header {h}: give one header per --header"
        )));
    }
    if h.contains(':') {
        Ok(h.to_string())
    } else {
        Err(crate::Error::config(format!(
            "--header {h:?}: expected Header:Value"
        )))
    }
}

/// AIPerf's `--extra-inputs` (key:value pairs, a value read as JSON when it is JSON, or JSON
/// objects) as one JSON object.
fn extra_inputs(given: &[String]) -> crate::Result<serde_json::Value> {
    let mut out = serde_json::Map::new();
    for g in given {
        if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(g) {
            out.extend(m);
            continue;
        }
        let (k, v) = g.split_once(':').ok_or_else(|| {
            crate::Error::config(format!(
                "--extra-inputs {g:?}: expected key:value or a JSON object"
            ))
        })?;
        let value = serde_json::from_str(v.trim())
            .unwrap_or_else(|_| serde_json::Value::String(v.trim().to_string()));
        out.insert(k.trim().to_string(), value);
    }
    Ok(serde_json::Value::Object(out))
}

/// An AIPerf goodput SLO (`TAG:VALUE` in the metric's display unit) as request-sim's.
fn goodput(g: &str) -> crate::Result<String> {
    let bad = || {
        crate::Error::config(format!(
            "--goodput {g}: expected TAG:VALUE with TAG one of time_to_first_token, \
             inter_token_latency, request_latency, time_to_first_output_token (ms) or \
             output_token_throughput_per_user (tokens/s)"
        ))
    };
    let (tag, v) = g.split_once(':').ok_or_else(bad)?;
    let v: f64 = v.trim().parse().map_err(|_| bad())?;
    Ok(match tag.trim() {
        "time_to_first_token" => format!("ttft:{v}"),
        "inter_token_latency" => format!("tpot:{v}"),
        "request_latency" => format!("e2el:{v}"),
        "time_to_first_output_token" => format!("ttfa:{v}"),
        // Tokens/s per user is 1000 / ITL (ms): at least X tokens/s is an ITL of at most 1000/X.
        "output_token_throughput_per_user" if v > 0.0 => format!("tpot:{}", 1000.0 / v),
        _ => return Err(bad()),
    })
}

/// Run `aiperf` with `argv` (the program name first): translate, replay.
pub fn run(argv: Vec<String>) -> crate::Result<u8> {
    let (kept, ignored) = split_ignored(argv.get(1..).unwrap_or(&[]));
    let cli = match AiperfCli::try_parse_from(argv.iter().take(1).cloned().chain(kept)) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return Ok(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let AiperfCommand::Profile(args) = cli.command;
    let mut plan = args.replay_argv()?;
    if !ignored.is_empty() {
        plan.notes.push(format!(
            "{} accepted, no effect on a trace replay (docs/coming-from-aiperf.md)",
            ignored.join(", ")
        ));
    }
    for n in &plan.notes {
        eprintln!("aiperf: {n}");
    }
    let argv = ["request-sim", "replay"]
        .into_iter()
        .map(String::from)
        .chain(plan.argv.iter().cloned());
    let replay: ReplayArgs = match Cli::try_parse_from(argv) {
        Ok(Cli {
            command: Command::Replay(a),
        }) => *a,
        Ok(_) => return Err(crate::Error::internal("not a replay command line")),
        Err(e) => {
            return Err(in_aiperf_terms(crate::Error::config(format!(
                "cannot translate the command line: {e}"
            ))))
        }
    };
    crate::commands::replay(replay).map_err(in_aiperf_terms)
}

/// `replay` flags that messages name, in `aiperf profile`'s words.
const AIPERF_TERMS: [(&str, &str); 6] = [
    ("--model-name", "--model"),
    ("--extra-body", "--extra-inputs"),
    ("--dataset-path", "--input-file"),
    ("--max-requests", "--request-count"),
    ("--time-in-secs", "--benchmark-duration"),
    ("--result-dir", "--output-artifact-dir"),
];

/// An error of the translated replay with its flag names put in AIPerf's terms.
fn in_aiperf_terms(e: crate::Error) -> crate::Error {
    let t = |m: String| AIPERF_TERMS.iter().fold(m, |m, (f, t)| m.replace(f, t));
    match e {
        crate::Error::Server(m) => crate::Error::Server(t(m)),
        crate::Error::Config(m) => crate::Error::Config(t(m)),
        other => other,
    }
}

/// The `aiperf` command's clap definition (for `--help` checks in tests).
pub fn command() -> clap::Command {
    AiperfCli::command()
}
