//! A run file read into one tree of values, each with the line it is on: TOML (the format of
//! files people write and review) or JSON (a run's own `summary.json`, or a JSON file of the
//! same tables). Errors name `file:line`, as bad trace rows do.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A value of the file.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    Bool(bool),
    /// An integer or a float as written (clap's value parser reads it as the flag would).
    Number(String),
    Str(String),
    List(Vec<Item>),
    /// Keys in file order.
    Table(Vec<(String, Item)>),
    /// A value no flag takes (a TOML date).
    Other(&'static str),
}

/// A value and its line (1-based; 0: not known).
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub line: usize,
    pub val: Val,
}

/// A file read: where it is, and its root table.
#[derive(Debug, Clone)]
pub struct Doc {
    pub path: PathBuf,
    pub root: Item,
}

impl Doc {
    /// `file:line: msg`.
    pub fn error(&self, line: usize, msg: impl std::fmt::Display) -> Error {
        Error::config(self.at(line, msg))
    }

    /// `file:line: msg` as text.
    pub fn at(&self, line: usize, msg: impl std::fmt::Display) -> String {
        match line {
            0 => format!("{}: {msg}", self.path.display()),
            l => format!("{}:{l}: {msg}", self.path.display()),
        }
    }
}

impl Item {
    /// The entries of a table (`None`: not a table).
    pub fn table(&self) -> Option<&[(String, Item)]> {
        match &self.val {
            Val::Table(t) => Some(t),
            _ => None,
        }
    }

    /// The entry `key` of a table.
    pub fn get(&self, key: &str) -> Option<&Item> {
        self.table()?.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// What kind of value it is, in words.
    pub fn what(&self) -> &'static str {
        match &self.val {
            Val::Bool(_) => "a boolean",
            Val::Number(_) => "a number",
            Val::Str(_) => "a string",
            Val::List(_) => "an array",
            Val::Table(_) => "a table",
            Val::Other(w) => w,
        }
    }
}

/// Read a run file: `.json` as JSON, anything else as TOML.
pub fn read(path: &Path) -> Result<Doc> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("--config {}", path.display()), e))?;
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let root = if json {
        from_json(&text).map_err(|e| Error::config(format!("{}:{e}", path.display())))?
    } else {
        from_toml(&text).map_err(|e| Error::config(format!("{}:{e}", path.display())))?
    };
    Ok(Doc {
        path: path.to_path_buf(),
        root,
    })
}

/// The 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    1 + text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// TOML text as a tree (`Err`: `line: message`).
pub fn from_toml(text: &str) -> std::result::Result<Item, String> {
    use toml::de::{DeTable, DeValue};
    let table = DeTable::parse(text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_of(text, s.start));
        format!("{line}: {}", e.message().trim())
    })?;
    fn item(text: &str, line: usize, v: &DeValue<'_>) -> Item {
        let val = match v {
            DeValue::String(s) => Val::Str(s.to_string()),
            DeValue::Integer(i) => Val::Number(i.to_string()),
            DeValue::Float(f) => Val::Number(f.to_string()),
            DeValue::Boolean(b) => Val::Bool(*b),
            DeValue::Datetime(_) => Val::Other("a date"),
            DeValue::Array(a) => Val::List(
                a.iter()
                    .map(|e| item(text, line_of(text, e.span().start), e.get_ref()))
                    .collect(),
            ),
            DeValue::Table(t) => Val::Table(entries(text, t)),
        };
        Item { line, val }
    }
    fn entries(text: &str, t: &DeTable<'_>) -> Vec<(String, Item)> {
        let mut out: Vec<(String, Item)> = t
            .iter()
            .map(|(k, v)| {
                let line = line_of(text, k.span().start);
                (k.get_ref().to_string(), item(text, line, v.get_ref()))
            })
            .collect();
        out.sort_by_key(|(_, v)| v.line);
        out
    }
    Ok(Item {
        line: 1,
        val: Val::Table(entries(text, table.get_ref())),
    })
}

/// JSON text as a tree (`Err`: `line: message`). serde_json keeps no positions: a key's line is
/// that of its first `"key":` after its table's start (exact for the summary's one key a line).
pub fn from_json(text: &str) -> std::result::Result<Item, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{}: {e}", e.line()))?;
    fn item(text: &str, from: usize, v: &serde_json::Value) -> Item {
        let val = match v {
            serde_json::Value::Null => Val::Other("null"),
            serde_json::Value::Bool(b) => Val::Bool(*b),
            serde_json::Value::Number(n) => Val::Number(n.to_string()),
            serde_json::Value::String(s) => Val::Str(s.clone()),
            serde_json::Value::Array(a) => {
                Val::List(a.iter().map(|e| item(text, from, e)).collect())
            }
            serde_json::Value::Object(o) => {
                let mut entries: Vec<(String, Item)> = o
                    .iter()
                    .map(|(k, v)| {
                        let needle = format!("{:?}", k);
                        let at = text[from.min(text.len())..]
                            .find(&needle)
                            .map_or(from, |i| from + i);
                        let mut it = item(text, at, v);
                        it.line = line_of(text, at);
                        (k.clone(), it)
                    })
                    .collect();
                entries.sort_by_key(|(_, v)| v.line);
                Val::Table(entries)
            }
        };
        Item {
            line: line_of(text, from),
            val,
        }
    }
    let root = item(text, 0, &v);
    if root.table().is_none() {
        return Err("1: expected a JSON object of tables".into());
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_values_keep_their_lines() {
        let t = from_toml("# a run\n[schedule]\nscale-factor = 2\n\n[target]\napi = \"openai\"\nheader = [\"a:b\", \"c:d\"]\n").unwrap();
        let s = t.get("schedule").unwrap();
        assert_eq!(s.line, 2);
        let f = s.get("scale-factor").unwrap();
        assert_eq!((f.line, &f.val), (3, &Val::Number("2".into())));
        let h = t.get("target").unwrap().get("header").unwrap();
        assert_eq!(h.line, 7);
        assert!(matches!(&h.val, Val::List(l) if l.len() == 2));
        let e = from_toml("[schedule]\nscale-factor = \n").unwrap_err();
        assert!(e.starts_with("2: "), "{e}");
    }

    #[test]
    fn json_keys_get_the_line_of_their_text() {
        let t = from_json(
            "{\n  \"schedule\": {\n    \"scale-factor\": 2,\n    \"spin-us\": 300\n  }\n}",
        )
        .unwrap();
        let s = t.get("schedule").unwrap();
        assert_eq!(s.line, 2);
        assert_eq!(s.get("spin-us").unwrap().line, 4);
        assert_eq!(
            from_json("[1]").unwrap_err(),
            "1: expected a JSON object of tables"
        );
    }
}
