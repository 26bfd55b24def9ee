//! Purges: by URL, by directory prefix, by surrogate key; hard (remove) or soft
//! (mark stale so the next request revalidates once).
//!
//! Every purge is a tag operation on the store (see [`crate::object`] for the tags a
//! record carries), so it costs the number of entries it touches, never a scan.
//!
//! Key decisions:
//! - **Prefixes purge whole directories.** A prefix is cut after the last `/` of its
//!   path: `http://h/blog/20` purges everything under `http://h/blog/`. More than asked
//!   is safe (a refill); less than asked would serve what the operator wanted gone.
//! - **Every purge is logged before it touches the store** ([`crate::invalidate`]):
//!   a fill or background rewrite in flight for a purged URL will not store fresh
//!   bytes after it, and no request that arrives after the purge joins such a fill.
//!   A soft purge's own rewrites pass the same gate, so a hard purge racing them wins.
//! - **Soft purge rewrites records**: the freshness lifetime is cut to the current
//!   age, so the next request revalidates with the stored validators (or, with
//!   `stale-while-revalidate`, is served stale once while it does); the bodies are
//!   copied into the rewritten entry unchanged.

use std::time::SystemTime;

use quire_http::key::NormalizedUrl;
use quire_store::{Engine, EntryRef};

use crate::invalidate::{TagKind, Verdict};
use crate::metrics::FillResult;
use crate::object::{self, Record};
use crate::put::{self, make_stale};
use crate::state::Ctx;

/// What to purge.
#[derive(Debug, Clone)]
pub enum Target {
    /// Every variant of one URL.
    Url(NormalizedUrl),
    /// Everything under a directory (`scheme://host/dir/`).
    Directory(String),
    /// Everything carrying a surrogate key.
    Key(String),
}

impl Target {
    fn tag(&self) -> String {
        match self {
            Target::Url(u) => object::url_tag(u.as_str()),
            Target::Directory(d) => object::dir_tag(d),
            Target::Key(k) => object::key_tag(k),
        }
    }

    fn kind(&self) -> TagKind {
        match self {
            Target::Url(_) | Target::Directory(_) => TagKind::Url,
            Target::Key(_) => TagKind::Key,
        }
    }
}

/// Logs the invalidation of `targets` (see [`crate::invalidate`]); returns the
/// sequence number after it, where the purge's own rewrites start.
fn log(ctx: &Ctx, targets: &[Target], soft: bool) -> u64 {
    let tags: Vec<_> = targets.iter().map(|t| (t.tag(), t.kind())).collect();
    ctx.invalidations.record(&tags, soft) + 1
}

/// Removes every record of `target`; returns how many. The invalidation must be
/// logged already.
fn hard(ctx: &Ctx, target: &Target) -> u64 {
    match ctx.store.remove_tagged(target.tag().as_bytes()) {
        Ok(n) => n as u64,
        Err(e) => {
            tracing::warn!(error = %e, "purge failed");
            0
        }
    }
}

/// Marks every record of `target` stale; returns how many. The invalidation must be
/// logged already; `since` is the log position after it.
fn soft(ctx: &Ctx, target: &Target, since: u64, now: SystemTime) -> u64 {
    let mut n = 0;
    for key in ctx.store.tagged_keys(target.tag().as_bytes()) {
        let Some(Record::Object(first)) =
            ctx.store.get(&key).and_then(|h| object::decode(h.meta()))
        else {
            continue;
        };
        let tags = put::record_tags(&first.url, &first.meta.tags);
        // Re-read and rewritten whole inside the gate (the bodies are copied from the
        // entry being replaced), unless a hard purge logged since has the last word.
        // An entry of another version there came from a fill that started after
        // this purge was logged: it is left as it is.
        let stored = ctx.invalidations.commit(since, &tags, |v| {
            if v == Verdict::Hard {
                return FillResult::Invalidated;
            }
            let Some(h) = ctx.store.get(&key) else {
                return FillResult::Rejected;
            };
            let rec = match object::decode(h.meta()) {
                Some(Record::Object(rec)) if rec.id == first.id => rec,
                _ => return FillResult::Rejected,
            };
            let mut rec = (*rec).clone();
            make_stale(&mut rec, now);
            put::put_record(ctx, &key, &rec, &[h.body()])
        });
        if stored == FillResult::Stored {
            n += 1;
        }
    }
    n
}

/// Hard-purges `targets` quietly (no log line, not counted as an operator's purge):
/// the invalidation after an unsafe method (RFC 9111 §4.4).
pub fn invalidate(ctx: &Ctx, targets: &[Target]) {
    log(ctx, targets, false);
    for t in targets {
        hard(ctx, t);
    }
}

/// Purges each target, soft or hard; returns the entries touched. Logged first, so
/// nothing in flight can store what it removes after it returns.
pub fn run(ctx: &Ctx, targets: &[Target], soft_purge: bool) -> u64 {
    let now = ctx.clock.now();
    let since = log(ctx, targets, soft_purge);
    let n = targets
        .iter()
        .map(|t| {
            if soft_purge {
                soft(ctx, t, since, now)
            } else {
                hard(ctx, t)
            }
        })
        .sum();
    ctx.metrics.record_purge(n);
    tracing::info!(
        targets = targets.len(),
        entries = n,
        soft = soft_purge,
        "purged"
    );
    n
}
