//! The in-RAM index: key hash → packed location, sharded behind reader-writer locks.
//!
//! A slot is 16 bytes (the 64-bit key hash and one `AtomicU64` location) plus
//! hashbrown's control byte, so an entry costs ~17 bytes at full load and ~26 bytes on
//! average over the table's growth cycle. The full key is not kept in RAM: it is on disk
//! in the entry, and a lookup compares it there (a hash collision reads as a miss).
//!
//! Locks are held only for the table operation itself: a writer copies its entry into
//! the volume first and takes the shard's write lock just to publish it, so readers
//! never wait for I/O. Readers bump the location's 2-bit hit counter (the reclaim
//! policy's frequency) with a compare-and-swap under the read lock, and only while it
//! is below its ceiling, so a hot key stops writing its cache line once it saturates.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use crate::layout::ENTRY_ALIGN;
use crate::region::{loc_gen, LOC_GEN_BITS};

const SHARDS: usize = 64;
const REGION_BITS: u32 = 24;
const OFFSET_BITS: u32 = 20;
const FREQ_SHIFT: u32 = 62;
const FREQ_MASK: u64 = 0b11 << FREQ_SHIFT;
/// The hit counter saturates here.
pub const FREQ_MAX: u8 = 3;
const _: () = assert!(REGION_BITS + OFFSET_BITS + LOC_GEN_BITS + 2 == 64);

/// Where an entry lives: region, offset within it (in 16-byte units), the low bits of
/// the region's generation when it was written, and how often it was hit since (0..=3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub region: u32,
    pub offset16: u32,
    pub gen18: u32,
    pub freq: u8,
}

pub const REGIONS_MAX: u64 = 1 << REGION_BITS;

impl Loc {
    /// The entry at byte `offset` of `region`, written in generation `gen`, not yet hit.
    pub fn at(region: u32, offset: u64, gen: u64) -> Loc {
        debug_assert_eq!(offset % ENTRY_ALIGN, 0, "entries are 16-byte aligned");
        Loc {
            region,
            offset16: (offset / ENTRY_ALIGN) as u32,
            gen18: loc_gen(gen),
            freq: 0,
        }
    }

    fn pack(self) -> u64 {
        debug_assert!(u64::from(self.region) < REGIONS_MAX);
        debug_assert!(self.offset16 < 1 << OFFSET_BITS);
        debug_assert!(self.gen18 < 1 << LOC_GEN_BITS);
        u64::from(self.region)
            | u64::from(self.offset16) << REGION_BITS
            | u64::from(self.gen18) << (REGION_BITS + OFFSET_BITS)
            | u64::from(self.freq.min(FREQ_MAX)) << FREQ_SHIFT
    }

    fn unpack(w: u64) -> Loc {
        Loc {
            region: (w & ((1 << REGION_BITS) - 1)) as u32,
            offset16: ((w >> REGION_BITS) & ((1 << OFFSET_BITS) - 1)) as u32,
            gen18: ((w >> (REGION_BITS + OFFSET_BITS)) & ((1 << LOC_GEN_BITS) - 1)) as u32,
            freq: ((w & FREQ_MASK) >> FREQ_SHIFT) as u8,
        }
    }

    /// The same place, ignoring the hit counter.
    pub fn same_place(self, other: Loc) -> bool {
        self.pack() & !FREQ_MASK == other.pack() & !FREQ_MASK
    }
}

/// Keys are already uniform 64-bit hashes: hash them to themselves.
#[derive(Default)]
struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Shard = HashMap<u64, AtomicU64, BuildHasherDefault<IdentityHasher>>;

/// The sharded index.
#[derive(Debug)]
pub struct Index {
    shards: Box<[RwLock<Shard>]>,
}

fn shard_of(hash: u64) -> usize {
    // Middle bits: hashbrown uses the low bits for the bucket and the top 7 for its
    // control bytes, so picking shards from either would starve it of entropy.
    (hash >> 32) as usize % SHARDS
}

impl Index {
    pub fn new() -> Index {
        Index {
            shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
        }
    }

    fn read(&self, hash: u64) -> std::sync::RwLockReadGuard<'_, Shard> {
        // A poisoned lock means a panic mid-update in a table operation we own, which
        // cannot leave a HashMap of plain words inconsistent: keep serving.
        self.shards[shard_of(hash)]
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, hash: u64) -> std::sync::RwLockWriteGuard<'_, Shard> {
        self.shards[shard_of(hash)]
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Looks `hash` up and counts a hit; returns the location as it was before.
    pub fn lookup_and_mark(&self, hash: u64) -> Option<Loc> {
        let shard = self.read(hash);
        let w = shard.get(&hash)?;
        let old = w.load(Ordering::Acquire);
        if old & FREQ_MASK != FREQ_MASK {
            // One try: losing a race to another reader only loses one count.
            let _ = w.compare_exchange(
                old,
                old + (1 << FREQ_SHIFT),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        Some(Loc::unpack(old))
    }

    /// Looks `hash` up without marking it.
    pub fn peek(&self, hash: u64) -> Option<Loc> {
        let shard = self.read(hash);
        shard
            .get(&hash)
            .map(|w| Loc::unpack(w.load(Ordering::Acquire)))
    }

    /// Runs `f` on `hash`'s current location under its shard's write lock and stores
    /// the location `f` returns (`None` removes). Everything that changes which entry
    /// a key maps to goes through here, so per-key changes are serialised: `f` may
    /// write the volume (mark the old entry dead, copy a carried entry) before the new
    /// location becomes visible. Keep `f` short: readers of the shard wait for it.
    pub fn update<R>(&self, hash: u64, f: impl FnOnce(Option<Loc>) -> (Option<Loc>, R)) -> R {
        let mut shard = self.write(hash);
        let cur = shard
            .get(&hash)
            .map(|w| Loc::unpack(w.load(Ordering::Acquire)));
        let (new, out) = f(cur);
        match (cur, new) {
            (_, Some(l)) if cur != Some(l) => {
                shard.insert(hash, AtomicU64::new(l.pack()));
            }
            (Some(_), None) => {
                shard.remove(&hash);
            }
            _ => {}
        }
        out
    }

    #[cfg(test)]
    pub fn insert(&self, hash: u64, loc: Loc) {
        self.update(hash, |_| (Some(loc), ()));
    }

    pub fn len(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(|p| p.into_inner()).len() as u64)
            .sum()
    }

    /// RAM the tables take: buckets × (slot + control byte).
    pub fn bytes(&self) -> u64 {
        let slot = std::mem::size_of::<(u64, AtomicU64)>() as u64 + 1;
        self.shards
            .iter()
            .map(|s| {
                let cap = s.read().unwrap_or_else(|p| p.into_inner()).capacity() as u64;
                // hashbrown keeps load ≤ 7/8 and a power-of-two bucket count.
                let buckets = if cap == 0 {
                    0
                } else {
                    (cap * 8 / 7).next_power_of_two()
                };
                buckets * slot
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loc_packs_every_field() {
        let l = Loc {
            region: (1 << 24) - 1,
            offset16: (1 << 20) - 1,
            gen18: (1 << 18) - 1,
            freq: 3,
        };
        assert_eq!(Loc::unpack(l.pack()), l);
        let z = Loc {
            region: 3,
            offset16: 4,
            gen18: 5,
            freq: 0,
        };
        assert_eq!(Loc::unpack(z.pack()), z);
        assert!(z.same_place(Loc { freq: 3, ..z }));
        assert!(!z.same_place(Loc { gen18: 6, ..z }));
    }

    #[test]
    fn lookup_marks_hit() {
        let ix = Index::new();
        let l = Loc {
            region: 1,
            offset16: 2,
            gen18: 3,
            freq: 0,
        };
        ix.insert(42, l);
        assert_eq!(ix.lookup_and_mark(42), Some(l));
        assert_eq!(ix.peek(42).unwrap().freq, 1);
        for _ in 0..5 {
            ix.lookup_and_mark(42);
        }
        assert_eq!(ix.peek(42).unwrap().freq, FREQ_MAX, "saturates");
        assert_eq!(ix.peek(42).unwrap().gen18, 3, "counting never spills");
        let removed = ix.update(42, |cur| (None, cur));
        assert_eq!(removed.unwrap().freq, FREQ_MAX);
        assert_eq!(ix.len(), 0);
        assert_eq!(ix.lookup_and_mark(42), None);
    }

    #[test]
    fn index_bytes_per_entry_stay_near_slot_size() {
        let ix = Index::new();
        for i in 0..100_000u64 {
            let h = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            ix.insert(
                h,
                Loc {
                    region: 0,
                    offset16: 0,
                    gen18: 0,
                    freq: 0,
                },
            );
        }
        let per = ix.bytes() as f64 / ix.len() as f64;
        assert!((17.0..=40.0).contains(&per), "{per} bytes per entry");
    }
}
