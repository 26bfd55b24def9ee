//! The contract every storage engine implements: the memory-mapped [`Store`](crate::Store)
//! and the file-per-entry baseline (in the `quire-bench` crate) sit behind it, so
//! `quire bench store` and the tests drive both with the same code, and the server
//! is written against it rather than against the store.
//!
//! Contract:
//! - Keys, tags and metadata are opaque bytes; an engine knows nothing of HTTP.
//! - `put` may decline to store (admission, or no reclaimable space): it returns
//!   [`Put::Rejected`], never an error, for that. After `put` returns `Stored`, a `get`
//!   on any thread sees the new value (or a later one), never an older one.
//! - `get` returns a handle whose `meta()`/`body()` stay exactly the bytes that were
//!   stored for as long as the handle lives, whatever writers, removers and reclaim do
//!   meanwhile. A corrupt, torn or colliding entry is a miss, never wrong bytes.
//! - `remove`/`remove_tagged` take effect for every `get` that starts after they return;
//!   handles already held keep their bytes.
//! - Dropping a handle releases whatever it pinned; it never blocks.

use std::os::fd::BorrowedFd;

use crate::error::Result;

/// What `put` did with the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// Written; visible to every `get` that starts from now on.
    Stored,
    /// Declined by the admission policy or for lack of reclaimable space.
    Rejected,
}

/// A byte range of an open file, for `sendfile(2)` straight from the volume.
#[derive(Debug, Clone, Copy)]
pub struct FileExtent<'a> {
    /// The file, borrowed for as long as the handle that gave it out.
    pub fd: BorrowedFd<'a>,
    /// Where the body starts in the file.
    pub offset: u64,
    /// The body's length in bytes.
    pub len: u64,
}

/// A hit: read access to one stored object that stays valid while the handle lives.
pub trait EntryRef: Send + Sync + 'static {
    /// The metadata stored with the object (for quire, the encoded response head).
    fn meta(&self) -> &[u8];
    /// The object's body.
    fn body(&self) -> &[u8];
    /// Where the body lies in a file, when the engine can hand that out for
    /// `sendfile`. The bytes there equal `body()` while the handle lives.
    fn body_extent(&self) -> Option<FileExtent<'_>>;
}

/// Counters and gauges every engine reports. Counters only grow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Stats {
    /// `get`s that found an entry.
    pub hits: u64,
    /// `get`s that found none (a torn, stale or colliding entry counts here).
    pub misses: u64,
    /// Puts written.
    pub admitted: u64,
    /// Puts declined (admission policy or no reclaimable space).
    pub rejected: u64,
    /// Entries dropped to make room (not counting explicit removes or overwrites).
    pub evicted: u64,
    /// Entries carried forward by reclaim (live entries it kept, highest hits per byte
    /// first).
    pub carried: u64,
    /// Hits served from the RAM tier (a subset of `hits`).
    pub ram_hits: u64,
    /// Bytes the engine occupies for data now (for the store: regions in use; for
    /// the baseline: the files' sizes as the janitor last saw them plus writes since).
    pub bytes_used: u64,
    /// Bytes of entries that are live (reachable by `get`), headers included.
    pub bytes_live: u64,
    /// The configured cap.
    pub cap_bytes: u64,
    /// Live entries.
    pub entries: u64,
    /// Bytes of RAM the key index takes (hash table slots), not counting tags.
    pub index_bytes: u64,
    /// Bytes of RAM the tag index takes.
    pub tag_index_bytes: u64,
    /// Bytes held by the RAM tier.
    pub ram_bytes: u64,
    /// Whether the volume's mapping asks for 2 MiB pages (`HugePages`).
    pub huge_pages: bool,
}

/// A storage engine: see the module doc for the contract.
pub trait Engine: Send + Sync + 'static {
    /// What a hit hands out.
    type Entry: EntryRef;

    /// Stores `body` with `meta` under `key`, replacing any earlier value, labelled
    /// with `tags` for [`Engine::remove_tagged`].
    fn put(&self, key: &[u8], meta: &[u8], body: &[u8], tags: &[&[u8]]) -> Result<Put>;
    /// Looks `key` up; `None` is a miss.
    fn get(&self, key: &[u8]) -> Option<Self::Entry>;
    /// Removes `key`; true if it was present.
    fn remove(&self, key: &[u8]) -> Result<bool>;
    /// Removes every entry labelled `tag`; returns how many.
    fn remove_tagged(&self, tag: &[u8]) -> Result<usize>;
    /// A snapshot of the counters.
    fn stats(&self) -> Stats;
    /// A short name for reports ("quire", "file").
    fn name(&self) -> &'static str;
}
