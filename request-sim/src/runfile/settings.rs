//! What a run was, written into its summary so that it can be run again: every flag's
//! resolved value (defaults included), the tool's version and the trace's checksum
//! ([`Rerun`]); and the run file's own flags (`--config`, `--accept-changed-trace`), which
//! carry the settings from clap's matches to the summary (`crate::cli::RunFileArgs`).

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::io::Read;
use std::path::Path;

use clap::ArgMatches;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::keys::{Keys, Kind, ValueType};

/// Every flag's value, by table and key (`settings.schedule["scale-factor"]`): `null` for a
/// flag not given that has no default (derived at start-up, as the first run derived it).
/// Secrets (`--api-key`) are left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Settings(pub BTreeMap<String, BTreeMap<String, Value>>);

/// The trace file a run read, and its checksum.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceFile {
    pub path: String,
    pub bytes: u64,
    /// XXH3-64 of the file's bytes, 16 hex digits (`xxhsum -H3` prints the same).
    pub xxh3_64: String,
}

/// The summary's `rerun` section: `request-sim replay --config SUMMARY` runs it again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Rerun {
    /// request-sim's version that ran it.
    pub tool_version: String,
    /// The trace file (`None`: the built-in demo trace, or standard input).
    pub trace: Option<TraceFile>,
    /// Every setting, the seed resolved.
    pub settings: Settings,
    /// The settings that name where this run wrote (paths of the `[output]` table): not a
    /// difference between two runs (`compare`), not re-used by a re-run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own_paths: Vec<String>,
}

/// A flag's raw words as a JSON value of its type.
fn typed(raw: &str, ty: ValueType) -> Value {
    let number = match ty {
        ValueType::Integer => raw.parse::<i64>().ok().map(Value::from),
        ValueType::Number => raw
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number),
        ValueType::Bool => raw.parse::<bool>().ok().map(Value::Bool),
        ValueType::String => None,
    };
    number.unwrap_or_else(|| Value::String(raw.to_string()))
}

impl Settings {
    /// Every key of `keys` as clap matched it (given, from the environment, or defaulted).
    pub fn from_matches(m: &ArgMatches, keys: &Keys) -> Settings {
        let mut tables: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
        for key in keys.keys.iter().filter(|k| !k.secret) {
            let raw: Vec<String> = match m.try_get_raw(&key.id) {
                Ok(Some(v)) => v.map(|s| s.to_string_lossy().into_owned()).collect(),
                _ => Vec::new(),
            };
            let value = match key.kind {
                Kind::Flag => Value::Bool(raw.first().is_some_and(|r| r == "true")),
                Kind::Value => raw.first().map_or(Value::Null, |r| typed(r, key.ty)),
                Kind::List => Value::Array(raw.iter().map(|r| typed(r, key.ty)).collect()),
            };
            tables
                .entry(key.table.clone())
                .or_default()
                .insert(key.long.clone(), value);
        }
        Settings(tables)
    }

    /// Set one key (its long name) to `value`, when it is a key: what a sweep, a repeat set or
    /// a compatibility front end set in the flags after they were parsed.
    pub fn set(&mut self, long: &str, value: impl Into<Value>) {
        let value = value.into();
        for table in self.0.values_mut() {
            if let Some(v) = table.get_mut(long) {
                *v = value;
                return;
            }
        }
    }

    /// Set a path-valued key (`None`: `null`).
    pub fn set_path(&mut self, long: &str, path: Option<&Path>) {
        self.set(long, path.map(|p| p.display().to_string()));
    }

    /// One key's value.
    pub fn get(&self, long: &str) -> Option<&Value> {
        self.0.values().find_map(|t| t.get(long))
    }
}

/// The checksum of a trace file (`None`: standard input, a pipe, a FIFO or a directory, which
/// reading here would use up or cannot checksum, or not a readable file).
pub fn trace_file(path: &Path) -> Option<TraceFile> {
    if path.as_os_str() == "-" || !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut f = std::fs::File::open(path).ok()?;
    let mut h = twox_hash::XxHash3_64::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        h.write(&buf[..n]);
        bytes += n as u64;
    }
    Some(TraceFile {
        path: path.display().to_string(),
        bytes,
        xxh3_64: format!("{:016x}", h.finish()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command as Sub};
    use clap::Parser;

    fn parsed(args: &[&str]) -> crate::cli::ReplayArgs {
        let argv = ["request-sim", "replay"].iter().chain(args);
        match Cli::try_parse_from(argv).unwrap().command {
            Sub::Replay(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn settings_hold_every_flag_resolved() {
        let a = parsed(&[
            "--scale-factor",
            "2",
            "--header",
            "a:b",
            "--stream",
            "-d",
            "mooncake",
        ]);
        let s = &a.run_file.settings;
        assert_eq!(s.0["schedule"]["scale-factor"], serde_json::json!(2.0));
        assert_eq!(s.0["schedule"]["spin-us"], serde_json::json!(300));
        assert_eq!(s.0["target"]["header"], serde_json::json!(["a:b"]));
        assert_eq!(s.0["requests"]["stream"], serde_json::json!(true));
        assert_eq!(s.0["requests"]["no-stream"], serde_json::json!(false));
        assert_eq!(s.0["trace"]["dataset"], serde_json::json!("mooncake"));
        assert_eq!(s.0["prompts"]["seed"], Value::Null);
        assert_eq!(s.0["target"]["api"], serde_json::json!("openai"));
        assert!(s.get("api-key").is_none(), "secrets are never written");
        let keys = crate::cli::replay_keys();
        let n: usize = s.0.values().map(|t| t.len()).sum();
        assert_eq!(n, keys.keys.iter().filter(|k| !k.secret).count());
    }

    #[test]
    fn a_trace_checksum_is_xxh3_of_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(&p, b"hello").unwrap();
        let t = trace_file(&p).unwrap();
        assert_eq!(t.bytes, 5);
        // xxhsum -H3 of "hello".
        assert_eq!(t.xxh3_64, "9555e8555c62dcfd");
        assert!(trace_file(Path::new("-")).is_none());
    }
}
