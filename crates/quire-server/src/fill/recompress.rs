//! Codings added after the commit: a response is committed with identity and gzip
//! ([`crate::fill::commit`]); brotli and zstd are made afterwards on the compression pool's
//! background queue and the entry is rewritten with them, if it is still the same
//! version and no invalidation overtook it. So is `dcz`, against the dictionary the
//! upstream names for the response (`Upstream::dictionary_for`; RFC 9842), when zstd
//! is on: the body names its dictionary in its first 40 bytes, and the hit path sends
//! it only to a client holding that dictionary. When the job runs is
//! [`crate::fill::deferred`]'s decision: on the entry's second read, not at its commit.
//!
//! Brotli is made at `encodings.brotli_upgrade_level` (11) for bodies up to
//! [`UPGRADE_BYTES_MAX`], at `encodings.brotli_level` above: measured on 40 pages of
//! the peer corpus (45 KB each) with the reference brotli, quality 5 takes 1.5 ms a
//! page, quality 11 42 ms and yields bodies 10 % smaller (13,751 → 12,389 B); on
//! megabytes, 11 costs seconds for the same few percent.
//!
//! Key decisions:
//! - **Never on the request path and bounded**: the pool's budget refuses a job
//!   rather than queue it; a refused entry keeps identity and gzip.
//! - **A job reads its body from the store, and owns a copy.** Nothing waiting for
//!   its job holds a body; the job copies the identity body out of the entry when it
//!   starts (the pool's budget counts it) and lets the entry go, so a long brotli
//!   never pins a store region. (An earlier version queued the body the fill handed
//!   over, a slice of the origin client's read buffer — up to ~400 KiB pinned per
//!   job, which the budget, counting the body's length, did not bound: quire-chaos's
//!   soak saw anonymous memory grow by ~3 MiB/s with the background queue full.)
//! - **Only the same version is rewritten, through the invalidation gate**: the entry
//!   is re-read inside [`crate::cache::invalidate::Invalidations::commit`] with the fill's
//!   start and tags, and its object id compared; a refill, purge or eviction in
//!   between wins, a soft purge is kept (the rewrite is written stale). The rewrite
//!   carries the record and the bodies already stored over unchanged, so readers see
//!   the old entry or the new one, never a mix (the decoded-record cache keys on the
//!   codings' lengths too, see `object::identity`).

use std::sync::Arc;

use quire_http::dictionary::Dictionary;
use quire_http::encoding::Coding;
use quire_store::EntryRef;

use crate::cache::invalidate::Verdict;
use crate::cache::object::{self, ObjectRecord, Record};
use crate::cache::put::{make_stale, put_record, record_tags};
use crate::fill::compress;
use crate::fill::compress_pool::Priority;
pub(crate) use crate::fill::deferred::Later;
use crate::fill::deferred::Outcome;
use crate::fill::host_dictionaries::Made;
use crate::metrics::FillResult;
use crate::state::Ctx;

/// Largest identity body brotli is made for at the upgrade level.
pub(crate) const UPGRADE_BYTES_MAX: usize = 1 << 20;

/// The slow codings `policy` stores (brotli, zstd): what a deferred job makes.
fn slow_codings(policy: &crate::policy::Policy) -> impl Iterator<Item = Coding> + '_ {
    let slow = |c: &&Coding| matches!(c, Coding::Br | Coding::Zstd);
    policy.codings.iter().filter(slow).copied()
}

/// The codings still to make for an entry, with the brotli level to use: `dcz`
/// too when the entry has a dictionary and zstd is on.
fn wanted(ctx: &Ctx, later: &Later, identity_len: usize) -> (Vec<Coding>, compress::Levels) {
    let mut codings: Vec<Coding> = slow_codings(&ctx.peek()).collect();
    if later.dictionary.is_some() && codings.contains(&Coding::Zstd) {
        codings.push(Coding::Dcz);
    }
    let upgrade = ctx.peek().cfg.encodings.brotli_upgrade_level;
    let mut levels = ctx.peek().levels;
    if upgrade > levels.brotli && identity_len <= UPGRADE_BYTES_MAX {
        levels.brotli = upgrade;
    }
    (codings, ctx.compress.levels_for(levels, identity_len))
}

/// What a read asked of [`on_read`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Nothing (more) to do for this version: its job is queued, or nothing waited.
    Done,
    /// The pool refused the job; ask again on a later read.
    Again,
}

/// Leaves `later` to wait for the entry's second read, if it has codings to make
/// (`identity_len`: its identity body's length).
pub(crate) fn defer(ctx: &Ctx, later: Later, identity_len: usize) {
    if !has_work(ctx, &later, identity_len) {
        return;
    }
    ctx.deferred.count(Outcome::Deferred);
    ctx.deferred.put(later);
}

/// A reader was served the entry under `key` (holding `rec`) from the store: queues
/// the codings that wait for it, or that it lacks ([`recover`]), if any. Runs on the
/// request's worker, once per version: a lookup, a budget check and a queue push.
pub(crate) fn on_read(ctx: &Arc<Ctx>, key: &[u8], rec: &ObjectRecord) -> Asked {
    let identity_len = rec.coding_range(Coding::Identity).map_or(0, |(s, e)| e - s);
    let Some(later) = ctx.deferred.take(key) else {
        return recover(ctx, key, rec, identity_len);
    };
    if !ctx.invalidations.covers(later.start) {
        ctx.deferred.count(Outcome::Expired);
        return Asked::Done;
    }
    let ctx2 = ctx.clone();
    let job = later.clone();
    if ctx
        .compress
        .try_spawn(Priority::Background, identity_len, move || {
            make(&ctx2, &job);
        })
    {
        ctx.deferred.count(Outcome::Queued);
        return Asked::Done;
    }
    ctx.deferred.count(Outcome::Refused);
    ctx.deferred.put(later);
    Asked::Again
}

/// Queues the slow codings of an entry that lacks them and for which nothing waits:
/// one stored before this process started (what waited was lost with it), or one
/// dropped from the waiting list. Only an entry with gzip qualifies (its body is
/// worth compressing). Its fill's start in the invalidation log is not known, so the
/// log's beginning stands in for it: every invalidation this process logged is
/// checked against the entry's tags, at worst refusing a rewrite it could have made
/// (a lost store, never a lost purge; see [`crate::cache::invalidate`]). What the job
/// needs is rebuilt from the stored record on the pool ([`unrecorded`]), not here.
fn recover(ctx: &Arc<Ctx>, key: &[u8], rec: &ObjectRecord, identity_len: u64) -> Asked {
    let has = |c| rec.coding_range(c).is_some();
    if !has(Coding::Gzip) || has(Coding::Br) || has(Coding::Zstd) {
        return Asked::Done;
    }
    // With brotli and zstd both off there is nothing for a job to make ([`wanted`]),
    // and nothing is ever deferred, so every stored page's first read came here:
    // queued anyway, each cost the pool two decodes and a copy of the body for
    // nothing, on the hit loop's core when the process is pinned to one.
    if slow_codings(&ctx.peek()).next().is_none() {
        return Asked::Done;
    }
    if !ctx.invalidations.covers(0) {
        ctx.deferred.count(Outcome::Expired);
        return Asked::Done;
    }
    let (ctx2, key, id) = (ctx.clone(), key.to_vec(), rec.id);
    let job = move || {
        if let Some(later) = unrecorded(&ctx2, &key, id) {
            make(&ctx2, &later);
        }
    };
    if ctx
        .compress
        .try_spawn(Priority::Background, identity_len, job)
    {
        ctx.deferred.count(Outcome::Recovered);
        return Asked::Done;
    }
    ctx.deferred.count(Outcome::Refused);
    Asked::Again
}

/// What the job of a recovered entry needs, from the record of version `id` stored
/// under `key` (`None` if another version or nothing is there now): its tags rebuilt
/// from its URL and surrogate keys, its dictionary chosen as at a commit, start 0.
fn unrecorded(ctx: &Ctx, key: &[u8], id: u64) -> Option<Later> {
    let rec = {
        let h = ctx.store.get_quiet(key)?;
        match object::decode(h.meta()) {
            Some(Record::Object(rec)) if rec.id == id => rec,
            _ => return None,
        }
    };
    let headers: http::HeaderMap = rec.meta.headers.iter().cloned().collect();
    let page = page_dictionaries(ctx, &ctx.peek().cfg.dictionaries, &rec.url, &headers);
    Some(Later {
        key: key.to_vec(),
        id,
        compressible: true,
        dictionary: dcz_dictionary(ctx, page, &rec.url, &headers),
        start: 0,
        tags: record_tags(&rec.url, &rec.meta.tags),
    })
}

/// The dictionaries of the page at `url`: the upstream's own for it, else, for a page
/// of a `[dictionaries]` host, its host's (whose `Link` the stored page carries).
pub(crate) fn page_dictionaries(
    ctx: &Ctx,
    cfg: &crate::config::DictionariesSection,
    url: &str,
    headers: &http::HeaderMap,
) -> (Option<Arc<Dictionary>>, Option<Arc<Made>>) {
    let own = ctx.origin.dictionary_for(headers);
    let made = own
        .is_none()
        .then(|| ctx.host_dictionaries.for_page(cfg, url, headers))
        .flatten();
    (own, made)
}

/// The dictionary a stored response is also made `dcz` against: the upstream's own
/// (`own`), else its host's (`made`, `[dictionaries] hosts`), else one the origin
/// named whose `match` covers it.
pub(crate) fn dcz_dictionary(
    ctx: &Ctx,
    (own, made): (Option<Arc<Dictionary>>, Option<Arc<Made>>),
    url: &str,
    headers: &http::HeaderMap,
) -> Option<Arc<Dictionary>> {
    own.or_else(|| made.map(|m| m.dictionary.clone()))
        .or_else(|| ctx.dictionaries.for_response(url, headers))
}

/// Whether `later` has codings to make at all: a compressible body big enough, and
/// brotli or zstd on.
pub(crate) fn has_work(ctx: &Ctx, later: &Later, identity_len: usize) -> bool {
    later.compressible
        && identity_len >= compress::MIN_COMPRESS_BYTES
        && ctx
            .peek()
            .codings
            .iter()
            .any(|c| matches!(c, Coding::Br | Coding::Zstd))
}

/// The job [`on_read`] queues: copies the identity body of version
/// `later.id` out of the store, makes the missing codings, and rewrites the entry if
/// it still holds that version. `None` when the entry changed or went first, or when
/// nothing was worth keeping.
pub(crate) fn make(ctx: &Ctx, later: &Later) -> Option<FillResult> {
    // Nothing to compress for if the gate would refuse the rewrite already.
    if ctx
        .invalidations
        .between(later.start, u64::MAX, &later.tags)
        == Verdict::Hard
    {
        return Some(FillResult::Invalidated);
    }
    let identity = {
        let h = ctx.store.get_quiet(&later.key)?;
        let Some(Record::Object(rec)) = object::decode(h.meta()) else {
            return None;
        };
        if rec.id != later.id || h.body().len() as u64 != rec.bodies_len() {
            return None;
        }
        let (start, end) = rec.coding_range(Coding::Identity)?;
        let range = usize::try_from(start).ok()?..usize::try_from(end).ok()?;
        // A copy: the entry (and its region) is let go before the codecs run.
        h.body().get(range)?.to_vec()
    };
    add_codings(ctx, later, &identity)
}

/// Makes the missing codings and rewrites the entry if it is still version
/// `later.id`. Returns what the rewrite did, if it ran.
pub(crate) fn add_codings(ctx: &Ctx, later: &Later, identity: &[u8]) -> Option<FillResult> {
    let (codings, levels) = wanted(ctx, later, identity.len());
    let mut made: Vec<(Coding, Vec<u8>)> = Vec::new();
    for c in codings {
        let coded = match (c, &later.dictionary) {
            (Coding::Dcz, Some(d)) => compress::encode_dcz(identity, d, levels.zstd),
            _ => compress::encode(c, identity, &levels),
        };
        match coded {
            Ok(b) if compress::worth_keeping(identity.len(), b.len()) => made.push((c, b)),
            Ok(_) => {}
            Err(e) => tracing::warn!(coding = %c, error = %e, "compression failed"),
        }
    }
    if made.is_empty() {
        return None;
    }
    ctx.invalidations
        .commit(later.start, &later.tags, |v| rewrite(ctx, later, made, v))
}

/// The entry at `later.key` with `made` in place of (or beside) its codings.
fn rewrite(
    ctx: &Ctx,
    later: &Later,
    made: Vec<(Coding, Vec<u8>)>,
    v: Verdict,
) -> Option<FillResult> {
    if v == Verdict::Hard {
        return Some(FillResult::Invalidated);
    }
    let h = ctx.store.get_quiet(&later.key)?;
    let Some(Record::Object(original)) = object::decode(h.meta()) else {
        return None;
    };
    if original.id != later.id || h.body().len() as u64 != original.bodies_len() {
        return None;
    }
    let mut rec = (*original).clone();
    let mut parts: Vec<(Coding, &[u8])> = Vec::new();
    let mut at = 0usize;
    for (c, len) in &original.codings {
        let n = usize::try_from(*len).ok()?;
        if !made.iter().any(|(m, _)| m == c) {
            parts.push((*c, h.body().get(at..at + n)?));
        }
        at += n;
    }
    for (c, b) in &made {
        parts.push((*c, b));
    }
    // Drop the last added while the whole is over the object limit.
    let limit = usize::try_from(ctx.peek().object_limit).unwrap_or(usize::MAX);
    while parts.len() > 1 && parts.iter().map(|(_, b)| b.len()).sum::<usize>() > limit {
        parts.pop();
    }
    rec.codings = parts.iter().map(|(c, b)| (*c, b.len() as u64)).collect();
    if v == Verdict::Soft {
        make_stale(&mut rec, ctx.clock.now());
    }
    let bodies: Vec<&[u8]> = parts.iter().map(|(_, b)| *b).collect();
    Some(put_record(ctx, &later.key, &rec, &bodies))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on an empty 16 MiB volume with one compression thread and a 64 KiB
    /// compression budget.
    fn small_ctx(dir: &std::path::Path) -> Arc<Ctx> {
        use crate::config::{ByteSize, Config};
        let mut cfg = Config {
            origin: Some("http://127.0.0.1:9".to_string()),
            ..Config::default()
        };
        cfg.cache.path = dir.join("test.vol");
        cfg.cache.size = ByteSize(16 << 20);
        cfg.encodings.threads = 1;
        cfg.encodings.budget = ByteSize(64 << 10);
        Ctx::new(cfg).unwrap()
    }

    /// The record of an 8,000-byte page stored with gzip alone.
    fn gzip_only() -> ObjectRecord {
        ObjectRecord {
            id: 7,
            url: "http://h/k".into(),
            codings: vec![(Coding::Identity, 8_000), (Coding::Gzip, 900)],
            meta: object::tests::sample_meta(),
        }
    }

    /// A read that finds the pool's budget full leaves the entry waiting for the
    /// next read, which queues it.
    #[test]
    fn a_refused_job_waits_for_the_next_read() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = small_ctx(dir.path());
        defer(&ctx, crate::fill::deferred::tests::later(b"k", 1), 8_000);
        assert_eq!(ctx.deferred.waiting(), 1, "a compressible page waits");
        // The budget, held whole by a job that does not end yet.
        let (release, wait) = std::sync::mpsc::channel::<()>();
        assert!(ctx.compress.try_spawn(Priority::Commit, 64 << 10, move || {
            let _ = wait.recv();
        }));
        let rec = gzip_only();
        assert_eq!(on_read(&ctx, b"k", &rec), Asked::Again);
        assert_eq!(ctx.deferred.waiting(), 1, "put back for the next read");
        drop(release);
        let idle = std::time::Instant::now();
        while ctx.compress.held_bytes() > 0 {
            assert!(idle.elapsed().as_secs() < 10, "the pool never went idle");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(on_read(&ctx, b"k", &rec), Asked::Done);
        assert_eq!(ctx.deferred.waiting(), 0);
        // Read again with nothing waiting, still without brotli or zstd (as after a
        // restart): recovered from the record and queued once more.
        assert_eq!(on_read(&ctx, b"k", &rec), Asked::Done);
        // An entry without gzip is not worth it.
        let plain = ObjectRecord {
            codings: vec![(Coding::Identity, 8_000)],
            ..rec.clone()
        };
        assert_eq!(on_read(&ctx, b"k", &plain), Asked::Done);
        let mut m = String::new();
        ctx.deferred.write_metrics(&mut m);
        let counts = [
            "deferred\"} 1",
            "queued\"} 1",
            "refused\"} 1",
            "expired\"} 0",
            "recovered\"} 1",
        ];
        for r in counts {
            assert!(m.contains(r), "{r} in {m}");
        }
        // Too small to compress: nothing waits.
        defer(&ctx, crate::fill::deferred::tests::later(b"small", 1), 100);
        assert_eq!(ctx.deferred.waiting(), 0);
    }

    /// An entry whose fill started before the oldest invalidation the log still
    /// holds costs nothing: the gate would refuse its rewrite, so no job is queued,
    /// whether it waited or is recovered from its record.
    #[test]
    fn an_entry_the_log_no_longer_covers_queues_nothing() {
        use crate::cache::invalidate::{TagKind, LOG_ENTRIES_MAX};
        let dir = tempfile::tempdir().unwrap();
        let ctx = small_ctx(dir.path());
        defer(&ctx, crate::fill::deferred::tests::later(b"k", 1), 8_000);
        let other = [("u:http://h/other".to_string(), TagKind::Url)];
        for _ in 0..=LOG_ENTRIES_MAX {
            ctx.invalidations.record(&other, false);
        }
        let rec = gzip_only();
        assert_eq!(on_read(&ctx, b"k", &rec), Asked::Done);
        assert_eq!(on_read(&ctx, b"k", &rec), Asked::Done, "recovered, start 0");
        assert_eq!(ctx.deferred.waiting(), 0);
        assert_eq!(ctx.compress.held_bytes(), 0, "no job was queued");
        let mut m = String::new();
        ctx.deferred.write_metrics(&mut m);
        for r in ["queued\"} 0", "expired\"} 2", "recovered\"} 0"] {
            assert!(m.contains(r), "{r} in {m}");
        }
    }
}
