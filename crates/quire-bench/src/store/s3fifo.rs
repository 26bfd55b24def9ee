//! The S3-FIFO yardstick: a byte-capped S3-FIFO cache (Yang et al., "FIFO queues are
//! all you need for cache eviction", SOSP 2023) simulated over the same op streams the
//! engines run, beside the exact LRU ([`super::lru`]), so quire's hit ratio is read
//! against the policy the field measures itself by, at equal bytes.
//!
//! As the paper describes it, sized in bytes:
//! - a small FIFO of 10 % of the capacity takes new objects; one reaching its tail
//!   having been read at least once moves to the main FIFO, else it is evicted and its
//!   key remembered in the ghost FIFO;
//! - an object whose key is in the ghost goes straight to the main FIFO;
//! - the main FIFO (90 %) evicts like a 2-bit CLOCK: an object at its tail with a read
//!   count above zero is reinserted with the count less one, else evicted;
//! - the ghost remembers keys (no data) worth up to 90 % of the capacity in bytes.
//!
//! Queues hold `(key, generation)`: a deleted or replaced object leaves its old queue
//! slot behind, skipped when it reaches the tail (lazy deletion keeps every step O(1)).

use std::collections::{HashMap, VecDeque};

use super::lru::Policy;

/// The small FIFO's share of the capacity.
const SMALL_SHARE: f64 = 0.10;
/// The ghost's size, as a share of the capacity, in the bytes of the keys it recalls.
const GHOST_SHARE: f64 = 0.90;
/// The highest read count kept (two bits).
const FREQ_MAX: u8 = 3;

/// Where a live object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    Small,
    Main,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    bytes: u64,
    freq: u8,
    queue: Queue,
    generation: u64,
}

/// A byte-capped S3-FIFO over `u64` keys.
#[derive(Debug, Clone)]
pub(crate) struct S3Fifo {
    cap: u64,
    small_cap: u64,
    ghost_cap: u64,
    small_used: u64,
    main_used: u64,
    ghost_used: u64,
    entries: HashMap<u64, Entry>,
    small: VecDeque<(u64, u64)>,
    main: VecDeque<(u64, u64)>,
    /// Key → (generation, bytes) of the keys the ghost recalls.
    ghosts: HashMap<u64, (u64, u64)>,
    ghost: VecDeque<(u64, u64)>,
    next_generation: u64,
}

impl S3Fifo {
    pub(crate) fn new(cap_bytes: u64) -> S3Fifo {
        S3Fifo {
            cap: cap_bytes,
            small_cap: (cap_bytes as f64 * SMALL_SHARE) as u64,
            ghost_cap: (cap_bytes as f64 * GHOST_SHARE) as u64,
            small_used: 0,
            main_used: 0,
            ghost_used: 0,
            entries: HashMap::new(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            ghosts: HashMap::new(),
            ghost: VecDeque::new(),
            next_generation: 0,
        }
    }

    /// Bytes held (both queues).
    pub(crate) fn used(&self) -> u64 {
        self.small_used + self.main_used
    }

    fn generation(&mut self) -> u64 {
        self.next_generation += 1;
        self.next_generation
    }

    /// Evicts until the objects fit the capacity.
    fn make_room(&mut self) {
        while self.used() > self.cap {
            let evicted = if self.small_used > self.small_cap || self.main_used == 0 {
                self.evict_small()
            } else {
                self.evict_main()
            };
            if !evicted {
                debug_assert!(false, "bytes counted that no queue holds");
                break;
            }
        }
    }

    /// The small FIFO's tail: to the main FIFO if it was read, else out (and into the
    /// ghost). `false` when the queue held nothing live.
    fn evict_small(&mut self) -> bool {
        let Some((key, generation)) = pop_live(&mut self.small, &self.entries) else {
            return false;
        };
        let Some(e) = self.entries.get_mut(&key) else {
            return false;
        };
        debug_assert_eq!(e.queue, Queue::Small);
        self.small_used -= e.bytes;
        if e.freq >= 1 {
            e.queue = Queue::Main;
            e.freq = 0;
            self.main_used += e.bytes;
            self.main.push_back((key, generation));
        } else {
            let bytes = e.bytes;
            self.entries.remove(&key);
            self.remember(key, bytes);
        }
        true
    }

    /// The main FIFO's tail: reinserted with one read less if it was read, else out.
    /// `false` when the queue held nothing live.
    fn evict_main(&mut self) -> bool {
        while let Some((key, generation)) = pop_live(&mut self.main, &self.entries) {
            let Some(e) = self.entries.get_mut(&key) else {
                return false;
            };
            debug_assert_eq!(e.queue, Queue::Main);
            if e.freq > 0 {
                e.freq -= 1;
                self.main.push_back((key, generation));
                continue;
            }
            self.main_used -= e.bytes;
            self.entries.remove(&key);
            return true;
        }
        false
    }

    /// Puts `key` in the ghost, forgetting the oldest keys past its size.
    fn remember(&mut self, key: u64, bytes: u64) {
        let generation = self.generation();
        self.ghosts.insert(key, (generation, bytes));
        self.ghost.push_back((key, generation));
        self.ghost_used += bytes;
        while self.ghost_used > self.ghost_cap {
            let Some((old, g)) = self.ghost.pop_front() else {
                break;
            };
            if self.ghosts.get(&old).is_some_and(|&(og, _)| og == g) {
                let (_, b) = self.ghosts.remove(&old).unwrap_or((g, 0));
                self.ghost_used -= b;
            }
        }
    }

    /// Takes `key` out of the ghost; whether it was there.
    fn recall(&mut self, key: u64) -> bool {
        match self.ghosts.remove(&key) {
            Some((_, bytes)) => {
                self.ghost_used -= bytes;
                true
            }
            None => false,
        }
    }
}

/// The first slot of `queue` whose object is still the one it was queued for (a
/// deleted or replaced object leaves its old slot behind, skipped here).
fn pop_live(queue: &mut VecDeque<(u64, u64)>, entries: &HashMap<u64, Entry>) -> Option<(u64, u64)> {
    while let Some((key, generation)) = queue.pop_front() {
        if entries
            .get(&key)
            .is_some_and(|e| e.generation == generation)
        {
            return Some((key, generation));
        }
    }
    None
}

impl Policy for S3Fifo {
    fn get(&mut self, key: u64) -> bool {
        match self.entries.get_mut(&key) {
            Some(e) => {
                e.freq = (e.freq + 1).min(FREQ_MAX);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, key: u64, bytes: u64) {
        self.remove(key);
        if bytes > self.cap {
            return;
        }
        let queue = if self.recall(key) {
            Queue::Main
        } else {
            Queue::Small
        };
        let generation = self.generation();
        let e = Entry {
            bytes,
            freq: 0,
            queue,
            generation,
        };
        self.entries.insert(key, e);
        match queue {
            Queue::Small => {
                self.small_used += bytes;
                self.small.push_back((key, generation));
            }
            Queue::Main => {
                self.main_used += bytes;
                self.main.push_back((key, generation));
            }
        }
        self.make_room();
    }

    fn remove(&mut self, key: u64) -> bool {
        let Some(e) = self.entries.remove(&key) else {
            return false;
        };
        match e.queue {
            Queue::Small => self.small_used -= e.bytes,
            Queue::Main => self.main_used -= e.bytes,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lru::Lru;

    #[test]
    fn bytes_stay_within_the_cap_through_random_ops() {
        let mut c = S3Fifo::new(10_000);
        let mut x: u64 = 7;
        for _ in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = (x >> 33) % 500;
            let bytes = 50 + (x >> 20) % 400;
            match (x >> 60) % 4 {
                0 => {
                    c.remove(key);
                }
                1 => c.insert(key, bytes),
                _ => {
                    if !c.get(key) {
                        c.insert(key, bytes);
                    }
                }
            }
            assert!(c.used() <= c.cap, "{} over {}", c.used(), c.cap);
            let held: u64 = c.entries.values().map(|e| e.bytes).sum();
            assert_eq!(held, c.used());
        }
    }

    /// S3-FIFO's point: one-hit keys pass through the small FIFO and do not push the
    /// hot set out of the main one, where an LRU of the same bytes loses it.
    #[test]
    fn a_scan_of_one_hit_keys_does_not_evict_the_hot_set() {
        let (mut s3, mut lru) = (S3Fifo::new(100), Lru::new(100));
        let hot = 0..8u64;
        for _ in 0..3 {
            for k in hot.clone() {
                for p in [&mut s3 as &mut dyn Policy, &mut lru] {
                    if !p.get(k) {
                        p.insert(k, 10);
                    }
                }
            }
        }
        for k in 1_000..1_100u64 {
            for p in [&mut s3 as &mut dyn Policy, &mut lru] {
                if !p.get(k) {
                    p.insert(k, 10);
                }
            }
        }
        let s3_hits = hot.clone().filter(|&k| s3.get(k)).count();
        let lru_hits = hot.filter(|&k| Policy::get(&mut lru, k)).count();
        assert_eq!(s3_hits, 8, "S3-FIFO kept the hot set");
        assert_eq!(lru_hits, 0, "LRU lost it to the scan");
    }

    #[test]
    fn a_key_recalled_by_the_ghost_goes_to_the_main_queue() {
        let mut c = S3Fifo::new(100);
        c.insert(1, 10);
        // Push 1 out of the small queue unread: it is remembered in the ghost.
        for k in 10..25 {
            c.insert(k, 10);
        }
        assert!(!c.entries.contains_key(&1));
        assert!(c.ghosts.contains_key(&1));
        c.insert(1, 10);
        assert_eq!(c.entries[&1].queue, Queue::Main);
        assert!(!c.ghosts.contains_key(&1));
    }
}
