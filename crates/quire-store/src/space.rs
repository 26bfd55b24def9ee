//! Space bookkeeping: which regions are free, active, ready, sealed or the cold
//! stream's, how far each is written, how many of its bytes are live, and the
//! volume-wide generation counter. Plain state behind the allocation lock and atomics;
//! the policy that moves regions through their lifecycle — reserving a put's bytes and
//! reclaiming regions inline — is `reclaim`'s, which is built on this.
//!
//! Region lifecycle: `free → active → sealed → claimed → ready → active → ...`; free
//! regions exist only until the volume first fills.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// A region being appended to (or ready to be): its generation and write head.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Open {
    pub(crate) region: u32,
    pub(crate) gen: u64,
    pub(crate) head: u64,
}

/// What the allocation lock guards.
#[derive(Debug)]
pub(crate) struct Alloc {
    pub(crate) active: Option<Open>,
    /// Regions reclaimed ahead of need, taken in order as the active one fills.
    pub(crate) ready: VecDeque<Open>,
    /// Where reclaim carries surviving entries: a stream of its own, so long-lived
    /// entries fill regions that stay nearly all live while new writes fill regions
    /// that die fast and are cheap to reclaim (LFS's hot/cold separation).
    pub(crate) cold: Option<Open>,
    /// Sealed regions, in the order they were sealed.
    pub(crate) sealed: VecDeque<u32>,
    pub(crate) free: Vec<u32>,
    /// Bytes written into each region (its header included; 0 when free).
    pub(crate) fill: Vec<u64>,
    /// Writers refilling `ready` ahead of need now.
    pub(crate) refilling: usize,
}

/// Space bookkeeping shared by writers; see the module doc.
#[derive(Debug)]
pub(crate) struct Space {
    alloc: Mutex<Alloc>,
    /// Full generation of each region (0: never written).
    gens: Box<[AtomicU64]>,
    /// Bytes of each region's entries that the index points at.
    live: Box<[AtomicU64]>,
    next_gen: AtomicU64,
    /// The volume has had to reclaim (or was full at open): admission applies.
    pub(crate) full: AtomicBool,
    pub(crate) bytes_used: AtomicU64,
    pub(crate) bytes_live: AtomicU64,
    /// Reclaim's staging buffers, reused (one per concurrent reclaim).
    scratch: Mutex<Vec<Vec<u8>>>,
}

/// The state recovery (or formatting) hands to a new store.
#[derive(Debug)]
pub(crate) struct SpaceInit {
    pub(crate) gens: Vec<u64>,
    pub(crate) fill: Vec<u64>,
    pub(crate) live: Vec<u64>,
    /// Sealed regions, oldest first.
    pub(crate) sealed: VecDeque<u32>,
    pub(crate) free: Vec<u32>,
    pub(crate) next_gen: u64,
}

impl SpaceInit {
    /// An empty volume of `region_count` regions, all free.
    pub(crate) fn empty(region_count: u32) -> SpaceInit {
        SpaceInit {
            gens: vec![0; region_count as usize],
            fill: vec![0; region_count as usize],
            live: vec![0; region_count as usize],
            sealed: VecDeque::new(),
            free: (0..region_count).rev().collect(),
            next_gen: 1,
        }
    }
}

impl Space {
    pub(crate) fn new(init: SpaceInit) -> Space {
        let atomics = |v: &[u64]| v.iter().map(|&x| AtomicU64::new(x)).collect();
        Space {
            full: AtomicBool::new(init.free.is_empty()),
            bytes_used: AtomicU64::new(init.fill.iter().sum()),
            bytes_live: AtomicU64::new(init.live.iter().sum()),
            gens: atomics(&init.gens),
            live: atomics(&init.live),
            next_gen: AtomicU64::new(init.next_gen),
            alloc: Mutex::new(Alloc {
                active: None,
                ready: VecDeque::new(),
                cold: None,
                sealed: init.sealed,
                free: init.free,
                fill: init.fill,
                refilling: 0,
            }),
            scratch: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn lock_alloc(&self) -> MutexGuard<'_, Alloc> {
        // Alloc is updated field by field with no invariant spanning a panic point.
        self.alloc.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn add_live(&self, region: u32, bytes: u64) {
        self.live[region as usize].fetch_add(bytes, Ordering::Relaxed);
        self.bytes_live.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Only while holding a pin on `region` (so reclaim cannot reset it meanwhile).
    pub(crate) fn sub_live(&self, region: u32, bytes: u64) {
        let old = self.live[region as usize].fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(old >= bytes, "live bytes underflow in region {region}");
        self.bytes_live.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The full generation of `region`.
    pub(crate) fn region_gen(&self, region: u32) -> u64 {
        self.gens[region as usize].load(Ordering::Acquire)
    }

    /// Sets the full generation of `region` (it was just opened or claimed).
    pub(crate) fn set_region_gen(&self, region: u32, gen: u64) {
        self.gens[region as usize].store(gen, Ordering::Release);
    }

    /// Hands out the next region generation (volume-wide, never reused).
    pub(crate) fn take_gen(&self) -> u64 {
        self.next_gen.fetch_add(1, Ordering::Relaxed)
    }

    /// The generation the next region opened will get: how far the volume has come.
    pub(crate) fn next_gen(&self) -> u64 {
        self.next_gen.load(Ordering::Relaxed)
    }

    /// Live bytes of `region` now.
    pub(crate) fn live_of(&self, region: u32) -> u64 {
        self.live[region as usize].load(Ordering::Relaxed)
    }

    /// Forgets `region`'s live bytes: only by the reclaimer that claimed it (nobody
    /// else adjusts them without a pin).
    pub(crate) fn reset_live(&self, region: u32) {
        let was_live = self.live[region as usize].swap(0, Ordering::Relaxed);
        self.bytes_live.fetch_sub(was_live, Ordering::Relaxed);
    }

    /// A staging buffer for one reclaim, reused if one is free.
    pub(crate) fn take_scratch(&self) -> Vec<u8> {
        let mut pool = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        pool.pop().unwrap_or_default()
    }

    /// Gives a staging buffer back for the next reclaim.
    pub(crate) fn put_scratch(&self, buf: Vec<u8>) {
        self.scratch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(buf);
    }
}

/// Where the bytes of a volume's cap are now: how much of the cap holds entries the
/// index reaches, and where the rest goes. The store benchmark's replay reads it
/// against the exact-LRU model, which counts only key + meta + body and holds its
/// whole cap in them.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpaceBreakdown {
    /// The configured cap: the sum of every other byte count here.
    pub cap_bytes: u64,
    /// The volume header and the tail of the cap too short for another region.
    pub unregioned_bytes: u64,
    /// One `REGION_HEADER_BYTES` per region.
    pub region_header_bytes: u64,
    /// Key, tags, meta and body of live entries (what the exact-LRU model counts).
    pub live_payload_bytes: u64,
    /// Entry headers and alignment of live entries. Measured in the sealed regions
    /// and assumed at the same share of live bytes elsewhere (open regions are being
    /// written).
    pub live_overhead_bytes: u64,
    /// Overwritten, removed or carried-away entries in sealed regions.
    pub sealed_dead_bytes: u64,
    /// Room a sealed region had left when the next entry did not fit.
    pub sealed_tail_bytes: u64,
    /// Dead entries in the open regions (active, ready, cold) and regions being reclaimed.
    pub open_dead_bytes: u64,
    /// Room not yet written in open regions, and never-used regions.
    pub open_room_bytes: u64,
    /// Regions sealed (full, waiting to be reclaimed).
    pub sealed_regions: u32,
    /// Regions open or in between: active, ready, cold, being reclaimed, never used.
    pub open_regions: u32,
}
