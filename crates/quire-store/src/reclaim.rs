//! Reclaim: where a put's bytes go, and how regions are reclaimed inline to make room
//! (the bookkeeping it works on is `space`'s).
//!
//! A put reserves its bytes by bumping the active region's write head under the
//! allocation lock — the only lock a put holds that other puts wait for, and it is held
//! for a few instructions. The put then copies its entry with no lock held (its
//! reservation pins the region, so reclaim cannot take it meanwhile) and publishes it
//! under the key's index shard lock (`Shared::publish`).
//!
//! When the active region is full it is sealed and the next *ready* region becomes
//! active. Ready regions are reclaimed inline by writers: the writer that takes the last
//! one reclaims the next right after its own put (`Shared::refill`). A writer that finds
//! none ready (the refiller is slow, e.g. preempted) takes room in the cold stream's open
//! region if it has some, and only otherwise reclaims one itself (`make_ready`),
//! alongside any other reclaimer — each works on its own region, so no writer ever
//! waits for another's reclaim. There is no janitor thread.
//!
//! Reclaim picks the sealed region that frees most for least — LFS's cost-benefit,
//! (1 - u) · age / (1 + u) with u its live share — and then:
//! 1. writes the region's new header (new generation) to the volume. This makes every
//!    old entry in it invalid *on disk* at once, so no crash can bring back an entry
//!    that is removed while reclaim runs; readers are unaffected (they check entries
//!    against the pin word's generation, not the region header);
//! 2. claims it (`RegionTable::try_claim`: fails if a reader or an in-flight writer
//!    pins it — then the next candidate is tried, and this region's entries simply
//!    will not survive a crash);
//! 3. stages the live entries worth carrying — highest value per byte first, that is
//!    (hits + 1) / bytes with hits the index's 2-bit count since the entry was written
//!    or last carried, within `carry_share` of a region — and drops the others from the
//!    index (evictions). The highest value per byte it evicted becomes admission's
//!    eviction boundary (`admission::Boundary`). Per byte, because the hit ratio counts
//!    requests: the room one 200 KiB entry hit twice takes could keep twenty 10 KiB
//!    entries hit once each (on `quire bench store`'s mix, replayed on one thread: hit
//!    ratio 0.838 → 0.861 at about the same live share, against most-hit first);
//! 4. writes each staged entry into the *cold stream* — a region of its own that
//!    carried entries go to (and a put that found no ready region) — payload
//!    first with no lock held, then its header under its key's shard lock, live only
//!    if the index still points at its old place (a concurrent put or remove wins; the
//!    copy's header is then written marked dead). So no reader or writer of the shard
//!    waits for a copy of up to a region's room (before, `quire bench store --only
//!    mixed` saw the lock held 1 ms or more 16 times a run, up to 5 ms; after, once at
//!    1.1 ms). Survivors live long, so cold regions stay nearly all live
//!    and are rarely chosen, while regions of new writes die fast and are cheap to
//!    reclaim (LFS's hot/cold separation: `quire bench store` measured 80 % of used
//!    bytes live instead of 74 %, with a third less copying). When the cold region is
//!    full, the region being reclaimed takes its place, and reclaim moves on to another
//!    region to hand to new writes; otherwise the reclaimed region is handed over
//!    empty.

use std::sync::atomic::Ordering;

use crate::admission::value_density;
use crate::error::{Result, StoreError};
use crate::index::Loc;
use crate::layout::{self, EntryHeader, RegionHeader, ENTRY_HEADER_BYTES, REGION_HEADER_BYTES};
use crate::region::loc_gen;
use crate::shared::Shared;
use crate::space::{Alloc, Open, SpaceBreakdown};

/// Regions kept reclaimed ahead of need (ready, or being made ready by a refilling
/// writer). Two cut the puts that reclaim on demand (653 → 254 in one `quire bench
/// store --only mixed`), but the second empty region costs live entries (index bytes
/// per entry 32.9–33.1 against 32.5–32.8); the cold-stream fallback in `reserve`
/// covers a slow refiller instead.
const READY_TARGET: usize = 1;

/// A reservation: `stride` bytes at `head` of `region`, pinned until dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) region: u32,
    pub(crate) gen: u64,
    pub(crate) head: u64,
    /// Fewer regions than `READY_TARGET` are prepared and this writer is to prepare one:
    /// it must `refill` after its put.
    pub(crate) refill: bool,
}

impl Slot {
    fn at(open: Open, refill: bool) -> Slot {
        Slot {
            region: open.region,
            gen: open.gen,
            head: open.head,
            refill,
        }
    }
}

impl Shared {
    /// Reserves `stride` bytes; the returned slot pins its region until released with
    /// `RegionTable::unpin`. Fails with `NoSpace` only if every region is pinned.
    pub(crate) fn reserve(&self, stride: u64) -> Result<Slot> {
        let sp = &self.space;
        let mut a = sp.lock_alloc();
        loop {
            let al = &mut *a;
            if let Some(act) = al.active.as_mut() {
                if act.head + stride <= self.header.region_bytes {
                    let at = self.take(act, &mut al.fill, stride);
                    let refill = al.free.is_empty() && al.ready.len() + al.refilling < READY_TARGET;
                    al.refilling += usize::from(refill);
                    return Ok(Slot::at(at, refill));
                }
                let r = act.region;
                a.sealed.push_back(r);
                a.active = None;
            }
            if let Some(ready) = a.ready.pop_front() {
                a.active = Some(ready);
                continue;
            }
            if let Some(r) = a.free.pop() {
                let open = self.open_free(r);
                a.fill[r as usize] = open.head;
                sp.bytes_used.fetch_add(open.head, Ordering::Relaxed);
                a.active = Some(open);
                continue;
            }
            // Nothing prepared: a refiller is slow (or none was due). Rather than
            // reclaim inside this put, take room in the cold stream's region if it has
            // some: it mixes a new entry in with survivors, but otherwise every writer
            // arriving meanwhile reclaims a region of its own inside its put.
            if let Some(at) = self.cold_slot(&mut a, stride, None) {
                return Ok(Slot::at(at, false));
            }
            // Not even that: reclaim for ourselves, alongside any other reclaimer
            // (each works on its own region), rather than wait for one.
            drop(a);
            let made = self.make_ready(stride);
            a = sp.lock_alloc();
            self.add_ready(&mut a, made?);
        }
    }

    /// Takes `stride` bytes at `open`'s head (which has room): advances the head,
    /// records the region's fill, pins the region and counts the bytes. Where the
    /// bytes start.
    fn take(&self, open: &mut Open, fill: &mut [u64], stride: u64) -> Open {
        debug_assert!(open.head + stride <= self.header.region_bytes);
        let at = *open;
        open.head += stride;
        fill[at.region as usize] = open.head;
        let pinned = self.regions.pin(at.region, loc_gen(at.gen));
        assert!(pinned, "an open region's generation is stable");
        self.space.bytes_used.fetch_add(stride, Ordering::Relaxed);
        at
    }

    /// Reclaims the next ready region ahead of need; called by the writer whose slot
    /// said `refill`, after its own put is published. Failure (every region pinned) is
    /// not an error: the next rollover reclaims on demand.
    pub(crate) fn refill(&self) {
        let made = self.make_ready(0);
        let mut a = self.space.lock_alloc();
        a.refilling -= 1;
        if let Ok(open) = made {
            self.add_ready(&mut a, open);
        }
    }

    fn add_ready(&self, a: &mut Alloc, open: Open) {
        a.fill[open.region as usize] = open.head;
        a.ready.push_back(open);
    }

    /// Starts never-used region `r` (under the allocation lock: a 64-byte write).
    fn open_free(&self, r: u32) -> Open {
        let gen = self.take_gen();
        self.write_region_header(r, gen);
        let claimed = self.regions.try_claim(r, 0, gen);
        assert!(claimed, "a free region is never pinned");
        self.space.set_region_gen(r, gen);
        Open {
            region: r,
            gen,
            head: REGION_HEADER_BYTES,
        }
    }

    fn take_gen(&self) -> u64 {
        let gen = self.space.take_gen();
        self.volume
            .header_word(layout::VOLUME_NEXT_GEN_AT)
            .fetch_max(gen + 1, Ordering::Relaxed);
        gen
    }

    fn write_region_header(&self, r: u32, gen: u64) {
        let mut hdr = [0u8; REGION_HEADER_BYTES as usize];
        RegionHeader { gen }.encode(&mut hdr);
        // SAFETY: only the writer reclaiming `r` (or the allocation lock holder for a free
        // region) writes a region header, and no reader or writer touches these 64
        // bytes: entries start after them and readers never read region headers.
        unsafe { self.volume.write(self.header.region_start(r), &hdr) };
    }

    /// Reclaims a sealed region into a ready one with room for `need` bytes.
    fn make_ready(&self, need: u64) -> Result<Open> {
        // Reclaiming at all means the volume is full: admission applies from now on,
        // whether this reclaim runs ahead of need (refill) or on demand.
        self.space.full.store(true, Ordering::Relaxed);
        let candidates: Vec<u32> = {
            let a = self.space.lock_alloc();
            let now = self.space.next_gen();
            let mut scored: Vec<(f64, u32)> = a
                .sealed
                .iter()
                .map(|&r| (self.reclaim_score(r, now), r))
                .collect();
            scored.sort_unstable_by(|x, y| y.0.total_cmp(&x.0));
            scored.into_iter().map(|(_, r)| r).collect()
        };
        let mut scratch = self.space.take_scratch();
        let mut made = Err(StoreError::NoSpace);
        for r in candidates {
            // Take it out of `sealed` so no concurrent reclaimer picks it too.
            {
                let mut a = self.space.lock_alloc();
                let Some(pos) = a.sealed.iter().position(|&x| x == r) else {
                    continue;
                };
                a.sealed.remove(pos);
            }
            match self.try_reclaim(r, need, &mut scratch) {
                Reclaimed::Ready(open) => {
                    made = Ok(open);
                    break;
                }
                Reclaimed::Cold => {}
                Reclaimed::Pinned => self.space.lock_alloc().sealed.push_front(r),
            }
        }
        self.space.put_scratch(scratch);
        made
    }

    /// (1 - u) · age / (1 + u): Rosenblum & Ousterhout's cleaner, u the live share.
    fn reclaim_score(&self, r: u32, now: u64) -> f64 {
        let u = self.space.live_of(r) as f64 / self.header.region_bytes as f64;
        let age = now.saturating_sub(self.space.region_gen(r)) as f64;
        (1.0 - u.min(1.0)) * age / (1.0 + u)
    }

    /// Steps 1-4 of the module doc for region `r`.
    fn try_reclaim(&self, r: u32, need: u64, scratch: &mut Vec<u8>) -> Reclaimed {
        let old_gen = self.space.region_gen(r);
        if self.regions.pins(r) > 0 {
            return Reclaimed::Pinned; // would fail the claim; spare its on-disk entries
        }
        let gen = self.take_gen();
        self.write_region_header(r, gen);
        if !self.regions.try_claim(r, old_gen, gen) {
            return Reclaimed::Pinned;
        }
        // Ours now: no pins, and every new pin fails. Nobody else adjusts its live
        // bytes (that needs a pin), so reset them here.
        self.space.reset_live(r);
        let old_fill = std::mem::replace(
            &mut self.space.lock_alloc().fill[r as usize],
            REGION_HEADER_BYTES,
        );
        self.space.set_region_gen(r, gen);

        let room = self.header.region_bytes - REGION_HEADER_BYTES;
        let budget = (room as f64 * self.options.carry_share) as u64;
        let carry = self.stage(r, old_gen, budget, scratch);
        let mut became_cold = false;
        let mut carried = 0;
        for c in &carry {
            let bytes = &scratch[c.at..c.at + c.stride as usize];
            // This region may stand in for a full cold region once, never twice.
            let fallback = (!became_cold).then_some(Open {
                region: r,
                gen,
                head: REGION_HEADER_BYTES,
            });
            let Some(dest) = self.reserve_cold(c.stride, fallback) else {
                // Other reclaimers filled the cold stream too: evict this one after all.
                self.evict(c.hash, c.old, &staged_tags(bytes, c));
                continue;
            };
            became_cold |= dest.region == r;
            if self.carry_one(&dest, c, bytes) {
                carried += 1;
            }
            self.regions.unpin(dest.region);
        }
        self.carried.fetch_add(carried, Ordering::Relaxed);
        self.space
            .bytes_used
            .fetch_sub(old_fill - REGION_HEADER_BYTES, Ordering::Relaxed);
        if became_cold {
            // Its room is the cold stream's now; reclaim another for new writes.
            return Reclaimed::Cold;
        }
        debug_assert!(room >= need, "an object fits an empty region");
        Reclaimed::Ready(Open {
            region: r,
            gen,
            head: REGION_HEADER_BYTES,
        })
    }

    /// Reserves `stride` bytes in the cold stream, pinned. When the cold region is full
    /// it is sealed and `fallback` (a region the caller just claimed) takes its place;
    /// with no fallback left, `None`.
    fn reserve_cold(&self, stride: u64, fallback: Option<Open>) -> Option<Open> {
        self.cold_slot(&mut self.space.lock_alloc(), stride, fallback)
    }

    /// [`Shared::reserve_cold`] with the allocation lock held (`a`). Without a
    /// fallback it only takes room the cold region has: what a put that found no
    /// ready region uses.
    fn cold_slot(&self, a: &mut Alloc, stride: u64, fallback: Option<Open>) -> Option<Open> {
        let fits = |o: &Open| o.head + stride <= self.header.region_bytes;
        if !a.cold.as_ref().is_some_and(fits) {
            let fallback = fallback?;
            debug_assert!(fits(&fallback), "a carried entry fits an empty region");
            if let Some(full) = a.cold.replace(fallback) {
                a.sealed.push_back(full.region);
            }
        }
        let cold = a.cold.as_mut().expect("set above");
        Some(self.take(cold, &mut a.fill, stride))
    }

    /// Decides what of claimed region `r` survives: copies the live entries of highest
    /// value per byte verbatim into `scratch` up to `budget` bytes (`carry_one` rewrites
    /// their headers), drops every other live entry from the index, and sets the
    /// eviction boundary if it evicted any.
    fn stage(&self, r: u32, old_gen: u64, budget: u64, scratch: &mut Vec<u8>) -> Vec<Carry> {
        let start = self.header.region_start(r);
        let mut live: Vec<(u64, EntryHeader, u64, Loc)> = Vec::new();
        for (off, h) in self.volume.entries(&self.header, r, old_gen as u32) {
            if h.is_dead() {
                continue;
            }
            let p = self.payload(start + off, &h);
            let hash = layout::hash_key(&p[..h.key_len as usize]);
            let here = Loc::at(r, off, old_gen);
            if let Some(cur) = self.index.peek(hash).filter(|c| c.same_place(here)) {
                live.push((off, h, hash, cur));
            }
        }
        let density =
            |&(_, h, _, cur): &(u64, EntryHeader, u64, Loc)| value_density(cur.freq, h.stride());
        live.sort_by(|a, b| density(b).total_cmp(&density(a)).then(a.0.cmp(&b.0)));
        scratch.clear();
        let mut carry = Vec::new();
        let mut boundary: Option<f64> = None;
        for (off, h, hash, old) in live {
            if scratch.len() as u64 + h.stride() <= budget {
                carry.push(Carry {
                    hash,
                    old,
                    old_gen32: old_gen as u32,
                    at: scratch.len(),
                    stride: h.stride(),
                });
                // SAFETY: claimed region: nobody else reads or writes it now.
                let bytes = unsafe { self.volume.slice(start + off, h.stride()) };
                scratch.extend_from_slice(bytes);
                continue;
            }
            let d = value_density(old.freq, h.stride());
            boundary = Some(boundary.map_or(d, |b| b.max(d)));
            self.evict(hash, old, &self.entry_tags(start + off, &h));
        }
        if let Some(b) = boundary {
            self.boundary.set(b);
        }
        carry
    }

    /// Drops `hash` from the index if it still maps to `old` (an entry of a region being
    /// reclaimed), with its tags. The tags go under the key's shard lock, as in
    /// `Shared::publish`: dropped after it, they could drop the membership a concurrent
    /// put of the same key had just added, and `remove_tagged` would then miss its entry.
    fn evict(&self, hash: u64, old: Loc, tags: &[u64]) {
        let evicted = self.index.update(hash, |cur| match cur {
            Some(c) if c.same_place(old) => {
                self.drop_tags(hash, tags);
                self.forget_copy(hash);
                (None, true)
            }
            other => (other, false),
        });
        if evicted {
            self.entries.fetch_sub(1, Ordering::Relaxed);
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes one staged entry at the reserved `dest` and points its key there, if the
    /// key still maps to where the entry was; true if it did. The payload is copied
    /// before the key's shard lock is taken, so no reader or writer of the shard waits
    /// for the copy (an entry may be up to a region's room, and a reclaimer preempted
    /// mid-copy held the lock for milliseconds). Under the lock only the header goes
    /// down: live if the key still maps to the old place, else marked dead, so the
    /// region's log stays walkable and no crash brings back a copy of an entry that was
    /// removed or overwritten meanwhile (without a valid header the copy is no entry).
    fn carry_one(&self, dest: &Open, c: &Carry, staged: &[u8]) -> bool {
        let Some(mut h) = EntryHeader::decode(staged, c.old_gen32, c.stride) else {
            debug_assert!(false, "a staged entry decodes");
            return false;
        };
        let payload = &staged[ENTRY_HEADER_BYTES as usize..][..h.payload_len() as usize];
        h.gen = dest.gen as u32;
        h.flags = 0;
        h.checksum = h.compute_checksum(payload);
        let off = self.header.region_start(dest.region) + dest.head;
        // SAFETY: `dest` is a reservation of this reclaimer in the cold stream (or the
        // region it claimed): no published entry covers these bytes, and no reader
        // reaches them before the header below is written and the index points here.
        unsafe { self.volume.write(off + ENTRY_HEADER_BYTES, payload) };
        let write_header = |h: &EntryHeader| {
            let mut fixed = [0u8; ENTRY_HEADER_BYTES as usize];
            h.encode(&mut fixed);
            // SAFETY: as for the payload above.
            unsafe { self.volume.write(off, &fixed) };
        };
        let new = Loc {
            freq: c.old.freq.saturating_sub(1),
            ..Loc::at(dest.region, dest.head, dest.gen)
        };
        let moved = self.index.update(c.hash, |cur| match cur {
            Some(cur) if cur.same_place(c.old) => {
                write_header(&h);
                // Counted before the key is visible (see `Shared::publish`).
                self.space.add_live(dest.region, c.stride);
                (Some(new), true)
            }
            other => (other, false),
        });
        if !moved {
            write_header(&EntryHeader {
                flags: layout::FLAGS_DEAD,
                ..h
            });
        }
        moved
    }
}

/// The tag hashes of a staged entry.
fn staged_tags(staged: &[u8], c: &Carry) -> Vec<u64> {
    let Some(h) = EntryHeader::decode(staged, c.old_gen32, c.stride) else {
        return Vec::new();
    };
    let p = &staged[ENTRY_HEADER_BYTES as usize..];
    let tags = &p[h.key_len as usize..(h.key_len + h.tags_len) as usize];
    layout::decode_tags(tags).map(layout::hash_tag).collect()
}

/// What reclaiming one region gave.
#[derive(Debug)]
enum Reclaimed {
    /// An empty region for new writes.
    Ready(Open),
    /// It took over as the cold stream's region (what it carried overflowed the old one).
    Cold,
    /// A reader or writer pinned it: not reclaimed.
    Pinned,
}

/// An entry staged for carrying.
#[derive(Debug)]
struct Carry {
    hash: u64,
    old: Loc,
    /// The generation its staged header carries (the region's previous life).
    old_gen32: u32,
    /// Offset in the staging buffer.
    at: usize,
    stride: u64,
}

impl Shared {
    /// See [`SpaceBreakdown`]. Racy against concurrent puts (each figure is read at a
    /// slightly different instant), exact when nothing runs meanwhile.
    pub(crate) fn space_breakdown(&self) -> SpaceBreakdown {
        let hdr = &self.header;
        let sp = &self.space;
        let (sealed, fill) = {
            let a = sp.lock_alloc();
            (
                a.sealed.iter().copied().collect::<Vec<u32>>(),
                a.fill.clone(),
            )
        };
        let regioned = u64::from(hdr.region_count) * hdr.region_bytes;
        let mut b = SpaceBreakdown {
            cap_bytes: hdr.cap_bytes,
            unregioned_bytes: hdr.cap_bytes - regioned,
            region_header_bytes: u64::from(hdr.region_count) * REGION_HEADER_BYTES,
            ..SpaceBreakdown::default()
        };
        let live_of = |r: u32| sp.live_of(r);
        let (mut sealed_live, mut sealed_payload) = (0u64, 0u64);
        for &r in &sealed {
            let gen = sp.region_gen(r);
            // The pin keeps reclaim away while the entries are walked; sealed regions
            // are not written but for the atomic flags word.
            if !self.regions.pin(r, loc_gen(gen)) {
                continue;
            }
            let start = hdr.region_start(r);
            for (off, h) in self.volume.entries(hdr, r, gen as u32) {
                if h.is_dead() {
                    continue;
                }
                let p = self.payload(start + off, &h);
                let hash = layout::hash_key(&p[..h.key_len as usize]);
                let here = Loc::at(r, off, gen);
                if self.index.peek(hash).is_some_and(|c| c.same_place(here)) {
                    sealed_live += h.stride();
                    sealed_payload += h.payload_len();
                }
            }
            let live = live_of(r);
            let f = fill[r as usize].max(REGION_HEADER_BYTES);
            b.sealed_dead_bytes += (f - REGION_HEADER_BYTES).saturating_sub(live);
            b.sealed_tail_bytes += hdr.region_bytes - f;
            b.sealed_regions += 1;
            self.regions.unpin(r);
        }
        let mut is_sealed = vec![false; hdr.region_count as usize];
        for &r in &sealed {
            is_sealed[r as usize] = true;
        }
        let mut other_live = 0u64;
        for r in 0..hdr.region_count {
            if is_sealed[r as usize] {
                continue;
            }
            let live = live_of(r);
            let f = fill[r as usize].max(REGION_HEADER_BYTES);
            other_live += live;
            b.open_dead_bytes += (f - REGION_HEADER_BYTES).saturating_sub(live);
            b.open_room_bytes += hdr.region_bytes - f;
            b.open_regions += 1;
        }
        let share = if sealed_live == 0 {
            1.0
        } else {
            sealed_payload as f64 / sealed_live as f64
        };
        let other_payload = (other_live as f64 * share) as u64;
        b.live_payload_bytes = sealed_payload + other_payload;
        b.live_overhead_bytes = (sealed_live - sealed_payload) + (other_live - other_payload);
        b
    }
}
