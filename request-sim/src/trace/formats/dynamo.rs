//! Dynamo request traces (`ai-dynamo/dynamo`, `docs/observability/request-tracing.md`): JSONL
//! (or gzip segments) of `dynamo.request.trace.v1` records, each either the record itself or
//! wrapped as `{"timestamp": ms, "event": {record}}`.
//!
//! - `schema` must be `dynamo.request.trace.v1`; `event_type` `request_end` is a request,
//!   `request_payload`, `tool_start`, `tool_end` and `tool_error` are counted and skipped, any
//!   other value is an error.
//! - A request: `request.request_received_ms` (its start), `request.output_tokens`,
//!   `request.total_time_ms` (server time; else `event_time_unix_ms` minus the start), and
//!   `request.replay` {`trace_block_size`, `input_length`, `input_sequence_hashes`}. The block
//!   size is the file's (one value for every row; `--block-size` may only repeat it).
//! - **Ids**: the u64 sequence hashes are content hashes shared by the whole file; they are
//!   renumbered to small ids in order of first appearance (same hash, same id, in every
//!   conversation). More hashes than `ceil(input_length / trace_block_size)` are dropped.
//! - **Agents**: `agent_context.trajectory_id` (newer writers: `session_id`) names the agent;
//!   `parent_trajectory_id` (`parent_session_id`) its parent. A trajectory without a parent is
//!   a conversation's main agent, with every trajectory below it as subagents. A row without
//!   `agent_context` is a conversation of one request. A parent that has no request in the
//!   file, two parents for one trajectory, and a cycle of parents are errors.
//! - **Spawn**: a subagent follows the last request of its parent that started at or before
//!   its own first request, at its recorded offset from that request's completion (at least
//!   0). **Join**: when the parent started no request while the subagent ran, the parent's
//!   first request after the subagent's last completion waits for it; otherwise it ran in the
//!   background.
//! - **Client gap** (rule `start_minus_server`): a request's start minus the previous request
//!   of its agent's completion (`request_received_ms + total_time_ms`), or minus the latest
//!   completion of the subagents it joins when that is later; at least 0.
//!
//! A line is read into the derived structs below: its `agent_context` and `request` stay JSON
//! until the record turns out to be a `request_end` (the events are skipped unread), `schema`
//! and `event_type` are checked by named functions. The rows are grouped by trajectory and
//! checked across lines here, and laid out as session trees by `dynamo/tree.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use self::tree::{single, tree, Row, Trajectory};
use super::agent_fields::{blocks, field_error, from_value, parse_object, row_error};
use super::fields;
use super::unit::{Format, Reader};
use crate::trace::error::{RowError, TraceError};
use crate::trace::model::FormatInfo;
use crate::trace::model::{Conversation, Corpus};
use crate::trace::options::LoadOptions;

mod tree;

/// The one schema version read.
pub const SCHEMA: &str = "dynamo.request.trace.v1";

/// Largest accepted `trace_block_size` (the `--block-size` limit).
const MAX_BLOCK: u64 = 1 << 20;

/// A line: the record itself, or (`event`) the wrapper of one.
#[derive(Deserialize)]
struct Record {
    #[serde(default)]
    schema: Option<Value>,
    #[serde(default)]
    event_type: Option<Value>,
    #[serde(default)]
    event_time_unix_ms: Option<f64>,
    #[serde(default)]
    agent_context: Option<Value>,
    #[serde(default)]
    request: Option<Value>,
    #[serde(default)]
    event: Option<Value>,
}

/// `agent_context`.
#[derive(Deserialize)]
struct Context {
    #[serde(alias = "session_id")]
    trajectory_id: String,
    #[serde(default, alias = "parent_session_id")]
    parent_trajectory_id: Option<String>,
}

/// `request` of a `request_end` record.
#[derive(Deserialize)]
struct Request {
    #[serde(default, deserialize_with = "request_id")]
    request_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(deserialize_with = "fields::output_length")]
    output_tokens: u32,
    #[serde(deserialize_with = "fields::timestamp_ms")]
    request_received_ms: f64,
    #[serde(default)]
    total_time_ms: Option<f64>,
    replay: Replay,
}

/// `request.replay`.
#[derive(Deserialize)]
struct Replay {
    trace_block_size: u64,
    #[serde(deserialize_with = "fields::input_length")]
    input_length: u32,
    input_sequence_hashes: Vec<u64>,
}

/// `request_id`: a string or a number (kept as its text); anything else is no id.
fn request_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// What one line is.
enum Line {
    Request(Row),
    Skipped,
}

/// What the rows of a file share: its block size (and the line that set it), the
/// `--block-size` given, and the hashes renumbered so far.
struct FileState {
    block: Option<(u64, usize)>,
    forced_block: Option<usize>,
    ids: HashMap<u64, u64>,
}

impl FileState {
    /// The small id of `hash`: the next one at its first appearance.
    fn id(&mut self, hash: u64) -> u64 {
        let next = self.ids.len() as u64;
        *self.ids.entry(hash).or_insert(next)
    }

    /// Checks the block size of the row on `line`: in range, the same on every row, and the
    /// one `--block-size` gives, if given.
    fn block_size(&mut self, size: u64, line: usize) -> Result<(), String> {
        if size == 0 || size > MAX_BLOCK {
            return Err(format!("must be between 1 and {MAX_BLOCK}, found {size}"));
        }
        match self.block {
            None => {
                if let Some(f) = self.forced_block.filter(|&f| f as u64 != size) {
                    return Err(format!(
                        "the file's hash ids are at {size} tokens per block; --block-size {f} contradicts it"
                    ));
                }
                self.block = Some((size, line));
            }
            Some((b, first)) if b != size => {
                return Err(format!(
                    "{size} differs from {b} on line {first} (one block size per file)"
                ))
            }
            Some(_) => {}
        }
        Ok(())
    }
}

/// Reads line `line`: a request, or an event that is counted and skipped.
fn check_line(
    text: &str,
    line: usize,
    name: &str,
    file: &mut FileState,
) -> Result<Line, TraceError> {
    let at = |e| row_error(name, line, e);
    let (rec, prefix) = unwrap_event(parse_object(text).map_err(at)?).map_err(at)?;
    read_record(rec, prefix, line, file).map_err(at)
}

/// The record of a line: the line itself, or its `event` (then its fields' prefix `event.`).
fn unwrap_event(outer: Record) -> Result<(Record, &'static str), RowError> {
    match outer.event {
        Some(ev @ Value::Object(_)) => Ok((from_value(ev, "event")?, "event.")),
        Some(other) => Err(RowError::Field {
            field: "event".into(),
            what: format!(
                "expected a trace record object, found {}",
                fields::describe_value(&other)
            ),
        }),
        None => Ok((outer, "")),
    }
}

/// Reads a record (its fields under `prefix`) into a row, or skips it.
fn read_record(
    rec: Record,
    prefix: &str,
    line: usize,
    file: &mut FileState,
) -> Result<Line, RowError> {
    let bad = |field: &str, what: String| RowError::Field {
        field: format!("{prefix}{field}"),
        what,
    };
    check_schema(rec.schema.as_ref()).map_err(|w| bad("schema", w))?;
    if !is_request(rec.event_type.as_ref()).map_err(|w| bad("event_type", w))? {
        return Ok(Line::Skipped);
    }
    let ctx = context(rec.agent_context, prefix)?;
    let Some(req) = rec.request else {
        return Err(bad(
            "request",
            "missing (a request_end record carries its request)".into(),
        ));
    };
    let req: Request = from_value(req, &format!("{prefix}request"))?;
    let r = &req.replay;
    file.block_size(r.trace_block_size, line)
        .map_err(|w| bad("request.replay.trace_block_size", w))?;
    let need = blocks(r.input_length, r.trace_block_size as usize);
    let hash_ids: Vec<u64> = r
        .input_sequence_hashes
        .iter()
        .take(need)
        .map(|&h| file.id(h))
        .collect();
    let end_ms =
        end_ms(&req, rec.event_time_unix_ms).map_err(|w| bad("request.total_time_ms", w))?;
    let (trajectory, parent) = match ctx {
        Some(c) => (Some(c.trajectory_id), c.parent_trajectory_id),
        None => (None, None),
    };
    Ok(Line::Request(Row {
        line,
        trajectory,
        parent,
        input_length: r.input_length,
        output_length: req.output_tokens,
        hash_ids,
        start_ms: req.request_received_ms,
        end_ms,
        request_id: req.request_id,
        model: req.model.map(Arc::from),
    }))
}

/// `schema` must be [`SCHEMA`].
fn check_schema(schema: Option<&Value>) -> Result<(), String> {
    match schema {
        Some(Value::String(s)) if s == SCHEMA => Ok(()),
        Some(Value::String(s)) => Err(format!(
            "unknown schema {} (this reader knows {SCHEMA})",
            fields::quote_short(s)
        )),
        Some(v) => Err(format!(
            "expected a string, found {}",
            fields::describe_value(v)
        )),
        None => Err(format!("missing (expected {SCHEMA:?})")),
    }
}

/// Whether `event_type` is a request (`request_end`); the tool and payload events are not.
fn is_request(event_type: Option<&Value>) -> Result<bool, String> {
    match event_type {
        Some(Value::String(s)) => match s.as_str() {
            "request_end" => Ok(true),
            "request_payload" | "tool_start" | "tool_end" | "tool_error" => Ok(false),
            other => Err(format!(
                "unknown event type {} (known: request_end, request_payload, tool_start, tool_end, tool_error)",
                fields::quote_short(other)
            )),
        },
        Some(v) => Err(format!(
            "expected a string, found {}",
            fields::describe_value(v)
        )),
        None => Err("missing".into()),
    }
}

/// `agent_context` (fields under `prefix`): none, or a trajectory id and maybe its parent's,
/// neither empty.
fn context(v: Option<Value>, prefix: &str) -> Result<Option<Context>, RowError> {
    let c: Context = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => from_value(v, &format!("{prefix}agent_context"))?,
    };
    let empty = |field: &str, what: &str| RowError::Field {
        field: format!("{prefix}agent_context.{field}"),
        what: what.into(),
    };
    if c.trajectory_id.is_empty() {
        return Err(empty("trajectory_id", "must not be empty"));
    }
    if c.parent_trajectory_id.as_deref() == Some("") {
        return Err(empty(
            "parent_trajectory_id",
            "must not be empty (omit it or use null for a main agent)",
        ));
    }
    Ok(Some(c))
}

/// The end of a request: its start plus `total_time_ms` (a number of ms >= 0), else the
/// record's `event_time_unix_ms` when that is not before the start.
fn end_ms(req: &Request, event_time_ms: Option<f64>) -> Result<Option<f64>, String> {
    match req.total_time_ms {
        Some(t) if !t.is_finite() || !(0.0..=fields::MAX_ABS_TIMESTAMP_MS).contains(&t) => {
            Err(format!(
                "must be a number of ms >= 0, found {}",
                fields::short_num(t)
            ))
        }
        Some(t) => Ok(Some(req.request_received_ms + t)),
        None => Ok(event_time_ms.filter(|e| e.is_finite() && *e >= req.request_received_ms)),
    }
}

/// The requests of a file, grouped: trajectories, and the rows without `agent_context`.
#[derive(Default)]
struct Grouped {
    trajectories: Vec<Trajectory>,
    by_id: HashMap<String, usize>,
    singles: Vec<(usize, Row)>,
    /// The conversations in order of first appearance: `Ok(trajectory)` or `Err(single)`.
    firsts: Vec<Result<usize, usize>>,
    /// Tool and payload events, counted for the message of a file without requests.
    ignored: usize,
}

impl Grouped {
    /// Adds the row of `line`; a trajectory names the same parent on every row.
    fn add(&mut self, name: &str, line: usize, row: Row) -> Result<(), TraceError> {
        let Some(tid) = row.trajectory.clone() else {
            self.firsts.push(Err(self.singles.len()));
            self.singles.push((line, row));
            return Ok(());
        };
        let Some(&i) = self.by_id.get(&tid) else {
            self.by_id.insert(tid.clone(), self.trajectories.len());
            self.firsts.push(Ok(self.trajectories.len()));
            self.trajectories.push(Trajectory {
                id: tid,
                line,
                parent: row.parent.clone(),
                rows: vec![row],
            });
            return Ok(());
        };
        let t = &mut self.trajectories[i];
        if t.parent != row.parent {
            return Err(field_error(
                name,
                line,
                "agent_context.parent_trajectory_id",
                format!(
                    "trajectory {} has parent {} here but {} on line {}",
                    fields::quote_short(&tid),
                    show(&row.parent),
                    show(&t.parent),
                    t.line
                ),
            ));
        }
        t.rows.push(row);
        Ok(())
    }
}

/// Builds the corpus from every non-blank line.
pub(crate) fn build(
    name: &str,
    lines: &[(usize, String)],
    opts: &LoadOptions,
) -> Result<Corpus, TraceError> {
    let mut file = FileState {
        block: None,
        forced_block: opts.block_size,
        ids: HashMap::new(),
    };
    let mut g = Grouped::default();
    for (line, text) in lines {
        match check_line(text, *line, name, &mut file)? {
            Line::Skipped => g.ignored += 1,
            Line::Request(row) => g.add(name, *line, row)?,
        }
    }
    let Some((block, _)) = file.block else {
        return Err(TraceError::NoRequests {
            path: name.to_owned(),
            reason: format!("no request_end records ({} other events)", g.ignored),
        });
    };
    for t in &mut g.trajectories {
        t.rows
            .sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms).then(a.line.cmp(&b.line)));
    }
    let parent_of = parents(name, &g)?;
    check_cycles(name, &g.trajectories, &parent_of)?;
    Ok(Corpus {
        production: None,
        dense_ids: None,
        conversations: conversations(g, &parent_of, name, block as usize),
        notes: Vec::new(),
    })
}

/// The parent of every trajectory (an index), each present in the file.
fn parents(name: &str, g: &Grouped) -> Result<Vec<Option<usize>>, TraceError> {
    g.trajectories
        .iter()
        .map(|t| {
            let Some(p) = &t.parent else {
                return Ok(None);
            };
            let i = g.by_id.get(p).ok_or_else(|| {
                field_error(
                    name,
                    t.line,
                    "agent_context.parent_trajectory_id",
                    format!(
                        "names trajectory {}, which has no request_end in the file",
                        fields::quote_short(p)
                    ),
                )
            })?;
            Ok(Some(*i))
        })
        .collect()
}

/// No trajectory is its own ancestor.
fn check_cycles(
    name: &str,
    trajectories: &[Trajectory],
    parent_of: &[Option<usize>],
) -> Result<(), TraceError> {
    for (i, t) in trajectories.iter().enumerate() {
        let mut path = vec![i];
        let mut cur = i;
        while let Some(p) = parent_of[cur] {
            if let Some(k) = path.iter().position(|&x| x == p) {
                let names: Vec<String> = path[k..]
                    .iter()
                    .chain(std::iter::once(&p))
                    .map(|&x| trajectories[x].id.clone())
                    .collect();
                return Err(field_error(
                    name,
                    trajectories[path[k]].line.min(t.line),
                    "agent_context.parent_trajectory_id",
                    format!("trajectories form a cycle: {}", names.join(" -> ")),
                ));
            }
            path.push(p);
            cur = p;
        }
    }
    Ok(())
}

/// The conversations in order of first appearance: a tree per trajectory without a parent, a
/// conversation of one request per row without `agent_context`.
fn conversations(
    g: Grouped,
    parent_of: &[Option<usize>],
    name: &str,
    block: usize,
) -> Vec<Conversation> {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); g.trajectories.len()];
    for (i, p) in parent_of.iter().enumerate() {
        if let Some(p) = p {
            children[*p].push(i);
        }
    }
    let source: Arc<str> = Arc::from(name);
    let mut slots: Vec<Option<Trajectory>> = g.trajectories.into_iter().map(Some).collect();
    let mut singles: Vec<Option<(usize, Row)>> = g.singles.into_iter().map(Some).collect();
    let mut conversations = Vec::new();
    for first in g.firsts {
        match first {
            Err(k) => {
                let Some((line, row)) = singles[k].take() else {
                    continue;
                };
                conversations.push(single(line, &row, &source, block));
            }
            Ok(i) if parent_of[i].is_none() => {
                conversations.push(tree(i, &mut slots, &children, &source, block));
            }
            Ok(_) => {}
        }
    }
    conversations
}

/// A parent for messages: quoted, or `none`.
fn show(p: &Option<String>) -> String {
    p.as_deref()
        .map(fields::quote_short)
        .unwrap_or_else(|| "none".into())
}

/// Dynamo: a `schema` `dynamo.request.trace.*`, bare or inside `event`.
pub(crate) static FORMAT: Format = Format {
    info: FormatInfo::corpus(
        "dynamo",
        64,
        "Dynamo request trace JSONL (dynamo.request.trace.v1): request_end events, subagents by parent_trajectory_id",
    ),
    recognise: |p| {
        let v1 = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .is_some_and(|s| s.starts_with("dynamo.request.trace."))
        };
        p.json.is_some_and(|o| {
            v1(o.get("schema")) || v1(o.get("event").and_then(|e| e.get("schema")))
        })
    },
    read: Reader::Corpus {
        file: |name, input, opts| super::agent_jsonl::read_with(name, input, opts, build),
        dir: None,
    },
};
