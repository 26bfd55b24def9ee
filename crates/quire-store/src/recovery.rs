//! Opening a volume: deciding whether a file is usable, formatting it, and rebuilding
//! the index and the space bookkeeping by scanning regions (warm restart).
//!
//! The scan visits regions in generation order (oldest first) and each region's
//! entries in write order, so a later write of a key wins. An entry counts only if its
//! magic, version, generation and lengths are right and its checksum matches — also
//! after a clean close: the file may have been damaged while quire was not running, and
//! rehashing is cheap next to reading the volume in; the first entry that fails ends
//! its region's log
//! (everything after it was written later, so a torn write loses only itself and what
//! followed it in that region). Entries marked dead (removed or overwritten) are
//! skipped. A crash therefore loses at most unflushed entries, never correctness.
//!
//! A file that is not a quire volume is refused and left alone; a quire volume that is
//! damaged, of another version, or laid out differently is started cold, with a log line.

use std::io::Read;
use std::path::Path;

use crate::error::{Result, StoreError};
use crate::index::{Index, Loc};
use crate::layout::{self, RegionHeader, VolumeHeader};
use crate::layout::{ENTRY_HEADER_BYTES, REGION_HEADER_BYTES, VOLUME_HEADER_BYTES};
use crate::space::SpaceInit;
use crate::tags::TagIndex;
use crate::volume::Volume;

/// What reopening found, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Why the volume was (re)initialised empty, if it was.
    pub cold_start: Option<String>,
    /// Whether the last close was orderly.
    pub was_clean: bool,
    /// Live entries found (0 after a cold start).
    pub entries: u64,
    /// Regions whose log ended in a damaged entry (torn write, bad checksum).
    pub torn_regions: u32,
}

/// What the file at a volume path is.
#[derive(Debug)]
pub(crate) enum Probe {
    Missing,
    /// A quire volume with the wanted layout; `clean` if it was closed in order.
    Usable {
        clean: bool,
    },
    /// A quire volume that cannot be used as is (the reason): start cold.
    Unusable(String),
}

/// Looks at the file at `path` without changing it.
pub(crate) fn probe(path: &Path, want: &VolumeHeader) -> Result<Probe> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Probe::Missing),
        Err(e) => return Err(StoreError::io(format!("opening {}", path.display()), e)),
    };
    let mut head = Vec::with_capacity(VOLUME_HEADER_BYTES as usize);
    (&mut file)
        .take(VOLUME_HEADER_BYTES)
        .read_to_end(&mut head)
        .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
    // Empty, or never formatted (a start killed while preallocating leaves zeros
    // where the header goes): as good as missing. The whole header page must be
    // zero — a disk image, say, has zeros in its first sectors but not in all of
    // them. Anything else without the magic is somebody's file, and is not
    // overwritten.
    if head.iter().all(|&b| b == 0) {
        return Ok(Probe::Missing);
    }
    if head.len() < 8 || head[0..8] != layout::VOLUME_MAGIC {
        return Err(StoreError::BadVolume {
            path: path.to_owned(),
            reason: "exists and is not a quire volume; refusing to overwrite it".into(),
        });
    }
    let found = match VolumeHeader::decode(&head) {
        Ok(h) => h,
        Err(why) => return Ok(Probe::Unusable(why.to_string())),
    };
    if found != *want {
        return Ok(Probe::Unusable(format!(
            "laid out as {found:?}, options ask for {want:?}"
        )));
    }
    let clean_at = layout::VOLUME_CLEAN_AT;
    let clean = u64::from_le_bytes(head[clean_at..clean_at + 8].try_into().unwrap_or([0; 8]))
        == layout::CLEAN_MARKER;
    Ok(Probe::Usable { clean })
}

/// The index, tag index and space bookkeeping rebuilt from a volume.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub(crate) index: Index,
    pub(crate) tags: TagIndex,
    pub(crate) space: SpaceInit,
}

/// Writes a fresh header on a volume `Volume::open` has just emptied: an empty
/// volume. Its region headers are not written: the file was truncated to nothing and
/// extended, so they read as zeros, which is a free region. (Writing them would fault
/// in and dirty a page per region, a 2 MiB folio with `crate::huge_pages`, and write
/// it back: the whole volume, once.)
pub(crate) fn format(volume: &Volume, header: &VolumeHeader) -> Result<Recovered> {
    let mut h = [0u8; 64];
    header.encode(&mut h);
    // SAFETY: the store is not built yet; this thread is the only one with the volume.
    unsafe { volume.write(0, &h) };
    volume.flush()?;
    Ok(Recovered {
        index: Index::new(),
        tags: TagIndex::default(),
        space: SpaceInit::empty(header.region_count),
    })
}

/// Rebuilds state from the regions, checking every entry's checksum.
pub(crate) fn scan(volume: &Volume, header: &VolumeHeader, report: &mut OpenReport) -> Recovered {
    let mut space = SpaceInit::empty(header.region_count);
    space.free.clear();
    let mut tags = TagIndex::default();
    let mut used: Vec<(u64, u32)> = Vec::new();
    for r in 0..header.region_count {
        // SAFETY: no other thread has the volume yet.
        let raw = unsafe { volume.slice(header.region_start(r), REGION_HEADER_BYTES) };
        match RegionHeader::decode(raw) {
            Some(rh) => used.push((rh.gen, r)),
            None => space.free.push(r),
        }
    }
    space.free.reverse(); // pop() hands out low regions first
    used.sort_unstable();
    let hint = volume
        .header_word(layout::VOLUME_NEXT_GEN_AT)
        .load(std::sync::atomic::Ordering::Relaxed);
    let max_gen = used.last().map_or(0, |&(g, _)| g);
    // The hint is not checksummed (it is bumped as regions open): trust it only within
    // a plausible distance of what the region headers say, so a damaged one can
    // neither overflow nor make generations wrap.
    let hint = if hint > max_gen && hint - max_gen < 1 << 32 {
        hint
    } else {
        max_gen
    };
    space.next_gen = hint.max(1) + 1;

    let index = Index::new();
    for &(gen, r) in &used {
        space.gens[r as usize] = gen;
        let start = header.region_start(r);
        let mut end = REGION_HEADER_BYTES;
        let mut torn = false;
        for (off, h) in volume.entries(header, r, gen as u32) {
            // SAFETY: no other thread has the volume yet.
            let payload =
                unsafe { volume.slice(start + off + ENTRY_HEADER_BYTES, h.payload_len()) };
            if h.compute_checksum(payload) != h.checksum {
                torn = true;
                break;
            }
            end = off + h.stride();
            if h.is_dead() {
                continue;
            }
            let key = &payload[..h.key_len as usize];
            let loc = Loc::at(r, off, gen);
            // A later write of the key supersedes this one: mark the earlier entry
            // dead on disk now, or a remove of the later one followed by another
            // crash would bring it back.
            index.update(layout::hash_key(key), |old| {
                if let Some(old) = old {
                    let at = header.region_start(old.region)
                        + u64::from(old.offset16) * layout::ENTRY_ALIGN;
                    volume.store_flags(at, layout::FLAGS_DEAD);
                }
                (Some(loc), ())
            });
        }
        report.torn_regions += u32::from(torn);
        space.fill[r as usize] = end;
        space.sealed.push_back(r);
    }
    rebuild_live(volume, header, &index, &mut space, &mut tags, &used);
    Recovered { index, tags, space }
}

/// Second pass: live bytes per region and tag memberships of the entries that ended
/// up live.
fn rebuild_live(
    volume: &Volume,
    header: &VolumeHeader,
    index: &Index,
    space: &mut SpaceInit,
    tags: &mut TagIndex,
    used: &[(u64, u32)],
) {
    for &(gen, r) in used {
        let start = header.region_start(r);
        let end = space.fill[r as usize];
        for (off, h) in volume
            .entries(header, r, gen as u32)
            .take_while(|(o, _)| *o < end)
        {
            if h.is_dead() {
                continue;
            }
            // SAFETY: no other thread has the volume yet.
            let p = unsafe { volume.slice(start + off + ENTRY_HEADER_BYTES, h.payload_len()) };
            let hash = layout::hash_key(&p[..h.key_len as usize]);
            let here = Loc::at(r, off, gen);
            if index.peek(hash).is_some_and(|l| l.same_place(here)) {
                space.live[r as usize] += h.stride();
                let t = &p[h.key_len as usize..(h.key_len + h.tags_len) as usize];
                tags.add(hash, layout::decode_tags(t).map(layout::hash_tag));
            }
        }
    }
}

const _: () = assert!(VOLUME_HEADER_BYTES >= 64);
