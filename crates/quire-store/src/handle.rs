//! [`Handle`]: a hit. It pins its region (see `region`) so its bytes cannot be reclaimed
//! while it lives, and gives them out zero-copy: slices of the mapping, or the volume's
//! fd and offset for `sendfile`. Dropping it unpins; it never blocks.

use std::fmt;
use std::sync::Arc;

use crate::engine::{EntryRef, FileExtent};
use crate::store::Shared;

/// A pinned, verified entry of a [`Store`](crate::Store).
pub struct Handle {
    shared: Arc<Shared>,
    region: u32,
    /// Absolute volume offsets and lengths of the meta and body.
    meta_at: u64,
    meta_len: u64,
    body_at: u64,
    body_len: u64,
}

impl Handle {
    /// Wraps a pin the caller already took on `region`; the handle releases it.
    pub(crate) fn new(
        shared: Arc<Shared>,
        region: u32,
        (meta_at, meta_len): (u64, u64),
        (body_at, body_len): (u64, u64),
    ) -> Handle {
        Handle {
            shared,
            region,
            meta_at,
            meta_len,
            body_at,
            body_len,
        }
    }
}

impl EntryRef for Handle {
    fn meta(&self) -> &[u8] {
        // SAFETY: the handle holds a pin on `region` (taken before it was built, released
        // in Drop), so the writer cannot claim the region and nobody writes these
        // bytes, which lie inside a published entry and exclude its flags word.
        unsafe { self.shared.volume.slice(self.meta_at, self.meta_len) }
    }

    fn body(&self) -> &[u8] {
        // SAFETY: as in `meta`.
        unsafe { self.shared.volume.slice(self.body_at, self.body_len) }
    }

    fn body_extent(&self) -> Option<FileExtent<'_>> {
        Some(FileExtent {
            fd: self.shared.volume.fd(),
            offset: self.body_at,
            len: self.body_len,
        })
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.regions.unpin(self.region);
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("region", &self.region)
            .field("meta_len", &self.meta_len)
            .field("body_len", &self.body_len)
            .finish()
    }
}
