//! [`Handle`]: a hit. A mapped hit pins its region (see `region`) so its bytes cannot be
//! reclaimed while it lives, and gives them out zero-copy: slices of the mapping, or the
//! volume's fd and offset for `sendfile`. A RAM-tier hit holds a reference-counted copy.
//! Dropping a handle unpins; it never blocks.

use std::fmt;
use std::sync::Arc;

use crate::engine::{EntryRef, FileExtent};
use crate::ram_tier::RamEntry;
use crate::shared::Shared;

/// A pinned, verified entry of a [`Store`](crate::Store).
pub struct Handle {
    shared: Arc<Shared>,
    src: Source,
}

enum Source {
    /// Absolute volume offsets and lengths of the meta and body, in a pinned region.
    Mapped {
        region: u32,
        meta_at: u64,
        meta_len: u64,
        body_at: u64,
        body_len: u64,
    },
    Ram(RamEntry),
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
            src: Source::Mapped {
                region,
                meta_at,
                meta_len,
                body_at,
                body_len,
            },
        }
    }

    pub(crate) fn from_ram(shared: Arc<Shared>, entry: RamEntry) -> Handle {
        Handle {
            shared,
            src: Source::Ram(entry),
        }
    }

    /// Whether this hit came from the RAM tier.
    pub fn is_from_ram(&self) -> bool {
        matches!(self.src, Source::Ram(_))
    }
}

impl EntryRef for Handle {
    fn meta(&self) -> &[u8] {
        match &self.src {
            Source::Mapped {
                meta_at, meta_len, ..
            } => {
                // SAFETY: the handle holds a pin on its region (taken before it was
                // built, released in Drop), so the writer cannot claim the region and
                // nobody writes these bytes, which lie inside a published entry and
                // exclude its flags word.
                unsafe { self.shared.volume.slice(*meta_at, *meta_len) }
            }
            Source::Ram(e) => e.meta(),
        }
    }

    fn body(&self) -> &[u8] {
        match &self.src {
            Source::Mapped {
                body_at, body_len, ..
            } => {
                // SAFETY: as in `meta`.
                unsafe { self.shared.volume.slice(*body_at, *body_len) }
            }
            Source::Ram(e) => e.body(),
        }
    }

    fn body_extent(&self) -> Option<FileExtent<'_>> {
        match &self.src {
            Source::Mapped {
                body_at, body_len, ..
            } => Some(FileExtent {
                fd: self.shared.volume.fd(),
                offset: *body_at,
                len: *body_len,
            }),
            Source::Ram(_) => None,
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Source::Mapped { region, .. } = self.src {
            self.shared.regions.unpin(region);
        }
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("from_ram", &self.is_from_ram())
            .field("meta_len", &self.meta().len())
            .field("body_len", &self.body().len())
            .finish()
    }
}
