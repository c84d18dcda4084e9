//! The metric names of the servers request-sim knows, read into one engine-neutral view.
//!
//! Each quantity lists its sample names per engine, newest first; the first one a page has wins,
//! so vLLM V1 names and the older aliases both work. Values are summed over label sets (models,
//! engines, ranks), except ratios (KV usage), which take the largest. Families not named here
//! stay in the [`Page`] untouched.

use super::prom::Page;
use std::collections::BTreeMap;

/// Which server a page comes from, told by its metric prefixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    Vllm,
    Sglang,
    LlamaCpp,
    Tgi,
    Unknown,
}

impl Engine {
    /// The engine whose prefix most samples of the page carry.
    pub fn detect(page: &Page) -> Engine {
        let mut counts = [0usize; 4];
        for f in &page.families {
            let n = &f.name;
            if n.starts_with("vllm:") {
                counts[0] += 1;
            } else if n.starts_with("sglang:") {
                counts[1] += 1;
            } else if n.starts_with("llamacpp:") {
                counts[2] += 1;
            } else if n.starts_with("tgi_") {
                counts[3] += 1;
            }
        }
        let (best, &n) = counts
            .iter()
            .enumerate()
            .max_by_key(|(i, n)| (**n, std::cmp::Reverse(*i)))
            .unwrap_or((0, &0));
        if n == 0 {
            return Engine::Unknown;
        }
        [Engine::Vllm, Engine::Sglang, Engine::LlamaCpp, Engine::Tgi][best]
    }
}

// Gauges.
const RUNNING: &[&str] = &[
    "vllm:num_requests_running",
    "sglang:num_running_reqs",
    "llamacpp:requests_processing",
    "tgi_batch_current_size",
];
const WAITING: &[&str] = &[
    "vllm:num_requests_waiting",
    "sglang:num_queue_reqs",
    "llamacpp:requests_deferred",
    "tgi_queue_size",
];
/// KV-cache usage as a fraction of 1 (vLLM V1 renamed `gpu_cache_usage_perc`).
const KV_USAGE: &[&str] = &[
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "sglang:token_usage",
    "llamacpp:kv_cache_usage_ratio",
];
// Counters.
/// Prefix-cache lookups in tokens (vLLM V1 dropped the `gpu_` prefix; SGLang's lookups are its
/// prompt tokens).
const PREFIX_QUERIES: &[&str] = &[
    "vllm:prefix_cache_queries_total",
    "vllm:gpu_prefix_cache_queries_total",
    "vllm:prefix_cache_queries",
    "vllm:gpu_prefix_cache_queries",
];
const PREFIX_HITS: &[&str] = &[
    "vllm:prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_hits_total",
    "vllm:prefix_cache_hits",
    "vllm:gpu_prefix_cache_hits",
    "sglang:cached_tokens_total",
];
const PROMPT_TOKENS: &[&str] = &[
    "vllm:prompt_tokens_total",
    "sglang:prompt_tokens_total",
    "llamacpp:prompt_tokens_total",
];
const GENERATION_TOKENS: &[&str] = &[
    "vllm:generation_tokens_total",
    "sglang:generation_tokens_total",
    "llamacpp:tokens_predicted_total",
];
const PREEMPTIONS: &[&str] = &["vllm:num_preemptions_total", "vllm:num_preemptions"];
const REQUESTS_DONE: &[&str] = &[
    "vllm:request_success_total",
    "sglang:num_requests_total",
    "tgi_request_success",
];
// Histograms (family names; `_sum` and `_count` are read).
const TTFT: &[&str] = &[
    "vllm:time_to_first_token_seconds",
    "sglang:time_to_first_token_seconds",
];
const E2E: &[&str] = &[
    "vllm:e2e_request_latency_seconds",
    "sglang:e2e_request_latency_seconds",
    "tgi_request_duration",
];
const QUEUE: &[&str] = &[
    "vllm:request_queue_time_seconds",
    "sglang:queue_time_seconds",
    "tgi_request_queue_duration",
];

fn first_sum(page: &Page, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| page.sum(n))
}

fn first_max(page: &Page, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| page.max(n))
}

/// A histogram's running sum, count and cumulative buckets (seconds, observations), summed over
/// label sets.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HistTotals {
    pub sum: f64,
    pub count: f64,
    /// `(le, cumulative count)` of the finite bounds in increasing `le` (the `+Inf` bucket is
    /// `count`); empty when the page has no `_bucket` samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<(f64, f64)>,
}

fn first_hist(page: &Page, names: &[&str]) -> Option<HistTotals> {
    names.iter().find_map(|n| {
        let sum = page.sum(&format!("{n}_sum"))?;
        let count = page.sum(&format!("{n}_count"))?;
        let mut buckets: Vec<(f64, f64)> = Vec::new();
        for s in page.samples(&format!("{n}_bucket")) {
            let Some(le) = s
                .labels
                .get("le")
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|le| le.is_finite())
            else {
                continue;
            };
            match buckets.iter_mut().find(|b| b.0 == le) {
                Some(b) => b.1 += s.value,
                None => buckets.push((le, s.value)),
            }
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(HistTotals {
            sum,
            count,
            buckets,
        })
    })
}

impl HistTotals {
    /// What was observed between `self` (earlier) and `later`: sums, counts and buckets
    /// subtracted (a histogram that went down, a server restart, counts from zero). Buckets
    /// are kept only when both have the same bounds.
    pub fn delta(&self, later: &HistTotals) -> HistTotals {
        if later.count < self.count {
            return later.clone();
        }
        let same = self.buckets.len() == later.buckets.len()
            && self
                .buckets
                .iter()
                .zip(&later.buckets)
                .all(|(a, b)| a.0 == b.0);
        HistTotals {
            sum: later.sum - self.sum,
            count: later.count - self.count,
            buckets: if same {
                self.buckets
                    .iter()
                    .zip(&later.buckets)
                    .map(|(a, b)| (a.0, (b.1 - a.1).max(0.0)))
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Adds another instance's histogram (same bounds; otherwise the buckets are dropped).
    pub fn add(&mut self, other: &HistTotals) {
        let same = self.buckets.len() == other.buckets.len()
            && self
                .buckets
                .iter()
                .zip(&other.buckets)
                .all(|(a, b)| a.0 == b.0);
        self.sum += other.sum;
        self.count += other.count;
        if same {
            for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
                a.1 += b.1;
            }
        } else {
            self.buckets.clear();
        }
    }

    /// Mean observation in ms (`None` without observations).
    pub fn mean_ms(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count * 1000.0)
    }

    /// The `q`-quantile (0..=1) in ms, interpolated linearly inside its bucket as Prometheus'
    /// `histogram_quantile` does (so no finer than the server's bucket bounds); `None` without
    /// observations or buckets. An answer in the `+Inf` bucket is the largest finite bound.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        Some(match self.quantile_in(q)? {
            Located::Inside { lower, upper, frac } => (lower + (upper - lower) * frac) * 1000.0,
            Located::Beyond { last } => last * 1000.0,
        })
    }

    /// The bucket that holds the `q`-quantile (the same bucket [`quantile_ms`] interpolates
    /// in): its lower and upper bounds in ms, the upper `None` for the `+Inf` bucket. `None`
    /// without observations or buckets. All the buckets can say about the quantile.
    ///
    /// [`quantile_ms`]: HistTotals::quantile_ms
    pub fn quantile_bucket_ms(&self, q: f64) -> Option<(f64, Option<f64>)> {
        Some(match self.quantile_in(q)? {
            Located::Inside { lower, upper, .. } => (lower * 1000.0, Some(upper * 1000.0)),
            Located::Beyond { last } => (last * 1000.0, None),
        })
    }

    /// Where the `q`-quantile's rank falls among the cumulative buckets (seconds): the one
    /// search [`quantile_ms`](HistTotals::quantile_ms) and
    /// [`quantile_bucket_ms`](HistTotals::quantile_bucket_ms) share.
    fn quantile_in(&self, q: f64) -> Option<Located> {
        let last = self.buckets.last()?;
        if self.count <= 0.0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * self.count;
        let mut prev = (0.0f64, 0.0f64);
        for &(le, cum) in &self.buckets {
            if cum >= rank && cum > prev.1 {
                let frac = (rank - prev.1) / (cum - prev.1);
                return Some(Located::Inside {
                    lower: prev.0,
                    upper: le,
                    frac,
                });
            }
            prev = (le, cum);
        }
        Some(Located::Beyond { last: last.0 })
    }
}

/// Where a quantile's rank falls in a histogram (bounds in seconds).
enum Located {
    /// In the bucket `(lower, upper]`, `frac` of the way through its count.
    Inside { lower: f64, upper: f64, frac: f64 },
    /// Above every finite bound: the `+Inf` bucket, after the largest finite bound `last`.
    Beyond { last: f64 },
}

/// One scrape of one instance, in engine-neutral terms. `None`: the page does not say.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerView {
    pub engine: Engine,
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// Fraction of 1.
    pub kv_usage: Option<f64>,
    pub prefix_queries: Option<f64>,
    pub prefix_hits: Option<f64>,
    pub prompt_tokens: Option<f64>,
    pub generation_tokens: Option<f64>,
    pub preemptions: Option<f64>,
    pub requests_done: Option<f64>,
    pub ttft: Option<HistTotals>,
    pub e2e: Option<HistTotals>,
    pub queue: Option<HistTotals>,
    /// Simulated seconds per wall second of a simulator whose times are simulated (llm-sim's
    /// `--speedup`, `llm_sim:speedup`); absent for a real server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_scale: Option<f64>,
    /// The KV-cache block size in tokens, from vLLM's `vllm:cache_config_info` (its
    /// `block_size` label): the unit the server caches prefixes in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
}

/// vLLM's cache configuration, as labels of a gauge of 1.
const CACHE_CONFIG: &str = "vllm:cache_config_info";

/// llm-sim's gauge of its `--speedup`.
const TIME_SCALE: &str = "llm_sim:speedup";
/// llm-sim's built-in router: one sample per instance, its base URL in the `url` label.
const ROUTER_INSTANCE: &str = "llm_sim:router_instance_info";
/// vLLM production-stack's router (`vllm_router`): one sample per engine it routes to, the
/// engine's URL in the `server` label (its other `vllm:` gauges carry the same label, which
/// no engine's page does).
const PRODUCTION_STACK_ENGINE: &str = "vllm:healthy_pods_total";
/// smg's own page (its `--prometheus-port`): each worker's health, the worker's URL in the
/// `worker` label.
const SMG_WORKER_HEALTH: &str = "smg_worker_health";
/// smg's per-worker outcomes of the requests it sent (`worker`, `outcome`: success, failure).
const SMG_WORKER_OUTCOMES: &str = "smg_worker_cb_outcomes_total";

/// What a router's own page says per worker: requests it sent there that succeeded and that
/// failed (smg's `smg_worker_cb_outcomes_total`), by the worker's URL.
pub fn router_outcomes(page: &Page) -> BTreeMap<String, (f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for s in page.samples(SMG_WORKER_OUTCOMES) {
        let Some(w) = s.labels.get("worker") else {
            continue;
        };
        let e = out.entry(w.trim_end_matches('/').to_string()).or_default();
        match s.labels.get("outcome").map(String::as_str) {
            Some("success") => e.0 += s.value,
            Some("failure") => e.1 += s.value,
            _ => {}
        }
    }
    out
}

/// What a `/metrics` page is, for the scraper's start-up.
#[derive(Clone, Debug, PartialEq)]
pub enum PageKind {
    /// It has metrics of a known engine.
    Engine,
    /// A router's page that names its instances: the router, their base URLs (instance
    /// order) and its policy when the page says: llm-sim's built-in router, vLLM
    /// production-stack's router.
    Router {
        router: &'static str,
        urls: Vec<String>,
        policy: Option<String>,
    },
    /// None of the names request-sim reads (a router's or a gateway's page, an exporter).
    NoEngine,
}

impl PageKind {
    pub fn of(page: &Page) -> PageKind {
        let mut listed: Vec<(u64, String)> = page
            .samples(ROUTER_INSTANCE)
            .filter_map(|s| {
                let i = s.labels.get("instance")?.parse().ok()?;
                Some((i, s.labels.get("url")?.clone()))
            })
            .collect();
        if !listed.is_empty() {
            listed.sort();
            let policy = page
                .samples(ROUTER_INSTANCE)
                .find_map(|s| s.labels.get("policy").cloned())
                .unwrap_or_default();
            return PageKind::Router {
                router: "llm-sim's built-in router",
                urls: listed.into_iter().map(|(_, u)| u).collect(),
                policy: Some(policy),
            };
        }
        let mut workers: Vec<String> = page
            .samples(SMG_WORKER_HEALTH)
            .filter(|s| s.value >= 0.0)
            .filter_map(|s| s.labels.get("worker").cloned())
            .collect();
        if !workers.is_empty() {
            workers.dedup();
            return PageKind::Router {
                router: "smg's own page",
                urls: workers,
                policy: None,
            };
        }
        let mut engines: Vec<String> = page
            .samples(PRODUCTION_STACK_ENGINE)
            .filter_map(|s| s.labels.get("server").cloned())
            .collect();
        if !engines.is_empty() {
            engines.dedup();
            return PageKind::Router {
                router: "vLLM production-stack's router",
                urls: engines,
                policy: None,
            };
        }
        if ServerView::of(page).is_empty() {
            PageKind::NoEngine
        } else {
            PageKind::Engine
        }
    }
}

impl ServerView {
    /// The page had none of the engine metrics request-sim reads.
    pub fn is_empty(&self) -> bool {
        let ServerView {
            engine: _,
            running,
            waiting,
            kv_usage,
            prefix_queries,
            prefix_hits,
            prompt_tokens,
            generation_tokens,
            preemptions,
            requests_done,
            ttft,
            e2e,
            queue,
            time_scale: _,
            block_size: _,
        } = self;
        [
            running,
            waiting,
            kv_usage,
            prefix_queries,
            prefix_hits,
            prompt_tokens,
            generation_tokens,
            preemptions,
            requests_done,
        ]
        .iter()
        .all(|v| v.is_none())
            && ttft.is_none()
            && e2e.is_none()
            && queue.is_none()
    }

    pub fn of(page: &Page) -> ServerView {
        let engine = Engine::detect(page);
        let prompt_tokens = first_sum(page, PROMPT_TOKENS);
        let mut prefix_queries = first_sum(page, PREFIX_QUERIES);
        if prefix_queries.is_none()
            && engine == Engine::Sglang
            && page.sum(PREFIX_HITS[4]).is_some()
        {
            // SGLang counts cached tokens against all prompt tokens.
            prefix_queries = prompt_tokens;
        }
        ServerView {
            engine,
            running: first_sum(page, RUNNING),
            waiting: first_sum(page, WAITING),
            kv_usage: first_max(page, KV_USAGE),
            prefix_queries,
            prefix_hits: first_sum(page, PREFIX_HITS),
            prompt_tokens,
            generation_tokens: first_sum(page, GENERATION_TOKENS),
            preemptions: first_sum(page, PREEMPTIONS),
            requests_done: first_sum(page, REQUESTS_DONE),
            ttft: first_hist(page, TTFT),
            e2e: first_hist(page, E2E),
            queue: first_hist(page, QUEUE),
            time_scale: page.max(TIME_SCALE).filter(|x| *x > 0.0 && *x != 1.0),
            block_size: page
                .samples(CACHE_CONFIG)
                .filter_map(|s| s.labels.get("block_size")?.parse::<u32>().ok())
                .filter(|b| *b > 0)
                .max(),
        }
    }
}

/// What happened on one instance between two scrapes (counter and histogram deltas).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Window {
    pub prefix_queries: Option<f64>,
    pub prefix_hits: Option<f64>,
    pub preemptions: Option<f64>,
    pub requests_done: Option<f64>,
    pub prompt_tokens: Option<f64>,
    pub generation_tokens: Option<f64>,
    /// Mean server-side TTFT, E2E latency and queue time over the window, in ms.
    pub ttft_mean_ms: Option<f64>,
    pub e2e_mean_ms: Option<f64>,
    pub queue_mean_ms: Option<f64>,
}

/// The increase of a counter from `first` to `last`; a counter that went down (server restart)
/// counts from zero.
pub fn counter_delta(first: Option<f64>, last: Option<f64>) -> Option<f64> {
    let (a, b) = (first?, last?);
    Some(if b >= a { b - a } else { b })
}

fn hist_mean_ms(first: Option<&HistTotals>, last: Option<&HistTotals>) -> Option<f64> {
    first?.delta(last?).mean_ms()
}

impl Window {
    pub fn between(first: &ServerView, last: &ServerView) -> Window {
        Window {
            prefix_queries: counter_delta(first.prefix_queries, last.prefix_queries),
            prefix_hits: counter_delta(first.prefix_hits, last.prefix_hits),
            preemptions: counter_delta(first.preemptions, last.preemptions),
            requests_done: counter_delta(first.requests_done, last.requests_done),
            prompt_tokens: counter_delta(first.prompt_tokens, last.prompt_tokens),
            generation_tokens: counter_delta(first.generation_tokens, last.generation_tokens),
            ttft_mean_ms: hist_mean_ms(first.ttft.as_ref(), last.ttft.as_ref()),
            e2e_mean_ms: hist_mean_ms(first.e2e.as_ref(), last.e2e.as_ref()),
            queue_mean_ms: hist_mean_ms(first.queue.as_ref(), last.queue.as_ref()),
        }
    }

    /// Prefix-cache hit ratio over the window (hits / lookups), when both were counted.
    pub fn hit_ratio(&self) -> Option<f64> {
        let (q, h) = (self.prefix_queries?, self.prefix_hits?);
        (q > 0.0).then(|| h / q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> PageKind {
        PageKind::of(&super::super::prom::parse(text).unwrap())
    }

    #[test]
    fn pages_are_told_apart() {
        let router = "# TYPE llm_sim:router_instance_info gauge\n\
            llm_sim:router_instance_info{policy=\"session\",instance=\"1\",pod=\"llm-sim-1\",url=\"http://h:8002\"} 1\n\
            llm_sim:router_instance_info{policy=\"session\",instance=\"0\",pod=\"llm-sim-0\",url=\"http://h:8001\"} 1\n\
            # TYPE llm_sim:router_requests_total counter\n\
            llm_sim:router_requests_total{policy=\"session\",instance=\"0\",pod=\"llm-sim-0\"} 4\n";
        assert_eq!(
            kind(router),
            PageKind::Router {
                router: "llm-sim's built-in router",
                urls: vec!["http://h:8001".into(), "http://h:8002".into()],
                policy: Some("session".into())
            }
        );
        let smg = "# TYPE smg_worker_health gauge\n\
            smg_worker_health{worker=\"http://127.0.0.1:18601\"} 1\n\
            smg_worker_health{worker=\"http://127.0.0.1:18602\"} 0\n\
            smg_worker_health{worker=\"http://127.0.0.1:18603\"} -1\n\
            # TYPE smg_worker_cb_outcomes_total counter\n\
            smg_worker_cb_outcomes_total{worker=\"http://127.0.0.1:18601\",outcome=\"success\"} 7\n\
            smg_worker_cb_outcomes_total{worker=\"http://127.0.0.1:18601\",outcome=\"failure\"} 2\n";
        assert_eq!(
            kind(smg),
            PageKind::Router {
                router: "smg's own page",
                // A removed worker (-1) is not an instance any more.
                urls: vec![
                    "http://127.0.0.1:18601".into(),
                    "http://127.0.0.1:18602".into()
                ],
                policy: None
            }
        );
        let counts = router_outcomes(&super::super::prom::parse(smg).unwrap());
        assert_eq!(counts.get("http://127.0.0.1:18601"), Some(&(7.0, 2.0)));
        let stack = "# TYPE vllm:healthy_pods_total gauge\n\
            vllm:healthy_pods_total{server=\"http://10.0.0.5:8000\"} 1\n\
            vllm:healthy_pods_total{server=\"http://10.0.0.6:8000\"} 0\n\
            # TYPE vllm:num_requests_running gauge\n\
            vllm:num_requests_running{server=\"http://10.0.0.5:8000\"} 3\n";
        assert_eq!(
            kind(stack),
            PageKind::Router {
                router: "vLLM production-stack's router",
                urls: vec!["http://10.0.0.5:8000".into(), "http://10.0.0.6:8000".into()],
                policy: None
            }
        );
        let gateway = "# TYPE envoy_requests_total counter\nenvoy_requests_total 3\n";
        assert_eq!(kind(gateway), PageKind::NoEngine);
        let vllm =
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 2\n";
        assert_eq!(kind(vllm), PageKind::Engine);
        let page = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n\
                    # TYPE llm_sim:speedup gauge\nllm_sim:speedup 10\n";
        let v = ServerView::of(&super::super::prom::parse(page).unwrap());
        assert_eq!(v.time_scale, Some(10.0));
        assert!(!v.is_empty());
    }
}

#[cfg(test)]
mod vllm_page {
    use super::*;

    /// vLLM 0.32's own `/metrics` page (recorded, `tests/data/vllm-0.32/`): its block size.
    #[test]
    fn the_block_size_of_a_real_vllm_page() {
        let text = include_str!("../../tests/data/vllm-0.32/vllm_metrics.txt");
        let page = crate::observe::prom::parse(text).unwrap();
        assert_eq!(page.samples(CACHE_CONFIG).count(), 1);
        assert_eq!(ServerView::of(&page).block_size, Some(32));
    }
}
