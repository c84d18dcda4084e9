//! The `trace_replay` binary: request-sim with the command line of UCM's
//! `benchmarks/trace_replay.py` (ModelEngine-Group/unified-cache-management; its README
//! `benchmarks/README.md` documents `--backend --model --host --port --trace-path --trace-mode
//! --dataset-name --save-prompts --save-result --result-dir`, the rest are the flags of vLLM's
//! `vllm bench serve` (`vllm/benchmarks/serve.py`, `add_cli_args`) that the script inherits).
//! Flags and defaults were read there; no code is taken from it.
//!
//! The UCM command line is translated into a `request-sim replay` command line
//! ([`UcmArgs::replay_argv`]) and run; see the README section "Coming from UCM
//! trace_replay.py" for what each flag becomes.

use std::path::{Path, PathBuf};

use clap::{Args, Parser};

use crate::cli::{Cli, Command, ReplayArgs};

/// `trace_replay`: UCM's flags and defaults.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "trace_replay",
    version,
    about = "request-sim with the command line of UCM's benchmarks/trace_replay.py"
)]
pub struct UcmArgs {
    // The server and model.
    #[command(flatten)]
    pub server: ServerFlags,
    // The trace, how it is replayed, and the results.
    #[command(flatten)]
    pub replay: ReplayFlags,
    // Accepted for compatibility; no effect (a note says so at start-up).
    #[command(flatten)]
    pub ignored_requests: IgnoredRequestFlags,
    #[command(flatten)]
    pub ignored_data: IgnoredDataFlags,
}

/// UCM's flags naming the server and the model.
#[derive(Debug, Clone, Args)]
pub struct ServerFlags {
    /// Backend: vllm, openai, sglang, lmdeploy, scalellm, llama.cpp, tensorrt-llm (OpenAI
    /// completions at --endpoint), openai-chat (chat completions), tgi.
    #[arg(long, default_value = "vllm")]
    pub backend: String,
    /// Server base URL (instead of http://HOST:PORT).
    #[arg(long)]
    pub base_url: Option<String>,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// API path (default /v1/completions; /v1/chat/completions for --backend openai-chat).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Model: the name the server serves it under (unless --served-model-name), and, when it
    /// is a local directory holding tokenizer.json, the tokenizer.
    #[arg(long)]
    pub model: String,
    /// The model name sent in requests (default: --model).
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// Tokenizer directory or tokenizer.json (default: --model when it is a local directory).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
}

/// UCM's flags for the trace, its prompts, the replay and the results.
#[derive(Debug, Clone, Args)]
pub struct ReplayFlags {
    /// The Mooncake-style trace (JSONL with timestamp, input_length, output_length, hash_ids).
    #[arg(long)]
    pub trace_path: PathBuf,
    /// trace: prompts from the trace's hash ids; benchmark: prompts from --dataset-path text.
    #[arg(long, value_parser = ["trace", "benchmark"], default_value = "trace")]
    pub trace_mode: String,
    /// Benchmark mode: sharegpt (ShareGPT JSON), custom (JSONL with a "prompt" field), sonnet
    /// (a text file), random (no text: random words).
    #[arg(long, default_value = "sharegpt")]
    pub dataset_name: String,
    /// Benchmark mode: the local dataset file (nothing is downloaded).
    #[arg(long)]
    pub dataset_path: Option<PathBuf>,
    /// Save every prompt as built (with its timestamp) to RESULT_DIR/<trace name>_dataset.jsonl.
    #[arg(long)]
    pub save_prompts: bool,
    /// Save the results to Excel: RESULT_DIR/metrics.xlsx (and request-sim's result files).
    #[arg(long)]
    pub save_result: bool,
    /// Where results go (default: the current directory).
    #[arg(long)]
    pub result_dir: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Percentiles to report, comma-separated (e.g. 50,90,99).
    #[arg(long)]
    pub metric_percentiles: Option<String>,
    /// SLOs for goodput: ttft:MS tpot:MS e2el:MS.
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    #[arg(long)]
    pub disable_tqdm: bool,
    /// request-sim extension: replay speed (2 = twice the trace's rate; UCM has none).
    #[arg(long, default_value_t = 1.0)]
    pub scale_factor: f64,
}

/// Accepted for compatibility, no effect: how vLLM's benchmark paces, samples and sends
/// requests (the trace's own timing is replayed, open loop).
#[derive(Debug, Clone, Args)]
pub struct IgnoredRequestFlags {
    /// The trace's own timing is replayed (open loop): no concurrency cap.
    #[arg(long, hide = true)]
    pub max_concurrency: Option<String>,
    #[arg(long, hide = true)]
    pub request_rate: Option<String>,
    #[arg(long, hide = true)]
    pub burstiness: Option<String>,
    #[arg(long, hide = true)]
    pub num_prompts: Option<String>,
    #[arg(long, hide = true)]
    pub percentile_metrics: Option<String>,
    #[arg(long, hide = true)]
    pub ignore_eos: bool,
    #[arg(long, hide = true)]
    pub trust_remote_code: bool,
    #[arg(long, hide = true)]
    pub tokenizer_mode: Option<String>,
    #[arg(long, hide = true)]
    pub temperature: Option<String>,
    #[arg(long, hide = true)]
    pub top_p: Option<String>,
    #[arg(long, hide = true)]
    pub top_k: Option<String>,
    #[arg(long, hide = true)]
    pub min_p: Option<String>,
    #[arg(long, hide = true)]
    pub logprobs: Option<String>,
    #[arg(long, hide = true)]
    pub use_beam_search: bool,
    #[arg(long, hide = true)]
    pub profile: bool,
    #[arg(long, hide = true, num_args = 0..)]
    pub header: Vec<String>,
    #[arg(long, hide = true)]
    pub request_id_prefix: Option<String>,
    #[arg(long, hide = true)]
    pub ready_check_timeout_sec: Option<String>,
}

/// Accepted for compatibility, no effect: vLLM's benchmark result files and dataset shapes.
#[derive(Debug, Clone, Args)]
pub struct IgnoredDataFlags {
    #[arg(long, hide = true)]
    pub save_detailed: bool,
    #[arg(long, hide = true)]
    pub append_result: bool,
    #[arg(long, hide = true)]
    pub result_filename: Option<String>,
    #[arg(long, hide = true)]
    pub label: Option<String>,
    #[arg(long, hide = true, num_args = 0..)]
    pub metadata: Vec<String>,
    #[arg(long, hide = true)]
    pub sharegpt_output_len: Option<String>,
    #[arg(long, hide = true)]
    pub custom_output_len: Option<String>,
    #[arg(long, hide = true)]
    pub custom_skip_chat_template: bool,
    #[arg(long, hide = true)]
    pub sonnet_input_len: Option<String>,
    #[arg(long, hide = true)]
    pub sonnet_output_len: Option<String>,
    #[arg(long, hide = true)]
    pub sonnet_prefix_len: Option<String>,
    #[arg(long, hide = true)]
    pub random_input_len: Option<String>,
    #[arg(long, hide = true)]
    pub random_output_len: Option<String>,
    #[arg(long, hide = true)]
    pub random_range_ratio: Option<String>,
    #[arg(long, hide = true)]
    pub random_prefix_len: Option<String>,
    #[arg(long, hide = true)]
    pub hf_subset: Option<String>,
    #[arg(long, hide = true)]
    pub hf_split: Option<String>,
    #[arg(long, hide = true)]
    pub hf_output_len: Option<String>,
}

/// What the translation decided, besides the replay command line.
#[derive(Debug, Clone)]
pub struct UcmPlan {
    /// `request-sim replay ...` arguments (without the program name and subcommand).
    pub argv: Vec<String>,
    /// Lines to print at start-up (what became of UCM's flags).
    pub notes: Vec<String>,
    /// `--save-result`: where to put `metrics.xlsx` after the run.
    pub metrics_xlsx: Option<PathBuf>,
}

/// Backends whose requests go to an OpenAI completions path.
const COMPLETIONS_BACKENDS: &[&str] = &[
    "vllm",
    "openai",
    "sglang",
    "lmdeploy",
    "scalellm",
    "llama.cpp",
    "tensorrt-llm",
];

/// Append `flag value` to a command line.
fn push(a: &mut Vec<String>, flag: &str, value: String) {
    a.push(flag.to_string());
    a.push(value);
}

impl UcmArgs {
    /// Translate into a `request-sim replay` command line.
    pub fn replay_argv(&self) -> crate::Result<UcmPlan> {
        let mut a: Vec<String> = Vec::new();
        let mut notes = Vec::new();
        self.server.push_args(&mut a, &mut notes)?;
        self.replay.push_trace_args(&mut a, &mut notes)?;
        let metrics_xlsx = self.replay.push_output_args(&mut a);
        notes.extend(self.ignored_flags());
        Ok(UcmPlan {
            argv: a,
            notes,
            metrics_xlsx,
        })
    }

    /// Notes for the accepted flags that change nothing here.
    fn ignored_flags(&self) -> Vec<String> {
        let (r, d) = (&self.ignored_requests, &self.ignored_data);
        let mut n = Vec::new();
        if r.max_concurrency.is_some() {
            n.push("--max-concurrency has no effect: requests are sent at the trace's times (open loop), whatever is in flight".to_string());
        }
        let set = [
            ("--request-rate", r.request_rate.is_some()),
            ("--burstiness", r.burstiness.is_some()),
            ("--num-prompts", r.num_prompts.is_some()),
            ("--temperature", r.temperature.is_some()),
            ("--top-p", r.top_p.is_some()),
            ("--top-k", r.top_k.is_some()),
            ("--min-p", r.min_p.is_some()),
            ("--result-filename", d.result_filename.is_some()),
            ("--header", !r.header.is_empty()),
            ("--percentile-metrics", r.percentile_metrics.is_some()),
        ];
        let names: Vec<&str> = set.iter().filter(|s| s.1).map(|s| s.0).collect();
        if !names.is_empty() {
            n.push(format!(
                "{} accepted for compatibility, no effect (timing comes from the trace; every metric is reported)",
                names.join(", ")
            ));
        }
        n
    }
}

impl ServerFlags {
    /// The replay's server, API, model name and tokenizer.
    fn push_args(&self, a: &mut Vec<String>, notes: &mut Vec<String>) -> crate::Result<()> {
        let (api, default_path) = match self.backend.as_str() {
            b if COMPLETIONS_BACKENDS.contains(&b) => ("openai", "/v1/completions"),
            "openai-chat" => ("openai", "/v1/chat/completions"),
            "tgi" => ("tgi", "/generate_stream"),
            other => {
                return Err(crate::Error::config(format!(
                    "--backend {other}: not supported (use vllm, openai, openai-chat, sglang, \
                     lmdeploy, scalellm, llama.cpp, tensorrt-llm or tgi)"
                )))
            }
        };
        let base = match &self.base_url {
            Some(b) => b.trim_end_matches('/').to_string(),
            None => format!("http://{}:{}", self.host, self.port),
        };
        let path = self.endpoint.as_deref().unwrap_or(default_path);
        push(a, "--endpoint", format!("{base}{path}"));
        push(a, "--api", api.to_string());
        push(
            a,
            "--model-name",
            self.served_model_name
                .clone()
                .unwrap_or_else(|| self.model.clone()),
        );
        // ---- tokenizer: --tokenizer, else --model when it is a local model directory ----
        let model_dir = Path::new(&self.model);
        match (&self.tokenizer, model_dir.join("tokenizer.json").is_file()) {
            (Some(t), _) => push(a, "--tokenizer", t.display().to_string()),
            (None, true) => push(a, "--tokenizer", self.model.clone()),
            (None, false) => notes.push(format!(
                "--model {} is not a local directory with tokenizer.json: prompt lengths are \
                 checked with the server's /tokenize when it has one",
                self.model
            )),
        }
        Ok(())
    }
}

impl ReplayFlags {
    /// The trace, its timing and its prompts.
    fn push_trace_args(&self, a: &mut Vec<String>, notes: &mut Vec<String>) -> crate::Result<()> {
        if !self.trace_path.is_file() {
            return Err(crate::Error::config(format!(
                "--trace-path {}: no such file",
                self.trace_path.display()
            )));
        }
        push(a, "--dataset-path", self.trace_path.display().to_string());
        push(a, "--seed", self.seed.to_string());
        push(a, "--scale-factor", self.scale_factor.to_string());
        if self.trace_mode == "benchmark" {
            self.benchmark_prompts(a, notes)?;
        }
        Ok(())
    }

    /// The result files, percentiles, goodput and progress; returns where `metrics.xlsx` goes
    /// (with `--save-result`).
    fn push_output_args(&self, a: &mut Vec<String>) -> Option<PathBuf> {
        let dir = self
            .result_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("."));
        if self.save_prompts {
            let stem = self
                .trace_path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("trace")
                .split('.')
                .next()
                .unwrap_or("trace")
                .to_string();
            push(
                a,
                "--save-prompts",
                dir.join(format!("{stem}_dataset.jsonl"))
                    .display()
                    .to_string(),
            );
        }
        let metrics_xlsx = self.save_result.then(|| dir.join("metrics.xlsx"));
        // An explicit --result-dir is where the results go, with or without --save-result
        // (which adds UCM's metrics.xlsx): a directory given is never ignored.
        if self.save_result || self.result_dir.is_some() {
            push(a, "--result-dir", dir.display().to_string());
            push(
                a,
                "--output-path",
                dir.join("trace_replay_records.jsonl").display().to_string(),
            );
            // UCM's script writes its result directory over the last run's.
            a.push("--overwrite".into());
        }
        if let Some(p) = &self.metric_percentiles {
            push(a, "--metric-percentile", p.clone());
        }
        if !self.goodput.is_empty() {
            a.push("--goodput".into());
            a.extend(self.goodput.iter().cloned());
        }
        if self.disable_tqdm {
            a.push("-q".into());
        }
        metrics_xlsx
    }

    /// `--trace-mode benchmark`: real text from the dataset, at the trace's lengths.
    fn benchmark_prompts(&self, a: &mut Vec<String>, notes: &mut Vec<String>) -> crate::Result<()> {
        let field = match self.dataset_name.as_str() {
            "sharegpt" | "sonnet" => None,
            "custom" => Some("prompt"),
            "random" => {
                notes.push(
                    "--trace-mode benchmark --dataset-name random: random words, as in trace mode"
                        .into(),
                );
                return Ok(());
            }
            other => {
                return Err(crate::Error::config(format!(
                    "--dataset-name {other}: not supported offline; use sharegpt (ShareGPT JSON), \
                     custom (JSONL with a \"prompt\" field) or sonnet (a text file) with a local \
                     --dataset-path"
                )))
            }
        };
        let Some(path) = &self.dataset_path else {
            return Err(crate::Error::config(format!(
                "--trace-mode benchmark --dataset-name {} needs --dataset-path (a local file; \
                 nothing is downloaded)",
                self.dataset_name
            )));
        };
        push(a, "--prompt-corpus", path.display().to_string());
        if let Some(f) = field {
            push(a, "--prompt-corpus-field", f.to_string());
        }
        notes.push(format!(
            "benchmark mode: prompts are {} text at the trace's exact lengths, with the trace's \
             prefix sharing kept (hash ids)",
            self.dataset_name
        ));
        Ok(())
    }
}

/// Run `trace_replay` with `args`: translate, replay, then copy the spreadsheet to UCM's name.
pub fn run(args: UcmArgs) -> crate::Result<u8> {
    let plan = args.replay_argv()?;
    for n in &plan.notes {
        eprintln!("trace_replay: {n}");
    }
    if let Some(x) = &plan.metrics_xlsx {
        if let Some(dir) = x.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| crate::Error::io(format!("--result-dir {}", dir.display()), e))?;
        }
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
            return Err(crate::Error::config(format!(
                "cannot translate the command line: {e}"
            )))
        }
    };
    let code = crate::commands::replay(replay).map_err(in_ucm_terms)?;
    if let Some(x) = &plan.metrics_xlsx {
        let from = x.with_file_name("results.xlsx");
        std::fs::copy(&from, x).map_err(|e| {
            crate::Error::io(
                format!("cannot copy {} to {}", from.display(), x.display()),
                e,
            )
        })?;
        eprintln!("trace_replay: metrics saved to {}", x.display());
    }
    Ok(code)
}

/// `request-sim replay` flags that messages suggest, in the words of `trace_replay`'s own
/// command line (it has no `--model-name`, `--chat-overhead`, `--api-key` or
/// `--allow-inexact-prompts`): the longest phrases first.
const UCM_TERMS: [(&str, &str); 6] = [
    (
        "check --endpoint/--model-name, or pass --chat-overhead N",
        "check --host/--port (or --base-url), --endpoint and --served-model-name",
    ),
    (
        "pass --tokenizer with the model's tokenizer.json or directory, or --allow-inexact-prompts to run with approximate counts",
        "pass --tokenizer (or --model) with the model's local directory holding tokenizer.json",
    ),
    (
        "pass the right one with --api-key KEY, --api-key-file F or $OPENAI_API_KEY",
        "set the right one in $OPENAI_API_KEY",
    ),
    ("pass --model-name", "pass --served-model-name"),
    ("--model-name", "--served-model-name"),
    (
        "--chat-overhead N",
        "--tokenizer (or --model) with the model's local directory",
    ),
];

/// An error of the translated replay, its flag suggestions put in `trace_replay`'s terms.
fn in_ucm_terms(e: crate::Error) -> crate::Error {
    let translate = |msg: String| {
        UCM_TERMS
            .iter()
            .fold(msg, |m, (from, to)| m.replace(from, to))
    };
    match e {
        crate::Error::Server(m) => crate::Error::Server(translate(m)),
        crate::Error::Config(m) => crate::Error::Config(translate(m)),
        crate::Error::Prompt(p) => crate::Error::Config(translate(p.to_string())),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> UcmArgs {
        UcmArgs::try_parse_from(s.split_whitespace()).unwrap()
    }

    fn value<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
        argv.iter()
            .position(|a| a == flag)
            .map(|i| argv[i + 1].as_str())
    }

    #[test]
    fn suggestions_name_flags_trace_replay_accepts() {
        for msg in [
            "calibration request to http://h/v1/completions failed (http_error): 500 — check --endpoint/--model-name, or pass --chat-overhead N",
            "GET http://h/v1/models answered 404 (pass --model-name)",
            "GET http://h/v1/models answered 401 Unauthorized (the API key was refused: pass the right one with --api-key KEY, --api-key-file F or $OPENAI_API_KEY)",
        ] {
            let t = in_ucm_terms(crate::Error::server(msg)).to_string();
            for refused in ["--model-name", "--chat-overhead", "--api-key", "--allow-inexact"] {
                assert!(!t.contains(refused), "{t}");
            }
        }
        let t = in_ucm_terms(crate::Error::server(
            "x failed — check --endpoint/--model-name, or pass --chat-overhead N",
        ))
        .to_string();
        assert!(
            t.ends_with("check --host/--port (or --base-url), --endpoint and --served-model-name"),
            "{t}"
        );
    }

    #[test]
    fn the_readme_command_line_maps_to_a_replay() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
        let model = dir.path().display().to_string();
        let trace = dir.path().join("conversation_trace.jsonl");
        std::fs::write(&trace, "").unwrap();
        let a = parse(&format!(
            "trace_replay --model {model} --backend vllm --trace-path {} \
             --trace-mode trace --host 127.0.0.1 --port 8000 --save-result --save-prompts",
            trace.display()
        ));
        let p = a.replay_argv().unwrap();
        let v = |f| value(&p.argv, f);
        assert_eq!(
            v("--endpoint"),
            Some("http://127.0.0.1:8000/v1/completions")
        );
        assert_eq!(v("--model-name"), Some(model.as_str()));
        assert_eq!(v("--tokenizer"), Some(model.as_str()));
        assert_eq!(v("--dataset-path"), trace.to_str());
        assert_eq!(v("--seed"), Some("0"));
        assert_eq!(
            v("--save-prompts"),
            Some("./conversation_trace_dataset.jsonl")
        );
        assert_eq!(v("--result-dir"), Some("."));
        assert_eq!(p.metrics_xlsx, Some(PathBuf::from("./metrics.xlsx")));
        assert_eq!(v("--prompt-corpus"), None);
    }

    #[test]
    fn benchmark_mode_uses_the_dataset_as_corpus() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        std::fs::write(&t, "").unwrap();
        let t = t.display().to_string();
        let parse = |s: &str| parse(&s.replace(" t.jsonl", &format!(" {t}")));
        let a = parse(
            "trace_replay --model m --served-model-name served --backend openai-chat \
             --trace-path t.jsonl --trace-mode benchmark --dataset-name sharegpt \
             --dataset-path sg.json --result-dir out --max-concurrency 20 --request-rate 4",
        );
        let p = a.replay_argv().unwrap();
        let v = |f| value(&p.argv, f);
        assert_eq!(
            v("--endpoint"),
            Some("http://127.0.0.1:8000/v1/chat/completions")
        );
        assert_eq!(v("--model-name"), Some("served"));
        assert_eq!(v("--tokenizer"), None);
        assert_eq!(v("--prompt-corpus"), Some("sg.json"));
        // A --result-dir given is used, also without --save-result.
        assert_eq!(v("--result-dir"), Some("out"));
        assert_eq!(p.metrics_xlsx, None);
        assert!(p.notes.iter().any(|n| n.contains("--max-concurrency")));
        assert!(p.notes.iter().any(|n| n.contains("--request-rate")));
        let custom = parse(
            "trace_replay --model m --trace-path t.jsonl --trace-mode benchmark \
             --dataset-name custom --dataset-path rows.jsonl",
        );
        let p = custom.replay_argv().unwrap();
        assert_eq!(value(&p.argv, "--prompt-corpus-field"), Some("prompt"));
        for (bad, why) in [
            (
                "trace_replay --model m --trace-path t.jsonl --trace-mode benchmark",
                "needs --dataset-path",
            ),
            (
                "trace_replay --model m --trace-path t.jsonl --trace-mode benchmark --dataset-name hf --dataset-path x",
                "--dataset-name hf: not supported",
            ),
            (
                "trace_replay --model m --trace-path t.jsonl --backend deepspeed-mii",
                "--backend deepspeed-mii: not supported",
            ),
            (
                "trace_replay --model m --trace-path /no/such/trace.jsonl",
                "--trace-path /no/such/trace.jsonl: no such file",
            ),
        ] {
            let e = parse(bad).replay_argv().unwrap_err();
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }
}
