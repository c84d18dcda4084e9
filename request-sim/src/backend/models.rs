//! Model fleets (`--model-map`): which served model each request names, from the model the
//! trace names for it.
//!
//! [`ModelMap`] is the flag as given: `TRACE=SERVED` pairs (inline, comma-separated, or a file
//! of one pair a line), with `*=SERVED` as the default of every trace model not listed, or
//! `auto`. [`ModelMap::resolve`] turns it, with the trace's models and their request counts
//! (and for `auto` the served models of `GET /v1/models`), into [`SentModels`], the lookup the
//! request bodies and records use; a trace model the map does not cover is refused there,
//! before anything is sent. The rules are in `docs/models.md`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// `--model-map` as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelMap {
    /// `TRACE=SERVED` pairs, in the order given, and the `*=SERVED` default if any.
    Pairs {
        pairs: Vec<(String, String)>,
        default: Option<String>,
    },
    /// Trace models spread over the served models of `GET /v1/models` by share of requests.
    Auto,
}

impl ModelMap {
    /// The flag's value: `auto`, `@FILE` (read here), or inline `A=x,B=y` pairs.
    pub fn from_flag(spec: &str) -> Result<ModelMap, String> {
        let spec = spec.trim();
        if spec.eq_ignore_ascii_case("auto") {
            return Ok(ModelMap::Auto);
        }
        if let Some(path) = spec.strip_prefix('@') {
            return ModelMap::read_file(Path::new(path));
        }
        let entries = spec
            .split(',')
            .enumerate()
            .map(|(i, e)| (format!("entry {}", i + 1), e));
        ModelMap::from_entries(entries, false)
    }

    /// A map file: one `TRACE=SERVED` a line; blank lines and lines starting with `#` are
    /// skipped; `*=SERVED` is the default. Errors name `file:line`.
    pub fn read_file(path: &Path) -> Result<ModelMap, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--model-map @{}: {e}", path.display()))?;
        let entries = text
            .lines()
            .enumerate()
            .map(|(i, l)| (format!("{}:{}", path.display(), i + 1), l))
            .filter(|(_, l)| {
                let t = l.trim();
                !t.is_empty() && !t.starts_with('#')
            });
        ModelMap::from_entries(entries, true)
    }

    /// Pairs from `(where, text)` entries; `file`: the entries are a file's lines.
    fn from_entries<'a>(
        entries: impl Iterator<Item = (String, &'a str)>,
        file: bool,
    ) -> Result<ModelMap, String> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut default: Option<String> = None;
        let prefix = if file { "" } else { "--model-map " };
        for (at, text) in entries {
            let bad = |what: &str| format!("{prefix}{at}: {what} (found {:?})", text.trim());
            let Some((k, v)) = text.rsplit_once('=') else {
                return Err(bad(
                    "expected TRACE_MODEL=SERVED_MODEL (or *=SERVED_MODEL for every other model)",
                ));
            };
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() {
                return Err(bad("the trace model (left of `=`) is empty"));
            }
            if v.is_empty() {
                return Err(bad("the served model (right of `=`) is empty"));
            }
            if k.eq_ignore_ascii_case("auto") && !file {
                return Err(bad("`auto` stands alone (--model-map auto)"));
            }
            if k == "*" {
                if default.is_some() {
                    return Err(bad("a second default `*=`"));
                }
                default = Some(v.to_owned());
            } else if pairs.iter().any(|(p, _)| p == k) {
                return Err(bad(&format!("trace model {k:?} is mapped twice")));
            } else {
                pairs.push((k.to_owned(), v.to_owned()));
            }
        }
        if pairs.is_empty() && default.is_none() {
            return Err(format!("{prefix}maps no model"));
        }
        Ok(ModelMap::Pairs { pairs, default })
    }

    /// The lookup for a trace whose models are `counts` (each trace model and its requests;
    /// `unnamed`: requests naming no model), with `base` the model of requests the map does
    /// not cover (`--model-name`, else the server's first) and `served` the server's models
    /// (needed by `auto`).
    pub fn resolve(
        &self,
        counts: &[(Arc<str>, usize)],
        base: &str,
        served: &[String],
    ) -> Result<SentModels, String> {
        let mut by_trace = HashMap::new();
        let unnamed: Arc<str> = match self {
            ModelMap::Pairs { pairs, default } => {
                let mut missing = Vec::new();
                for (m, n) in counts {
                    let to = pairs
                        .iter()
                        .find(|(k, _)| **k == **m)
                        .map(|(_, v)| v)
                        .or(default.as_ref());
                    match to {
                        Some(v) => {
                            by_trace.insert(m.clone(), Arc::from(v.as_str()));
                        }
                        None => missing.push(format!("{m:?} ({n} requests)")),
                    }
                }
                if !missing.is_empty() {
                    return Err(format!(
                        "--model-map does not map {} trace model(s): {}; map each (`NAME=served`) or give a default (`*=served`); nothing was sent",
                        missing.len(),
                        missing.join(", ")
                    ));
                }
                Arc::from(default.as_deref().unwrap_or(base))
            }
            ModelMap::Auto => {
                if served.is_empty() {
                    return Err("--model-map auto: GET /v1/models lists no model".into());
                }
                by_trace = auto_assign(counts, served);
                Arc::from(base)
            }
        };
        Ok(SentModels { by_trace, unnamed })
    }

    /// The map's trace models that `counts` does not have (said at start-up, not refused).
    pub fn unused(&self, counts: &[(Arc<str>, usize)]) -> Vec<String> {
        match self {
            ModelMap::Pairs { pairs, .. } => pairs
                .iter()
                .filter(|(k, _)| !counts.iter().any(|(m, _)| **m == **k))
                .map(|(k, _)| k.clone())
                .collect(),
            ModelMap::Auto => Vec::new(),
        }
    }
}

/// `auto`: trace models in decreasing order of requests (ties: by name), each onto the served
/// model with the fewest requests so far (ties: the first in `/v1/models` order).
fn auto_assign(counts: &[(Arc<str>, usize)], served: &[String]) -> HashMap<Arc<str>, Arc<str>> {
    let mut order: Vec<&(Arc<str>, usize)> = counts.iter().collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let names: Vec<Arc<str>> = served.iter().map(|s| Arc::from(s.as_str())).collect();
    let mut load = vec![0usize; names.len()];
    let mut out = HashMap::new();
    for (m, n) in order {
        let (i, _) = load
            .iter()
            .enumerate()
            .min_by_key(|&(i, l)| (*l, i))
            .unwrap_or((0, &0));
        load[i] += n;
        out.insert(m.clone(), names[i].clone());
    }
    out
}

/// Which served model each request names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentModels {
    by_trace: HashMap<Arc<str>, Arc<str>>,
    /// Requests naming no model (and any trace model not seen at start-up).
    unnamed: Arc<str>,
}

impl SentModels {
    /// The served model a request naming trace model `trace` is sent to.
    pub fn sent(&self, trace: Option<&str>) -> &Arc<str> {
        trace
            .and_then(|t| self.by_trace.get(t))
            .unwrap_or(&self.unnamed)
    }

    /// Every served model requests may name (sorted, without repeats).
    pub fn targets(&self) -> Vec<Arc<str>> {
        let mut v: Vec<Arc<str>> = self.by_trace.values().cloned().collect();
        v.push(self.unnamed.clone());
        v.sort();
        v.dedup();
        v
    }

    /// The trace models and where they go, sorted by trace model.
    pub fn pairs(&self) -> Vec<(Arc<str>, Arc<str>)> {
        let mut v: Vec<_> = self
            .by_trace
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(v: &[(&str, usize)]) -> Vec<(Arc<str>, usize)> {
        v.iter().map(|(m, n)| (Arc::from(*m), *n)).collect()
    }

    #[test]
    fn inline_pairs_and_default() {
        let m = ModelMap::from_flag("Model A=qwen3-8b, Model B = llama-70b,*=small").unwrap();
        let c = counts(&[("Model A", 5), ("Model B", 3), ("Other", 1)]);
        let s = m.resolve(&c, "base", &[]).unwrap();
        assert_eq!(&**s.sent(Some("Model A")), "qwen3-8b");
        assert_eq!(&**s.sent(Some("Model B")), "llama-70b");
        assert_eq!(&**s.sent(Some("Other")), "small");
        assert_eq!(&**s.sent(None), "small");
        let m = ModelMap::from_flag("A=x").unwrap();
        let s = m.resolve(&counts(&[("A", 1)]), "base", &[]).unwrap();
        assert_eq!(&**s.sent(None), "base");
        assert_eq!(m.unused(&counts(&[("B", 1)])), vec!["A".to_string()]);
    }

    #[test]
    fn missing_models_are_refused_by_name() {
        let m = ModelMap::from_flag("A=x").unwrap();
        let e = m
            .resolve(&counts(&[("A", 2), ("B", 7), ("C", 1)]), "base", &[])
            .unwrap_err();
        assert!(
            e.contains("2 trace model(s): \"B\" (7 requests), \"C\" (1 requests)"),
            "{e}"
        );
    }

    #[test]
    fn bad_maps_say_what() {
        let e = |s: &str| ModelMap::from_flag(s).unwrap_err();
        assert!(e("A").contains("entry 1: expected TRACE_MODEL=SERVED_MODEL"));
        assert!(e("A=x,=y").contains("entry 2: the trace model"));
        assert!(e("A=").contains("served model (right of `=`) is empty"));
        assert!(e("A=x,A=y").contains("mapped twice"));
        assert!(e("*=x,*=y").contains("second default"));
        assert!(e("auto=x").contains("stands alone"));
        assert!(e("@/nonexistent/map.txt").contains("/nonexistent/map.txt"));
    }

    #[test]
    fn file_lines_name_their_line() {
        let dir = std::env::temp_dir().join(format!("rs-modelmap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("map.txt");
        std::fs::write(&p, "# fleet\nA=x\n\nB=y\nbroken\n").unwrap();
        let e = ModelMap::from_flag(&format!("@{}", p.display())).unwrap_err();
        assert!(e.contains("map.txt:5: expected"), "{e}");
        std::fs::write(&p, "# fleet\nA = x\n\n*=y\n").unwrap();
        let m = ModelMap::from_flag(&format!("@{}", p.display())).unwrap();
        assert_eq!(
            m,
            ModelMap::Pairs {
                pairs: vec![("A".into(), "x".into())],
                default: Some("y".into())
            }
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn auto_balances_by_share() {
        let served = vec!["s1".to_string(), "s2".to_string()];
        let c = counts(&[("a", 10), ("b", 6), ("c", 5), ("d", 1)]);
        let s = ModelMap::Auto.resolve(&c, "base", &served).unwrap();
        // a(10)→s1; b(6)→s2; c(5)→s2 (6 < 10); d(1)→s1 (10 < 11).
        let got: Vec<(String, String)> = s
            .pairs()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let want = [("a", "s1"), ("b", "s2"), ("c", "s2"), ("d", "s1")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(&**s.sent(None), "base");
        assert!(ModelMap::Auto.resolve(&c, "base", &[]).is_err());
    }
}
