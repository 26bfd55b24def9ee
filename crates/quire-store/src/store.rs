//! [`Store`]: the memory-mapped engine — opening, the read path, and publishing.
//!
//! Read path (`get`): hash the key, look it up in the index (a shard read lock held for
//! one table probe), pin the region with the location's generation, check the entry
//! header and the full key in the mapping, return a [`Handle`]. No allocation, no I/O,
//! no lock a writer holds while copying bytes.
//!
//! Write path (`put`): reserve bytes in the active region (`reclaim`: a bump of the write
//! head under a short lock), copy the entry there with no lock held, then publish it
//! under the key's index shard lock: mark the entry it replaces dead on disk first (so
//! recovery never prefers it), then point the index at the new one. `remove` and
//! `remove_tagged` go through the same shard lock. When a put takes the last prepared
//! region it reclaims the next one inline after publishing (see `reclaim`). The volume
//! never grows: the cap holds by construction.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::engine::{Engine, EntryRef, Put, Stats};
use crate::error::{Result, StoreError};
use crate::handle::Handle;
use crate::index::{Loc, REGIONS_MAX};
use crate::layout::{self, EntryHeader, VolumeHeader};
use crate::layout::{ENTRY_HEADER_BYTES, REGION_HEADER_BYTES, VOLUME_HEADER_BYTES};
use crate::options::Options;
use crate::ram_tier::{self, RamTier};
use crate::recovery::{self, OpenReport, Probe};
use crate::shared::Shared;
pub use crate::space::SpaceBreakdown;
use crate::volume::Volume;

/// The memory-mapped store. See the crate and module docs.
#[derive(Debug)]
pub struct Store {
    shared: Arc<Shared>,
}

fn layout_for(cap_bytes: u64, options: &Options) -> Result<(VolumeHeader, u64)> {
    let bad = |m: String| Err(StoreError::InvalidOptions(m));
    let region_bytes = options
        .region_bytes
        .unwrap_or_else(|| layout::default_region_bytes(cap_bytes));
    if !region_bytes.is_power_of_two()
        || !(layout::REGION_BYTES_MIN..=layout::REGION_BYTES_MAX).contains(&region_bytes)
    {
        return bad(format!(
            "region size {region_bytes} must be a power of two between {} and {}",
            layout::REGION_BYTES_MIN,
            layout::REGION_BYTES_MAX
        ));
    }
    let region_count = cap_bytes.saturating_sub(VOLUME_HEADER_BYTES) / region_bytes;
    if region_count < 2 {
        return bad(format!(
            "cap of {cap_bytes} bytes holds fewer than 2 regions of {region_bytes} bytes"
        ));
    }
    if region_count >= REGIONS_MAX {
        return bad(format!(
            "{region_count} regions is more than the index can address"
        ));
    }
    let room = region_bytes - REGION_HEADER_BYTES;
    let object_bytes_max = options.max_object_bytes.unwrap_or(room);
    if object_bytes_max > room || object_bytes_max < ENTRY_HEADER_BYTES {
        return bad(format!(
            "max object size {object_bytes_max} must be between {ENTRY_HEADER_BYTES} and \
             the region's room of {room} bytes"
        ));
    }
    if !(0.0..=0.9).contains(&options.carry_share) {
        return bad(format!(
            "carry_share {} must be within 0..=0.9",
            options.carry_share
        ));
    }
    let header = VolumeHeader {
        cap_bytes,
        region_bytes,
        region_count: region_count as u32,
    };
    Ok((header, object_bytes_max))
}

impl Store {
    /// Opens the volume at `path` with a cap of `cap_bytes`, creating it if missing.
    ///
    /// An existing quire volume is recovered (warm restart). One that is damaged, of
    /// another format version, or laid out for another cap is logged and started cold.
    /// A file that is not a quire volume at all is an error and is left untouched.
    /// The volume is locked (`flock`, exclusive) while the store is open; a second
    /// store on the same file, in this process or another, is refused with
    /// [`StoreError::InUse`].
    ///
    /// The out-of-process contract: while a store has the file open, nothing else
    /// may write, truncate or replace it. The store maps the file shared; a truncation
    /// under the mapping turns the next read of a lost page into `SIGBUS` for the
    /// whole process, and a write would be served as cached bytes. The lock keeps
    /// other quire processes out; tools that only read (see [`crate::format`]) may
    /// read the file at any time and see the last flushed state, and anything that
    /// writes must stop quire first. After a crash the file is recovered at the next
    /// open, entry by entry, from what its checksums prove.
    pub fn open(path: impl AsRef<Path>, cap_bytes: u64, options: Options) -> Result<Store> {
        Self::open_with_report(path, cap_bytes, options).map(|(s, _)| s)
    }

    /// [`Store::open`], also saying what recovery found.
    pub fn open_with_report(
        path: impl AsRef<Path>,
        cap_bytes: u64,
        options: Options,
    ) -> Result<(Store, OpenReport)> {
        let path = path.as_ref();
        let (header, object_bytes_max) = layout_for(cap_bytes, &options)?;
        let probe = recovery::probe(path, &header)?;
        let usable = matches!(probe, Probe::Usable { .. });
        let used = header.region_start(header.region_count);
        let (mut volume, wiped) = Volume::open(path, cap_bytes, used, !usable)?;
        // Before the scan or format touches a page, so every folio they bring in is
        // already of the size the hits will read.
        let memory = crate::huge_pages::memory_limit();
        let huge_pages = options.huge_pages.wanted(cap_bytes, memory)
            && volume.advise_huge(crate::huge_pages::huge_page_bytes());
        tracing::info!(
            path = %path.display(),
            huge_pages,
            memory_limit = memory,
            "volume mapped"
        );
        let mut report = OpenReport::default();
        let recovered = match probe {
            Probe::Usable { clean } if !wiped => {
                report.was_clean = clean;
                recovery::scan(&volume, &header, &mut report)
            }
            other => {
                let was_missing = matches!(other, Probe::Missing);
                let why = match other {
                    Probe::Unusable(why) => why,
                    Probe::Usable { .. } => "file size differs from the cap (truncated?)".into(),
                    Probe::Missing => "new volume".into(),
                };
                if !was_missing {
                    tracing::warn!(path = %path.display(), reason = %why, "volume unusable: starting cold");
                }
                report.cold_start = Some(why);
                // Only an emptied file may be formatted: format leaves the region
                // headers as the zeros the truncation made.
                assert!(wiped, "formatting a volume that was not emptied");
                recovery::format(&volume, &header)?
            }
        };
        // From now on a crash must not look like an orderly close.
        volume
            .header_word(layout::VOLUME_CLEAN_AT)
            .store(0, Ordering::SeqCst);
        volume.flush_range(0, VOLUME_HEADER_BYTES)?;
        if !wiped {
            crate::huge_pages::release_free_regions(&volume, &header, &recovered.space.free);
        }
        report.entries = recovered.index.len();

        let shared = Shared::new(volume, header, recovered, options, object_bytes_max);
        Ok((
            Store {
                shared: Arc::new(shared),
            },
            report,
        ))
    }

    /// Flushes the volume and marks it clean. Dropping a `Store` does the same,
    /// logging errors.
    pub fn close(self) -> Result<()> {
        self.shared.close()
    }

    /// Lets go of the store as a crash would (for crash tests): nothing is flushed
    /// and the volume is not marked clean, so the next open recovers it as after a
    /// kill. The file — and its lock — is released once the last handle is gone.
    pub fn abandon(self) {
        self.shared.abandoned.store(true, Ordering::Relaxed);
    }

    /// The largest object `put` accepts (entry header, key, tags, meta and body).
    pub fn object_bytes_max(&self) -> u64 {
        self.shared.object_bytes_max
    }

    /// The volume's layout.
    pub fn region_bytes(&self) -> u64 {
        self.shared.header.region_bytes
    }

    /// Where the volume is mapped: `(address, length)`. A byte of a handle's body at
    /// address `a` inside this span is the volume file's byte at offset `a - address`,
    /// so a writer holding the handle may send it with `sendfile` from
    /// [`Store::volume_fd`] instead of copying it.
    pub fn mapping(&self) -> (usize, u64) {
        self.shared.volume.span()
    }

    /// The volume file, for `sendfile` (see [`Store::mapping`]).
    pub fn volume_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.shared.volume.fd()
    }

    /// Where the bytes of the cap are now (see [`SpaceBreakdown`]): a diagnostic that
    /// walks every sealed region's entries, so not for a hot path.
    pub fn space_breakdown(&self) -> SpaceBreakdown {
        self.shared.space_breakdown()
    }
}

impl Store {
    /// The hit behind an index location: from the RAM tier if it holds a copy of
    /// exactly this location, else pinned in the mapping (promoting it to RAM if this
    /// is its second hit since it was written).
    fn fetch(&self, hash: u64, loc: Loc, key: &[u8]) -> Option<Handle> {
        let s = &*self.shared;
        if let Some(e) = s.ram.as_ref().and_then(|r| r.get(hash, loc, key)) {
            s.ram_hits.add(1);
            return Some(Handle::from_ram(self.shared.clone(), e));
        }
        if !s.regions.pin(loc.region, loc.gen18) {
            return None;
        }
        let Some((h, off)) = s.check_entry(loc, key).filter(|(h, off)| {
            !s.options.verify_reads || h.compute_checksum(s.payload(*off, h)) == h.checksum
        }) else {
            s.regions.unpin(loc.region);
            return None;
        };
        let meta = (off + h.meta_at(), u64::from(h.meta_len));
        let body = (off + h.body_at(), u64::from(h.body_len));
        let handle = Handle::new(self.shared.clone(), (loc.region, off), meta, body);
        if let Some(ram) = &s.ram {
            if loc.freq > 0 && h.stride() <= ram_tier::OBJECT_BYTES_MAX {
                ram.promote(hash, loc, key, handle.meta(), handle.body());
            }
        }
        Some(handle)
    }
}

/// What [`Store::get_resident`] found.
#[derive(Debug)]
pub enum Fetched {
    /// The entry, in memory (or the checks are off).
    Hit(Handle),
    /// No entry for the key.
    Miss,
    /// An entry whose pages are not all in memory: reading it now would wait on the
    /// disk. [`Store::warm`] it off the request path, then look it up again.
    Cold(Cold),
}

/// An entry not in memory, found by [`Store::get_resident`].
#[derive(Debug, Clone, Copy)]
pub struct Cold {
    loc: Loc,
}

impl Store {
    /// [`Engine::get`], unless reading the entry would wait on the disk: under
    /// memory pressure (see `crate::residency`) the entry's pages are checked
    /// (`mincore`) before they are touched, and an entry not in memory is answered
    /// [`Fetched::Cold`] without reading it. A RAM-tier copy is always a hit. Hits and
    /// misses are counted as `get` counts them; a cold entry is counted by the
    /// lookup that follows its warming.
    pub fn get_resident(&self, key: &[u8]) -> Fetched {
        self.resident(key, false)
    }

    /// [`Store::get_resident`] for the cache's own reads, as [`Store::get_quiet`]:
    /// not a hit.
    pub fn get_resident_quiet(&self, key: &[u8]) -> Fetched {
        self.resident(key, true)
    }

    fn resident(&self, key: &[u8], quiet: bool) -> Fetched {
        let s = &*self.shared;
        let read = |key: &[u8]| {
            match quiet {
                true => self.get_quiet(key),
                false => self.get(key),
            }
            .map_or(Fetched::Miss, Fetched::Hit)
        };
        if !s.pressure.on() {
            return read(key);
        }
        let hash = layout::hash_key(key);
        let Some(loc) = s.index.peek(hash) else {
            return read(key);
        };
        let in_ram = s.ram.as_ref().is_some_and(|r| r.holds(hash, loc));
        if !in_ram && !self.entry_resident(loc) {
            return Fetched::Cold(Cold { loc });
        }
        read(key)
    }

    /// Whether the entry at `loc` is in memory (its header page, then all of it).
    fn entry_resident(&self, loc: Loc) -> bool {
        let s = &*self.shared;
        if !s.regions.pin(loc.region, loc.gen18) {
            return true; // being reclaimed: the lookup will miss without reading it
        }
        let off = s.entry_off(loc);
        let resident = s.volume.resident(off, layout::ENTRY_HEADER_BYTES)
            && s.entry_header(loc)
                .is_none_or(|(h, off)| s.volume.resident(off, h.stride()));
        s.regions.unpin(loc.region);
        resident
    }

    /// The store's state, for the crate's own tests.
    #[cfg(test)]
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Drops `key`'s entry from memory as pressure would (tests of cold reads).
    #[cfg(test)]
    pub(crate) fn evict_entry(&self, key: &[u8]) {
        let s = &*self.shared;
        let loc = s.index.peek(layout::hash_key(key)).expect("stored");
        let (h, off) = s.entry_header(loc).expect("an entry");
        s.volume.page_out(off, h.stride()).expect("paged out");
    }

    /// Drops the whole volume from memory (written back first), as memory pressure
    /// would: for tests and benchmarks of a cache bigger than memory. The next read
    /// of each entry waits on the disk (or, with residency checks on, is answered
    /// [`Fetched::Cold`]).
    pub fn page_out(&self) -> Result<()> {
        let s = &*self.shared;
        s.volume.page_out(0, s.volume.len())
    }

    /// Brings a cold entry into memory (reads it ahead and touches every page):
    /// blocks on the disk, so call it where a thread may wait (`spawn_blocking`).
    /// An entry reclaimed meanwhile is skipped.
    pub fn warm(&self, cold: &Cold) {
        let s = &*self.shared;
        let loc = cold.loc;
        if !s.regions.pin(loc.region, loc.gen18) {
            return;
        }
        let off = s.entry_off(loc);
        s.volume.warm(off, layout::ENTRY_HEADER_BYTES);
        if let Some((h, off)) = s.entry_header(loc) {
            s.volume.warm(off, h.stride());
        }
        s.regions.unpin(loc.region);
    }

    /// [`Engine::get`] for the cache's own reads (a rewrite, a purge looking at what
    /// it removes): not a hit. It leaves the entry's hit counter, the hit and miss
    /// counts, the admission sketch and the RAM tier as they were, so background work
    /// never makes an entry look read.
    pub fn get_quiet(&self, key: &[u8]) -> Option<Handle> {
        let s = &*self.shared;
        let hash = layout::hash_key(key);
        let loc = s.index.peek(hash)?;
        // A counter of 0 promotes nothing into the RAM tier.
        self.fetch(hash, Loc { freq: 0, ..loc }, key)
    }

    /// How often `key`'s entry was hit lately (the reclaim policy's counter, 0..=3:
    /// bumped by each lookup until it saturates, lowered as the reclaimer passes), or
    /// `None` when nothing is stored under it. Marks nothing. Keys that share an index
    /// slot (see `crate::index`) share the answer: a hint, never a lookup.
    pub fn hits_lately(&self, key: &[u8]) -> Option<u8> {
        self.shared
            .index
            .peek(layout::hash_key(key))
            .map(|loc| loc.freq)
    }

    /// Whether a `put` of `key` now would pass admission (it may still be declined for
    /// lack of reclaimable space). Records nothing. Without the object's size only the
    /// doorkeeper applies (the key was counted twice), so this may say no where `put`
    /// would admit a small first request. For callers that store one logical object as
    /// several entries: decide once, on the entry that makes the others reachable, then
    /// write the parts with [`Store::put_admitted`].
    pub fn admits(&self, key: &[u8]) -> bool {
        let s = &*self.shared;
        let hash = layout::hash_key(key);
        !s.options.admission
            || !s.space.full.load(Ordering::Relaxed)
            || s.index.peek(hash).is_some()
            || s.sketch.admits(hash)
    }

    /// `put` without the admission check: the caller decided with [`Store::admits`]
    /// for the object this entry is part of. Still `Rejected` when no space can be
    /// reclaimed. The body is given in parts, written one after the other into the
    /// entry, so a caller holding several pieces (an object's bodies per coding)
    /// never concatenates them in memory first.
    pub fn put_admitted(
        &self,
        key: &[u8],
        meta: &[u8],
        body: &[&[u8]],
        tags: &[&[u8]],
    ) -> Result<Put> {
        self.put_inner(key, meta, body, tags, false)
    }

    /// The full keys of the live entries labelled `tag` (each checked against the
    /// entry's own tag list, so a tag-hash collision never lists a stranger). A copy:
    /// entries may change before the caller acts on it.
    pub fn tagged_keys(&self, tag: &[u8]) -> Vec<Vec<u8>> {
        let s = &*self.shared;
        let members = s.lock_tags().members(layout::hash_tag(tag));
        let mut keys = Vec::with_capacity(members.len());
        for hash in members {
            let Some(loc) = s.index.peek(hash) else {
                continue;
            };
            if !s.regions.pin(loc.region, loc.gen18) {
                continue;
            }
            if let Some((h, off)) = s.entry_header(loc) {
                if s.entry_has_tag(off, &h, tag) {
                    keys.push(s.payload(off, &h)[..h.key_len as usize].to_vec());
                }
            }
            s.regions.unpin(loc.region);
        }
        keys
    }

    /// `put`, with the admission check only when `check_admission`.
    fn put_inner(
        &self,
        key: &[u8],
        meta: &[u8],
        body: &[&[u8]],
        tags: &[&[u8]],
        check_admission: bool,
    ) -> Result<Put> {
        let s = &*self.shared;
        validate(key, tags)?;
        let payload_len =
            key.len() as u64 + layout::tags_len(tags) + meta.len() as u64 + parts_len(body);
        let stride = layout::entry_stride(payload_len);
        if stride > s.object_bytes_max {
            return Err(StoreError::TooLarge {
                size_bytes: stride,
                limit_bytes: s.object_bytes_max,
            });
        }
        let hash = layout::hash_key(key);
        if check_admission
            && s.options.admission
            && s.space.full.load(Ordering::Relaxed)
            && s.index.peek(hash).is_none()
            && !s.sketch.admits_sized(hash, stride, s.boundary.get())
        {
            // A put is an access too: a key written blind and then asked for is
            // admitted on that first miss.
            s.sketch.record(hash);
            s.rejected.fetch_add(1, Ordering::Relaxed);
            return Ok(Put::Rejected);
        }
        s.sketch.age_if_due();
        let slot = match s.reserve(stride) {
            Ok(slot) => slot,
            Err(StoreError::NoSpace) => {
                s.rejected.fetch_add(1, Ordering::Relaxed);
                return Ok(Put::Rejected);
            }
            Err(e) => return Err(e),
        };
        let entry = Entry {
            key,
            tags,
            meta,
            body,
        };
        let off = s.header.region_start(slot.region) + slot.head;
        // SAFETY: the reservation gave this writer bytes [head, head + stride) of its
        // region alone; no published entry covers them, so no reader reads them before
        // `publish` below, and the slot's pin keeps reclaim away.
        unsafe { entry.write(&s.volume, off, slot.gen as u32) };
        let loc = Loc::at(slot.region, slot.head, slot.gen);
        s.publish(hash, loc, stride, tags);
        s.regions.unpin(slot.region);
        s.admitted.fetch_add(1, Ordering::Relaxed);
        if slot.refill {
            s.refill();
        }
        Ok(Put::Stored)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if self.shared.abandoned.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = self.shared.close() {
            tracing::warn!(error = %e, "closing volume");
        }
    }
}

impl Engine for Store {
    type Entry = Handle;

    fn put(&self, key: &[u8], meta: &[u8], body: &[u8], tags: &[&[u8]]) -> Result<Put> {
        self.put_inner(key, meta, &[body], tags, true)
    }

    fn get(&self, key: &[u8]) -> Option<Handle> {
        let s = &*self.shared;
        let hash = layout::hash_key(key);
        match s
            .index
            .lookup_and_mark(hash)
            .and_then(|loc| self.fetch(hash, loc, key))
        {
            Some(h) => {
                s.hits.add(1);
                Some(h)
            }
            None => {
                s.misses.add(1);
                s.sketch.record(hash);
                None
            }
        }
    }

    fn remove(&self, key: &[u8]) -> Result<bool> {
        let s = &*self.shared;
        let hash = layout::hash_key(key);
        let removed = s.index.update(hash, |cur| match cur {
            Some(loc) if s.retire(hash, loc, Some(key)) => (None, true),
            other => (other, false),
        });
        if removed {
            s.entries.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(removed)
    }

    fn remove_tagged(&self, tag: &[u8]) -> Result<usize> {
        let s = &*self.shared;
        let members = s.lock_tags().members(layout::hash_tag(tag));
        let mut removed = 0;
        for hash in members {
            let gone = s.index.update(hash, |cur| {
                let Some(loc) = cur else {
                    return (None, false);
                };
                if !s.regions.pin(loc.region, loc.gen18) {
                    // Being reclaimed: dropping the key is all there is left to do.
                    s.forget_copy(hash);
                    return (None, true);
                }
                let tagged = s
                    .entry_header(loc)
                    .is_some_and(|(h, off)| s.entry_has_tag(off, &h, tag));
                s.regions.unpin(loc.region);
                if tagged && s.retire(hash, loc, None) {
                    (None, true)
                } else {
                    (cur, false)
                }
            });
            if gone {
                s.entries.fetch_sub(1, Ordering::Relaxed);
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn stats(&self) -> Stats {
        let s = &*self.shared;
        Stats {
            hits: s.hits.sum(),
            misses: s.misses.sum(),
            admitted: s.admitted.load(Ordering::Relaxed),
            rejected: s.rejected.load(Ordering::Relaxed),
            evicted: s.evicted.load(Ordering::Relaxed),
            carried: s.carried.load(Ordering::Relaxed),
            ram_hits: s.ram_hits.sum(),
            bytes_used: s.space.bytes_used.load(Ordering::Relaxed),
            bytes_live: s.space.bytes_live.load(Ordering::Relaxed),
            cap_bytes: s.header.cap_bytes,
            entries: s.entries.load(Ordering::Relaxed),
            index_bytes: s.index.bytes(),
            tag_index_bytes: s.lock_tags().bytes(),
            ram_bytes: s.ram.as_ref().map_or(0, RamTier::bytes),
            huge_pages: s.volume.huge().is_some(),
        }
    }

    fn name(&self) -> &'static str {
        "quire"
    }
}

fn validate(key: &[u8], tags: &[&[u8]]) -> Result<()> {
    let long = |what, len, limit| Err(StoreError::FieldTooLong { what, len, limit });
    if key.len() > layout::KEY_BYTES_MAX {
        return long("key", key.len(), layout::KEY_BYTES_MAX);
    }
    if tags.len() > layout::TAGS_MAX {
        return long("tag list", tags.len(), layout::TAGS_MAX);
    }
    if let Some(t) = tags.iter().find(|t| t.len() > layout::TAG_BYTES_MAX) {
        return long("tag", t.len(), layout::TAG_BYTES_MAX);
    }
    Ok(())
}

/// Bytes of a body given in parts.
fn parts_len(parts: &[&[u8]]) -> u64 {
    parts.iter().map(|p| p.len() as u64).sum()
}

/// An entry to be written: the pieces, in on-disk order (the body in parts).
struct Entry<'a> {
    key: &'a [u8],
    tags: &'a [&'a [u8]],
    meta: &'a [u8],
    body: &'a [&'a [u8]],
}

impl Entry<'_> {
    /// Writes header and payload at `off` with generation `gen`.
    ///
    /// # Safety
    /// As for [`Volume::write`]: writer lock held, bytes unreachable by readers.
    unsafe fn write(&self, volume: &Volume, off: u64, gen: u32) {
        let mut tag_bytes = vec![0u8; layout::tags_len(self.tags) as usize];
        layout::encode_tags(self.tags, &mut tag_bytes);
        let mut h = EntryHeader {
            flags: 0,
            gen,
            key_len: self.key.len() as u32,
            tags_len: tag_bytes.len() as u32,
            meta_len: self.meta.len() as u32,
            body_len: parts_len(self.body) as u32,
            checksum: 0,
        };
        let mut x = xxhash_rust::xxh3::Xxh3::new();
        let mut fixed = [0u8; ENTRY_HEADER_BYTES as usize];
        h.encode(&mut fixed);
        x.update(&fixed[..32]);
        let parts = [self.key, &tag_bytes[..], self.meta]
            .into_iter()
            .chain(self.body.iter().copied());
        for p in parts.clone() {
            x.update(p);
        }
        h.checksum = x.digest();
        h.encode(&mut fixed);
        let mut at = off + ENTRY_HEADER_BYTES;
        for p in parts {
            // SAFETY: forwarded from the caller.
            unsafe { volume.write(at, p) };
            at += p.len() as u64;
        }
        // Header last: a scan that finds a valid header finds the payload written too
        // (and the checksum catches a torn write either way).
        // SAFETY: forwarded from the caller.
        unsafe { volume.write(off, &fixed) };
    }
}
