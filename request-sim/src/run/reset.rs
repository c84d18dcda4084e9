//! Emptying the servers' prefix caches between runs of the same slice (sweep points, repeats).

use std::time::Duration;

use crate::config::{ReplayConfig, Target};

/// `POST /reset_prefix_cache` (vLLM's and llm-sim's route) on every origin the run talks to
/// (the endpoint and the `--server-metrics` instances); true when all answered 2xx. False with
/// the built-in simulator, which starts empty for every replay.
pub fn reset_prefix_caches(cfg: &ReplayConfig) -> bool {
    let mut origins: Vec<reqwest::Url> = Vec::new();
    if let Target::Remote(ep) = &cfg.target.server {
        origins.push(ep.url.clone());
    }
    if let Some(sm) = &cfg.validity.server_metrics {
        origins.extend(sm.urls.iter().cloned());
    }
    let urls: Vec<reqwest::Url> = origins
        .iter()
        .filter_map(|u| u.join("/reset_prefix_cache").ok())
        .collect();
    if urls.is_empty() {
        return false;
    }
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return false;
    };
    rt.block_on(async {
        let Ok(client) = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .danger_accept_invalid_certs(cfg.target.insecure)
            .no_proxy()
            .build()
        else {
            return false;
        };
        let mut all = true;
        for u in urls {
            let mut req = client.post(u);
            if let Some(k) = &cfg.target.api_key {
                req = req.bearer_auth(k);
            }
            all &= req.send().await.is_ok_and(|r| r.status().is_success());
        }
        all
    })
}
