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
//! - **Soft purge rewrites records**: the freshness lifetime is cut to the current
//!   age, so the next request revalidates with the stored validators (or, with
//!   `stale-while-revalidate`, is served stale once while it does); the bodies are
//!   copied into the rewritten entry unchanged.

use std::time::SystemTime;

use quire_http::key::NormalizedUrl;
use quire_store::{Engine, EntryRef};

use crate::miss;
use crate::object::{self, Record};
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
}

/// Removes every record of `target`; returns how many.
pub fn hard(ctx: &Ctx, target: &Target) -> u64 {
    match ctx.store.remove_tagged(target.tag().as_bytes()) {
        Ok(n) => n as u64,
        Err(e) => {
            tracing::warn!(error = %e, "purge failed");
            0
        }
    }
}

/// Marks every record of `target` stale; returns how many.
pub fn soft(ctx: &Ctx, target: &Target, now: SystemTime) -> u64 {
    let mut n = 0;
    for key in ctx.store.tagged_keys(target.tag().as_bytes()) {
        let Some(h) = ctx.store.get(&key) else {
            continue;
        };
        let Some(Record::Object(mut rec)) = object::decode(h.meta()) else {
            continue;
        };
        let age_ms = rec.meta.timing().age(now).as_millis();
        let age_ms = u64::try_from(age_ms).unwrap_or(u64::MAX);
        rec.meta.freshness_lifetime_ms =
            Some(rec.meta.freshness_lifetime_ms.map_or(0, |l| l.min(age_ms)));
        // Rewritten whole (the bodies are copied from the entry being replaced).
        if miss::put_record(ctx, &key, &rec, h.body()) == crate::metrics::FillResult::Stored {
            n += 1;
        }
    }
    n
}

/// Purges each target, soft or hard; returns the entries touched.
pub fn run(ctx: &Ctx, targets: &[Target], soft_purge: bool) -> u64 {
    let now = SystemTime::now();
    let n = targets
        .iter()
        .map(|t| {
            if soft_purge {
                soft(ctx, t, now)
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
