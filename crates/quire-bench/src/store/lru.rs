//! The exact-LRU reference: a byte-capped least-recently-used cache simulated over the
//! same op streams the engines run, so an engine's hit ratio can be read against what
//! plain LRU with the same capacity would have achieved.

use std::collections::HashMap;

use super::content::SizeModel;
use super::workload::{OpKind, Streams};

const NIL: usize = usize::MAX;

#[derive(Debug, Clone)]
struct Node {
    key: u64,
    bytes: u64,
    prev: usize,
    next: usize,
}

/// A cache policy the op streams can be replayed through: the exact LRU here, and the
/// yardsticks beside it ([`super::s3fifo`]).
pub(crate) trait Policy {
    /// Reads `key`; whether it was held.
    fn get(&mut self, key: u64) -> bool;
    /// Inserts or replaces `key` with `bytes`, evicting as the policy says.
    fn insert(&mut self, key: u64, bytes: u64);
    /// Removes `key`; whether it was held.
    fn remove(&mut self, key: u64) -> bool;
}

/// A byte-capped exact LRU over `u64` keys: the most recently used at the head, the
/// eviction victim at the tail.
#[derive(Debug, Clone)]
pub(crate) struct Lru {
    cap: u64,
    used: u64,
    map: HashMap<u64, usize>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
}

impl Lru {
    pub(crate) fn new(cap_bytes: u64) -> Self {
        Lru {
            cap: cap_bytes,
            used: 0,
            map: HashMap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    /// Bytes held.
    #[cfg(test)]
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether `key` is held.
    #[cfg(test)]
    pub(crate) fn contains(&self, key: u64) -> bool {
        self.map.contains_key(&key)
    }

    /// Keys from most to least recently used.
    #[cfg(test)]
    pub(crate) fn keys_mru(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.len());
        let mut i = self.head;
        while i != NIL {
            out.push(self.nodes[i].key);
            i = self.nodes[i].next;
        }
        out
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.nodes[i].prev, self.nodes[i].next);
        match prev {
            NIL => self.head = next,
            p => self.nodes[p].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n].prev = prev,
        }
    }

    fn push_front(&mut self, i: usize) {
        self.nodes[i].prev = NIL;
        self.nodes[i].next = self.head;
        if self.head != NIL {
            self.nodes[self.head].prev = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// A lookup: true on a hit, which makes `key` the most recently used.
    pub(crate) fn get(&mut self, key: u64) -> bool {
        match self.map.get(&key) {
            Some(&i) => {
                if self.head != i {
                    self.unlink(i);
                    self.push_front(i);
                }
                true
            }
            None => false,
        }
    }

    /// Inserts or replaces `key` as the most recently used, then evicts from the tail
    /// until the bytes fit; returns the evicted keys. An object larger than the whole
    /// cap is not held (and any older value of it is dropped).
    pub(crate) fn insert(&mut self, key: u64, bytes: u64) -> Vec<u64> {
        let mut evicted = Vec::new();
        self.remove(key);
        if bytes > self.cap {
            return evicted;
        }
        let node = Node {
            key,
            bytes,
            prev: NIL,
            next: NIL,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.map.insert(key, i);
        self.push_front(i);
        self.used += bytes;
        while self.used > self.cap {
            let victim = self.tail;
            let vkey = self.nodes[victim].key;
            self.remove(vkey);
            evicted.push(vkey);
        }
        evicted
    }

    /// Removes `key`; true if it was held.
    pub(crate) fn remove(&mut self, key: u64) -> bool {
        match self.map.remove(&key) {
            Some(i) => {
                self.unlink(i);
                self.used -= self.nodes[i].bytes;
                self.free.push(i);
                true
            }
            None => false,
        }
    }
}

impl Policy for Lru {
    fn get(&mut self, key: u64) -> bool {
        Lru::get(self, key)
    }

    fn insert(&mut self, key: u64, bytes: u64) {
        Lru::insert(self, key, bytes);
    }

    fn remove(&mut self, key: u64) -> bool {
        Lru::remove(self, key)
    }
}

/// Hits and gets the LRU model saw over the measured part of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LruOutcome {
    pub gets: u64,
    pub hits: u64,
}

impl LruOutcome {
    pub(crate) fn hit_ratio(&self) -> f64 {
        if self.gets == 0 {
            0.0
        } else {
            self.hits as f64 / self.gets as f64
        }
    }
}

/// Replays `streams` through an exact LRU of `cap_bytes`, the threads' streams
/// interleaved round-robin (warm-up parts first, uncounted; then the measured parts),
/// with the engines' cache-aside semantics: a get that misses inserts the object, a put
/// inserts or replaces, a delete removes.
pub(crate) fn simulate(cap_bytes: u64, streams: &Streams, sizes: &SizeModel) -> LruOutcome {
    replay(&mut Lru::new(cap_bytes), streams, sizes)
}

/// Replays `streams` through `policy` as [`simulate`] does the LRU.
pub(crate) fn replay(policy: &mut dyn Policy, streams: &Streams, sizes: &SizeModel) -> LruOutcome {
    let mut out = LruOutcome::default();
    for (phase, counted) in [(&streams.warmup, false), (&streams.measured, true)] {
        let longest = phase.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            for thread in phase {
                let Some(op) = thread.get(i) else { continue };
                match op.kind {
                    OpKind::Get => {
                        let hit = policy.get(op.id);
                        if counted {
                            out.gets += 1;
                            out.hits += u64::from(hit);
                        }
                        if !hit {
                            policy.insert(op.id, sizes.object_bytes(op.id));
                        }
                    }
                    OpKind::Put => policy.insert(op.id, sizes.object_bytes(op.id)),
                    OpKind::Delete => {
                        policy.remove(op.id);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::content::{KEY_LEN, META_LEN};
    use crate::store::workload::Op;

    #[test]
    fn hand_worked_sequence() {
        let mut lru = Lru::new(10);
        lru.insert(1, 4); // [1]
        lru.insert(2, 4); // [2 1]
        assert!(lru.get(1)); // [1 2]
        assert_eq!(lru.insert(3, 4), vec![2]); // [3 1 2] = 12 > 10: evict 2 -> [3 1]
        assert_eq!(lru.keys_mru(), vec![3, 1]);
        assert!(!lru.get(2));
        assert!(lru.get(1)); // [1 3]
        assert!(lru.get(3)); // [3 1]
        lru.insert(4, 6); // [4 3 1] = 14: evict 1 -> [4 3] = 10
        assert_eq!(lru.keys_mru(), vec![4, 3]);
        assert_eq!(lru.used(), 10);
        assert!(!lru.get(1));
        lru.insert(3, 2); // replace: [3 4] = 8
        assert_eq!(lru.keys_mru(), vec![3, 4]);
        assert_eq!(lru.used(), 8);
        assert!(lru.remove(4));
        assert!(!lru.remove(4));
        assert_eq!(lru.keys_mru(), vec![3]);
        lru.insert(5, 11); // larger than the cap: not held
        assert!(!lru.contains(5));
        assert_eq!(lru.used(), 2);
        lru.insert(6, 8); // exactly fills: [6 3]
        assert_eq!(lru.keys_mru(), vec![6, 3]);
        lru.insert(7, 1); // 11: evict 3 -> [7 6]
        assert_eq!(lru.keys_mru(), vec![7, 6]);
        assert_eq!(lru.len(), 2);
    }

    #[test]
    fn simulate_interleaves_and_counts_only_measured_gets() {
        let per = (KEY_LEN + META_LEN + 100) as u64;
        let sizes = SizeModel::Fixed(100);
        let g = |id| Op {
            kind: OpKind::Get,
            id,
        };
        let p = |id| Op {
            kind: OpKind::Put,
            id,
        };
        let d = |id| Op {
            kind: OpKind::Delete,
            id,
        };
        // Room for two objects. Warm-up: thread 0 gets 1 (miss, insert), thread 1 puts 2.
        // Measured, round-robin: t0 get 1 (hit), t1 get 3 (miss: evicts 2),
        // t0 get 2 (miss: evicts 1), t1 delete 3, t0 get 2 (hit).
        let streams = Streams {
            warmup: vec![vec![g(1)], vec![p(2)]],
            measured: vec![vec![g(1), g(2), g(2)], vec![g(3), d(3)]],
        };
        let out = simulate(2 * per, &streams, &sizes);
        assert_eq!(out, LruOutcome { gets: 4, hits: 2 });
        assert!((out.hit_ratio() - 0.5).abs() < 1e-12);
    }
}
