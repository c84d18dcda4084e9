//! The validity group of the settings ([`ValidityConfig`]): which servers' metrics are scraped
//! and how often, and what makes a run invalid (send drift, error rate).

use std::time::Duration;

use crate::cli::ValidityArgs;
use crate::{Error, Result};

/// Server metrics and what makes a run invalid.
#[derive(Debug, Clone)]
pub struct ValidityConfig {
    /// Server-metrics scraping (`None`: `--no-server-metrics`).
    pub server_metrics: Option<ServerMetrics>,
    /// `--max-drift-ms`: drift p99 above it makes the run invalid.
    pub max_drift_ms: f64,
    /// `--strict`: an invalid run exits with status 4.
    pub strict: bool,
    /// `--max-error-rate`: a larger share of errored requests exits with status 6.
    pub max_error_rate: Option<f64>,
}

/// `--server-metrics`, `--metrics-interval`, `--kv-events`.
#[derive(Debug, Clone)]
pub struct ServerMetrics {
    /// Always scraped.
    pub urls: Vec<reqwest::Url>,
    pub interval: Duration,
    /// `--kv-events`: where each instance publishes its KV cache events.
    pub kv_events: Vec<crate::observe::kv::KvSource>,
}

impl ValidityConfig {
    /// The group from its flags, with the scraping ([`server_metrics`]) checked.
    pub(super) fn new(v: ValidityArgs, server_metrics: Option<ServerMetrics>) -> ValidityConfig {
        ValidityConfig {
            server_metrics,
            max_drift_ms: v.max_drift_ms,
            strict: v.strict,
            max_error_rate: v.max_error_rate,
        }
    }
}

/// Parse a `--metrics-interval` value: seconds (`0.5`) or with a unit (`100ms`, `2s`).
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("--metrics-interval {s:?}: use seconds (0.5) or a unit (100ms, 2s)")
    })?;
    let secs = v * scale;
    if !secs.is_finite() || secs <= 0.0 || secs > 3600.0 {
        return Err(format!(
            "--metrics-interval {s:?}: must be between 100 ms and 1 hour"
        ));
    }
    let d = Duration::from_secs_f64(secs);
    if d < crate::observe::scrape::MIN_INTERVAL {
        return Err(format!(
            "--metrics-interval {s:?} is below the minimum of 100 ms: scraping faster loads the servers and this machine without telling more"
        ));
    }
    Ok(d)
}

/// `--server-metrics`, `--metrics-interval`, `--max-drift-ms`, `--max-error-rate`.
pub(super) fn server_metrics(a: &ValidityArgs) -> Result<Option<ServerMetrics>> {
    if !a.max_drift_ms.is_finite() || a.max_drift_ms < 0.0 {
        return Err(Error::config(format!(
            "--max-drift-ms must be a number >= 0, got {}",
            a.max_drift_ms
        )));
    }
    if let Some(r) = a.max_error_rate {
        if !(0.0..=1.0).contains(&r) {
            return Err(Error::config(format!(
                "--max-error-rate must be a fraction in [0, 1] (0.05 = 5%), got {r}"
            )));
        }
    }
    let kv_events = a
        .kv_events
        .iter()
        .filter(|u| !u.trim().is_empty())
        .map(|u| crate::observe::kv::KvSource::parse(u).map_err(Error::config))
        .collect::<Result<Vec<_>>>()?;
    let named = kv_events.iter().filter(|k| k.instance.is_some()).count();
    if named != 0 && named != kv_events.len() {
        return Err(Error::config(
            "--kv-events: give every instance as URL=tcp://HOST:PORT, or none (bare endpoints follow the scraped instances' order)",
        ));
    }
    if a.no_server_metrics {
        if !kv_events.is_empty() {
            return Err(Error::config(
                "--kv-events needs the instances' server metrics: drop --no-server-metrics",
            ));
        }
        return Ok(None);
    }
    let interval = parse_interval(&a.metrics_interval).map_err(Error::config)?;
    let urls = a
        .server_metrics
        .iter()
        .filter(|u| !u.trim().is_empty())
        .map(|u| crate::observe::scrape::metrics_url(u))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(ServerMetrics {
        urls,
        interval,
        kv_events,
    }))
}
