//! Shards: `--shard K/N` keeps this process's deterministic share of a trace so N client
//! processes (a Kubernetes Indexed Job, or hosts started over SSH) replay one trace together.
//!
//! - Rows of a session ([`Sessions::key`]: a Bailian chain's root `chat_id`, a row's
//!   `session_id`) stay whole on one shard, chosen by a fixed hash of the key, so a
//!   conversation's prefix-cache behaviour is the same as in a single-process replay.
//! - Rows without a session are dealt round-robin by replay index, so every shard's load has
//!   the trace's shape.
//!
//! Replay indexes stay the indexes of the whole trace, so the shards' records merge into one
//! run (`request-sim report DIR`, see [`crate::record::merge`]).

use crate::trace::model::{Sessions, TraceRequest};

/// Environment variable with the shard index (set by a Kubernetes Indexed Job).
pub const ENV_INDEX: &str = "JOB_COMPLETION_INDEX";
/// Environment variable with the shard count (set in the Job's pod template).
pub const ENV_COUNT: &str = "REQUEST_SIM_SHARD_COUNT";

/// This process is shard `index` (0-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Parse `K/N` (0 <= K < N).
    pub fn parse(spec: &str) -> Result<Shard, String> {
        let bad = || format!("invalid --shard `{spec}`: expected K/N with 0 <= K < N, e.g. 0/4");
        let (k, n) = spec.trim().split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// The shard from [`ENV_INDEX`] and [`ENV_COUNT`] as returned by `get`: `None` when
    /// neither is set; an error when only one is set or either is not a valid number.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Shard>, String> {
        match (get(ENV_INDEX), get(ENV_COUNT)) {
            (None, None) => Ok(None),
            (Some(k), Some(n)) => Shard::parse(&format!("{}/{}", k.trim(), n.trim()))
                .map(Some)
                .map_err(|e| format!("from {ENV_INDEX}={k} and {ENV_COUNT}={n}: {e}")),
            (Some(_), None) => Err(format!("{ENV_INDEX} is set but {ENV_COUNT} is not")),
            (None, Some(_)) => Err(format!("{ENV_COUNT} is set but {ENV_INDEX} is not")),
        }
    }
}

/// The shard (0-based, of `count`) that owns the request at replay `index` whose session key
/// is `session` ([`Sessions::key`]).
pub fn owner(session: Option<&str>, index: usize, count: usize) -> usize {
    let count = count.max(1);
    match session {
        Some(key) => (fnv1a(key.as_bytes()) % count as u64) as usize,
        None => index % count,
    }
}

/// FNV-1a, then the SplitMix64 finaliser to spread it: a fixed hash, so every shard on every
/// machine computes the same owner (std's hasher is randomly keyed per process; hand-written
/// because it is a dozen lines and no dependency is worth it).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    llm_common::util::mix64(h)
}

/// Keep only `shard`'s requests (indexes unchanged, so records merge back into one run).
pub fn select(requests: Vec<TraceRequest>, sessions: &Sessions, shard: Shard) -> Vec<TraceRequest> {
    requests
        .into_iter()
        .filter(|r| owner(sessions.key(r.index), r.index, shard.count) == shard.index)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{SessionStats, SessionTurn};
    use std::collections::HashMap;
    use std::sync::Arc;

    fn req(index: usize) -> TraceRequest {
        TraceRequest {
            model: None,
            reasoning: Default::default(),
            images: None,
            index,
            line: index + 1,
            timestamp_ms: index as f64,
            input_length: 10,
            output_length: 1,
            hash_ids: Default::default(),
            session: None,
        }
    }

    #[test]
    fn parse_and_env() {
        assert_eq!(Shard::parse("2/4").unwrap(), Shard { index: 2, count: 4 });
        for bad in ["4/4", "1/0", "x/2", "1", "-1/2", ""] {
            let e = Shard::parse(bad).unwrap_err();
            assert!(e.contains("K/N"), "{bad}: {e}");
        }
        let env = |k: Option<&str>, n: Option<&str>| {
            let (k, n) = (k.map(String::from), n.map(String::from));
            move |name: &str| match name {
                ENV_INDEX => k.clone(),
                ENV_COUNT => n.clone(),
                _ => None,
            }
        };
        assert_eq!(Shard::from_env(env(None, None)).unwrap(), None);
        assert_eq!(
            Shard::from_env(env(Some("3"), Some("8"))).unwrap(),
            Some(Shard { index: 3, count: 8 })
        );
        assert!(Shard::from_env(env(Some("3"), None))
            .unwrap_err()
            .contains(ENV_COUNT));
        assert!(Shard::from_env(env(Some("9"), Some("8")))
            .unwrap_err()
            .contains(ENV_INDEX));
    }

    #[test]
    fn round_robin_partition_without_sessions() {
        let all: Vec<TraceRequest> = (0..103).map(req).collect();
        let none = Sessions::default();
        let mut seen = vec![0u32; 103];
        for k in 0..4 {
            let part = select(all.clone(), &none, Shard { index: k, count: 4 });
            assert!(part.iter().all(|r| r.index % 4 == k));
            assert!(part.len() == 25 || part.len() == 26, "{}", part.len());
            for r in part {
                seen[r.index] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
    }

    #[test]
    fn sessions_stay_whole() {
        // 47 sessions, interleaved; every 5th request has no session.
        let n = 250;
        let all: Vec<TraceRequest> = (0..n).map(req).collect();
        let turns: Vec<Option<SessionTurn>> = (0..n)
            .map(|i| {
                (i % 5 != 4).then(|| SessionTurn {
                    id: Arc::from(format!("s{}", i % 47)),
                    turn: 1,
                    parent_index: None,
                    trace_gap_ms: None,
                    agent: None,
                })
            })
            .collect();
        let sessions = Sessions {
            turns,
            stats: SessionStats {
                turns: 200,
                ..SessionStats::default()
            },
            cut: Vec::new(),
        };
        let mut owner_of = HashMap::new();
        let (mut total, mut sizes) = (0, Vec::new());
        for k in 0..3 {
            let part = select(all.clone(), &sessions, Shard { index: k, count: 3 });
            sizes.push(part.len());
            total += part.len();
            for r in part {
                match sessions.key(r.index) {
                    Some(key) => assert_eq!(*owner_of.entry(key.to_string()).or_insert(k), k),
                    None => assert_eq!(r.index % 3, k),
                }
            }
        }
        assert_eq!(total, n);
        assert_eq!(owner_of.len(), 47);
        assert!(sizes.iter().all(|&s| s > 40), "{sizes:?}");
        // Fixed across processes and machines.
        assert_eq!(owner(Some("s1"), 0, 1000), owner(Some("s1"), 999, 1000));
        assert_eq!(fnv1a(b"a"), fnv1a(b"a"));
        assert_ne!(fnv1a(b"a"), fnv1a(b"b"));
    }
}
