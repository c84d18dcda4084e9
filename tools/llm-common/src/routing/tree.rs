//! The structures behind smg's policies in [`super::Router`]: the hash ring of `prefix_hash`
//! and `consistent_hashing`, and the approximate radix tree of `cache_aware` (one tree over
//! characters, or over block hashes offline, each node listing the instances that inserted
//! through it), and the fixed hashes of keys and texts.

use crate::util::mix64;

/// A consistent-hash ring: [`RING_VIRTUAL_NODES`] points per instance, a key going to the
/// first point at or after its hash (smg's `HashRing`, placed by this module's hash rather
/// than smg's blake3 of worker URLs).
pub(super) struct Ring {
    points: Vec<(u64, usize)>,
}

impl Ring {
    pub(super) fn new(instances: usize) -> Ring {
        let mut points: Vec<(u64, usize)> = (0..instances)
            .flat_map(|i| {
                (0..RING_VIRTUAL_NODES).map(move |v| (text_hash(&format!("instance-{i}#{v}")), i))
            })
            .collect();
        points.sort_unstable();
        Ring { points }
    }

    pub(super) fn find(&self, key: u64) -> usize {
        let at = self.points.partition_point(|&(p, _)| p < key);
        self.points
            .get(at)
            .or_else(|| self.points.first())
            .map_or(0, |&(_, i)| i)
    }
}

/// What a match in the approximate tree found.
#[derive(Clone, Copy, Debug)]
pub(super) struct Match {
    /// Units (chars, or blocks) of the request on the deepest path the tree holds.
    pub(super) matched: usize,
    /// Units of the request.
    pub(super) units: usize,
    /// The instance owning the node the match ended on (none: nothing matched).
    pub(super) tenant: Option<usize>,
}

/// A node of [`ApproxTree`]: an edge label, children by first unit, and the instances
/// ("tenants") holding it with the epoch each last touched it.
pub(super) struct Node<T> {
    label: Vec<T>,
    children: Vec<(T, u32)>,
    parent: u32,
    tenants: Vec<(u32, u64)>,
    live: bool,
}

/// smg's approximate radix tree (`kv_index/src/string_tree.rs`): one tree shared by every
/// instance, each node listing the instances a routed request inserted through it. A match
/// walks as deep as any instance's text goes (into an edge's partial match too) and names the
/// node's first tenant; an insert attaches the instance to every node on its path (an
/// ancestor newly attached with epoch 0, the final node with the current epoch, as smg
/// does); eviction drops instances' least recently touched leaves until the tree's size
/// (each instance's units, summed) is at most the bound.
pub(super) struct ApproxTree<T> {
    nodes: Vec<Node<T>>,
    free: Vec<u32>,
    /// Units each instance holds.
    size: Vec<usize>,
    epoch: u64,
}

impl<T: Copy + Ord> ApproxTree<T> {
    pub(super) fn new(instances: usize) -> ApproxTree<T> {
        // The root holds every instance (smg inserts "" for each worker) and is never evicted.
        let root = Node {
            label: Vec::new(),
            children: Vec::new(),
            parent: 0,
            tenants: (0..instances as u32).map(|i| (i, 0)).collect(),
            live: true,
        };
        ApproxTree {
            nodes: vec![root],
            free: Vec::new(),
            size: vec![0; instances],
            epoch: 0,
        }
    }

    pub(super) fn tick(&mut self) -> u64 {
        self.epoch += 1;
        self.epoch
    }

    pub(super) fn child(&self, node: u32, first: T) -> Option<u32> {
        let ch = &self.nodes[node as usize].children;
        ch.binary_search_by(|(k, _)| k.cmp(&first))
            .ok()
            .map(|at| ch[at].1)
    }

    pub(super) fn set_child(&mut self, node: u32, first: T, child: u32) {
        let ch = &mut self.nodes[node as usize].children;
        match ch.binary_search_by(|(k, _)| k.cmp(&first)) {
            Ok(at) => ch[at].1 = child,
            Err(at) => ch.insert(at, (first, child)),
        }
    }

    pub(super) fn alloc(&mut self, node: Node<T>) -> u32 {
        match self.free.pop() {
            Some(at) => {
                self.nodes[at as usize] = node;
                at
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        }
    }

    /// Attaches `tenant` to `node`: with `stamp` when given (the final node), else with 0 if
    /// it was not attached yet (an ancestor).
    pub(super) fn attach(&mut self, node: u32, tenant: u32, stamp: Option<u64>) {
        let len = self.nodes[node as usize].label.len();
        let ts = &mut self.nodes[node as usize].tenants;
        match ts.iter_mut().find(|(t, _)| *t == tenant) {
            Some(e) => {
                if let Some(s) = stamp {
                    e.1 = s;
                }
            }
            None => {
                ts.push((tenant, stamp.unwrap_or(0)));
                self.size[tenant as usize] += len;
            }
        }
    }

    /// Matches `units`, lets `choose` pick the instance from the match, inserts `units` for
    /// it and returns it.
    pub(super) fn match_and_insert(
        &mut self,
        units: &[T],
        choose: impl FnOnce(Match) -> usize,
    ) -> usize {
        let mut node = 0u32;
        let mut at = 0usize;
        let mut path: Vec<u32> = Vec::new();
        let mut ended = 0u32;
        let mut partial = 0usize;
        while let Some(&first) = units.get(at) {
            let Some(c) = self.child(node, first) else {
                break;
            };
            let label = &self.nodes[c as usize].label;
            let shared = label
                .iter()
                .zip(&units[at..])
                .take_while(|(a, b)| a == b)
                .count();
            ended = c;
            if shared == label.len() {
                at += shared;
                path.push(c);
                node = c;
            } else {
                partial = shared;
                break;
            }
        }
        let tenant = self.nodes[ended as usize]
            .tenants
            .first()
            .map(|&(t, _)| t as usize);
        let found = Match {
            matched: at + partial,
            units: units.len(),
            tenant: if at + partial == 0 { None } else { tenant },
        };
        let pick = choose(found).min(self.size.len() - 1);
        let t = pick as u32;
        for &p in &path {
            self.attach(p, t, None);
        }
        let now = self.tick();
        if at == units.len() {
            self.attach(node, t, Some(now));
        } else {
            self.insert_from(node, &units[at..], t, now);
        }
        pick
    }

    /// Inserts `rest` below `node` for `tenant` (splitting an edge where `rest` leaves it).
    pub(super) fn insert_from(&mut self, mut node: u32, mut rest: &[T], tenant: u32, now: u64) {
        while let Some(&first) = rest.first() {
            let Some(c) = self.child(node, first) else {
                let leaf = self.alloc(Node {
                    label: rest.to_vec(),
                    children: Vec::new(),
                    parent: node,
                    tenants: vec![(tenant, now)],
                    live: true,
                });
                self.size[tenant as usize] += rest.len();
                self.set_child(node, first, leaf);
                return;
            };
            let label_len = self.nodes[c as usize].label.len();
            let shared = self.nodes[c as usize]
                .label
                .iter()
                .zip(rest)
                .take_while(|(a, b)| a == b)
                .count();
            let next = if shared < label_len {
                // Split c: its first `shared` units become a new node holding c's tenants.
                let tail = self.nodes[c as usize].label.split_off(shared);
                let head = std::mem::replace(&mut self.nodes[c as usize].label, tail);
                let tail_first = self.nodes[c as usize].label[0];
                let tenants = self.nodes[c as usize].tenants.clone();
                let mid = self.alloc(Node {
                    label: head,
                    children: vec![(tail_first, c)],
                    parent: node,
                    tenants,
                    live: true,
                });
                self.nodes[c as usize].parent = mid;
                self.set_child(node, first, mid);
                mid
            } else {
                c
            };
            rest = &rest[shared..];
            self.attach(next, tenant, rest.is_empty().then_some(now));
            node = next;
        }
    }

    /// Whether `tenant` holds a child of `node`.
    pub(super) fn held_below(&self, node: u32, tenant: u32) -> bool {
        self.nodes[node as usize].children.iter().any(|&(_, c)| {
            self.nodes[c as usize]
                .tenants
                .iter()
                .any(|&(t, _)| t == tenant)
        })
    }

    /// Drops the least recently touched (instance, leaf) pairs until the tree holds at most
    /// `max` units (summed over instances).
    pub(super) fn evict(&mut self, max: usize) {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut total: usize = self.size.iter().sum();
        if total <= max {
            return;
        }
        let mut heap = BinaryHeap::new();
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            if !n.live {
                continue;
            }
            for &(t, stamp) in &n.tenants {
                if !self.held_below(i as u32, t) {
                    heap.push(Reverse((stamp, i as u32, t)));
                }
            }
        }
        while total > max {
            let Some(Reverse((_, i, t))) = heap.pop() else {
                break;
            };
            let node = &self.nodes[i as usize];
            if !node.live || !node.tenants.iter().any(|&(x, _)| x == t) || self.held_below(i, t) {
                continue;
            }
            let len = node.label.len();
            let parent = node.parent;
            self.nodes[i as usize].tenants.retain(|&(x, _)| x != t);
            self.size[t as usize] = self.size[t as usize].saturating_sub(len);
            total = total.saturating_sub(len);
            let node = &self.nodes[i as usize];
            if node.tenants.is_empty() && node.children.is_empty() {
                let first = node.label[0];
                self.nodes[i as usize].live = false;
                self.nodes[i as usize].label = Vec::new();
                let ch = &mut self.nodes[parent as usize].children;
                if let Ok(at) = ch.binary_search_by(|(k, _)| k.cmp(&first)) {
                    ch.remove(at);
                }
                self.free.push(i);
            }
            if parent != 0 && !self.held_below(parent, t) {
                if let Some(&(_, stamp)) = self.nodes[parent as usize]
                    .tenants
                    .iter()
                    .find(|&&(x, _)| x == t)
                {
                    heap.push(Reverse((stamp, parent, t)));
                }
            }
        }
    }

    #[cfg(test)]
    pub(super) fn held(&self) -> &[usize] {
        &self.size
    }
}

/// smg's virtual nodes per instance on its hash ring (`worker/hash_ring.rs`).
pub const RING_VIRTUAL_NODES: usize = 150;

/// A fixed 64-bit hash of a text (FNV-1a over its bytes, then mixed): ring keys and points.
pub fn text_hash(text: &str) -> u64 {
    session_hash(text)
}

/// A fixed 64-bit hash of a session key (FNV-1a, then mixed): the same key goes to the same
/// instance in every run and in request-sim's analysis.
pub fn session_hash(key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix64(h)
}
