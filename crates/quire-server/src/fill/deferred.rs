//! The slow codings of an entry are made on its second read, not at its commit.
//!
//! A commit stores identity and gzip ([`crate::fill::commit`]) and leaves here what
//! the background job needs to add brotli, zstd and `dcz` later
//! ([`Later`]): the entry's key and version, the fill's start in the invalidation log
//! and its tags. The first time a reader is served that entry from the store
//! ([`crate::request::lookup`]), [`crate::fill::recompress::on_read`] queues the job on
//! the compression pool's background queue.
//!
//! Why: a crowd asking for thousands of pages nobody else reads made quire spend most
//! of a core on brotli 11 and zstd 19 for pages that would never be served again,
//! and the readers' hits paid for it in their tail (`scripts/crowd-figures.py`, one
//! core, a reader beside 2,000 addresses asking for new pages: hit p99 0.58 ms alone,
//! 2.29 ms with the crowd, with brotli and zstd on; the compression threads had 55 % of
//! the core). A page read twice is worth its strong codings; a page read once is
//! served by the response that stored it and gzip is enough for the rare second
//! reader that comes before its job ends. Measured after, in alternating 30 s rounds
//! of the same setup: hit p99 0.47–0.51 ms alone, 0.46–0.71 ms with the crowd, as
//! with no compression at all (0.47–0.72 ms with the crowd), against 1.35–2.23 ms
//! for the build before (`bench/runs/2026-11-29-vm-2core-crowd-deferred/`).
//!
//! Key decisions:
//! - **What waits holds no body.** The job copies the identity body out of the store
//!   when it runs ([`crate::fill::recompress::make`]), so thousands of waiting entries
//!   cost their keys and tags, not their pages.
//! - **Bounded**: at most [`WAITING_BYTES_MAX`] of keys and tags wait (about 16,000
//!   entries of a 100-byte URL); past it the cache's eviction drops the entries not
//!   read since (quick_cache's CLOCK). Nothing waits across restarts either. An entry
//!   with gzip but neither brotli nor zstd that is read with nothing waiting for it is
//!   **recovered from its own record** (`recompress::on_read`): its tags are rebuilt
//!   from it and, its fill's start being unknown, the whole invalidation log since
//!   this process started is checked against them — so a URL purged earlier in this
//!   process keeps identity and gzip until it is filled again (a lost store, never a
//!   lost purge).
//! - **Once per version**: a read takes out what waits ([`Deferred::take`]), so two
//!   readers never queue one entry twice; the decoded record remembers it asked
//!   (`Prepared::ask_codings`), so later hits on it do not even look. A job the pool
//!   refuses (budget full) is put back to wait for the next read.
//! - **No invalidation is lost**: the job runs through the gate with the fill's own
//!   start, exactly as a job queued at the commit did; an entry whose start the log
//!   no longer covers is dropped before it costs anything (the gate would refuse it
//!   anyway — a lost store, never a lost purge). See [`crate::cache::invalidate`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quire_http::dictionary::Dictionary;

use crate::cache::invalidate::Tags;

/// Most bytes of keys and tags kept waiting for a second read.
pub(crate) const WAITING_BYTES_MAX: u64 = 4 << 20;

/// What a waiting entry is counted at beyond its key and tags (the struct, the
/// cache's slot).
const ENTRY_OVERHEAD: u64 = 128;

/// A committed entry waiting for its other codings.
#[derive(Debug, Clone)]
pub(crate) struct Later {
    /// Where the entry is.
    pub key: Vec<u8>,
    /// The record's id as committed.
    pub id: u64,
    /// Whether its type and size are worth compressing.
    pub compressible: bool,
    /// The dictionary it is also made `dcz` against (`recompress::dcz_dictionary`).
    pub dictionary: Option<Arc<Dictionary>>,
    /// The fill's start in the invalidation log.
    pub start: u64,
    /// The record's tags.
    pub tags: Tags,
}

/// What became of a waiting entry, for `quire_deferred_codings_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Left to wait at the commit.
    Deferred = 0,
    /// Its job queued on a read.
    Queued = 1,
    /// The pool's budget refused its job on a read; put back to wait.
    Refused = 2,
    /// The invalidation log no longer covers its fill: dropped.
    Expired = 3,
    /// Read with nothing waiting for it though it lacks its slow codings (stored
    /// before this process started, or dropped from the list): its job queued on
    /// its own record's terms (`recompress::on_read`).
    Recovered = 4,
}

const RESULTS: [&str; 5] = ["deferred", "queued", "refused", "expired", "recovered"];

/// Weighs a waiting entry by what it holds.
#[derive(Debug, Clone, Copy, Default)]
struct ByBytes;

impl quick_cache::Weighter<Vec<u8>, Later> for ByBytes {
    fn weight(&self, key: &Vec<u8>, later: &Later) -> u64 {
        (key.len() + later.key.len() + later.tags.len() * 8) as u64 + ENTRY_OVERHEAD
    }
}

/// The entries waiting for their second read (one per server, in `Ctx`).
#[derive(Debug)]
pub(crate) struct Deferred {
    waiting: quick_cache::sync::Cache<Vec<u8>, Later, ByBytes>,
    counts: [AtomicU64; 5],
}

impl Default for Deferred {
    fn default() -> Deferred {
        let items = (WAITING_BYTES_MAX / 256) as usize;
        Deferred {
            waiting: quick_cache::sync::Cache::with_weighter(items, WAITING_BYTES_MAX, ByBytes),
            counts: Default::default(),
        }
    }
}

impl Deferred {
    /// Counts `outcome`.
    pub(crate) fn count(&self, outcome: Outcome) {
        self.counts[outcome as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// What waits for the entry under `key`, taken out.
    pub(crate) fn take(&self, key: &[u8]) -> Option<Later> {
        self.waiting.remove(key).map(|(_, l)| l)
    }

    /// Leaves `later` waiting (in place of what waited for its key).
    pub(crate) fn put(&self, later: Later) {
        self.waiting.insert(later.key.clone(), later);
    }

    /// Entries waiting now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The families in Prometheus text format.
    pub(crate) fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "# HELP quire_deferred_codings_total Stored entries whose brotli, zstd and dcz wait for a second read: deferred at the commit, queued on a read, refused by the compression budget (asked again on a later read), expired (the invalidation log no longer covers the fill), recovered (read with nothing waiting: stored before a restart, or dropped from the list).\n\
             # TYPE quire_deferred_codings_total counter"
        );
        for (i, r) in RESULTS.iter().enumerate() {
            let n = self.counts[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "quire_deferred_codings_total{{result=\"{r}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP quire_deferred_codings_waiting Stored entries waiting for a second read to get their slow codings.\n\
             # TYPE quire_deferred_codings_waiting gauge\n\
             quire_deferred_codings_waiting {}",
            self.waiting()
        );
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn later(key: &[u8], tags: usize) -> Later {
        let t: Vec<String> = (0..tags).map(|i| format!("u:{i}")).collect();
        Later {
            key: key.to_vec(),
            id: 7,
            compressible: true,
            dictionary: None,
            start: 0,
            tags: Tags::new(&t, true),
        }
    }

    #[test]
    fn what_waits_is_taken_once() {
        let d = Deferred::default();
        d.put(later(b"k", 2));
        assert_eq!(d.waiting(), 1);
        assert_eq!(d.take(b"k").map(|l| l.id), Some(7));
        assert!(
            d.take(b"k").is_none(),
            "a second reader finds nothing to queue"
        );
        assert_eq!(d.waiting(), 0);
    }

    /// A crowd of pages read once cannot make what waits grow past its bound.
    #[test]
    fn a_crowd_of_pages_read_once_stays_within_the_bound() {
        let d = Deferred::default();
        let key = |i: u32| format!("http://h/{i:0>90}").into_bytes();
        for i in 0..200_000u32 {
            d.put(later(&key(i), 4));
        }
        let each = 2 * key(0).len() as u64 + 4 * 8 + ENTRY_OVERHEAD;
        let held = d.waiting() as u64 * each;
        assert!(held <= WAITING_BYTES_MAX, "{} entries wait", d.waiting());
        assert!(d.waiting() > 1_000, "only {} entries wait", d.waiting());
        // The newest are still there to be read a second time.
        assert!(d.take(&key(199_999)).is_some());
    }
}
