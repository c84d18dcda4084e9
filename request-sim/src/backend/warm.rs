//! Keep-alive connections opened before they are needed.
//!
//! A request that finds no idle connection in the pool opens one at its send time: a TCP
//! connect, one more round through the runtime, and the server's accept, all on the critical
//! path of the request and of every request behind it in the same burst. Measured on the blitz
//! command line (docs/performance.md): bursts of 16 requests due at the same instant after a
//! pool shrank opened 6–15 connections each and left drift p99 at 0.68–0.95 ms; with every
//! connection still open, 0.48–0.74 ms.
//!
//! Two places open connections ahead: before the clock starts ([`open_connections`], for the
//! first second of the schedule) and shortly before every burst that needs more connections than
//! the pool is known to hold ([`Warmth`]). hyper's pool has no count of its idle connections,
//! so [`Warmth`] keeps a lower bound: a connection that carried a request at time `t` is in the
//! pool (or in use) until `t` + the pool's idle timeout, so the most requests in flight at once
//! over the last idle timeout is a count of connections that are still open.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::api::Transport;
use super::client::{keep_alive_timeout, HttpClient};
use super::endpoint::Endpoint;
use bytes::Bytes;

/// Width of the buckets in which [`Warmth`] remembers the peak number of connections in use.
const BUCKET: Duration = Duration::from_millis(100);
/// A connection counts as open until this long before its idle timeout runs out (the pool's
/// own check and the server's timer are not ours to see).
const MARGIN: Duration = Duration::from_millis(500);
/// How long a warm-up `GET` before a burst may take before it is given up.
const WARM_GET_MAX: Duration = Duration::from_secs(2);
/// At most this many connections are opened ahead of one burst.
pub const MAX_WARM_PER_BURST: usize = 256;

/// How many keep-alive connections the pool holds at least, from the requests (and warm-up
/// `GET`s) in flight over the last idle timeout.
#[derive(Debug)]
pub struct Warmth {
    /// Requests holding a connection now.
    in_flight: AtomicUsize,
    /// Peak of `in_flight` per [`BUCKET`] (bucket number since `epoch`, peak), oldest first.
    peaks: Mutex<VecDeque<(u64, usize)>>,
    epoch: Instant,
    /// Buckets a connection stays countable after its last use.
    window: u64,
    /// Warm-up `GET`s sent before bursts, and the bursts they were sent for.
    gets: AtomicU64,
    bursts: AtomicU64,
}

/// A request's hold on a connection (counted by [`Warmth`] until dropped).
#[derive(Debug)]
pub struct InUse(Arc<Warmth>);

impl Drop for InUse {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Warmth {
    /// For a pool that keeps idle connections `pool_idle`.
    pub fn new(pool_idle: Duration) -> Arc<Warmth> {
        let window = pool_idle.saturating_sub(MARGIN).as_millis() / BUCKET.as_millis();
        Arc::new(Warmth {
            in_flight: AtomicUsize::new(0),
            peaks: Mutex::default(),
            epoch: Instant::now(),
            window: window as u64,
            gets: AtomicU64::new(0),
            bursts: AtomicU64::new(0),
        })
    }

    fn bucket(&self, at: Instant) -> u64 {
        (at.saturating_duration_since(self.epoch).as_millis() / BUCKET.as_millis()) as u64
    }

    /// A request starts using a connection.
    pub fn begin(self: &Arc<Self>) -> InUse {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.note_peak(now);
        InUse(self.clone())
    }

    /// `n` connections were opened just now by other means (the warm-up before the clock).
    pub fn opened(&self, n: usize) {
        self.note_peak(n + self.in_flight.load(Ordering::Relaxed));
    }

    fn note_peak(&self, now: usize) {
        let b = self.bucket(Instant::now());
        let mut peaks = self.peaks.lock().unwrap_or_else(|p| p.into_inner());
        match peaks.back_mut() {
            Some((last, peak)) if *last == b => *peak = (*peak).max(now),
            _ => peaks.push_back((b, now)),
        }
        // Only the buckets still inside the window matter.
        while peaks.front().is_some_and(|&(old, _)| old + self.window < b) {
            peaks.pop_front();
        }
    }

    /// Connections known to be open and idle at `at`: the peak in use within the window before
    /// `at`, less those in use now.
    pub fn idle_at(&self, at: Instant) -> usize {
        let b = self.bucket(at);
        let in_flight = self.in_flight.load(Ordering::Relaxed);
        let peaks = self.peaks.lock().unwrap_or_else(|p| p.into_inner());
        let peak = peaks
            .iter()
            .filter(|&&(old, _)| old + self.window >= b)
            .map(|&(_, p)| p)
            .max()
            .unwrap_or(0);
        peak.max(in_flight) - in_flight
    }

    /// How many warm-up `GET`s a burst of `n` requests due at `at` needs: none when the pool
    /// holds `n` idle connections, otherwise `n` (concurrent `GET`s take the idle connections
    /// first and open the rest), at most [`MAX_WARM_PER_BURST`].
    pub fn needed(&self, n: usize, at: Instant) -> usize {
        if self.idle_at(at) >= n {
            0
        } else {
            n.min(MAX_WARM_PER_BURST)
        }
    }

    /// Warm-up `GET`s sent before bursts, and the bursts they were sent for.
    pub fn sent(&self) -> (u64, u64) {
        (
            self.gets.load(Ordering::Relaxed),
            self.bursts.load(Ordering::Relaxed),
        )
    }

    /// Send `n` warm-up `GET`s at once on `rt` and return at once; each holds its connection
    /// (counted) until answered or given up after [`WARM_GET_MAX`].
    pub fn warm(
        self: &Arc<Self>,
        rt: &tokio::runtime::Handle,
        client: &HttpClient,
        ep: &Endpoint,
        n: usize,
    ) {
        // One HTTP/2 channel carries every gRPC request: nothing to open before a burst.
        if n == 0 || ep.kind.transport() != Transport::HttpSse {
            return;
        }
        self.gets.fetch_add(n as u64, Ordering::Relaxed);
        self.bursts.fetch_add(1, Ordering::Relaxed);
        let Some(url) = warmup_url(ep) else {
            return;
        };
        for _ in 0..n {
            let (client, url, headers) = (client.clone(), url.clone(), ep.auth_headers());
            let hold = self.begin();
            rt.spawn(async move {
                let _hold = hold;
                let get = async {
                    let mut resp = client
                        .send(false, reqwest::Method::GET, &url, headers, Bytes::new())
                        .await
                        .ok()?;
                    resp.body.drain().await.ok()?;
                    Some(())
                };
                let _ = tokio::time::timeout(WARM_GET_MAX, get).await;
            });
        }
    }
}

/// The cheap request that opens a keep-alive connection: `GET /v1/models` for OpenAI-style
/// servers (every API but TGI's), `GET /health` for TGI (any answer, even an error status,
/// leaves the connection open).
pub fn warmup_url(ep: &Endpoint) -> Option<reqwest::Url> {
    let url = if ep.kind.openai_style_server() {
        format!("{}/v1/models", ep.base_url())
    } else {
        format!("{}/health", ep.base_url())
    };
    reqwest::Url::parse(&url).ok()
}

/// Open `n` keep-alive connections with warm-up `GET`s, within `max`; returns how many were
/// answered (a failure only means the first requests open their own connections) and the idle
/// timeout the server announced (`Keep-Alive: timeout=`), if it did.
pub async fn open_connections(
    client: &HttpClient,
    ep: &Endpoint,
    n: usize,
    max: Duration,
) -> (usize, Option<Duration>) {
    if let Some(g) = &ep.grpc {
        // The run's one channel, connected by a `HealthCheck`.
        let ok = tokio::time::timeout(max, g.health()).await;
        return (usize::from(matches!(ok, Ok(Ok(())))), None);
    }
    let Some(url) = warmup_url(ep) else {
        return (0, None);
    };
    // One task each, so they spread over the I/O threads and each thread has run the request
    // path once before the first real send.
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (client, url, headers) = (client.clone(), url.clone(), ep.auth_headers());
        set.spawn(async move {
            let mut resp = client
                .send(false, reqwest::Method::GET, &url, headers, Bytes::new())
                .await
                .ok()?;
            let keep_alive = keep_alive_timeout(&resp.headers);
            resp.body.drain().await.ok()?;
            Some(keep_alive)
        });
    }
    let mut ok = 0;
    let mut announced = None;
    let answered = async {
        while let Some(r) = set.join_next().await {
            if let Ok(Some(k)) = r {
                ok += 1;
                announced = announced.or(k);
            }
        }
    };
    // On timeout the set is dropped, which aborts what is left.
    let _ = tokio::time::timeout(max, answered).await;
    (ok, announced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_connections_are_the_recent_peak_less_those_in_use() {
        let w = Warmth::new(Duration::from_secs(4));
        let now = Instant::now();
        assert_eq!(w.idle_at(now), 0);
        assert_eq!(w.needed(3, now), 3);
        let held: Vec<InUse> = (0..5).map(|_| w.begin()).collect();
        assert_eq!(w.idle_at(now), 0, "all five in use");
        drop(held);
        assert_eq!(w.idle_at(Instant::now()), 5);
        assert_eq!(w.needed(5, Instant::now()), 0);
        assert_eq!(
            w.needed(6, Instant::now()),
            6,
            "a bigger burst opens them all"
        );
        let one = w.begin();
        assert_eq!(w.idle_at(Instant::now()), 4);
        drop(one);
        w.opened(7);
        assert_eq!(w.idle_at(Instant::now()), 7, "opened before the clock");
        // Past the idle timeout (less the margin) nothing counts any more.
        let later = Instant::now() + Duration::from_millis(3_700);
        assert_eq!(w.idle_at(later), 0);
        assert_eq!(w.needed(1, later), 1);
        assert_eq!(
            w.needed(10_000, later),
            MAX_WARM_PER_BURST,
            "bounded per burst"
        );
    }
}
