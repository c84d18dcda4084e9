//! The library's one error type: what can stop a server from starting (bad settings, a
//! tokenizer that does not load, a port that cannot be bound, a KV events socket that cannot be
//! opened). Requests never fail with it: they are answered with an HTTP error instead.

use std::path::PathBuf;

/// An error of llm-sim's library; its message is a sentence for the user.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Settings the engine cannot run with (`SimConfig::validate`, instance counts, ports).
    #[error("{0}")]
    Config(String),
    /// A tokenizer or tokenizer config that cannot be loaded.
    #[error("loading {}: {message}", path.display())]
    Tokenizer { path: PathBuf, message: String },
    /// A socket, file or thread operation failed; `what` says which.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The KV events endpoint is malformed or its socket cannot be opened.
    #[error("KV events endpoint {0}")]
    KvEvents(String),
    /// Instance `index` of a cluster could not start.
    #[error("starting instance {index}: {source}")]
    Instance {
        index: usize,
        #[source]
        source: Box<Error>,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A settings error with this message.
    pub fn config(message: impl Into<String>) -> Error {
        Error::Config(message.into())
    }

    /// An I/O error while doing `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }

    /// A tokenizer file `path` that cannot be used, and why.
    pub fn tokenizer(path: &std::path::Path, message: impl std::fmt::Display) -> Error {
        Error::Tokenizer {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}
