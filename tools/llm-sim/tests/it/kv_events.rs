//! KV events: a ZeroMQ subscriber per instance rebuilds each engine's prefix cache from the
//! vLLM-format events alone and must end with exactly the engine's own cached blocks.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::support::*;
use llm_sim::cache::block_hash;
use llm_sim::kv_events::{decode_batch, KvEvent};
use llm_sim::SimConfig;
use zeromq::{Socket, SocketRecv};

/// What a subscriber learned from one instance's events.
#[derive(Default)]
struct Rebuilt {
    cached: HashSet<u64>,
    batches: u64,
    next_seq: Option<u64>,
    stored: u64,
    removed: u64,
    cleared: u64,
}

impl Rebuilt {
    fn apply(&mut self, topic: &[u8], seq: &[u8], payload: &[u8], rank: u64) {
        assert_eq!(topic, b"kv@test");
        let seq = u64::from_be_bytes(seq.try_into().expect("8-byte sequence number"));
        if let Some(want) = self.next_seq {
            assert_eq!(seq, want, "sequence numbers are consecutive");
        }
        self.next_seq = Some(seq + 1);
        self.batches += 1;
        let (ts, events, dp_rank) = decode_batch(payload).expect("batch decodes");
        assert!(ts > 1.6e9, "wall-clock timestamp {ts}");
        assert_eq!(dp_rank, Some(rank));
        for e in events {
            match e {
                KvEvent::BlockStored {
                    block_hashes,
                    parent_block_hash,
                    token_ids,
                    block_size,
                } => {
                    assert_eq!(block_size, 16);
                    assert_eq!(token_ids.len(), block_hashes.len() * 16);
                    // Each hash chains over its parent and its own 16 tokens.
                    let mut parent = parent_block_hash;
                    for (i, h) in block_hashes.iter().enumerate() {
                        let want =
                            block_hash(parent.unwrap_or(0), &token_ids[i * 16..(i + 1) * 16]);
                        assert_eq!(*h, want, "block hash chain");
                        parent = Some(*h);
                        assert!(self.cached.insert(*h), "stored twice without removal");
                        self.stored += 1;
                    }
                }
                KvEvent::BlockRemoved { block_hashes } => {
                    for h in block_hashes {
                        assert!(self.cached.remove(&h), "removed a block never stored");
                        self.removed += 1;
                    }
                }
                KvEvent::AllBlocksCleared => {
                    self.cached.clear();
                    self.cleared += 1;
                }
            }
        }
    }
}

/// Binds two SUB sockets on consecutive loopback ports (instance i publishes on base + i).
async fn bind_pair() -> (zeromq::SubSocket, zeromq::SubSocket, u16) {
    for _ in 0..20 {
        let mut a = zeromq::SubSocket::new();
        let ep = a.bind("tcp://127.0.0.1:0").await.expect("bind");
        let port: u16 = ep.to_string().rsplit(':').next().unwrap().parse().unwrap();
        let mut b = zeromq::SubSocket::new();
        if port < u16::MAX
            && b.bind(&format!("tcp://127.0.0.1:{}", port + 1))
                .await
                .is_ok()
        {
            a.subscribe("").await.unwrap();
            b.subscribe("").await.unwrap();
            return (a, b, port);
        }
    }
    panic!("no two consecutive free ports");
}

#[tokio::test]
async fn subscribers_rebuild_each_instance_cache_from_events() {
    let (mut sub0, mut sub1, port) = bind_pair().await;
    let cfg = SimConfig {
        // 48 blocks of 16: enough for a few requests at once, small enough to evict.
        num_gpu_blocks: 48,
        max_num_seqs: 4,
        kv_events_endpoint: Some(format!("tcp://127.0.0.1:{port}")),
        kv_events_topic: "kv@test".into(),
        ..SimConfig::default()
    };
    let servers = llm_sim::start_cluster(cfg, 2).await.unwrap();

    // Slow joiner: until a subscriber is connected, a PUB socket drops what it sends. Warm up
    // until each instance's events arrive, then reset its cache: everything after the
    // AllBlocksCleared is seen.
    let mut rebuilt = [Rebuilt::default(), Rebuilt::default()];
    let socks: [&mut zeromq::SubSocket; 2] = [&mut sub0, &mut sub1];
    for (i, sub) in socks.into_iter().enumerate() {
        let base = servers[i].base_url();
        let t0 = Instant::now();
        loop {
            assert!(t0.elapsed() < Duration::from_secs(20), "no events from {i}");
            let r = post(
                &base,
                "/v1/completions",
                &completion_body(
                    words(40, t0.elapsed().as_micros() as usize).into(),
                    1,
                    false,
                ),
            )
            .await;
            assert_eq!(r.status(), 200);
            if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(300), sub.recv()).await {
                break;
            }
        }
        let r = client()
            .post(format!("{base}/reset_prefix_cache"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        // Skip to the AllBlocksCleared batch; apply it and everything after.
        loop {
            let m = tokio::time::timeout(Duration::from_secs(10), sub.recv())
                .await
                .expect("the reset's batch arrives")
                .unwrap();
            let (_, events, _) = decode_batch(m.get(2).unwrap()).unwrap();
            if events.contains(&KvEvent::AllBlocksCleared) {
                rebuilt[i].apply(
                    m.get(0).unwrap(),
                    m.get(1).unwrap(),
                    m.get(2).unwrap(),
                    i as u64,
                );
                break;
            }
        }
    }
    let sent_before: Vec<u64> = servers
        .iter()
        .map(|s| s.metrics().kv_event_batches.load(Ordering::Relaxed))
        .collect();

    // Load: conversations that grow (shared prefixes), on both instances, several at once, in
    // a cache small enough that blocks are evicted; one more reset in the middle of instance 1.
    let mut tasks = Vec::new();
    for conv in 0..12usize {
        for (i, s) in servers.iter().enumerate() {
            let base = s.base_url();
            tasks.push(tokio::spawn(async move {
                let mut history = words(60 + conv * 3, conv * 101 + i);
                for turn in 0..4 {
                    history.push_str(&words(20, conv * 7 + turn * 13));
                    let r = post(
                        &base,
                        "/v1/completions",
                        &completion_body(history.clone().into(), 8, false),
                    )
                    .await;
                    assert_eq!(r.status(), 200);
                }
            }));
        }
        if conv == 6 {
            for t in tasks.drain(..) {
                t.await.unwrap();
            }
            let r = client()
                .post(format!("{}/reset_prefix_cache", servers[1].base_url()))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
        }
    }
    for t in tasks {
        t.await.unwrap();
    }

    // Drain every batch each engine published, then compare with the engine's own cache.
    let socks: [&mut zeromq::SubSocket; 2] = [&mut sub0, &mut sub1];
    for (i, sub) in socks.into_iter().enumerate() {
        let sent = servers[i]
            .metrics()
            .kv_event_batches
            .load(Ordering::Relaxed);
        let want = sent - sent_before[i] + 1; // + the reset's batch already applied
        let t0 = Instant::now();
        while rebuilt[i].batches < want {
            assert!(t0.elapsed() < Duration::from_secs(20), "batches missing");
            let m = tokio::time::timeout(Duration::from_secs(10), sub.recv())
                .await
                .expect("a batch arrives")
                .unwrap();
            rebuilt[i].apply(
                m.get(0).unwrap(),
                m.get(1).unwrap(),
                m.get(2).unwrap(),
                i as u64,
            );
        }
        let engine: HashSet<u64> = servers[i].cached_block_hashes().await.into_iter().collect();
        let r = &rebuilt[i];
        assert!(!engine.is_empty());
        assert!(r.removed > 0, "instance {i}: the workload evicted blocks");
        assert_eq!(
            r.cached, engine,
            "instance {i}: rebuilt from {} batches ({} stored, {} removed, {} cleared)",
            r.batches, r.stored, r.removed, r.cleared
        );
    }
    assert_eq!(rebuilt[1].cleared, 2);
    for s in servers {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn events_are_off_by_default_and_bad_endpoints_are_refused() {
    let s = default_server().await;
    let r = post(
        &s.base_url(),
        "/v1/completions",
        &completion_body(words(64, 0).into(), 1, false),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(s.metrics().kv_event_batches.load(Ordering::Relaxed), 0);
    assert_eq!(s.cached_block_hashes().await.len(), 4);
    s.shutdown().await;
    let bad = SimConfig {
        kv_events_endpoint: Some("ipc:///tmp/x".into()),
        ..SimConfig::default()
    };
    let e = llm_sim::start(bad).await.err().unwrap();
    assert!(format!("{e:#}").contains("tcp://"), "{e:#}");
}

/// vLLM's default form, `tcp://*:PORT`, binds on every interface (as `--help` says): a
/// subscriber that connects to 127.0.0.1:PORT receives the events.
#[tokio::test]
async fn star_endpoint_binds_and_a_subscriber_connects() {
    // A port free a moment ago (the server binds it again below).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let cfg = SimConfig {
        kv_events_endpoint: Some(format!("tcp://*:{port}")),
        kv_events_topic: "kv@test".into(),
        ..SimConfig::default()
    };
    let s = llm_sim::start(cfg).await.unwrap();
    let mut sub = zeromq::SubSocket::new();
    sub.connect(&format!("tcp://127.0.0.1:{port}"))
        .await
        .unwrap();
    sub.subscribe("").await.unwrap();
    // Slow joiner: requests until one's events arrive.
    let t0 = Instant::now();
    let mut rebuilt = Rebuilt::default();
    loop {
        assert!(t0.elapsed() < Duration::from_secs(20), "no events arrived");
        let body = completion_body(
            words(40, t0.elapsed().as_micros() as usize).into(),
            1,
            false,
        );
        assert_eq!(
            post(&s.base_url(), "/v1/completions", &body).await.status(),
            200
        );
        if let Ok(Ok(m)) = tokio::time::timeout(Duration::from_millis(300), sub.recv()).await {
            rebuilt.apply(m.get(0).unwrap(), m.get(1).unwrap(), m.get(2).unwrap(), 0);
            break;
        }
    }
    assert!(rebuilt.stored > 0, "the batch stored blocks");
    s.shutdown().await;
}
