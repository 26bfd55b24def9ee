//! One request, start to finish: guard, route, key, look up, decide, answer.
//!
//! The order is the design's (framing was checked by [`crate::guard`]): heads the
//! RFCs forbid ([`crate::refuse`]), who the client is ([`crate::client`]), the admin
//! API (on the path as sent, then as normalised), URL normalisation, bypass rules,
//! then the lookup — primary record, variant record
//! when the URL varies, body of the chosen coding — and the RFC 9111 reuse decision
//! (`quire_http::freshness::reuse`): fresh → [`crate::hit`]; stale within
//! `stale-while-revalidate` → served, revalidated in the background; otherwise a
//! coalesced fill ([`crate::fill`], [`crate::miss`]) that revalidates when it can and
//! falls back on the stale copy where `stale-if-error` allows.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use quire_http::bypass;
use quire_http::cache_control::CacheControl;
use quire_http::freshness::{self, Decision};
use quire_http::key::{self, MethodClass, NormalizedUrl, VaryFields};
use quire_http::status::{CacheStatus, Fwd};
use quire_store::{Engine, EntryRef, Handle};

use crate::admin;
use crate::body::Body;
use crate::client::Client;
use crate::config::FillHeaders;
use crate::fill::{FillBody, Head, Joined, NewFill, Outcome as FillOutcome};
use crate::hit::{self, Cached, HitRequest, NotServed, Prepared};
use crate::invalidate::Tags;
use crate::metrics::Outcome;
use crate::miss::{self, FillSpec};
use crate::object;
use crate::object::ObjectRecord;
use crate::origin;
use crate::origin::OutBody;
use crate::pass;
use crate::refuse::{self, Refusal};
use crate::state::Ctx;

/// A plain-text response quire writes itself, with `Cache-Status`.
pub fn plain(code: StatusCode, text: &str, status: CacheStatus) -> Response<Body> {
    let mut r = Response::new(Body::full(text.to_owned()));
    *r.status_mut() = code;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    h.insert("cache-status", status.to_header_value());
    r
}

/// The answer to a refused request head (see [`refuse`]): it closes the connection.
fn refused(r: Refusal) -> Response<Body> {
    let mut resp = plain(
        r.status,
        &format!("{}\n", r.reason),
        CacheStatus::default().with_detail("refused"),
    );
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// A 400 that closes the connection (the framing may be off).
fn bad_request(why: &str) -> Response<Body> {
    let mut r = plain(
        StatusCode::BAD_REQUEST,
        &format!("bad request: {why}\n"),
        CacheStatus::default().with_detail("bad-request"),
    );
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Answers one request and records it in the metrics.
pub async fn handle(ctx: Arc<Ctx>, req: Request<OutBody>, peer: SocketAddr) -> Response<Body> {
    // Kept for the view hook: a `Uri` clone shares the bytes hyper parsed it from
    // (a reference count, not a copy of the path).
    let target = (req.method() == Method::GET).then(|| req.uri().clone());
    let (resp, outcome) = route(&ctx, req, peer).await;
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
    resp
}

async fn route(
    ctx: &Arc<Ctx>,
    req: Request<OutBody>,
    peer: SocketAddr,
) -> (Response<Body>, Outcome) {
    // Ambiguous framing (RFC 9112 §6.3) never gets here: `crate::guard` refuses it
    // on the byte stream, before hyper folds the evidence away.
    if let Some(r) = refuse::check(&req) {
        return (refused(r), Outcome::Error);
    }
    let client = &Client::resolve(peer, req.headers(), &ctx.trusted_proxies);
    if req.uri().path().starts_with(admin::PREFIX) {
        let path = req.uri().path().to_owned();
        return admin::handle(ctx, req, &path).await;
    }
    if req.method().as_str() == "PURGE" {
        return admin::purge_method(ctx, &req);
    }
    let url = match key::normalize(
        "http",
        req.headers().get(header::HOST),
        req.uri(),
        &ctx.keys,
    ) {
        Ok(u) => u,
        Err(e) => return (bad_request(&e.to_string()), Outcome::Error),
    };
    // Admin routing is decided on the normalised path too: `/x/%2e%2e/_quire/metrics`
    // and `/%5fquire/metrics` name the admin API, so neither may reach the origin or
    // be stored (a stored copy would answer the other spelling from cache).
    if url.path().starts_with(admin::PREFIX) {
        let path = url.path().to_owned();
        return admin::handle(ctx, req, &path).await;
    }
    let Some(class) = MethodClass::of(req.method()) else {
        // Every other method goes to the origin; unsafe ones invalidate (RFC 9111 §4.4).
        return pass::pass(
            ctx,
            req,
            client,
            Some(&url),
            CacheStatus::forward(Fwd::Method),
            Outcome::Pass,
        )
        .await;
    };
    if let Some(b) = bypass::bypass(req.method(), req.headers(), &ctx.bypass) {
        return pass::pass(
            ctx,
            req,
            client,
            Some(&url),
            CacheStatus::forward(Fwd::Bypass).with_detail(b.detail()),
            Outcome::Bypass,
        )
        .await;
    }
    cached(ctx, req, client, class, url).await
}

/// What the store holds for a request.
pub(crate) struct Lookup {
    primary_key: Vec<u8>,
    /// The upstream's key version the keys were made with.
    version: u64,
    /// The variant key where the record for this request lives, when the URL
    /// varies (else it is under `primary_key`).
    variant_key: Option<Vec<u8>>,
    /// The URL's `Vary` when a Vary record was found.
    vary: Option<Arc<VaryFields>>,
    /// The stored response selected for the request.
    pub(crate) record: Option<Arc<Prepared>>,
    /// The store entry it was read from (record and bodies). It pins its region:
    /// take it out before awaiting anything slow.
    pub(crate) entry: Option<Arc<Handle>>,
}

impl Lookup {
    /// Where the record for this request lives (primary or variant key).
    fn record_key(&self) -> &[u8] {
        self.variant_key.as_deref().unwrap_or(&self.primary_key)
    }
}

/// Looks up the stored response for a request: primary record, then the variant
/// record when the URL varies. Shared by this path and [`crate::fastpath`].
pub(crate) fn lookup(
    ctx: &Ctx,
    class: MethodClass,
    url: &NormalizedUrl,
    headers: &HeaderMap,
) -> Lookup {
    let version = ctx.key_version(url);
    let primary_key = ctx.primary_key(class, url, version);
    let found = ctx.store.get(&primary_key).and_then(|h| {
        let c = ctx.records.get(h.meta())?;
        Some((c, h))
    });
    match found {
        Some((Cached::Object(o), h)) => Lookup {
            primary_key,
            variant_key: None,
            version,
            vary: None,
            record: Some(o),
            entry: Some(Arc::new(h)),
        },
        Some((Cached::Vary(v), _)) => {
            let vk = ctx.variant_key(class, url, &v, headers, version);
            let (record, entry) = match entry_at(ctx, &vk) {
                Some((o, h)) => (Some(o), Some(h)),
                None => (None, None),
            };
            Lookup {
                primary_key,
                version,
                variant_key: Some(vk),
                vary: Some(v),
                record,
                entry,
            }
        }
        None => Lookup {
            primary_key,
            variant_key: None,
            version,
            vary: None,
            record: None,
            entry: None,
        },
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
fn same_version(ctx: &Ctx, key: &[u8], p: &Prepared) -> Option<(Arc<Prepared>, Arc<Handle>)> {
    entry_at(ctx, key).filter(|(q, _)| q.rec.id == p.rec.id && q.rec.codings == p.rec.codings)
}

async fn cached(
    ctx: &Arc<Ctx>,
    req: Request<OutBody>,
    client: &Client,
    class: MethodClass,
    url: NormalizedUrl,
) -> (Response<Body>, Outcome) {
    let now = SystemTime::now();
    let req_cc = CacheControl::from_headers(req.headers());
    let mut look = lookup(ctx, class, &url, req.headers());
    // The entry pins its region: it is dropped before any wait on the origin, so a
    // slow origin never holds reclaim back.
    let entry = look.entry.take();
    let hreq = HitRequest {
        method: req.method(),
        headers: req.headers(),
    };
    let miss_fwd = if look.vary.is_some() {
        Fwd::VaryMiss
    } else {
        Fwd::UriMiss
    };
    let Some(rec) = look.record.clone() else {
        if req_cc.only_if_cached {
            return only_if_cached();
        }
        let status = keyed(ctx, &url, CacheStatus::forward(miss_fwd));
        return fill(Miss::new(ctx, req, client, &url, &look, status), None, None).await;
    };
    let decision = freshness::reuse(rec.timing(), &req_cc, &ctx.reuse, now);
    match decision {
        Decision::Fresh | Decision::StaleAllowed | Decision::StaleWhileRevalidate => {
            let stale = decision != Decision::Fresh;
            let mut status = keyed(ctx, &url, CacheStatus::hit());
            if decision == Decision::StaleWhileRevalidate {
                status = status.with_detail("stale-while-revalidate");
                revalidate_in_background(ctx, &req, client, &url, &look, &rec.rec);
            }
            let served = match &entry {
                Some(entry) => hit::serve(&hreq, &rec, entry, status, now),
                None => Err(NotServed::BodyGone),
            };
            drop(entry);
            match served {
                Ok(r) => (r, if stale { Outcome::Stale } else { Outcome::Hit }),
                Err(NotServed::Forward) => {
                    pass::pass(
                        ctx,
                        req,
                        client,
                        Some(&url),
                        CacheStatus::forward(Fwd::Request),
                        Outcome::Pass,
                    )
                    .await
                }
                Err(NotServed::BodyGone) => {
                    let status = keyed(ctx, &url, CacheStatus::forward(miss_fwd));
                    fill(Miss::new(ctx, req, client, &url, &look, status), None, None).await
                }
            }
        }
        Decision::MustRevalidate { stale_if_error } => {
            if req_cc.only_if_cached {
                return only_if_cached();
            }
            let fwd = if req_cc.no_cache.is_some()
                || req_cc.max_age.is_some()
                || req_cc.min_fresh.is_some()
            {
                Fwd::Request
            } else {
                Fwd::Stale
            };
            drop(entry);
            let stale = stale_if_error.map(|_| rec.clone());
            let rec = Arc::new(rec.rec.clone());
            let status = keyed(ctx, &url, CacheStatus::forward(fwd));
            fill(
                Miss::new(ctx, req, client, &url, &look, status),
                Some(rec),
                stale,
            )
            .await
        }
    }
}

/// `status` with the cache key (`key=`, RFC 9211 §2.7) when `expose_key` is set.
pub(crate) fn keyed(ctx: &Ctx, url: &NormalizedUrl, status: CacheStatus) -> CacheStatus {
    if ctx.cfg.expose_key {
        status.with_key(url.as_str())
    } else {
        status
    }
}

/// RFC 9111 §5.2.1.7: `only-if-cached` with nothing usable stored → 504.
fn only_if_cached() -> (Response<Body>, Outcome) {
    (
        plain(
            StatusCode::GATEWAY_TIMEOUT,
            "not cached (only-if-cached)\n",
            CacheStatus::forward(Fwd::Miss).with_detail("only-if-cached"),
        ),
        Outcome::Error,
    )
}

/// The fill request for `url` as this client would make it.
fn spec_for(
    ctx: &Ctx,
    req_headers: &HeaderMap,
    client: &Client,
    url: &NormalizedUrl,
    look: &Lookup,
    fill_key: Vec<u8>,
    revalidate: Option<Arc<ObjectRecord>>,
) -> FillSpec {
    let vary_names = look
        .vary
        .as_ref()
        .map(|v| v.fields().to_vec())
        .unwrap_or_default();
    let host = match url.port() {
        Some(p) => format!("{}:{p}", url.host()),
        None => url.host().to_owned(),
    };
    let headers = match ctx.cfg.fill_headers {
        FillHeaders::Keyed => origin::fill_headers(req_headers, &host, &vary_names, client),
        FillHeaders::All => origin::fill_headers_all(req_headers, &host, client),
    };
    FillSpec {
        url: url.clone(),
        primary_key: look.primary_key.clone(),
        key_version: look.version,
        headers,
        client_headers: req_headers.clone(),
        revalidate,
        fill_key,
    }
}

/// What a new fill for `url` registers: its buffer limit, its start in the
/// invalidation log, the URL's tags and the client it is counted against.
fn new_fill(ctx: &Ctx, url: &NormalizedUrl, client: &Client) -> NewFill {
    NewFill {
        limit: ctx.object_limit,
        start: ctx.invalidations.now(),
        tags: Tags::new(&object::record_tags(url.as_str(), &[]), false),
        client: client.ip,
    }
}

fn revalidate_in_background(
    ctx: &Arc<Ctx>,
    req: &Request<OutBody>,
    client: &Client,
    url: &NormalizedUrl,
    look: &Lookup,
    rec: &ObjectRecord,
) {
    let key = look.record_key().to_vec();
    if let Some(f) = ctx.fills.start_detached(&key, new_fill(ctx, url, client)) {
        let spec = spec_for(
            ctx,
            req.headers(),
            client,
            url,
            look,
            key,
            Some(Arc::new(rec.clone())),
        );
        tokio::spawn(miss::run(ctx.clone(), f, spec));
    }
}

/// A miss or a revalidation in the making: the request, its URL and lookup, and what
/// `Cache-Status` says so far.
struct Miss<'a> {
    ctx: &'a Arc<Ctx>,
    req: Request<OutBody>,
    client: &'a Client,
    url: &'a NormalizedUrl,
    look: &'a Lookup,
    status: CacheStatus,
    /// This is already the second fill for the request's own variant.
    variant_retry: bool,
}

impl<'a> Miss<'a> {
    fn new(
        ctx: &'a Arc<Ctx>,
        req: Request<OutBody>,
        client: &'a Client,
        url: &'a NormalizedUrl,
        look: &'a Lookup,
        status: CacheStatus,
    ) -> Miss<'a> {
        Miss {
            ctx,
            req,
            client,
            url,
            look,
            status,
            variant_retry: false,
        }
    }

    /// Passes the request to the origin (uncoalesced, not stored) with `status`.
    async fn pass(self, status: CacheStatus) -> (Response<Body>, Outcome) {
        pass::pass(
            self.ctx,
            self.req,
            self.client,
            Some(self.url),
            status,
            Outcome::Miss,
        )
        .await
    }

    fn hit_request(&self) -> HitRequest<'_> {
        HitRequest {
            method: self.req.method(),
            headers: self.req.headers(),
        }
    }
}

/// A miss or a revalidation: join or start the fill for this request's record key,
/// and answer from its outcome. `stale` is the stored copy `stale-if-error` allows
/// serving when the origin fails.
async fn fill(
    mut m: Miss<'_>,
    revalidate: Option<Arc<ObjectRecord>>,
    stale: Option<Arc<Prepared>>,
) -> (Response<Body>, Outcome) {
    let (ctx, look) = (m.ctx, m.look);
    let key = look.record_key().to_vec();
    let new = new_fill(ctx, m.url, m.client);
    let ticket = match ctx.fills.join(&key, new, &ctx.invalidations) {
        Joined::Existing(t) => {
            ctx.metrics.record_coalesced();
            t
        }
        Joined::New(f, t) => {
            let spec = spec_for(ctx, m.req.headers(), m.client, m.url, look, key, revalidate);
            tokio::spawn(miss::run(ctx.clone(), f, spec));
            t
        }
        Joined::Busy => {
            // No slot for this miss (all taken, or this client's share is): it still
            // gets an answer, straight from the origin, not coalesced and not stored.
            ctx.metrics.record_fill_busy();
            let status = m.status.clone().with_detail("fills-busy");
            return m.pass(status).await;
        }
    };
    if ticket.collapsed {
        m.status = m.status.with_collapsed();
    }
    let outcome = ticket.outcome().await;
    let now = SystemTime::now();
    if let FillOutcome::Response { head, .. } | FillOutcome::Stored(head, _) = &outcome {
        if let Some(r) = stale_error(&m, head, stale.as_deref(), now) {
            return r;
        }
    }
    match outcome {
        FillOutcome::Revalidated(rec) => {
            // The refreshed head over the bodies of the same version (rewritten by the
            // fill, or still the entry it revalidated if the rewrite was declined).
            let p = Prepared::new((*rec).clone());
            let st = m.status.clone().with_fwd_status(304);
            let served = match same_version(ctx, look.record_key(), &p) {
                Some((_, entry)) => hit::serve(&m.hit_request(), &p, &entry, st, now),
                None => Err(NotServed::BodyGone),
            };
            match served {
                Ok(r) => (r, Outcome::Revalidated),
                Err(_) => m.pass(CacheStatus::forward(Fwd::Miss)).await,
            }
        }
        FillOutcome::Failed(e) => match stale {
            Some(rec) => {
                let hreq = m.hit_request();
                serve_stale(ctx, &hreq, look.record_key(), &rec, now, "stale-if-error")
            }
            None => (pass::origin_error(&e, m.status), Outcome::Error),
        },
        FillOutcome::Refused => {
            let st = m.status.clone().with_detail("uncacheable-size");
            m.pass(st).await
        }
        FillOutcome::Stored(head, id) => from_store(m, &head, id, now).await,
        FillOutcome::Response {
            head,
            not_stored,
            body,
        } => {
            if !head.vary.is_empty() && my_variant(&m, &head) != head.variant_key {
                // RFC 9111 §4.1: only a request whose selecting fields match the
                // ones the fill sent may take its response.
                return own_variant(m).await;
            }
            streamed(m, &head, not_stored, body, now)
        }
    }
}

/// RFC 5861 §4: an error answer may be covered by the stale copy.
fn stale_error(
    m: &Miss<'_>,
    head: &Head,
    stale: Option<&Prepared>,
    now: SystemTime,
) -> Option<(Response<Body>, Outcome)> {
    let rec = stale?;
    if !matches!(head.status.as_u16(), 500 | 502 | 503 | 504) {
        return None;
    }
    Some(serve_stale(
        m.ctx,
        &m.hit_request(),
        m.look.record_key(),
        rec,
        now,
        "stale-if-error",
    ))
}

/// The variant key this request selects under the response's `Vary`, from the
/// client's own fields (a fill forwards only the fields the key covers, so a field the
/// response turns out to vary on may not have been sent).
fn my_variant(m: &Miss<'_>, head: &Head) -> Vec<u8> {
    m.ctx.variant_key(
        MethodClass::Get,
        m.url,
        &head.vary,
        m.req.headers(),
        m.look.version,
    )
}

/// Answers a waiter of a committed fill from the store, as a hit is answered
/// (conditionals, ranges, codings), with `Cache-Status: ...; stored`.
async fn from_store(
    m: Miss<'_>,
    head: &Head,
    id: u64,
    now: SystemTime,
) -> (Response<Body>, Outcome) {
    let class = MethodClass::of(m.req.method()).unwrap_or(MethodClass::Get);
    let look = lookup(m.ctx, class, m.url, m.req.headers());
    let mut st = m.status.clone();
    if head.status.as_u16() != 200 {
        st = st.with_fwd_status(head.status.as_u16());
    }
    let served = match (&look.record, &look.entry) {
        // Only the fill's own record: whatever else is there now (a later or an
        // earlier fill's) was not what this request waited for.
        (Some(rec), Some(entry)) if rec.rec.id == id => {
            hit::serve(&m.hit_request(), rec, entry, st.with_stored(), now)
        }
        // Evicted or purged since, replaced, or stored under another variant than
        // this request selects: fetch for this request alone.
        _ => Err(NotServed::BodyGone),
    };
    drop(look);
    match served {
        Ok(r) => (r, Outcome::Miss),
        Err(NotServed::Forward) => m.pass(CacheStatus::forward(Fwd::Request)).await,
        Err(NotServed::BodyGone) if !head.vary.is_empty() => own_variant(m).await,
        Err(NotServed::BodyGone) => m.pass(CacheStatus::forward(Fwd::UriMiss)).await,
    }
}

/// The fill's response varies on a field this request sent with another value than
/// the fill did (a first fill forwards no field the URL's `Vary` is not yet known
/// to name): fetch this request's own variant with a fill keyed on it, now that the
/// URL's `Vary` record is stored — once; else pass the request through.
async fn own_variant(m: Miss<'_>) -> (Response<Body>, Outcome) {
    let look = lookup(m.ctx, MethodClass::Get, m.url, m.req.headers());
    let status = keyed(m.ctx, m.url, CacheStatus::forward(Fwd::VaryMiss));
    if m.variant_retry || look.vary.is_none() || look.record.is_some() {
        return m.pass(status).await;
    }
    let Miss {
        ctx,
        req,
        client,
        url,
        ..
    } = m;
    let mut m = Miss::new(ctx, req, client, url, &look, status);
    m.variant_retry = true;
    Box::pin(fill(m, None, None)).await
}

/// Streams a fill's response to one waiter. `Cache-Status` says `stored` only for
/// what is committed, which a streaming response is not yet; a response that is not
/// stored says why (`not_stored`).
fn streamed(
    m: Miss<'_>,
    head: &Head,
    not_stored: Option<&'static str>,
    body: FillBody,
    now: SystemTime,
) -> (Response<Body>, Outcome) {
    let mut h = head.headers.clone();
    for n in miss::NOT_SENT {
        h.remove(n);
    }
    let mut st = m.status;
    if head.status.as_u16() != 200 {
        st = st.with_fwd_status(head.status.as_u16());
    }
    if let Some(why) = not_stored {
        st = st.with_detail(why);
    }
    let cs = st.append_to_lines(h.get_all("cache-status"));
    h.insert("cache-status", cs);
    let age = freshness::current_age(&head.headers, head.response_time, head.request_time, now);
    h.insert(header::AGE, HeaderValue::from(age.as_secs()));
    // Later hits choose among codings when the body will be compressed: a
    // compressible type, and not known to be below the compression minimum.
    let small = h
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n < crate::compress::MIN_COMPRESS_BYTES);
    if head.store.is_ok() && !small && crate::compress::compressible(h.get(header::CONTENT_TYPE)) {
        hit::add_vary_accept_encoding(&mut h);
    }
    let b = if m.req.method() == Method::HEAD {
        Body::Empty
    } else {
        Body::Fill(body)
    };
    let mut r = Response::new(b);
    *r.status_mut() = head.status;
    *r.headers_mut() = h;
    (r, Outcome::Miss)
}

fn serve_stale(
    ctx: &Ctx,
    hreq: &HitRequest<'_>,
    key: &[u8],
    rec: &Prepared,
    now: SystemTime,
    why: &str,
) -> (Response<Body>, Outcome) {
    let served = match same_version(ctx, key, rec) {
        Some((_, entry)) => hit::serve(hreq, rec, &entry, CacheStatus::hit().with_detail(why), now),
        None => Err(NotServed::BodyGone),
    };
    match served {
        Ok(r) => (r, Outcome::Stale),
        Err(_) => (
            plain(
                StatusCode::BAD_GATEWAY,
                "origin failed and the stale copy is gone\n",
                CacheStatus::forward(Fwd::Stale).with_detail("origin-error"),
            ),
            Outcome::Error,
        ),
    }
}
