//! The target group of the settings ([`TargetConfig`]): which server requests go to (the
//! endpoint resolved once for `--api`, or the built-in simulator), its API key and the
//! connection pool's settings.

use std::time::Duration;

use super::requests::session_header;
use crate::backend::{ApiFlavor, Endpoint};
use crate::cli::{ReplayArgs, TargetArgs};
use crate::{Error, Result};

/// Which server requests go to.
#[derive(Debug, Clone)]
pub enum Target {
    /// Start llm-sim in-process on 127.0.0.1 (ephemeral port); its endpoint is known once it
    /// listens ([`ReplayConfig::simulator_endpoint`](super::ReplayConfig::simulator_endpoint)).
    BuiltinSimulator,
    /// `--endpoint`, resolved for `--api` (and `--session-header`).
    Remote(Endpoint),
}

/// The server requests go to (`--endpoint`, `--api`, ...).
#[derive(Debug, Clone)]
pub struct TargetConfig {
    pub server: Target,
    /// `--api` (the resolved endpoint has it too; kept for the built-in simulator's).
    pub api: ApiFlavor,
    pub model_name: Option<String>,
    /// `--model-map`, parsed (a file already read).
    pub model_map: Option<crate::backend::ModelMap>,
    pub route: Option<String>,
    pub api_key: Option<String>,
    pub insecure: bool,
    /// `--pool-idle-timeout`.
    pub pool_idle_timeout: Duration,
    /// Open connections before bursts the pool is too small for (`--no-warm-connections`
    /// turns it off).
    pub warm_connections: bool,
}

impl TargetConfig {
    /// The group from its flags, with the server ([`target`]) and the API key ([`api_key`])
    /// checked.
    pub(super) fn new(
        t: TargetArgs,
        server: Target,
        api_key: Option<String>,
    ) -> Result<TargetConfig> {
        let model_map = t
            .model_map
            .as_deref()
            .map(crate::backend::ModelMap::from_flag)
            .transpose()
            .map_err(Error::config)?;
        Ok(TargetConfig {
            server,
            api: t.api,
            model_name: t.model_name,
            model_map,
            route: t.aibrix_route,
            api_key,
            insecure: t.insecure,
            pool_idle_timeout: Duration::from_secs_f64(t.pool_idle_timeout),
            warm_connections: !t.no_warm_connections,
        })
    }
}

/// `--api-key-file` or `--api-key` (`$OPENAI_API_KEY`).
pub(super) fn api_key(a: &TargetArgs) -> Result<Option<String>> {
    Ok(match (&a.api_key, &a.api_key_file) {
        (_, Some(f)) => {
            let k = std::fs::read_to_string(f)
                .map_err(|e| Error::config(format!("--api-key-file {}: {e}", f.display())))?;
            let k = k.trim().to_string();
            if k.is_empty() {
                return Err(Error::config(format!(
                    "--api-key-file {}: file is empty",
                    f.display()
                )));
            }
            Some(k)
        }
        (Some(k), None) if !k.trim().is_empty() => Some(k.trim().to_string()),
        _ => None,
    })
}

/// `--endpoint` resolved (once) for `--api`, or the built-in simulator.
pub(super) fn target(a: &ReplayArgs, stream: bool, api_key: &Option<String>) -> Result<Target> {
    let (t, token_ids) = (&a.target, a.prompts.token_ids);
    if let (Some(why), None) = (t.api.needs_endpoint(), &t.endpoint) {
        return Err(Error::config(format!(
            "--api {} needs --endpoint ({why})",
            t.api.name()
        )));
    }
    if t.api.needs_route() && t.aibrix_route.is_none() {
        return Err(Error::config(
            "--api aibrix needs --aibrix-route (e.g. prefix-cache, throughput)",
        ));
    }
    if t.aibrix_route.is_some() && !t.api.needs_route() {
        return Err(Error::config(
            "--aibrix-route sets AIBrix's routing-strategy header: it needs --api aibrix",
        ));
    }
    if token_ids && !t.api.may_take_token_ids() {
        return Err(Error::config(
            "--token-ids works only with OpenAI completions endpoints and --api vllm-grpc",
        ));
    }
    let Some(e) = &t.endpoint else {
        return Ok(Target::BuiltinSimulator);
    };
    let mut ep = Endpoint::resolve(e, t.api, stream, t.aibrix_route.clone(), api_key.clone())
        .map_err(Error::config)?;
    if token_ids && !ep.kind.takes_token_ids() {
        return Err(Error::config(format!(
            "--token-ids needs a completions endpoint (…/v1/completions) or --api vllm-grpc, not {}",
            ep.display_url()
        )));
    }
    ep.session_header = session_header(&a.requests.sessions)?;
    let h = headers(&t.header)?;
    ep.headers = (!h.is_empty()).then(|| std::sync::Arc::new(h));
    Ok(Target::Remote(ep))
}

/// `--header NAME:VALUE`: checked as an HTTP header name and value.
pub(super) fn headers(
    given: &[String],
) -> Result<Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>> {
    given
        .iter()
        .map(|h| {
            let (name, value) = h
                .split_once(':')
                .ok_or_else(|| Error::config(format!("--header {h:?}: expected NAME:VALUE")))?;
            let name = reqwest::header::HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| Error::config(format!("--header {h:?}: not an HTTP header name")))?;
            let value = reqwest::header::HeaderValue::from_str(value.trim())
                .map_err(|_| Error::config(format!("--header {h:?}: not an HTTP header value")))?;
            Ok((name, value))
        })
        .collect()
}

/// `--pool-idle-timeout`: more than 0 seconds.
pub(super) fn check_pool_idle_timeout(a: &TargetArgs) -> Result<()> {
    let pool_idle = a.pool_idle_timeout;
    if !pool_idle.is_finite() || pool_idle <= 0.0 {
        return Err(Error::config(format!(
            "--pool-idle-timeout must be > 0 seconds, got {pool_idle}"
        )));
    }
    Ok(())
}
