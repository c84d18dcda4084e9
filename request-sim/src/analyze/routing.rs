//! The routing what-if of `analyze --instances N --routing POLICY` (see `trace.rs`'s module
//! doc): per-instance LRU prefix caches under each policy of `llm_common::routing`.

use llm_common::routing::{Policy, PrefixIndex, RouteRequest, Router};

use super::analysis::{ratio, RoutingAnalysis, RoutingOptions, RoutingPoint};
use super::chains::Chains;
use super::sessions::SessionFacts;

/// Hits of every request when each goes to the instance `route` picks, each instance an LRU of
/// `capacity_blocks` blocks: (hit tokens, fully hit blocks, requests and input tokens per
/// instance).
pub(super) fn routed_hits(
    chains: &Chains,
    instances: usize,
    capacity_blocks: usize,
    mut route: impl FnMut(usize, &[u64]) -> usize,
) -> (u64, u64, Vec<u64>, Vec<u64>) {
    let mut index = PrefixIndex::new(instances, capacity_blocks);
    let (mut hit_tokens, mut hit_blocks) = (0u64, 0u64);
    let mut per_instance = vec![0u64; instances];
    let mut input_per_instance = vec![0u64; instances];
    let mut blocks: Vec<u64> = Vec::new();
    let mut tokens: Vec<u32> = Vec::new();
    let mut stored: Vec<u32> = Vec::new();
    for r in 0..chains.requests() {
        let (nodes, toks) = chains.request(r);
        blocks.clear();
        blocks.extend(nodes.iter().map(|&x| u64::from(x)));
        tokens.clear();
        tokens.extend(toks);
        // A cached block holds at least one token (as in `Chains::infinite`).
        stored.clear();
        stored.extend(tokens.iter().map(|&t| t.max(1)));
        let i = route(r, &blocks);
        per_instance[i] += 1;
        input_per_instance[i] += u64::from(chains.inputs[r]);
        for (&b, &cur) in blocks.iter().zip(&tokens) {
            let Some(have) = index.stored(i, b) else {
                break;
            };
            hit_tokens += u64::from(have.min(cur));
            if have < cur {
                break;
            }
            hit_blocks += 1;
        }
        index.record(i, &blocks, &stored);
    }
    (hit_tokens, hit_blocks, per_instance, input_per_instance)
}

/// The routing what-if of `opts` (see the module docs).
pub(super) fn routing_analysis(
    chains: &Chains,
    sessions: &SessionFacts,
    opts: &RoutingOptions,
) -> RoutingAnalysis {
    let n = opts.instances.max(1);
    let block = chains.block;
    let capacity_blocks = opts.capacity_tokens / block;
    let cap = usize::try_from(capacity_blocks).unwrap_or(usize::MAX);
    let input_tokens: u64 = chains.inputs.iter().map(|&x| u64::from(x)).sum();
    let blocks = chains.nodes.len() as u64;
    let policies = if opts.policies.is_empty() {
        Policy::ALL.to_vec()
    } else {
        opts.policies.clone()
    };
    let points = policies
        .iter()
        .map(|&policy| {
            let mut router = Router::new(policy, n, cap);
            let (hit_tokens, hit_blocks, per, input) = routed_hits(chains, n, cap, |r, b| {
                let session = sessions.key(r);
                router.route(
                    &RouteRequest {
                        session,
                        blocks: b,
                        ..Default::default()
                    },
                    &[],
                )
            });
            RoutingPoint {
                policy: policy.name().to_owned(),
                hit_tokens,
                hit_ratio: ratio(hit_tokens, input_tokens),
                block_hit_ratio: ratio(hit_blocks, blocks),
                requests_per_instance: per,
                input_tokens_per_instance: input,
            }
        })
        .collect();
    let (single, _, _, _) = routed_hits(chains, 1, cap.saturating_mul(n), |_, _| 0);
    RoutingAnalysis {
        instances: n,
        capacity_tokens: opts.capacity_tokens,
        capacity_blocks,
        policies: points,
        single_cache_hit_ratio: ratio(single, input_tokens),
    }
}
