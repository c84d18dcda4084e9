//! vLLM's KV cache events on the wire (the msgpack payload of its ZeroMQ publisher), shared by
//! llm-sim, which publishes them, and request-sim, which reads real vLLM's to tell which
//! instance served a request.
//!
//! As vLLM's `vllm/distributed/kv_events.py` (`ZmqEventPublisher`, msgspec structs with
//! `array_like=True`, events tagged by class name): each message is three frames, the topic, an
//! 8-byte big-endian sequence number and a msgpack array `[timestamp, [events...],
//! data_parallel_rank]`, where vLLM 0.32 sends each event as a map tagged by `type`
//! (request-sim/tests/data/vllm-0.32/kv_events_*.hex) and older vLLM as a positional array.

use rmpv::Value;

/// The storage medium vLLM reports for GPU blocks.
pub const MEDIUM_GPU: &str = "GPU";

/// One change to an engine's prefix cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvEvent {
    /// Full blocks newly cached, in chain order: `parent` is the hash of the block before the
    /// first (`None` at the start of a sequence), `token_ids` the blocks' tokens.
    BlockStored {
        block_hashes: Vec<u64>,
        parent_block_hash: Option<u64>,
        token_ids: Vec<u32>,
        block_size: u32,
    },
    /// Cached blocks evicted.
    BlockRemoved { block_hashes: Vec<u64> },
    /// The whole prefix cache was emptied (`/reset_prefix_cache`).
    AllBlocksCleared,
}

impl KvEvent {
    pub fn to_value(&self) -> Value {
        let hashes = |h: &[u64]| Value::Array(h.iter().map(|&x| Value::from(x)).collect());
        let map = |fields: Vec<(&str, Value)>| {
            Value::Map(
                fields
                    .into_iter()
                    .map(|(k, v)| (Value::from(k), v))
                    .collect(),
            )
        };
        match self {
            KvEvent::BlockStored {
                block_hashes,
                parent_block_hash,
                token_ids,
                block_size,
            } => map(vec![
                ("type", Value::from("BlockStored")),
                ("block_hashes", hashes(block_hashes)),
                (
                    "parent_block_hash",
                    parent_block_hash.map_or(Value::Nil, Value::from),
                ),
                (
                    "token_ids",
                    Value::Array(token_ids.iter().map(|&t| Value::from(t)).collect()),
                ),
                ("block_size", Value::from(*block_size)),
                ("lora_id", Value::Nil),
                ("medium", Value::from(MEDIUM_GPU)),
                ("lora_name", Value::Nil),
                (
                    "extra_keys",
                    Value::Array(vec![Value::Nil; block_hashes.len()]),
                ),
                ("group_idx", Value::from(0)),
                ("kv_cache_spec_kind", Value::from("full_attention")),
            ]),
            KvEvent::BlockRemoved { block_hashes } => map(vec![
                ("type", Value::from("BlockRemoved")),
                ("block_hashes", hashes(block_hashes)),
                ("medium", Value::from(MEDIUM_GPU)),
                ("group_idx", Value::from(0)),
            ]),
            KvEvent::AllBlocksCleared => map(vec![("type", Value::from("AllBlocksCleared"))]),
        }
    }

    /// Reads one event back from its msgpack value (what a subscriber does): vLLM 0.32's map
    /// tagged by `type`, or the positional array of older vLLM (`[tag, fields...]`).
    pub fn from_value(v: &Value) -> Result<KvEvent, String> {
        if !matches!(v, Value::Map(_) | Value::Array(_)) {
            return Err("an event must be a map or an array".into());
        }
        let field = |k: &str, i: usize| event_field(v, k, i);
        let tag = field("type", 0)
            .and_then(Value::as_str)
            .ok_or("missing event tag")?;
        let u64s = |k: &str, i: usize| -> Result<Vec<u64>, String> {
            field(k, i)
                .and_then(Value::as_array)
                .ok_or(format!("{tag}: `{k}` must be an array"))?
                .iter()
                .map(|x| x.as_u64().ok_or(format!("{tag}: non-integer in `{k}`")))
                .collect()
        };
        match tag {
            "BlockStored" => Ok(KvEvent::BlockStored {
                block_hashes: u64s("block_hashes", 1)?,
                parent_block_hash: field("parent_block_hash", 2).and_then(Value::as_u64),
                token_ids: u64s("token_ids", 3)?
                    .into_iter()
                    .map(|t| t as u32)
                    .collect(),
                block_size: field("block_size", 4)
                    .and_then(Value::as_u64)
                    .ok_or("block_size")? as u32,
            }),
            "BlockRemoved" => Ok(KvEvent::BlockRemoved {
                block_hashes: u64s("block_hashes", 1)?,
            }),
            "AllBlocksCleared" => Ok(KvEvent::AllBlocksCleared),
            other => Err(format!("unknown event `{other}`")),
        }
    }
}

/// Field `key` of a map-form event, or field `index` of an array-form one.
fn event_field<'a>(v: &'a Value, key: &str, index: usize) -> Option<&'a Value> {
    match v {
        Value::Map(m) => m
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v),
        Value::Array(a) => a.get(index),
        _ => None,
    }
}

/// The msgpack payload of one batch: `[ts, [events...], data_parallel_rank]`.
pub fn encode_batch(ts: f64, events: &[KvEvent], rank: usize) -> Vec<u8> {
    let v = Value::Array(vec![
        Value::from(ts),
        Value::Array(events.iter().map(KvEvent::to_value).collect()),
        Value::from(rank as u64),
    ]);
    let mut out = Vec::with_capacity(64 + events.len() * 64);
    // Writing into a Vec cannot fail.
    let _ = rmpv::encode::write_value(&mut out, &v);
    out
}

/// Decodes a batch payload into (timestamp, events, data_parallel_rank).
pub fn decode_batch(mut payload: &[u8]) -> Result<(f64, Vec<KvEvent>, Option<u64>), String> {
    let v = rmpv::decode::read_value(&mut payload).map_err(|e| e.to_string())?;
    let a = v.as_array().ok_or("a batch must be an array")?;
    let ts = a.first().and_then(Value::as_f64).ok_or("missing ts")?;
    let events = a
        .get(1)
        .and_then(Value::as_array)
        .ok_or("missing events")?
        .iter()
        .map(KvEvent::from_value)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((ts, events, a.get(2).and_then(Value::as_u64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_in_vllm_layout() {
        let events = vec![
            KvEvent::BlockStored {
                block_hashes: vec![1, u64::MAX],
                parent_block_hash: None,
                token_ids: (0..32).collect(),
                block_size: 16,
            },
            KvEvent::BlockRemoved {
                block_hashes: vec![7],
            },
            KvEvent::AllBlocksCleared,
        ];
        let bytes = encode_batch(12.5, &events, 3);
        let v = rmpv::decode::read_value(&mut &bytes[..]).unwrap();
        let a = v.as_array().unwrap();
        assert_eq!(a.len(), 3);
        let stored = &a[1].as_array().unwrap()[0];
        assert_eq!(stored.as_map().unwrap().len(), 11);
        let get = |k| event_field(stored, k, 0).unwrap();
        assert_eq!(get("type").as_str(), Some("BlockStored"));
        assert!(get("parent_block_hash").is_nil());
        assert_eq!(get("medium").as_str(), Some("GPU"));
        assert_eq!(get("extra_keys").as_array().unwrap().len(), 2);
        assert_eq!(decode_batch(&bytes).unwrap(), (12.5, events, Some(3)));
    }

    #[test]
    fn older_array_form_still_decodes() {
        let v = Value::Array(vec![
            Value::from(1.5),
            Value::Array(vec![
                Value::Array(vec![
                    Value::from("BlockStored"),
                    Value::Array(vec![Value::from(9u64)]),
                    Value::from(4u64),
                    Value::Array((0..2u32).map(Value::from).collect()),
                    Value::from(2u32),
                    Value::Nil,
                    Value::from("GPU"),
                    Value::Nil,
                ]),
                Value::Array(vec![Value::from("AllBlocksCleared")]),
            ]),
        ]);
        let mut bytes = Vec::new();
        rmpv::encode::write_value(&mut bytes, &v).unwrap();
        let want = vec![
            KvEvent::BlockStored {
                block_hashes: vec![9],
                parent_block_hash: Some(4),
                token_ids: vec![0, 1],
                block_size: 2,
            },
            KvEvent::AllBlocksCleared,
        ];
        assert_eq!(decode_batch(&bytes).unwrap(), (1.5, want, None));
    }

    #[test]
    fn real_vllm_batches_decode() {
        // vLLM 0.32's own messages (request-sim/tests/data/vllm-0.32/README.md): one a line,
        // topic, sequence and payload in hex.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../request-sim/tests/data/vllm-0.32/kv_events_vllm_binds.hex"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let hex = |s: &str| -> Vec<u8> {
            (0..s.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                .collect()
        };
        let mut stored = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let payload = hex(line.split_whitespace().nth(2).unwrap());
            let (_, events, _) = decode_batch(&payload).unwrap();
            for e in events {
                if let KvEvent::BlockStored {
                    block_hashes,
                    token_ids,
                    block_size,
                    ..
                } = e
                {
                    assert_eq!(token_ids.len(), block_hashes.len() * block_size as usize);
                    stored += block_hashes.len();
                }
            }
        }
        assert!(stored > 0);
    }
}
