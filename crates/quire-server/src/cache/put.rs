//! Every write of a record to the store: a record with its tags and bodies as one
//! entry, and the soft-purge edit of a record's freshness. The commit of a new
//! response ([`crate::fill::commit`]), the background rewrite that adds codings
//! ([`crate::fill::recompress`]), a soft purge ([`crate::ops::purge`]) and a refreshed head
//! ([`crate::fill::miss`]) all write through here, beside the record codec
//! ([`crate::cache::object`]) — and all of them inside the invalidation gate
//! ([`crate::cache::invalidate::Invalidations::commit`]) when they could race a purge.

use std::time::SystemTime;

use quire_store::{Put, StoreError};

use crate::cache::invalidate::Tags;
use crate::cache::object::{self, ObjectRecord};
use crate::metrics::FillResult;
use crate::state::Ctx;

/// Cuts a record's freshness to its current age: the next request revalidates (or,
/// within `stale-while-revalidate`, is served stale once while it does).
pub(crate) fn make_stale(rec: &mut ObjectRecord, now: SystemTime) {
    let age_ms = rec.meta.timing().age(now).as_millis();
    let age_ms = u64::try_from(age_ms).unwrap_or(u64::MAX);
    rec.meta.freshness_lifetime_ms =
        Some(rec.meta.freshness_lifetime_ms.map_or(0, |l| l.min(age_ms)));
}

/// The tags a record of `url` carries, as the invalidation log matches them.
pub(crate) fn record_tags(url: &str, keys: &[String]) -> Tags {
    Tags::new(&object::record_tags(url, keys), true)
}

/// Writes a record with its tags and the bodies of its codings (in the record's
/// order, given as parts: never concatenated in memory) as one entry. Callers that
/// could race an invalidation call it inside [`crate::cache::invalidate::Invalidations::commit`].
pub(crate) fn put_record(
    ctx: &Ctx,
    key: &[u8],
    rec: &ObjectRecord,
    bodies: &[&[u8]],
) -> FillResult {
    debug_assert_eq!(
        bodies.iter().map(|b| b.len() as u64).sum::<u64>(),
        rec.bodies_len()
    );
    let bytes = match object::encode_object(rec) {
        Ok(b) => b,
        Err(e) => {
            tracing::info!(url = %rec.url, error = %e, "head not storable");
            return FillResult::NotStorable;
        }
    };
    let tags = object::record_tags(&rec.url, &rec.meta.tags);
    let tag_refs: Vec<&[u8]> = tags.iter().map(|t| t.as_bytes()).collect();
    match ctx.store.put_admitted(key, &bytes, bodies, &tag_refs) {
        Ok(Put::Stored) => FillResult::Stored,
        Ok(Put::Rejected) => FillResult::Rejected,
        Err(StoreError::TooLarge { .. }) => FillResult::TooLarge,
        Err(e) => {
            tracing::warn!(error = %e, "store write failed");
            FillResult::NotStorable
        }
    }
}
