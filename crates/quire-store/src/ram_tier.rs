//! The RAM tier: copies of hot entries in process memory, so the hottest objects are
//! served without touching the mapping (no region pin, no page fault when the volume
//! is larger than the page cache can keep resident).
//!
//! Built on `quick_cache` (S3-FIFO, weighted by bytes): scan-resistant and lock-light.
//! An entry is promoted on a hit of a location already marked hit (its second hit since
//! it was written), if it is at most `OBJECT_BYTES_MAX`; promotion copies it once, on
//! the reading thread. Every RAM copy remembers the volume location it was copied
//! from, and `get` consults the RAM tier only after the index lookup, serving the copy
//! only if the index still points at that location. So an overwrite, remove or reclaim
//! (which all change or drop the index entry) makes the copy unreachable at once; the
//! writer also drops it eagerly to free the memory.

use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use crate::index::Loc;

/// Objects larger than this are never copied into RAM (they are `sendfile` material).
pub(crate) const OBJECT_BYTES_MAX: u64 = 256 << 10;

/// One copied entry: key, meta and body back to back, and where it was copied from.
#[derive(Debug, Clone)]
pub(crate) struct RamEntry {
    from: Loc,
    bytes: Arc<[u8]>,
    key_len: usize,
    meta_len: usize,
}

impl RamEntry {
    pub(crate) fn meta(&self) -> &[u8] {
        &self.bytes[self.key_len..self.key_len + self.meta_len]
    }
    pub(crate) fn body(&self) -> &[u8] {
        &self.bytes[self.key_len + self.meta_len..]
    }
}

#[derive(Debug, Clone)]
struct ByBytes;

impl Weighter<u64, RamEntry> for ByBytes {
    fn weight(&self, _key: &u64, val: &RamEntry) -> u64 {
        // + a slot's overhead, so empty entries still weigh something.
        val.bytes.len() as u64 + 64
    }
}

#[derive(Debug)]
pub(crate) struct RamTier {
    cache: Cache<u64, RamEntry, ByBytes>,
}

impl RamTier {
    pub(crate) fn new(bytes: u64) -> RamTier {
        let items = (bytes / 4096).max(16) as usize;
        RamTier {
            cache: Cache::with_weighter(items, bytes, ByBytes),
        }
    }

    /// The copy of `key` (hashing to `hash`) taken from `at`, if there is one.
    pub(crate) fn get(&self, hash: u64, at: Loc, key: &[u8]) -> Option<RamEntry> {
        self.cache
            .get(&hash)
            .filter(|e| e.from.same_place(at) && &e.bytes[..e.key_len] == key)
    }

    /// Whether a copy taken from `at` is held for `hash` (no key check, no hit
    /// recorded: a residency probe before the real lookup).
    pub(crate) fn holds(&self, hash: u64, at: Loc) -> bool {
        self.cache
            .peek(&hash)
            .is_some_and(|e| e.from.same_place(at))
    }

    pub(crate) fn promote(&self, hash: u64, from: Loc, key: &[u8], meta: &[u8], body: &[u8]) {
        let mut v = Vec::with_capacity(key.len() + meta.len() + body.len());
        v.extend_from_slice(key);
        v.extend_from_slice(meta);
        v.extend_from_slice(body);
        self.cache.insert(
            hash,
            RamEntry {
                from,
                bytes: v.into(),
                key_len: key.len(),
                meta_len: meta.len(),
            },
        );
    }

    pub(crate) fn drop_copy(&self, hash: u64) {
        self.cache.remove(&hash);
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.cache.weight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(region: u32) -> Loc {
        Loc {
            region,
            offset16: 1,
            gen18: 2,
            freq: 3,
        }
    }

    #[test]
    fn serves_only_copies_of_the_current_location() {
        let t = RamTier::new(1 << 20);
        t.promote(9, at(1), b"k", b"m", b"body");
        let e = t.get(9, at(1), b"k").unwrap();
        assert_eq!((e.meta(), e.body()), (&b"m"[..], &b"body"[..]));
        assert!(
            t.get(9, at(2), b"k").is_none(),
            "index moved on: copy is stale"
        );
        assert!(t.get(9, at(1), b"j").is_none(), "hash collision: other key");
        t.drop_copy(9);
        assert!(t.get(9, at(1), b"k").is_none());
    }

    #[test]
    fn weight_is_bounded() {
        let t = RamTier::new(64 << 10);
        for k in 0..100 {
            t.promote(k, at(0), b"k", b"", &[0u8; 4000]);
        }
        assert!(t.bytes() <= 64 << 10);
    }
}
