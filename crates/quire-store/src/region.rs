//! Region pins: how readers' handles, writers' reservations and reclaim agree on who
//! owns a region's bytes, without any of them waiting for another.
//!
//! Each region has one atomic word: the high 32 bits are the low 32 bits of its
//! generation, the low 32 bits count the pins on it (readers' handles, and writers
//! between reserving bytes and publishing their entry).
//!
//! - A reader pins with `fetch_add(1)` and then checks the generation it saw in the old
//!   word against the one its index location carries. On a mismatch it unpins and the
//!   lookup is a miss. A match means the region cannot change until it unpins.
//! - A reclaimer claims a region for reuse with one compare-and-swap from
//!   `(gen, 0 pins)` to `(new gen, 0 pins)`. If anyone holds a pin the swap fails and
//!   reclaim picks another region: it never waits for a slow client and never
//!   takes bytes a handle points at.
//!
//! So a handle held across a reclaim keeps exactly its original bytes (its region was
//! skipped), and a lookup that races a reclaim sees a clean miss, never mixed bytes.
//! A reader whose pin lands just after a claim bumps the count of the *new* generation
//! for an instant; a claim that reads that instant fails and tries another region.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of the generation an index location keeps (see `index::Loc`).
pub(crate) const LOC_GEN_BITS: u32 = 18;
const LOC_GEN_MASK: u32 = (1 << LOC_GEN_BITS) - 1;

/// The pin words of all regions.
#[derive(Debug)]
pub(crate) struct RegionTable {
    words: Box<[AtomicU64]>,
}

/// Truncates a full generation to what an index location keeps.
pub(crate) fn loc_gen(gen: u64) -> u32 {
    gen as u32 & LOC_GEN_MASK
}

impl RegionTable {
    /// `gens[r]` is region r's current generation (0: never written).
    pub(crate) fn new(gens: &[u64]) -> RegionTable {
        RegionTable {
            words: gens
                .iter()
                .map(|&g| AtomicU64::new(u64::from(g as u32) << 32))
                .collect(),
        }
    }

    /// Pins `region` if its generation still matches `gen18`; true on success.
    /// Every successful pin must be paired with one `unpin`.
    pub(crate) fn pin(&self, region: u32, gen18: u32) -> bool {
        let w = &self.words[region as usize];
        let old = w.fetch_add(1, Ordering::Acquire);
        debug_assert!(old as u32 != u32::MAX, "pin count overflow");
        if (old >> 32) as u32 & LOC_GEN_MASK == gen18 {
            true
        } else {
            w.fetch_sub(1, Ordering::Release);
            false
        }
    }

    pub(crate) fn unpin(&self, region: u32) {
        let old = self.words[region as usize].fetch_sub(1, Ordering::Release);
        debug_assert!(old as u32 != 0, "unpin without pin");
    }

    /// Claims `region` for rewriting: succeeds only if nobody pins it. Afterwards pins
    /// carrying the old generation fail, so the claimer may overwrite its bytes.
    pub(crate) fn try_claim(&self, region: u32, old_gen: u64, new_gen: u64) -> bool {
        let from = u64::from(old_gen as u32) << 32;
        let to = u64::from(new_gen as u32) << 32;
        self.words[region as usize]
            .compare_exchange(from, to, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// The low 32 bits of `region`'s generation. Stable while the caller holds a pin
    /// on it or has claimed it.
    pub(crate) fn gen32(&self, region: u32) -> u32 {
        (self.words[region as usize].load(Ordering::Acquire) >> 32) as u32
    }

    /// Readers and writers holding pins on `region` now.
    pub(crate) fn pins(&self, region: u32) -> u32 {
        self.words[region as usize].load(Ordering::Relaxed) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_region_cannot_be_claimed_and_claim_fails_old_pins() {
        let t = RegionTable::new(&[5, 0]);
        assert!(t.pin(0, loc_gen(5)));
        assert!(!t.try_claim(0, 5, 6), "a pinned region is never claimed");
        t.unpin(0);
        assert!(t.try_claim(0, 5, 6));
        assert!(
            !t.pin(0, loc_gen(5)),
            "an old location misses after a claim"
        );
        assert_eq!(t.pins(0), 0, "a failed pin leaves no count behind");
        assert!(t.pin(0, loc_gen(6)));
        t.unpin(0);
    }

    #[test]
    fn generation_wraps_in_the_location_bits() {
        let g = (1u64 << LOC_GEN_BITS) + 3;
        let t = RegionTable::new(&[g]);
        assert!(t.pin(0, loc_gen(g)));
        assert!(!t.pin(0, 4));
        t.unpin(0);
    }
}
