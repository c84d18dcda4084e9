//! Reading a corpus (step 1 of the module docs): ShareGPT JSON, JSONL with a text field, or
//! plain UTF-8 text files, up to a byte budget, as one string of `" " + word` units.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::de::{DeserializeSeed, SeqAccess, Visitor};
use serde::Deserialize;

use super::spec::{corpus_error, CorpusFormat, CorpusSpec};
use crate::prompt::PromptError;

/// The corpus text as read: its words, each with one leading space, back to back.
pub struct ReadText {
    pub text: String,
    pub format: CorpusFormat,
    pub documents: usize,
    pub truncated: bool,
}

/// Collects documents' words into one string, up to a byte budget.
struct Collector {
    text: String,
    max: usize,
    documents: usize,
}

impl Collector {
    fn full(&self) -> bool {
        self.text.len() >= self.max
    }

    fn add(&mut self, doc: &str) {
        self.documents += 1;
        for w in doc.split_whitespace() {
            if self.full() {
                return;
            }
            self.text.push(' ');
            self.text.push_str(w);
        }
    }
}

/// Read the corpus `spec` names: the format is taken from the path (a directory: text files;
/// `.jsonl`: JSONL; `.json`: ShareGPT when it starts with `[`, else JSONL; anything else:
/// text).
pub fn read_documents(spec: &CorpusSpec) -> Result<ReadText, PromptError> {
    let path = &spec.path;
    let mut c = Collector {
        text: String::new(),
        max: spec.max_bytes.max(1),
        documents: 0,
    };
    let format = detect(path)?;
    match format {
        CorpusFormat::Text => read_text_files(path, &mut c)?,
        CorpusFormat::Jsonl => read_jsonl(path, &spec.field, &mut c)?,
        CorpusFormat::ShareGpt => read_sharegpt(path, &mut c)?,
    }
    if c.text.is_empty() {
        let what = match format {
            CorpusFormat::Jsonl => format!(
                "no row has a non-empty {:?} field (set --prompt-corpus-field)",
                spec.field
            ),
            CorpusFormat::ShareGpt => "no conversation has a non-empty value".to_string(),
            CorpusFormat::Text => "no text".to_string(),
        };
        return Err(corpus_error(path, what));
    }
    Ok(ReadText {
        truncated: c.full(),
        text: c.text,
        format,
        documents: c.documents,
    })
}

fn detect(path: &Path) -> Result<CorpusFormat, PromptError> {
    if path.is_dir() {
        return Ok(CorpusFormat::Text);
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("jsonl") => Ok(CorpusFormat::Jsonl),
        Some("json") => {
            let mut f = std::fs::File::open(path).map_err(|e| PromptError::read(path, e))?;
            let mut head = [0u8; 4096];
            let n = f.read(&mut head).map_err(|e| PromptError::read(path, e))?;
            let first = head[..n]
                .iter()
                .find(|b| !b.is_ascii_whitespace() && **b != 0xEF && **b != 0xBB && **b != 0xBF);
            Ok(match first {
                Some(b'[') => CorpusFormat::ShareGpt,
                _ => CorpusFormat::Jsonl,
            })
        }
        _ => Ok(CorpusFormat::Text),
    }
}

/// A text file, or every `.txt` file under a directory (sorted by path).
fn read_text_files(path: &Path, c: &mut Collector) -> Result<(), PromptError> {
    let mut files = Vec::new();
    if path.is_dir() {
        collect_txt(path, &mut files)?;
        if files.is_empty() {
            return Err(corpus_error(path, "the directory holds no .txt file"));
        }
    } else {
        files.push(path.to_path_buf());
    }
    for f in files {
        if c.full() {
            break;
        }
        // Read at most what the budget still takes (plus a margin for the last word).
        let budget = (c.max - c.text.len()) as u64 + 4096;
        let mut bytes = Vec::new();
        std::fs::File::open(&f)
            .and_then(|h| h.take(budget).read_to_end(&mut bytes))
            .map_err(|e| PromptError::read(&f, e))?;
        let text = match std::str::from_utf8(&bytes) {
            Ok(t) => t,
            // A budget cut can split the last character; anything else is not UTF-8.
            Err(e) if e.error_len().is_none() => {
                std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default()
            }
            Err(e) => {
                return Err(corpus_error(
                    &f,
                    format!(
                        "not UTF-8 text (invalid byte at offset {})",
                        e.valid_up_to()
                    ),
                ))
            }
        };
        c.add(text);
    }
    Ok(())
}

fn collect_txt(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), PromptError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| PromptError::read(dir, e))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .map_err(|e| PromptError::read(dir, e))?;
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_txt(&p, out)?;
        } else if p.extension().is_some_and(|e| e.eq_ignore_ascii_case("txt")) {
            out.push(p);
        }
    }
    Ok(())
}

/// JSONL: the `field` of every row (a string, or an array of strings); rows without it are
/// skipped; a line that is not JSON is an error naming it.
fn read_jsonl(path: &Path, field: &str, c: &mut Collector) -> Result<(), PromptError> {
    let f = std::fs::File::open(path).map_err(|e| PromptError::read(path, e))?;
    for (i, line) in BufReader::new(f).lines().enumerate() {
        if c.full() {
            break;
        }
        let line = line.map_err(|e| PromptError::read(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let row: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| corpus_error(path, format!("line {}: not a JSON object: {e}", i + 1)))?;
        match row.get(field) {
            Some(serde_json::Value::String(s)) => c.add(s),
            Some(serde_json::Value::Array(a)) => {
                a.iter().filter_map(|v| v.as_str()).for_each(|s| c.add(s))
            }
            _ => {}
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct Conversation {
    #[serde(default)]
    conversations: Vec<Turn>,
}

#[derive(Deserialize)]
struct Turn {
    #[serde(default)]
    value: Option<String>,
}

/// ShareGPT JSON, read as a stream: conversations are parsed one at a time and reading stops
/// at the byte budget (the full ShareGPT file is 600+ MB).
fn read_sharegpt(path: &Path, c: &mut Collector) -> Result<(), PromptError> {
    struct Rows<'c>(&'c mut Collector);
    impl<'de> Visitor<'de> for Rows<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON array of conversations")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
            // At the byte budget this returns before the end of the array: the parser then
            // reports trailing data, which `read_sharegpt` ignores (the rest is never read).
            while !self.0.full() {
                let Some(conv) = seq.next_element::<Conversation>()? else {
                    return Ok(());
                };
                for v in conv.conversations.iter().filter_map(|t| t.value.as_deref()) {
                    self.0.add(v);
                }
            }
            Ok(())
        }
    }
    impl<'de> DeserializeSeed<'de> for Rows<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(
            self,
            d: D,
        ) -> std::result::Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }
    let f = std::fs::File::open(path).map_err(|e| PromptError::read(path, e))?;
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(1 << 20, f));
    match Rows(c).deserialize(&mut de) {
        Ok(()) => Ok(()),
        Err(_) if c.full() => Ok(()),
        Err(e) => Err(corpus_error(
            path,
            format!(
                "not ShareGPT JSON ([{{\"conversations\": [{{\"from\": .., \"value\": ..}}]}}]): {e}"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::spec::fixture as data;
    use super::*;

    #[test]
    fn the_three_formats_are_read() {
        let sg = read_documents(&CorpusSpec::new(data("sharegpt.json"))).unwrap();
        assert_eq!(sg.format, CorpusFormat::ShareGpt);
        assert!(sg.documents >= 60 && !sg.truncated, "{}", sg.documents);
        assert!(sg.text.starts_with(' ') && !sg.text.contains('\n'));
        let js = read_documents(&CorpusSpec::new(data("rows.jsonl"))).unwrap();
        assert_eq!(js.format, CorpusFormat::Jsonl);
        // 120 rows, 12 of which have no "text" field.
        assert_eq!(js.documents, 108);
        let tx = read_documents(&CorpusSpec::new(data("txt"))).unwrap();
        assert_eq!(tx.format, CorpusFormat::Text);
        assert_eq!(tx.documents, 2);
        let one = read_documents(&CorpusSpec::new(data("txt/a.txt"))).unwrap();
        assert!(tx.text.starts_with(&one.text));
    }

    #[test]
    fn reading_stops_at_the_byte_budget() {
        let spec = CorpusSpec {
            max_bytes: 1000,
            ..CorpusSpec::new(data("sharegpt.json"))
        };
        let r = read_documents(&spec).unwrap();
        assert!(r.truncated);
        assert!(
            r.text.len() >= 1000 && r.text.len() < 1000 + 64,
            "{}",
            r.text.len()
        );
    }

    #[test]
    fn bad_corpora_get_clear_messages() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.jsonl");
        std::fs::write(&bad, "{\"text\": \"fine\"}\nnot json\n").unwrap();
        let e = read_documents(&CorpusSpec::new(&bad))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("bad.jsonl") && e.contains("line 2"), "{e}");
        let nofield = dir.path().join("nofield.jsonl");
        std::fs::write(&nofield, "{\"prompt\": \"x y\"}\n").unwrap();
        let e = read_documents(&CorpusSpec::new(&nofield))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("\"text\"") && e.contains("--prompt-corpus-field"),
            "{e}"
        );
        let ok = read_documents(&CorpusSpec {
            field: "prompt".into(),
            ..CorpusSpec::new(&nofield)
        })
        .unwrap();
        assert_eq!(ok.text, " x y");
        let sg = dir.path().join("sg.json");
        std::fs::write(&sg, "[{\"conversations\": 5}]").unwrap();
        let e = read_documents(&CorpusSpec::new(&sg))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("ShareGPT"), "{e}");
        let bin = dir.path().join("bin.txt");
        std::fs::write(&bin, b"ok \xff\xfe").unwrap();
        let e = read_documents(&CorpusSpec::new(&bin))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("UTF-8") && e.contains("offset 3"), "{e}");
    }
}
