//! Committing a response: from a complete body to an entry in the store, through the
//! compression pool and the invalidation gate.
//!
//! Key decisions:
//! - **A response is a hit as soon as it ends.** The commit makes identity and gzip
//!   only (gzip is the coding nearly every client takes, and libdeflate makes it in
//!   about a millisecond for a 50 KB page); brotli and zstd are added to the entry in
//!   the background ([`crate::fill::recompress`]) once it is read again
//!   ([`crate::fill::deferred`]). Past the compression budget the entry is
//!   committed in identity alone.
//! - **Every write passes the invalidation gate** ([`crate::cache::invalidate`]) with the
//!   fill's start in the log and the response's tags: a response a purge overtook is
//!   not written (hard) or written already stale (soft). The URL's `Vary` record is
//!   written inside the same gate as the variant it points to.
//! - **The store write runs on tokio's blocking pool**: a put may reclaim a region
//!   inline. It never runs on a request's worker.
//! - A body the origin sent compressed (gzip, br, zstd) is decoded on the
//!   compression pool (bounded by the object limit) and stored like any other; its
//!   `ETag` is kept weak, since quire's identity bytes are not the representation the
//!   origin's tag named. Other codings are not stored.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName};
use http::StatusCode;
use quire_http::cache_control::CacheControl;
use quire_http::encoding::Coding;
use quire_http::freshness::{self, StoredTiming};
use quire_http::key::{self, VaryFields};
use quire_http::meta::StoredMeta;

use crate::cache::invalidate::{Tags, Verdict};
use crate::cache::object::{self, ObjectRecord};
use crate::cache::put::{make_stale, put_record};
use crate::fill::compress;
use crate::fill::compress_pool::Priority;
use crate::fill::recompress;
use crate::metrics::FillResult;
use crate::policy::Policy;
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

/// Most surrogate keys kept per response, and their longest length.
const SURROGATE_KEYS_MAX: usize = 64;
const SURROGATE_KEY_BYTES_MAX: usize = 256;

/// Everything needed to store a complete response.
#[derive(Debug, Clone)]
pub(crate) struct StorePlan {
    /// The normalised URL.
    pub url: String,
    /// Where the URL's primary record lives.
    pub primary_key: Vec<u8>,
    /// Where this response's record goes (the primary key, or a variant key).
    pub record_key: Vec<u8>,
    /// The response's `Vary`.
    pub vary: VaryFields,
    /// Origin status.
    pub status: StatusCode,
    /// Origin headers.
    pub headers: HeaderMap,
    /// When the request went out.
    pub request_time: SystemTime,
    /// When the head came back.
    pub response_time: SystemTime,
    /// The fill's start in the invalidation log.
    pub start: u64,
    /// The tags the record carries (URL, directories, surrogate keys).
    pub tags: Tags,
    /// The policy of the request that started the fill.
    pub policy: Arc<Policy>,
}

/// The bodies a commit stores: identity, and gzip when it was made.
struct Coded {
    identity: Bytes,
    gzip: Option<Vec<u8>>,
}

/// Stores a complete response: decodes and compresses it on the pool, then writes
/// it through the invalidation gate. On success, schedules the other codings.
/// Returns what became of it, and the stored record's id.
pub(crate) async fn commit(
    ctx: &Arc<Ctx>,
    plan: StorePlan,
    body: Bytes,
) -> (FillResult, Option<u64>) {
    let coded = match encode(ctx, &plan, body).await {
        Ok(c) => c,
        Err(r) => return (r, None),
    };
    let identity = coded.identity.clone();
    let ctx2 = ctx.clone();
    let plan2 = plan.clone();
    // A page of a `[dictionaries]` host names its host's dictionary (and is made
    // `dcz` against that one later), unless the upstream has its own for it.
    let cfg = &plan.policy.cfg.dictionaries;
    let (own, made) = recompress::page_dictionaries(ctx, cfg, &plan.url, &plan.headers);
    let link = made
        .as_ref()
        .map(|m| quire_http::dictionary::link(&m.path()));
    let asset = asset_field(&plan);
    let added = Added {
        link,
        asset: asset.clone(),
    };
    let written = tokio::task::spawn_blocking(move || write(&ctx2, &plan2, coded, added)).await;
    let (result, id) = match written {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "store task failed");
            return (FillResult::Failed, None);
        }
    };
    if result == FillResult::Stored {
        let dictionary = recompress::dcz_dictionary(ctx, (own, made), &plan.url, &plan.headers);
        if plan.status == StatusCode::OK {
            learn(ctx, &plan, asset, &identity);
        }
        let later = recompress::Later {
            key: plan.record_key,
            id,
            compressible: wants_codings(&plan.headers, 0),
            dictionary,
            start: plan.start,
            tags: plan.tags,
        };
        recompress::defer(ctx, later, identity.len());
        return (result, Some(id));
    }
    (result, None)
}

/// What a stored `200` teaches: an origin's own dictionary
/// ([`crate::fill::dictionaries`]), or a page of its host's next one
/// ([`crate::fill::host_dictionaries`], made on the blocking pool when due).
fn learn(ctx: &Arc<Ctx>, plan: &StorePlan, asset: Option<String>, identity: &Bytes) {
    let cfg = &plan.policy.cfg;
    let response = (plan.url.as_str(), &plan.headers);
    ctx.dictionaries
        .learn(&cfg.encodings, response, asset.as_deref(), identity);
    let hosts = &ctx.host_dictionaries;
    if let Some((host, pages)) =
        hosts.observe(&cfg.dictionaries, &plan.url, &plan.headers, identity)
    {
        let max = usize::try_from(cfg.dictionaries.max_bytes.0).unwrap_or(usize::MAX);
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || {
            let made = crate::fill::host_dictionaries::make(&pages, max);
            if let Some(m) = &made {
                tracing::info!(host = %host, pages = pages.len(), bytes = m.dictionary.bytes().len(), "compression dictionary made");
            }
            ctx.host_dictionaries.install(host, made);
        });
    }
}

/// Fields quire adds to a stored response: the `Link` to its host's dictionary, and
/// `Use-As-Dictionary` for a configured asset.
struct Added {
    link: Option<String>,
    asset: Option<String>,
}

/// The `Use-As-Dictionary` a `200` gets from `[dictionaries] assets`, when it names
/// no dictionary itself.
fn asset_field(plan: &StorePlan) -> Option<String> {
    let h = &plan.headers;
    if plan.status != StatusCode::OK || h.contains_key(quire_http::dictionary::USE_AS_DICTIONARY) {
        return None;
    }
    let ct = h
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    plan.policy.cfg.dictionaries.asset_field(&plan.url, ct)
}

/// Whether a body of `len` bytes (0: unknown yet) with these headers gets codings.
fn wants_codings(headers: &HeaderMap, len: usize) -> bool {
    (len == 0 || len >= compress::MIN_COMPRESS_BYTES)
        && compress::compressible(headers.get(header::CONTENT_TYPE))
}

/// Identity (decoded when the origin sent a coding) and gzip, made on the pool.
async fn encode(ctx: &Arc<Ctx>, plan: &StorePlan, body: Bytes) -> Result<Coded, FillResult> {
    let limit = usize::try_from(plan.policy.object_limit).unwrap_or(usize::MAX);
    let sent = origin_coding(&plan.headers).unwrap_or(None);
    let gzip = plan.policy.codings.contains(&Coding::Gzip) && wants_codings(&plan.headers, 0);
    let levels = plan.policy.levels;
    let url = plan.url.clone();
    let cost = body.len() as u64;
    let kept = body.clone();
    let ctx2 = ctx.clone();
    let job = move || -> Result<Coded, FillResult> {
        let identity = match sent {
            None => body,
            Some(c) => match compress::decode(c, &body, limit) {
                Ok(v) => Bytes::from(v),
                Err(e) => {
                    tracing::info!(url = %url, error = %e, "origin body does not decode; not stored");
                    return Err(FillResult::NotStorable);
                }
            },
        };
        let gzip = (gzip && identity.len() >= compress::MIN_COMPRESS_BYTES)
            .then(|| {
                let levels = ctx2.compress.levels_for(levels, identity.len());
                compress::encode(Coding::Gzip, &identity, &levels).ok()
            })
            .flatten()
            .filter(|g| compress::worth_keeping(identity.len(), g.len()));
        Ok(Coded { identity, gzip })
    };
    match ctx.compress.run(Priority::Commit, cost, job).await {
        Some(r) => r,
        // Past the budget: identity now; the background job adds the codings if
        // the budget allows by then.
        None if sent.is_none() => Ok(Coded {
            identity: kept,
            gzip: None,
        }),
        None => {
            tracing::info!(url = %plan.url, "compression budget full; a coded origin body is not stored");
            Err(FillResult::Rejected)
        }
    }
}

/// Builds the record and writes it (with the URL's `Vary` record) through the
/// invalidation gate. Blocking: run on the blocking pool. Returns what became of it
/// and the record's id.
fn write(ctx: &Ctx, p: &StorePlan, coded: Coded, added: Added) -> (FillResult, u64) {
    let mut bodies: Vec<(Coding, &[u8])> = vec![(Coding::Identity, &coded.identity)];
    if let Some(g) = &coded.gzip {
        bodies.push((Coding::Gzip, g));
    }
    // All codings go into one entry: identity alone must fit.
    let limit = usize::try_from(p.policy.object_limit).unwrap_or(usize::MAX);
    while bodies.len() > 1 && bodies.iter().map(|(_, b)| b.len()).sum::<usize>() > limit {
        bodies.pop();
    }
    let id: u64 = rand::random();
    let mut rec = ObjectRecord {
        id,
        url: p.url.clone(),
        codings: bodies.iter().map(|(c, b)| (*c, b.len() as u64)).collect(),
        meta: response_meta(p, coded.identity.len() as u64),
    };
    let to_add = [
        (header::LINK, added.link),
        (quire_http::dictionary::USE_AS_DICTIONARY, added.asset),
    ];
    for (name, value) in to_add {
        if let Some(v) = value.and_then(|v| http::HeaderValue::from_str(&v).ok()) {
            rec.meta.headers.push((name, v));
        }
    }
    let parts: Vec<&[u8]> = bodies.iter().map(|(_, b)| *b).collect();
    let result = ctx.invalidations.commit(p.start, &p.tags, |v| {
        match v {
            Verdict::Hard => return FillResult::Invalidated,
            Verdict::Soft => make_stale(&mut rec, ctx.clock.now()),
            Verdict::Clean => {}
        }
        let r = put_record(ctx, &p.record_key, &rec, &parts);
        if r == FillResult::Stored && !p.vary.is_empty() {
            let bytes = object::encode_vary(&p.vary);
            let tag = object::url_tag(&p.url);
            let _ = ctx
                .store
                .put_admitted(&p.primary_key, &bytes, &[], &[tag.as_bytes()]);
        }
        r
    });
    (result, id)
}

/// The stored head of a complete response.
fn response_meta(p: &StorePlan, identity_len: u64) -> StoredMeta {
    let cc = CacheControl::for_response(&p.headers, &p.policy.storage.targeted_fields);
    let timing = StoredTiming::new(
        p.status,
        &p.headers,
        &cc,
        p.request_time,
        p.response_time,
        &p.policy.storage.heuristic,
    );
    let mut meta = build_meta(p.status, &p.headers, &timing, surrogate_keys(&p.headers));
    if origin_coding(&p.headers).ok().flatten().is_some() {
        // The origin's tag named its compressed bytes, not these.
        meta.etag = meta.etag.map(|e| {
            if e.starts_with("W/") {
                e
            } else {
                format!("W/{e}")
            }
        });
    }
    meta.body_len = identity_len;
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
    meta
}

/// The coding the origin applied: `Ok(None)` for none, `Ok(Some)` for one quire can
/// decode, `Err` for anything else (several codings, deflate, a dictionary coding,
/// unknown).
pub(crate) fn origin_coding(headers: &HeaderMap) -> Result<Option<Coding>, ()> {
    let mut found = None;
    for v in headers.get_all(header::CONTENT_ENCODING) {
        let v = v.to_str().map_err(|_| ())?;
        for tok in v.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            match Coding::from_token(tok.as_bytes()) {
                Some(Coding::Identity) => {}
                // An origin's dictionary is not quire's to hold.
                Some(Coding::Dcz) => return Err(()),
                Some(c) if found.is_none() => found = Some(c),
                _ => return Err(()),
            }
        }
    }
    Ok(found)
}

/// The stored head: status, the fields kept (see [`NOT_STORED`]), timing,
/// validators, tags.
pub(crate) fn build_meta(
    status: StatusCode,
    headers: &HeaderMap,
    timing: &StoredTiming,
    tags: Vec<String>,
) -> StoredMeta {
    // RFC 9111 §5.2.2.7: the fields a qualified `private="..."` names are the
    // client's alone; a shared cache stores the rest without them (and likewise the
    // fields `no-cache="..."` names, which must not be reused unvalidated).
    let mut shared = headers.clone();
    freshness::strip_private_fields(&mut shared, &CacheControl::from_headers(headers));
    let kept = shared
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
pub(crate) fn surrogate_keys(headers: &HeaderMap) -> Vec<String> {
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
