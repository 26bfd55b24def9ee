//! The in-RAM index: key hash → packed location, sharded behind reader-writer locks.
//!
//! A slot is 16 bytes (the 64-bit key hash and one `AtomicU64` location) plus
//! hashbrown's control byte, so an entry costs ~17 bytes at full load and ~26 bytes on
//! average over the table's growth cycle. The full key is not kept in RAM: it is on disk
//! in the entry, and a lookup compares it there (a hash collision reads as a miss).
//!
//! Locks are held only for the table operation itself: the writer copies an entry into
//! the volume first and takes a shard's write lock just to publish it, so readers
//! never wait for I/O. Readers set the location's `hit` bit (for carry-forward) with an
//! atomic under the read lock, and only when it is not already set, so a hot key does
//! not bounce its cache line between cores.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use crate::region::LOC_GEN_BITS;

const SHARDS: usize = 64;
const REGION_BITS: u32 = 24;
const OFFSET_BITS: u32 = 20;
const HIT_BIT: u64 = 1 << 63;
const _: () = assert!(REGION_BITS + OFFSET_BITS + LOC_GEN_BITS + 1 == 64);

/// Where an entry lives: region, offset within it (in 16-byte units), the low bits of
/// the region's generation when it was written, and whether it was hit since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loc {
    pub region: u32,
    pub offset16: u32,
    pub gen19: u32,
    pub hit: bool,
}

pub const REGIONS_MAX: u64 = 1 << REGION_BITS;

impl Loc {
    fn pack(self) -> u64 {
        debug_assert!(u64::from(self.region) < REGIONS_MAX);
        debug_assert!(self.offset16 < 1 << OFFSET_BITS);
        debug_assert!(self.gen19 < 1 << LOC_GEN_BITS);
        u64::from(self.region)
            | u64::from(self.offset16) << REGION_BITS
            | u64::from(self.gen19) << (REGION_BITS + OFFSET_BITS)
            | if self.hit { HIT_BIT } else { 0 }
    }

    fn unpack(w: u64) -> Loc {
        Loc {
            region: (w & ((1 << REGION_BITS) - 1)) as u32,
            offset16: ((w >> REGION_BITS) & ((1 << OFFSET_BITS) - 1)) as u32,
            gen19: ((w >> (REGION_BITS + OFFSET_BITS)) & ((1 << LOC_GEN_BITS) - 1)) as u32,
            hit: w & HIT_BIT != 0,
        }
    }

    /// The same place, ignoring the hit bit.
    pub fn same_place(self, other: Loc) -> bool {
        self.pack() & !HIT_BIT == other.pack() & !HIT_BIT
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

    /// Looks `hash` up and marks it hit; returns the location as it was before.
    pub fn lookup_and_mark(&self, hash: u64) -> Option<Loc> {
        let shard = self.read(hash);
        let w = shard.get(&hash)?;
        let old = w.load(Ordering::Acquire);
        if old & HIT_BIT == 0 {
            w.fetch_or(HIT_BIT, Ordering::Relaxed);
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

    /// Points `hash` at `loc`; returns the location it replaced.
    pub fn insert(&self, hash: u64, loc: Loc) -> Option<Loc> {
        let mut shard = self.write(hash);
        shard
            .insert(hash, AtomicU64::new(loc.pack()))
            .map(|w| Loc::unpack(w.into_inner()))
    }

    pub fn remove(&self, hash: u64) -> Option<Loc> {
        let mut shard = self.write(hash);
        shard.remove(&hash).map(|w| Loc::unpack(w.into_inner()))
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
            gen19: (1 << 19) - 1,
            hit: true,
        };
        assert_eq!(Loc::unpack(l.pack()), l);
        let z = Loc {
            region: 3,
            offset16: 4,
            gen19: 5,
            hit: false,
        };
        assert_eq!(Loc::unpack(z.pack()), z);
        assert!(z.same_place(Loc { hit: true, ..z }));
        assert!(!z.same_place(Loc { gen19: 6, ..z }));
    }

    #[test]
    fn lookup_marks_hit() {
        let ix = Index::new();
        let l = Loc {
            region: 1,
            offset16: 2,
            gen19: 3,
            hit: false,
        };
        assert_eq!(ix.insert(42, l), None);
        assert_eq!(ix.lookup_and_mark(42), Some(l));
        assert!(ix.peek(42).unwrap().hit);
        assert!(ix.remove(42).unwrap().hit);
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
                    gen19: 0,
                    hit: false,
                },
            );
        }
        let per = ix.bytes() as f64 / ix.len() as f64;
        assert!((17.0..=40.0).contains(&per), "{per} bytes per entry");
    }
}
