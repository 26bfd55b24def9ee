//! Fetching: the task behind each [`Fill`], from the origin request to the commit.
//!
//! Key decisions:
//! - **The storing decision is made on the head** (RFC 9111 §3 via
//!   `quire_http::freshness::storable`, the object limit, store admission on the key
//!   lookups counted), so a response that will not be stored stops being a fill at
//!   once: it gives its slot back and streams on as a pass-through.
//! - **A body at hand is committed before anyone is answered.** When the whole body
//!   (up to [`HOLD_BYTES_MAX`]) arrives within [`HOLD_WAIT`] of the head — a page
//!   from a nearby origin, or from `quire serve`'s renderer — the fill commits it
//!   first, and every waiter, the first included, is answered from the store:
//!   conditionals and ranges work on the first request and `Cache-Status` says
//!   `stored` only because it is. Larger or slower bodies stream to their waiters
//!   and are committed when they end (joiners from then on wait for the commit).
//! - **Every wait on the origin is cut short when the last waiter leaves** (see
//!   [`crate::fill::coalesce`]), and the body read is bounded by `limits.fill_deadline`.
//! - A 304 to a revalidation updates the stored head (RFC 9111 §4.3.4) and writes a
//!   new record pointing at the same bodies, through the invalidation gate.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use quire_http::cache_control::CacheControl;
use quire_http::freshness::{self, StoredTiming};
use quire_http::key::{self, MethodClass, NormalizedUrl};
use quire_http::meta::StoredMeta;
use quire_http::status::CacheStatus;
use quire_store::EntryRef;

use crate::cache::invalidate::Verdict;
use crate::cache::object::{self, ObjectRecord};
use crate::cache::put;
use crate::fill::coalesce::{self, BodyEnd, Fill, FillBody, Head, ReadLimits};
use crate::fill::commit::{self, StorePlan};
use crate::fill::compress;
use crate::metrics::FillResult;
use crate::policy::Policy;
use crate::request::body::Body;
use crate::request::hit;
use crate::state::{Ctx, Scope};
use crate::upstream::error::{FailureKind, OriginError};
use crate::upstream::origin;
use crate::upstream::{self, Ahead, UpBody};

/// Fields removed from origin responses before they reach a client (misses and
/// passes; stored heads never hold them): tags and `Surrogate-Control` are for quire
/// (a surrogate), not for clients (Edge Architecture 1.0 §3).
pub(crate) const NOT_SENT: [&str; 3] = ["surrogate-key", "cache-tag", "surrogate-control"];

/// Largest body committed before its waiters are answered.
pub(crate) const HOLD_BYTES_MAX: u64 = 256 << 10;

/// How long after the head a body may take to count as "at hand".
pub(crate) const HOLD_WAIT: Duration = Duration::from_millis(5);

/// What a fill fetches and where it stores it.
#[derive(Debug)]
pub(crate) struct FillSpec {
    /// The normalised URL.
    pub url: NormalizedUrl,
    /// Where the URL's primary record lives.
    pub primary_key: Vec<u8>,
    /// The upstream's key version (and audience) `primary_key` was made with
    /// (variant keys use it too). A fill for an audience carries the audience to
    /// the upstream as a request extension, and no credentials.
    pub scope: Scope,
    /// The fields sent to the origin (see [`origin::fill_headers`]).
    pub headers: HeaderMap,
    /// The client request's fields (for the storability rules on the request).
    pub client_headers: HeaderMap,
    /// The stored response being revalidated, if any.
    pub revalidate: Option<Arc<ObjectRecord>>,
    /// The record key the fill is registered under: the key the request's lookup
    /// counted, so admission decides on it.
    pub fill_key: Vec<u8>,
    /// The policy of the request that started the fill: its storage rules, limits
    /// and codings decide what is stored.
    pub policy: Arc<Policy>,
    /// No request waited for the fill when it started (see `FillMark::background`).
    pub background: bool,
    /// The client whose miss started the fill: the budget of uncached work counts
    /// the fill against it (see `crate::edge::budget`).
    pub client: std::net::IpAddr,
}

/// Runs a fill to the end and unregisters it.
/// Runs the fill on a task of its own, holding `hold` (a budget slot, say) until
/// it ends; traced as a `fill` span under the request that started it.
pub(crate) fn spawn(ctx: Arc<Ctx>, fill: Arc<Fill>, spec: FillSpec, hold: impl Send + 'static) {
    let span = crate::trace::child("fill", crate::trace::Kind::Internal).map(|mut s| {
        s.set("url.full", spec.url.as_str().to_owned());
        s.set("quire.background", spec.background);
        s
    });
    tokio::spawn(async move {
        let _hold = hold;
        crate::trace::within(span.as_ref(), run(ctx, fill, spec)).await;
    });
}

pub(crate) async fn run(ctx: Arc<Ctx>, fill: Arc<Fill>, spec: FillSpec) {
    ctx.metrics
        .fills_in_flight()
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let result = match take_slot(&ctx, &fill, &spec).await {
        // The slot is held until the fill ends (bounded by `limits.fill_deadline`).
        Ok(_slot) => fetch_and_store(&ctx, &fill, &spec).await,
        Err(result) => result,
    };
    ctx.metrics.record_fill(result);
    ctx.fills.done(&spec.fill_key, &fill);
    ctx.metrics
        .fills_in_flight()
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
}

/// A slot of the budget of uncached work for a fill a request waits for (`None`
/// for a background fill, which is paced on its own); waiting for it ends when every
/// waiter leaves. Without one in time, every waiter is answered `503`.
async fn take_slot(
    ctx: &Ctx,
    fill: &Arc<Fill>,
    spec: &FillSpec,
) -> Result<Option<crate::edge::budget::Slot>, FillResult> {
    if spec.background {
        return Ok(None);
    }
    // A cluster peer's fill carries its readers' misses, as a proxy would.
    let from_peer = spec
        .client_headers
        .contains_key(crate::upstream::PEER_HEADER);
    // A named crawler's fill takes its class's slots (`crate::edge::crawlers`).
    let acquire = ctx.crawlers.acquire(
        &ctx.budget,
        spec.client,
        &spec.client_headers,
        from_peer,
        &spec.policy.cfg.budget,
    );
    let span = crate::trace::child("budget wait", crate::trace::Kind::Internal);
    let got = unless_abandoned(ctx, spec, fill, acquire).await;
    crate::trace::end_budget_wait(span, matches!(got, Some(Ok(_))));
    match got {
        Some(Ok(slot)) => Ok(Some(slot)),
        Some(Err(why)) => {
            fill.publish_failed(OriginError::overloaded(why));
            Err(FillResult::Failed)
        }
        None => {
            fill.publish_failed(OriginError::failed(
                FailureKind::Abandoned,
                "every client left",
            ));
            Err(FillResult::Abandoned)
        }
    }
}

/// `fut`, unless every waiter of `fill` leaves first (then the fill is unregistered
/// and `None` returned).
async fn unless_abandoned<F: Future>(
    ctx: &Ctx,
    spec: &FillSpec,
    fill: &Arc<Fill>,
    fut: F,
) -> Option<F::Output> {
    tokio::pin!(fut);
    loop {
        tokio::select! {
            out = &mut fut => return Some(out),
            () = fill.abandoned() => {
                if ctx.fills.cancel_if_abandoned(&spec.fill_key, fill) {
                    return None;
                }
                tokio::task::yield_now().await;
            }
        }
    }
}

/// Sends the fill's request to the upstream, traced as its `origin` (or
/// `render`) span; `None` when every client left first.
async fn send(
    ctx: &Arc<Ctx>,
    spec: &FillSpec,
    fill: &Arc<Fill>,
    mut req: Request<crate::upstream::origin::OutBody>,
) -> Option<Result<http::Response<UpBody>, OriginError>> {
    let span = crate::trace::outbound(ctx.origin.span_name(), req.headers_mut());
    let sending = crate::trace::within(span.as_ref(), ctx.origin.send(req));
    let sent = unless_abandoned(ctx, spec, fill, sending).await;
    if let Some(resp) = &sent {
        crate::trace::end_outbound(span, resp);
    }
    sent
}

/// The origin's answer to the fill's request: a response to store or stream, or
/// the fill's result when it ended here (a 304 merged, a failure, abandonment).
struct Fetched {
    request_time: SystemTime,
    response_time: SystemTime,
    parts: http::response::Parts,
    body: UpBody,
}

async fn fetch(ctx: &Arc<Ctx>, fill: &Arc<Fill>, spec: &FillSpec) -> Result<Fetched, FillResult> {
    // A revalidation sends the stored validators; a 304 that turns out to name
    // another representation selects nothing (RFC 9111 §4.3.4), and the fill asks
    // again without them.
    let mut conditional = spec.revalidate.as_deref();
    loop {
        let mut headers = spec.headers.clone();
        if let Some(old) = conditional {
            add_validators(&mut headers, &old.meta);
        }
        let mut req = Request::new(origin::empty_body());
        *req.method_mut() = Method::GET;
        *req.uri_mut() = match spec.url.path_and_query().parse() {
            Ok(u) => u,
            Err(_) => {
                fill.publish_failed(OriginError::failed(
                    FailureKind::Request,
                    "unusable request target",
                ));
                return Err(FillResult::Failed);
            }
        };
        *req.headers_mut() = headers;
        req.extensions_mut().insert(crate::upstream::FillMark {
            key_hash: quire_http::key::key_hash(&spec.primary_key),
            from_peer: spec
                .client_headers
                .contains_key(crate::upstream::PEER_HEADER),
            background: spec.background,
        });
        if let Some(a) = spec.scope.audience {
            // The upstream renders for the audience, never for a person: no
            // cookie or credentials reach it with the fill.
            req.headers_mut().remove(header::COOKIE);
            req.headers_mut().remove(header::AUTHORIZATION);
            req.extensions_mut().insert(a);
        }
        let request_time = ctx.clock.now();
        let t0 = std::time::Instant::now();
        let Some(resp) = send(ctx, spec, fill, req).await else {
            fill.publish_failed(OriginError::failed(
                FailureKind::Abandoned,
                "every client left",
            ));
            return Err(FillResult::Abandoned);
        };
        ctx.metrics.record_origin(t0.elapsed(), resp.is_err());
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(url = %spec.url, error = %e, "fill failed");
                fill.publish_failed(e);
                return Err(FillResult::Failed);
            }
        };
        let response_time = ctx.clock.now();
        let (mut parts, body) = resp.into_parts();
        origin::strip_hop_by_hop(&mut parts.headers);
        if parts.status == StatusCode::NOT_MODIFIED {
            if let Some(old) = conditional {
                if etag_conflict(old.meta.etag.as_deref(), &parts.headers) {
                    conditional = None;
                    continue;
                }
                let rec = refreshed(
                    &spec.policy,
                    old,
                    &parts.headers,
                    request_time,
                    response_time,
                );
                let stored = store_refreshed(ctx, fill, spec, rec.clone()).await;
                fill.publish_revalidated(Arc::new(rec));
                return Err(stored);
            }
        }
        return Ok(Fetched {
            request_time,
            response_time,
            parts,
            body,
        });
    }
}

async fn fetch_and_store(ctx: &Arc<Ctx>, fill: &Arc<Fill>, spec: &FillSpec) -> FillResult {
    let started = tokio::time::Instant::now();
    let fetched = match fetch(ctx, fill, spec).await {
        Ok(f) => f,
        Err(result) => return result,
    };
    let (head, plan, mut body) = plan(ctx, fill, spec, fetched);
    let store = head.store;
    let at_hand = match body_at_hand(&mut body, &plan.headers).await {
        Err(e) => {
            // Nothing has been sent yet: every waiter gets a 502, not a status line
            // followed by a cut body.
            tracing::debug!(url = %spec.url, error = %e, "origin body failed at once");
            fill.publish_failed(e);
            return FillResult::Failed;
        }
        Ok(a) => a,
    };
    let run = Streaming {
        ctx,
        fill,
        spec,
        started,
    };
    if let Err(why) = store {
        return run.pass_through(head, at_hand, body, why).await;
    }
    match at_hand {
        AtHand::Complete(chunks) => fill.hold_complete(head, chunks),
        AtHand::Partial(chunks) => {
            fill.publish_head(head);
            let mut kept = true;
            for c in chunks {
                kept &= fill.push(c);
            }
            if !kept {
                ctx.fills.pass_through(&spec.fill_key, fill);
            }
            match stream(ctx, fill, spec, body, started, kept).await {
                BodyEnd::Kept => {}
                BodyEnd::TooLarge => return FillResult::TooLarge,
                BodyEnd::PastDeadline => return FillResult::PastDeadline,
                BodyEnd::Failed => return FillResult::Failed,
                BodyEnd::Abandoned => return FillResult::Abandoned,
            }
        }
    }
    let (result, id) = match fill.body() {
        Some(b) => commit::commit(ctx, plan, b).await,
        None => (FillResult::Failed, None),
    };
    fill.committed(id.ok_or(result.detail().unwrap_or("not-stored")));
    result
}

/// What the fetched head means: the head waiters see (with the storing decision)
/// and the plan a commit follows, plus the body still to read.
fn plan(ctx: &Ctx, fill: &Fill, spec: &FillSpec, fetched: Fetched) -> (Head, StorePlan, UpBody) {
    let Fetched {
        request_time,
        response_time,
        parts,
        body,
    } = fetched;
    let vary = key::vary_fields(&parts.headers);
    // A field the upstream negotiates by URL is keyed by the URL already.
    let vary = match ctx.origin.negotiated_field() {
        Some(field) => vary.without(field),
        None => vary,
    };
    let variant_key = if vary.is_empty() {
        spec.primary_key.clone()
    } else {
        let (url, scope) = (&spec.url, spec.scope);
        ctx.variant_key(MethodClass::Get, url, &vary, &spec.headers, scope)
    };
    let store = decide(ctx, spec, parts.status, &parts.headers);
    let keys = commit::surrogate_keys(&parts.headers);
    let tags = put::record_tags(spec.url.as_str(), &keys);
    let head = Head {
        status: parts.status,
        headers: parts.headers.clone(),
        request_time,
        response_time,
        store,
        vary: vary.clone(),
        variant_key: variant_key.clone(),
        tags: tags.clone(),
    };
    let plan = StorePlan {
        url: spec.url.as_str().to_owned(),
        primary_key: spec.primary_key.clone(),
        record_key: variant_key,
        vary,
        status: parts.status,
        headers: parts.headers,
        request_time,
        response_time,
        start: fill.start(),
        tags,
        policy: spec.policy.clone(),
    };
    (head, plan, body)
}

/// A fill whose body is being read.
struct Streaming<'a> {
    ctx: &'a Arc<Ctx>,
    fill: &'a Arc<Fill>,
    spec: &'a FillSpec,
    started: tokio::time::Instant,
}

impl Streaming<'_> {
    /// A response that will not be stored (`why`): not a fill any more, a
    /// pass-through for the waiters it has.
    async fn pass_through(
        self,
        head: Head,
        at_hand: AtHand,
        body: UpBody,
        why: &'static str,
    ) -> FillResult {
        let Streaming {
            ctx,
            fill,
            spec,
            started,
        } = self;
        fill.publish_head(head);
        ctx.fills.pass_through(&spec.fill_key, fill);
        let end = match at_hand {
            AtHand::Complete(chunks) => {
                chunks.into_iter().for_each(|c| {
                    fill.push(c);
                });
                fill.finish(Ok(()), false);
                BodyEnd::Kept
            }
            AtHand::Partial(chunks) => {
                chunks.into_iter().for_each(|c| {
                    fill.push(c);
                });
                stream(ctx, fill, spec, body, started, false).await
            }
        };
        match (end, why) {
            (BodyEnd::Abandoned, _) => FillResult::Abandoned,
            (_, "too-large") => FillResult::TooLarge,
            (_, "admission") => FillResult::Rejected,
            _ => FillResult::NotStorable,
        }
    }
}

/// Streams the rest of the body into `fill`, within the read limits (the deadline
/// counts from `started`, when the fill began).
async fn stream(
    ctx: &Ctx,
    fill: &Arc<Fill>,
    spec: &FillSpec,
    body: UpBody,
    started: tokio::time::Instant,
    commit: bool,
) -> BodyEnd {
    let limits = ReadLimits {
        gap: ctx.origin.read_timeout(),
        deadline: started + spec.policy.cfg.limits.fill_deadline.0,
    };
    coalesce::stream_body(&ctx.fills, &spec.fill_key, fill, body, limits, commit).await
}

/// What [`body_at_hand`] read.
enum AtHand {
    /// The whole body.
    Complete(Vec<Bytes>),
    /// The start of a body still arriving (or too large to hold).
    Partial(Vec<Bytes>),
}

/// Reads the body while it arrives within [`HOLD_WAIT`] of the head and stays under
/// [`HOLD_BYTES_MAX`] bytes (trailers are dropped: a stored response has none);
/// `Err` (a protocol failure: the origin's body broke) when it failed within that
/// time.
async fn body_at_hand(body: &mut UpBody, headers: &HeaderMap) -> Result<AtHand, OriginError> {
    use http_body::Body as _;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > HOLD_BYTES_MAX) || body.size_hint().lower() > HOLD_BYTES_MAX {
        return Ok(AtHand::Partial(Vec::new()));
    }
    let data = |frames: Vec<http_body::Frame<Bytes>>| {
        frames
            .into_iter()
            .filter_map(|f| f.into_data().ok())
            .collect()
    };
    match upstream::read_ahead(body, HOLD_WAIT, HOLD_BYTES_MAX).await {
        Ahead::Ended(f) => Ok(AtHand::Complete(data(f))),
        Ahead::More(f) => Ok(AtHand::Partial(data(f))),
        Ahead::Failed(e) => Err(e),
    }
}

/// Whether a response will be stored, or the `Cache-Status` detail saying why not.
fn decide(
    ctx: &Ctx,
    spec: &FillSpec,
    status: StatusCode,
    headers: &HeaderMap,
) -> Result<(), &'static str> {
    freshness::storable(
        &Method::GET,
        &spec.client_headers,
        status,
        headers,
        &spec.policy.storage,
    )
    .map_err(|n| n.detail())?;
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > spec.policy.object_limit {
            return Err("too-large");
        }
    }
    match commit::origin_coding(headers) {
        Ok(_) => {}
        Err(()) => return Err("content-encoding"),
    }
    // Admission counts the key the request's lookup counted (the primary key, or
    // the variant key a stored `Vary` selected), never a key no lookup touches.
    if !ctx.store.admits(&spec.fill_key) {
        return Err("admission");
    }
    Ok(())
}

/// True when a 304 carries an `ETag` that is not the stored one (weak comparison,
/// RFC 9110 §8.8.3.2): it validates some other representation, not ours.
fn etag_conflict(stored: Option<&str>, not_modified: &HeaderMap) -> bool {
    let opaque = |e: &str| e.trim().trim_start_matches("W/").to_owned();
    match (
        stored,
        not_modified.get(header::ETAG).and_then(|v| v.to_str().ok()),
    ) {
        (Some(s), Some(n)) => opaque(s) != opaque(n),
        _ => false,
    }
}

/// Adds `If-None-Match` / `If-Modified-Since` from a stored response (RFC 9111 §4.3.1).
fn add_validators(h: &mut HeaderMap, m: &StoredMeta) {
    if let Some(e) = m
        .etag
        .as_deref()
        .and_then(|e| HeaderValue::from_str(e).ok())
    {
        h.insert(header::IF_NONE_MATCH, e);
    }
    if let Some(lm) = m.last_modified_secs.and_then(|s| u64::try_from(s).ok()) {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(lm);
        h.insert(header::IF_MODIFIED_SINCE, crate::request::hit::http_date(t));
    }
}

/// The record after a 304: the stored head updated with the 304's fields and timing
/// recomputed from the merged head (RFC 9111 §4.3.4).
fn refreshed(
    policy: &Policy,
    old: &ObjectRecord,
    not_modified: &HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
) -> ObjectRecord {
    let mut stored = HeaderMap::new();
    for (n, v) in &old.meta.headers {
        stored.append(n.clone(), v.clone());
    }
    if let Some(e) = old
        .meta
        .etag
        .as_deref()
        .and_then(|e| HeaderValue::from_str(e).ok())
    {
        stored.insert(header::ETAG, e);
    }
    let merged = freshness::merge_304(&stored, not_modified);
    let status = StatusCode::from_u16(old.meta.status).unwrap_or(StatusCode::OK);
    let cc = CacheControl::for_response(&merged, &policy.storage.targeted_fields);
    let timing = StoredTiming::new(
        status,
        &merged,
        &cc,
        request_time,
        response_time,
        &policy.storage.heuristic,
    );
    let mut meta = commit::build_meta(status, &merged, &timing, old.meta.tags.clone());
    meta.vary = old.meta.vary.clone();
    meta.variant_key_hash = old.meta.variant_key_hash;
    meta.body_len = old.meta.body_len;
    meta.content_encoding = old.meta.content_encoding.clone();
    ObjectRecord {
        id: old.id,
        url: old.url.clone(),
        codings: old.codings.clone(),
        meta,
    }
}

/// Writes the record a 304 refreshed over the bodies of the entry it revalidated
/// (if that is still the same version), through the invalidation gate.
async fn store_refreshed(
    ctx: &Arc<Ctx>,
    fill: &Fill,
    spec: &FillSpec,
    mut rec: ObjectRecord,
) -> FillResult {
    let ctx = ctx.clone();
    // A revalidation fill is registered under the key its stale record was found at.
    let key = spec.fill_key.clone();
    let start = fill.start();
    tokio::task::spawn_blocking(move || {
        let tags = put::record_tags(&rec.url, &rec.meta.tags);
        ctx.invalidations.commit(start, &tags, |v| {
            match v {
                Verdict::Hard => return FillResult::Invalidated,
                Verdict::Soft => put::make_stale(&mut rec, ctx.clock.now()),
                Verdict::Clean => {}
            }
            let Some(h) = ctx.store.get_quiet(&key) else {
                return FillResult::Rejected;
            };
            match object::decode(h.meta()) {
                Some(object::Record::Object(old)) if old.id == rec.id => {
                    // The bodies as they are now (codings may have joined since).
                    rec.codings = old.codings.clone();
                    put::put_record(&ctx, &key, &rec, &[h.body()])
                }
                _ => FillResult::Rejected,
            }
        })
    })
    .await
    .unwrap_or(FillResult::Failed)
}

/// The response a waiter gets while the fill streams: the origin's head (fields
/// meant for quire removed) with `Age` and `Cache-Status` — which says `stored` only
/// for what is committed, which a streaming response is not yet, and why a response
/// is not stored (`not_stored`). `head_only` for a `HEAD` request.
pub(crate) fn respond(
    head: &Head,
    not_stored: Option<&'static str>,
    body: FillBody,
    status: CacheStatus,
    head_only: bool,
    now: SystemTime,
) -> Response<Body> {
    let mut h = head.headers.clone();
    for n in NOT_SENT {
        h.remove(n);
    }
    let mut st = status;
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
        .is_some_and(|n| n < compress::MIN_COMPRESS_BYTES);
    if head.store.is_ok() && !small && compress::compressible(h.get(header::CONTENT_TYPE)) {
        hit::add_vary_accept_encoding(&mut h);
    }
    let b = if head_only {
        Body::Empty
    } else {
        Body::Fill(body)
    };
    let mut r = Response::new(b);
    *r.status_mut() = head.status;
    *r.headers_mut() = h;
    r.extensions_mut().insert(upstream_of(head));
    r
}

/// What the origin said to a fill, for the access log: its status and how long its
/// head took.
pub(crate) fn upstream_of(head: &Head) -> crate::ops::access_log::Upstream {
    crate::ops::access_log::Upstream {
        status: head.status.as_u16(),
        time: head
            .response_time
            .duration_since(head.request_time)
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_304_for_another_etag_conflicts() {
        let mut h = HeaderMap::new();
        assert!(!etag_conflict(Some("\"a\""), &h), "no ETag in the 304");
        h.insert(header::ETAG, "W/\"a\"".parse().unwrap());
        assert!(!etag_conflict(Some("\"a\""), &h), "weak comparison");
        h.insert(header::ETAG, "\"b\"".parse().unwrap());
        assert!(etag_conflict(Some("\"a\""), &h));
        assert!(!etag_conflict(None, &h));
    }
}
