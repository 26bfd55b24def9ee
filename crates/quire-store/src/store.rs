//! [`Store`]: the memory-mapped engine — opening, the read path, and the writer.
//!
//! Read path (`get`): hash the key, look it up in the index (a shard read lock held for
//! one table probe), pin the region with the location's generation, check the entry
//! header and the full key in the mapping, return a [`Handle`]. No allocation, no I/O,
//! no lock the writer holds while copying bytes.
//!
//! Write path (`put`, `remove`, `remove_tagged`): one writer at a time, behind the
//! writer lock, which readers never take. A put copies the entry into the active
//! region past every published entry, then publishes its location in the index. When
//! the active region is full the writer takes a free region or reclaims the oldest
//! sealed one inline (`reclaim`): claim it (fails if a reader pins it; then the next
//! oldest is tried), drop its entries from the index — carrying those hit since they
//! were written forward into the fresh region, within `carry_share` of it — and start
//! writing there. The volume never grows: the cap holds by construction.
//!
//! Lifecycle of a region: `free → active → sealed → (claimed) → active → ...`; free
//! regions exist only until the volume first fills.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::admission::Sketch;
use crate::counters::Striped;
use crate::engine::{Engine, EntryRef, Put, Stats};
use crate::handle::Handle;
use crate::index::{Index, Loc, REGIONS_MAX};
use crate::layout::{self, EntryHeader, RegionHeader, VolumeHeader};
use crate::layout::{ENTRY_HEADER_BYTES, REGION_HEADER_BYTES, VOLUME_HEADER_BYTES};
use crate::ram_tier::{self, RamTier};
use crate::recovery::{self, Probe};
use crate::region::{loc_gen, RegionTable};
use crate::tags::TagIndex;
use crate::volume::Volume;
use crate::{Result, StoreError};

/// How a [`Store`] is laid out and behaves. `Options::default()` is what quire uses.
#[derive(Debug, Clone)]
pub struct Options {
    /// Region size; `None` derives it from the cap (about 1/64 of it, a power of two
    /// between 64 KiB and 16 MiB) so reclaiming one region frees under 2 % of the cap.
    pub region_bytes: Option<u64>,
    /// Largest object (key + tags + meta + body + entry header) accepted; `None` means
    /// whatever fits in a region. Larger puts fail with [`StoreError::TooLarge`].
    pub max_object_bytes: Option<u64>,
    /// Admission policy on: once the volume is full, a new key is written only if it
    /// has missed before recently (a count-min sketch of misses), so one-hit wonders do
    /// not flush the working set.
    pub admission: bool,
    /// Bytes of RAM for the hot-set tier (0 turns it off).
    pub ram_tier_bytes: u64,
    /// Share of each reclaimed region that may be spent carrying live entries forward,
    /// most-hit first (0.0 turns carrying off; at most 0.9). Higher keeps more of the
    /// volume live (less space lost to overwritten entries) at the cost of copying.
    pub carry_share: f64,
    /// Check each entry's checksum on every `get`, not only when it enters the index
    /// (at write and at recovery). Costs a hash of the body per hit.
    pub verify_reads: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            region_bytes: None,
            max_object_bytes: None,
            admission: true,
            ram_tier_bytes: 0,
            carry_share: 0.5,
            verify_reads: false,
        }
    }
}

/// State every handle and the store share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) volume: Volume,
    pub(crate) regions: RegionTable,
    header: VolumeHeader,
    index: Index,
    sketch: Sketch,
    ram: Option<RamTier>,
    options: Options,
    object_bytes_max: u64,
    writer: Mutex<Writer>,
    hits: Striped,
    misses: Striped,
    ram_hits: Striped,
    admitted: AtomicU64,
    rejected: AtomicU64,
    evicted: AtomicU64,
    carried: AtomicU64,
    entries: AtomicU64,
    bytes_used: AtomicU64,
    bytes_live: AtomicU64,
    tag_bytes: AtomicU64,
}

/// The writer's state; only the holder of the writer lock touches it.
#[derive(Debug)]
pub(crate) struct Writer {
    /// Full generation of each region (0: never written).
    pub gens: Vec<u64>,
    /// Bytes written into each region (its header included; 0 when free).
    pub fill: Vec<u64>,
    /// Bytes of each region's entries that the index still points at.
    pub live: Vec<u64>,
    /// Sealed regions, oldest first: the reclaim order.
    pub sealed: VecDeque<u32>,
    pub free: Vec<u32>,
    pub active: Option<u32>,
    pub next_gen: u64,
    /// True once the volume has had to reclaim (or was full at open): admission on.
    pub full: bool,
    pub tags: TagIndex,
    carry_buf: Vec<u8>,
}

impl Writer {
    /// A writer for a volume of `region_count` regions, all free.
    pub fn empty(region_count: u32) -> Writer {
        Writer {
            gens: vec![0; region_count as usize],
            fill: vec![0; region_count as usize],
            live: vec![0; region_count as usize],
            sealed: VecDeque::new(),
            free: (0..region_count).rev().collect(),
            active: None,
            next_gen: 1,
            full: false,
            tags: TagIndex::default(),
            carry_buf: Vec::new(),
        }
    }
}

/// The memory-mapped store. See the crate and module docs.
#[derive(Debug)]
pub struct Store {
    shared: Arc<Shared>,
}

/// What reopening found, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Why the volume was (re)initialised empty, if it was.
    pub cold_start: Option<String>,
    /// Whether the last close was orderly.
    pub was_clean: bool,
    pub entries: u64,
    /// Regions whose log ended in a damaged entry (torn write, bad checksum).
    pub torn_regions: u32,
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
            "carry_share {} must be within 0..=0.5",
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
        let (volume, wiped) = Volume::open(path, cap_bytes, !usable)?;
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
                recovery::format(&volume, &header)?
            }
        };
        // From now on a crash must not look like an orderly close.
        volume
            .header_word(layout::VOLUME_CLEAN_AT)
            .store(0, Ordering::SeqCst);
        volume.flush_range(0, VOLUME_HEADER_BYTES)?;
        report.entries = recovered.index.len();

        let bytes_used = recovered.writer.fill.iter().sum();
        let expected_keys = cap_bytes / 4096;
        let shared = Shared {
            regions: RegionTable::new(&recovered.writer.gens),
            header,
            index: recovered.index,
            sketch: Sketch::new(expected_keys),
            ram: (options.ram_tier_bytes > 0).then(|| RamTier::new(options.ram_tier_bytes)),
            options,
            object_bytes_max,
            hits: Striped::default(),
            misses: Striped::default(),
            ram_hits: Striped::default(),
            admitted: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            carried: AtomicU64::new(0),
            entries: AtomicU64::new(report.entries),
            bytes_used: AtomicU64::new(bytes_used),
            bytes_live: AtomicU64::new(recovered.writer.live.iter().sum()),
            tag_bytes: AtomicU64::new(recovered.writer.tags.bytes()),
            writer: Mutex::new(recovered.writer),
            volume,
        };
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

    /// The largest object `put` accepts (entry header, key, tags, meta and body).
    pub fn object_bytes_max(&self) -> u64 {
        self.shared.object_bytes_max
    }

    /// The volume's layout.
    pub fn region_bytes(&self) -> u64 {
        self.shared.header.region_bytes
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
        let handle = Handle::new(self.shared.clone(), loc.region, meta, body);
        if let Some(ram) = &s.ram {
            if loc.freq > 0 && h.stride() <= ram_tier::OBJECT_BYTES_MAX {
                ram.promote(hash, loc, key, handle.meta(), handle.body());
            }
        }
        Some(handle)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Err(e) = self.shared.close() {
            tracing::warn!(error = %e, "closing volume");
        }
    }
}

impl Shared {
    fn close(&self) -> Result<()> {
        let _w = self.lock_writer();
        self.volume.flush()?;
        self.volume
            .header_word(layout::VOLUME_CLEAN_AT)
            .store(layout::CLEAN_MARKER, Ordering::SeqCst);
        self.volume.flush_range(0, VOLUME_HEADER_BYTES)
    }

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        // Writer state is updated so that a panic between steps leaves at worst an
        // entry unpublished; the volume is still consistent for readers.
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry_off(&self, loc: Loc) -> u64 {
        self.header.region_start(loc.region) + u64::from(loc.offset16) * layout::ENTRY_ALIGN
    }

    /// Reads and checks the entry at `loc` for `key`. The caller holds a pin on
    /// `loc.region` or is the writer. Returns the header and the entry's offset.
    fn check_entry(&self, loc: Loc, key: &[u8]) -> Option<(EntryHeader, u64)> {
        let off = self.entry_off(loc);
        let room = self.header.region_bytes - u64::from(loc.offset16) * layout::ENTRY_ALIGN;
        // SAFETY: the caller pins the region or is the writer, so no one rewrites the
        // entry; the flags word is read atomically inside.
        let raw = unsafe { self.volume.read_entry_header(off) };
        let gen = self.regions.gen32(loc.region);
        let h = EntryHeader::decode(&raw, gen, room)?;
        if h.key_len as usize != key.len() {
            return None;
        }
        // SAFETY: inside the checked entry, which the pin keeps unchanged.
        let stored_key = unsafe { self.volume.slice(off + h.key_at(), u64::from(h.key_len)) };
        (stored_key == key).then_some((h, off))
    }

    /// Frees the RAM copy of `hash`, if any (its index entry changed).
    fn forget_copy(&self, hash: u64) {
        if let Some(ram) = &self.ram {
            ram.drop_copy(hash);
        }
    }

    fn payload(&self, off: u64, h: &EntryHeader) -> &[u8] {
        // SAFETY: callers hold a pin on the entry's region or the writer lock.
        unsafe { self.volume.slice(off + ENTRY_HEADER_BYTES, h.payload_len()) }
    }
}

impl Engine for Store {
    type Entry = Handle;

    fn put(&self, key: &[u8], meta: &[u8], body: &[u8], tags: &[&[u8]]) -> Result<Put> {
        let s = &*self.shared;
        validate(key, tags)?;
        let payload_len =
            key.len() as u64 + layout::tags_len(tags) + meta.len() as u64 + body.len() as u64;
        let stride = layout::entry_stride(payload_len);
        if stride > s.object_bytes_max {
            return Err(StoreError::TooLarge {
                size_bytes: stride,
                limit_bytes: s.object_bytes_max,
            });
        }
        let hash = layout::hash_key(key);
        let mut w = s.lock_writer();
        if s.options.admission && w.full && s.index.peek(hash).is_none() && !s.sketch.admits(hash) {
            s.rejected.fetch_add(1, Ordering::Relaxed);
            return Ok(Put::Rejected);
        }
        s.sketch.age_if_due();
        let (region, head) = match w.room_for(s, stride) {
            Ok(at) => at,
            Err(StoreError::NoSpace) => {
                s.rejected.fetch_add(1, Ordering::Relaxed);
                return Ok(Put::Rejected);
            }
            Err(e) => return Err(e),
        };
        let gen = w.gens[region as usize];
        let entry = Entry {
            key,
            tags,
            meta,
            body,
        };
        let off = s.header.region_start(region) + head;
        // SAFETY: we hold the writer lock and `head` is past every published entry of
        // the active region (room_for advanced nothing yet), so no reader can see these
        // bytes before the index publishes them below.
        unsafe { entry.write(&s.volume, off, gen as u32) };
        w.fill[region as usize] = head + stride;
        w.add_live(s, region, stride);
        s.bytes_used.fetch_add(stride, Ordering::Relaxed);
        let loc = Loc {
            region,
            offset16: (head / layout::ENTRY_ALIGN) as u32,
            gen18: loc_gen(gen),
            freq: 0,
        };
        match s.index.insert(hash, loc) {
            Some(old) => w.retire(s, hash, old),
            None => {
                s.entries.fetch_add(1, Ordering::Relaxed);
            }
        }
        w.tags.add(hash, tags.iter().map(|t| layout::hash_tag(t)));
        s.tag_bytes.store(w.tags.bytes(), Ordering::Relaxed);
        s.admitted.fetch_add(1, Ordering::Relaxed);
        Ok(Put::Stored)
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
        let mut w = s.lock_writer();
        let Some(loc) = s.index.peek(hash) else {
            return Ok(false);
        };
        if s.check_entry(loc, key).is_none() {
            return Ok(false); // another key with the same hash
        }
        s.index.remove(hash);
        w.retire(s, hash, loc);
        s.entries.fetch_sub(1, Ordering::Relaxed);
        s.tag_bytes.store(w.tags.bytes(), Ordering::Relaxed);
        Ok(true)
    }

    fn remove_tagged(&self, tag: &[u8]) -> Result<usize> {
        let s = &*self.shared;
        let mut w = s.lock_writer();
        let mut removed = 0;
        for hash in w.tags.members(layout::hash_tag(tag)) {
            let Some(loc) = s.index.peek(hash) else {
                continue;
            };
            let off = s.entry_off(loc);
            // SAFETY: writer lock held: the entry's region cannot be reclaimed.
            let raw = unsafe { s.volume.read_entry_header(off) };
            let room = s.header.region_bytes - u64::from(loc.offset16) * layout::ENTRY_ALIGN;
            let Some(h) = EntryHeader::decode(&raw, s.regions.gen32(loc.region), room) else {
                continue;
            };
            let p = s.payload(off, &h);
            let tags_bytes = &p[h.key_len as usize..(h.key_len + h.tags_len) as usize];
            if layout::decode_tags(tags_bytes).any(|t| t == tag) {
                s.index.remove(hash);
                w.retire(s, hash, loc);
                s.entries.fetch_sub(1, Ordering::Relaxed);
                removed += 1;
            }
        }
        s.tag_bytes.store(w.tags.bytes(), Ordering::Relaxed);
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
            bytes_used: s.bytes_used.load(Ordering::Relaxed),
            bytes_live: s.bytes_live.load(Ordering::Relaxed),
            cap_bytes: s.header.cap_bytes,
            entries: s.entries.load(Ordering::Relaxed),
            index_bytes: s.index.bytes(),
            tag_index_bytes: s.tag_bytes.load(Ordering::Relaxed),
            ram_bytes: s.ram.as_ref().map_or(0, RamTier::bytes),
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

/// An entry to be written: the pieces, in on-disk order.
struct Entry<'a> {
    key: &'a [u8],
    tags: &'a [&'a [u8]],
    meta: &'a [u8],
    body: &'a [u8],
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
            body_len: self.body.len() as u32,
            checksum: 0,
        };
        let mut x = xxhash_rust::xxh3::Xxh3::new();
        let mut fixed = [0u8; ENTRY_HEADER_BYTES as usize];
        h.encode(&mut fixed);
        x.update(&fixed[..32]);
        let parts = [self.key, &tag_bytes, self.meta, self.body];
        for p in parts {
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

impl Writer {
    /// Returns (region, offset in region) where `stride` bytes can be written, sealing
    /// the active region and opening or reclaiming another when needed.
    fn room_for(&mut self, s: &Shared, stride: u64) -> Result<(u32, u64)> {
        if let Some(r) = self.active {
            let head = self.fill[r as usize];
            if head + stride <= s.header.region_bytes {
                return Ok((r, head));
            }
            self.sealed.push_back(r);
            self.active = None;
        }
        let r = match self.free.pop() {
            Some(r) => {
                let gen = self.take_gen(s);
                let claimed = s.regions.try_claim(r, self.gens[r as usize], gen);
                assert!(claimed, "a free region is never pinned");
                self.open_region(s, r, gen);
                r
            }
            None => {
                self.full = true;
                self.reclaim(s, stride)?
            }
        };
        self.active = Some(r);
        let head = self.fill[r as usize];
        debug_assert!(
            head + stride <= s.header.region_bytes,
            "object limit ≤ region room"
        );
        Ok((r, head))
    }

    fn take_gen(&mut self, s: &Shared) -> u64 {
        let g = self.next_gen;
        self.next_gen += 1;
        s.volume
            .header_word(layout::VOLUME_NEXT_GEN_AT)
            .store(self.next_gen, Ordering::Relaxed);
        g
    }

    /// Starts region `r` afresh at generation `gen` (already claimed).
    fn open_region(&mut self, s: &Shared, r: u32, gen: u64) {
        let mut hdr = [0u8; REGION_HEADER_BYTES as usize];
        RegionHeader { gen }.encode(&mut hdr);
        // SAFETY: the region is claimed (no pins, old locations fail to pin) and we
        // hold the writer lock.
        unsafe { s.volume.write(s.header.region_start(r), &hdr) };
        let old_fill = self.fill[r as usize];
        self.gens[r as usize] = gen;
        self.fill[r as usize] = REGION_HEADER_BYTES;
        self.sub_live(s, r, self.live[r as usize]);
        s.bytes_used.fetch_sub(
            old_fill.saturating_sub(REGION_HEADER_BYTES),
            Ordering::Relaxed,
        );
        if old_fill == 0 {
            s.bytes_used
                .fetch_add(REGION_HEADER_BYTES, Ordering::Relaxed);
        }
    }

    /// Reclaims the sealed region that frees most for least (LFS's cost-benefit: dead
    /// share times age over the cost of moving what is live) among those no reader
    /// pins; returns it, open and active, with room for `need` bytes.
    fn reclaim(&mut self, s: &Shared, need: u64) -> Result<u32> {
        let gen = self.next_gen;
        let mut order: Vec<(f64, usize)> = self
            .sealed
            .iter()
            .enumerate()
            .map(|(i, &r)| (self.reclaim_score(s, r), i))
            .collect();
        order.sort_unstable_by(|a, b| b.0.total_cmp(&a.0));
        let pos = order
            .iter()
            .map(|&(_, i)| i)
            .find(|&i| {
                let r = self.sealed[i];
                s.regions.try_claim(r, self.gens[r as usize], gen)
            })
            .ok_or(StoreError::NoSpace)?;
        let r = self.sealed.remove(pos).expect("position is in range");
        let old_gen = self.gens[r as usize];
        let gen = self.take_gen(s);
        debug_assert_eq!(gen, self.next_gen - 1);
        // The region is ours now: find what is live, stage what to carry (entries hit
        // since written first, then the rest, within the budget), drop the others,
        // then rewrite.
        // Whatever is carried, the object that asked for room must still fit.
        let room = s.header.region_bytes - REGION_HEADER_BYTES;
        let budget = ((room as f64 * s.options.carry_share) as u64).min(room - need);
        let start = s.header.region_start(r);
        let mut live: Vec<(u64, EntryHeader, u64, u8)> = Vec::new(); // off, header, hash, freq
        for (off, h) in recovery::entries(&s.volume, &s.header, r, old_gen as u32) {
            if h.flags & layout::FLAG_DEAD != 0 {
                continue;
            }
            let p = s.payload(start + off, &h);
            let hash = layout::hash_key(&p[..h.key_len as usize]);
            let here = Loc {
                region: r,
                offset16: (off / layout::ENTRY_ALIGN) as u32,
                gen18: loc_gen(old_gen),
                freq: 0,
            };
            // Superseded or removed entries have no index entry pointing here.
            if let Some(cur) = s.index.peek(hash).filter(|c| c.same_place(here)) {
                live.push((off, h, hash, cur.freq));
            }
        }
        live.sort_by_key(|&(off, _, _, freq)| (std::cmp::Reverse(freq), off));
        self.carry_buf.clear();
        let mut carry: Vec<(u64, u64, u8)> = Vec::new(); // (key hash, offset in carry_buf, freq)
        for (off, h, hash, freq) in live {
            if self.carry_buf.len() as u64 + h.stride() <= budget {
                carry.push((hash, self.carry_buf.len() as u64, freq.saturating_sub(1)));
                // SAFETY: claimed region, writer lock held: nobody writes it.
                let bytes = unsafe { s.volume.slice(start + off, h.stride()) };
                self.carry_buf.extend_from_slice(bytes);
                continue;
            }
            s.index.remove(hash);
            let p = s.payload(start + off, &h);
            let tags_bytes = &p[h.key_len as usize..(h.key_len + h.tags_len) as usize];
            self.tags
                .remove(hash, layout::decode_tags(tags_bytes).map(layout::hash_tag));
            s.entries.fetch_sub(1, Ordering::Relaxed);
            s.evicted.fetch_add(1, Ordering::Relaxed);
            s.forget_copy(hash);
        }
        self.open_region(s, r, gen);
        let buf = std::mem::take(&mut self.carry_buf);
        for &(hash, at, freq) in &carry {
            self.carry_one(s, r, gen, hash, freq, &buf[at as usize..]);
        }
        self.carry_buf = buf;
        s.carried.fetch_add(carry.len() as u64, Ordering::Relaxed);
        Ok(r)
    }

    fn add_live(&mut self, s: &Shared, r: u32, bytes: u64) {
        self.live[r as usize] += bytes;
        s.bytes_live.fetch_add(bytes, Ordering::Relaxed);
    }

    fn sub_live(&mut self, s: &Shared, r: u32, bytes: u64) {
        debug_assert!(self.live[r as usize] >= bytes, "live bytes underflow");
        self.live[r as usize] -= bytes;
        s.bytes_live.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// How good a victim sealed region `r` is: (1 - u) · age / (1 + u), with u its
    /// live share and age in region generations (Rosenblum & Ousterhout's cleaner).
    fn reclaim_score(&self, s: &Shared, r: u32) -> f64 {
        let u = self.live[r as usize] as f64 / s.header.region_bytes as f64;
        let age = (self.next_gen - self.gens[r as usize]) as f64;
        (1.0 - u) * age / (1.0 + u)
    }

    /// Rewrites one staged entry (`staged` starts with its header) at the head of
    /// region `r` under generation `gen`, and repoints the index at it.
    fn carry_one(&mut self, s: &Shared, r: u32, gen: u64, hash: u64, freq: u8, staged: &[u8]) {
        let Some(mut h) = EntryHeader::decode(staged, layout_gen_of(staged), staged.len() as u64)
        else {
            debug_assert!(false, "staged entry decodes");
            return;
        };
        let stride = h.stride();
        let payload =
            &staged[ENTRY_HEADER_BYTES as usize..(ENTRY_HEADER_BYTES + h.payload_len()) as usize];
        h.gen = gen as u32;
        h.flags = 0;
        h.checksum = h.compute_checksum(payload);
        let mut fixed = [0u8; ENTRY_HEADER_BYTES as usize];
        h.encode(&mut fixed);
        let head = self.fill[r as usize];
        let off = s.header.region_start(r) + head;
        // SAFETY: writer lock held; `head` is past every entry of the region we own.
        unsafe {
            s.volume.write(off + ENTRY_HEADER_BYTES, payload);
            s.volume.write(off, &fixed);
        }
        self.fill[r as usize] = head + stride;
        self.add_live(s, r, stride);
        s.bytes_used.fetch_add(stride, Ordering::Relaxed);
        s.index.insert(
            hash,
            Loc {
                region: r,
                offset16: (head / layout::ENTRY_ALIGN) as u32,
                gen18: loc_gen(gen),
                freq,
            },
        );
    }

    /// An entry left the index (overwritten or removed): drop its tags, mark it dead
    /// on disk so recovery does not bring it back.
    fn retire(&mut self, s: &Shared, hash: u64, loc: Loc) {
        let off = s.entry_off(loc);
        // SAFETY: writer lock held: the region cannot be reclaimed under us.
        let raw = unsafe { s.volume.read_entry_header(off) };
        let room = s.header.region_bytes - u64::from(loc.offset16) * layout::ENTRY_ALIGN;
        let Some(h) = EntryHeader::decode(&raw, s.regions.gen32(loc.region), room) else {
            debug_assert!(false, "indexed entry decodes");
            return;
        };
        let p = s.payload(off, &h);
        let tags_bytes = &p[h.key_len as usize..(h.key_len + h.tags_len) as usize];
        self.tags
            .remove(hash, layout::decode_tags(tags_bytes).map(layout::hash_tag));
        s.volume.store_flags(off, h.flags | layout::FLAG_DEAD);
        self.sub_live(s, loc.region, h.stride());
        s.forget_copy(hash);
    }
}

fn layout_gen_of(staged: &[u8]) -> u32 {
    u32::from_le_bytes([staged[8], staged[9], staged[10], staged[11]])
}
