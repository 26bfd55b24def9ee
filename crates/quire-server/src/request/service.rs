//! One request, start to finish: guard, route, key, look up, decide, answer.
//!
//! The order is the design's (framing was checked by [`crate::edge::guard`]): heads the
//! RFCs forbid ([`crate::request::refuse`]), who the client is ([`crate::edge::client`]), the admin
//! API (on the path as sent, then as normalised), AI crawlers the operator refuses
//! ([`crate::request::agents`], before the cache), URL normalisation, bypass rules (a
//! request whose only bypass is a session cookie the upstream names an audience for
//! is looked up under that audience's keys: `crate::state::Scope`), then the lookup — primary record, variant record
//! when the URL varies, body of the chosen coding — and the RFC 9111 reuse decision
//! (`quire_http::freshness::reuse`): fresh → [`crate::request::hit`]; stale within
//! `stale-while-revalidate` → served, revalidated in the background; otherwise a
//! coalesced fill ([`crate::request::exchange`]) that revalidates when it can and falls back
//! on the stale copy where `stale-if-error` allows. A miss the upstream offers a
//! previous version for is answered from it while the current one fills
//! ([`crate::request::previous`]).
//!
//! The ways to the origin (a fill, a pass, the admin API) are boxed where they are
//! awaited: an async function's future holds the state of every future it awaits,
//! and with them inline one request's future was 13,112 bytes, copied whole into
//! each HTTP/2 stream's task; boxed, it is 4,232 (`request_futures_stay_small`),
//! and HTTP/2 hits went from 39.6k and 33.3k to 42.9k and 42.6k requests/s in two
//! paired rounds of h2load (64 connections, 10 streams each, HTTPS). A hit
//! allocates nothing for it; a miss pays one allocation beside its origin trip.
//!
//! The lookup itself is [`crate::request::lookup`]'s, shared with the fast path; the ways
//! out that involve the origin are [`crate::request::exchange::Exchange`]'s; the small
//! answers quire writes itself are [`crate::request::reply`]'s.

use std::sync::Arc;

use http::header;
use http::{Method, Request, Response};
use quire_http::bypass::{self, Bypass};
use quire_http::cache_control::CacheControl;
use quire_http::freshness::{self, Decision};
use quire_http::key::{self, MethodClass};
use quire_http::status::{CacheStatus, Fwd};
use quire_store::Handle;

use crate::edge::client::{Client, Peer};
use crate::edge::rate_limit::Class;
use crate::metrics::Outcome;
use crate::ops::access_log::{self, Ticket};
use crate::ops::admin;
use crate::policy::Policy;
use crate::request::agents;
use crate::request::body::Body;
use crate::request::exchange::{Answered, Exchange};
use crate::request::hit::{self, NotServed, Prepared};
use crate::request::lookup::{self, Lookup, Reading};
use crate::request::prefetch;
use crate::request::refuse;
use crate::request::reply;
use crate::state::{Ctx, Scope};
use crate::upstream::origin::OutBody;

/// Answers one request and records it in the metrics; over HTTPS, the answer
/// carries `Strict-Transport-Security` when `tls.hsts` is set.
pub(crate) async fn handle(ctx: Arc<Ctx>, mut req: Request<OutBody>, peer: Peer) -> Response<Body> {
    // A cluster peer's request: honoured only from a peer, stamped with the log
    // position taken before the lookup (see `crate::ops::bus`).
    let peer_position = crate::request::peer::peer_request(&ctx, req.headers_mut(), peer.addr.ip());
    // Kept for the view hook: a `Uri` clone shares the bytes hyper parsed it from
    // (a reference count, not a copy of the path).
    let target = (req.method() == Method::GET).then(|| req.uri().clone());
    let policy = ctx.policy();
    let ticket = policy.access_log.as_ref().map(|log| {
        let client = access_log::client_ip(peer.addr, req.headers(), &policy.trusted_proxies);
        Ticket::new(log.clone(), &req, client, std::time::Instant::now())
    });
    let started = std::time::Instant::now();
    let span = traced(&ctx, &req, peer, &policy);
    let (mut resp, outcome) = match &span {
        None => route(&ctx, req, peer, policy).await,
        // Boxed: an untraced request's future stays as small as it was.
        Some(s) => {
            Box::pin(crate::trace::within(
                Some(s),
                route(&ctx, req, peer, policy),
            ))
            .await
        }
    };
    ctx.metrics.record_duration(outcome, started.elapsed());
    if let Some(s) = span {
        end_request_span(s, resp.status().as_u16(), outcome);
    }
    if let Some(uri) = &target {
        let url = uri.path_and_query().map_or("/", |p| p.as_str());
        match outcome {
            Outcome::Hit => ctx.metrics.record_hot(url),
            Outcome::Miss => ctx.metrics.record_missing(url),
            _ => {}
        }
    }
    if let Some(p) = peer_position.filter(|_| !crate::request::peer::joined_an_earlier_fill(&resp))
    {
        resp.headers_mut()
            .insert(crate::ops::bus::PEER_POSITION_HEADER, p);
    }
    if let Some(hsts) = ctx.tls.as_ref().and_then(|t| t.hsts()).filter(|_| peer.tls) {
        resp.headers_mut()
            .insert(header::STRICT_TRANSPORT_SECURITY, hsts.clone());
    }
    if let Some(uri) = target.filter(|_| matches!(resp.status().as_u16(), 200 | 304)) {
        ctx.origin
            .served(uri.path_and_query().map_or("/", |p| p.as_str()));
    }
    let bytes = resp
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    ctx.metrics
        .record_request(outcome, resp.status().as_u16(), bytes);
    match ticket {
        Some(t) => logged(resp, t, outcome),
        None => resp,
    }
}

/// The root span of `req` when it is traced (`crate::trace`): a `traceparent`
/// counts only from a trusted proxy.
fn traced(
    ctx: &Ctx,
    req: &Request<OutBody>,
    peer: Peer,
    policy: &Policy,
) -> Option<crate::trace::Span> {
    let tracer = ctx.tracer.as_ref()?;
    let trusted = policy.trusted_proxies.contains(peer.addr.ip());
    let mut span = tracer.request(req.headers(), trusted, req.method().as_str())?;
    span.set("url.path", req.uri().path().to_owned());
    span.set("network.protocol.version", version_label(req.version()));
    Some(span)
}

/// Ends a request's root span with what it was answered.
pub(crate) fn end_request_span(mut span: crate::trace::Span, status: u16, outcome: Outcome) {
    span.set("http.response.status_code", i64::from(status));
    span.set("quire.cache", outcome.label());
    if status >= 500 {
        span.fail();
    }
    span.end();
}

/// OpenTelemetry's `network.protocol.version` of `v`.
fn version_label(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_09 => "0.9",
        http::Version::HTTP_10 => "1.0",
        http::Version::HTTP_2 => "2",
        http::Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

/// `resp` with a body that writes its access-log line when it ends.
fn logged(resp: Response<Body>, mut ticket: Ticket, outcome: Outcome) -> Response<Body> {
    let upstream = resp.extensions().get::<access_log::Upstream>().copied();
    ticket.answered(resp.status().as_u16(), outcome.label(), upstream);
    resp.map(|b| Body::Logged(Box::new(b), Box::new(ticket)))
}

/// Routes a request: refusals, the admin API, then the cache (or the origin, for
/// what the cache does not take).
async fn route(
    ctx: &Arc<Ctx>,
    mut req: Request<OutBody>,
    peer: Peer,
    policy: Arc<Policy>,
) -> Answered {
    // Ambiguous framing (RFC 9112 §6.3) never gets here: `crate::edge::guard` refuses it
    // on the byte stream, before hyper folds the evidence away.
    if let Some(r) = refuse::check(&req) {
        return (reply::refused(r), Outcome::Error);
    }
    if req.uri().path().starts_with(admin::PREFIX)
        && !ctx.origin.answers_admin_path(req.uri().path())
    {
        let path = req.uri().path().to_owned();
        return Box::pin(admin::handle(ctx, req, &path)).await;
    }
    if req.method().as_str() == "PURGE" {
        return Box::pin(crate::ops::purge_api::method(ctx, req)).await;
    }
    if agents::refused(&policy.cfg.agents, req.headers()) {
        ctx.metrics.record_agent_refused();
        return (agents::answer(&policy.cfg.agents), Outcome::Error);
    }
    let scheme = peer.scheme(req.headers(), &policy.trusted_proxies);
    let url = match key::normalize(
        scheme,
        req.headers().get(header::HOST),
        req.uri(),
        &policy.keys,
    ) {
        Ok(u) => u,
        Err(e) => return (reply::bad_request(&e.to_string()), Outcome::Error),
    };
    // Admin routing is decided on the normalised path too: `/x/%2e%2e/_quire/metrics`
    // and `/%5fquire/metrics` name the admin API, so neither may reach the origin or
    // be stored (a stored copy would answer the other spelling from cache).
    if url.path().starts_with(admin::PREFIX) && !ctx.origin.answers_admin_path(url.path()) {
        let path = url.path().to_owned();
        return Box::pin(admin::handle(ctx, req, &path)).await;
    }
    // Another representation the request asks for by a field: keyed, looked up,
    // filled and passed as a request for its own URL (`Upstream::negotiate`). Only
    // a GET or HEAD: an unsafe method invalidates the URL it was sent to.
    let negotiated =
        MethodClass::of(req.method()).and_then(|_| ctx.origin.negotiate(&url, req.headers()));
    let url = match negotiated {
        Some(other) => {
            retarget(&mut req, &other);
            other
        }
        None => url,
    };
    let client = match Client::resolve(peer.addr, req.headers(), &policy.trusted_proxies) {
        Ok(c) => c,
        Err(e) => {
            ctx.limiter.record_unnamed();
            return (reply::unnamed_client(e.reason), Outcome::Error);
        }
    };
    let now = ctx.clock.now();
    let x = Exchange {
        ctx,
        req,
        client,
        url,
        now,
        policy,
        audience: None,
        background: false,
    };
    answer(x).await
}

/// Points `req` at `url`'s path and query (its scheme and authority, if it had
/// them, kept).
fn retarget(req: &mut Request<OutBody>, url: &quire_http::key::NormalizedUrl) {
    let mut parts = req.uri().clone().into_parts();
    parts.path_and_query = url.path_and_query().parse().ok();
    if let Ok(u) = http::Uri::from_parts(parts) {
        *req.uri_mut() = u;
    }
}

/// Answers a request the cache is asked for: an upgrade is tunnelled, a method the
/// cache does not take is passed, a bypass is passed unless an audience's entries
/// can answer it, and the rest is [`cached`].
async fn answer(x: Exchange<'_>) -> Answered {
    if crate::request::tunnel::is_upgrade(&x.req) {
        if let Some(limited) = x.over_rate(Class::Miss) {
            return limited;
        }
        return Box::pin(x.tunnel()).await;
    }
    let Some(class) = MethodClass::of(x.req.method()) else {
        if prefetch::is_prefetch(x.req.headers()) {
            return refuse_prefetch(&x);
        }
        if let Some(limited) = x.over_rate(Class::Miss) {
            return limited;
        }
        // Every other method goes to the origin; unsafe ones invalidate (RFC 9111 §4.4).
        return Box::pin(x.pass(CacheStatus::forward(Fwd::Method), Outcome::Pass)).await;
    };
    let mut x = x;
    let mut scope = None;
    if let Some(b) = bypass::bypass(x.req.method(), x.req.headers(), &x.policy.bypass) {
        // A session cookie the upstream answers per audience (and can version now)
        // is served from that audience's entries; anything else is passed.
        let audience = (b == Bypass::Cookie)
            .then(|| x.ctx.origin.audience(&x.url, x.req.headers()))
            .flatten();
        scope = audience.and_then(|a| x.ctx.audience_scope(&x.url, a));
        if scope.is_none() {
            if prefetch::is_prefetch(x.req.headers()) {
                return refuse_prefetch(&x);
            }
            if let Some(limited) = x.over_rate(Class::Miss) {
                return limited;
            }
            let status = CacheStatus::forward(Fwd::Bypass).with_detail(b.detail());
            return Box::pin(x.pass(status, Outcome::Bypass)).await;
        }
        x.audience = audience;
        x.ctx.metrics.record_audience_request();
    }
    let scope = scope.unwrap_or_else(|| x.ctx.key_version(&x.url));
    cached(x, class, scope).await
}

/// A request the cache may answer: looked up in `scope`, then served, revalidated or
/// filled by the RFC 9111 reuse decision.
async fn cached(x: Exchange<'_>, class: MethodClass, scope: Scope) -> Answered {
    let req_cc = CacheControl::from_headers(x.req.headers());
    let span = crate::trace::child("lookup", crate::trace::Kind::Internal);
    let mut look = lookup::lookup(x.ctx, class, &x.url, x.req.headers(), scope);
    if let Some(cold) = look.cold.take() {
        // Not in memory: read in off the worker, then looked up again (boxed, as
        // the ways to the origin are: the future of a hit stays small).
        Box::pin(crate::request::cold::warm(x.ctx, cold)).await;
        look = lookup::lookup_as(x.ctx, class, &x.url, x.req.headers(), scope, Reading::Any);
    }
    if let Some(mut s) = span {
        s.set("quire.found", look.record.is_some());
        s.end();
    }
    // The entry pins its region: it is dropped before any wait on the origin, so a
    // slow origin never holds reclaim back.
    let entry = look.entry.take();
    let Some(rec) = look.record.clone() else {
        if req_cc.only_if_cached {
            return (reply::only_if_cached(), Outcome::Error);
        }
        // (Asked only off a fresh hit's way: the field lookup would cost every hit.)
        if prefetch::is_prefetch(x.req.headers()) {
            return refuse_prefetch(&x);
        }
        if let Some(answered) = crate::request::previous::answer(&x, class, &look, &req_cc) {
            return answered;
        }
        if let Some(limited) = x.over_rate(Class::Miss) {
            return limited;
        }
        let status = x.keyed(CacheStatus::forward(miss_fwd(&look)));
        return Box::pin(x.fill(look, status, None, None)).await;
    };
    match freshness::reuse(&x.ctx.timing_of(&rec), &req_cc, &x.policy.reuse, x.now) {
        Decision::MustRevalidate { stale_if_error } => {
            drop(entry);
            if req_cc.only_if_cached {
                return (reply::only_if_cached(), Outcome::Error);
            }
            if prefetch::is_prefetch(x.req.headers()) {
                return refuse_prefetch(&x);
            }
            if let Some(limited) = x.over_rate(Class::Miss) {
                return limited;
            }
            let explicit =
                req_cc.no_cache.is_some() || req_cc.max_age.is_some() || req_cc.min_fresh.is_some();
            let fwd = if explicit { Fwd::Request } else { Fwd::Stale };
            let stale = stale_if_error.map(|_| rec.clone());
            let status = x.keyed(CacheStatus::forward(fwd));
            Box::pin(x.fill(look, status, Some(Arc::new(rec.rec.clone())), stale)).await
        }
        decision => {
            let served = Stored { look, rec, entry };
            usable(x, served, decision).await
        }
    }
}

/// The 503 of a prefetch the store cannot serve (`crate::request::prefetch`).
fn refuse_prefetch(x: &Exchange<'_>) -> Answered {
    x.ctx.metrics.record_prefetch_refused();
    (prefetch::refused(), Outcome::Error)
}

/// Whether `rec`, fresh, is in the last `storage.refresh_ahead` of its lifetime.
fn refresh_due(x: &Exchange<'_>, rec: &Prepared) -> bool {
    let share = x.policy.cfg.storage.refresh_ahead;
    share > 0.0 && freshness::refresh_due(&x.ctx.timing_of(rec), share, x.now)
}

/// A stored response usable without asking the origin first.
struct Stored {
    look: Lookup,
    rec: Arc<Prepared>,
    entry: Option<Arc<Handle>>,
}

/// What `Cache-Status` says of a miss: the URL's `Vary` record was found but not
/// this request's variant, or nothing was.
fn miss_fwd(look: &Lookup) -> Fwd {
    if look.vary.is_some() {
        Fwd::VaryMiss
    } else {
        Fwd::UriMiss
    }
}

/// Serves a usable stored response (fresh, stale where allowed, or stale while it
/// revalidates in the background); refills when its body is gone, passes when the
/// request's preconditions are the origin's.
/// A prefetch is served as it is stored, never starting a revalidation.
async fn usable(x: Exchange<'_>, s: Stored, decision: Decision) -> Answered {
    if let Some(limited) = x.over_rate(Class::Hit) {
        return limited;
    }
    let mut status = x.keyed(CacheStatus::hit());
    if decision == Decision::StaleWhileRevalidate {
        status = status.with_detail("stale-while-revalidate");
        if !prefetch::is_prefetch(x.req.headers()) {
            x.revalidate_in_background(&s.look, &s.rec.rec);
        }
    } else if decision == Decision::Fresh
        && refresh_due(&x, &s.rec)
        && !prefetch::is_prefetch(x.req.headers())
    {
        x.refresh_ahead(&s.look, &s.rec.rec);
    }
    let served = match &s.entry {
        Some(entry) => hit::serve(&x.hit_request(), &s.rec, entry, status, x.now),
        None => Err(NotServed::BodyGone),
    };
    drop(s.entry);
    match served {
        Ok(r) if decision == Decision::Fresh => (r, Outcome::Hit),
        Ok(r) => (r, Outcome::Stale),
        Err(_) if prefetch::is_prefetch(x.req.headers()) => refuse_prefetch(&x),
        Err(NotServed::Forward) => {
            Box::pin(x.pass(CacheStatus::forward(Fwd::Request), Outcome::Pass)).await
        }
        Err(NotServed::BodyGone) => {
            let status = x.keyed(CacheStatus::forward(miss_fwd(&s.look)));
            Box::pin(x.fill(s.look, status, None, None)).await
        }
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn request_futures_stay_small() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = crate::state::test_ctx(dir.path());
        let req = http::Request::new(crate::upstream::origin::empty_body());
        let peer = crate::edge::client::Peer::plain("127.0.0.1:1".parse().unwrap());
        let f = super::handle(ctx, req, peer);
        // 4,232 bytes when written; 13,112 with the origin-bound futures inline.
        assert!(
            std::mem::size_of_val(&f) < 8 << 10,
            "{} bytes",
            std::mem::size_of_val(&f)
        );
    }
}
