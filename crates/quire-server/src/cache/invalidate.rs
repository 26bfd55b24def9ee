//! Invalidations that win every race: the log every purge and unsafe-method
//! invalidation is written to, and the gate every store write that could bring old
//! bytes back passes through.
//!
//! The race this closes: a fill fetches `/page`, a purge of `/page` runs while the
//! fill is still compressing, finds nothing stored, answers 200 — and then the fill
//! stores the old response. Deleting harder cannot fix that; the writer has to know.
//!
//! The mechanism:
//! - **Every invalidation is an entry in a log** with a sequence number: the tags it
//!   targets (the tag hashes of [`crate::cache::object`]: a URL, a directory, a surrogate
//!   key) and whether it was soft. [`Invalidations::record`] appends it under the
//!   log's write lock *before* the purge touches the store.
//! - **Every writer remembers when it started** ([`Invalidations::now`], read before
//!   a fill sends its request to the origin, or when a purge's own rewrite begins).
//! - **Every write goes through [`Invalidations::commit`]**, which holds the log's
//!   read lock while it checks the entries appended since the writer started against
//!   the writer's tags and then writes: [`Verdict::Hard`] → nothing is written;
//!   [`Verdict::Soft`] → the record is written already stale; [`Verdict::Clean`] →
//!   written as is.
//!
//! Why no invalidation is lost: a purge's append (write lock) and a commit (read
//! lock) are ordered. If the commit came first, its entry is in the index and the tag
//! index when the purge, after its append, removes or rewrites what is tagged — the
//! purge finds it. If the append came first, the commit sees the entry and does not
//! write fresh bytes. Either way, once the purge has answered, no entry holding bytes
//! from before it is fresh in the store. Soft verdicts write stale records, so two
//! writers racing on one key (a soft purge's rewrite and a background recompression)
//! can only both write stale.
//!
//! The same log decides who may share a fill in flight ([`crate::fill::coalesce`]): a request
//! that joined after a matching invalidation never takes the fill's bytes, since they
//! may predate it ([`Invalidations::between`]).
//!
//! The log is bounded ([`LOG_ENTRIES_MAX`]); a writer that started before the oldest
//! entry still held cannot know what it missed and is treated as hard-invalidated
//! (counted in `quire_invalidation_log_overruns_total`): a lost store, never a lost
//! purge.
//!
//! Note changes in publishing mode do not depend on this: a new note version changes
//! the key itself (see [`crate::upstream`]), so a fill that started before the change
//! can only store under a key no request computes any more.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Entries kept. Each is 24 bytes; a writer older than the oldest one kept is treated
/// as invalidated, so this only needs to cover what can happen during one fill's
/// lifetime (`limits.fill_deadline`).
pub(crate) const LOG_ENTRIES_MAX: usize = 1 << 16;

/// What an invalidation asked for, for the writers that raced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Nothing matching happened since the writer started.
    Clean,
    /// A soft purge matched: write only as stale.
    Soft,
    /// A hard purge or an unsafe-method invalidation matched (or the log was trimmed
    /// past the writer's start): do not write.
    Hard,
}

/// What kind of tag an entry targets. A writer that does not yet know its surrogate
/// keys (a fill before its response head) must assume every key purge matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagKind {
    /// A URL or directory tag: known before the response.
    Url,
    /// A surrogate key from a response.
    Key,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    seq: u64,
    tag: u64,
    kind: TagKind,
    soft: bool,
}

#[derive(Debug, Default)]
struct Log {
    /// The sequence number the next entry gets.
    next: u64,
    /// Entries numbered below this may have been dropped (some or all of their tags).
    complete_from: u64,
    entries: VecDeque<Entry>,
}

/// The tags a writer carries, as hashes, and whether its surrogate keys are known.
#[derive(Debug, Clone, Default)]
pub struct Tags {
    hashes: Vec<u64>,
    /// False while a fill has not seen its response head: any key purge matches.
    keys_known: bool,
}

impl Tags {
    /// Tags from their strings (as [`crate::cache::object::record_tags`] makes them);
    /// `keys_known` says whether surrogate keys are among them already.
    pub fn new<S: AsRef<str>>(tags: &[S], keys_known: bool) -> Tags {
        Tags {
            hashes: tags.iter().map(|t| tag_hash(t.as_ref())).collect(),
            keys_known,
        }
    }

    /// How many tags.
    pub(crate) fn len(&self) -> usize {
        self.hashes.len()
    }

    fn matches(&self, e: &Entry) -> bool {
        (!self.keys_known && e.kind == TagKind::Key) || self.hashes.contains(&e.tag)
    }
}

/// The hash a tag is logged under (the same for writers and purges).
pub(crate) fn tag_hash(tag: &str) -> u64 {
    quire_http::key::key_hash(tag.as_bytes())
}

/// The invalidation log and the commit gate (one per server, in [`crate::Ctx`]).
#[derive(Debug, Default)]
pub struct Invalidations {
    log: RwLock<Log>,
    overruns: AtomicU64,
}

impl Invalidations {
    fn read(&self) -> RwLockReadGuard<'_, Log> {
        self.log.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Log> {
        self.log.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The sequence number a writer starting now remembers: every entry it must
    /// respect will have this number or a higher one.
    pub fn now(&self) -> u64 {
        self.read().next
    }

    /// Logs an invalidation of `tags` (tag strings and their kinds) and returns its
    /// sequence number. Call it before touching the store.
    pub fn record(&self, tags: &[(String, TagKind)], soft: bool) -> u64 {
        let mut log = self.write();
        let seq = log.next;
        for (t, kind) in tags {
            if log.entries.len() == LOG_ENTRIES_MAX {
                if let Some(gone) = log.entries.pop_front() {
                    log.complete_from = gone.seq + 1;
                }
            }
            log.entries.push_back(Entry {
                seq,
                tag: tag_hash(t),
                kind: *kind,
                soft,
            });
        }
        log.next = seq + 1;
        seq
    }

    /// The strongest invalidation matching `tags` with a sequence number in
    /// `from..to`, as the log holds it now.
    fn scan(&self, log: &Log, from: u64, to: u64, tags: &Tags) -> Verdict {
        if from >= to {
            return Verdict::Clean;
        }
        // An entry numbered `from` or later may have been dropped.
        if from < log.complete_from {
            self.overruns.fetch_add(1, Ordering::Relaxed);
            return Verdict::Hard;
        }
        let mut v = Verdict::Clean;
        // Entries are in sequence order: walk back from the newest.
        for e in log.entries.iter().rev() {
            if e.seq < from {
                break;
            }
            if e.seq < to && tags.matches(e) {
                v = v.max(if e.soft { Verdict::Soft } else { Verdict::Hard });
                if v == Verdict::Hard {
                    break;
                }
            }
        }
        v
    }

    /// The strongest invalidation of `tags` logged in `from..to`: whether a request
    /// that joined a fill (started at `from`) when the log was at `to` joined after
    /// an invalidation of what the fill fetches.
    pub fn between(&self, from: u64, to: u64, tags: &Tags) -> Verdict {
        let log = self.read();
        self.scan(&log, from, to.min(log.next), tags)
    }

    /// Runs `write` with the verdict for a writer that started at `since` and carries
    /// `tags`, holding the gate: no invalidation is logged while `write` runs. `write`
    /// must not write anything on [`Verdict::Hard`], and only stale records on
    /// [`Verdict::Soft`]. Keep it short: purges wait for it.
    pub fn commit<R>(&self, since: u64, tags: &Tags, write: impl FnOnce(Verdict) -> R) -> R {
        let log = self.read();
        let v = self.scan(&log, since, log.next, tags);
        let r = write(v);
        drop(log);
        r
    }

    /// Whether the log still holds everything logged since `since`: a writer that
    /// started there would not be refused for an overrun now.
    pub fn covers(&self, since: u64) -> bool {
        since >= self.read().complete_from
    }

    /// Writers that found the log trimmed past their start.
    pub fn overruns(&self) -> u64 {
        self.overruns.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strongest invalidation logged at or after `start`.
    fn since(inv: &Invalidations, start: u64, tags: &Tags) -> Verdict {
        inv.between(start, u64::MAX, tags)
    }

    fn url(t: &str) -> (String, TagKind) {
        (t.to_owned(), TagKind::Url)
    }

    #[test]
    fn verdicts_follow_the_log() {
        let inv = Invalidations::default();
        let tags = Tags::new(&["u:a", "d:/"], true);
        let start = inv.now();
        assert_eq!(since(&inv, start, &tags), Verdict::Clean);
        inv.record(&[url("u:b")], false);
        assert_eq!(since(&inv, start, &tags), Verdict::Clean, "another URL");
        inv.record(&[url("u:a")], true);
        assert_eq!(since(&inv, start, &tags), Verdict::Soft);
        let mid = inv.now();
        inv.record(&[url("d:/")], false);
        assert_eq!(since(&inv, start, &tags), Verdict::Hard);
        assert_eq!(inv.between(start, mid, &tags), Verdict::Soft);
        assert_eq!(
            since(&inv, inv.now(), &tags),
            Verdict::Clean,
            "a later writer"
        );
    }

    #[test]
    fn unknown_surrogate_keys_match_every_key_purge() {
        let inv = Invalidations::default();
        let start = inv.now();
        inv.record(&[("t:news".into(), TagKind::Key)], false);
        assert_eq!(
            since(&inv, start, &Tags::new(&["u:a"], false)),
            Verdict::Hard
        );
        assert_eq!(
            since(&inv, start, &Tags::new(&["u:a"], true)),
            Verdict::Clean
        );
        assert_eq!(
            since(&inv, start, &Tags::new(&["u:a", "t:news"], true)),
            Verdict::Hard
        );
    }

    #[test]
    fn a_writer_older_than_the_log_is_invalidated() {
        let inv = Invalidations::default();
        let tags = Tags::new(&["u:a"], true);
        let start = inv.now();
        for _ in 0..LOG_ENTRIES_MAX {
            inv.record(&[url("u:other")], false);
        }
        assert_eq!(since(&inv, start, &tags), Verdict::Clean, "still all kept");
        inv.record(&[url("u:other")], false);
        assert_eq!(
            since(&inv, start, &tags),
            Verdict::Hard,
            "trimmed past start"
        );
        assert_eq!(inv.overruns(), 1);
        assert_eq!(since(&inv, inv.now(), &tags), Verdict::Clean);
    }

    #[test]
    fn commit_holds_back_invalidations() {
        use std::sync::Arc;
        let inv = Arc::new(Invalidations::default());
        let tags = Tags::new(&["u:a"], true);
        let logged = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (inv2, logged2) = (inv.clone(), logged.clone());
        let purge = inv.commit(inv.now(), &tags, |v| {
            assert_eq!(v, Verdict::Clean);
            let h = std::thread::spawn(move || {
                inv2.record(&[url("u:a")], false);
                logged2.store(true, Ordering::SeqCst);
            });
            // Give the purge time to try: it must still be waiting for the gate.
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!logged.load(Ordering::SeqCst), "logged during a commit");
            h
        });
        purge.join().unwrap();
        assert!(logged.load(Ordering::SeqCst));
        assert_eq!(since(&inv, 0, &tags), Verdict::Hard);
    }
}
