//! A parser for the Prometheus text exposition format (version 0.0.4).
//!
//! Hand-written on purpose: the crate that fits (`prometheus-parse`) would add `chrono` and a
//! regex-per-line parser to the dependency tree for a grammar of a few lines; this parser keeps
//! every family (known or not) with its `# TYPE`, handles escaped label values, `NaN`/`+Inf`,
//! optional timestamps, and reports bad lines with their line number instead of dropping them.

use std::collections::BTreeMap;
use std::fmt;

/// The `# TYPE` of a metric family (`Untyped` when the page does not say).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

/// One sample line: the full sample name (with `_bucket`/`_sum`/`_count`/`_total` suffixes as
/// written), its labels and its value.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A metric family: the name from `# TYPE` (or the sample name when untyped) and its samples.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Family {
    pub name: String,
    pub kind: Kind,
    pub help: Option<String>,
    pub samples: Vec<Sample>,
}

/// A parsed `/metrics` page: families in page order.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Page {
    pub families: Vec<Family>,
}

/// A line the parser could not read, with its 1-based line number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/metrics line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

impl Page {
    /// The family called `name` (the `# TYPE` name, e.g. `vllm:time_to_first_token_seconds`).
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// Every sample called exactly `name`, over all families.
    pub fn samples<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.families
            .iter()
            .flat_map(|f| f.samples.iter())
            .filter(move |s| s.name == name)
    }

    /// The sum of every sample called `name` over all label sets (e.g. all models, all engines),
    /// or `None` when the page has no such sample.
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for s in self.samples(name) {
            found = true;
            total += s.value;
        }
        found.then_some(total)
    }

    /// The largest value of the samples called `name` (for ratios such as KV usage, where
    /// summing over label sets would be wrong).
    pub fn max(&self, name: &str) -> Option<f64> {
        self.samples(name).map(|s| s.value).reduce(f64::max)
    }
}

fn kind_of(word: &str) -> Kind {
    match word {
        "counter" => Kind::Counter,
        "gauge" => Kind::Gauge,
        "histogram" => Kind::Histogram,
        "summary" => Kind::Summary,
        _ => Kind::Untyped,
    }
}

/// Whether sample `sample` belongs to family `family` (suffixes of histograms, summaries and
/// counters).
fn belongs(sample: &str, family: &str, kind: Kind) -> bool {
    if sample == family {
        return true;
    }
    let Some(rest) = sample.strip_prefix(family) else {
        return false;
    };
    match kind {
        Kind::Histogram => matches!(rest, "_bucket" | "_sum" | "_count" | "_created"),
        Kind::Summary => matches!(rest, "_sum" | "_count" | "_created"),
        Kind::Counter => matches!(rest, "_total" | "_created"),
        _ => false,
    }
}

/// Parse a whole page. Blank lines and comments other than `# HELP`/`# TYPE` are skipped; a
/// sample line that cannot be read is an error naming its line.
pub fn parse(text: &str) -> Result<Page, ParseError> {
    let mut page = Page::default();
    // Index of the family the next samples may belong to.
    let mut current: Option<usize> = None;
    let mut helps: BTreeMap<String, String> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim_start();
            if let Some(rest) = comment.strip_prefix("TYPE ") {
                let mut parts = rest.split_whitespace();
                let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
                    return Err(ParseError {
                        line: line_no,
                        message: format!("`# TYPE` without a name and a type: {line}"),
                    });
                };
                let help = helps.remove(name);
                page.families.push(Family {
                    name: name.to_string(),
                    kind: kind_of(kind),
                    help,
                    samples: Vec::new(),
                });
                current = Some(page.families.len() - 1);
            } else if let Some(rest) = comment.strip_prefix("HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                match page.families.iter_mut().rev().find(|f| f.name == name) {
                    Some(f) if f.help.is_none() => f.help = Some(help.to_string()),
                    _ => {
                        helps.insert(name.to_string(), help.to_string());
                    }
                }
            }
            continue;
        }
        let sample = parse_sample(line).map_err(|message| ParseError {
            line: line_no,
            message,
        })?;
        let fits = current
            .map(|c| {
                let f = &page.families[c];
                belongs(&sample.name, &f.name, f.kind)
            })
            .unwrap_or(false);
        if fits {
            if let Some(c) = current {
                page.families[c].samples.push(sample);
            }
        } else if let Some(f) = page.families.iter_mut().find(|f| f.name == sample.name) {
            // An untyped family seen before (samples of one family should be contiguous, but a
            // page that interleaves them loses nothing).
            f.samples.push(sample);
        } else {
            let help = helps.remove(&sample.name);
            page.families.push(Family {
                name: sample.name.clone(),
                kind: Kind::Untyped,
                help,
                samples: vec![sample],
            });
            current = Some(page.families.len() - 1);
        }
    }
    Ok(page)
}

fn parse_value(word: &str) -> Result<f64, String> {
    match word {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => word
            .parse::<f64>()
            .map_err(|_| format!("value `{word}` is not a number")),
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .ok_or_else(|| format!("sample without a value: {line}"))?;
    let name = &line[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        return Err(format!("bad metric name `{name}`"));
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, remaining) = parse_labels(after)?;
        labels = parsed;
        rest = remaining;
    }
    let mut words = rest.split_whitespace();
    let value = words
        .next()
        .ok_or_else(|| format!("sample `{name}` without a value"))?;
    let value = parse_value(value)?;
    // An optional timestamp follows; anything after it is an error.
    if let Some(ts) = words.next() {
        ts.parse::<i64>()
            .map_err(|_| format!("sample `{name}`: `{ts}` is not a timestamp"))?;
    }
    if let Some(extra) = words.next() {
        return Err(format!("sample `{name}`: unexpected `{extra}`"));
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parse `key="value",...}` and return the labels and the text after the closing brace.
fn parse_labels(mut s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = s.find('=').ok_or_else(|| "label without `=`".to_string())?;
        let key = s[..eq].trim();
        if key.is_empty() {
            return Err("empty label name".to_string());
        }
        s = s[eq + 1..].trim_start();
        let body = s
            .strip_prefix('"')
            .ok_or_else(|| format!("label `{key}`: value not quoted"))?;
        let mut value = String::new();
        let mut chars = body.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err(format!("label `{key}`: unterminated value")),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("label `{key}`: unterminated value")),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.insert(key.to_string(), value);
        s = body[end + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err(format!("label `{key}`: expected `,` or `}}`"));
        }
    }
}
