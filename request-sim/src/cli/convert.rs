//! Flags of `request-sim convert` and the value parsers of its log shapes and time forms.

use std::path::PathBuf;

use clap::Args;

use super::parse_block_size;

/// Flags of `convert`.
#[derive(Debug, Clone, Args)]
pub struct ConvertArgs {
    /// The request log (`-`: standard input).
    pub log: PathBuf,
    /// The trace to write (generic JSONL: timestamp, input_length, output_length, hash_ids,
    /// session_id).
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// The log's shape (default: detected from the first line): openai, litellm, otel,
    /// messages.
    #[arg(long, value_parser = parse_log_format)]
    pub log_format: Option<crate::trace::formats::log::LogShape>,
    /// JSON pointer to the request time (e.g. /created_at); default per log format.
    #[arg(long, value_name = "POINTER")]
    pub time_field: Option<String>,
    /// JSON pointer to the chat messages (e.g. /request/messages).
    #[arg(long, value_name = "POINTER")]
    pub messages_field: Option<String>,
    /// JSON pointer to the output token count (e.g. /response/usage/completion_tokens).
    #[arg(long, value_name = "POINTER")]
    pub output_field: Option<String>,
    /// JSON pointer to a session id (default: sessions inferred from the messages; a
    /// messages trace's session_id).
    #[arg(long, value_name = "POINTER")]
    pub session_field: Option<String>,
    /// JSON pointer to the tools (default: `tools` beside the messages).
    #[arg(long, value_name = "POINTER")]
    pub tools_field: Option<String>,
    /// How times are written (default: detected from the first row and stated in the
    /// report): s, ms, us, ns (epoch or relative numbers), iso, relative-s, relative-ms.
    #[arg(long, value_parser = parse_time_format)]
    pub time_format: Option<crate::trace::formats::log::TimeFormat>,
    /// The target model's tokenizer: a model directory (tokenizer.json and
    /// tokenizer_config.json with its chat template) or a tokenizer.json.
    #[arg(long, required_unless_present = "endpoint")]
    pub tokenizer: Option<PathBuf>,
    /// The tokenizer_config.json holding the chat template (default: beside --tokenizer).
    #[arg(long)]
    pub tokenizer_config: Option<PathBuf>,
    /// Count with this server's POST /tokenize (vLLM shape, with messages) instead of a local
    /// tokenizer.
    #[arg(long, conflicts_with = "tokenizer")]
    pub endpoint: Option<String>,
    /// The model name sent to the server's /tokenize.
    #[arg(long)]
    pub model: Option<String>,
    /// Tokens per hash id.
    #[arg(long, default_value_t = crate::convert::DEFAULT_BLOCK_SIZE, value_parser = parse_block_size)]
    pub block_size: usize,
    /// Salt of the block hash (default: random, never written anywhere). The same salt gives
    /// the same hash ids for the same log.
    #[arg(long)]
    pub salt: Option<String>,
    /// Also write a messages trace keeping the prompt text (for your own use: it is not
    /// anonymized).
    #[arg(long, value_name = "FILE")]
    pub keep_text: Option<PathBuf>,
    /// Bound memory on an endless log: forget a session with no turn for SECS of log time (a
    /// later turn starts a new session) and a block not seen for SECS to 2 x SECS (it is
    /// numbered anew); both counted. Default: nothing forgotten (exact; memory grows with the
    /// log's requests and distinct blocks).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub forget_after: Option<f64>,
    /// Requests are written in start-time order (sessions are inferred in that order): one
    /// may start up to SECS of log time before the newest start read (a log written as
    /// requests complete is out of start order by up to its longest request). Memory holds
    /// the requests of the last SECS; a request later than that is an error naming this flag.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true,
          default_value_t = crate::convert::DEFAULT_REORDER_WINDOW_S)]
    pub reorder_window: f64,
    /// Skip the analyze of the converted trace at the end (it loads the whole trace).
    #[arg(long)]
    pub no_analyze: bool,
    /// Print the report (and the analysis) as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Parse a `--log-format` value.
pub fn parse_log_format(s: &str) -> Result<crate::trace::formats::log::LogShape, String> {
    crate::trace::formats::log::LogShape::from_name(s).ok_or_else(|| {
        format!(
            "unknown log format {s:?}: use {}",
            crate::trace::formats::log::LogShape::NAMES
        )
    })
}

/// Parse a `--time-format` value.
pub fn parse_time_format(s: &str) -> Result<crate::trace::formats::log::TimeFormat, String> {
    crate::trace::formats::log::TimeFormat::from_name(s).ok_or_else(|| {
        format!(
            "unknown time format {s:?}: use {}",
            crate::trace::formats::log::TimeFormat::NAMES
        )
    })
}
