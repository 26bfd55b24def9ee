//! Purges: by URL, by directory prefix, by surrogate key; hard (remove) or soft
//! (mark stale so the next request revalidates once).
//!
//! Every purge is a tag operation on the store (see [`crate::cache::object`] for the tags a
//! record carries), so it costs the number of entries it touches, never a scan.
//!
//! Key decisions:
//! - **Prefixes purge whole directories.** A prefix is cut after the last `/` of its
//!   path: `http://h/blog/20` purges everything under `http://h/blog/`. More than asked
//!   is safe (a refill); less than asked would serve what the operator wanted gone.
//! - **Every purge is logged before it touches the store** ([`crate::cache::invalidate`]):
//!   a fill or background rewrite in flight for a purged URL will not store fresh
//!   bytes after it, and no request that arrives after the purge joins such a fill.
//!   A soft purge's own rewrites pass the same gate, so a hard purge racing them wins.
//! - **A URL or prefix purge covers both schemes.** Keys carry the scheme the client
//!   used, so `https://h/a` and `http://h/a` are two entries; purging either
//!   spelling removes both, so an operator who names the page one way never leaves
//!   the other serving what they meant to remove.
//! - **Soft purge rewrites records**: the freshness lifetime is cut to the current
//!   age, so the next request revalidates with the stored validators (or, with
//!   `stale-while-revalidate`, is served stale once while it does); the bodies are
//!   copied into the rewritten entry unchanged.

use std::time::SystemTime;

use quire_store::{Engine, EntryRef};

use crate::cache::invalidate::{TagKind, Verdict};
use crate::cache::object::{self, Record};
use crate::cache::put::{self, make_stale};
use crate::metrics::FillResult;
use crate::ops::bus::Invalidation;
pub use crate::ops::bus::Target;
use crate::state::Ctx;

impl Target {
    /// The store tags the target names: for a URL or a directory, its own and its
    /// twin's under the other scheme.
    fn tags(&self) -> Vec<String> {
        match self {
            Target::Url(u) => both_schemes(u).map(|u| object::url_tag(&u)).collect(),
            Target::Directory(d) => both_schemes(d).map(|d| object::dir_tag(&d)).collect(),
            Target::Key(k) => vec![object::key_tag(k)],
        }
    }

    fn kind(&self) -> TagKind {
        match self {
            Target::Url(_) | Target::Directory(_) => TagKind::Url,
            Target::Key(_) => TagKind::Key,
        }
    }
}

/// `url`, and its twin under the other of `http`/`https` when it has one.
fn both_schemes(url: &str) -> impl Iterator<Item = String> {
    let twin = if let Some(rest) = url.strip_prefix("http://") {
        Some(format!("https://{rest}"))
    } else {
        url.strip_prefix("https://")
            .map(|rest| format!("http://{rest}"))
    };
    std::iter::once(url.to_owned()).chain(twin)
}

/// Logs the invalidation of `targets` (see [`crate::cache::invalidate`]); returns the
/// sequence number after it, where the purge's own rewrites start.
fn log(ctx: &Ctx, targets: &[Target], soft: bool) -> u64 {
    let tags: Vec<_> = targets
        .iter()
        .flat_map(|t| t.tags().into_iter().map(|tag| (tag, t.kind())))
        .collect();
    ctx.invalidations.record(&tags, soft) + 1
}

/// Removes every record of `target`; returns how many. The invalidation must be
/// logged already.
fn hard(ctx: &Ctx, target: &Target) -> u64 {
    let mut removed = 0;
    for tag in target.tags() {
        match ctx.store.remove_tagged(tag.as_bytes()) {
            Ok(n) => removed += n as u64,
            Err(e) => tracing::warn!(error = %e, "purge failed"),
        }
    }
    removed
}

/// Marks every record of `target` stale; returns how many. The invalidation must be
/// logged already; `since` is the log position after it.
fn soft(ctx: &Ctx, target: &Target, since: u64, now: SystemTime) -> u64 {
    let mut n = 0;
    let keys = target
        .tags()
        .iter()
        .flat_map(|tag| ctx.store.tagged_keys(tag.as_bytes()))
        .collect::<Vec<_>>();
    for key in keys {
        let Some(Record::Object(first)) = ctx
            .store
            .get_quiet(&key)
            .and_then(|h| object::decode(h.meta()))
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
            let Some(h) = ctx.store.get_quiet(&key) else {
                return FillResult::Rejected;
            };
            let rec = match object::decode(h.meta()) {
                Some(Record::Object(rec)) if rec.id == first.id => rec,
                _ => return FillResult::Rejected,
            };
            let mut rec = (*rec).clone();
            make_stale(&mut rec, now);
            match put::put_record(ctx, &key, &rec, &[h.body()]) {
                FillResult::Stored => FillResult::Stored,
                failed => {
                    // The stale copy could not be written (no room in the volume,
                    // say): the fresh one must not stay, so for this entry the soft
                    // purge becomes a hard one.
                    drop(h);
                    tracing::debug!(?failed, "soft purge: stale rewrite failed; entry removed");
                    remove_entry(ctx, &key)
                }
            }
        });
        if stored == FillResult::Stored {
            n += 1;
        }
    }
    n
}

/// Removes one entry (a soft purge whose stale rewrite failed); `Stored` when it is
/// gone, so it counts as purged.
fn remove_entry(ctx: &Ctx, key: &[u8]) -> FillResult {
    match ctx.store.remove(key) {
        Ok(_) => FillResult::Stored,
        Err(e) => {
            tracing::warn!(error = %e, "purge failed");
            FillResult::NotStorable
        }
    }
}

/// The URLs of `targets`' entries that were hit lately (the store's per-entry
/// counter above 0), hottest first, at most `max`, each once: what a purge with
/// `refill` queues to be fetched again. Read before the purge removes them; an entry
/// whose record does not decode is skipped.
pub fn hot_urls(ctx: &Ctx, targets: &[Target], max: usize) -> Vec<String> {
    let mut hot: Vec<(u8, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for tag in targets.iter().flat_map(Target::tags) {
        for key in ctx.store.tagged_keys(tag.as_bytes()) {
            let hits = ctx.store.hits_lately(&key).unwrap_or(0);
            if hits == 0 {
                continue;
            }
            let Some(Record::Object(rec)) = ctx
                .store
                .get_quiet(&key)
                .and_then(|h| object::decode(h.meta()))
            else {
                continue;
            };
            if seen.insert(rec.url.clone()) {
                hot.push((hits, rec.url));
            }
        }
    }
    // Stable: among equally hot URLs, the order the tags listed them.
    hot.sort_by_key(|h| std::cmp::Reverse(h.0));
    hot.truncate(max);
    hot.into_iter().map(|(_, u)| u).collect()
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
    let span = crate::trace::child("purge", crate::trace::Kind::Internal);
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
    if let Some(mut s) = span {
        s.set("quire.purge.targets", targets.len() as u64);
        s.set("quire.purge.entries", n);
        s.set("quire.purge.soft", soft_purge);
        s.end();
    }
    n
}

/// Applies `inv` to this node's store: what a node does with an entry it read
/// from the log, and what the receiving node does at once. Returns the entries
/// touched.
pub fn apply(ctx: &Ctx, inv: &Invalidation) -> u64 {
    if inv.implicit {
        invalidate(ctx, &inv.targets);
        0
    } else {
        run(ctx, &inv.targets, inv.soft)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_and_prefix_purges_name_both_schemes() {
        let dir = Target::Directory("https://h/blog/".into());
        assert_eq!(dir.tags(), ["d:https://h/blog/", "d:http://h/blog/"]);
        let key = Target::Key("post-1".into());
        assert_eq!(key.tags(), ["t:post-1"]);
        let twins: Vec<_> = both_schemes("http://h:8080/a?b").collect();
        assert_eq!(twins, ["http://h:8080/a?b", "https://h:8080/a?b"]);
    }

    /// A refill's choice: entries read since stored, hottest first, up to the cap
    /// (`REFILL_PER_PURGE_MAX` for a purge); never-read ones left out.
    #[tokio::test]
    async fn the_hottest_purged_urls_are_chosen_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = crate::state::test_ctx(dir.path());
        let pages = [
            ("http://h/d/one", 1),
            ("http://h/d/two", 2),
            ("http://h/d/three", 3),
            ("http://h/d/none", 0),
        ];
        for (i, (url, reads)) in pages.into_iter().enumerate() {
            let rec = crate::cache::object::ObjectRecord {
                id: i as u64 + 1,
                url: url.to_owned(),
                codings: vec![(quire_http::encoding::Coding::Identity, 5)],
                meta: crate::cache::object::tests::sample_meta(),
            };
            assert_eq!(
                put::put_record(&ctx, url.as_bytes(), &rec, &[b"hello"]),
                FillResult::Stored
            );
            for _ in 0..reads {
                assert!(ctx.store.get(url.as_bytes()).is_some());
            }
        }
        let d = [Target::Directory("http://h/d/".into())];
        assert_eq!(
            hot_urls(&ctx, &d, 10),
            ["http://h/d/three", "http://h/d/two", "http://h/d/one"]
        );
        assert_eq!(
            hot_urls(&ctx, &d, 2),
            ["http://h/d/three", "http://h/d/two"]
        );
        assert!(hot_urls(&ctx, &d, 0).is_empty());
        // Choosing reads nothing as a hit: the never-read page is still cold.
        assert_eq!(ctx.store.hits_lately(b"http://h/d/none"), Some(0));
    }
}
