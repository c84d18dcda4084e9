//! The server-side section of the summary: per instance and for the cluster, from the counter
//! and histogram deltas between the first and last scrape and from the gauge time series.
//! Definitions: `docs/server-metrics.md`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::collect::{InstanceResult, ScrapeResult};
use super::names::{counter_delta, Engine, HistTotals, ServerView};
use super::series::Point;

/// A bucket narrower than this share of its upper bound supports an interpolated value; a
/// wider one only its bounds.
const NARROW: f64 = 0.2;

/// A server-side latency histogram over the run (deltas), ms. A percentile is only as fine as
/// the server's bucket bounds: `p50_ms` (and p90, p99) is the value interpolated inside its
/// bucket (Prometheus' `histogram_quantile`) only when the bucket is narrow (width at most
/// [`NARROW`] of its upper bound); otherwise `None`, and `p50_bounds_ms` says what the data do
/// support: the bucket's bounds, the upper one tightened by the mean (a latency's
/// `q`-quantile is at most `mean / (1 - q)`), `None` above the last finite bound.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistSummary {
    pub count: f64,
    pub mean_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// `[lower, upper]` ms that hold the percentile (`upper` null: above the last bound).
    pub p50_bounds_ms: Option<(f64, Option<f64>)>,
    pub p90_bounds_ms: Option<(f64, Option<f64>)>,
    pub p99_bounds_ms: Option<(f64, Option<f64>)>,
    /// Some percentile lies in a bucket too wide for a value: only its bounds are known.
    pub coarse: bool,
    /// The times are a simulator's simulated time, this many times the wall clock (llm-sim's
    /// `--speedup`); `None` for a real server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_scale: Option<f64>,
}

/// What the buckets and the mean support about one quantile: the interpolated value when its
/// bucket is narrow, and the bounds.
fn supported(h: &HistTotals, q: f64) -> (Option<f64>, Option<(f64, Option<f64>)>) {
    let Some((lo, hi)) = h.quantile_bucket_ms(q) else {
        return (None, None);
    };
    // Markov: at most a share 1 - q of non-negative values exceed mean / (1 - q).
    let markov = h.mean_ms().filter(|_| q < 1.0).map(|m| m / (1.0 - q));
    let hi = match (hi, markov) {
        (Some(h), Some(m)) if m >= lo => Some(h.min(m)),
        (None, Some(m)) if m >= lo => Some(m),
        (h, _) => h,
    };
    let value = match hi {
        Some(hi) if hi - lo <= NARROW * hi => h.quantile_ms(q).map(|v| v.clamp(lo, hi)),
        _ => None,
    };
    (value, Some((lo, hi)))
}

impl HistSummary {
    /// The summary of one histogram (deltas over the run).
    pub fn of(h: &HistTotals) -> HistSummary {
        let (p50_ms, p50_bounds_ms) = supported(h, 0.5);
        let (p90_ms, p90_bounds_ms) = supported(h, 0.9);
        let (p99_ms, p99_bounds_ms) = supported(h, 0.99);
        let coarse = [
            (p50_ms, p50_bounds_ms),
            (p90_ms, p90_bounds_ms),
            (p99_ms, p99_bounds_ms),
        ]
        .iter()
        .any(|(v, b)| v.is_none() && b.is_some());
        HistSummary {
            count: h.count,
            mean_ms: h.mean_ms(),
            p50_ms,
            p90_ms,
            p99_ms,
            p50_bounds_ms,
            p90_bounds_ms,
            p99_bounds_ms,
            coarse,
            time_scale: None,
        }
    }

    /// The same, in a simulator's simulated time `scale` times the wall clock (`None`: real).
    pub fn in_time_scale(mut self, scale: Option<f64>) -> HistSummary {
        self.time_scale = scale;
        self
    }
}

/// One instance (or the cluster) over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InstanceSummary {
    /// The scraped URL (`cluster` for the whole).
    pub url: String,
    pub engine: Option<Engine>,
    pub scrapes_ok: u64,
    /// Scrapes that failed: timeout, connection error, HTTP error, unreadable page.
    pub scrapes_failed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Requests the server finished during the run (counter delta).
    pub requests: Option<f64>,
    /// This instance's part of the cluster's finished requests (load balance).
    pub request_share: Option<f64>,
    /// Prefix-cache lookups and hits during the run, tokens.
    pub prefix_queries: Option<f64>,
    pub prefix_hits: Option<f64>,
    /// hits / lookups over the run.
    pub prefix_hit_ratio: Option<f64>,
    pub prompt_tokens: Option<f64>,
    pub generation_tokens: Option<f64>,
    pub preemptions: Option<f64>,
    /// Gauges over the samples taken after the first send.
    pub running_mean: Option<f64>,
    pub running_peak: Option<f64>,
    pub waiting_mean: Option<f64>,
    pub waiting_peak: Option<f64>,
    /// Fraction of 1 (cluster: mean over instances of the mean, highest instance peak).
    pub kv_usage_mean: Option<f64>,
    pub kv_usage_peak: Option<f64>,
    pub ttft: Option<HistSummary>,
    pub e2e: Option<HistSummary>,
    pub queue: Option<HistSummary>,
    /// The server's times are simulated, this many times the wall clock (llm-sim's
    /// `--speedup`, from its `llm_sim:speedup`); `None` for a real server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_scale: Option<f64>,
    /// KV-cache block size in tokens (vLLM's `vllm:cache_config_info`); the cluster's: the
    /// largest of its instances'.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    /// Requests the records place on this instance (its response named it, or its KV
    /// placement), of those the server processed, and their share of the placed ones: set
    /// when any record knew its instance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_share: Option<f64>,
    /// Times it did not answer its scrapes after it had (s on the run's clock; `to_s` null:
    /// not again before the run ended).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outages: Vec<OutageSummary>,
}

/// A time an instance did not answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OutageSummary {
    pub from_s: f64,
    pub to_s: Option<f64>,
    pub error: String,
}

/// The router in front listing or dropping an instance during the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MembershipSummary {
    pub at_s: f64,
    pub url: String,
    /// `appeared` or `disappeared`.
    pub event: String,
}

/// The router's own count per worker over the run (smg's page: `smg_worker_cb_outcomes_total`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RouterSummary {
    /// The router's metrics page.
    pub url: String,
    pub workers: Vec<RouterWorker>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One worker as the router counted it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RouterWorker {
    pub url: String,
    /// The scraped instance it is (index of `instances`), when it is one.
    pub instance: Option<usize>,
    /// Requests the router sent it that succeeded, and that failed.
    pub ok: f64,
    pub failed: f64,
}

/// Which instance served each request, over the run (`docs/server-metrics.md`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlacementSummary {
    /// `kv-events` (the instances' KV cache events, `--kv-events`) or `response` (headers
    /// such as `x-inference-pod`).
    pub from: String,
    /// Processed requests placed on an instance, and those no instance was known for.
    pub placed: u64,
    pub unplaced: u64,
    /// The hit ratio K unbounded caches reach under the placement that happened (the placed
    /// requests, in send order, each against its instance's cache), next to the one-cache
    /// ideal of `client.ideal_hit_ratio`; at the server's block size when it differs from the
    /// trace's.
    pub routed_ideal_hit_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routed_ideal_hit_ratio_server_blocks: Option<f64>,
    /// `--kv-events`: what the listener received and how the votes went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_events: Option<super::placement::PlacementStats>,
}

/// The client-side numbers printed next to the server's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClientSide {
    /// Σ cached_tokens / Σ prompt_tokens from the responses' usage.
    pub cached_tokens_ratio: Option<f64>,
    /// What an infinite cache would reach on the trace.
    pub ideal_hit_ratio: Option<f64>,
    pub ttft_mean_ms: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    pub e2e_mean_ms: Option<f64>,
    pub e2e_p50_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    /// Requests the client saw complete.
    pub completed: usize,
}

/// The server-metrics section of the summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerSummary {
    pub interval_ms: f64,
    /// `server_metrics.jsonl`, when written.
    pub samples_path: Option<String>,
    pub samples: u64,
    pub instances: Vec<InstanceSummary>,
    pub cluster: InstanceSummary,
    pub client: ClientSide,
    /// The router in front (found from the endpoint) listing or dropping instances.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub membership: Vec<MembershipSummary>,
    /// Which instance served each request, when records know (set by the run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementSummary>,
    /// The router's own page, when it was found (smg's: listed in `--server-metrics`, or on
    /// its default port beside `/workers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router: Option<RouterSummary>,
}

fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    let (n, d) = (num?, den?);
    (d > 0.0).then(|| n / d)
}

fn sum_opt(acc: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *acc = Some(acc.unwrap_or(0.0) + v);
    }
}

fn max_opt(acc: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *acc = Some(acc.map_or(v, |a| a.max(v)));
    }
}

/// Mean and peak of one gauge over points.
fn gauge(points: &[&Point], f: impl Fn(&Point) -> Option<f32>) -> (Option<f64>, Option<f64>) {
    let vals: Vec<f64> = points.iter().filter_map(|p| f(p)).map(f64::from).collect();
    if vals.is_empty() {
        return (None, None);
    }
    let mean = vals.iter().sum::<f64>() / vals.len() as f64;
    (Some(mean), vals.iter().copied().reduce(f64::max))
}

fn hist_delta(first: Option<&HistTotals>, last: Option<&HistTotals>) -> Option<HistTotals> {
    Some(first?.delta(last?))
}

struct Deltas {
    ttft: Option<HistTotals>,
    e2e: Option<HistTotals>,
    queue: Option<HistTotals>,
}

/// Seconds from the run's start (the scraper's when the run never started), 0.1 s.
fn secs(start: Option<std::time::Instant>, at: std::time::Instant) -> f64 {
    let ms = match start {
        Some(s) => super::series::signed_ms(s, at),
        None => 0.0,
    };
    (ms / 100.0).round() / 10.0
}

fn instance(
    r: &InstanceResult,
    points: &[Point],
    start: Option<std::time::Instant>,
) -> (InstanceSummary, Deltas) {
    let (first, last) = (r.first.as_ref(), r.last.as_ref());
    let d = |f: fn(&ServerView) -> Option<f64>| counter_delta(first.and_then(f), last.and_then(f));
    let during: Vec<&Point> = points
        .iter()
        .filter(|p| start.is_none_or(|s| p.at >= s))
        .collect();
    let (running_mean, running_peak) = gauge(&during, |p| p.running);
    let (waiting_mean, waiting_peak) = gauge(&during, |p| p.waiting);
    let (kv_usage_mean, kv_usage_peak) = gauge(&during, |p| p.kv_usage);
    let prefix_queries = d(|v| v.prefix_queries);
    let prefix_hits = d(|v| v.prefix_hits);
    let deltas = Deltas {
        ttft: hist_delta(
            first.and_then(|v| v.ttft.as_ref()),
            last.and_then(|v| v.ttft.as_ref()),
        ),
        e2e: hist_delta(
            first.and_then(|v| v.e2e.as_ref()),
            last.and_then(|v| v.e2e.as_ref()),
        ),
        queue: hist_delta(
            first.and_then(|v| v.queue.as_ref()),
            last.and_then(|v| v.queue.as_ref()),
        ),
    };
    let scale = last.and_then(|v| v.time_scale);
    let hist = |h: &Option<HistTotals>| h.as_ref().map(|h| HistSummary::of(h).in_time_scale(scale));
    let s = InstanceSummary {
        url: r.url.clone(),
        engine: last.map(|v| v.engine),
        scrapes_ok: r.ok,
        scrapes_failed: r.failed,
        first_error: r.first_error.clone(),
        requests: d(|v| v.requests_done),
        request_share: None,
        prefix_queries,
        prefix_hits,
        prefix_hit_ratio: ratio(prefix_hits, prefix_queries),
        prompt_tokens: d(|v| v.prompt_tokens),
        generation_tokens: d(|v| v.generation_tokens),
        preemptions: d(|v| v.preemptions),
        running_mean,
        running_peak,
        waiting_mean,
        waiting_peak,
        kv_usage_mean,
        kv_usage_peak,
        ttft: hist(&deltas.ttft),
        e2e: hist(&deltas.e2e),
        queue: hist(&deltas.queue),
        time_scale: scale,
        block_size: last.and_then(|v| v.block_size),
        records: None,
        record_share: None,
        outages: r
            .outages
            .iter()
            .map(|o| OutageSummary {
                from_s: secs(start, o.from),
                to_s: o.to.map(|t| secs(start, t)),
                error: o.error.clone(),
            })
            .collect(),
    };
    (s, deltas)
}

fn add_hist(acc: &mut Option<HistTotals>, h: &Option<HistTotals>) {
    if let Some(h) = h {
        match acc {
            Some(a) => a.add(h),
            None => *acc = Some(h.clone()),
        }
    }
}

/// Running and waiting of the cluster at one tick.
type RunWait = (Option<f64>, Option<f64>);

/// The summary section of a finished scrape; `client` is filled in by the caller.
pub fn summarize(r: &ScrapeResult, client: ClientSide) -> ServerSummary {
    let start = r.clock_start;
    let mut instances = Vec::new();
    let mut cluster = InstanceSummary {
        url: "cluster".to_string(),
        ..InstanceSummary::default()
    };
    let (mut ttft, mut e2e, mut queue) = (None, None, None);
    let mut kv_means = Vec::new();
    for (i, inst) in r.instances.iter().enumerate() {
        let points = r.series.get(i).map(Vec::as_slice).unwrap_or(&[]);
        let (s, d) = instance(inst, points, start);
        cluster.engine = cluster.engine.or(s.engine);
        cluster.time_scale = cluster.time_scale.or(s.time_scale);
        cluster.block_size = cluster.block_size.max(s.block_size);
        cluster.scrapes_ok += s.scrapes_ok;
        cluster.scrapes_failed += s.scrapes_failed;
        sum_opt(&mut cluster.requests, s.requests);
        sum_opt(&mut cluster.prefix_queries, s.prefix_queries);
        sum_opt(&mut cluster.prefix_hits, s.prefix_hits);
        sum_opt(&mut cluster.prompt_tokens, s.prompt_tokens);
        sum_opt(&mut cluster.generation_tokens, s.generation_tokens);
        sum_opt(&mut cluster.preemptions, s.preemptions);
        max_opt(&mut cluster.kv_usage_peak, s.kv_usage_peak);
        if let Some(m) = s.kv_usage_mean {
            kv_means.push(m);
        }
        add_hist(&mut ttft, &d.ttft);
        add_hist(&mut e2e, &d.e2e);
        add_hist(&mut queue, &d.queue);
        instances.push(s);
    }
    if let Some(total) = cluster.requests.filter(|t| *t > 0.0) {
        for s in &mut instances {
            s.request_share = s.requests.map(|n| n / total);
        }
        cluster.request_share = Some(1.0);
    }
    cluster.prefix_hit_ratio = ratio(cluster.prefix_hits, cluster.prefix_queries);
    if !kv_means.is_empty() {
        cluster.kv_usage_mean = Some(kv_means.iter().sum::<f64>() / kv_means.len() as f64);
    }
    // Running and waiting of the cluster: summed per tick of the shared schedule.
    let mut per_tick: BTreeMap<u64, RunWait> = BTreeMap::new();
    for points in &r.series {
        // The last point of an instance per tick.
        let mut last: BTreeMap<u64, &Point> = BTreeMap::new();
        for p in points.iter().filter(|p| start.is_none_or(|s| p.at >= s)) {
            last.insert(p.tick, p);
        }
        for (tick, p) in last {
            let e = per_tick.entry(tick).or_default();
            sum_opt(&mut e.0, p.running.map(f64::from));
            sum_opt(&mut e.1, p.waiting.map(f64::from));
        }
    }
    let col = |f: fn(&RunWait) -> Option<f64>| {
        let v: Vec<f64> = per_tick.values().filter_map(f).collect();
        if v.is_empty() {
            (None, None)
        } else {
            (
                Some(v.iter().sum::<f64>() / v.len() as f64),
                v.iter().copied().reduce(f64::max),
            )
        }
    };
    (cluster.running_mean, cluster.running_peak) = col(|e| e.0);
    (cluster.waiting_mean, cluster.waiting_peak) = col(|e| e.1);
    let scale = cluster.time_scale;
    let hist = |h: &Option<HistTotals>| h.as_ref().map(|h| HistSummary::of(h).in_time_scale(scale));
    cluster.ttft = hist(&ttft);
    cluster.e2e = hist(&e2e);
    cluster.queue = hist(&queue);
    ServerSummary {
        interval_ms: r.interval.as_secs_f64() * 1e3,
        samples_path: r.path.as_ref().map(|p| p.display().to_string()),
        samples: r.lines,
        instances,
        cluster,
        client,
        membership: r
            .membership
            .iter()
            .map(|m| MembershipSummary {
                at_s: secs(start, m.at),
                url: m.url.clone(),
                event: if m.appeared {
                    "appeared"
                } else {
                    "disappeared"
                }
                .to_string(),
            })
            .collect(),
        placement: None,
        router: r.router.as_ref().map(|rc| RouterSummary {
            url: rc.url.clone(),
            workers: rc
                .workers
                .iter()
                .map(|(w, ok, failed)| RouterWorker {
                    url: w.clone(),
                    instance: r.instances.iter().position(|i| {
                        i.url
                            .strip_suffix("/metrics")
                            .unwrap_or(&i.url)
                            .trim_end_matches('/')
                            == w.trim_end_matches('/')
                    }),
                    ok: *ok,
                    failed: *failed,
                })
                .collect(),
            error: rc.error.clone(),
        }),
    }
}
