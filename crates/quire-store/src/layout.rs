//! The on-disk format of a volume: byte layouts, encoders and checkers. Pure code over
//! byte slices; the mapping itself lives in `volume`. The constants an outside reader
//! needs are `pub` and re-exported by [`crate::format`], the format's public face;
//! everything else here is the engine's own.
//!
//! ```text
//! volume file (cap bytes, preallocated)
//! +-------------------+----------+----------+-----+----------+-------+
//! | volume header 4K  | region 0 | region 1 | ... | region N | slack |
//! +-------------------+----------+----------+-----+----------+-------+
//! region: | region header 64 B | entry | entry | ... | (old bytes) |
//! entry:  | entry header 40 B | key | tags | meta | body | pad to 16 |
//! tags:   (u16 len, bytes)*
//! ```
//!
//! Every record carries magic and format version. The region header carries the
//! region's generation (a volume-wide sequence number, never reused), and every entry
//! repeats it: bytes left over from a region's earlier life carry an older generation,
//! so a scan stops there. An entry's checksum (xxh3-64) covers its header fields (all but
//! the `flags` word, which `remove` flips in place) and its payload: a torn write fails it.

use xxhash_rust::xxh3::Xxh3;

/// The first 8 bytes of every volume file.
pub const VOLUME_MAGIC: [u8; 8] = *b"QUIREVOL";
/// The first word of a region header ("QRGN").
pub const REGION_MAGIC: u32 = u32::from_le_bytes(*b"QRGN");
/// The first word of an entry header ("QENT").
pub const ENTRY_MAGIC: u32 = u32::from_le_bytes(*b"QENT");
/// Bumped on any change to these layouts; a volume of another version is not read.
pub const FORMAT_VERSION: u32 = 1;

/// Bytes before region 0: the volume header's page.
pub const VOLUME_HEADER_BYTES: u64 = 4096;
/// Bytes at the start of each region before its first entry.
pub const REGION_HEADER_BYTES: u64 = 64;
/// Bytes of an entry's fixed header, before its key.
pub const ENTRY_HEADER_BYTES: u64 = 40;
/// Entries start at multiples of this within a region (the index stores offset / 16).
pub const ENTRY_ALIGN: u64 = 16;
/// Marker in the volume header's clean word after an orderly close.
pub const CLEAN_MARKER: u64 = 0x434c_4541_4e21_2121; // "CLEAN!!!"

pub(crate) const REGION_BYTES_MIN: u64 = 64 << 10;
/// Bounded by the index's 20-bit offset field (in 16-byte units).
pub(crate) const REGION_BYTES_MAX: u64 = 16 << 20;
pub(crate) const KEY_BYTES_MAX: usize = 64 << 10;
pub(crate) const TAG_BYTES_MAX: usize = u16::MAX as usize;
pub(crate) const TAGS_MAX: usize = 1024;

/// The flags word of a removed or overwritten entry: all 16 bits, so that it is read
/// as dead while at least 8 bits are set (`EntryHeader::is_dead`). The word is
/// outside the checksum (it is flipped in place), so this redundancy is what keeps one
/// flipped bit from resurrecting a removed entry or killing a live one.
pub const FLAGS_DEAD: u16 = 0xffff;

const _: () = assert!(REGION_HEADER_BYTES.is_multiple_of(ENTRY_ALIGN));
const _: () = assert!(VOLUME_HEADER_BYTES.is_multiple_of(4096));
const _: () = assert!(REGION_BYTES_MAX / ENTRY_ALIGN <= 1 << 20);
const _: () = assert!(REGION_BYTES_MIN.is_power_of_two() && REGION_BYTES_MAX.is_power_of_two());

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The fixed facts of a volume, stored in its first 4 KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VolumeHeader {
    pub(crate) cap_bytes: u64,
    pub(crate) region_bytes: u64,
    pub(crate) region_count: u32,
}

// Volume header layout: [0..8) magic, [8..12) version, [12..16) zero, [16..24) cap,
// [24..32) region bytes, [32..36) region count, [36..40) zero, [40..48) xxh3 of [0..40),
// [48..56) clean marker (not checksummed: flipped at open and close),
// [56..64) next-generation hint (not checksummed: bumped as regions open).
/// Offset of the volume header's format version (u32).
pub const VOLUME_VERSION_AT: usize = 8;
/// Offset of the volume header's cap in bytes (u64).
pub const VOLUME_CAP_AT: usize = 16;
const VOLUME_REGION_BYTES_AT: usize = 24;
const VOLUME_REGION_COUNT_AT: usize = 32;
/// Offset of the volume header's clean word (u64): [`CLEAN_MARKER`] after an orderly
/// close, anything else while open or after a crash. Not checksummed.
pub const VOLUME_CLEAN_AT: usize = 48;
/// Offset of the volume header's next-generation hint (u64), bumped as regions open.
/// Not checksummed.
pub const VOLUME_NEXT_GEN_AT: usize = 56;

impl VolumeHeader {
    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[..64].fill(0);
        out[0..8].copy_from_slice(&VOLUME_MAGIC);
        out[VOLUME_VERSION_AT..VOLUME_VERSION_AT + 4]
            .copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[VOLUME_CAP_AT..VOLUME_CAP_AT + 8].copy_from_slice(&self.cap_bytes.to_le_bytes());
        out[VOLUME_REGION_BYTES_AT..VOLUME_REGION_BYTES_AT + 8]
            .copy_from_slice(&self.region_bytes.to_le_bytes());
        out[VOLUME_REGION_COUNT_AT..VOLUME_REGION_COUNT_AT + 4]
            .copy_from_slice(&self.region_count.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&out[0..40]);
        out[40..48].copy_from_slice(&sum.to_le_bytes());
    }

    /// Reads and checks a volume header; the error says what is wrong.
    pub(crate) fn decode(b: &[u8]) -> Result<VolumeHeader, HeaderError> {
        if b.len() < 64 {
            return Err(HeaderError::Short { len: b.len() });
        }
        if b[0..8] != VOLUME_MAGIC {
            return Err(HeaderError::Magic);
        }
        let version = u32_at(b, VOLUME_VERSION_AT);
        if version != FORMAT_VERSION {
            return Err(HeaderError::Version { found: version });
        }
        if xxhash_rust::xxh3::xxh3_64(&b[0..40]) != u64_at(b, 40) {
            return Err(HeaderError::Checksum);
        }
        let h = VolumeHeader {
            cap_bytes: u64_at(b, VOLUME_CAP_AT),
            region_bytes: u64_at(b, VOLUME_REGION_BYTES_AT),
            region_count: u32_at(b, VOLUME_REGION_COUNT_AT),
        };
        let fits = VOLUME_HEADER_BYTES + h.region_bytes * u64::from(h.region_count);
        if !h.region_bytes.is_power_of_two()
            || !(REGION_BYTES_MIN..=REGION_BYTES_MAX).contains(&h.region_bytes)
            || h.region_count == 0
            || fits > h.cap_bytes
        {
            return Err(HeaderError::Layout(h));
        }
        Ok(h)
    }

    pub(crate) fn region_start(&self, region: u32) -> u64 {
        VOLUME_HEADER_BYTES + u64::from(region) * self.region_bytes
    }
}

/// Why bytes are not a volume header this build reads (a [`StoreError`] says which
/// file; see `StoreError::BadVolume` and `StoreError::NotAVolume`).
///
/// [`StoreError`]: crate::StoreError
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HeaderError {
    #[error("file too short for a volume header ({len} bytes)")]
    Short { len: usize },
    #[error("not a quire volume (bad magic)")]
    Magic,
    #[error(
        "volume format version {found}, this build reads version {}",
        FORMAT_VERSION
    )]
    Version { found: u32 },
    #[error("volume header checksum mismatch")]
    Checksum,
    #[error("volume header describes an impossible layout: {0:?}")]
    Layout(VolumeHeader),
}

/// A region's header: its generation (volume-wide, increasing, never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RegionHeader {
    pub(crate) gen: u64,
}

// Region header layout: [0..4) magic, [4..8) version, [8..16) gen, [16..24) xxh3 of [0..16).
impl RegionHeader {
    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[..REGION_HEADER_BYTES as usize].fill(0);
        out[0..4].copy_from_slice(&REGION_MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[8..16].copy_from_slice(&self.gen.to_le_bytes());
        let sum = xxhash_rust::xxh3::xxh3_64(&out[0..16]);
        out[16..24].copy_from_slice(&sum.to_le_bytes());
    }

    /// `None` for a region never written, or one whose header is damaged.
    pub(crate) fn decode(b: &[u8]) -> Option<RegionHeader> {
        if u32_at(b, 0) != REGION_MAGIC || u32_at(b, 4) != FORMAT_VERSION {
            return None;
        }
        if xxhash_rust::xxh3::xxh3_64(&b[0..16]) != u64_at(b, 16) {
            return None;
        }
        let gen = u64_at(b, 8);
        // Generations count region openings from 1; anything near the top of the range
        // is damage (or a crafted file) and would make the counter overflow.
        (gen != 0 && gen < 1 << 62).then_some(RegionHeader { gen })
    }
}

/// The fixed part of an entry. Lengths are checked against the region by `decode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryHeader {
    pub(crate) flags: u16,
    /// The low 32 bits of the region generation the entry was written in.
    pub(crate) gen: u32,
    pub(crate) key_len: u32,
    pub(crate) tags_len: u32,
    pub(crate) meta_len: u32,
    pub(crate) body_len: u32,
    pub(crate) checksum: u64,
}

// Entry header layout: [0..4) magic, [4..6) version, [6..8) flags, [8..12) gen,
// [12..16) key len, [16..20) tags len, [20..24) meta len, [24..28) body len,
// [28..32) zero, [32..40) checksum.
/// Offset of an entry's flags word (u16) in its header: outside the checksum, written
/// in place (see [`FLAGS_DEAD`]).
pub const ENTRY_FLAGS_AT: usize = 6;

impl EntryHeader {
    pub(crate) fn payload_len(&self) -> u64 {
        u64::from(self.key_len)
            + u64::from(self.tags_len)
            + u64::from(self.meta_len)
            + u64::from(self.body_len)
    }

    /// Bytes the entry takes in its region, padding included.
    pub(crate) fn stride(&self) -> u64 {
        entry_stride(self.payload_len())
    }

    pub(crate) fn key_at(&self) -> u64 {
        ENTRY_HEADER_BYTES
    }
    pub(crate) fn tags_at(&self) -> u64 {
        self.key_at() + u64::from(self.key_len)
    }
    pub(crate) fn meta_at(&self) -> u64 {
        self.tags_at() + u64::from(self.tags_len)
    }
    pub(crate) fn body_at(&self) -> u64 {
        self.meta_at() + u64::from(self.meta_len)
    }

    /// Removed or overwritten (see [`FLAGS_DEAD`]).
    pub(crate) fn is_dead(&self) -> bool {
        self.flags.count_ones() >= 8
    }

    /// Writes the header; `checksum` must already be computed.
    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&ENTRY_MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&(FORMAT_VERSION as u16).to_le_bytes());
        out[ENTRY_FLAGS_AT..ENTRY_FLAGS_AT + 2].copy_from_slice(&self.flags.to_le_bytes());
        out[8..12].copy_from_slice(&self.gen.to_le_bytes());
        out[12..16].copy_from_slice(&self.key_len.to_le_bytes());
        out[16..20].copy_from_slice(&self.tags_len.to_le_bytes());
        out[20..24].copy_from_slice(&self.meta_len.to_le_bytes());
        out[24..28].copy_from_slice(&self.body_len.to_le_bytes());
        out[28..32].fill(0);
        out[32..40].copy_from_slice(&self.checksum.to_le_bytes());
    }

    /// Decodes the header at the start of `b` if it is an entry of generation `gen`
    /// whose payload fits in `room` bytes (the rest of its region, header included).
    /// `None` means "no entry here": end of the region's log, old bytes, or damage.
    pub(crate) fn decode(b: &[u8], gen: u32, room: u64) -> Option<EntryHeader> {
        if b.len() < ENTRY_HEADER_BYTES as usize
            || u32_at(b, 0) != ENTRY_MAGIC
            || u16::from_le_bytes([b[4], b[5]]) != FORMAT_VERSION as u16
            || u32_at(b, 8) != gen
            || u32_at(b, 28) != 0
        {
            return None;
        }
        let h = EntryHeader {
            flags: u16::from_le_bytes([b[ENTRY_FLAGS_AT], b[ENTRY_FLAGS_AT + 1]]),
            gen,
            key_len: u32_at(b, 12),
            tags_len: u32_at(b, 16),
            meta_len: u32_at(b, 20),
            body_len: u32_at(b, 24),
            checksum: u64_at(b, 32),
        };
        (h.stride() <= room && h.key_len as usize <= KEY_BYTES_MAX).then_some(h)
    }

    /// The checksum over the header fields (not flags) and the payload.
    pub(crate) fn compute_checksum(&self, payload: &[u8]) -> u64 {
        debug_assert_eq!(payload.len() as u64, self.payload_len());
        let mut fixed = [0u8; 40];
        let mut h = *self;
        h.flags = 0;
        h.checksum = 0;
        h.encode(&mut fixed);
        let mut x = Xxh3::new();
        x.update(&fixed[..32]);
        x.update(payload);
        x.digest()
    }
}

/// Bytes an entry with `payload_len` payload bytes takes, padding included.
pub(crate) fn entry_stride(payload_len: u64) -> u64 {
    (ENTRY_HEADER_BYTES + payload_len).div_ceil(ENTRY_ALIGN) * ENTRY_ALIGN
}

/// Walks the log of one region: the entries written under generation `gen32`, as
/// (offset in the region, header), in write order, stopping where the log ends (the
/// first header that is not an entry of that generation with room for its payload).
/// `header_at(off)` gives the [`ENTRY_HEADER_BYTES`] bytes at `off` within the region.
/// Does not check checksums. The one walker: recovery and reclaim run it over the
/// mapping, [`crate::format::entries`] over a file's bytes.
pub(crate) fn region_log(
    region_bytes: u64,
    gen32: u32,
    mut header_at: impl FnMut(u64) -> [u8; ENTRY_HEADER_BYTES as usize],
) -> impl Iterator<Item = (u64, EntryHeader)> {
    let mut off = REGION_HEADER_BYTES;
    std::iter::from_fn(move || {
        if off + ENTRY_HEADER_BYTES > region_bytes {
            return None;
        }
        let h = EntryHeader::decode(&header_at(off), gen32, region_bytes - off)?;
        let at = off;
        off += h.stride();
        Some((at, h))
    })
}

/// Bytes the tag list takes encoded.
pub(crate) fn tags_len(tags: &[&[u8]]) -> u64 {
    tags.iter().map(|t| 2 + t.len() as u64).sum()
}

/// Encodes tags as (u16 len, bytes)*; `out` must be `tags_len(tags)` long.
pub(crate) fn encode_tags(tags: &[&[u8]], out: &mut [u8]) {
    let mut at = 0;
    for t in tags {
        out[at..at + 2].copy_from_slice(&(t.len() as u16).to_le_bytes());
        out[at + 2..at + 2 + t.len()].copy_from_slice(t);
        at += 2 + t.len();
    }
    debug_assert_eq!(at, out.len());
}

/// Iterates an encoded tag list; stops at the first malformed item.
pub(crate) fn decode_tags(mut b: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if b.len() < 2 {
            return None;
        }
        let n = usize::from(u16::from_le_bytes([b[0], b[1]]));
        let tag = b.get(2..2 + n)?;
        b = &b[2 + n..];
        Some(tag)
    })
}

/// The 64-bit hash the index and tag index are keyed by.
pub(crate) fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// Tag hashes live in their own space so a tag never aliases a key.
pub(crate) fn hash_tag(tag: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(tag, 0x7a67)
}

/// Region size for a cap: 1/128 of it rounded down to a power of two, clamped (so a
/// power-of-two cap gets 127 regions and the header). Finer regions let reclaim pick
/// emptier victims; `quire bench store` measured 1/128 against 1/64 and 1/256.
pub(crate) fn default_region_bytes(cap_bytes: u64) -> u64 {
    let want = (cap_bytes / 128).max(1);
    let pow = 1u64 << (63 - want.leading_zeros());
    pow.clamp(REGION_BYTES_MIN, REGION_BYTES_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_header_round_trips_and_rejects_damage() {
        let h = VolumeHeader {
            cap_bytes: 1 << 30,
            region_bytes: 1 << 20,
            region_count: 1000,
        };
        let mut b = [0u8; 64];
        h.encode(&mut b);
        assert_eq!(VolumeHeader::decode(&b), Ok(h));
        let mut bad = b;
        bad[20] ^= 1;
        assert_eq!(VolumeHeader::decode(&bad), Err(HeaderError::Checksum));
        let mut old = b;
        old[8] = 9;
        assert_eq!(
            VolumeHeader::decode(&old),
            Err(HeaderError::Version { found: 9 })
        );
        assert!(VolumeHeader::decode(&old)
            .unwrap_err()
            .to_string()
            .contains("version 9"));
        assert_eq!(VolumeHeader::decode(&[0u8; 64]), Err(HeaderError::Magic));
        assert_eq!(
            VolumeHeader::decode(&b[..10]),
            Err(HeaderError::Short { len: 10 })
        );
    }

    #[test]
    fn entry_header_checks_generation_and_room() {
        let payload = b"keytagsmetabody".to_vec();
        let mut h = EntryHeader {
            flags: 0,
            gen: 7,
            key_len: 3,
            tags_len: 4,
            meta_len: 4,
            body_len: 4,
            checksum: 0,
        };
        h.checksum = h.compute_checksum(&payload);
        let mut b = [0u8; 40];
        h.encode(&mut b);
        assert_eq!(EntryHeader::decode(&b, 7, 1024), Some(h));
        assert_eq!(EntryHeader::decode(&b, 8, 1024), None, "stale generation");
        assert_eq!(
            EntryHeader::decode(&b, 7, 40),
            None,
            "payload past the region"
        );
        // Flags are outside the checksum: marking dead keeps the entry verifiable.
        let mut dead = h;
        dead.flags = FLAGS_DEAD;
        assert!(dead.is_dead() && !h.is_dead());
        assert!(
            !EntryHeader { flags: 1 << 3, ..h }.is_dead(),
            "one flipped bit"
        );
        assert!(
            EntryHeader {
                flags: !(1 << 9),
                ..h
            }
            .is_dead(),
            "one flipped bit"
        );
        assert_eq!(dead.compute_checksum(&payload), h.checksum);
        let mut torn = payload.clone();
        torn[12] ^= 0x40;
        assert_ne!(h.compute_checksum(&torn), h.checksum);
    }

    #[test]
    fn tags_round_trip_and_stop_at_garbage() {
        let tags: [&[u8]; 3] = [b"a", b"", b"tag-three"];
        let mut b = vec![0u8; tags_len(&tags) as usize];
        encode_tags(&tags, &mut b);
        assert_eq!(decode_tags(&b).collect::<Vec<_>>(), tags.to_vec());
        assert_eq!(decode_tags(&[5, 0, 1]).count(), 0);
    }

    #[test]
    fn region_size_scales_with_cap() {
        assert_eq!(default_region_bytes(16 << 20), 128 << 10);
        assert_eq!(default_region_bytes((32 << 20) - 1), 128 << 10);
        assert_eq!(default_region_bytes(256 << 20), 2 << 20);
        assert_eq!(default_region_bytes(1 << 20), REGION_BYTES_MIN);
        assert_eq!(default_region_bytes(1 << 40), REGION_BYTES_MAX);
        assert_eq!(entry_stride(0), 48);
        assert_eq!(entry_stride(8), 48);
        assert_eq!(entry_stride(9), 64);
    }
}
