//! The HTTP clients of a run ([`build_client`]) and the keep-alive timing they follow: the
//! pool's idle timeout against the `Keep-Alive: timeout=` a server announces.

use std::time::Duration;

/// HTTP client settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub insecure: bool,
    /// Load the system's root certificates (only needed for https endpoints; loading them
    /// costs start-up time).
    pub tls_roots: bool,
    pub connect_timeout: Duration,
    pub max_idle_per_host: usize,
    /// How long an idle keep-alive connection is kept for reuse. Below the keep-alive timeout
    /// of the servers users run (uvicorn/vLLM and llama.cpp close idle connections after 5 s),
    /// so the client gives up a connection before the server does.
    pub pool_idle_timeout: Duration,
}

/// Default of [`ClientOptions::pool_idle_timeout`] (`--pool-idle-timeout`), seconds.
pub const DEFAULT_POOL_IDLE_TIMEOUT_S: f64 = 4.0;

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            insecure: false,
            tls_roots: true,
            connect_timeout: Duration::from_secs(10),
            max_idle_per_host: 4096,
            pool_idle_timeout: Duration::from_secs_f64(DEFAULT_POOL_IDLE_TIMEOUT_S),
        }
    }
}

/// The HTTP clients of a run: the pooled keep-alive client every request uses, and a client
/// without a pool, whose every request opens a fresh connection, for the one retry of a
/// request whose reused connection the server had closed (see [`execute`](super::execute)).
///
/// Derefs to the pooled client, for the few side requests (`/v1/models`, warm-up).
#[derive(Debug, Clone)]
pub struct HttpClient {
    pub(super) pooled: reqwest::Client,
    pub(super) fresh: reqwest::Client,
}

impl std::ops::Deref for HttpClient {
    type Target = reqwest::Client;
    fn deref(&self) -> &reqwest::Client {
        &self.pooled
    }
}

/// The clients (HTTP/1.1, TCP_NODELAY, rustls with the system's root certificates).
///
/// hyper's pool already honours `Connection: close` (such a connection is never reused) and
/// drops a connection it sees closed while idle; it does not read `Keep-Alive: timeout=`,
/// which is why the pool's own idle timeout stays below the servers' usual 5 s.
pub fn build_client(opts: &ClientOptions) -> crate::Result<HttpClient> {
    let base = || {
        reqwest::Client::builder()
            .tcp_nodelay(true)
            .connect_timeout(opts.connect_timeout)
            .danger_accept_invalid_certs(opts.insecure)
            .tls_built_in_root_certs(opts.tls_roots)
            .no_proxy()
    };
    let pooled = base()
        .pool_max_idle_per_host(opts.max_idle_per_host)
        .pool_idle_timeout(opts.pool_idle_timeout)
        .build()
        .map_err(|e| crate::Error::config(format!("cannot build HTTP client: {e}")))?;
    let fresh = base()
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| crate::Error::config(format!("cannot build HTTP client: {e}")))?;
    Ok(HttpClient { pooled, fresh })
}

/// The idle timeout a server announces in `Keep-Alive: timeout=N[, max=M]` (RFC 9112 leaves
/// the header to implementations; Apache, nginx and some Python servers send it), if any.
/// A three-line parse: no crate parses this header on its own.
pub fn keep_alive_timeout(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get("keep-alive")?.to_str().ok()?;
    v.split(',').find_map(|part| {
        let (k, val) = part.split_once('=')?;
        if !k.trim().eq_ignore_ascii_case("timeout") {
            return None;
        }
        let secs: f64 = val.trim().trim_matches('"').parse().ok()?;
        (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
    })
}

/// The pool idle timeout to use against a server that closes idle connections after
/// `server`: comfortably below it (by a fifth, at least 0.5 s, never under half of it), or
/// `None` when `configured` is already below that.
pub fn pool_idle_for(server: Duration, configured: Duration) -> Option<Duration> {
    let margin = (server / 5).max(Duration::from_millis(500));
    let safe = server.saturating_sub(margin).max(server / 2);
    (configured > safe).then_some(safe)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_alive_header_and_pool_timeout() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(keep_alive_timeout(&h), None);
        h.insert("keep-alive", "timeout=5, max=100".parse().unwrap());
        assert_eq!(keep_alive_timeout(&h), Some(Duration::from_secs(5)));
        h.insert("keep-alive", "max=100,Timeout = 2".parse().unwrap());
        assert_eq!(keep_alive_timeout(&h), Some(Duration::from_secs(2)));
        h.insert("keep-alive", "timeout=soon".parse().unwrap());
        assert_eq!(keep_alive_timeout(&h), None);
        let s = Duration::from_secs_f64;
        // 5 s server: 4 s is already a fifth below; 90 s configured comes down to 4 s.
        assert_eq!(pool_idle_for(s(5.0), s(4.0)), None);
        assert_eq!(pool_idle_for(s(5.0), s(90.0)), Some(s(4.0)));
        // 2 s server: 0.5 s margin; 1 s server: never under half.
        assert_eq!(pool_idle_for(s(2.0), s(4.0)), Some(s(1.5)));
        assert_eq!(pool_idle_for(s(1.0), s(4.0)), Some(s(0.5)));
    }
}
