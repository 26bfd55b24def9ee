//! [`Shared`]: the state a [`Store`](crate::Store) and its handles share, and the
//! operations on one entry that the read path, the write path and reclaim all use:
//! finding and checking an entry, publishing it, retiring the entry a key leaves.
//!
//! Below `store` (which opens volumes and implements the engine), `reclaim` (which
//! adds space management to `Shared`) and `handle` (which reads through it): they all
//! point down here, and this module points only further down, to the parts it holds.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::admission::{Boundary, Sketch};
use crate::counters::Striped;
use crate::error::Result;
use crate::index::{Index, Loc};
use crate::layout::{self, EntryHeader, VolumeHeader};
use crate::layout::{ENTRY_HEADER_BYTES, VOLUME_HEADER_BYTES};
use crate::options::Options;
use crate::ram_tier::RamTier;
use crate::recovery::Recovered;
use crate::region::RegionTable;
use crate::space::Space;
use crate::tags::TagIndex;
use crate::volume::Volume;

/// State every handle and the store share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) volume: Volume,
    pub(crate) regions: RegionTable,
    pub(crate) header: VolumeHeader,
    pub(crate) index: Index,
    pub(crate) sketch: Sketch,
    /// What reclaim evicts, per byte: admission's bar for a first request.
    pub(crate) boundary: Boundary,
    pub(crate) ram: Option<RamTier>,
    pub(crate) options: Options,
    pub(crate) object_bytes_max: u64,
    pub(crate) space: Space,
    tags: Mutex<TagIndex>,
    pub(crate) hits: Striped,
    pub(crate) misses: Striped,
    pub(crate) ram_hits: Striped,
    pub(crate) admitted: AtomicU64,
    pub(crate) rejected: AtomicU64,
    pub(crate) evicted: AtomicU64,
    pub(crate) carried: AtomicU64,
    pub(crate) entries: AtomicU64,
    /// Set by [`Store::abandon`]: dropping closes nothing.
    pub(crate) abandoned: AtomicBool,
    /// Whether lookups check residency now (`crate::residency`).
    pub(crate) pressure: std::sync::Arc<crate::residency::Pressure>,
}

impl Shared {
    /// The state of a store opened on `volume`, from what recovery (or formatting)
    /// found there.
    pub(crate) fn new(
        volume: Volume,
        header: VolumeHeader,
        recovered: Recovered,
        options: Options,
        object_bytes_max: u64,
    ) -> Shared {
        let entries = recovered.index.len();
        Shared {
            regions: RegionTable::new(&recovered.space.gens),
            header,
            index: recovered.index,
            sketch: Sketch::for_cap(header.cap_bytes),
            boundary: Boundary::default(),
            ram: (options.ram_tier_bytes > 0).then(|| RamTier::new(options.ram_tier_bytes)),
            pressure: crate::residency::Pressure::start(options.residency),
            options,
            object_bytes_max,
            space: Space::new(recovered.space),
            tags: Mutex::new(recovered.tags),
            hits: Striped::default(),
            misses: Striped::default(),
            ram_hits: Striped::default(),
            admitted: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            carried: AtomicU64::new(0),
            entries: AtomicU64::new(entries),
            abandoned: AtomicBool::new(false),
            volume,
        }
    }

    pub(crate) fn close(&self) -> Result<()> {
        self.volume.flush()?;
        self.volume
            .header_word(layout::VOLUME_CLEAN_AT)
            .store(layout::CLEAN_MARKER, Ordering::SeqCst);
        self.volume.flush_range(0, VOLUME_HEADER_BYTES)
    }

    pub(crate) fn entry_off(&self, loc: Loc) -> u64 {
        self.header.region_start(loc.region) + u64::from(loc.offset16) * layout::ENTRY_ALIGN
    }

    /// The header of the entry at `loc`, if it is one of the region's current
    /// generation. The caller holds a pin on `loc.region`.
    pub(crate) fn entry_header(&self, loc: Loc) -> Option<(EntryHeader, u64)> {
        let off = self.entry_off(loc);
        let room = self.header.region_bytes - u64::from(loc.offset16) * layout::ENTRY_ALIGN;
        // SAFETY: the caller pins the region, so no one rewrites the entry; the flags
        // word is read atomically inside.
        let raw = unsafe { self.volume.read_entry_header(off) };
        let h = EntryHeader::decode(&raw, self.regions.gen32(loc.region), room)?;
        Some((h, off))
    }

    /// Reads and checks the entry at `loc` for `key`. The caller holds a pin on
    /// `loc.region`. Returns the header and the entry's offset.
    pub(crate) fn check_entry(&self, loc: Loc, key: &[u8]) -> Option<(EntryHeader, u64)> {
        let (h, off) = self.entry_header(loc)?;
        if h.key_len as usize != key.len() {
            return None;
        }
        let p = self.payload(off, &h);
        (&p[..key.len()] == key).then_some((h, off))
    }

    /// The payload (key, tags, meta, body) of the entry at `off`. The caller holds a
    /// pin on its region or has claimed it.
    pub(crate) fn payload(&self, off: u64, h: &EntryHeader) -> &[u8] {
        // SAFETY: inside a decoded entry of a region the caller pins or owns.
        unsafe { self.volume.slice(off + ENTRY_HEADER_BYTES, h.payload_len()) }
    }

    /// Whether the entry at `off` carries `tag` (same precondition as `payload`).
    pub(crate) fn entry_has_tag(&self, off: u64, h: &EntryHeader, tag: &[u8]) -> bool {
        let p = self.payload(off, h);
        let tags = &p[h.key_len as usize..(h.key_len + h.tags_len) as usize];
        layout::decode_tags(tags).any(|t| t == tag)
    }

    /// The tag hashes of the entry at `off` (same precondition as `payload`).
    pub(crate) fn entry_tags(&self, off: u64, h: &EntryHeader) -> Vec<u64> {
        if h.tags_len == 0 {
            return Vec::new();
        }
        let p = self.payload(off, h);
        let tags = &p[h.key_len as usize..(h.key_len + h.tags_len) as usize];
        layout::decode_tags(tags).map(layout::hash_tag).collect()
    }

    pub(crate) fn lock_tags(&self) -> MutexGuard<'_, TagIndex> {
        self.tags.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn drop_tags(&self, hash: u64, tags: &[u64]) {
        if !tags.is_empty() {
            self.lock_tags().remove(hash, tags.iter().copied());
        }
    }

    /// Frees the RAM copy of `hash`, if any (its index entry changed).
    pub(crate) fn forget_copy(&self, hash: u64) {
        if let Some(ram) = &self.ram {
            ram.drop_copy(hash);
        }
    }

    /// The entry at `loc` leaves the index (the caller holds `hash`'s shard lock and
    /// removes or replaces it): mark it dead on disk so recovery never brings it back,
    /// drop its tags and live bytes. If its region is being reclaimed the pin fails and
    /// there is nothing to do: reclaim invalidated the region on disk first and resets
    /// its live bytes. With `key`, the stored key must match (else it is another key
    /// with the same hash, and nothing is done). Returns whether the index entry should go.
    pub(crate) fn retire(&self, hash: u64, loc: Loc, key: Option<&[u8]>) -> bool {
        if !self.regions.pin(loc.region, loc.gen18) {
            self.forget_copy(hash);
            return true;
        }
        let found = match key {
            Some(k) => self.check_entry(loc, k),
            None => self.entry_header(loc),
        };
        if let Some((h, off)) = found {
            self.volume.store_flags(off, layout::FLAGS_DEAD);
            self.space.sub_live(loc.region, h.stride());
            let tags = self.entry_tags(off, &h);
            self.drop_tags(hash, &tags);
            self.forget_copy(hash);
        }
        self.regions.unpin(loc.region);
        found.is_some()
    }

    /// Makes the entry written at `loc` the one `hash` maps to.
    pub(crate) fn publish(&self, hash: u64, loc: Loc, stride: u64, tags: &[&[u8]]) {
        let replaced = self.index.update(hash, |old| {
            if let Some(old) = old {
                self.retire(hash, old, None);
            }
            if !tags.is_empty() {
                self.lock_tags()
                    .add(hash, tags.iter().map(|t| layout::hash_tag(t)));
            }
            // Counted before the key is visible, so a racing remove's retire never
            // subtracts bytes not yet added.
            self.space.add_live(loc.region, stride);
            (Some(loc), old.is_some())
        });
        if !replaced {
            self.entries.fetch_add(1, Ordering::Relaxed);
        }
    }
}
