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
    /// Absolute volume offsets and lengths of the meta and body, in a pinned region;
    /// `lead`: the bytes of the entry before its meta (header, key, tags).
    Mapped {
        region: u32,
        lead: u32,
        meta_at: u64,
        meta_len: u64,
        body_at: u64,
        body_len: u64,
    },
    Ram(RamEntry),
}

impl Handle {
    /// Wraps a pin the caller already took on `region`, for the entry at `entry_at`;
    /// the handle releases it.
    pub(crate) fn new(
        shared: Arc<Shared>,
        (region, entry_at): (u32, u64),
        (meta_at, meta_len): (u64, u64),
        (body_at, body_len): (u64, u64),
    ) -> Handle {
        debug_assert!(entry_at < meta_at, "the meta follows the entry's header");
        Handle {
            shared,
            src: Source::Mapped {
                region,
                // (A header and a key: far below 4 GiB.)
                lead: u32::try_from(meta_at - entry_at).unwrap_or(u32::MAX),
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

    /// Where the entry's header, key, tags and meta lie in memory, which a later
    /// lookup of the same key reads: for a prefetch ahead of it. `None` for a
    /// RAM-tier hit.
    pub fn span(&self) -> Option<Span> {
        let Source::Mapped { lead, meta_len, .. } = self.src else {
            return None;
        };
        let lead = lead as usize;
        Some(Span {
            at: (self.meta().as_ptr() as usize).wrapping_sub(lead),
            len: lead + meta_len as usize,
        })
    }
}

/// Where a mapped entry's header, key, tags and meta lay in memory when it was read
/// ([`Handle::span`]): an address, never read through, only handed to the CPU as a
/// prefetch hint. It outlives the handle and its pin, so the entry may have moved
/// or gone since; a prefetch of such an address loads a line for nothing (a
/// prefetch never faults), and the lookup it was for checks the entry as always.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The address of the entry's first byte.
    pub at: usize,
    /// Its bytes up to the end of its meta.
    pub len: usize,
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
