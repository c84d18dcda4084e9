//! The Weka / kv-cache-tester agentic trace (`callanjfox/kv-cache-tester`, `traces/*.json`):
//! one conversation per JSON file (plain or gzip); a directory of such files is a corpus.
//!
//! A file is one object: `id`, `block_size`, `hash_id_scope` (`local` or `global`; absent:
//! `local`, as the published files number their ids from 1 in each file), `tool_tokens`,
//! `system_tokens` and `requests`. A request entry has `t` (seconds from the conversation's
//! start), `type` (`n` non-streaming, `s` streaming), `in`, `out`, `hash_ids`, optional
//! `model`, `api_time` (server time, s) and `think_time` (client delay, s). A `subagent` entry
//! has `t`, `agent_id`, `subagent_type`, `status`, `duration_ms`, `tool_tokens`,
//! `system_tokens` and its own `requests`, whose `t` counts from the subagent's start.
//!
//! How the tree is built (checked on the published files: a completed subagent's `t` is when
//! it finished, `t − duration_ms` lies 0.1–1 s after the parent's preceding request ended; an
//! `async_launched` one has no duration and its `t` is its launch):
//! - a subagent follows the last request of its parent before its entry, and starts at
//!   `t − duration_ms` (or at `t` without a duration);
//! - a subagent whose `status` is `async_launched` runs in the background (nothing joins it);
//!   any other is joined by the parent's first request after its entry (none when it is the
//!   last: the conversation ends after it);
//! - client gaps: the first request of the main agent has none; a subagent's first request
//!   waits its spawn offset (start − end of the request it follows) plus its own `t`; a request
//!   that joins subagents waits `t` minus the latest end among its predecessor and those
//!   subagents (`think_time` would count the subagents' time); any other request waits its
//!   `think_time`, else `t − (t_prev + api_time_prev)`, else `t − t_prev`. Negative values are 0.
//!
//! The corpus as SemiAnalysis publishes it (`semianalysisai/cc-traces-weka-*`, what AgentX's
//! `semianalysis_cc_traces_weka*` loaders read) is the same object one per **row**: a JSONL
//! file whose every non-blank line is one conversation. A row must have its `id` (unique in
//! the file); `models` (the models the conversation uses, a list of strings) is checked and
//! not otherwise used (each request names its own `model`). A field that is `null` counts as
//! absent, as a columnar export writes the fields an entry lacks.
//!
//! Errors name the file, the line (a file is usually one line; a row file, one per
//! conversation) and the JSON path of the entry at fault; nothing panics.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::unit::{Format, Reader};
use crate::trace::error::TraceError;
use crate::trace::model::FormatInfo;
use crate::trace::model::{
    Agent, AgentRequest, BlockIds, ClientGap, Conversation, Corpus, GapRule, HashScope, Origin,
    ParentLink,
};

/// Bytes read to recognise a file by content.
const SNIFF_BYTES: usize = 4096;

/// Largest accepted file (decompressed), 1 GiB: a published file is under 10 MB.
const MAX_FILE_BYTES: u64 = 1 << 30;

/// One entry of a `requests` list: a request or a subagent.
#[derive(Debug, Deserialize)]
struct Entry {
    t: f64,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, rename = "in")]
    input: Option<u32>,
    #[serde(default, rename = "out")]
    output: Option<u32>,
    #[serde(default)]
    hash_ids: Option<Vec<u64>>,
    #[serde(default)]
    api_time: Option<f64>,
    #[serde(default)]
    think_time: Option<f64>,
    #[serde(default)]
    agent_id: Option<String>,
    #[serde(default)]
    subagent_type: Option<String>,
    #[serde(default)]
    duration_ms: Option<f64>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    tool_tokens: Option<u32>,
    #[serde(default)]
    system_tokens: Option<u32>,
    #[serde(default)]
    requests: Option<Vec<Entry>>,
}

/// The file's object.
#[derive(Debug, Deserialize)]
struct File {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    #[allow(dead_code)] // checked as a list of strings, not used: requests name their model
    models: Option<Vec<String>>,
    block_size: usize,
    #[serde(default)]
    hash_id_scope: Option<String>,
    #[serde(default)]
    tool_tokens: Option<u32>,
    #[serde(default)]
    system_tokens: Option<u32>,
    requests: Vec<Entry>,
}

/// True when `head` (the first bytes of a decompressed file) looks like a Weka trace: a JSON
/// object naming `hash_id_scope`, or `block_size` and `requests`.
pub fn looks_like(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&head[..head.len().min(SNIFF_BYTES)]);
    text.trim_start().starts_with('{')
        && (text.contains("\"hash_id_scope\"")
            || (text.contains("\"block_size\"") && text.contains("\"requests\"")))
}

/// True when `path` is a Weka corpus: a directory holding `.json`/`.json.gz` files, or a file
/// that [`looks_like`] one.
pub fn is_corpus(path: &Path) -> bool {
    if path.is_dir() {
        return corpus_files(path).is_ok_and(|f| !f.is_empty());
    }
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    open(path)
        .and_then(|r| r.take(SNIFF_BYTES as u64).read_to_end(&mut head))
        .is_ok()
        && looks_like(&head)
}

/// Why a directory cannot be read where one trace file is (`transform`, `analyze --against`,
/// a trace that is not a Weka corpus), in one sentence: what a directory can be.
pub fn directory_refusal(path: &Path) -> String {
    if !super::copilot::shards(path).is_empty() {
        "is a Copilot partition (a directory of shard-*.jsonl[.gz] files), an agent corpus: `replay`, `sweep`, `analyze` (without --against) and `transform` (a Weka directory out) read it; `analyze --against` and `verify-prompts` take a request trace, one file, not an agent corpus".into()
    } else if is_corpus(path) {
        "is a directory of .json or .json.gz files, a Weka agent corpus: `replay`, `sweep`, `analyze` (without --against) and `transform` (a Weka directory out) read it; `analyze --against` and `verify-prompts` take a request trace, one file, not an agent corpus".into()
    } else {
        "is a directory, and no Weka agent corpus (no .json or .json.gz files): a directory is read only as a Weka corpus (by `replay`, `sweep` and `analyze`); every other trace, a tracelab, dynamo or dag_jsonl corpus included, is one file".into()
    }
}

/// The trace files of a directory (`*.json`, `*.json.gz`; a file of rows is one file, not
/// a directory: a directory of `.jsonl` files is other formats' shards), sorted by name.
fn corpus_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().map(|n| n.to_string_lossy().into_owned());
            n.is_some_and(|n| [".json", ".json.gz"].iter().any(|x| n.ends_with(x)))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Opens a file, decompressing gzip (by its magic bytes).
fn open(path: &Path) -> std::io::Result<Box<dyn Read>> {
    let mut file = std::fs::File::open(path)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic)?;
    let file = std::io::Cursor::new(magic[..n].to_vec()).chain(file);
    Ok(if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    })
}

/// Loads a corpus: every `.json`/`.json.gz` file of a directory (sorted by name), or one file.
pub fn load(path: &Path) -> Result<Corpus, TraceError> {
    let name = path.display().to_string();
    let open_err = |error| TraceError::Open {
        path: name.clone(),
        error,
    };
    let files = if path.is_dir() {
        corpus_files(path).map_err(open_err)?
    } else {
        vec![path.to_path_buf()]
    };
    if files.is_empty() {
        return Err(TraceError::NoRequests {
            path: name,
            reason: "the directory holds no .json or .json.gz file".into(),
        });
    }
    let mut corpus = Corpus::default();
    for f in files {
        let fname = f.display().to_string();
        let mut text = Vec::new();
        open(&f)
            .and_then(|r| r.take(MAX_FILE_BYTES).read_to_end(&mut text))
            .map_err(|error| TraceError::Read {
                path: fname.clone(),
                line: 0,
                compression: fname.ends_with(".gz").then_some("gzip"),
                error,
            })?;
        corpus.conversations.extend(parse_file(&fname, &text)?);
    }
    Ok(corpus)
}

/// Parses one file's bytes: one conversation, or (the published row form) one per line.
pub fn parse_file(name: &str, text: &[u8]) -> Result<Vec<Conversation>, TraceError> {
    if !is_rows(text) {
        return Ok(vec![parse(name, text)?]);
    }
    let mut out: Vec<Conversation> = Vec::new();
    let mut seen: std::collections::HashMap<Arc<str>, usize> = std::collections::HashMap::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let row = i + 1;
        let conv = parse_at(name, row, line, true)?;
        if let Some(first) = seen.insert(conv.id.clone(), row) {
            return Err(TraceError::Row {
                path: name.to_owned(),
                line: row,
                error: crate::trace::error::RowError::Json(format!(
                    "id: the trace id {:?} is also the id of line {first}",
                    &*conv.id
                )),
            });
        }
        out.push(conv);
    }
    Ok(out)
}

/// True when `text` is the row form: its first non-blank line is a whole JSON object and
/// another non-blank line follows it.
fn is_rows(text: &[u8]) -> bool {
    let mut lines = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace));
    let Some(first) = lines.next() else {
        return false;
    };
    lines.next().is_some()
        && first.trim_ascii_start().starts_with(b"{")
        && serde_json::from_slice::<serde::de::IgnoredAny>(first).is_ok()
}

/// Parses one file's bytes into a conversation; `name` is used in messages and as the id when
/// the file has none.
pub fn parse(name: &str, text: &[u8]) -> Result<Conversation, TraceError> {
    parse_at(name, 1, text, false)
}

/// Parses one conversation's object that starts on line `first_line` of file `name`; a row
/// (`row`) must have its `id`.
fn parse_at(
    name: &str,
    first_line: usize,
    text: &[u8],
    row_form: bool,
) -> Result<Conversation, TraceError> {
    let row = |line: usize, what: String| TraceError::Row {
        path: name.to_owned(),
        line: line + first_line - 1,
        error: crate::trace::error::RowError::Json(what),
    };
    if text.iter().all(u8::is_ascii_whitespace) {
        return Err(TraceError::Empty {
            path: name.to_owned(),
        });
    }
    let de = &mut serde_json::Deserializer::from_slice(text);
    let file: File = serde_path_to_error::deserialize(de).map_err(|e| {
        let line = e.inner().line().max(1);
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            row(line, inner.to_string())
        } else {
            row(line, format!("{path}: {inner}"))
        }
    })?;
    let hash_scope = match file.hash_id_scope.as_deref() {
        None => HashScope::Local,
        Some(s) => HashScope::from_name(s).ok_or_else(|| {
            row(
                1,
                format!("hash_id_scope: unknown scope {s:?} (expected `local` or `global`)"),
            )
        })?,
    };
    if file.block_size == 0 {
        return Err(row(1, "block_size: must be at least 1".into()));
    }
    if row_form && file.id.is_none() {
        return Err(row(1, "id: a row without its trace `id`".into()));
    }
    let id = file.id.clone().unwrap_or_else(|| stem(name));
    let mut conv = Conversation {
        recorded_start_ms: None,
        id: Arc::from(id),
        source: Arc::from(if row_form {
            format!("{name}:{first_line}")
        } else {
            name.to_owned()
        }),
        block_size: file.block_size,
        hash_scope,
        system_tokens: file.system_tokens,
        tool_tokens: file.tool_tokens,
        agents: Vec::new(),
    };
    let main = Agent {
        id: Arc::from(Agent::MAIN),
        kind: None,
        parent: None,
        system_tokens: file.system_tokens,
        tool_tokens: file.tool_tokens,
        start_ms: 0.0,
        requests: Vec::new(),
    };
    Builder { conv: &mut conv }
        .agent(main, None, &file.requests, "requests")
        .map_err(|(at, what)| row(1, format!("{at}: {what}")))?;
    conv.check().map_err(|e| row(1, e))?;
    Ok(conv)
}

/// The file name without directories and `.json`/`.json.gz`.
fn stem(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    base.trim_end_matches(".gz")
        .trim_end_matches(".json")
        .to_owned()
}

/// The time of entry `e` on the conversation's clock (ms): its agent's start plus its `t`.
fn entry_time(e: &Entry, start_ms: f64) -> Result<f64, &'static str> {
    if !(e.t.is_finite() && e.t >= 0.0) {
        return Err("`t` must be a finite number of seconds >= 0");
    }
    let t_ms = start_ms + e.t * 1e3;
    if !t_ms.is_finite() {
        return Err("`t` is too large (the time overflows)");
    }
    Ok(t_ms)
}

/// A request entry's fields, checked (times in ms).
struct RequestEntry {
    stream: bool,
    input_length: u32,
    output_length: u32,
    hash_ids: Vec<u64>,
    server_ms: Option<f64>,
    think_ms: Option<f64>,
}

/// The fields of request entry `e`: its `type`, `in`, `out` and `hash_ids`, and its
/// `api_time` and `think_time` (seconds >= 0).
fn request_entry(e: &Entry) -> Result<RequestEntry, String> {
    let stream = match e.kind.as_str() {
        "s" => true,
        "n" => false,
        other => {
            return Err(format!(
                "unknown `type` {other:?} (expected `n`, `s` or `subagent`)"
            ))
        }
    };
    let need = |v: Option<u32>, f: &str| v.ok_or_else(|| format!("missing `{f}`"));
    let input_length = need(e.input, "in")?;
    let output_length = need(e.output, "out")?;
    let hash_ids = e.hash_ids.clone().ok_or("missing `hash_ids`")?;
    let secs = |v: Option<f64>, f: &str| match v {
        Some(s) if !(s.is_finite() && s >= 0.0) => {
            Err(format!("`{f}` must be a finite number of seconds >= 0"))
        }
        v => Ok(v.map(|s| s * 1e3)),
    };
    Ok(RequestEntry {
        stream,
        input_length,
        output_length,
        hash_ids,
        server_ms: secs(e.api_time, "api_time")?,
        think_ms: secs(e.think_time, "think_time")?,
    })
}

/// A subagent's facts on its parent's clock, for the parent's join rules.
struct Child {
    agent: usize,
    /// End (ms, parent's clock... the conversation's clock).
    end_ms: f64,
    background: bool,
}

/// Builds the agents of one conversation from nested `requests` lists.
struct Builder<'a> {
    conv: &'a mut Conversation,
}

type BuildError = (String, String);

impl Builder<'_> {
    /// Adds `agent` (its requests from `entries`; `link` set later for subagents) and its
    /// subagents; returns its index. `at` is the JSON path of `entries`.
    fn agent(
        &mut self,
        agent: Agent,
        link: Option<ParentLink>,
        entries: &[Entry],
        at: &str,
    ) -> Result<usize, BuildError> {
        let start_ms = agent.start_ms;
        let me = self.conv.agents.len();
        self.conv.agents.push(Agent {
            parent: link,
            ..agent
        });
        // Subagents waiting for the parent's next request to join them.
        let mut pending: Vec<Child> = Vec::new();
        let mut prev_end_ms: Option<f64> = None;
        // The previous request's entry: its ids as read, for the prefix this one shares.
        let mut prev_entry: Option<&Entry> = None;
        for (k, e) in entries.iter().enumerate() {
            let here = format!("{at}[{k}]");
            let t_ms = entry_time(e, start_ms).map_err(|w| (here.clone(), w.to_owned()))?;
            if e.kind == "subagent" {
                let child = self.subagent(me, e, t_ms, &here)?;
                pending.push(child);
                continue;
            }
            let r = request_entry(e).map_err(|w| (here.clone(), w))?;
            let index = self.conv.agents[me].requests.len();
            let joined: Vec<Child> = std::mem::take(&mut pending);
            let gap = self.gap(me, index, t_ms, prev_end_ms, r.think_ms, &joined);
            let end_ms = t_ms + r.server_ms.unwrap_or(0.0);
            if !(gap.ms.is_finite() && end_ms.is_finite()) {
                return Err((here, "the times are too large (they overflow)".into()));
            }
            for c in &joined {
                if let Some(l) = self.conv.agents[c.agent].parent.as_mut() {
                    l.join = (!c.background).then_some(index);
                }
            }
            prev_end_ms = Some(end_ms);
            let hash_ids = match (prev_entry, self.conv.agents[me].requests.last()) {
                (Some(p), Some(pr)) => BlockIds::sharing(
                    &pr.hash_ids,
                    p.hash_ids.as_deref().unwrap_or_default(),
                    r.hash_ids,
                ),
                _ => r.hash_ids.into(),
            };
            prev_entry = Some(e);
            self.conv.agents[me].requests.push(AgentRequest {
                result: None,
                trace_ms: t_ms,
                input_length: r.input_length,
                output_length: r.output_length,
                hash_ids,
                stream: Some(r.stream),
                gap,
                server_ms: r.server_ms,
                model: e.model.as_deref().map(Arc::from),
                origin: Origin {
                    line: 1,
                    pointer: Some(here.into_boxed_str()),
                },
                messages: None,
            });
        }
        if self.conv.agents[me].requests.is_empty() {
            return Err((at.to_owned(), "an agent without requests".into()));
        }
        Ok(me)
    }

    /// The client gap before request `index` of agent `me` at `t_ms`.
    fn gap(
        &self,
        me: usize,
        index: usize,
        t_ms: f64,
        prev_end_ms: Option<f64>,
        think_ms: Option<f64>,
        joined: &[Child],
    ) -> ClientGap {
        let agent = &self.conv.agents[me];
        let gap = |ms: f64, rule| ClientGap {
            ms: ms.max(0.0),
            rule,
        };
        if index == 0 {
            return match &agent.parent {
                None => gap(0.0, GapRule::First),
                // The spawn offset, then the first request's own offset into the subagent.
                Some(l) => gap(l.spawn_offset_ms + (t_ms - agent.start_ms), GapRule::Spawn),
            };
        }
        let prev = &agent.requests[index - 1];
        let joins: Vec<f64> = joined
            .iter()
            .filter(|c| !c.background)
            .map(|c| c.end_ms)
            .collect();
        if !joins.is_empty() {
            let latest = joins
                .into_iter()
                .fold(prev_end_ms.unwrap_or(prev.trace_ms), f64::max);
            return gap(t_ms - latest, GapRule::AfterJoin);
        }
        match (think_ms, prev.server_ms) {
            (Some(ms), _) => gap(ms, GapRule::ThinkTime),
            (None, Some(s)) => gap(t_ms - (prev.trace_ms + s), GapRule::StartMinusServer),
            (None, None) => gap(t_ms - prev.trace_ms, GapRule::StartToStart),
        }
    }

    /// Adds the subagent of entry `e` (at `t_ms` on the conversation's clock) under `parent`.
    fn subagent(
        &mut self,
        parent: usize,
        e: &Entry,
        t_ms: f64,
        here: &str,
    ) -> Result<Child, BuildError> {
        let bad = |what: &str| (here.to_owned(), what.to_owned());
        let id = e
            .agent_id
            .clone()
            .ok_or_else(|| bad("a subagent without `agent_id`"))?;
        if self.conv.agents.iter().any(|a| *a.id == *id) {
            return Err(bad(&format!("the agent id `{id}` appears twice")));
        }
        let entries = match &e.requests {
            Some(r) if r.iter().any(|x| x.kind != "subagent") => r,
            _ => return Err(bad(&format!("subagent `{id}` has no requests"))),
        };
        let duration_ms = match e.duration_ms {
            Some(d) if !(d.is_finite() && d >= 0.0) => {
                return Err(bad("`duration_ms` must be a finite number >= 0"))
            }
            d => d,
        };
        let p = &self.conv.agents[parent];
        let Some(after) = p.requests.len().checked_sub(1) else {
            return Err(bad(&format!(
                "subagent `{id}` comes before its parent's first request"
            )));
        };
        let before = &p.requests[after];
        let after_end = before.trace_ms + before.server_ms.unwrap_or(0.0);
        let start_ms = (t_ms - duration_ms.unwrap_or(0.0)).max(before.trace_ms);
        let background = e.status.as_deref() == Some("async_launched");
        let link = ParentLink {
            agent: parent,
            after,
            spawn_offset_ms: (start_ms - after_end).max(0.0),
            join: None,
            inherits_history: false,
        };
        let agent = Agent {
            id: Arc::from(id),
            kind: e.subagent_type.as_deref().map(Arc::from),
            parent: None,
            system_tokens: e.system_tokens,
            tool_tokens: e.tool_tokens,
            start_ms,
            requests: Vec::new(),
        };
        let index = self.agent(agent, Some(link), entries, &format!("{here}.requests"))?;
        let last = self.conv.agents[index].requests.last();
        let last_end = last.map_or(start_ms, |r| r.trace_ms + r.server_ms.unwrap_or(0.0));
        let end_ms = match duration_ms {
            Some(_) => t_ms.max(last_end),
            None => last_end,
        };
        Ok(Child {
            agent: index,
            end_ms,
            background,
        })
    }
}

/// Weka: a directory of `.json`/`.json.gz` files, or a file whose head [`looks_like`] one.
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo::corpus(
        "weka",
        64,
        "Weka / kv-cache-tester agentic JSON: one conversation (with subagents) per file; a directory of .json or .json.gz files is a corpus",
    ),
    recognise: |p| match p.dir {
        Some(d) => corpus_files(d).is_ok_and(|f| !f.is_empty()),
        None => looks_like(p.head),
    },
    read: Reader::Corpus {
        file: |name, input, _| {
            let mut text = Vec::new();
            input
                .take(MAX_FILE_BYTES)
                .read_to_end(&mut text)
                .map_err(|error| TraceError::Read {
                    path: name.to_owned(),
                    line: 0,
                    compression: None,
                    error,
                })?;
            Ok(Corpus {
                conversations: parse_file(name, &text)?,
                ..Corpus::default()
            })
        },
        dir: Some(|dir, _| load(dir)),
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: f64, extra: &str) -> String {
        format!(r#"{{"t":{t},"type":"s","in":100,"out":5,"hash_ids":[1,2]{extra}}}"#)
    }

    #[test]
    fn tree_from_nested_requests() {
        let text = format!(
            r#"{{"id":"c1","block_size":64,"hash_id_scope":"local","tool_tokens":10,"system_tokens":20,"requests":[{},{{"t":12.0,"type":"subagent","agent_id":"a1","subagent_type":"Explore","duration_ms":10000,"status":"completed","requests":[{},{}]}},{{"t":2.5,"type":"subagent","agent_id":"bg","status":"async_launched","requests":[{}]}},{}]}}"#,
            req(0.0, r#","api_time":1.0"#),
            req(0.0, r#","api_time":2.0"#),
            req(5.0, r#","think_time":1.0"#),
            req(0.5, ""),
            req(15.0, r#","think_time":14.0"#),
        );
        let c = parse("dir/c1.json", text.as_bytes()).unwrap();
        assert_eq!(c.agents.len(), 3);
        assert_eq!(c.hash_scope, HashScope::Local);
        assert_eq!((c.system_tokens, c.tool_tokens), (Some(20), Some(10)));
        let (main, a1, bg) = (&c.agents[0], &c.agents[1], &c.agents[2]);
        assert_eq!(main.requests.len(), 2);
        // a1 ended at 12 s, started 10 s earlier = 2 s; its parent's request ended at 1 s.
        let l = a1.parent.as_ref().unwrap();
        assert_eq!((l.after, l.join, l.spawn_offset_ms), (0, Some(1), 1000.0));
        assert_eq!(a1.start_ms, 2000.0);
        assert_eq!(a1.requests[0].gap.rule, GapRule::Spawn);
        assert_eq!(a1.requests[0].gap.ms, 1000.0);
        assert_eq!(a1.requests[1].trace_ms, 7000.0);
        assert_eq!(a1.requests[1].gap.rule, GapRule::ThinkTime);
        // The background subagent is not joined.
        let l = bg.parent.as_ref().unwrap();
        assert_eq!((l.after, l.join), (0, None));
        assert_eq!(l.spawn_offset_ms, 1500.0);
        // The main agent's second request joins a1 (ended at 12 s): gap 15 − 12 = 3 s, not
        // its think_time of 14 s.
        assert_eq!(main.requests[1].gap.rule, GapRule::AfterJoin);
        assert_eq!(main.requests[1].gap.ms, 3000.0);
        assert_eq!(main.requests[1].stream, Some(true));
        assert_eq!(
            main.requests[1].origin.pointer.as_deref(),
            Some("requests[3]")
        );
    }

    fn err(text: &str) -> String {
        parse("x.json", text.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn bad_files_name_the_fault() {
        let r = req(0.0, "");
        assert!(err(&format!(
            r#"{{"block_size":64,"hash_id_scope":"nearby","requests":[{r}]}}"#
        ))
        .contains("x.json:1: hash_id_scope: unknown scope \"nearby\""));
        let e = err(&format!(
            r#"{{"block_size":64,"requests":[{r},{{"t":1,"type":"subagent","agent_id":"a","requests":[]}}]}}"#
        ));
        assert!(
            e.contains("requests[1]: subagent `a` has no requests"),
            "{e}"
        );
        let e = err(r#"{"block_size":64,"requests":[{"t":0,"type":"s","out":1,"hash_ids":[]}]}"#);
        assert!(e.contains("requests[0]: missing `in`"), "{e}");
        let e = err(&format!(r#"{{"requests":[{r}]}}"#));
        assert!(e.contains("x.json:1:") && e.contains("block_size"), "{e}");
        let e = err(r#"{"block_size":64,"requests":[{"t":0,"type":"x"}]}"#);
        assert!(e.contains("unknown `type` \"x\""), "{e}");
        let e = err(r#"{"block_size":64,"requests":[]}"#);
        assert!(e.contains("without requests"), "{e}");
        assert!(err("{\n\"block_size\": 64,\n\"requests\": [1]\n}").contains("x.json:3:"));
        assert!(err("   ").contains("empty"));
        assert!(err("[1,2]").contains("x.json:1:"));
    }

    /// Faults found by `tests/it/trace/agent_garbage.rs` that were reported by the tree's
    /// check without a JSON path (an empty `requests`, an agent id twice, times that overflow).
    #[test]
    fn garbage_faults_name_the_json_path() {
        let r = req(0.0, "");
        let e = err(r#"{"block_size":64,"requests":[]}"#);
        assert_eq!(e, "x.json:1: requests: an agent without requests");
        let sub = |id: &str, t: f64| {
            format!(r#"{{"t":{t},"type":"subagent","agent_id":"{id}","requests":[{r}]}}"#)
        };
        let e = err(&format!(
            r#"{{"block_size":64,"requests":[{r},{},{r},{}]}}"#,
            sub("a", 1.0),
            sub("a", 2.0)
        ));
        assert!(
            e.starts_with("x.json:1: requests[3]: the agent id `a` appears twice"),
            "{e}"
        );
        let e = err(&format!(
            r#"{{"block_size":64,"requests":[{r},{}]}}"#,
            sub(Agent::MAIN, 1.0)
        ));
        assert!(e.contains("requests[1]: the agent id"), "{e}");
        let e = err(&format!(
            r#"{{"block_size":64,"requests":[{}]}}"#,
            req(1e308, "")
        ));
        assert!(e.contains("requests[0]: `t` is too large"), "{e}");
        let e = err(&format!(
            r#"{{"block_size":64,"requests":[{}]}}"#,
            req(1.0, r#","api_time":1.7e308"#)
        ));
        assert!(e.contains("requests[0]: the times are too large"), "{e}");
        let e = err(&format!(
            r#"{{"block_size":64,"requests":[{r},{}]}}"#,
            req(1.0, r#","think_time":1e308"#)
        ));
        assert!(e.contains("requests[1]: the times are too large"), "{e}");
    }

    #[test]
    fn detection() {
        assert!(looks_like(
            br#"{"id":"t","models":[],"block_size":64,"hash_id_scope":"local""#
        ));
        assert!(!looks_like(br#"{"timestamp": 0, "input_length": 5}"#));
    }
}
