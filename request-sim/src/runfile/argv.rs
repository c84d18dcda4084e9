//! A run file's tables as command-line words: each key becomes its flag (`[schedule]
//! scale-factor = 2` → `--scale-factor=2`), checked by the flag's own value parser, so a
//! file refuses what the command line refuses, with `file:line`. The words go before the
//! user's own, and a flag given on the command line drops the file's value of it (and of any
//! flag it conflicts with): the command line wins, for lists too (a list on the command line
//! replaces the file's list, it does not add to it).

use std::collections::BTreeSet;
use std::ffi::OsString;

use super::keys::{Key, Keys, Kind};
use super::read::{Doc, Item, Val};
use crate::Result;

/// One key's words (`--long=value`, once per value).
#[derive(Debug, Clone, PartialEq)]
pub struct Fragment {
    /// clap's id of the flag.
    pub id: String,
    pub words: Vec<OsString>,
    /// The key's line in its file.
    pub line: usize,
}

/// The words of a scalar (`None`: not a scalar).
fn scalar(item: &Item) -> Option<String> {
    match &item.val {
        Val::Bool(b) => Some(b.to_string()),
        Val::Number(n) => Some(n.clone()),
        Val::Str(s) => Some(s.clone()),
        _ => None,
    }
}

/// `key = item` checked by the flag's value parser: its words.
fn fragment(doc: &Doc, keys: &Keys, key: &Key, item: &Item) -> Result<Fragment> {
    let name = format!("{}.{}", key.table, key.long);
    let values: Vec<String> = match (key.kind, &item.val) {
        // JSON's null (a summary's flag not given): no words.
        (_, Val::Other("null")) => Vec::new(),
        (Kind::Flag, Val::Bool(true)) => {
            return Ok(Fragment {
                id: key.id.clone(),
                words: vec![format!("--{}", key.long).into()],
                line: item.line,
            })
        }
        (Kind::Flag, Val::Bool(false)) => Vec::new(),
        (Kind::Flag, _) => {
            return Err(doc.error(
                item.line,
                format!("`{name}` is a switch: true or false, not {}", item.what()),
            ))
        }
        (Kind::List, Val::List(items)) => items
            .iter()
            .map(|i| {
                scalar(i).ok_or_else(|| {
                    doc.error(
                        i.line,
                        format!("`{name}`: a list of values, not of {}", i.what()),
                    )
                })
            })
            .collect::<Result<_>>()?,
        (Kind::Value, Val::List(_)) => {
            return Err(doc.error(item.line, format!("`{name}` takes one value, not an array")))
        }
        _ => vec![scalar(item).ok_or_else(|| {
            doc.error(
                item.line,
                format!("`{name}` takes a value, not {}", item.what()),
            )
        })?],
    };
    let arg = keys
        .arg(key)
        .ok_or_else(|| crate::Error::internal(format!("no flag for key {name}")))?;
    // The flag alone (its ties to other flags cut) parses each value as the command line would.
    let alone = clap::Command::new("check").no_binary_name(true).arg(
        arg.clone()
            .requires(clap::builder::Resettable::<clap::Id>::Reset)
            .conflicts_with(clap::builder::Resettable::<clap::Id>::Reset)
            .required(false),
    );
    for v in &values {
        if let Err(e) = alone
            .clone()
            .try_get_matches_from([format!("--{}={v}", key.long)])
        {
            return Err(doc.error(item.line, format!("`{name}` = {v:?}: {}", clap_words(&e))));
        }
    }
    Ok(Fragment {
        id: key.id.clone(),
        words: values
            .iter()
            .map(|v| format!("--{}={v}", key.long).into())
            .collect(),
        line: item.line,
    })
}

/// A clap error's first line, without its `error: ` prefix.
fn clap_words(e: &clap::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or_default();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

/// The words of every key of `tables` (a table of tables), refusing unknown tables and keys,
/// keys in the wrong table and values of the wrong type. `skip`: tables of the root that are
/// not flag tables (an experiment's `point`), read elsewhere.
pub fn fragments(doc: &Doc, tables: &Item, keys: &Keys, skip: &[&str]) -> Result<Vec<Fragment>> {
    let known = keys.tables();
    let mut out = Vec::new();
    let Some(entries) = tables.table() else {
        return Err(doc.error(tables.line, "expected a table of tables"));
    };
    for (name, item) in entries {
        if skip.contains(&name.as_str()) {
            continue;
        }
        let Some(table) = item.table().filter(|_| known.contains(&name.as_str())) else {
            let msg = match keys.by_long(name) {
                Some(k) => format!(
                    "`{name}` belongs in its table: [{}] {name} = ...",
                    k.table
                ),
                None => format!(
                    "unknown table [{name}]: the tables are {} (`request-sim config schema` lists every key)",
                    known.join(", ")
                ),
            };
            return Err(doc.error(item.line, msg));
        };
        for (long, value) in table {
            let key = keys
                .by_long(long)
                .filter(|k| k.table == *name)
                .ok_or_else(|| {
                    let msg = match keys.by_long(long) {
                        Some(k) => format!(
                            "`{long}` belongs in [{}], not in [{name}]",
                            k.table
                        ),
                        None => format!(
                            "unknown key `{long}` in [{name}] (no flag --{long}; `request-sim config schema` lists every key)"
                        ),
                    };
                    doc.error(value.line, msg)
                })?;
            out.push(fragment(doc, keys, key, value)?);
        }
    }
    Ok(out)
}

/// The fragments left when the flags `given` (clap ids) are set elsewhere (the command line,
/// a point of an experiment): a flag given, or one it conflicts with, drops the fragment.
pub fn without_given(keys: &Keys, frags: Vec<Fragment>, given: &BTreeSet<String>) -> Vec<Fragment> {
    let cmd = &keys.command;
    let arg = |id: &str| cmd.get_arguments().find(|a| a.get_id() == id);
    // Conflicts either way: clap lists them on the flag that declares them.
    let conflicts = |id: &str| -> Vec<String> {
        arg(id).map_or_else(Vec::new, |a| {
            cmd.get_arg_conflicts_with(a)
                .iter()
                .map(|c| c.get_id().to_string())
                .collect()
        })
    };
    let mut dropped: BTreeSet<String> = given.clone();
    for g in given {
        dropped.extend(conflicts(g));
    }
    frags
        .into_iter()
        .filter(|f| !dropped.contains(&f.id) && !conflicts(&f.id).iter().any(|c| given.contains(c)))
        .collect()
}

/// The words of fragments, in order.
pub fn words(frags: &[Fragment]) -> Vec<OsString> {
    frags.iter().flat_map(|f| f.words.iter().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runfile::read::from_toml;

    fn doc(text: &str) -> Doc {
        Doc {
            path: "run.toml".into(),
            root: from_toml(text).unwrap(),
        }
    }

    fn words_of(text: &str) -> Result<Vec<String>> {
        let d = doc(text);
        let keys = crate::cli::replay_keys();
        let f = fragments(&d, &d.root, &keys, &[])?;
        Ok(words(&f)
            .into_iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect())
    }

    #[test]
    fn keys_become_their_flags() {
        let w = words_of(
            "[schedule]\nscale-factor = 2.5\n[requests]\nstream = true\nno-stream = false\n[target]\nheader = [\"a:b\", \"c:d\"]\napi = \"openai\"\n",
        )
        .unwrap();
        assert_eq!(
            w,
            [
                "--scale-factor=2.5",
                "--stream",
                "--header=a:b",
                "--header=c:d",
                "--api=openai"
            ]
        );
    }

    #[test]
    fn bad_keys_and_values_name_file_and_line() {
        let e = words_of("[schedule]\n\nscale-factr = 2\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("run.toml:3: unknown key `scale-factr` in [schedule]"),
            "{e}"
        );
        let e = words_of("[trace]\nscale-factor = 2\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "run.toml:2: `scale-factor` belongs in [schedule], not in [trace]"
        );
        let e = words_of("scale-factor = 2\n").unwrap_err().to_string();
        assert!(
            e.starts_with("run.toml:1: `scale-factor` belongs in its table: [schedule]"),
            "{e}"
        );
        let e = words_of("[sched]\nx = 1\n").unwrap_err().to_string();
        assert!(
            e.starts_with("run.toml:1: unknown table [sched]: the tables are trace, transform"),
            "{e}"
        );
        let e = words_of("[schedule]\nscale-factor = \"fast\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("run.toml:2: `schedule.scale-factor` = \"fast\": invalid value"),
            "{e}"
        );
        let e = words_of("[requests]\nstream = 1\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "run.toml:2: `requests.stream` is a switch: true or false, not a number"
        );
        let e = words_of("[target]\napi = \"grpc-ish\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("run.toml:2: `target.api` = \"grpc-ish\": invalid value"),
            "{e}"
        );
        let e = words_of("[schedule]\nscale-factor = [1, 2]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "run.toml:2: `schedule.scale-factor` takes one value, not an array"
        );
    }

    #[test]
    fn a_given_flag_drops_the_file_value_and_its_conflicts() {
        let d = doc("[requests]\nno-stream = true\n[schedule]\nscale-factor = 2\nspin-us = 10\n");
        let keys = crate::cli::replay_keys();
        let f = fragments(&d, &d.root, &keys, &[]).unwrap();
        let given: BTreeSet<String> = ["stream".to_string(), "scale_factor".to_string()].into();
        let left = without_given(&keys, f, &given);
        assert_eq!(words(&left), vec![OsString::from("--spin-us=10")]);
    }
}
