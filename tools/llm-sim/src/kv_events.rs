//! vLLM-format KV cache events over ZeroMQ, for KV-aware routers (llm-d precise prefix routing,
//! Dynamo's KV router).
//!
//! Wire format, as vLLM's `vllm/distributed/kv_events.py` (`ZmqEventPublisher`, msgspec structs
//! with `array_like=True`, events tagged by class name): a PUB socket sends three frames per
//! engine step that changed the cache: the topic, an 8-byte big-endian sequence number (from 0,
//! per engine), and a msgpack array `[timestamp, [events...], data_parallel_rank]`, where each
//! event is a map tagged by `type` (msgspec `tag=True`; vLLM 0.32 as recorded in
//! request-sim/tests/data/vllm-0.32/kv_events_*.hex), one of
//! - `{type: "BlockStored", block_hashes, parent_block_hash|nil, token_ids, block_size,
//!   lora_id: nil, medium: "GPU", lora_name: nil, extra_keys: [nil per block], group_idx: 0,
//!   kv_cache_spec_kind: "full_attention"}`,
//! - `{type: "BlockRemoved", block_hashes, medium: "GPU", group_idx: 0}`,
//! - `{type: "AllBlocksCleared"}`.
//!
//! Older vLLM sent each event as a positional array (`["BlockStored", block_hashes, ...]`);
//! [`decode_batch`] reads both.
//!
//! As vLLM, an endpoint with `*` or `::` is bound, any other is connected to (the subscriber
//! binds), and engine `i` of a cluster publishes on the endpoint's port + `i` with
//! `data_parallel_rank = i`. `tcp://*:PORT` (vLLM's default form) binds every interface.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::mpsc;
use zeromq::{Socket, SocketSend, ZmqMessage};

use crate::error::{Error, Result};
use crate::metrics::Metrics;

pub use llm_common::kv_events::{decode_batch, encode_batch, KvEvent, MEDIUM_GPU};

/// vLLM's `offset_endpoint_port`: the endpoint of data-parallel rank `rank` (port + rank).
pub fn offset_endpoint_port(endpoint: &str, rank: usize) -> Result<String> {
    if rank == 0 {
        return Ok(endpoint.to_string());
    }
    let (base, port) = endpoint
        .rsplit_once(':')
        .ok_or_else(|| Error::KvEvents(format!("`{endpoint}` has no port")))?;
    let port: usize = port
        .parse()
        .map_err(|e| Error::KvEvents(format!("`{endpoint}`: bad port ({e})")))?;
    if port + rank > usize::from(u16::MAX) {
        return Err(Error::KvEvents(format!(
            "`{endpoint}` + rank {rank} is past port 65535"
        )));
    }
    Ok(format!("{base}:{}", port + rank))
}

/// The address a bound endpoint listens on: ZeroMQ's `*` host (every interface, as in vLLM's
/// default `tcp://*:5557`) becomes `0.0.0.0`, which the zeromq crate binds (it looks `*` up as
/// a host name and fails); any other endpoint is kept.
pub fn bind_address(endpoint: &str) -> String {
    match endpoint.strip_prefix("tcp://*:") {
        Some(port) => format!("tcp://0.0.0.0:{port}"),
        None => endpoint.to_string(),
    }
}

/// A batch handed from the engine to the publisher task.
pub struct Batch {
    pub ts: f64,
    pub events: Vec<KvEvent>,
}

/// Opens the PUB socket of engine `rank` (bound or connected as vLLM decides) and starts the
/// task that publishes the engine's batches in order; it ends when the engine drops its sender.
pub async fn start_publisher(
    endpoint: &str,
    topic: &str,
    rank: usize,
    metrics: Arc<Metrics>,
) -> Result<mpsc::UnboundedSender<Batch>> {
    let ep = offset_endpoint_port(endpoint, rank)?;
    if !ep.starts_with("tcp://") {
        return Err(Error::KvEvents(format!(
            "`{ep}`: only tcp:// endpoints are supported"
        )));
    }
    let mut socket = zeromq::PubSocket::new();
    if ep.contains('*') || ep.contains("::") {
        socket
            .bind(&bind_address(&ep))
            .await
            .map_err(|e| Error::KvEvents(format!("`{ep}`: cannot bind: {e}")))?;
    } else {
        socket
            .connect(&ep)
            .await
            .map_err(|e| Error::KvEvents(format!("`{ep}`: cannot connect: {e}")))?;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Batch>();
    let topic = bytes::Bytes::copy_from_slice(topic.as_bytes());
    tokio::spawn(async move {
        let mut seq: u64 = 0;
        while let Some(b) = rx.recv().await {
            let mut msg = ZmqMessage::from(topic.clone());
            msg.push_back(bytes::Bytes::copy_from_slice(&seq.to_be_bytes()));
            msg.push_back(encode_batch(b.ts, &b.events, rank).into());
            // A PUB socket drops what no subscriber takes; an error here (a peer gone) loses
            // this batch only, as with vLLM's publisher.
            let _ = socket.send(msg).await;
            seq += 1;
            metrics.kv_event_batches.fetch_add(1, Ordering::Relaxed);
        }
        let _ = socket.close().await;
    });
    Ok(tx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_offset_by_rank() {
        assert_eq!(
            offset_endpoint_port("tcp://127.0.0.1:5557", 0).unwrap(),
            "tcp://127.0.0.1:5557"
        );
        assert_eq!(
            offset_endpoint_port("tcp://127.0.0.1:5557", 3).unwrap(),
            "tcp://127.0.0.1:5560"
        );
        assert!(offset_endpoint_port("tcp://127.0.0.1:65535", 1).is_err());
        assert!(offset_endpoint_port("tcp://127.0.0.1", 1).is_err());
        assert_eq!(
            offset_endpoint_port("tcp://*:5557", 2).unwrap(),
            "tcp://*:5559"
        );
    }

    #[test]
    fn star_binds_every_interface() {
        assert_eq!(bind_address("tcp://*:5557"), "tcp://0.0.0.0:5557");
        assert_eq!(bind_address("tcp://[::]:5557"), "tcp://[::]:5557");
        assert_eq!(bind_address("tcp://127.0.0.1:5557"), "tcp://127.0.0.1:5557");
    }
}
