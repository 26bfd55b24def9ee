//! (in progress) The memory-mapped store.
use std::path::Path;
use std::sync::Arc;

use crate::engine::{Engine, Put, Stats};
#[allow(unused_imports)]
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
    /// Share of each region that reclaim may spend carrying hit entries forward
    /// (0.0 turns carrying off; at most 0.5).
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
            carry_share: 0.25,
            verify_reads: false,
        }
    }
}

/// The memory-mapped store (in progress).
#[derive(Debug, Clone)]
pub struct Store {
    _inner: Arc<()>,
}

impl Store {
    /// Opens (or creates) the volume at `path` with a cap of `cap_bytes`.
    pub fn open(_path: impl AsRef<Path>, _cap_bytes: u64, _options: Options) -> Result<Store> {
        Err(StoreError::InvalidOptions("not built yet".into()))
    }
    /// Flushes and marks the volume clean, so the next open trusts it without rehashing.
    pub fn close(self) -> Result<()> {
        Ok(())
    }
}

impl Engine for Store {
    type Entry = crate::handle::Handle;
    fn put(&self, _key: &[u8], _meta: &[u8], _body: &[u8], _tags: &[&[u8]]) -> Result<Put> {
        Ok(Put::Rejected)
    }
    fn get(&self, _key: &[u8]) -> Option<Self::Entry> {
        None
    }
    fn remove(&self, _key: &[u8]) -> Result<bool> {
        Ok(false)
    }
    fn remove_tagged(&self, _tag: &[u8]) -> Result<usize> {
        Ok(0)
    }
    fn stats(&self) -> Stats {
        Stats::default()
    }
    fn name(&self) -> &'static str {
        "quire"
    }
}
