//! The instances behind a router, found from the router's own URL (`docs/server-metrics.md`
//! "Instances behind a router"): when the endpoint's origin serves no engine metrics, the
//! scraper asks the origin where its instances are and scrapes each instance's own `/metrics`.
//!
//! Each router that lists its workers over HTTP is one row of [`LISTINGS`]: its name, the path
//! of its list and where the list keeps each worker's URL. During the run the list is read
//! again every [`RELIST_EVERY`], so an instance that appears or disappears is said and scraped.
//! Routers whose own metrics page names the instances (llm-sim's, vLLM production-stack's,
//! whose `GET /engines` gives ids, not URLs) are read from that page ([`super::PageKind`]).
//! llm-d's gateway lists its pods to no client (its scheduler speaks Envoy's ext-proc), so
//! behind it the instances are given with `--server-metrics`.

use std::time::Duration;

use serde_json::Value;

/// How often the router's list is read again during a run.
pub const RELIST_EVERY: Duration = Duration::from_secs(2);

/// A router that lists its workers: its name, the path of the list, and the JSON keys that
/// hold a worker's base URL (searched at any depth of the answer).
pub struct Listing {
    pub router: &'static str,
    pub path: &'static str,
    pub url_keys: &'static [&'static str],
}

/// The routers whose lists are known, in the order they are tried.
/// - Shepherd Model Gateway (`smg`, formerly SGLang's model gateway): `GET /workers` answers
///   `{"workers": [{"url": "http://...", "model_id": ..., "is_healthy": ..., ...}], ...}`.
/// - llm-sim's built-in router: `GET /instances` (`{"instances": [{"url": ...}]}`); its
///   metrics page names them too, so it is usually found there first.
pub const LISTINGS: &[Listing] = &[
    Listing {
        router: "smg",
        path: "/workers",
        url_keys: &["url", "worker_url"],
    },
    Listing {
        router: "llm-sim",
        path: "/instances",
        url_keys: &["url"],
    },
];

/// The workers' base URLs in a router's answer: every string under one of `keys`, at any
/// depth, that is an `http(s)` URL, in order of appearance, each once. `None` when the answer
/// is not JSON or names no URL (not this router's list).
pub fn worker_urls(body: &str, keys: &[&str]) -> Option<Vec<reqwest::Url>> {
    let v: Value = serde_json::from_str(body).ok()?;
    let mut out: Vec<reqwest::Url> = Vec::new();
    collect(&v, keys, &mut out);
    (!out.is_empty()).then_some(out)
}

fn collect(v: &Value, keys: &[&str], out: &mut Vec<reqwest::Url>) {
    match v {
        Value::Array(items) => items.iter().for_each(|x| collect(x, keys, out)),
        Value::Object(map) => {
            for (k, x) in map {
                match x {
                    Value::String(s) if keys.contains(&k.as_str()) => {
                        if let Ok(u) = reqwest::Url::parse(s.trim()) {
                            if matches!(u.scheme(), "http" | "https") && !out.contains(&u) {
                                out.push(u);
                            }
                        }
                    }
                    _ => collect(x, keys, out),
                }
            }
        }
        _ => {}
    }
}

/// The `/metrics` page of a worker's base URL (its path kept: a worker served under a prefix
/// keeps it).
pub fn metrics_of(base: &reqwest::Url) -> reqwest::Url {
    let mut u = base.clone();
    let path = u.path().trim_end_matches('/').to_string();
    u.set_path(&format!("{path}/metrics"));
    u.set_query(None);
    u
}

/// What changed between two reads of a router's list: (appeared, disappeared).
pub fn changes(
    before: &[reqwest::Url],
    now: &[reqwest::Url],
) -> (Vec<reqwest::Url>, Vec<reqwest::Url>) {
    let appeared = now
        .iter()
        .filter(|u| !before.contains(u))
        .cloned()
        .collect();
    let gone = before
        .iter()
        .filter(|u| !now.contains(u))
        .cloned()
        .collect();
    (appeared, gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(v: &[reqwest::Url]) -> Vec<&str> {
        v.iter().map(|u| u.as_str()).collect()
    }

    #[test]
    fn smg_workers_are_read_from_its_answer() {
        let body = r#"{"workers":[
            {"id":"a","url":"http://127.0.0.1:18601","model_id":"qwen3","runtime_type":"vllm","is_healthy":true,"load":0},
            {"id":"b","url":"http://127.0.0.1:18602","model_id":"qwen3","is_healthy":false,"load":3}],
            "total":2,"stats":{"prefill_count":0}}"#;
        let got = worker_urls(body, LISTINGS[0].url_keys).unwrap();
        assert_eq!(
            urls(&got),
            ["http://127.0.0.1:18601/", "http://127.0.0.1:18602/"]
        );
        assert_eq!(
            metrics_of(&got[0]).as_str(),
            "http://127.0.0.1:18601/metrics"
        );
    }

    #[test]
    fn a_list_of_engines_and_prefixed_urls_are_read() {
        let body = r#"[{"url":"http://10.0.0.5:8000/vllm/","model_names":["m"]},{"url":"http://10.0.0.6:8000"},{"url":"http://10.0.0.6:8000"}]"#;
        let got = worker_urls(body, &["url"]).unwrap();
        assert_eq!(got.len(), 2, "each URL once");
        assert_eq!(
            metrics_of(&got[0]).as_str(),
            "http://10.0.0.5:8000/vllm/metrics"
        );
    }

    #[test]
    fn answers_that_are_not_lists_of_workers_are_refused() {
        for body in [
            "",
            "<html>not found</html>",
            r#"{"detail":"Not Found"}"#,
            r#"{"url":"ftp://x"}"#,
            r#"{"name":"http://x"}"#,
        ] {
            assert_eq!(worker_urls(body, LISTINGS[0].url_keys), None, "{body}");
        }
    }

    #[test]
    fn changes_name_what_appeared_and_what_went() {
        let u = |p: u16| reqwest::Url::parse(&format!("http://h:{p}")).unwrap();
        let (a, g) = changes(&[u(1), u(2)], &[u(2), u(3)]);
        assert_eq!(a, [u(3)]);
        assert_eq!(g, [u(1)]);
    }
}
