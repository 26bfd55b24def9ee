//! The store's one error type.
//!
//! Misses are not errors: a torn, stale, colliding or corrupt entry reads as a miss
//! (`None` from `get`). Errors are for what the caller must act on: an object over the
//! size limit, a volume that cannot be opened, an I/O failure while writing.

use std::path::PathBuf;

/// Everything that can go wrong in `quire-store`, with enough context to act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The object (key + tags + meta + body + header) does not fit the configured limit.
    #[error("object of {size_bytes} bytes exceeds the limit of {limit_bytes} bytes")]
    TooLarge {
        /// The object's size as stored.
        size_bytes: u64,
        /// The largest object accepted.
        limit_bytes: u64,
    },
    /// A key or tag longer than the format allows.
    #[error("{what} of {len} bytes exceeds the limit of {limit} bytes")]
    FieldTooLong {
        /// Which field ("key", "tag", "tag list").
        what: &'static str,
        /// Its length (bytes, or tags for the list).
        len: usize,
        /// The format's limit for it.
        limit: usize,
    },
    /// Options that cannot describe a volume (cap too small, region size not usable, ...).
    #[error("invalid store options: {0}")]
    InvalidOptions(String),
    /// The file at `path` is not a quire volume, or one this build cannot read.
    #[error("{path}: {reason}")]
    BadVolume {
        /// The volume path given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Bytes handed to [`format::entries`](crate::format::entries) that do not start
    /// with a volume header this build reads.
    #[error("not a quire volume this build reads: {reason}")]
    NotAVolume {
        /// What is wrong with the header.
        reason: String,
    },
    /// Another process (or another open in this one) holds the volume: two stores
    /// on one file would truncate and overwrite each other's mappings (SIGBUS).
    #[error("{path} is in use by another quire process (it holds the volume's lock)")]
    InUse {
        /// The volume path given.
        path: PathBuf,
    },
    /// Every region is pinned by a reader or in use; nothing can be reclaimed right now.
    /// The put is dropped (a cache may always decline to store).
    #[error("no region can be reclaimed: all are pinned by readers")]
    NoSpace,
    /// An I/O error, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, and to which file.
        context: String,
        /// The error the system returned.
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        StoreError::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result alias for the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
