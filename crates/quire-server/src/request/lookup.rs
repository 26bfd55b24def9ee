//! What the store holds for a request: the primary record under the URL's key, then
//! the variant record when the URL varies, decoded once ([`crate::request::hit::Records`]).
//!
//! Both ways in call down into this one module — the fast path
//! ([`crate::http1::fastpath`]) for a fresh hit off the socket, and the service
//! ([`crate::request::service`]) for everything else — so the two can never disagree on
//! which stored response a request selects.
//!
//! A reader's lookup (not the cache's own quiet ones) that finds a stored response is
//! that response's read: the first one after its commit queues the codings it waits
//! for ([`crate::fill::deferred`]), at the cost of one flag load on every later hit.

use std::sync::Arc;

use http::header::HeaderMap;
use quire_http::key::{MethodClass, NormalizedUrl, VaryFields};
use quire_http::status::CacheStatus;
use quire_store::{Cold, Engine, EntryRef, Fetched, Handle, Span};

use crate::fill::recompress;
use crate::request::hit::{Cached, Prepared};
use crate::state::{Ctx, Scope};

/// What the store holds for a request.
pub(crate) struct Lookup {
    /// The URL's key (where its record or its `Vary` record lives).
    pub(crate) primary_key: Vec<u8>,
    /// The upstream's key version (and audience) the keys were made with.
    pub(crate) scope: Scope,
    /// The variant key where the record for this request lives, when the URL
    /// varies (else it is under `primary_key`).
    pub(crate) variant_key: Option<Vec<u8>>,
    /// The URL's `Vary` when a Vary record was found.
    pub(crate) vary: Option<Arc<VaryFields>>,
    /// The stored response selected for the request.
    pub(crate) record: Option<Arc<Prepared>>,
    /// The store entry it was read from (record and bodies). It pins its region:
    /// take it out before awaiting anything slow.
    pub(crate) entry: Option<Arc<Handle>>,
    /// The entry found is not in memory (`crate::request::cold`): nothing was read;
    /// warm it and look up again.
    pub(crate) cold: Option<Cold>,
    /// The identity ([`crate::cache::object::identity`]) of the record under
    /// `primary_key`, and of the one under the variant key when the URL varies:
    /// what a later look compares to know the store still holds the same records.
    pub(crate) ids: (u64, Option<u64>),
    /// Where the entries under `primary_key` and the variant key lay in memory: a
    /// recipe's prefetch hints ([`quire_store::Span`]).
    pub(crate) spans: [Option<Span>; 2],
}

impl Lookup {
    /// Where the record for this request lives (primary or variant key).
    pub(crate) fn record_key(&self) -> &[u8] {
        self.variant_key.as_deref().unwrap_or(&self.primary_key)
    }
}

/// Looks up the stored response for a request in `scope` (the anonymous cache's,
/// `ctx.key_version(url)`, or an audience's): primary record, then the variant
/// record when the URL varies. An entry not in memory is not read (`cold`).
pub(crate) fn lookup(
    ctx: &Arc<Ctx>,
    class: MethodClass,
    url: &NormalizedUrl,
    headers: &HeaderMap,
    scope: Scope,
) -> Lookup {
    lookup_as(ctx, class, url, headers, scope, Reading::Resident)
}

/// How a lookup reads the store ([`lookup_as`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reading {
    /// A reader's lookup; an entry not in memory is answered cold ([`lookup`]).
    Resident,
    /// A reader's lookup of an entry just warmed: read whatever its residency (it
    /// may fault).
    Any,
    /// The cache's own check (is it stored already? did the prefill store it?): not
    /// a hit (see `Store::get_quiet`), so a page nobody read never looks read; an
    /// entry not in memory is answered cold.
    Quiet,
}

/// [`lookup`], reading the store as `reading` says.
pub(crate) fn lookup_as(
    ctx: &Arc<Ctx>,
    class: MethodClass,
    url: &NormalizedUrl,
    headers: &HeaderMap,
    scope: Scope,
    reading: Reading,
) -> Lookup {
    let look = read_records(ctx, class, (url, headers), scope, reading);
    if !matches!(reading, Reading::Quiet) {
        if let Some(p) = &look.record {
            ask_codings(ctx, look.record_key(), p);
        }
    }
    look
}

/// A reader was served `p` (stored under `key`): the first read of a version that
/// waits for its slow codings queues them ([`crate::fill::deferred`]).
fn ask_codings(ctx: &Arc<Ctx>, key: &[u8], p: &Prepared) {
    if !p.ask_codings() {
        return;
    }
    if recompress::on_read(ctx, key, &p.rec) == recompress::Asked::Again {
        p.ask_codings_again();
    }
}

/// The records [`lookup_as`] finds.
fn read_records(
    ctx: &Ctx,
    class: MethodClass,
    (url, headers): (&NormalizedUrl, &HeaderMap),
    scope: Scope,
    reading: Reading,
) -> Lookup {
    let primary_key = ctx.primary_key(class, url, scope);
    let mut look = Lookup {
        primary_key,
        scope,
        variant_key: None,
        vary: None,
        record: None,
        entry: None,
        cold: None,
        ids: (0, None),
        spans: [None; 2],
    };
    let h = match fetch(ctx, &look.primary_key, reading) {
        Fetched::Hit(h) => h,
        Fetched::Miss => return look,
        Fetched::Cold(c) => {
            look.cold = Some(c);
            return look;
        }
    };
    let Some((id, cached)) = ctx.records.get_identified(h.meta()) else {
        return look;
    };
    look.ids.0 = id;
    look.spans[0] = h.span();
    match cached {
        Cached::Object(o) => {
            look.record = Some(o);
            look.entry = Some(Arc::new(h));
        }
        Cached::Vary(v) => {
            drop(h);
            let vk = ctx.variant_key(class, url, &v, headers, scope);
            match fetch(ctx, &vk, reading) {
                Fetched::Hit(h) => {
                    if let Some((id, Cached::Object(o))) = ctx.records.get_identified(h.meta()) {
                        look.spans[1] = h.span();
                        look.record = Some(o);
                        look.entry = Some(Arc::new(h));
                        look.ids.1 = Some(id);
                    }
                }
                Fetched::Miss => {}
                Fetched::Cold(c) => look.cold = Some(c),
            }
            look.variant_key = Some(vk);
            look.vary = Some(v);
        }
    }
    look
}

/// The entry under `primary` — and, for a URL that varies, under `variant` — if
/// the store still holds there, in memory, the records with the identities given
/// (key, identity): what a recipe kept from an earlier lookup of the same request
/// reads ([`crate::http1::repeat`]). Counts as a hit, as [`lookup`] does; `None`
/// when either record changed or went, or is not in memory. (The handle alone, not
/// in an `Arc`: a repeat's answer is its one owner.)
pub(crate) fn again(
    ctx: &Ctx,
    primary: (&[u8], u64),
    variant: Option<(&[u8], u64)>,
) -> Option<Handle> {
    let same = |(key, id): (&[u8], u64)| match ctx.store.get_resident(key) {
        Fetched::Hit(h) => (crate::cache::object::identity(h.meta()) == id).then_some(h),
        Fetched::Miss | Fetched::Cold(_) => None,
    };
    let h = same(primary)?;
    let h = match variant {
        None => h,
        Some(v) => {
            drop(h);
            same(v)?
        }
    };
    Some(h)
}

/// The entry under `key`, read as `reading` says.
fn fetch(ctx: &Ctx, key: &[u8], reading: Reading) -> Fetched {
    match reading {
        Reading::Resident => ctx.store.get_resident(key),
        Reading::Quiet => ctx.store.get_resident_quiet(key),
        Reading::Any => ctx.store.get(key).map_or(Fetched::Miss, Fetched::Hit),
    }
}

/// The response stored under `key`, prepared, with its entry.
fn entry_at(ctx: &Ctx, key: &[u8]) -> Option<(Arc<Prepared>, Arc<Handle>)> {
    let h = ctx.store.get(key)?;
    match ctx.records.get(h.meta())? {
        Cached::Object(o) => Some((o, Arc::new(h))),
        Cached::Vary(_) => None,
    }
}

/// The entry under `key` if it still holds the bodies of `p`'s version (same object
/// id): a stale copy served after a failed revalidation, or a refreshed head.
pub(crate) fn same_version(ctx: &Ctx, key: &[u8], p: &Prepared) -> Option<Arc<Handle>> {
    entry_at(ctx, key)
        .filter(|(q, _)| q.rec.id == p.rec.id && q.rec.codings == p.rec.codings)
        .map(|(_, h)| h)
}

/// `status` with the cache key (`key=`, RFC 9211 §2.7) when `expose_key` is set.
pub(crate) fn keyed(ctx: &Ctx, url: &NormalizedUrl, status: CacheStatus) -> CacheStatus {
    if ctx.peek().cfg.expose_key {
        status.with_key(url.as_str())
    } else {
        status
    }
}
