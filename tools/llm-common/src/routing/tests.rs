use super::*;

fn route(r: &mut Router, session: Option<&str>, blocks: &[u64], loads: &[u64]) -> usize {
    r.route(
        &RouteRequest {
            session,
            blocks,
            ..Default::default()
        },
        loads,
    )
}

#[test]
fn names_round_trip() {
    for p in Policy::KNOWN {
        assert_eq!(p.name().parse::<Policy>(), Ok(p));
    }
    for p in Policy::SMG {
        assert_eq!(p.smg_name().unwrap().parse::<Policy>(), Ok(p));
    }
    assert_eq!("round_robin".parse::<Policy>(), Ok(Policy::RoundRobin));
    assert_eq!("cache_aware".parse::<Policy>(), Ok(Policy::CacheAware));
    assert!("cache-aware"
        .parse::<Policy>()
        .unwrap_err()
        .contains("prefix-aware"));
}

#[test]
fn round_robin_and_least_loaded() {
    let mut r = Router::new(Policy::RoundRobin, 3, 0);
    let got: Vec<usize> = (0..5).map(|_| route(&mut r, None, &[], &[])).collect();
    assert_eq!(got, vec![0, 1, 2, 0, 1]);
    let mut r = Router::new(Policy::LeastLoaded, 3, 0);
    assert_eq!(route(&mut r, None, &[], &[4, 1, 2]), 1);
    // Equal loads: round-robin order.
    let got: Vec<usize> = (0..3)
        .map(|_| route(&mut r, None, &[], &[0, 0, 0]))
        .collect();
    assert_eq!(got, vec![1, 2, 0]);
}

#[test]
fn sessions_stick_and_spread() {
    let mut r = Router::new(Policy::Session, 4, 0);
    let a = route(&mut r, Some("conversation-a"), &[], &[]);
    for _ in 0..5 {
        assert_eq!(route(&mut r, Some("conversation-a"), &[], &[9, 9, 9, 9]), a);
    }
    let mut used = [false; 4];
    for k in 0..64 {
        used[route(&mut r, Some(&format!("s{k}")), &[], &[])] = true;
    }
    assert!(used.iter().all(|&u| u), "64 sessions over 4 instances");
    // No key: round-robin.
    let x = route(&mut r, None, &[], &[]);
    let y = route(&mut r, None, &[], &[]);
    assert_eq!(y, (x + 1) % 4);
}

#[test]
fn prefix_aware_follows_the_longest_cached_prefix() {
    let mut r = Router::new(Policy::PrefixAware, 2, 100);
    // Cold start: each instance takes a request before prefixes count.
    assert_eq!(route(&mut r, None, &[1, 2, 3], &[0, 0]), 0);
    assert_eq!(route(&mut r, None, &[7, 8], &[0, 0]), 1);
    // Shares 2 leading blocks with what went to 0: goes there although it is busier.
    assert_eq!(route(&mut r, None, &[1, 2, 9], &[5, 0]), 0);
    assert_eq!(route(&mut r, None, &[7, 8, 4], &[0, 9]), 1);
    // No prefix anywhere: the less loaded.
    assert_eq!(route(&mut r, None, &[5], &[3, 1]), 1);
    // One hot prefix: instance 0 takes it up to its bounded share, then 1 does.
    let mut to = [0u32; 2];
    for _ in 0..40 {
        to[route(&mut r, None, &[1, 2, 3], &[0, 0])] += 1;
    }
    assert!(to[0] > to[1] && to[1] > 0, "{to:?}");
    let routed = r.routed.clone();
    let total: u64 = routed.iter().sum();
    let bound = (PREFIX_LOAD_BOUND * total as f64 / 2.0).ceil() as u64 + 1;
    assert!(
        routed.iter().all(|&c| c <= bound),
        "{routed:?} over {bound}"
    );
    // A reset forgets the index and the counts: cold again.
    r.reset();
    assert_eq!(route(&mut r, None, &[1, 2, 3], &[0, 1]), 0);
    assert_eq!(route(&mut r, None, &[1, 2, 3], &[0, 1]), 1);
}

/// The documented share of `prefix-aware` (module doc): between 1 / PREFIX_LOAD_BOUND and
/// PREFIX_LOAD_BOUND times an even share of `total` requests, give or take one.
fn share_bounds(total: u64, n: usize) -> (u64, u64) {
    let share = total as f64 / n as f64;
    let lo = (share / PREFIX_LOAD_BOUND).floor() as u64;
    let hi = (share * PREFIX_LOAD_BOUND).ceil() as u64;
    (lo.saturating_sub(1), hi + 1)
}

/// Issue #30: one request with its own blocks first (a calibration request), then requests
/// that all share a first block (a system prompt): the first instance held nothing the
/// others match, so it got 1 of 201. Every instance stays within its documented share.
#[test]
fn prefix_aware_keeps_every_instance_within_its_share() {
    for n in [2usize, 3, 4, 16] {
        let mut r = Router::new(Policy::PrefixAware, n, 10_000);
        route(&mut r, None, &[900, 901], &[]);
        for k in 0..(100 * n as u64) {
            route(&mut r, None, &[1, 2, 1000 + k], &[]);
        }
        let total: u64 = r.routed.iter().sum();
        let share = total as f64 / n as f64;
        for (i, &c) in r.routed.iter().enumerate() {
            let (lo, hi) = share_bounds(total, n);
            assert!(
                (lo..=hi).contains(&c),
                "{n} instances: instance {i} got {c} of {total} (share {share:.1}, \
                 allowed {lo}..={hi}): {:?}",
                r.routed
            );
        }
    }
}

fn text_req(text: &str) -> RouteRequest<'_> {
    RouteRequest {
        text: Some(text),
        ..Default::default()
    }
}

fn key_req(key: Option<&str>) -> RouteRequest<'_> {
    RouteRequest {
        routing_key: key,
        ..Default::default()
    }
}

/// A first turn of `words` words of its own (a conversation's system prompt and question).
fn turn(tag: &str, words: usize) -> String {
    (0..words)
        .map(|k| format!("{tag}{k}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn cache_aware_sends_a_second_turn_to_the_holder_of_the_first() {
    let mut r = Router::new(Policy::CacheAware, 3, 0);
    let a1 = turn("a", 50);
    let b1 = turn("b", 50);
    // Nothing matched: the least loaded, ties by requests routed, then index.
    assert_eq!(r.route(&text_req(&a1), &[0, 0, 0]), 0);
    assert_eq!(r.route(&text_req(&b1), &[0, 0, 0]), 1);
    assert_eq!(r.route(&text_req(&turn("c", 50)), &[0, 0, 0]), 2);
    // A's second turn repeats the first (the whole first turn is most of it): its holder,
    // although busier (3 in flight at a mean of 1 is under the spill gate).
    let a2 = format!("{a1} {} {}", turn("reply", 20), turn("q", 10));
    assert_eq!(r.route(&text_req(&a2), &[3, 0, 0]), 0);
    let b2 = format!("{b1} {}", turn("more", 30));
    assert_eq!(r.route(&text_req(&b2), &[0, 2, 0]), 1);
    // A third turn of A matches the second turn's insert, deeper still.
    let a3 = format!("{a2} {}", turn("again", 40));
    assert_eq!(r.route(&text_req(&a3), &[1, 0, 0]), 0);
}

#[test]
fn cache_aware_below_the_threshold_goes_to_the_least_loaded() {
    let mut r = Router::new(Policy::CacheAware, 2, 0);
    let first = turn("a", 10);
    assert_eq!(r.route(&text_req(&first), &[0, 0]), 0);
    // Shares the 10-word head, but it is under 30% of this request's chars.
    let long = format!("{first} {}", turn("zz", 100));
    assert_eq!(r.route(&text_req(&long), &[1, 0]), 1);
    // Exactly the threshold does not pin either (smg compares match > threshold).
    let mut r = Router::with_smg(
        Policy::CacheAware,
        2,
        0,
        SmgConfig {
            cache_threshold: 0.5,
            ..SmgConfig::default()
        },
    );
    assert_eq!(r.route(&text_req("abcd"), &[0, 0]), 0);
    assert_eq!(r.route(&text_req("abcdwxyz"), &[1, 0]), 1);
    assert_eq!(r.route(&text_req("abcdwxyQ"), &[1, 2]), 1, "7 of 8 on 1");
    // No text at all: the least loaded.
    assert_eq!(r.route(&text_req(""), &[4, 3]), 1);
}

#[test]
fn cache_aware_spills_past_the_gate() {
    // Margin at a mean of 7: min(64, max(4, 2 sqrt 7 = 5.3)) = 5.3.
    assert!((spill_margin(64, 7.0) - 2.0 * 7f64.sqrt()).abs() < 1e-9);
    assert_eq!(spill_margin(64, 1.0), 4.0);
    assert_eq!(spill_margin(2, 1.0), 2.0);
    assert_eq!(spill_margin(64, 10_000.0), 64.0);
    let mut r = Router::new(Policy::CacheAware, 3, 0);
    let a1 = turn("a", 40);
    assert_eq!(r.route(&text_req(&a1), &[0, 0, 0]), 0);
    let a2 = format!("{a1} {}", turn("x", 5));
    // 12 in flight on 0, mean 4: 12 > 6 and 12 > 4 + 4: the request spills to the least
    // loaded instance the gate lets through.
    assert_eq!(r.route(&text_req(&a2), &[12, 0, 0]), 1);
    // The spill target now holds the conversation: the next turn goes there...
    let a3 = format!("{a2} {}", turn("y", 5));
    assert_eq!(r.route(&text_req(&a3), &[0, 0, 0]), 1);
    // ...unless it is over the gate in turn: 1 at 12, mean 4; 0 and 2 are idle, 2 has
    // taken fewer requests.
    let a4 = format!("{a3} {}", turn("z", 5));
    assert_eq!(r.route(&text_req(&a4), &[0, 12, 0]), 2);
    // Under the gate: 6 at a mean of 2 is over 1.5 x 2 but not over 2 + 4.
    let a5 = format!("{a4} {}", turn("w", 5));
    assert_eq!(r.route(&text_req(&a5), &[0, 0, 6]), 2);
}

#[test]
fn cache_aware_tree_matches_partial_edges_and_evicts_old_leaves() {
    let mut t: ApproxTree<char> = ApproxTree::new(2);
    let chars = |s: &str| s.chars().collect::<Vec<char>>();
    let mut seen = None;
    t.match_and_insert(&chars("hello world"), |m| {
        seen = Some(m);
        0
    });
    assert_eq!(seen.unwrap().matched, 0);
    t.match_and_insert(&chars("help me"), |m| {
        seen = Some(m);
        1
    });
    // "hel" is inside the edge "hello world": a partial match counts, its tenant is 0.
    let m = seen.unwrap();
    assert_eq!((m.matched, m.units, m.tenant), (3, 7, Some(0)));
    t.match_and_insert(&chars("help me now"), |m| {
        seen = Some(m);
        1
    });
    let m = seen.unwrap();
    assert_eq!((m.matched, m.tenant), (7, Some(1)));
    // Sizes: 0 holds "hello world" (11); 1 holds "hel" + "p me" + " now" (11).
    assert_eq!(t.held(), &[11, 11]);
    // Evicting to 15 units drops the least recent leaf first: 0's "lo world" (8 units).
    t.evict(15);
    assert_eq!(t.held(), &[3, 11]);
    t.match_and_insert(&chars("hello"), |m| {
        seen = Some(m);
        0
    });
    assert_eq!(seen.unwrap().matched, 3);
    // Non-ASCII text counts chars, not bytes.
    let mut t: ApproxTree<char> = ApproxTree::new(1);
    t.match_and_insert(&chars("héllo"), |_| 0);
    t.match_and_insert(&chars("hèllo"), |m| {
        seen = Some(m);
        0
    });
    assert_eq!((seen.unwrap().matched, seen.unwrap().units), (1, 5));
}

#[test]
fn cache_aware_evicts_on_its_interval() {
    let smg = SmgConfig {
        max_tree_size: 100,
        eviction_interval_secs: 60,
        ..SmgConfig::default()
    };
    let mut r = Router::with_smg(Policy::CacheAware, 2, 0, smg);
    let old = turn("old", 30);
    let mut req = text_req(&old);
    assert_eq!(r.route(&req, &[0, 0]), 0);
    let other = turn("new", 30);
    req.text = Some(&other);
    req.at_secs = 10.0;
    assert_eq!(r.route(&req, &[0, 0]), 1);
    assert!(r.text_tree.held().iter().sum::<usize>() > 100);
    // At 61 s the tree is brought under 100 chars (the old conversation goes first); the
    // old conversation's second turn then finds nothing and goes to the least loaded.
    let again = format!("{old} more");
    req.text = Some(&again);
    req.at_secs = 61.0;
    assert_eq!(r.route(&req, &[0, 1]), 0);
    assert_eq!(r.next_eviction, 120.0);
}

#[test]
fn cache_aware_offline_matches_blocks() {
    let mut r = Router::new(Policy::CacheAware, 2, 0);
    let req = |b: &'static [u64]| RouteRequest {
        blocks: b,
        ..Default::default()
    };
    assert_eq!(r.route(&req(&[1, 2, 3]), &[]), 0);
    assert_eq!(r.route(&req(&[7, 8]), &[]), 1);
    assert_eq!(r.route(&req(&[1, 2, 3, 4]), &[]), 0);
    assert_eq!(r.route(&req(&[7, 8, 9]), &[]), 1);
}

#[test]
fn prefix_hash_keeps_a_1024_char_head_on_one_instance_and_walks_when_overloaded() {
    let mut r = Router::new(Policy::PrefixHash, 4, 0);
    let head: String = "s".repeat(1024);
    let first = r.route(&text_req(&format!("{head} question one")), &[0; 4]);
    for k in 0..20 {
        let text = format!("{head} another tail {k}");
        assert_eq!(r.route(&text_req(&text), &[0, 1, 2, 3]), first);
    }
    // Under 1024 chars the whole text is the key: different texts spread.
    let mut used = [false; 4];
    for k in 0..64 {
        used[r.route(&text_req(&format!("short {k}")), &[0; 4])] = true;
    }
    assert!(used.iter().all(|&u| u), "{used:?}");
    // The hashed instance at 20 in flight, the others at 2: mean (26 + 1) / 4 = 6.75, and
    // 20 > 6.75 x 1.25 and > 6.75 + 10: the least loaded instance takes it.
    let text = format!("{head} overloaded");
    let mut loads = [2u64, 3, 2, 1];
    loads[first] = 20;
    let least = (0..4)
        .filter(|&i| i != first)
        .min_by_key(|&i| loads[i])
        .unwrap();
    assert_eq!(r.route(&text_req(&text), &loads), least);
    // 12 is over 1.25 x the mean but within 10 of it: it stays.
    let mut loads = [2u64; 4];
    loads[first] = 12;
    assert_eq!(r.route(&text_req(&text), &loads), first);
}

#[test]
fn consistent_hashing_keeps_a_key_on_one_instance() {
    for n in [2usize, 3, 5, 8] {
        let mut r = Router::new(Policy::ConsistentHashing, n, 0);
        let mut used = vec![0u32; n];
        for k in 0..(40 * n) {
            let key = format!("conversation-{k}");
            let i = r.route(&key_req(Some(&key)), &[]);
            used[i] += 1;
            let busy: Vec<u64> = (0..n as u64).map(|x| x * 7).collect();
            for _ in 0..3 {
                assert_eq!(r.route(&key_req(Some(&key)), &busy), i);
            }
        }
        assert!(used.iter().all(|&u| u > 0), "{n}: {used:?}");
        // The ring is fixed: a new router sends a key to the same instance.
        let mut again = Router::new(Policy::ConsistentHashing, n, 0);
        let mut r = Router::new(Policy::ConsistentHashing, n, 0);
        assert_eq!(
            again.route(&key_req(Some("conversation-3")), &[]),
            r.route(&key_req(Some("conversation-3")), &[])
        );
        // Without a key: random, so every instance gets some.
        let mut used = vec![0u32; n];
        for _ in 0..(40 * n) {
            used[r.route(&key_req(None), &[])] += 1;
        }
        assert!(used.iter().all(|&u| u > 0), "{n}: {used:?}");
    }
}

#[test]
fn power_of_two_picks_the_less_loaded_of_two() {
    let mut r = Router::new(Policy::PowerOfTwo, 2, 0);
    for _ in 0..50 {
        assert_eq!(r.route(&RouteRequest::default(), &[5, 1]), 1);
    }
    let mut r = Router::new(Policy::PowerOfTwo, 3, 0);
    let mut to = [0u32; 3];
    for _ in 0..600 {
        to[r.route(&RouteRequest::default(), &[0, 5, 9])] += 1;
    }
    // The busiest never wins a pair; the idlest wins every pair it is in (2 of 3).
    assert_eq!(to[2], 0, "{to:?}");
    assert!((350..=450).contains(&to[0]), "{to:?}");
    let mut r = Router::new(Policy::PowerOfTwo, 1, 0);
    assert_eq!(r.route(&RouteRequest::default(), &[3]), 0);
}

#[test]
fn random_and_round_robin_spread() {
    let mut r = Router::new(Policy::Random, 4, 0);
    let mut to = [0u32; 4];
    for _ in 0..4000 {
        to[r.route(&RouteRequest::default(), &[])] += 1;
    }
    assert!(to.iter().all(|&c| (850..=1150).contains(&c)), "{to:?}");
    let mut r = Router::new("round_robin".parse().unwrap(), 3, 0);
    let got: Vec<usize> = (0..4)
        .map(|_| r.route(&RouteRequest::default(), &[]))
        .collect();
    assert_eq!(got, vec![0, 1, 2, 0]);
}

#[test]
fn index_is_an_lru_with_prefixes_outliving_tails() {
    let mut ix = PrefixIndex::new(2, 3);
    ix.record(0, &[1, 2, 3], &[16, 16, 8]);
    assert_eq!(ix.matched(0, &[1, 2, 3, 4]), 3);
    assert_eq!(ix.matched(1, &[1]), 0);
    assert_eq!(ix.stored(0, 3), Some(8));
    // One more block evicts the least recent: the tail 3.
    ix.record(0, &[9], &[16]);
    assert_eq!(ix.matched(0, &[1, 2, 3]), 2);
    ix.record(0, &[1, 2], &[4, 20]);
    assert_eq!(ix.stored(0, 2), Some(20));
    assert_eq!(ix.stored(0, 1), Some(16));
    let empty = PrefixIndex::new(1, 0);
    assert_eq!(empty.matched(0, &[1]), 0);
}
