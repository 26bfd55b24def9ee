//! The volume's on-disk format, for tests and tools: the layout constants and a walker
//! that lists the entries of a volume file.
//!
//! A volume outlives the process that wrote it, so its layout is a contract with
//! whatever reads the file next: the next start's recovery, but also the store's
//! crash and corruption tests and the `volume_open` fuzz target, which damage chosen
//! bytes of real volumes (a flags word, the clean marker, a body byte) and so must know
//! where they are. This module is that contract's one public statement; the engine's
//! own encoders and checkers (`layout`) stay private, and the constants here are the
//! very ones the engine uses, so a test can never drift from the format it damages.
//!
//! It is a plain public module rather than something behind a `testkit` feature:
//! it only reads bytes (nothing here can change a volume or reach into a live store),
//! it costs nothing at run time, and a tool that inspects a volume in production
//! needs it as much as a test does. Only test *data* (the self-verifying values the
//! tests and the fuzz target write) sits behind the `testkit` feature.
//!
//! ```text
//! volume file (cap bytes, preallocated)
//! +-------------------+----------+----------+-----+----------+-------+
//! | volume header 4K  | region 0 | region 1 | ... | region N | slack |
//! +-------------------+----------+----------+-----+----------+-------+
//! region: | region header 64 B | entry | entry | ... | (old bytes) |
//! entry:  | entry header 40 B | key | tags | meta | body | pad to 16 |
//! ```
//!
//! All integers are little-endian. Volume header: magic [`VOLUME_MAGIC`], u32 format
//! version at [`VOLUME_VERSION_AT`], u64 cap at [`VOLUME_CAP_AT`], u64 region size, u32
//! region count, a checksum of the first 40 bytes, then two words outside the
//! checksum: the clean word at [`VOLUME_CLEAN_AT`] and the next-generation hint at
//! [`VOLUME_NEXT_GEN_AT`]. Region header: magic [`REGION_MAGIC`], u32 version, u64
//! generation, checksum. Entry header: magic [`ENTRY_MAGIC`], u16 version, u16 flags at
//! [`ENTRY_FLAGS_AT`] (outside the checksum: [`FLAGS_DEAD`] is written in place by a
//! remove), u32 low bits of the region generation, u32 key/tags/meta/body lengths, a
//! zero word, then a checksum of the header (flags zeroed) and payload.

use crate::error::{Result, StoreError};
use crate::layout::{self, EntryHeader, RegionHeader, VolumeHeader};

pub use crate::layout::{
    CLEAN_MARKER, ENTRY_ALIGN, ENTRY_FLAGS_AT, ENTRY_HEADER_BYTES, ENTRY_MAGIC, FLAGS_DEAD,
    FORMAT_VERSION, REGION_HEADER_BYTES, REGION_MAGIC, VOLUME_CAP_AT, VOLUME_CLEAN_AT,
    VOLUME_HEADER_BYTES, VOLUME_MAGIC, VOLUME_NEXT_GEN_AT, VOLUME_VERSION_AT,
};

/// One entry found in a volume file by [`entries`], borrowing the file's bytes.
/// Offsets are absolute offsets in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileEntry<'a> {
    /// The region the entry lies in.
    pub region: u32,
    /// That region's generation (from its header).
    pub region_gen: u64,
    /// Where the entry (its header) starts.
    pub at: u64,
    /// Bytes it takes, header and padding included.
    pub stride: u64,
    /// Its flags word as stored (see [`FileEntry::is_dead`]).
    pub flags: u16,
    /// The key.
    pub key: &'a [u8],
    /// The encoded tag list: (u16 length, bytes)*.
    pub tags: &'a [u8],
    /// The metadata.
    pub meta: &'a [u8],
    /// Where the body starts.
    pub body_at: u64,
    /// The body.
    pub body: &'a [u8],
}

impl FileEntry<'_> {
    /// Removed or overwritten: the flags word reads as dead while at least 8 of its 16
    /// bits are set, so one flipped bit neither kills nor resurrects an entry.
    pub fn is_dead(&self) -> bool {
        self.flags.count_ones() >= 8
    }
}

/// The entries of a volume file in log order: regions oldest generation first, each
/// region's entries in write order, stopping where a region's log ends — what recovery
/// walks, dead entries included. Checksums are not checked (a test that damaged bytes
/// wants to see the entries it damaged). A file whose volume header this build cannot
/// read is [`StoreError::NotAVolume`].
pub fn entries(file: &[u8]) -> Result<Vec<FileEntry<'_>>> {
    let header = VolumeHeader::decode(file).map_err(|why| StoreError::NotAVolume {
        reason: why.to_string(),
    })?;
    let region_bytes = header.region_bytes as usize;
    let mut regions: Vec<(u64, u32)> = (0..header.region_count)
        .filter_map(|r| {
            let start = header.region_start(r) as usize;
            let raw = file.get(start..start + REGION_HEADER_BYTES as usize)?;
            Some((RegionHeader::decode(raw)?.gen, r))
        })
        .collect();
    regions.sort_unstable();
    let mut out = Vec::new();
    for (gen, r) in regions {
        let start = header.region_start(r) as usize;
        let Some(region) = file.get(start..start + region_bytes) else {
            continue; // a truncated file: the region is not there
        };
        for (off, h) in layout::region_log(header.region_bytes, gen as u32, |off| {
            let mut raw = [0u8; ENTRY_HEADER_BYTES as usize];
            raw.copy_from_slice(&region[off as usize..][..ENTRY_HEADER_BYTES as usize]);
            raw
        }) {
            out.push(file_entry(region, start as u64, r, gen, off, &h));
        }
    }
    Ok(out)
}

/// The entry with header `h` at offset `off` of `region` (which starts at `start`).
fn file_entry<'a>(
    region: &'a [u8],
    start: u64,
    r: u32,
    gen: u64,
    off: u64,
    h: &EntryHeader,
) -> FileEntry<'a> {
    let field = |at: u64, len: u32| &region[(off + at) as usize..][..len as usize];
    FileEntry {
        region: r,
        region_gen: gen,
        at: start + off,
        stride: h.stride(),
        flags: h.flags,
        key: field(h.key_at(), h.key_len),
        tags: field(h.tags_at(), h.tags_len),
        meta: field(h.meta_at(), h.meta_len),
        body_at: start + off + h.body_at(),
        body: field(h.body_at(), h.body_len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, Options, Store};

    #[test]
    fn entries_lists_what_was_written_in_log_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vol");
        let store =
            Store::open(&path, (1 << 20) + VOLUME_HEADER_BYTES, Options::default()).unwrap();
        store.put(b"a", b"m1", b"one", &[b"t"]).unwrap();
        store.put(b"b", b"m2", b"two", &[]).unwrap();
        store.put(b"a", b"m3", b"three", &[]).unwrap();
        store.close().unwrap();
        let file = std::fs::read(&path).unwrap();
        let found = entries(&file).unwrap();
        let seen: Vec<(&[u8], &[u8], bool)> =
            found.iter().map(|e| (e.key, e.body, e.is_dead())).collect();
        assert_eq!(
            seen,
            [
                (&b"a"[..], &b"one"[..], true),
                (b"b", b"two", false),
                (b"a", b"three", false)
            ]
        );
        let e = found[0];
        assert_eq!(e.meta, b"m1");
        assert_eq!(e.tags, [1, 0, b't']);
        assert_eq!(&file[e.body_at as usize..][..3], b"one");
        assert_eq!(e.at % ENTRY_ALIGN, 0);
        assert_eq!(found[1].at, e.at + e.stride);
        assert!(matches!(
            entries(b"not a volume"),
            Err(StoreError::NotAVolume { .. })
        ));
    }
}
