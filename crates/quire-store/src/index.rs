//! The in-RAM index: key hash → packed location, sharded behind reader-writer locks.
//!
//! A slot is 12 bytes — the low 32 bits of the key hash and the 64-bit location as two
//! 32-bit words (4-byte alignment, so no padding) — plus hashbrown's control byte: an
//! entry costs ~14.9 bytes at full load (7/8) and ~29.7 just after the table doubled
//! (`quire bench store` measured 33.3 bytes with 16-byte slots, above the 32-byte aim).
//! The full key is not kept in RAM: it is on disk in the entry, and a lookup compares
//! it there. With the 6 bits that pick the shard, 38 bits of the hash tell keys apart:
//! two keys that agree in them share a slot, so a put of one displaces the other (a
//! spurious eviction) and a lookup of the displaced one reads the other's entry, whose
//! key on disk does not match — a miss, never wrong bytes. A store of N entries has
//! about N² / 2^39 such pairs: one in a million entries at N = 550,000.
//!
//! Locks are held only for the table operation itself: a writer copies its entry into
//! the volume first and takes the shard's write lock just to publish it, so readers
//! never wait for I/O. Readers bump the location's 2-bit hit counter (the reclaim
//! policy's frequency) with a compare-and-swap under the read lock, and only while it
//! is below its ceiling, so a hot key stops writing its cache line once it saturates.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::RwLock;

use crate::layout::ENTRY_ALIGN;
use crate::region::{loc_gen, LOC_GEN_BITS};

const SHARDS: usize = 64;
const REGION_BITS: u32 = 24;
const OFFSET_BITS: u32 = 20;
const FREQ_SHIFT: u32 = 62;
const FREQ_MASK: u64 = 0b11 << FREQ_SHIFT;
/// The hit counter saturates here.
const FREQ_MAX: u8 = 3;
const _: () = assert!(REGION_BITS + OFFSET_BITS + LOC_GEN_BITS + 2 == 64);

/// Where an entry lives: region, offset within it (in 16-byte units), the low bits of
/// the region's generation when it was written, and how often it was hit since (0..=3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) region: u32,
    pub(crate) offset16: u32,
    pub(crate) gen18: u32,
    pub(crate) freq: u8,
}

pub(crate) const REGIONS_MAX: u64 = 1 << REGION_BITS;

impl Loc {
    /// The entry at byte `offset` of `region`, written in generation `gen`, not yet hit.
    pub(crate) fn at(region: u32, offset: u64, gen: u64) -> Loc {
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
    pub(crate) fn same_place(self, other: Loc) -> bool {
        self.pack() & !FREQ_MASK == other.pack() & !FREQ_MASK
    }
}

/// Slot keys are 32 bits of a uniform hash: hashbrown takes its bucket from the low
/// bits of the 64-bit hash it is given and its control byte from the top 7, so the
/// key is repeated in both halves.
#[derive(Default)]
struct SpreadHasher(u64);

impl Hasher for SpreadHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n) << 32 | u64::from(n);
    }
}

/// A location word stored as two halves, so a slot needs only 4-byte alignment. The
/// hit counter lives in `hi` (bits 30–31), which readers bump with a compare-and-swap
/// under the shard's read lock; every other change to a slot is made under the write
/// lock, so a reader's two loads always see one location.
#[derive(Debug)]
struct Slot {
    lo: AtomicU32,
    hi: AtomicU32,
}

impl Slot {
    fn new(w: u64) -> Slot {
        Slot {
            lo: AtomicU32::new(w as u32),
            hi: AtomicU32::new((w >> 32) as u32),
        }
    }

    fn load(&self) -> u64 {
        u64::from(self.lo.load(Ordering::Acquire))
            | u64::from(self.hi.load(Ordering::Acquire)) << 32
    }
}

/// The part of a key hash a shard keys its slot by; the shard itself is picked from
/// other bits ([`shard_of`]).
fn slot_key(hash: u64) -> u32 {
    hash as u32
}

type Shard = HashMap<u32, Slot, BuildHasherDefault<SpreadHasher>>;

const _: () = assert!(std::mem::size_of::<(u32, Slot)>() == 12);
const _: () = assert!(
    FREQ_SHIFT >= 32,
    "the hit counter must live in the high word"
);

/// The sharded index.
#[derive(Debug)]
pub(crate) struct Index {
    shards: Box<[RwLock<Shard>]>,
}

fn shard_of(hash: u64) -> usize {
    // Middle bits: hashbrown uses the low bits for the bucket and the top 7 for its
    // control bytes, so picking shards from either would starve it of entropy.
    (hash >> 32) as usize % SHARDS
}

impl Index {
    pub(crate) fn new() -> Index {
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
    pub(crate) fn lookup_and_mark(&self, hash: u64) -> Option<Loc> {
        let shard = self.read(hash);
        let w = shard.get(&slot_key(hash))?;
        let old = w.load();
        if old & FREQ_MASK != FREQ_MASK {
            // One try: losing a race to another reader only loses one count.
            let hi = (old >> 32) as u32;
            let _ = w.hi.compare_exchange(
                hi,
                hi + (1 << (FREQ_SHIFT - 32)),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
        Some(Loc::unpack(old))
    }

    /// Looks `hash` up without marking it.
    pub(crate) fn peek(&self, hash: u64) -> Option<Loc> {
        let shard = self.read(hash);
        shard.get(&slot_key(hash)).map(|w| Loc::unpack(w.load()))
    }

    /// Runs `f` on `hash`'s current location under its shard's write lock and stores
    /// the location `f` returns (`None` removes). Everything that changes which entry
    /// a key maps to goes through here, so per-key changes are serialised: `f` may
    /// write the volume (mark the old entry dead, copy a carried entry) before the new
    /// location becomes visible. Keep `f` short: readers of the shard wait for it.
    pub(crate) fn update<R>(
        &self,
        hash: u64,
        f: impl FnOnce(Option<Loc>) -> (Option<Loc>, R),
    ) -> R {
        let mut shard = self.write(hash);
        let key = slot_key(hash);
        let cur = shard.get(&key).map(|w| Loc::unpack(w.load()));
        let (new, out) = f(cur);
        match (cur, new) {
            (_, Some(l)) if cur != Some(l) => {
                shard.insert(key, Slot::new(l.pack()));
            }
            (Some(_), None) => {
                shard.remove(&key);
            }
            _ => {}
        }
        out
    }

    #[cfg(test)]
    fn insert(&self, hash: u64, loc: Loc) {
        self.update(hash, |_| (Some(loc), ()));
    }

    pub(crate) fn len(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(|p| p.into_inner()).len() as u64)
            .sum()
    }

    /// RAM the tables take: buckets × (slot + control byte).
    pub(crate) fn bytes(&self) -> u64 {
        let slot = std::mem::size_of::<(u32, Slot)>() as u64 + 1;
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
        // 13 bytes a bucket, between 7/16 and 7/8 full.
        assert!((13.0..=30.0).contains(&per), "{per} bytes per entry");
    }

    #[test]
    fn keys_agreeing_in_the_kept_bits_share_a_slot() {
        // Same low 32 bits and shard bits, different top bits: one slot. The later
        // key displaces the earlier one (the store then finds the other key on disk
        // and answers a miss); keys differing in the kept bits never interfere.
        let ix = Index::new();
        let a = 0x0000_0001_dead_beef_u64;
        let b = a | 0xfff0_0000_0000_0000;
        assert_eq!((slot_key(a), shard_of(a)), (slot_key(b), shard_of(b)));
        let at = |region| Loc {
            region,
            offset16: 0,
            gen18: 0,
            freq: 0,
        };
        ix.insert(a, at(1));
        ix.insert(b, at(2));
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.peek(a), Some(at(2)));
        let c = a ^ 1;
        ix.insert(c, at(3));
        assert_eq!(ix.peek(c), Some(at(3)));
        assert_eq!(ix.peek(b), Some(at(2)));
    }

    #[test]
    fn the_hit_counter_spills_into_no_other_field() {
        let ix = Index::new();
        let l = Loc {
            region: (1 << 24) - 1,
            offset16: (1 << 20) - 1,
            gen18: (1 << 18) - 1,
            freq: 0,
        };
        ix.insert(7, l);
        for n in 1..=5u8 {
            ix.lookup_and_mark(7);
            assert_eq!(
                ix.peek(7),
                Some(Loc {
                    freq: n.min(FREQ_MAX),
                    ..l
                })
            );
        }
    }
}
