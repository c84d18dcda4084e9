//! The library's one error type. Every fallible function of `request-sim` returns
//! [`Result`]; the kinds say which stage failed so that callers can match on them, and each
//! message is the complete sentence a user reads (`file:line: what is wrong`, `--flag value:
//! why`, `http://server: what it answered`).
//!
//! Two kinds of helper return their message as a `String` on purpose, for a caller to wrap:
//! parsers of one flag value (`Shard::parse`, `StartAt::parse`, `Slo::parse`, `ThinkTime::parse`,
//! `parse_interval`, the `cli` value parsers: the form clap's value parsers take, wrapped as
//! [`Error::Config`] by `config`), and the checks of one field or line inside a parser whose
//! own typed error adds the place (`trace::RowError` with `file:line`, `observe::ParseError`
//! with the line of a `/metrics` page). The real-time probe's refusal text
//! (`schedule::priority`) is a reason reported in the summary, not an error.

use std::path::Path;

use crate::prompt::PromptError;
use crate::trace::TraceError;

/// Why a command or a replay could not go on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line or the settings contradict themselves or the environment
    /// (a flag's value, a missing file a flag names, a flag that needs another one).
    #[error("{0}")]
    Config(String),
    /// The trace could not be read (the message names the file, and the line when one is at
    /// fault).
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// Prompts cannot be built as asked (tokenizer, vocabulary, chat template, corpus).
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The server (or the metrics endpoint) could not be reached or answered what the run
    /// cannot use (start-up requests: model list, calibration, `/tokenize`).
    #[error("{0}")]
    Server(String),
    /// The server could not be reached at all by a start-up request (the model list, the
    /// `/tokenize` probe): no connection could be opened. Exits 5 like a run in which no
    /// request succeeded ([`Error::exit_code`]).
    #[error("{0}")]
    Unreachable(String),
    /// Reading or writing a file (records, summary, result files) failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path: "cannot write results/run.jsonl".
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A result file could not be produced (plots, spreadsheet, report page) or a records file
    /// does not hold what the report needs.
    #[error("{0}")]
    Report(String),
    /// The tool itself failed (a thread panicked, an invariant broke): a bug to report.
    #[error("internal error: {0}")]
    Internal(String),
}

/// `Result` with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A settings error.
    pub fn config(msg: impl Into<String>) -> Error {
        Error::Config(msg.into())
    }

    /// A server error.
    pub fn server(msg: impl Into<String>) -> Error {
        Error::Server(msg.into())
    }

    /// The exit status of a command that failed with this error: 5 when the server could not
    /// be reached ([`Error::Unreachable`], as for a run whose requests all failed), else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Unreachable(_) => 5,
            _ => 1,
        }
    }

    /// A report error.
    pub fn report(msg: impl Into<String>) -> Error {
        Error::Report(msg.into())
    }

    /// An internal error.
    pub fn internal(msg: impl Into<String>) -> Error {
        Error::Internal(msg.into())
    }

    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// "cannot read PATH" with the I/O error.
    pub fn read(path: &Path, source: std::io::Error) -> Error {
        Error::io(format!("cannot read {}", path.display()), source)
    }

    /// "cannot write PATH" with the I/O error.
    pub fn write(path: &Path, source: std::io::Error) -> Error {
        Error::io(format!("cannot write {}", path.display()), source)
    }

    /// The kind, as a word (for logs and tests).
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::Trace(_) => "trace",
            Error::Prompt(_) => "prompt",
            Error::Server(_) => "server",
            Error::Unreachable(_) => "unreachable",
            Error::Io { .. } => "io",
            Error::Report(_) => "report",
            Error::Internal(_) => "internal",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_the_users_sentence_and_kinds_match() {
        let e = Error::config("--scale-factor must be a positive number, got 0");
        assert_eq!(
            e.to_string(),
            "--scale-factor must be a positive number, got 0"
        );
        assert_eq!(e.kind(), "config");
        let e = Error::write(
            Path::new("out/x.jsonl"),
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        );
        assert_eq!(e.to_string(), "cannot write out/x.jsonl: denied");
        assert_eq!(e.kind(), "io");
        let e: Error = TraceError::Empty {
            path: "t.jsonl".into(),
        }
        .into();
        assert!(matches!(e, Error::Trace(_)));
        assert_eq!(e.to_string(), "t.jsonl: the file is empty (no data lines)");
        assert_eq!(e.exit_code(), 1);
        let e = Error::Unreachable("cannot connect to http://h:1/v1/models".into());
        assert_eq!((e.kind(), e.exit_code()), ("unreachable", 5));
    }
}
