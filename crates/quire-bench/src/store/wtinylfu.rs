//! The W-TinyLFU yardstick: foyer's in-memory cache with its `Lfu` eviction (a window
//! LRU of 10 % of the capacity, then a segmented LRU of probation and an 80 % protected
//! segment, a count-min sketch of accesses deciding between the window's and the
//! probation's oldest entries which one leaves), weighted in bytes, replayed over the
//! same op streams as the exact LRU ([`super::lru`]) and S3-FIFO ([`super::s3fifo`]).
//!
//! foyer (not moka) because its `Lfu` is W-TinyLFU as Caffeine describes it, where
//! moka 0.12 is TinyLFU admission in front of one LRU, with no window; and because it
//! evicts inside `insert`, under its shard's lock, so with one shard and its fixed
//! hasher every replay is deterministic and no eviction is left pending when the next
//! op looks. TinyUFO (pingora's) is TinyLFU admission over S3-FIFO, which the S3-FIFO
//! yardstick already stands for.

use foyer_memory::{Cache, CacheBuilder, EvictionConfig, LfuConfig};

use super::lru::Policy;

/// Count-min counters per entry the cache is expected to hold. foyer halves its
/// counters every `width` recorded accesses; Caffeine sizes its sketch to the entries
/// it holds and halves every 10 × that many accesses, which this matches. foyer's
/// default sketch (2,719 counters wide, whatever the cache) scored 0.861 / 0.716 /
/// 0.759 / 0.828 on `quire bench store`'s mixed / mixed_scan / zipf08 / news streams.
const COUNTERS_PER_ENTRY: f64 = 10.0;

/// A byte-capped W-TinyLFU over `u64` keys (foyer's defaults: window 10 %, protected
/// 80 %). Values are the objects' sizes; the cache holds nothing else.
pub(crate) struct WTinyLfu {
    cap: u64,
    cache: Cache<u64, u64>,
}

impl WTinyLfu {
    /// A W-TinyLFU of `cap_bytes` whose sketch is sized for about `entries` objects
    /// held.
    pub(crate) fn new(cap_bytes: u64, entries: usize) -> WTinyLfu {
        let width = (entries.max(64) as f64 * COUNTERS_PER_ENTRY).min(1e8);
        let lfu = LfuConfig {
            // foyer makes the sketch e / eps counters wide.
            cmsketch_eps: std::f64::consts::E / width,
            ..LfuConfig::default()
        };
        let cache = CacheBuilder::new(usize::try_from(cap_bytes).unwrap_or(usize::MAX))
            .with_shards(1)
            .with_eviction_config(EvictionConfig::Lfu(lfu))
            .with_weighter(|_: &u64, bytes: &u64| usize::try_from(*bytes).unwrap_or(usize::MAX))
            .build();
        WTinyLfu {
            cap: cap_bytes,
            cache,
        }
    }

    /// Bytes held.
    #[cfg(test)]
    pub(crate) fn used(&self) -> u64 {
        self.cache.usage() as u64
    }
}

impl Policy for WTinyLfu {
    fn get(&mut self, key: u64) -> bool {
        self.cache.get(&key).is_some()
    }

    fn insert(&mut self, key: u64, bytes: u64) {
        if bytes > self.cap {
            // Not held, as in the other policies (and any older value goes).
            self.cache.remove(&key);
            return;
        }
        // The handle it returns is dropped at once: nothing stays pinned against
        // eviction.
        drop(self.cache.insert(key, bytes));
    }

    fn remove(&mut self, key: u64) -> bool {
        self.cache.remove(&key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lru::Lru;

    #[test]
    fn bytes_stay_within_the_cap_through_random_ops() {
        let mut c = WTinyLfu::new(10_000, 40);
        let mut x: u64 = 7;
        for _ in 0..100_000 {
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
            assert!(c.used() <= 10_000, "{} over the cap", c.used());
        }
        c.insert(1, 20_000);
        assert!(!c.get(1), "larger than the cap: not held");
    }

    /// TinyLFU's point: a frequently read set survives a scan of one-hit keys that
    /// pushes it out of an LRU of the same bytes.
    #[test]
    fn a_scan_of_one_hit_keys_does_not_evict_the_hot_set() {
        let (mut w, mut lru) = (WTinyLfu::new(1000, 100), Lru::new(1000));
        let hot = 0..40u64;
        for _ in 0..5 {
            for k in hot.clone() {
                for p in [&mut w as &mut dyn Policy, &mut lru] {
                    if !p.get(k) {
                        p.insert(k, 10);
                    }
                }
            }
        }
        for k in 1_000..1_200u64 {
            for p in [&mut w as &mut dyn Policy, &mut lru] {
                if !p.get(k) {
                    p.insert(k, 10);
                }
            }
        }
        let w_hits = hot.clone().filter(|&k| w.get(k)).count();
        let lru_hits = hot.filter(|&k| Policy::get(&mut lru, k)).count();
        assert!(w_hits >= 36, "W-TinyLFU kept {w_hits} of 40");
        assert_eq!(lru_hits, 0, "LRU lost it to the scan");
    }
}
