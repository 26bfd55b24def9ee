//! A fresh hit's answer in two steps. First, what the request head decides: its
//! URL, keys and scope, the stored record it selects, the coding its
//! `Accept-Encoding` gets, its `Cache-Control` and the outcome of its
//! `If-None-Match`/`If-Modified-Since` ([`Recipe`], made by [`prepare`]). Then the
//! answer from a recipe at a moment: freshness, refresh-ahead, `Age` and `ttl`, the
//! head and the body ([`serve`]).
//!
//! The fast path ([`crate::http1::fastpath`]) runs both for a head it has just
//! parsed; a head this worker has answered before runs only the second, with the
//! recipe kept from the first time ([`crate::http1::repeat`]). Both ways write their
//! answer with the same [`serve`], so a repeat cannot answer differently from a
//! first time at the same moment with the same store.

use std::sync::Arc;
use std::time::SystemTime;

use http::header;
use http::Method;
use quire_http::bypass::{self, Bypass};
use quire_http::cache_control::CacheControl;
use quire_http::conditional::Precondition;
use quire_http::freshness::{self, Decision, StoredTiming};
use quire_http::key::{self, MethodClass, NormalizedUrl};
use quire_http::status::CacheStatus;
use quire_store::Handle;

use crate::edge::client::Peer;
use crate::http1::h1;
use crate::http1::head::Plain;
use crate::policy::Policy;
use crate::request::body::{Mapped, Pinned};
use crate::request::hit::{self, FixedHead, Prepared};
use crate::state::{Ctx, Scope};

/// What a request head decides about its fresh hit, whatever the moment.
///
/// In the order a repeat reads it ([`crate::http1::repeat`]), which asks the CPU
/// for a kept recipe's lines ahead of its answer: what every answer reads first,
/// then the prefetch hints, and the URL last (`repr(C)` keeps that order). What a
/// repeat reads of the stored record is copied here (its timing, status, whether
/// it carries upstream `Cache-Status` lines), so that an answer reads none of the
/// record's own 700-odd bytes; the copies are the record's, which is immutable (a
/// refill or a 304's new head is another record, of another identity, which a
/// repeat's lookup refuses).
#[repr(C)]
pub(crate) struct Recipe {
    /// The key version (and audience) the keys were made in.
    pub(crate) scope: Scope,
    /// The URL's key and the identity of the record found under it.
    pub(crate) primary: (Vec<u8>, u64),
    /// When the URL varies: the variant key this head selects, and its record's
    /// identity.
    pub(crate) variant: Option<(Vec<u8>, u64)>,
    /// The stored response.
    pub(crate) record: Arc<Prepared>,
    /// The head of the representation the request gets (by its `Accept-Encoding`),
    /// all but the fields of the moment, and where its body lies.
    pub(crate) fixed: FixedHead,
    /// The record's timing ([`Prepared::timing`]).
    timing: StoredTiming,
    /// quire's `Cache-Status` member before its `ttl`.
    status: CacheStatus,
    /// The request's `Cache-Control` (`max-age`, `min-fresh`, …), when it has one:
    /// most have none, and an empty one is 168 bytes.
    req_cc: Option<Box<CacheControl>>,
    /// The record's status code ([`Prepared::status`]).
    code: u16,
    /// The record carries upstream caches' `Cache-Status` lines.
    upstream: bool,
    /// The head's `If-None-Match`/`If-Modified-Since` match: a 304.
    not_modified: bool,
    /// `HEAD` (no body); else `GET`, the only other method the fast path takes.
    head_only: bool,
    /// Where the entries under the two keys lay when the recipe was made: what a
    /// repeat asks the CPU for ahead of its lookup (`crate::http1::repeat`). Hints
    /// only: the lookup checks the entries as any does.
    pub(crate) spans: [Option<quire_store::Span>; 2],
    /// Where the answer's body lay in the mapping when the recipe was made (its
    /// address and length), for the same ahead-of-time ask; a hint as the spans
    /// are. `None` for a body not in the mapping, or no body.
    pub(crate) body_at: Option<(usize, usize)>,
    /// The normalised URL (its key version is asked again on a repeat; an HTTP
    /// origin's version does not read it).
    pub(crate) url: NormalizedUrl,
}

/// The `Cache-Control` of a request without one.
static NO_CACHE_CONTROL: std::sync::LazyLock<CacheControl> =
    std::sync::LazyLock::new(CacheControl::default);

impl Recipe {
    /// What the request's kept `Cache-Control` holds on the heap (its field names
    /// counted by length), for the recipe table's bound.
    pub(crate) fn req_cc_bytes(&self) -> usize {
        self.req_cc
            .as_ref()
            .map_or(0, |cc| size_of::<CacheControl>() + cc.heap_bytes())
    }

    /// The request's method: `GET` or `HEAD`.
    pub(crate) fn method(&self) -> &'static str {
        if self.head_only {
            "HEAD"
        } else {
            "GET"
        }
    }
}

/// A fresh hit ready to write (its head is in the connection's output buffer).
pub(crate) struct Answer {
    /// The body, a slice of the store's mapping, with the handle that pins it;
    /// `None` for `HEAD`, a 304 or an empty body. Not `Bytes`: those would cost an
    /// allocation (and its free) per hit, which a hit the hit loop writes at once
    /// does without ([`Mapped::into_bytes`] where an owner needs them).
    pub(crate) body: Option<Mapped<Pinned>>,
    pub(crate) status: u16,
    pub(crate) body_len: u64,
}

/// The recipe for `req`'s fresh hit, with the store entry its record was read
/// from; `None` when the request is the service's to answer (a range, a bypass, a
/// precondition for the origin, an admin call, nothing stored).
pub(crate) fn prepare(
    ctx: &Arc<Ctx>,
    policy: &Policy,
    req: &Plain,
    peer: Peer,
) -> Option<(Recipe, Arc<Handle>)> {
    let (method, headers) = (&req.method, &req.headers);
    if req.ranged_or_conditional || req.path().starts_with(crate::ops::admin::PREFIX) {
        return None;
    }
    // A refused AI crawler is the service's to answer (crate::request::agents).
    if crate::request::agents::refused(&policy.cfg.agents, headers) {
        return None;
    }
    // A trusted proxy naming no client is the service's to refuse (crate::edge::client).
    let bypassed = bypass::bypass(method, headers, &policy.bypass);
    if bypassed.is_some_and(|b| b != Bypass::Cookie)
        || !crate::edge::client::Client::named(peer.addr, headers, &policy.trusted_proxies)
    {
        return None;
    }
    let scheme = peer.scheme(headers, &policy.trusted_proxies);
    let url = key::normalize(scheme, headers.get(header::HOST), &req.uri, &policy.keys).ok()?;
    // Another representation the request asks for by a field (`Upstream::negotiate`).
    let url = ctx.origin.negotiate(&url, headers).unwrap_or(url);
    let class = MethodClass::of(method)?;
    // A session cookie is answered here only from its audience's entries, with the
    // service's own checks (`crate::request::service`); anything else is the
    // service's.
    let scope = match bypassed {
        None => ctx.key_version(&url),
        Some(_) => ctx.audience_scope(&url, ctx.origin.audience(&url, headers)?)?,
    };
    let look = crate::request::lookup::lookup(ctx, class, &url, headers, scope);
    let (record, entry) = (look.record?, look.entry?);
    let variant = look.variant_key.zip(look.ids.1);
    debug_assert_eq!(
        look.vary.is_some(),
        variant.is_some(),
        "a varying URL's record has its key"
    );
    let mut status = crate::request::lookup::keyed(ctx, &url, CacheStatus::hit());
    if let Some(a) = scope.audience {
        status = status.with_audience(a.label());
    }
    let coding = record.coding_for(headers, &entry).ok()?;
    let not_modified = match record.precondition_in(method, headers, coding) {
        Precondition::Forward => return None,
        Precondition::NotModified => true,
        Precondition::Proceed => false,
    };
    let fixed = hit::fixed_head(&record, coding, not_modified).ok()?;
    let body_at = body_at(&entry, &fixed, not_modified || *method == Method::HEAD);
    let req_cc = CacheControl::from_headers(headers);
    let recipe = Recipe {
        scope,
        primary: (look.primary_key, look.ids.0),
        variant,
        timing: *record.timing(),
        code: record.status().as_u16(),
        upstream: !record.upstream().is_empty(),
        record,
        fixed,
        status,
        req_cc: (req_cc != *NO_CACHE_CONTROL).then(|| Box::new(req_cc)),
        not_modified,
        head_only: *method == Method::HEAD,
        spans: look.spans,
        body_at,
        url,
    };
    Some((recipe, entry))
}

/// Where the body a hit on `fixed` sends lies in `entry`'s mapping, as an address
/// and a length (never read through: a prefetch hint); `None` without a body or
/// outside the mapping.
fn body_at(entry: &Handle, fixed: &FixedHead, bodiless: bool) -> Option<(usize, usize)> {
    use quire_store::EntryRef;
    if bodiless || fixed.body_len == 0 || entry.span().is_none() {
        return None;
    }
    let body = entry.body().get(fixed.start as usize..)?;
    let len = usize::try_from(fixed.body_len).ok()?.min(body.len());
    Some((body.as_ptr() as usize, len))
}

/// The fresh-hit answer of `r` now, from `entry` (which holds `r`'s record: the
/// store's handle, or an `Arc` of one), its head written to `out`; `None` when it
/// is not fresh (or due for refresh-ahead): the service's to answer. `path` is the
/// request's target, `peer` its connection's far end.
pub(crate) fn serve<H>(
    ctx: &Ctx,
    policy: &Policy,
    r: &Recipe,
    entry: H,
    (path, peer): (&str, Peer),
    now: SystemTime,
    out: &mut Vec<u8>,
) -> Option<Answer>
where
    H: Into<Pinned>,
{
    let timing = ctx.timing_as_reused(r.timing);
    let req_cc = r.req_cc.as_deref().unwrap_or(&NO_CACHE_CONTROL);
    if freshness::reuse(&timing, req_cc, &policy.reuse, now) != Decision::Fresh {
        return None;
    }
    // A hit due for refresh-ahead is the service's (it starts the revalidation),
    // once per record: later hits in the window stay here.
    if freshness::refresh_due(&timing, policy.cfg.storage.refresh_ahead, now)
        && !ctx.refreshed.tried(r.record.rec.id)
    {
        return None;
    }
    if r.scope.audience.is_some() {
        ctx.metrics.record_audience_request();
    }
    let fixed = &r.fixed;
    let body = if r.not_modified || r.head_only || fixed.body_len == 0 {
        None
    } else {
        Some(Prepared::body_at(entry.into(), fixed).ok()?)
    };
    out.extend_from_slice(&fixed.bytes);
    let upstream = if r.upstream { r.record.upstream() } else { &[] };
    hit::write_moment(out, (&r.timing, upstream), &r.status, now);
    if let Some(hsts) = ctx.tls.as_ref().and_then(|t| t.hsts()).filter(|_| peer.tls) {
        h1::field(out, "strict-transport-security", hsts.as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    let answer = Answer {
        body,
        status: if r.not_modified { 304 } else { r.code },
        body_len: if r.not_modified || r.head_only {
            0
        } else {
            fixed.body_len
        },
    };
    // (The upstream hears of pages served: `crate::upstream::Upstream::served`.)
    if !r.head_only && matches!(answer.status, 200 | 304) {
        ctx.origin.served(path);
    }
    Some(answer)
}
