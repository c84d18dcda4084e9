//! The HTTP clients of a run ([`build_client`]) and the keep-alive timing they follow: the
//! pool's idle timeout against the `Keep-Alive: timeout=` a server announces.

use std::time::Duration;

use bytes::Bytes;

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
/// Each is two clients: plain-HTTP (`http://`) requests go through hyper's client on the
/// kernel-stamped connections of [`super::socket`] (their token times are the kernel's
/// arrivals); `https://` goes through reqwest (rustls).
///
/// Derefs to the pooled reqwest client, for the few side requests (`/v1/models`, metrics).
#[derive(Debug, Clone)]
pub struct HttpClient {
    pub(super) pooled: reqwest::Client,
    pub(super) fresh: reqwest::Client,
    pub(super) timed: Timed,
    pub(super) timed_fresh: Timed,
}

/// hyper's client on kernel-stamped connections.
pub(super) type Timed =
    hyper_util::client::legacy::Client<super::socket::TimedConnector, http_body_util::Full<Bytes>>;

impl std::ops::Deref for HttpClient {
    type Target = reqwest::Client;
    fn deref(&self) -> &reqwest::Client {
        &self.pooled
    }
}

/// Bytes a plain-HTTP connection reads at a time. hyper's own default grows each
/// connection's buffer from 8 KiB as reads fill it; at 10,000 streams that was 433 MiB of
/// client RSS against 322 MiB with 2 KiB (docs/performance.md, "10,000 streams"). An SSE event
/// is a few hundred bytes; a larger body or header block takes more reads, not more memory.
const READ_BUF: usize = 2048;

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
    let timed = |max_idle: usize| {
        use hyper_util::rt::{TokioExecutor, TokioTimer};
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .http1_read_buf_exact_size(READ_BUF)
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(opts.pool_idle_timeout)
            .pool_max_idle_per_host(max_idle)
            .build(super::socket::TimedConnector {
                connect_timeout: opts.connect_timeout,
            })
    };
    Ok(HttpClient {
        pooled,
        fresh,
        timed: timed(opts.max_idle_per_host),
        timed_fresh: timed(0),
    })
}

/// Why an HTTP request got no answer, whichever client sent it.
#[derive(Debug)]
pub struct TransportError {
    /// No connection could be opened.
    pub connect: bool,
    /// reqwest's own timeout (the connect timeout).
    pub timeout: bool,
    pub err: Box<dyn std::error::Error + Send + Sync>,
}

impl TransportError {
    fn of_reqwest(e: reqwest::Error) -> TransportError {
        TransportError {
            connect: e.is_connect(),
            timeout: e.is_timeout(),
            err: Box::new(e.without_url()),
        }
    }

    fn of_hyper(e: hyper_util::client::legacy::Error) -> TransportError {
        TransportError {
            connect: e.is_connect(),
            timeout: false,
            err: Box::new(e),
        }
    }

    /// The error and its causes, outermost first.
    pub fn chain(&self) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
        let first: &(dyn std::error::Error + 'static) = &*self.err;
        std::iter::successors(Some(first), |e| e.source())
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.err.fmt(f)
    }
}

/// An answer's head and its body, whichever client got it.
pub struct Answer {
    pub status: reqwest::StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: AnswerBody,
    /// The connection's kernel stamps (plain HTTP only).
    pub clock: Option<super::socket::ConnClock>,
}

/// The body of an [`Answer`], read chunk by chunk as it arrives.
pub enum AnswerBody {
    Reqwest(reqwest::Response),
    Hyper(hyper::body::Incoming),
}

impl AnswerBody {
    /// Read the body to its end.
    pub async fn drain(&mut self) -> Result<(), TransportError> {
        while let Some(c) = self.chunk().await {
            c?;
        }
        Ok(())
    }

    /// The next chunk of the body, `None` at its end.
    pub async fn chunk(&mut self) -> Option<Result<Bytes, TransportError>> {
        match self {
            AnswerBody::Reqwest(r) => r
                .chunk()
                .await
                .map_err(TransportError::of_reqwest)
                .transpose(),
            AnswerBody::Hyper(b) => {
                use http_body_util::BodyExt;
                loop {
                    match b.frame().await? {
                        Ok(f) => match f.into_data() {
                            Ok(d) => return Some(Ok(d)),
                            // Trailers carry no body bytes.
                            Err(_) => continue,
                        },
                        Err(e) => {
                            return Some(Err(TransportError {
                                connect: false,
                                timeout: false,
                                err: Box::new(e),
                            }))
                        }
                    }
                }
            }
        }
    }
}

impl HttpClient {
    /// Send `method url` with `headers` and `body` (`fresh`: on a new connection) and return
    /// its answer's head, its body to be read.
    pub async fn send(
        &self,
        fresh: bool,
        method: reqwest::Method,
        url: &reqwest::Url,
        headers: reqwest::header::HeaderMap,
        body: Bytes,
    ) -> Result<Answer, TransportError> {
        if url.scheme() == "http" {
            let client = if fresh {
                &self.timed_fresh
            } else {
                &self.timed
            };
            let uri: hyper::Uri = url.as_str().parse().map_err(|e| TransportError {
                connect: true,
                timeout: false,
                err: Box::new(e),
            })?;
            let mut req = hyper::Request::new(http_body_util::Full::new(body));
            *req.method_mut() = method;
            *req.uri_mut() = uri;
            *req.headers_mut() = headers;
            let resp = client
                .request(req)
                .await
                .map_err(TransportError::of_hyper)?;
            let (head, body) = resp.into_parts();
            let clock = head.extensions.get::<super::socket::ConnClock>().cloned();
            return Ok(Answer {
                status: head.status,
                headers: head.headers,
                body: AnswerBody::Hyper(body),
                clock,
            });
        }
        let client = if fresh { &self.fresh } else { &self.pooled };
        let resp = client
            .request(method, url.clone())
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(TransportError::of_reqwest)?;
        Ok(Answer {
            status: resp.status(),
            headers: resp.headers().clone(),
            body: AnswerBody::Reqwest(resp),
            clock: None,
        })
    }
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
