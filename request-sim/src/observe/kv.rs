//! The listener of the instances' KV cache events (`--kv-events`): one ZeroMQ SUB socket per
//! instance, connected to the endpoint vLLM publishes on (`--kv-events-config` with
//! `tcp://*:PORT`: vLLM binds, the subscriber connects), on its own thread and runtime, away
//! from the sending path. Each `BlockStored` event's tokens go to [`Placement::stored`]; a
//! batch that is not vLLM's format is counted (and the first reason kept), never fatal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_common::kv_events::{decode_batch, KvEvent};
use tokio_util::sync::CancellationToken;
use zeromq::{Socket, SocketRecv};

use super::placement::Placement;

/// How long to wait before connecting again when an endpoint refuses.
const RECONNECT: Duration = Duration::from_millis(500);

/// One `--kv-events` value: `URL=ENDPOINT` (the instance and where it publishes) or a bare
/// `ENDPOINT` (given in the instances' order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvSource {
    pub instance: Option<String>,
    pub endpoint: String,
}

impl KvSource {
    /// Reads one value; `tcp://*:PORT` (vLLM's own form) is connected to on this host.
    pub fn parse(s: &str) -> Result<KvSource, String> {
        let s = s.trim();
        let (instance, ep) = match s.split_once("=tcp://") {
            Some((u, rest)) => (Some(u.to_string()), format!("tcp://{rest}")),
            None => (None, s.to_string()),
        };
        let Some(addr) = ep.strip_prefix("tcp://") else {
            return Err(format!(
                "--kv-events {s:?}: give tcp://HOST:PORT or INSTANCE_URL=tcp://HOST:PORT"
            ));
        };
        let (host, port) = addr
            .rsplit_once(':')
            .ok_or_else(|| format!("--kv-events {s:?}: no port"))?;
        port.parse::<u16>()
            .map_err(|_| format!("--kv-events {s:?}: {port:?} is not a port"))?;
        if let Some(u) = &instance {
            let url = reqwest::Url::parse(u)
                .map_err(|e| format!("--kv-events {s:?}: {u:?} is not a URL ({e})"))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(format!("--kv-events {s:?}: use an http(s) instance URL"));
            }
        }
        let host = match host {
            "*" | "0.0.0.0" | "" => "127.0.0.1",
            "[::]" | "::" => "[::1]",
            h => h,
        };
        Ok(KvSource {
            instance: instance.map(|u| u.trim_end_matches('/').to_string()),
            endpoint: format!("tcp://{host}:{port}"),
        })
    }
}

/// The running listener; dropping it stops it.
pub struct KvListener {
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for KvListener {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl KvListener {
    /// Subscribes to every endpoint of `placement` (instance order).
    pub fn start(placement: Arc<Placement>, endpoints: Vec<String>) -> crate::Result<KvListener> {
        let stop = CancellationToken::new();
        let stop2 = stop.clone();
        let thread = llm_common::util::spawn_runtime_thread("kv-events", move |rt| {
            let Ok(rt) = rt else { return };
            rt.block_on(async move {
                let tasks: Vec<_> = endpoints
                    .into_iter()
                    .enumerate()
                    .map(|(i, ep)| tokio::spawn(listen(i, ep, placement.clone(), stop2.clone())))
                    .collect();
                for t in tasks {
                    let _ = t.await;
                }
            })
        })
        .map_err(|e| crate::Error::io("cannot start the KV events listener thread", e))?;
        Ok(KvListener {
            stop,
            thread: Some(thread),
        })
    }
}

/// One instance's events until `stop`; a socket that fails is connected again.
async fn listen(instance: usize, endpoint: String, p: Arc<Placement>, stop: CancellationToken) {
    loop {
        let mut sub = zeromq::SubSocket::new();
        let ok = tokio::select! {
            _ = stop.cancelled() => return,
            r = sub.connect(&endpoint) => r.is_ok(),
        };
        if ok && sub.subscribe("").await.is_ok() {
            receive(instance, &endpoint, &mut sub, &p, &stop).await;
        }
        if stop.is_cancelled() {
            return;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(RECONNECT) => {}
        }
    }
}

/// The messages of one connected socket, until it fails or `stop`.
async fn receive(
    instance: usize,
    endpoint: &str,
    sub: &mut zeromq::SubSocket,
    p: &Placement,
    stop: &CancellationToken,
) {
    loop {
        let msg = tokio::select! {
            _ = stop.cancelled() => return,
            m = sub.recv() => m,
        };
        let at = Instant::now();
        let Ok(msg) = msg else { return };
        let frames = msg.into_vec();
        // Topic, sequence number, payload; the payload is the last frame.
        let Some(payload) = frames.last().filter(|_| frames.len() >= 2) else {
            p.batch(Some(format!(
                "{endpoint}: a message of {} frame(s), not vLLM's three",
                frames.len()
            )));
            continue;
        };
        match decode_batch(payload) {
            Ok((_, events, _)) => {
                p.batch(None);
                for e in events {
                    if let KvEvent::BlockStored {
                        token_ids,
                        block_hashes,
                        ..
                    } = e
                    {
                        p.stored(instance, at, &token_ids, block_hashes.len());
                    }
                }
            }
            Err(e) => p.batch(Some(format!("{endpoint}: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_read_in_both_forms() {
        assert_eq!(
            KvSource::parse("tcp://*:5557").unwrap(),
            KvSource {
                instance: None,
                endpoint: "tcp://127.0.0.1:5557".into()
            }
        );
        assert_eq!(
            KvSource::parse("http://10.0.0.5:8000/=tcp://10.0.0.5:5557").unwrap(),
            KvSource {
                instance: Some("http://10.0.0.5:8000".into()),
                endpoint: "tcp://10.0.0.5:5557".into()
            }
        );
        for bad in [
            "5557",
            "tcp://h",
            "tcp://h:x",
            "ftp://a=tcp://h:1",
            "nope=tcp://h:1",
        ] {
            assert!(KvSource::parse(bad).is_err(), "{bad}");
        }
    }
}
