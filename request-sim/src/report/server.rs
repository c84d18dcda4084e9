//! The server-metrics section of the console table (`--server-metrics`): the cluster next to
//! the client, the server-side latency histograms as their buckets support them, then one line
//! per instance. The figures are computed by [`crate::observe::summary`].

use super::format::{num, pct, trim_num};
use super::table::Table;
use crate::observe::summary::HistSummary;
use crate::observe::ServerSummary;

/// `mean / p50 / p99` of a latency, ms.
fn three(mean: Option<f64>, p50: Option<f64>, p99: Option<f64>) -> String {
    format!("{} / {} / {}", num(mean, 1), num(p50, 1), num(p99, 1))
}

/// The server-metrics section: the cluster next to the client, then one line per instance.
pub(super) fn server_section(t: &mut Table, srv: &ServerSummary) {
    let c = &srv.cluster;
    let n = srv.instances.len();
    t.header(
        &format!(
            "Server metrics ({n} instance{}, every {:.0} ms)",
            if n == 1 { "" } else { "s" },
            srv.interval_ms
        ),
        '-',
    );
    t.row(
        "Scrapes ok / failed:",
        format!("{} / {}", c.scrapes_ok, c.scrapes_failed),
    );
    t.row(
        "Server prefix-cache hit ratio (%):",
        pct(c.prefix_hit_ratio),
    );
    t.row(
        "Client cached_tokens ratio (%):",
        pct(srv.client.cached_tokens_ratio),
    );
    if srv.client.ideal_hit_ratio.is_some() {
        t.row(
            "Trace-ideal hit ratio (%):",
            pct(srv.client.ideal_hit_ratio),
        );
    }
    placement_rows(t, srv);
    t.row("Requests finished (server):", num(c.requests, 0));
    t.row(
        "Running mean / peak:",
        format!("{} / {}", num(c.running_mean, 2), num(c.running_peak, 0)),
    );
    t.row(
        "Waiting mean / peak:",
        format!("{} / {}", num(c.waiting_mean, 2), num(c.waiting_peak, 0)),
    );
    t.row(
        "KV usage mean / peak (%):",
        format!("{} / {}", pct(c.kv_usage_mean), pct(c.kv_usage_peak)),
    );
    t.row("Preemptions:", num(c.preemptions, 0));
    let h = |x: &Option<HistSummary>| match x {
        Some(h) => render_hist(h),
        None => "n/a".to_string(),
    };
    let cl = &srv.client;
    t.row("Server TTFT mean/p50/p99 (ms):", h(&c.ttft));
    t.row(
        "Client TTFT mean/p50/p99 (ms):",
        three(cl.ttft_mean_ms, cl.ttft_p50_ms, cl.ttft_p99_ms),
    );
    t.row("Server E2E mean/p50/p99 (ms):", h(&c.e2e));
    t.row(
        "Client E2E mean/p50/p99 (ms):",
        three(cl.e2e_mean_ms, cl.e2e_p50_ms, cl.e2e_p99_ms),
    );
    t.row("Server queue mean/p50/p99 (ms):", h(&c.queue));
    instance_grid(t, srv);
}

/// One line per instance: the server's share (and the records' when they know each
/// request's instance), hit ratio, queues, KV peak, preemptions, TTFT, failed scrapes and the
/// first outage.
fn instance_grid(t: &mut Table, srv: &ServerSummary) {
    let placed = srv.placement.is_some();
    let head = [
        "inst",
        if placed { "share%/rec%" } else { "share%" },
        "hit%",
        "run mean/pk",
        "wait mean/pk",
        "kv%pk",
        "preempt",
        "ttft ms",
        "fails",
    ];
    let rows = srv
        .instances
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let share = if placed {
                format!("{}/{}", pct(x.request_share), pct(x.record_share))
            } else {
                pct(x.request_share)
            };
            let fails = match x.outages.first() {
                Some(o) => format!(
                    "{} (down {:.0}–{} s)",
                    x.scrapes_failed,
                    o.from_s,
                    o.to_s.map_or("end".to_string(), |t| format!("{t:.0}"))
                ),
                None => x.scrapes_failed.to_string(),
            };
            vec![
                i.to_string(),
                share,
                pct(x.prefix_hit_ratio),
                format!("{}/{}", num(x.running_mean, 1), num(x.running_peak, 0)),
                format!("{}/{}", num(x.waiting_mean, 1), num(x.waiting_peak, 0)),
                pct(x.kv_usage_peak),
                num(x.preemptions, 0),
                num(x.ttft.as_ref().and_then(|h| h.mean_ms), 1),
                fails,
            ]
        })
        .collect();
    t.grid(head.map(String::from).to_vec(), rows, |c| {
        format!(
            "{:<4} {:>11} {:>6} {:>11} {:>11} {:>6} {:>7} {:>9} {:>6}",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]
        )
    });
}

/// Where requests went: the routed ideal and how requests were placed (when records know
/// each one's instance), the router's own count, and the router's list changing.
fn placement_rows(t: &mut Table, srv: &ServerSummary) {
    if let Some(p) = &srv.placement {
        t.row(
            "Routed ideal hit ratio (%):",
            match p.routed_ideal_hit_ratio_server_blocks {
                Some(b) => format!(
                    "{} ({} at the server's block size)",
                    pct(p.routed_ideal_hit_ratio),
                    pct(Some(b))
                ),
                None => pct(p.routed_ideal_hit_ratio),
            },
        );
        let votes = p.kv_events.as_ref().map_or(String::new(), |k| {
            format!(
                ", {} split vote{}{}",
                k.split_votes,
                if k.split_votes == 1 { "" } else { "s" },
                if k.named_by_response > 0 {
                    format!(
                        ", {} of {} as the response named",
                        k.agreed_with_response, k.named_by_response
                    )
                } else {
                    String::new()
                }
            )
        });
        t.row(
            &format!("Requests placed ({}):", p.from),
            format!("{} placed / {} not{votes}", p.placed, p.unplaced),
        );
    }
    if let Some(r) = &srv.router {
        let cells: Vec<String> = r
            .workers
            .iter()
            .map(|w| {
                let who = w.instance.map_or(w.url.clone(), |i| format!("inst {i}"));
                if w.failed > 0.0 {
                    format!("{who}: {} ok / {} failed", w.ok, w.failed)
                } else {
                    format!("{who}: {}", w.ok)
                }
            })
            .collect();
        t.row(
            "Router's own count per instance:",
            match &r.error {
                Some(e) => format!("n/a ({e})"),
                None => cells.join(", "),
            },
        );
    }
    for m in &srv.membership {
        t.row(
            &format!("Router at {:.1} s:", m.at_s),
            format!("{} {}", m.event, m.url),
        );
    }
}

/// `mean / p50 / p99` of a server-side histogram, every percentile in one format: the range
/// the buckets (and the mean) support, `lo–hi` ms, `hi` being `∞` above the last finite bound;
/// then the simulated time's scale when the server is a simulator running faster than the wall
/// clock. The summary JSON keeps the interpolated value where the bucket is narrow.
pub fn render_hist(h: &HistSummary) -> String {
    let mean = num(h.mean_ms, 1);
    let p50 = percentile_cell(h.p50_ms, h.p50_bounds_ms);
    let p99 = percentile_cell(h.p99_ms, h.p99_bounds_ms);
    let sim = match h.time_scale {
        Some(x) => format!(
            " (simulated time ×{}: ÷{} for the wall clock)",
            trim_num(x),
            trim_num(x)
        ),
        None => String::new(),
    };
    format!("{mean} / {p50} / {p99}{sim}")
}

/// One percentile as the range that holds it (see [`render_hist`]); `n/a` without data.
fn percentile_cell(value: Option<f64>, bounds: Option<(f64, Option<f64>)>) -> String {
    let bound = |x: f64| trim_num((x * 10.0).round() / 10.0);
    match (bounds, value) {
        (Some((lo, Some(hi))), _) => format!("{}–{}", bound(lo), bound(hi)),
        (Some((lo, None)), _) => format!("{}–∞", bound(lo)),
        (None, Some(v)) => format!("{}–{}", bound(v), bound(v)),
        (None, None) => num(None, 1),
    }
}
