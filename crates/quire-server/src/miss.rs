//! Fetching and storing: the task behind each [`Fill`], from the origin request to the
//! record in the store.
//!
//! Key decisions:
//! - **The storing decision is made on the head** (RFC 9111 §3 via
//!   `quire_http::freshness::storable`, the object limit, store admission), so the
//!   `Cache-Status` sent with a streaming miss can say `stored` or why not.
//! - **Compression and the store write run on the blocking pool** once the body is
//!   complete: gzip/brotli/zstd of a page take milliseconds, and a put may reclaim a
//!   region inline. Neither ever runs on a request's worker.
//! - A body the origin sent compressed (gzip, br, zstd) is decoded (bounded by the
//!   object limit) and stored like any other; its `ETag` is kept weak, since quire's
//!   identity bytes are not the representation the origin's tag named. Other codings
//!   are not stored.
//! - A 304 to a revalidation updates the stored head (RFC 9111 §4.3.4) and writes a
//!   new record pointing at the same bodies.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode};
use quire_http::cache_control::CacheControl;
use quire_http::encoding::Coding;
use quire_http::freshness::{self, StoredTiming};
use quire_http::key::{self, MethodClass, NormalizedUrl, VaryFields};
use quire_http::meta::StoredMeta;
use quire_store::{Engine, EntryRef, Put, StoreError};

use crate::compress;
use crate::fill::{self, Fill, Head};
use crate::metrics::FillResult;
use crate::object::{self, ObjectRecord};
use crate::origin::{self, OriginError};
use crate::recompress::Recompressor;
use crate::state::Ctx;

/// Fields never stored with a response: hop-by-hop ones go earlier; these are either
/// recomputed per response (`Age`, `Content-Length`, `ETag`, `Content-Encoding`: per
/// coding) or addressed to quire alone (surrogate keys and `Surrogate-Control`).
/// `Vary` is stored as sent (`Accept-Encoding` is added when serving).
const NOT_STORED: [&str; 7] = [
    "age",
    "content-length",
    "content-encoding",
    "etag",
    "surrogate-key",
    "cache-tag",
    "surrogate-control",
];

/// Fields removed from origin responses before they reach a client (misses and
/// passes; stored heads never hold them): tags and `Surrogate-Control` are for quire
/// (a surrogate), not for clients (Edge Architecture 1.0 §3).
pub const NOT_SENT: [&str; 3] = ["surrogate-key", "cache-tag", "surrogate-control"];

/// Most surrogate keys kept per response, and their longest length.
const SURROGATE_KEYS_MAX: usize = 64;
const SURROGATE_KEY_BYTES_MAX: usize = 256;

/// What a fill fetches and where it stores it.
#[derive(Debug)]
pub struct FillSpec {
    /// The normalised URL.
    pub url: NormalizedUrl,
    /// Where the URL's primary record lives.
    pub primary_key: Vec<u8>,
    /// The upstream's key version `primary_key` was made with (variant keys use it
    /// too).
    pub key_version: u64,
    /// The fields sent to the origin (see [`origin::fill_headers`]).
    pub headers: HeaderMap,
    /// The client request's fields (for the storability rules on the request).
    pub client_headers: HeaderMap,
    /// The stored response being revalidated, if any.
    pub revalidate: Option<Arc<ObjectRecord>>,
    /// The record key the fill is registered under.
    pub fill_key: Vec<u8>,
}

/// Runs a fill to the end and unregisters it.
pub async fn run(ctx: Arc<Ctx>, fill: Arc<Fill>, spec: FillSpec) {
    ctx.metrics
        .fills_in_flight()
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let result = fetch_and_store(&ctx, &fill, &spec).await;
    ctx.metrics.record_fill(result);
    ctx.fills.done(&spec.fill_key, &fill);
    ctx.metrics
        .fills_in_flight()
        .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
}

async fn fetch_and_store(ctx: &Arc<Ctx>, fill: &Arc<Fill>, spec: &FillSpec) -> FillResult {
    // A revalidation sends the stored validators; a 304 that turns out to name
    // another representation selects nothing (RFC 9111 §4.3.4), and the fill asks
    // again without them.
    let mut conditional = spec.revalidate.as_deref();
    let (request_time, response_time, parts, body) = loop {
        let mut headers = spec.headers.clone();
        if let Some(old) = conditional {
            add_validators(&mut headers, &old.meta);
        }
        let mut req = Request::new(origin::empty_body());
        *req.method_mut() = Method::GET;
        *req.uri_mut() = match spec.url.path_and_query().parse() {
            Ok(u) => u,
            Err(_) => {
                fill.publish_failed(OriginError::Failed("unusable request target".into()));
                return FillResult::Failed;
            }
        };
        *req.headers_mut() = headers;
        let request_time = SystemTime::now();
        let t0 = std::time::Instant::now();
        let resp = ctx.origin.send(req).await;
        ctx.metrics.record_origin(t0.elapsed(), resp.is_err());
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!(url = %spec.url, error = %e, "fill failed");
                fill.publish_failed(e);
                return FillResult::Failed;
            }
        };
        let response_time = SystemTime::now();
        let (mut parts, body) = resp.into_parts();
        origin::strip_hop_by_hop(&mut parts.headers);
        if parts.status == StatusCode::NOT_MODIFIED {
            if let Some(old) = conditional {
                if etag_conflict(old.meta.etag.as_deref(), &parts.headers) {
                    conditional = None;
                    continue;
                }
                let rec = refreshed(ctx, old, &parts.headers, request_time, response_time);
                let stored = store_record_blocking(ctx, spec, rec.clone()).await;
                fill.publish_revalidated(Arc::new(rec));
                return stored;
            }
        }
        break (request_time, response_time, parts, body);
    };
    let vary = key::vary_fields(&parts.headers);
    let variant_key = if vary.is_empty() {
        spec.primary_key.clone()
    } else {
        ctx.variant_key(
            MethodClass::Get,
            &spec.url,
            &vary,
            &spec.headers,
            spec.key_version,
        )
    };
    let store = decide(ctx, spec, parts.status, &parts.headers, &variant_key);
    let head = Head {
        status: parts.status,
        headers: parts.headers.clone(),
        request_time,
        response_time,
        store,
        vary: vary.clone(),
        variant_key: variant_key.clone(),
    };
    fill.publish_head(head);
    let kept = fill::stream_body(fill, body, ctx.origin.read_timeout()).await;
    match store {
        Err("too-large") => return FillResult::TooLarge,
        Err("admission") => return FillResult::Rejected,
        Err(_) => return FillResult::NotStorable,
        Ok(()) => {}
    }
    if !kept {
        return FillResult::TooLarge;
    }
    let Some(body) = fill.body() else {
        return FillResult::Failed;
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
    };
    let ctx2 = ctx.clone();
    match tokio::task::spawn_blocking(move || store_response(&ctx2, plan, body)).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "store task failed");
            FillResult::Failed
        }
    }
}

/// Whether a response will be stored, or the `Cache-Status` detail saying why not.
fn decide(
    ctx: &Ctx,
    spec: &FillSpec,
    status: StatusCode,
    headers: &HeaderMap,
    record_key: &[u8],
) -> Result<(), &'static str> {
    freshness::storable(
        &Method::GET,
        &spec.client_headers,
        status,
        headers,
        &ctx.storage,
    )
    .map_err(|n| n.detail())?;
    if let Some(len) = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > ctx.object_limit {
            return Err("too-large");
        }
    }
    match origin_coding(headers) {
        Ok(_) => {}
        Err(()) => return Err("content-encoding"),
    }
    if !ctx.store.admits(record_key) {
        return Err("admission");
    }
    Ok(())
}

/// The coding the origin applied: `Ok(None)` for none, `Ok(Some)` for one quire can
/// decode, `Err` for anything else (several codings, deflate, unknown).
fn origin_coding(headers: &HeaderMap) -> Result<Option<Coding>, ()> {
    let mut found = None;
    for v in headers.get_all(header::CONTENT_ENCODING) {
        let v = v.to_str().map_err(|_| ())?;
        for tok in v.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            match Coding::from_token(tok.as_bytes()) {
                Some(Coding::Identity) => {}
                Some(c) if found.is_none() => found = Some(c),
                _ => return Err(()),
            }
        }
    }
    Ok(found)
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
        h.insert(header::IF_MODIFIED_SINCE, crate::hit::http_date(t));
    }
}

/// The record after a 304: the stored head updated with the 304's fields and timing
/// recomputed from the merged head (RFC 9111 §4.3.4).
fn refreshed(
    ctx: &Ctx,
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
    let cc = CacheControl::for_response(&merged, &ctx.storage.targeted_fields);
    let timing = StoredTiming::new(
        status,
        &merged,
        &cc,
        request_time,
        response_time,
        &ctx.storage.heuristic,
    );
    let mut meta = build_meta(status, &merged, &timing, old.meta.tags.clone());
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

async fn store_record_blocking(ctx: &Arc<Ctx>, spec: &FillSpec, rec: ObjectRecord) -> FillResult {
    let ctx = ctx.clone();
    // A revalidation fill is registered under the key its stale record was found at.
    let key = spec.fill_key.clone();
    tokio::task::spawn_blocking(move || {
        // The same bodies under the refreshed head: copied from the entry being
        // replaced, if it is still the same version.
        let Some(h) = ctx.store.get(&key) else {
            return FillResult::Rejected;
        };
        match object::decode(h.meta()) {
            Some(object::Record::Object(old)) if old.id == rec.id => {
                put_record(&ctx, &key, &rec, h.body())
            }
            _ => FillResult::Rejected,
        }
    })
    .await
    .unwrap_or(FillResult::Failed)
}

/// Everything needed to store a complete response.
#[derive(Debug)]
struct StorePlan {
    url: String,
    primary_key: Vec<u8>,
    record_key: Vec<u8>,
    vary: VaryFields,
    status: StatusCode,
    headers: HeaderMap,
    request_time: SystemTime,
    response_time: SystemTime,
}

/// Compresses and stores a complete response (blocking: run on the blocking pool).
fn store_response(ctx: &Arc<Ctx>, p: StorePlan, body: Bytes) -> FillResult {
    let limit = usize::try_from(ctx.object_limit).unwrap_or(usize::MAX);
    let sent_coding = origin_coding(&p.headers).unwrap_or(None);
    let identity: Bytes = match sent_coding {
        None => body,
        Some(c) => match compress::decode(c, &body, limit) {
            Ok(v) => Bytes::from(v),
            Err(e) => {
                tracing::info!(url = %p.url, error = %e, "origin body does not decode; not stored");
                return FillResult::NotStorable;
            }
        },
    };
    let mut bodies: Vec<(Coding, Bytes)> = vec![(Coding::Identity, identity.clone())];
    if identity.len() >= compress::MIN_COMPRESS_BYTES
        && compress::compressible(p.headers.get(header::CONTENT_TYPE))
    {
        for &c in &ctx.codings {
            match compress::encode(c, &identity, &ctx.levels) {
                Ok(enc) if compress::worth_keeping(identity.len(), enc.len()) => {
                    bodies.push((c, Bytes::from(enc)));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(coding = %c, error = %e, "compression failed"),
            }
        }
    }
    // All codings go into one entry: drop the least useful ones (last added) while
    // the whole is over the object limit; identity alone must fit.
    let limit = ctx.object_limit as usize;
    while bodies.len() > 1 && bodies.iter().map(|(_, b)| b.len()).sum::<usize>() > limit {
        bodies.pop();
    }
    let id: u64 = rand::random();
    let cc = CacheControl::for_response(&p.headers, &ctx.storage.targeted_fields);
    let timing = StoredTiming::new(
        p.status,
        &p.headers,
        &cc,
        p.request_time,
        p.response_time,
        &ctx.storage.heuristic,
    );
    let mut meta = build_meta(p.status, &p.headers, &timing, surrogate_keys(&p.headers));
    if sent_coding.is_some() {
        // The origin's tag named its compressed bytes, not these.
        meta.etag = meta.etag.map(|e| {
            if e.starts_with("W/") {
                e
            } else {
                format!("W/{e}")
            }
        });
    }
    meta.body_len = identity.len() as u64;
    meta.variant_key_hash = key::key_hash(&p.record_key);
    meta.vary = p
        .vary
        .fields()
        .iter()
        .filter_map(|f| HeaderName::from_bytes(f.as_bytes()).ok())
        .collect();
    if p.vary.accept_encoding() {
        meta.vary.push(header::ACCEPT_ENCODING);
    }
    let rec = ObjectRecord {
        id,
        url: p.url.clone(),
        codings: bodies.iter().map(|(c, b)| (*c, b.len() as u64)).collect(),
        meta,
    };
    let mut all = Vec::with_capacity(rec.bodies_len() as usize);
    for (_, b) in &bodies {
        all.extend_from_slice(b);
    }
    let result = put_record(ctx, &p.record_key, &rec, &all);
    if result == FillResult::Stored && rec.coding_range(Coding::Br).is_some() {
        Recompressor::schedule(ctx, p.record_key.clone(), id, identity.clone());
    }
    if result == FillResult::Stored && !p.vary.is_empty() {
        let bytes = object::encode_vary(&p.vary);
        let tag = object::url_tag(&p.url);
        let _ = ctx
            .store
            .put_admitted(&p.primary_key, &bytes, &[], &[tag.as_bytes()]);
    }
    result
}

/// Writes a record with its tags and the bodies of its codings (concatenated in the
/// record's order) as one entry.
pub fn put_record(ctx: &Ctx, key: &[u8], rec: &ObjectRecord, bodies: &[u8]) -> FillResult {
    debug_assert_eq!(bodies.len() as u64, rec.bodies_len());
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

/// The stored head: status, the fields kept (see [`NOT_STORED`]), timing,
/// validators, tags.
fn build_meta(
    status: StatusCode,
    headers: &HeaderMap,
    timing: &StoredTiming,
    tags: Vec<String>,
) -> StoredMeta {
    let kept = headers
        .iter()
        .filter(|(n, _)| !NOT_STORED.contains(&n.as_str()))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    let mut meta = StoredMeta {
        status: status.as_u16(),
        headers: kept,
        request_time_ms: 0,
        response_time_ms: 0,
        date_ms: 0,
        age_at_store_ms: 0,
        freshness_lifetime_ms: None,
        stale_while_revalidate_ms: None,
        stale_if_error_ms: None,
        flags: Default::default(),
        etag: headers
            .get(header::ETAG)
            .and_then(|v| v.to_str().ok())
            .filter(|e| e.len() <= quire_http::meta::ETAG_BYTES_MAX)
            .map(str::to_owned),
        last_modified_secs: headers
            .get(header::LAST_MODIFIED)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_secs()).ok()),
        content_encoding: None,
        body_len: 0,
        variant_key_hash: 0,
        vary: Vec::new(),
        tags,
    };
    meta.set_timing(timing);
    meta
}

/// Surrogate keys from `Surrogate-Key` (space-separated) and `Cache-Tag`
/// (comma-separated): visible ASCII only, de-duplicated, bounded.
pub fn surrogate_keys(headers: &HeaderMap) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let mut add = |k: &str| {
        if !k.is_empty()
            && k.len() <= SURROGATE_KEY_BYTES_MAX
            && k.bytes().all(|b| b.is_ascii_graphic())
            && keys.len() < SURROGATE_KEYS_MAX
            && !keys.iter().any(|x| x == k)
        {
            keys.push(k.to_owned());
        }
    };
    for v in headers.get_all("surrogate-key") {
        if let Ok(v) = v.to_str() {
            v.split_ascii_whitespace().for_each(&mut add);
        }
    }
    for v in headers.get_all("cache-tag") {
        if let Ok(v) = v.to_str() {
            v.split(',').map(str::trim).for_each(&mut add);
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surrogate_keys_are_parsed_and_bounded() {
        let mut h = HeaderMap::new();
        h.append("surrogate-key", "a b  c".parse().unwrap());
        h.append("cache-tag", "c, d,,e".parse().unwrap());
        assert_eq!(surrogate_keys(&h), vec!["a", "b", "c", "d", "e"]);
        let mut h = HeaderMap::new();
        let many: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
        h.insert("surrogate-key", many.join(" ").parse().unwrap());
        assert_eq!(surrogate_keys(&h).len(), SURROGATE_KEYS_MAX);
        let mut h = HeaderMap::new();
        h.insert("surrogate-key", "x".repeat(300).parse().unwrap());
        assert!(surrogate_keys(&h).is_empty());
    }

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

    #[test]
    fn origin_codings_are_classified() {
        let mut h = HeaderMap::new();
        assert_eq!(origin_coding(&h), Ok(None));
        h.insert(header::CONTENT_ENCODING, "gzip".parse().unwrap());
        assert_eq!(origin_coding(&h), Ok(Some(Coding::Gzip)));
        h.insert(header::CONTENT_ENCODING, "deflate".parse().unwrap());
        assert_eq!(origin_coding(&h), Err(()));
        h.insert(header::CONTENT_ENCODING, "gzip, br".parse().unwrap());
        assert_eq!(origin_coding(&h), Err(()));
    }
}
