//! `quire-store`: the storage engine under quire's page cache.
//!
//! [`Store`] implements the storage contract ([`Engine`]): one file per volume,
//! preallocated to its cap and memory-mapped. The file is cut into fixed-size regions
//! written append-only. A put reserves bytes in the active region (a short lock), copies
//! its entry with no lock held and publishes it under its key's index shard lock. Space
//! is reclaimed inline by the writers that need it (no janitor): the region that frees
//! most for least is claimed, its live entries with the most hits per byte are carried
//! forward within a bounded share of the region and the rest are evicted, so the cap
//! holds by construction. An in-RAM index maps key hashes to packed locations; a hit is
//! a pinned slice of the mapping (and the volume's fd + offset for `sendfile`).
//! Admission keeps one-hit wonders out; a RAM tier can hold the hot set. Restart is
//! warm: the regions are scanned and every entry is checked (magic, version,
//! generation, checksum).
//!
//! The file-per-entry design the store replaced implements the same contract in the
//! `quire-bench` crate, as the baseline `quire bench store` compares against.
//!
//! The store knows nothing of HTTP: keys, tags and metadata are opaque bytes.

mod admission;
mod counters;
mod engine;
mod error;
pub mod format;
mod handle;
mod huge_pages;
mod index;
mod layout;
mod options;
mod ram_tier;
mod reclaim;
mod recovery;
mod region;
mod residency;
mod shared;
mod space;
mod store;
mod tags;
#[cfg(feature = "testkit")]
pub mod testkit;
mod volume;

pub use engine::{Engine, EntryRef, FileExtent, Put, Stats};
pub use error::{Result, StoreError};
pub use handle::{Handle, Span};
pub use huge_pages::HugePages;
pub use options::Options;
pub use recovery::OpenReport;
pub use residency::Residency;
pub use store::{Cold, Fetched, SpaceBreakdown, Store};
