//! Command-line parsing: clap only, the flag groups and the value parsers clap calls on one
//! flag's text (`parse_format`, `parse_block_size`, ...). Checking the flags together and
//! deriving settings from them happens in [`crate::config`].
//!
//! `request-sim replay` and the anchor-compatible `client` binary
//! ([`crate::compat::blitz`]) share [`ReplayArgs`]: every flag of the blitz-serving
//! trace-replayer is accepted with its meaning, plus ours.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::backend::ApiFlavor;
use crate::trace::TraceFormat;

mod convert;
mod runfile;
pub use convert::{parse_log_format, parse_time_format, ConvertArgs};
pub use runfile::{replay_keys, ConfigAction, ConfigArgs, ExperimentArgs, RunFileArgs};

#[derive(Debug, Parser)]
#[command(
    name = "request-sim",
    version,
    about = "Replay production LLM request traces against inference servers"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay a trace against a server (no --endpoint: the built-in simulator; no
    /// --dataset-path: the built-in demo trace).
    Replay(Box<ReplayArgs>),
    /// Print what a trace contains before replaying it (rates, lengths, cache potential).
    Analyze(AnalyzeArgs),
    /// Recompute the summary (and result files) from a saved records JSONL.
    Report(ReportArgs),
    /// Print two runs side by side with the relative change of each headline metric.
    Compare(CompareArgs),
    /// Check that every prompt of a trace re-tokenizes to exactly its length and that shared
    /// hash ids give shared token prefixes.
    VerifyPrompts(VerifyArgs),
    /// Reshape a trace and write the new one: N independent copies (--amplify), new arrivals
    /// (--retime, --rate-series), sampled sessions, capped think times, longer or shorter
    /// prompts, a time window; or a new trace of any length synthesized from a fit of it
    /// (--synthesize). The same options work on `replay`. docs/transform.md.
    Transform(Box<TransformArgs>),
    /// Replay the same trace slice at several scale factors (one result directory per point)
    /// and answer how much load the server carries (within --goodput SLOs when given). Every
    /// point is bounded: --max-requests (default 2000 in a sweep) and --time-in-secs (default
    /// 300 s in a sweep; a --users point without either replays the agent corpus once, at most
    /// 300 s); Ctrl-C keeps the points done so far (exit 130).
    Sweep(Box<SweepArgs>),
    /// Turn a request log (OpenAI-format, LiteLLM, OpenTelemetry GenAI spans, or a messages
    /// trace; plain, .gz, .zst or .bz2) into an anonymized trace: lengths counted by the
    /// target model's tokenizer and chat template, salted hash ids of the prompt's blocks,
    /// sessions; no prompt text (docs/convert.md).
    Convert(Box<ConvertArgs>),
    /// Run files: `config schema` prints the JSON schema of `--config` files
    /// (docs/config.md).
    Config(ConfigArgs),
    /// Run an experiment file: a base run and [[point]]s overriding some of its settings
    /// (scale factor, users, model map, API, endpoint, ...), each run `repeats` times into
    /// DIR/NAME/, then every point compared with the baseline: the console, experiment.json
    /// and one page, DIR/report.html (docs/config.md).
    Experiment(ExperimentArgs),
}

/// Flags of `sweep`: the points, then every `replay` flag (`--scale-factor`, `--output-path`,
/// `--summary-path` and `--result-dir` are set per point).
#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// Scale factors to replay, comma-separated (e.g. 0.5,1,2,4). Without them the sweep
    /// searches for the highest scale factor carried (see --search).
    #[arg(long, value_delimiter = ',', conflicts_with = "search")]
    pub scale_factors: Vec<f64>,
    /// Capacity search from the bracket LO,HI (default: from scale 1): doubling or halving
    /// until one point is carried and one falls short, then bisecting until HI/LO is within
    /// --tolerance, at most --max-points points.
    #[arg(long, value_delimiter = ',', value_name = "LO,HI")]
    pub search: Vec<f64>,
    /// Capacity search: most points to run.
    #[arg(long, default_value_t = 8)]
    pub max_points: usize,
    /// Capacity search: stop when the bracket's HI/LO is at most 1 + this.
    #[arg(long, default_value_t = 0.05)]
    pub tolerance: f64,
    /// With --goodput: the fraction of scheduled requests that must meet every SLO for a point
    /// to count as carried. Without: a point is carried when throughput keeps up with the
    /// offered rate (>= 90%).
    #[arg(long, default_value_t = 0.95)]
    pub target: f64,
    /// Directory of the sweep: scale-F/ per point (records, summary, result files) and
    /// sweep.json (default: results/sweep-<UTC time>).
    #[arg(long)]
    pub sweep_dir: Option<PathBuf>,
    /// GPUs serving the model: the throughput-vs-interactivity curve of a --users sweep is
    /// then per GPU (InferenceX's axes).
    #[arg(long, value_name = "N")]
    pub gpus: Option<u32>,
    #[command(flatten)]
    pub replay: ReplayArgs,
}

/// Flags of `replay` (and of the `client` binary), in groups that follow the run's phases
/// (the groups of [`crate::config::ReplayConfig`]); `--help` lists them under these headings.
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// `--config FILE` and what the flags resolved to ([`crate::runfile`]).
    #[command(flatten)]
    pub run_file: RunFileArgs,
    #[command(flatten)]
    pub trace: ReplayTraceArgs,
    #[command(flatten)]
    pub prompts: PromptArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    #[command(flatten)]
    pub requests: RequestArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub validity: ValidityArgs,
    #[command(flatten)]
    pub ignored: IgnoredArgs,
    #[command(flatten)]
    pub scenario: ScenarioArgs,
}

/// A named benchmark profile (`crate::scenario`).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Scenario")]
pub struct ScenarioArgs {
    /// Apply a benchmark's rules: `agentx` (InferenceX AgentX) or `inferencex-agentx-mvp`.
    /// A flag that breaks a rule is refused (docs/agentx.md).
    #[arg(long, value_name = "NAME")]
    pub scenario: Option<String>,
    /// With --scenario: run even when a flag breaks a rule; the run is stamped
    /// submission_valid: false with the violations (AgentX's --unsafe-override).
    #[arg(long, alias = "unsafe-override", requires = "scenario")]
    pub scenario_override: bool,
}

/// `--grace-secs` when not given.
pub const DEFAULT_GRACE_SECS: f64 = 5.0;

/// The trace, the part of it replayed, and this shard's share.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Trace")]
pub struct ReplayTraceArgs {
    /// Trace file (JSONL, CSV for azure, optionally .gz; `-` = standard input). Default: the
    /// built-in demo trace.
    #[arg(long)]
    pub dataset_path: Option<PathBuf>,
    #[command(flatten)]
    pub format: TraceArgs,
    /// Replay only requests with trace time >= this (ms, after rebasing to the first request).
    #[arg(long)]
    pub start_ms: Option<f64>,
    /// Replay only requests with trace time < this (ms).
    #[arg(long)]
    pub end_ms: Option<f64>,
    /// Replay at most this many requests.
    #[arg(long)]
    pub max_requests: Option<usize>,
    /// A replay reads the trace as it goes: rows out of time order by up to this many trace
    /// milliseconds (behind the latest row read) are put in order; a row earlier than that is
    /// an error naming its line.
    #[arg(long, value_name = "MS", default_value_t = 10_000.0)]
    pub reorder_window_ms: f64,
    /// The reorder window holds at most this many rows (its memory bound).
    #[arg(long, value_name = "ROWS", default_value_t = 65_536)]
    pub reorder_window_rows: usize,
    /// Send only shard K of N (0 <= K < N) of the trace: sessions stay whole on one shard,
    /// other requests are dealt round-robin; record indexes stay those of the whole trace, so
    /// `request-sim report DIR` merges the shards (docs/scale-out.md). Needs --seed when N > 1.
    /// Default: JOB_COMPLETION_INDEX and REQUEST_SIM_SHARD_COUNT when both are set.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Cap every client gap (think/tool time between a request and the one before it in its
    /// session) at this many seconds; the number of gaps cut is in the summary. On a trace
    /// (not an agent corpus) the later turns move earlier and the trace is loaded whole
    /// (docs/transform.md).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub max_idle_gap: Option<f64>,
    /// Agent corpora: replay as N concurrent users, each taking the next conversation (seeded
    /// order) when its previous one ended. Default: every conversation once, all at the start.
    /// `sweep` takes a list (`--users 1,2,4,8,16`: one point per number; without
    /// --time-in-secs and --max-requests a point replays the corpus once, at most 300 s).
    #[arg(
        long,
        value_name = "N",
        value_delimiter = ',',
        conflicts_with = "session_rate"
    )]
    pub users: Vec<usize>,
    /// Agent corpora: conversations start at this rate (per second, Poisson, seeded).
    #[arg(long, value_name = "R")]
    pub session_rate: Option<f64>,
    /// Agent corpora: conversations share the blocks of their tools + system prompt (keyed by
    /// those token counts), as agents of one client version do.
    #[arg(long)]
    pub share_system_prefix: bool,
    /// Agent corpora with --users: each user's first conversation starts warm, at a fraction
    /// of its recorded span drawn (seeded) in MIN..MAX; what it did before is primed, not
    /// measured (docs/agentx.md, "Warm trajectories").
    #[arg(long, value_name = "MIN..MAX", value_parser = crate::trace::pipeline::plan::TrajectoryStart::parse_range)]
    pub trajectory_start: Option<(f64, f64)>,
    /// With --trajectory-start: this many more warm-up requests per user after the primers
    /// (1 output token, no client gap).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warmup_requests_per_lane: usize,
    /// Last: clap does not restore the heading after a flattened group, so the flags after it
    /// would be listed under its heading (`Transform`) in `--help` and in run files.
    #[command(flatten)]
    pub reshape: ReshapeArgs,
}

/// How prompts are made.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Prompts")]
pub struct PromptArgs {
    /// HF tokenizer.json of the served model, or its model directory (tokenizer.json and
    /// tokenizer_config.json inside): prompts get exactly the trace's token counts.
    /// Without it the server's POST /tokenize is used when it has one (vLLM, SGLang,
    /// llama.cpp), else a built-in word list (exact only against the built-in simulator).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Never ask the server's /tokenize: without --tokenizer, use the built-in word list.
    #[arg(long)]
    pub no_server_tokenize: bool,
    /// Run even when prompt token counts cannot be exact: without --tokenizer, against a server
    /// that neither lists its vocabulary through /tokenize nor is llm-sim, prompts are the
    /// built-in word list (several tokens a word with a real model). Refused without this flag.
    #[arg(long)]
    pub allow_inexact_prompts: bool,
    /// tokenizer_config.json: its chat template gives the chat overhead without a server call.
    #[arg(long)]
    pub tokenizer_config: Option<PathBuf>,
    /// Seed of the synthetic prompts (default: fresh per run, recorded in the summary).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Tokens the chat template adds around the content (default: measured at start-up).
    #[arg(long)]
    pub chat_overhead: Option<u32>,
    /// Send prompts as token ids (completions endpoints of vLLM / SGLang).
    #[arg(long)]
    pub token_ids: bool,
    /// What prompt text is made of: `words` (one-token words at random; the default) or
    /// `corpus` (windows of real text from --prompt-corpus; the default when it is given).
    #[arg(long, value_enum)]
    pub prompt_source: Option<crate::prompt::PromptSource>,
    /// Real text for prompts, at the trace's exact lengths and sharing: ShareGPT JSON
    /// (`[{"conversations": [{"value": ..}]}]`), JSONL (see --prompt-corpus-field), a UTF-8
    /// text file, or a directory of .txt files. Read locally at start-up (its first 4 MB).
    #[arg(long, value_name = "PATH")]
    pub prompt_corpus: Option<PathBuf>,
    /// The text field of the rows of a JSONL --prompt-corpus (a string or an array of strings).
    #[arg(long, value_name = "NAME", default_value = "text")]
    pub prompt_corpus_field: String,
    /// The model family whose image token rule sizes the images of image rows (Azure LMM
    /// `NumImages`, Bailian `type: image`, ServeGen multimodal; docs/images.md): qwen2-vl or
    /// qwen2.5-vl. A family whose rule is not known is refused.
    #[arg(long, value_name = "FAMILY", default_value = "qwen2.5-vl", value_parser = llm_common::vision::ImageRule::parse)]
    pub image_rule: llm_common::vision::ImageRule,
    /// Image tokens per image when the trace does not say (the two vision markers not
    /// included; 256 is a 448×448 image); images shrink when a row is too short for them.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(4..=16384))]
    pub image_tokens: u32,
    /// Send image rows as text of their length (no images).
    #[arg(long)]
    pub no_images: bool,
}

/// The server requests go to and how to reach it.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Target")]
pub struct TargetArgs {
    /// Full URL (http://h:p/v1/chat/completions, .../v1/completions, .../v1/responses,
    /// .../v1/messages, .../generate, .../generate_stream) or base URL (http://h:p = chat
    /// completions, or the path of --api). Default: start the built-in simulator on 127.0.0.1.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// API family (openai: the endpoint's path picks chat, completions, Responses or
    /// Messages; responses: OpenAI Responses; messages: Anthropic Messages).
    #[arg(long, short = 'a', value_enum, default_value = "openai")]
    pub api: ApiFlavor,
    /// Model name sent in requests (default: the first of GET /v1/models).
    #[arg(long)]
    pub model_name: Option<String>,
    /// Send each request to a served model chosen by the model its trace names: `'Model
    /// A=qwen3-8b,Model B=llama-70b'` (`*=NAME`: every other model), `@FILE` (one `TRACE=SERVED`
    /// a line), or `auto` (the trace's models spread over GET /v1/models by share of
    /// requests). A trace model the map misses is refused before anything is sent
    /// (docs/models.md).
    #[arg(long, value_name = "MAP")]
    pub model_map: Option<String>,
    /// AIBrix routing strategy (routing-strategy header).
    #[arg(long)]
    pub aibrix_route: Option<String>,
    /// API key (default: $OPENAI_API_KEY). Never printed or written.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Read the API key from this file.
    #[arg(long, conflicts_with = "api_key")]
    pub api_key_file: Option<PathBuf>,
    /// An HTTP header sent with every request, NAME:VALUE (repeatable).
    #[arg(long, value_name = "NAME:VALUE")]
    pub header: Vec<String>,
    /// Accept invalid TLS certificates.
    #[arg(long)]
    pub insecure: bool,
    /// Seconds an idle keep-alive connection is kept for reuse; keep it below the server's
    /// keep-alive timeout (uvicorn/vLLM and llama.cpp: 5 s).
    #[arg(long, value_name = "SECS", default_value_t = crate::backend::DEFAULT_POOL_IDLE_TIMEOUT_S)]
    pub pool_idle_timeout: f64,
    /// Do not open connections ahead of bursts. By default, 50 ms before requests due together
    /// that need more keep-alive connections than the pool is known to hold, that many
    /// `GET /v1/models` (`/health` for TGI) open them, so the burst does not connect at its
    /// send time (counted in the summary: `run.dispatch.warm_gets`).
    #[arg(long)]
    pub no_warm_connections: bool,
}

/// When requests are sent, and the threads that build and send them.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Schedule")]
pub struct ScheduleArgs {
    /// Replay speed: 2 sends requests at twice the trace's rate.
    #[arg(long, default_value_t = 1.0)]
    pub scale_factor: f64,
    /// Stop sending after this many seconds (then in-flight requests get --grace-secs).
    #[arg(long, short = 't')]
    pub time_in_secs: Option<f64>,
    /// Start the trace clock at this wall-clock instant (RFC 3339 such as 2026-11-22T18:00:00Z,
    /// or Unix seconds), after start-up: the common start of several shards. A start already
    /// past, or reached before start-up ends, is an error. Hosts' clocks must be synchronised.
    #[arg(long, value_name = "TIME", env = "REQUEST_SIM_START_AT")]
    pub start_at: Option<String>,
    /// Producer threads that build request bodies ahead of schedule.
    #[arg(long, default_value_t = 1)]
    pub num_producer: usize,
    /// Prepared requests buffered between producers and the dispatcher.
    #[arg(long, default_value_t = 128)]
    pub channel_capacity: usize,
    /// Memory budget of request bodies built ahead and not yet sent, MB (the channel capacity
    /// bounds their number, this their bytes).
    #[arg(long, value_name = "MB", default_value_t = 64.0)]
    pub lookahead_mb: f64,
    /// Build a request body at most this many seconds before it is due.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    pub lookahead_secs: f64,
    /// Tokio worker threads (default: number of cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Spin this many microseconds before each send time instead of sleeping.
    #[arg(long, default_value_t = 300)]
    pub spin_us: u64,
    /// Do not pin producer threads to cores.
    #[arg(long)]
    pub no_pin: bool,
    /// Run the dispatcher, and the I/O threads around send times, under real-time scheduling
    /// (SCHED_FIFO) so other work on the machine cannot delay a send: auto = when permitted
    /// (root, CAP_SYS_NICE or `ulimit -r`), on = fail if not permitted, off = never.
    #[arg(long, value_enum, default_value = "auto")]
    pub realtime: crate::schedule::RealtimeMode,
    /// SCHED_FIFO priority of the I/O threads for --realtime (1-48; the dispatcher runs one
    /// above).
    #[arg(long, default_value_t = crate::schedule::priority::DEFAULT_RT_PRIORITY)]
    pub rt_priority: u8,
    /// Do not keep the cores awake before sends. By default, while --realtime raises the I/O
    /// threads before a send (not before closed-loop releases), one lowest-priority (SCHED_IDLE)
    /// thread per core spins, so a virtual machine's idle cores are running when the burst
    /// wakes the I/O threads (`run.realtime.keep_awake_raises`).
    #[arg(long)]
    pub no_keep_awake: bool,
    /// Replay the same slice N times, each with a fresh seed (new prompt texts, same lengths
    /// and sharing) and the server's prefix cache reset before it; each repeat's records,
    /// summary and result files go to DIR/repeat-K/ (DIR: --result-dir, default
    /// results/repeat-<UTC time>), and DIR/repeats.json gives every headline metric's mean and
    /// 95% confidence interval over the repeats (docs/metrics.md).
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
}

/// What each request asks for, how long it may take, and the sessions' rules.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Requests")]
pub struct RequestArgs {
    /// Stream responses (SSE). `replay` streams by default; the `client` binary, like the
    /// anchor, only with --stream.
    #[arg(long, conflicts_with = "no_stream")]
    pub stream: bool,
    /// Do not stream.
    #[arg(long)]
    pub no_stream: bool,
    /// Do not ask for exactly output_length tokens with min_tokens/ignore_eos (for servers
    /// that reject those vLLM extensions).
    #[arg(long)]
    pub no_exact_output: bool,
    /// A row's recorded thinking length (or budget) as the API's budget field: `auto` (vLLM's
    /// `thinking_token_budget` on chat/completions, `thinking.budget_tokens` on Messages when
    /// 1024 <= it < max_tokens) or `off` (for servers that reject unknown fields).
    #[arg(long, value_enum, value_name = "MODE", default_value = "auto")]
    pub thinking_budget: crate::backend::ThinkingBudget,
    /// Extra top-level fields for every request body, as JSON (`'{"temperature": 0}'`) or
    /// `@FILE` (vLLM bench's `--extra-body`): sampling options, `tools`/`tool_choice`, vendor
    /// switches. Fields request-sim sets itself are refused; a `messages` row's `extra` wins.
    #[arg(long, value_name = "JSON|@FILE", value_parser = crate::backend::parse_extra_body)]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// Accept streams without usage (output tokens are then counted from chunks).
    #[arg(long)]
    pub allow_missing_usage: bool,
    /// Cap every request's output_length at N tokens (requested and recorded): short outputs
    /// for load tests where the server must keep up with high request rates.
    #[arg(long, value_name = "N")]
    pub max_output_tokens: Option<u32>,
    /// Per-request timeout in seconds (default: max(15, ttft_slo + tpot_slo * output_length)
    /// with SLOs given, else 600).
    #[arg(long)]
    pub request_timeout: Option<f64>,
    /// Seconds in-flight requests get to finish after a stop (Ctrl-C, time limit, early stop).
    #[arg(long, default_value_t = DEFAULT_GRACE_SECS)]
    pub grace_secs: f64,
    /// Stop early after this many failed requests ("50") or this failure rate ("5%", "0.05").
    #[arg(long)]
    pub early_stop_error_threshold: Option<String>,
    #[command(flatten)]
    pub sessions: SessionArgs,
    /// Build and schedule everything but send nothing (records get status dry_run).
    #[arg(long)]
    pub dry_run: bool,
}

/// The records, the summary, the result files and the console.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Per-request JSONL records (default: results/replay-<UTC time>.jsonl).
    #[arg(long, short = 'o')]
    pub output_path: Option<PathBuf>,
    /// Summary JSON (default: <output-path>.summary.json).
    #[arg(long)]
    pub summary_path: Option<PathBuf>,
    /// Replace a records file already at --output-path (without it, such a run is refused).
    #[arg(long)]
    pub overwrite: bool,
    #[command(flatten)]
    pub report: ReportFlags,
    /// Save every request's prompt as built (with the trace's timestamp, output_length and
    /// session) as a `messages` trace (AIPerf-style JSONL; `text_input` rows for completions
    /// endpoints, `prompt_token_ids` rows with --token-ids) that replays byte-identically.
    /// With --dry-run: build and save, send nothing.
    #[arg(long, value_name = "PATH")]
    pub save_prompts: Option<PathBuf>,
    /// Keep each request's inter-token latencies in its record.
    #[arg(long)]
    pub record_itl: bool,
    /// TTFT SLO in seconds (anchor syntax; used for goodput and the request timeout).
    #[arg(long)]
    pub ttft_slo: Option<f64>,
    /// TPOT SLO in seconds (anchor syntax; used for goodput and the request timeout).
    #[arg(long)]
    pub tpot_slo: Option<f64>,
    /// No progress line.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    #[command(flatten)]
    pub live_metrics: LiveMetricsFlags,
}

/// `--metrics-port`: the client's own metrics as a Prometheus page while the run goes
/// (docs/server-metrics.md, "Live client metrics").
#[derive(Debug, Clone, Default, Args)]
pub struct LiveMetricsFlags {
    /// Serve the client's metrics (TTFT, TPOT, ITL, E2E histograms with vLLM's buckets, send
    /// drift, requests by status, in flight) as Prometheus text on GET /metrics at this port
    /// during the run (0: any free port, said at start-up).
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// Address the metrics page listens on (an IP address; 0.0.0.0 in a container).
    #[arg(
        long,
        value_name = "IP",
        default_value = "127.0.0.1",
        requires = "metrics_port"
    )]
    pub metrics_host: String,
    /// The `run_id` label of every series (default: --start-at when given, so all shards of
    /// a run share it; else the UTC start-up time).
    #[arg(long, value_name = "ID", requires = "metrics_port")]
    pub metrics_run_id: Option<String>,
    /// Seconds the page keeps the final values up after the run, for the last scrape (0: stop
    /// with the run).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 5.0,
        requires = "metrics_port"
    )]
    pub metrics_linger: f64,
}

/// Server metrics and what makes a run invalid.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Server metrics and run validity")]
pub struct ValidityArgs {
    /// Scrape these Prometheus /metrics URLs during the run (comma-separated; a bare
    /// http://host:port gets /metrics): every instance behind a router. Without it, the
    /// endpoint's origin /metrics is scraped when it answers at start-up.
    #[arg(long, value_name = "URL,...", value_delimiter = ',')]
    pub server_metrics: Vec<String>,
    /// How often to scrape server metrics: seconds (0.5) or with a unit (100ms, 2s); at least
    /// 100 ms.
    #[arg(long, value_name = "INTERVAL", default_value = "1s")]
    pub metrics_interval: String,
    /// Do not scrape any server metrics.
    #[arg(long, conflicts_with = "server_metrics")]
    pub no_server_metrics: bool,
    /// Tell which instance served each request from the instances' KV cache events (vLLM
    /// --kv-events-config, ZeroMQ): INSTANCE_URL=tcp://HOST:PORT per instance, or bare
    /// tcp://HOST:PORT in the order of the scraped instances (comma-separated). Records carry
    /// the instance and its votes (kv_placement); the per-instance table and the routed ideal
    /// follow. For routers that do not say (docs/server-metrics.md).
    #[arg(long, value_name = "[URL=]tcp://HOST:PORT,...", value_delimiter = ',')]
    pub kv_events: Vec<String>,
    /// The run is flagged INVALID when the send drift p99 exceeds this many ms (the client fell
    /// behind the schedule), or the receive lateness p99 does (the client read its tokens late:
    /// docs/metrics.md, "Receive lateness").
    #[arg(long, value_name = "MS", default_value_t = 5.0)]
    pub max_drift_ms: f64,
    /// Exit with status 4 when the run is flagged invalid (drift, incomplete server metrics).
    #[arg(long)]
    pub strict: bool,
    /// Exit with status 6 when more than this fraction (0.05 = 5%) of the requests sent and
    /// not cancelled ended in error (http_error, timeout, connect_error, protocol_error).
    /// The run still goes to its end and records everything (unlike
    /// --early-stop-error-threshold). A run with no successful request exits 5 regardless.
    #[arg(long, value_name = "FRACTION")]
    pub max_error_rate: Option<f64>,
}

/// Flags of the anchor (blitz-serving's trace-replayer) accepted for compatibility; no effect.
#[derive(Debug, Clone, Args)]
pub struct IgnoredArgs {
    #[arg(long, hide = true)]
    pub tracing_path: Option<PathBuf>,
    #[arg(long, hide = true)]
    pub cache: Option<String>,
    #[arg(long, hide = true)]
    pub cache_path: Option<PathBuf>,
}

/// How a trace is reshaped: the same flags for `transform` and `replay` (docs/transform.md).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Transform")]
pub struct ReshapeArgs {
    /// N copies of the trace with disjoint hash-id and session spaces (N independent users for
    /// each recorded one); a fraction (1.5) adds a copy of a seeded half of the sessions.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub amplify: Option<f64>,
    /// Copy k >= 1 of --amplify is shifted by a seeded phase in [0, SECS) so that bursts do not
    /// align (0: aligned copies).
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 10.0,
        allow_negative_numbers = true
    )]
    pub amplify_phase: f64,
    /// Grow or shrink the blocks shared by several requests by this factor (new blocks get
    /// fresh ids; the prefix tree keeps its shape).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub prefix_scale: Option<f64>,
    /// Grow or shrink the blocks (and tokens) of one request only by this factor.
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub prompt_scale: Option<f64>,
    /// Cut longer prompts to this many tokens (and their hash ids with them).
    #[arg(long, value_name = "TOKENS")]
    pub max_input_length: Option<u32>,
    /// New session start times from an arrival process at --rate session starts per second;
    /// the later turns of a session keep their gaps. gamma takes --burstiness.
    #[arg(long, value_enum)]
    pub retime: Option<RetimeKind>,
    /// Mean rate of --retime: session starts per second. A row without a session is a session
    /// of one, so on a trace without sessions this is the request rate; on a trace with
    /// sessions the requests arrive at another rate, set by the turns and their gaps
    /// (transform prints it). With --synthesize:
    /// requests per second of the new trace.
    #[arg(long, value_name = "PER_S", allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// --retime gamma: coefficient of variation of the gaps between session starts (1 =
    /// Poisson, more = burstier).
    #[arg(long, value_name = "CV", allow_negative_numbers = true)]
    pub burstiness: Option<f64>,
    /// New session starts from a Poisson process whose rate follows this file: `SECONDS RATE`
    /// lines (session starts per second, as --rate; linear in between).
    #[arg(long, value_name = "FILE")]
    pub rate_series: Option<PathBuf>,
    /// Give rows without a session the one their hash ids continue: a request whose hash ids
    /// extend an earlier request's full blocks is its next turn (before the other transforms,
    /// so --amplify copies the sessions).
    #[arg(long)]
    pub infer_sessions: bool,
    /// Keep each whole session with this probability (seeded; rows without a session are
    /// sampled one by one).
    #[arg(long, value_name = "P", allow_negative_numbers = true)]
    pub sample_sessions: Option<f64>,
    /// Keep the requests whose (transformed) time is in [START, END) seconds; either side may
    /// be left out (`600..`).
    #[arg(long, value_name = "START..END")]
    pub time_window: Option<String>,
}

/// `--retime`'s arrival processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RetimeKind {
    Poisson,
    Gamma,
}

/// Flags of `transform`.
#[derive(Debug, Clone, Args)]
pub struct TransformArgs {
    /// Trace to read (any format request-sim reads; `-` = standard input).
    pub trace: PathBuf,
    /// Where the new trace goes (JSONL; `-` = standard output).
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    #[command(flatten)]
    pub format: TraceArgs,
    /// Seed of every random choice (phases, samples, arrivals, synthesis): the same seed and
    /// trace give the same output.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Cap every session's think time at this many seconds.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub max_idle_gap: Option<f64>,
    #[command(flatten)]
    pub reshape: ReshapeArgs,
    /// Fit the trace (arrival rate over time and its burstiness, input and output lengths
    /// jointly, the prefix-tree shape) and write a new trace of --duration from the fit.
    #[arg(long, requires = "duration")]
    pub synthesize: bool,
    /// --synthesize: length of the new trace in seconds.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub duration: Option<f64>,
    /// Print the analysis of the original and the new trace side by side when done.
    #[arg(long)]
    pub compare: bool,
}

/// How a trace file is read: the same flags for `replay`, `analyze` and `verify-prompts`.
#[derive(Debug, Clone, Default, Args)]
pub struct TraceArgs {
    #[arg(long, short = 'd', value_parser = parse_format, help = dataset_help())]
    pub dataset: Option<TraceFormat>,
    /// Tokens per hash id (default: 512 mooncake, 16 bailian, 512 generic, 64 tracelab; a
    /// Dynamo trace's is in the file).
    #[arg(long, alias = "hash-block-size", value_parser = parse_block_size)]
    pub block_size: Option<usize>,
    /// Skip malformed trace lines (counted in the summary) instead of stopping.
    #[arg(long)]
    pub skip_invalid: bool,
    /// BurstGPT: drop the failed requests (0 response tokens) instead of replaying them with
    /// output length 0; the run counts them either way.
    #[arg(long)]
    pub drop_failed: bool,
}

/// What a report computes and where its files go: the same flags for `replay` and `report`.
#[derive(Debug, Clone, Default, Args)]
pub struct ReportFlags {
    /// SLOs for goodput, vLLM syntax: ttft:MS tpot:MS e2el:MS, and ttfa:MS (time to the first
    /// answer token, after any thinking).
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    /// Percentiles to report, comma-separated (each in (0, 100]; sorted, repeats dropped).
    #[arg(long, alias = "metric-percentiles", value_delimiter = ',', value_parser = crate::stats::parse_percentile)]
    pub metric_percentile: Option<Vec<f64>>,
    /// Also write summary.json, requests.csv, results.xlsx, plots and report.html into this
    /// directory (replay's demo, the built-in trace and simulator without --output-path, writes
    /// them into results/replay-<time>/ by default).
    #[arg(long, alias = "save-result")]
    pub result_dir: Option<PathBuf>,
    /// Compute every statistic over the requests sent in this span of the run: START..END in
    /// seconds since the run's start (30..270; 30.. to the end), or auto: the steady span of
    /// the in-flight count (docs/metrics.md, "Steady-state window"). The records keep every
    /// request.
    #[arg(long, value_name = "START..END|auto", value_parser = crate::stats::MeasureWindow::parse)]
    pub measure_window: Option<crate::stats::MeasureWindow>,
    /// Also write other tools' result files into --result-dir, comma-separated: aiperf
    /// (AIPerf's profile_export.jsonl, profile_export_aiperf.json/.csv, and on a replay
    /// inputs.json), vllm-bench (vllm-bench.json, the JSON of `vllm bench serve
    /// --save-result --save-detailed`). docs/coming-from-aiperf.md
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LAYOUT")]
    pub export: Vec<crate::report::export::ExportKind>,
}

#[derive(Debug, Clone, Args)]
pub struct AnalyzeArgs {
    /// Trace file.
    pub trace: PathBuf,
    #[command(flatten)]
    pub format: TraceArgs,
    /// LRU cache sizes to simulate, in tokens, comma-separated (default: a sweep).
    #[arg(long, value_delimiter = ',')]
    pub cache_sizes: Vec<u64>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Write plots (cache-capacity curve, request rate) into this directory.
    #[arg(long)]
    pub plot_dir: Option<PathBuf>,
    /// Routing what-if: N instances, each with its own prefix cache of --cache-tokens, every
    /// request routed by each --routing policy (llm-sim's router's code); hit ratio per policy.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub instances: Option<u32>,
    /// Routing policies to compare, comma-separated (default: all): round-robin, least-loaded,
    /// session, prefix-aware.
    #[arg(long, value_delimiter = ',', requires = "instances")]
    pub routing: Vec<llm_common::routing::Policy>,
    /// Prefix-cache capacity of one instance, tokens (default: llm-sim's qwen3-8b-h100, 23,500
    /// blocks of 16 = 376,000 tokens).
    #[arg(long, requires = "instances")]
    pub cache_tokens: Option<u64>,
    /// A second trace (e.g. the output of `transform`) to show side by side with the first:
    /// rates, burstiness, length percentiles, ideal and LRU hit ratios, sessions, think times.
    #[arg(long, value_name = "TRACE")]
    pub against: Option<PathBuf>,
    /// Agent corpora: count the client gaps longer than this many seconds (what a replay with
    /// the same --max-idle-gap would cut).
    #[arg(long, value_name = "SECS", value_parser = parse_idle_gap)]
    pub max_idle_gap: Option<f64>,
    /// Agent corpora: the load N concurrent users imply (requests in flight, request rate).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub users: Option<u32>,
}

/// Parse a `--max-idle-gap` value (seconds, finite, >= 0).
fn parse_idle_gap(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "--max-idle-gap must be a number of seconds >= 0, got {s:?}"
        )),
    }
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Records JSONL of a run; several files or a directory (its *.jsonl files) are the shards
    /// of one run, merged exactly and checked to hold every request index once.
    #[arg(required = true, num_args = 1..)]
    pub records: Vec<PathBuf>,
    /// Number of requests of the whole (sharded) run, for the union check of a merge (default:
    /// the highest index seen + 1, which cannot notice missing requests at the very end).
    #[arg(long)]
    pub expected_requests: Option<usize>,
    #[command(flatten)]
    pub report: ReportFlags,
    /// Print the summary as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// First run: a summary JSON (its records are read when found beside it), a records
    /// JSONL, a directory of shard records (merged), or a repeat set (`--repeat` directory or
    /// its repeats.json).
    pub a: PathBuf,
    /// Second run.
    pub b: PathBuf,
    /// Exit with status 7 when METRIC (a summary key: p99_ttft_ms, mean_e2el_ms,
    /// request_throughput, cache_hit_ratio, ...) is significantly worse in B than in A by more
    /// than PCT percent. Repeatable. A metric that could not be tested exits 1.
    #[arg(long, value_name = "METRIC:PCT", value_parser = crate::stats::compare::FailIfWorse::parse)]
    pub fail_if_worse: Vec<crate::stats::compare::FailIfWorse>,
    /// Print the comparison (verdicts, method, differing settings) as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the comparison as a self-contained HTML page.
    #[arg(long, value_name = "PATH")]
    pub html: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// Trace file.
    pub trace: PathBuf,
    /// HF tokenizer.json.
    #[arg(long)]
    pub tokenizer: PathBuf,
    #[command(flatten)]
    pub format: TraceArgs,
    #[arg(long)]
    pub max_requests: Option<usize>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Check real-text prompts made from this corpus (as `replay --prompt-corpus`).
    #[arg(long, value_name = "PATH")]
    pub prompt_corpus: Option<PathBuf>,
    /// The text field of a JSONL --prompt-corpus.
    #[arg(long, value_name = "NAME", default_value = "text")]
    pub prompt_corpus_field: String,
}

/// `--dataset`'s help: every format, as the formats list themselves.
fn dataset_help() -> String {
    format!(
        "Trace format ({}); detected from the content when not given",
        crate::trace::formats::registry::names()
    )
}

/// Parse a `--dataset` value: a format's name or alias (the formats list themselves).
pub fn parse_format(s: &str) -> Result<TraceFormat, String> {
    TraceFormat::from_name(s).ok_or_else(|| {
        format!(
            "unknown dataset {:?}: use {}",
            s.trim(),
            crate::trace::formats::registry::names()
        )
    })
}

/// Parse a `--block-size` value (1 to 1048576 tokens per hash id).
pub fn parse_block_size(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(b) if (1..=1 << 20).contains(&b) => Ok(b),
        _ => Err(format!(
            "--block-size must be between 1 and 1048576, got {s:?}"
        )),
    }
}

/// Session (multi-turn) flags of `replay`.
#[derive(Args, Debug, Clone, Default)]
pub struct SessionArgs {
    /// open: every request at its trace time; closed: a later turn of a session is released at
    /// max(its trace time, parent's completion + --think-time).
    #[arg(long, value_enum, default_value = "open")]
    pub timing: crate::schedule::Timing,
    /// Think time of --timing closed: milliseconds, or `trace` for the trace's own gap between
    /// the two turns (a messages row's `delay`), divided by --scale-factor.
    /// Default 0; only with --timing closed.
    #[arg(long, value_parser = crate::schedule::ThinkTime::parse)]
    pub think_time: Option<crate::schedule::ThinkTime>,
    /// --timing closed: do not send a turn whose parent failed (it is recorded as skipped);
    /// by default it is still sent.
    #[arg(long)]
    pub skip_after_failed_parent: bool,
    /// Put the session id in the OpenAI `user` field (routers that pin sessions by it).
    #[arg(long)]
    pub session_user: bool,
    /// Send each request's session id in this HTTP header (e.g. x-session-id), for routers
    /// that pin a session to an instance, or name the router: smg (X-SMG-Routing-Key),
    /// production-stack (x-user-id), llm-sim (x-session-id). Requests without a session get
    /// no header.
    #[arg(long, value_name = "NAME")]
    pub session_header: Option<String>,
    /// --timing closed with a messages trace: a later turn carries the text the server
    /// actually answered to the earlier turns in place of the trace's recorded assistant
    /// messages, as a real client would send it.
    #[arg(long)]
    pub live_history: bool,
}
