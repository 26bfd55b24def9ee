//! Codings added after the commit: a response is committed with identity and gzip
//! ([`crate::fill::commit`]); brotli and zstd are made afterwards on the compression pool's
//! background queue and the entry is rewritten with them, if it is still the same
//! version and no invalidation overtook it. So is `dcz`, against the dictionary the
//! upstream names for the response (`Upstream::dictionary_for`; RFC 9842), when zstd
//! is on: the body names its dictionary in its first 40 bytes, and the hit path sends
//! it only to a client holding that dictionary.
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
//! - **A queued job owns a copy of its body.** The identity body a fill hands over
//!   is often a slice of the origin client's read buffer (hyper hands out body
//!   chunks as slices of it, up to ~400 KiB); kept in a queued job, the slice pins the
//!   whole buffer, so the budget, which counts the body's length, would not bound the
//!   memory. quire-chaos's soak found it: with the background queue full, quire's
//!   anonymous memory grew by ~3 MiB/s (350 MiB to 1 GiB in ten minutes).
//! - **Only the same version is rewritten, through the invalidation gate**: the entry
//!   is re-read inside [`crate::cache::invalidate::Invalidations::commit`] with the fill's
//!   start and tags, and its object id compared; a refill, purge or eviction in
//!   between wins, a soft purge is kept (the rewrite is written stale). The rewrite
//!   carries the record and the bodies already stored over unchanged, so readers see
//!   the old entry or the new one, never a mix (the decoded-record cache keys on the
//!   codings' lengths too, see `object::identity`).

use std::sync::Arc;

use bytes::Bytes;
use quire_http::dictionary::Dictionary;
use quire_http::encoding::Coding;
use quire_store::EntryRef;

use crate::cache::invalidate::{Tags, Verdict};
use crate::cache::object::{self, Record};
use crate::cache::put::{make_stale, put_record};
use crate::fill::compress;
use crate::fill::compress_pool::Priority;
use crate::metrics::FillResult;
use crate::state::Ctx;

/// Largest identity body brotli is made for at the upgrade level.
pub(crate) const UPGRADE_BYTES_MAX: usize = 1 << 20;

/// A committed entry waiting for its other codings.
#[derive(Debug, Clone)]
pub(crate) struct Later {
    /// Where the entry is.
    pub key: Vec<u8>,
    /// The record's id as committed.
    pub id: u64,
    /// Its identity body.
    pub identity: Bytes,
    /// Whether its type and size are worth compressing.
    pub compressible: bool,
    /// The dictionary it is also made `dcz` against (the upstream's choice).
    pub dictionary: Option<Arc<Dictionary>>,
    /// The fill's start in the invalidation log.
    pub start: u64,
    /// The record's tags.
    pub tags: Tags,
}

/// The codings still to make for an entry, with the brotli level to use: `dcz`
/// too when the entry has a dictionary and zstd is on.
fn wanted(ctx: &Ctx, later: &Later) -> (Vec<Coding>, compress::Levels) {
    let identity_len = later.identity.len();
    let policy = ctx.peek();
    let mut codings: Vec<Coding> = policy
        .codings
        .iter()
        .copied()
        .filter(|c| matches!(c, Coding::Br | Coding::Zstd))
        .collect();
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

/// Queues the other codings of a committed entry on the pool's background queue,
/// if it has room (else the entry keeps what it has).
pub(crate) fn schedule(ctx: &Arc<Ctx>, later: Later) {
    if !later.compressible || later.identity.len() < compress::MIN_COMPRESS_BYTES {
        return;
    }
    let has_codings = ctx
        .peek()
        .codings
        .iter()
        .any(|c| matches!(c, Coding::Br | Coding::Zstd));
    if !has_codings {
        return;
    }
    let cost = later.identity.len() as u64;
    let later = Later {
        // Exactly its own bytes, not a slice of a larger buffer (see the module doc).
        identity: Bytes::copy_from_slice(&later.identity),
        ..later
    };
    let ctx2 = ctx.clone();
    ctx.compress.try_spawn(Priority::Background, cost, move || {
        add_codings(&ctx2, &later);
    });
}

/// Makes the missing codings and rewrites the entry if it is still version
/// `later.id`. Returns what the rewrite did, if it ran.
pub(crate) fn add_codings(ctx: &Ctx, later: &Later) -> Option<FillResult> {
    let (codings, levels) = wanted(ctx, later);
    let mut made: Vec<(Coding, Vec<u8>)> = Vec::new();
    for c in codings {
        let coded = match (c, &later.dictionary) {
            (Coding::Dcz, Some(d)) => compress::encode_dcz(&later.identity, d, levels.zstd),
            _ => compress::encode(c, &later.identity, &levels),
        };
        match coded {
            Ok(b) if compress::worth_keeping(later.identity.len(), b.len()) => made.push((c, b)),
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
    use crate::config::{ByteSize, Config};

    /// The soak's memory growth: a queued job kept the origin read buffer its body
    /// was a slice of.
    #[test]
    fn a_queued_job_does_not_pin_the_buffer_its_body_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = Config {
            origin: Some("http://127.0.0.1:9".to_string()),
            ..Config::default()
        };
        cfg.cache.path = dir.path().join("test.vol");
        cfg.cache.size = ByteSize(16 << 20);
        cfg.encodings.threads = 1;
        let ctx = Ctx::new(cfg).unwrap();
        // Keep the pool's only thread busy, so the job below stays queued.
        let (release, wait) = std::sync::mpsc::channel::<()>();
        assert!(ctx.compress.try_spawn(Priority::Commit, 1, move || {
            let _ = wait.recv();
        }));
        let buffer = Bytes::from(vec![b'a'; 400_000]);
        let held_before = ctx.compress.held_bytes();
        schedule(
            &ctx,
            Later {
                key: b"k".to_vec(),
                id: 1,
                identity: buffer.slice(..8_000),
                compressible: true,
                dictionary: None,
                start: 0,
                tags: Tags::default(),
            },
        );
        assert_eq!(ctx.compress.held_bytes(), held_before + 8_000, "not queued");
        assert!(buffer.is_unique(), "the queued job holds the 400 KB buffer");
        drop(release);
    }
}
