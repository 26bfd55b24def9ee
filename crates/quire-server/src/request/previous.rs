//! A miss answered from the page's previous version while the current one is made.
//!
//! An upstream whose versions change for two reasons (what a page says, and how
//! every page is presented: a renderer's templates) can offer, for a bounded time
//! after a change of the second kind, the versions the page had under the previous
//! presentations ([`crate::upstream::Upstream::previous_version`]). A request that
//! misses under the current version is then answered from the newest of those the
//! store holds fresh, with `Cache-Status: quire; hit; detail=previous-version`, and
//! the current version is filled in the background (coalesced like any fill). So a
//! template change that gives every page a new key leaves readers on hits while the
//! site re-renders, instead of every first reader of every page paying a render.
//!
//! Why this loses no invalidation: the upstream offers a previous version only when
//! the page's content is what it was (quire-site folds the content hash into the
//! previous epoch: a page whose content changed has no stored entry under that
//! key), so a previous version says what the current one will, in the old layout.
//! A purge removes previous versions' entries like any other (same tags), and a
//! purge of everything moves the key epoch these keys are made under; no fill ever
//! targets a previous version's key, so nothing stored before a purge comes back
//! after it. A request that asks for a fresh answer (`no-cache`, `max-age`,
//! `min-fresh`) skips this and fills as before.

use quire_http::cache_control::CacheControl;
use quire_http::freshness::{self, Decision};
use quire_http::key::MethodClass;
use quire_http::status::CacheStatus;

use crate::edge::rate_limit::Class;
use crate::metrics::Outcome;
use crate::request::exchange::{Answered, Exchange};
use crate::request::hit;
use crate::request::lookup::{self, Lookup};

/// How many previous versions a miss tries (each one lookup), newest first.
pub(crate) const TRIES: usize = 3;

/// Answers a request that missed under `look` from its page's newest previous
/// version the store holds fresh, and fills `look`'s key in the background; `None`
/// when there is none (the request then fills as any miss).
pub(crate) fn answer(
    x: &Exchange<'_>,
    class: MethodClass,
    look: &Lookup,
    req_cc: &CacheControl,
) -> Option<Answered> {
    if req_cc.no_cache.is_some() || req_cc.max_age.is_some() || req_cc.min_fresh.is_some() {
        return None;
    }
    for nth in 0..TRIES {
        let scope = x.ctx.previous_scope(&x.url, x.audience, nth)?;
        let mut old = lookup::lookup(x.ctx, class, &x.url, x.req.headers(), scope);
        let (Some(rec), Some(entry)) = (old.record.take(), old.entry.take()) else {
            continue;
        };
        let timing = x.ctx.timing_of(&rec);
        if freshness::reuse(&timing, req_cc, &x.policy.reuse, x.now) != Decision::Fresh {
            continue;
        }
        if let Some(limited) = x.over_rate(Class::Hit) {
            return Some(limited);
        }
        let status = x.keyed(CacheStatus::hit().with_detail("previous-version"));
        let Ok(resp) = hit::serve(&x.hit_request(), &rec, &entry, status, x.now) else {
            // Its body is gone, or the origin must judge the preconditions: the
            // request fills as any miss.
            return None;
        };
        drop(entry);
        x.fill_in_background(look);
        x.ctx.metrics.record_previous_hit();
        return Some((resp, Outcome::Hit));
    }
    None
}
