//! Which format a trace is in ([`TraceFormat`]) and what the format says of itself
//! ([`FormatInfo`]): its `--dataset` name and aliases, its default block size, its
//! timestamps, whether it yields rows or an agent corpus, whether its rows carry sessions and
//! whether it can be streamed.
//!
//! A [`TraceFormat`] is a handle on the [`FormatInfo`] that the format's own file in
//! `trace/formats/` declares (with its recogniser and its reader, `formats/registry.rs`).
//! Nothing outside `trace/formats/` names a format: code that needs a fact of one asks the
//! handle (`format.info().sessions`, `format.default_block_size()`), so a new format is one
//! file and one line of the registry.

/// How a format's rows give their time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timestamps {
    /// Milliseconds, relative or absolute (rebased to the first row).
    Millis,
    /// Seconds (relative or Unix), float.
    Seconds,
    /// Unix epoch milliseconds (rebased to the first row).
    EpochMillis,
    /// A date and time (`2023-11-16 18:15:46.6805900`).
    DateTime,
    /// Offsets inside each conversation of an agent corpus (its start time is the replay's).
    ConversationOffsets,
    /// None recorded: the reader generates arrivals (ServeGen's rate patterns).
    Generated,
}

impl Timestamps {
    /// A few words for `--help` and the docs.
    pub fn describe(self) -> &'static str {
        match self {
            Timestamps::Millis => "milliseconds",
            Timestamps::Seconds => "seconds",
            Timestamps::EpochMillis => "Unix milliseconds",
            Timestamps::DateTime => "date and time",
            Timestamps::ConversationOffsets => "offsets within each conversation",
            Timestamps::Generated => "generated arrivals",
        }
    }
}

/// What a format's reader yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Yields {
    /// Independent rows, one request each, put through the trace pipeline.
    Rows,
    /// An agent corpus: conversations of a main agent and its subagents, read whole and laid
    /// out as a population (`trace/pipeline/plan.rs`).
    Corpus,
}

/// Where a format's sessions come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionSource {
    /// Its rows carry no session: every request stands alone.
    None,
    /// Rows may name a session (`session_id` or the like), in file order.
    Ids,
    /// Rows link to a parent row anywhere in the file (Bailian `parent_chat_id`): the whole
    /// file is read before the first request is released.
    ParentLinks,
    /// Conversations and subagents of an agent corpus.
    Conversations,
}

/// What a format says of itself (one per file of `trace/formats/`).
#[derive(Debug)]
pub struct FormatInfo {
    /// The `--dataset` name.
    pub name: &'static str,
    /// Other `--dataset` names it answers to.
    pub aliases: &'static [&'static str],
    /// One line for `--help` and error messages.
    pub about: &'static str,
    /// Tokens per hash id when the trace does not say (`--block-size` overrides).
    pub block_size: usize,
    pub timestamps: Timestamps,
    pub yields: Yields,
    pub sessions: SessionSource,
    /// Every row is sent as written (its messages or literal prompt): no prompt is built from
    /// the word list, so nothing needs its token counts to be exact.
    pub sends_rows_as_written: bool,
    /// A row with no output tokens is a failed request of the source (BurstGPT): counted, and
    /// dropped with `--drop-failed`.
    pub zero_output_is_failure: bool,
    /// Rows may carry a `delay` after the previous turn of their session (AIPerf rows).
    pub has_delays: bool,
}

impl FormatInfo {
    /// A format of independent rows (no sessions, nothing sent as written), to be refined
    /// with struct update syntax.
    pub const fn rows(
        name: &'static str,
        block_size: usize,
        timestamps: Timestamps,
        about: &'static str,
    ) -> FormatInfo {
        FormatInfo {
            name,
            aliases: &[],
            about,
            block_size,
            timestamps,
            yields: Yields::Rows,
            sessions: SessionSource::None,
            sends_rows_as_written: false,
            zero_output_is_failure: false,
            has_delays: false,
        }
    }

    /// An agent corpus format (conversations with subagents, read whole).
    pub const fn corpus(name: &'static str, block_size: usize, about: &'static str) -> FormatInfo {
        FormatInfo {
            yields: Yields::Corpus,
            sessions: SessionSource::Conversations,
            ..FormatInfo::rows(name, block_size, Timestamps::ConversationOffsets, about)
        }
    }
}

/// Which trace format a file is in: a handle on its [`FormatInfo`].
#[derive(Clone, Copy)]
pub struct TraceFormat(&'static FormatInfo);

impl TraceFormat {
    /// The handle of a format's facts (each format file makes its own).
    pub const fn of(info: &'static FormatInfo) -> TraceFormat {
        TraceFormat(info)
    }

    /// Everything the format says of itself.
    pub fn info(self) -> &'static FormatInfo {
        self.0
    }

    /// The `--dataset` name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// A corpus of agent conversations, read whole (never row by row).
    pub fn is_agentic(self) -> bool {
        self.0.yields == Yields::Corpus
    }

    /// Every row is sent as written: see [`FormatInfo::sends_rows_as_written`].
    pub fn sends_rows_as_written(self) -> bool {
        self.0.sends_rows_as_written
    }

    /// Default hash block size (tokens per hash id) of the format.
    pub fn default_block_size(self) -> usize {
        self.0.block_size
    }

    /// The whole file must be read before the first request is released (parent links that
    /// may point anywhere in it).
    pub fn needs_whole_file(self) -> bool {
        self.0.sessions == SessionSource::ParentLinks
    }

    /// Its requests can carry sessions (ids, parent links or conversations).
    pub fn has_sessions(self) -> bool {
        self.0.sessions != SessionSource::None
    }
}

impl PartialEq for TraceFormat {
    fn eq(&self, other: &TraceFormat) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for TraceFormat {}

impl std::fmt::Debug for TraceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

impl std::fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

impl serde::Serialize for TraceFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name)
    }
}
