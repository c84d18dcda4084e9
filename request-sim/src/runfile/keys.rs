//! The keys of a run file, read off clap's own description of the flags (no second list):
//! every long flag of a command is a key of the table named after its `--help` heading, with
//! the kind, type, choices and defaults clap knows. A new flag is a new key by itself.

use std::any::TypeId;
use std::path::PathBuf;

use clap::builder::ArgAction;
use clap::{Arg, Command};

/// The `--help` heading of the flags about the run file itself (`--config`, ...): they are not
/// keys of a file.
pub const FILE_HEADING: &str = "Config file";

/// How a key's value becomes command-line words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A switch (`--stream`): `true` or `false`.
    Flag,
    /// One value (`--scale-factor 2`).
    Value,
    /// Any number of values (`--header`, `--goodput`, `--users 1,2`): an array.
    List,
}

/// What a value is, as clap parses it (for the schema and for the summary's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    Bool,
    Integer,
    Number,
    /// Text (paths included).
    String,
}

/// One key: a long flag of the command.
#[derive(Debug, Clone)]
pub struct Key {
    /// clap's id of the flag (its field name).
    pub id: String,
    /// The flag's long name, the key's name (`scale-factor`).
    pub long: String,
    /// The table it belongs in (`schedule`).
    pub table: String,
    pub kind: Kind,
    pub ty: ValueType,
    /// A path (the flag's values are files or directories).
    pub path: bool,
    /// The values clap accepts, when it lists them (enums).
    pub choices: Vec<String>,
    /// clap's default values (empty: none).
    pub defaults: Vec<String>,
    /// The flag's one-line help.
    pub help: String,
    /// A secret (`--api-key`): never written into a summary.
    pub secret: bool,
}

/// The keys of one command, in `--help` order.
#[derive(Debug, Clone)]
pub struct Keys {
    pub keys: Vec<Key>,
    /// The command whose flags they are (its value parsers check a file's values).
    pub command: Command,
}

/// The table of a `--help` heading: its last word in lower case (`Trace` → `trace`, `Server
/// metrics and run validity` → `validity`); flags under no heading: the command's own table.
pub fn table_of(heading: Option<&str>, command: &str) -> String {
    match heading.and_then(|h| h.split_whitespace().last()) {
        Some(word) => word.to_lowercase(),
        None => command.to_string(),
    }
}

fn value_type(arg: &Arg) -> ValueType {
    let t = arg.get_value_parser().type_id();
    let is = |id: TypeId| t == id;
    if is(TypeId::of::<bool>()) {
        ValueType::Bool
    } else if [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
    ]
    .into_iter()
    .any(is)
    {
        ValueType::Integer
    } else if is(TypeId::of::<f64>()) || is(TypeId::of::<f32>()) {
        ValueType::Number
    } else {
        ValueType::String
    }
}

impl Key {
    fn of(arg: &Arg, command: &str) -> Option<Key> {
        let long = arg.get_long()?;
        if arg.is_hide_set() || arg.get_help_heading() == Some(FILE_HEADING) {
            return None;
        }
        let kind = match arg.get_action() {
            ArgAction::SetTrue => Kind::Flag,
            ArgAction::Append => Kind::List,
            ArgAction::Set => Kind::Value,
            // --help, --version and counters are not settings.
            _ => return None,
        };
        Some(Key {
            id: arg.get_id().to_string(),
            long: long.to_string(),
            table: table_of(arg.get_help_heading(), command),
            kind,
            ty: match kind {
                Kind::Flag => ValueType::Bool,
                _ => value_type(arg),
            },
            path: arg.get_value_parser().type_id() == TypeId::of::<PathBuf>(),
            choices: arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect(),
            defaults: arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect(),
            help: arg
                .get_help()
                .map(|h| h.to_string().replace('\n', " "))
                .unwrap_or_default(),
            secret: arg.is_hide_env_values_set(),
        })
    }
}

impl Keys {
    /// The keys of `command` (its name names the table of flags under no heading).
    pub fn of(command: Command) -> Keys {
        let mut command = command.color(clap::ColorChoice::Never);
        command.build();
        let name = command.get_name().to_string();
        let keys = command
            .get_arguments()
            .filter_map(|a| Key::of(a, &name))
            .collect();
        Keys { keys, command }
    }

    /// The tables, in `--help` order.
    pub fn tables(&self) -> Vec<&str> {
        let mut t: Vec<&str> = Vec::new();
        for k in &self.keys {
            if !t.contains(&k.table.as_str()) {
                t.push(&k.table);
            }
        }
        t
    }

    /// The key of that long name, in any table.
    pub fn by_long(&self, long: &str) -> Option<&Key> {
        self.keys.iter().find(|k| k.long == long)
    }

    /// The key of that clap id.
    pub fn by_id(&self, id: &str) -> Option<&Key> {
        self.keys.iter().find(|k| k.id == id)
    }

    /// clap's description of a key's flag.
    pub fn arg(&self, key: &Key) -> Option<&Arg> {
        self.command
            .get_arguments()
            .find(|a| a.get_id().as_str() == key.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_keys_are_the_long_flags_in_their_heading_tables() {
        let keys = crate::cli::replay_keys();
        let k = keys.by_long("scale-factor").unwrap();
        assert_eq!(
            (k.table.as_str(), k.kind, k.ty),
            ("schedule", Kind::Value, ValueType::Number)
        );
        assert_eq!(k.defaults, vec!["1".to_string()]);
        let k = keys.by_long("dataset-path").unwrap();
        assert_eq!((k.table.as_str(), k.path), ("trace", true));
        assert_eq!(keys.by_long("amplify").unwrap().table, "transform");
        // Flags after a flattened group keep their own group's heading.
        assert_eq!(keys.by_long("users").unwrap().table, "trace");
        assert_eq!(keys.by_long("users").unwrap().kind, Kind::List);
        assert_eq!(keys.by_long("stream").unwrap().kind, Kind::Flag);
        assert_eq!(keys.by_long("max-drift-ms").unwrap().table, "validity");
        assert_eq!(keys.by_long("goodput").unwrap().table, "output");
        assert_eq!(keys.by_long("timing").unwrap().table, "requests");
        assert_eq!(keys.by_long("max-requests").unwrap().ty, ValueType::Integer);
        let api = keys.by_long("api").unwrap();
        assert!(api.choices.contains(&"openai".to_string()), "{api:?}");
        assert!(keys.by_long("api-key").unwrap().secret);
        // The run file's own flags and the anchor's ignored ones are not keys.
        assert!(keys.by_long("config").is_none());
        assert!(keys.by_long("tracing-path").is_none());
        assert_eq!(
            keys.tables(),
            [
                "trace",
                "transform",
                "prompts",
                "target",
                "schedule",
                "requests",
                "output",
                "validity",
                "scenario"
            ]
        );
        assert_eq!(keys.by_long("scenario").unwrap().table, "scenario");
    }
}
