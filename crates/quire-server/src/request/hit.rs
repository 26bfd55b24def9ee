//! The hit path: a stored record and a request in, a response out. A lookup, a
//! header copy and the body handed to the socket from the mapping.
//!
//! Key decisions:
//! - **The coding is chosen first**, from the stored ones by `Accept-Encoding`
//!   (q-values, `identity;q=0`, absent header); validators and ranges then apply to
//!   that representation (RFC 9110 §8.8.3, §14): a coding quire derived carries the
//!   origin's `ETag` weakened (`W/"..."`), since its bytes differ from the identity
//!   body the origin's strong tag names. Weak comparison (`If-None-Match`) still
//!   matches; `If-Range` (strong only) then serves the whole body, never a mix.
//! - **The stored `Date` is kept**, `Age` is computed (RFC 9111 §4.2.3, §5.1), and
//!   `Cache-Status` is appended after any upstream members (RFC 9211 §2).
//! - 304 answers carry only the fields RFC 9110 §15.4.5 lists.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Response, StatusCode};
use quire_http::conditional::{self, Precondition, RangeAnswer};
use quire_http::dictionary;
use quire_http::encoding::{self, Coding};
use quire_http::freshness::StoredTiming;
use quire_http::key::VaryFields;
use quire_http::status::CacheStatus;
use quire_store::Handle;

use crate::cache::object::{self, ObjectRecord, Record};
use crate::http1::h1;
use crate::request::body::{self, Body};

/// What serving a record needs from the request.
#[derive(Debug)]
pub(crate) struct HitRequest<'a> {
    /// GET or HEAD.
    pub method: &'a Method,
    /// The client's fields.
    pub headers: &'a HeaderMap,
}

/// Why a record could not be served from the store.
#[derive(Debug, PartialEq, Eq)]
pub enum NotServed {
    /// The request's preconditions are the origin's to evaluate (`If-Match`, ...).
    Forward,
    /// The chosen body is no longer stored (evicted): refill.
    BodyGone,
}

/// The `Cache-Status` upstream caches wrote, kept with the stored head.
const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");

/// A stored record made ready to serve: decoded once and kept in [`Records`], so a
/// hit copies a header map instead of parsing the record.
#[derive(Debug)]
pub struct Prepared {
    /// The record.
    pub rec: ObjectRecord,
    /// The stored fields as served (upstream `Cache-Status` set apart, `Date` and
    /// `Vary` in place).
    headers: HeaderMap,
    /// Upstream caches' `Cache-Status` lines.
    upstream: Vec<HeaderValue>,
    available: Vec<Coding>,
    /// `available` less `dcz`, for a request without the dictionary.
    without_dcz: Vec<Coding>,
    last_modified: Option<SystemTime>,
    date: SystemTime,
    /// `headers` serialised as HTTP/1.1 field lines, for the fast path.
    head_block: Vec<u8>,
    /// The subset a 304 carries, serialised likewise.
    head_block_304: Vec<u8>,
    /// The `ETag` of each stored coding ([`variant_etag`]), computed once.
    etags: Vec<(Coding, Option<String>)>,
    /// The record's timing as `quire_http` reads it, converted once.
    timing: StoredTiming,
    /// The dictionary a stored `dcz` body names, read from the body the first time
    /// a request could take it (`None` inside: no `dcz`, or an unreadable one).
    dcz: std::sync::OnceLock<Option<dictionary::Hash>>,
    /// This version has neither brotli nor zstd, and no read has asked for them yet
    /// ([`crate::fill::deferred`]).
    codings_unasked: std::sync::atomic::AtomicBool,
}

/// The representation a request gets, and the per-response fields that go with it.
#[derive(Debug)]
pub struct Variant<'a> {
    /// The chosen coding.
    pub coding: Coding,
    /// Its body length.
    pub body_len: u64,
    /// Where its body starts in the entry's body section.
    pub start: u64,
    /// Its `ETag`.
    pub etag: Option<&'a str>,
    /// `Age` in seconds.
    pub age_secs: u64,
    /// quire's `Cache-Status` member (with `ttl`).
    status: CacheStatus,
    /// Upstream caches' `Cache-Status` lines, which go before quire's member.
    upstream: &'a [HeaderValue],
}

impl Variant<'_> {
    /// The full `Cache-Status` value (upstream members, then quire's).
    pub fn cache_status(&self) -> HeaderValue {
        self.status.append_to_lines(self.upstream)
    }
}

impl Prepared {
    /// Chooses the coding for `req_headers` (`Accept-Encoding` with q-values; when
    /// nothing stored is acceptable, RFC 9110 §12.5.3 lets a server send identity
    /// anyway, which beats a 406 for a page) and computes the per-response fields.
    pub fn variant(
        &self,
        req_headers: &HeaderMap,
        entry: &Handle,
        status: CacheStatus,
        now: SystemTime,
    ) -> Result<Variant<'_>, NotServed> {
        self.variant_in(self.coding_for(req_headers, entry)?, status, now)
    }

    /// The coding [`Prepared::variant`] serves to `req_headers`, from the codings
    /// stored in `entry` (the entry this record was read from). A `dcz` body is
    /// offered only to a request whose `Available-Dictionary` names the dictionary
    /// it was made with (RFC 9842 §2.2), and that lists `dcz`.
    pub fn coding_for(&self, req_headers: &HeaderMap, entry: &Handle) -> Result<Coding, NotServed> {
        let accept = encoding::parse_accept_encoding(req_headers);
        let offered: &[Coding] = match self.available.contains(&Coding::Dcz) {
            true if accept.lists(Coding::Dcz)
                && dictionary::available(req_headers)
                    .is_some_and(|h| self.dcz_in(entry) == Some(h)) =>
            {
                &self.available
            }
            true => &self.without_dcz,
            false => &self.available,
        };
        encoding::choose(&accept, offered, &encoding::DEFAULT_PREFS)
            .or_else(|| {
                self.available
                    .contains(&Coding::Identity)
                    .then_some(Coding::Identity)
            })
            // Never a `dcz` body the request was not offered.
            .or_else(|| offered.first().copied())
            .ok_or(NotServed::BodyGone)
    }

    /// The dictionary the `dcz` body in `entry` names.
    fn dcz_in(&self, entry: &Handle) -> Option<dictionary::Hash> {
        use quire_store::EntryRef;
        *self.dcz.get_or_init(|| {
            let (start, end) = self.rec.coding_range(Coding::Dcz)?;
            if entry.body().len() as u64 != self.rec.bodies_len() {
                return None;
            }
            let body = entry
                .body()
                .get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)?;
            dictionary::dcz_hash(body)
        })
    }

    /// The representation in `coding` (one [`Prepared::coding_for`] chose) and its
    /// per-response fields at `now`.
    pub fn variant_in(
        &self,
        coding: Coding,
        status: CacheStatus,
        now: SystemTime,
    ) -> Result<Variant<'_>, NotServed> {
        let (start, end) = self.rec.coding_range(coding).ok_or(NotServed::BodyGone)?;
        let body_len = end - start;
        let etag = self.etag_of(coding);
        let timing = &self.timing;
        let status = if status.hit {
            status.with_ttl(ttl_secs(timing, now))
        } else {
            status
        };
        Ok(Variant {
            coding,
            body_len,
            start,
            etag,
            age_secs: timing.age(now).as_secs(),
            status,
            upstream: &self.upstream,
        })
    }

    /// Whether this read is the first to ask for this version's slow codings
    /// ([`crate::fill::deferred`]); marks them asked. One load on every hit after.
    pub(crate) fn ask_codings(&self) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        self.codings_unasked.load(Relaxed) && self.codings_unasked.swap(false, Relaxed)
    }

    /// Lets a later read ask again (the pool refused the job).
    pub(crate) fn ask_codings_again(&self) {
        self.codings_unasked
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The stored fields as HTTP/1.1 field lines (`name: value\r\n` each).
    pub fn head_block(&self) -> &[u8] {
        &self.head_block
    }

    /// The fields of a 304 as HTTP/1.1 field lines.
    pub fn head_block_304(&self) -> &[u8] {
        &self.head_block_304
    }

    /// The preconditions of `req_headers` against `v` (RFC 9110 §13.2.2), with the
    /// stored `Last-Modified` or, lacking one, `Date` (RFC 9111 §4.3.2).
    pub fn precondition(
        &self,
        method: &Method,
        req_headers: &HeaderMap,
        v: &Variant<'_>,
    ) -> Precondition {
        self.precondition_in(method, req_headers, v.coding)
    }

    /// [`Prepared::precondition`] for the representation in `coding`.
    pub fn precondition_in(
        &self,
        method: &Method,
        req_headers: &HeaderMap,
        coding: Coding,
    ) -> Precondition {
        conditional::evaluate_preconditions(
            method,
            req_headers,
            self.etag_of(coding),
            self.last_modified.or(Some(self.date)),
        )
    }

    /// The `ETag` of the representation in `coding`.
    fn etag_of(&self, coding: Coding) -> Option<&str> {
        self.etags
            .iter()
            .find(|(c, _)| *c == coding)
            .and_then(|(_, e)| e.as_deref())
    }

    /// The stored response's timing (freshness, age inputs, flags).
    pub fn timing(&self) -> &StoredTiming {
        &self.timing
    }

    /// Upstream caches' `Cache-Status` lines.
    pub(crate) fn upstream(&self) -> &[HeaderValue] {
        &self.upstream
    }

    /// The stored status.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.rec.meta.status).unwrap_or(StatusCode::OK)
    }

    /// Bytes `from..to` of `v`'s body in `entry` (the store entry this record was
    /// read from), without copying.
    pub fn body(
        &self,
        entry: &Arc<Handle>,
        v: &Variant<'_>,
        from: u64,
        to: u64,
    ) -> Result<Bytes, NotServed> {
        use quire_store::EntryRef;
        if entry.body().len() as u64 != self.rec.bodies_len() || to > v.body_len || from > to {
            return Err(NotServed::BodyGone);
        }
        Ok(body::mapped(entry.clone(), v.start + from, v.start + to))
    }

    /// The body of `fixed` in the entry's body section, without copying. (Reads
    /// only `fixed` and the entry: not this record, whose coding list a hit need not
    /// bring into the CPU's cache.)
    pub(crate) fn body_at(
        entry: body::Pinned,
        fixed: &FixedHead,
    ) -> Result<body::Mapped<body::Pinned>, NotServed> {
        use quire_store::EntryRef;
        use std::borrow::Borrow;
        let held: &Handle = entry.borrow();
        if held.body().len() as u64 != fixed.bodies_len {
            return Err(NotServed::BodyGone);
        }
        let end = fixed.start + fixed.body_len;
        Ok(body::Mapped::new(entry, fixed.start, end))
    }

    /// Prepares `rec` for serving.
    pub fn new(rec: ObjectRecord) -> Prepared {
        let m = &rec.meta;
        let mut headers = HeaderMap::with_capacity(m.headers.len() + 8);
        let mut upstream = Vec::new();
        for (n, v) in &m.headers {
            if n == CACHE_STATUS {
                upstream.push(v.clone());
            } else {
                headers.append(n.clone(), v.clone());
            }
        }
        let timing = m.timing();
        let date = timing.date;
        if !headers.contains_key(header::DATE) {
            headers.insert(header::DATE, http_date(date));
        }
        // The origin's `Vary` lines as sent; `Accept-Encoding` added when the coding
        // served depends on it.
        if rec.codings.len() > 1 {
            add_vary_accept_encoding(&mut headers);
        }
        if rec.coding_range(Coding::Dcz).is_some() {
            // RFC 9842 §6.2: the dictionary a client holds picks the representation.
            headers.append(
                header::VARY,
                HeaderValue::from_static("Available-Dictionary"),
            );
        }
        headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
        let last_modified = m
            .last_modified_secs
            .and_then(|s| u64::try_from(s).ok())
            .map(|s| UNIX_EPOCH + Duration::from_secs(s));
        let line = |block: &mut Vec<u8>, n: &HeaderName, v: &HeaderValue| {
            block.extend_from_slice(n.as_str().as_bytes());
            block.extend_from_slice(b": ");
            block.extend_from_slice(v.as_bytes());
            block.extend_from_slice(b"\r\n");
        };
        let mut head_block = Vec::with_capacity(512);
        // A 304 carries only what RFC 9110 §15.4.5 lists (as `not_modified_headers`).
        let mut head_block_304 = Vec::with_capacity(256);
        for (n, v) in &headers {
            line(&mut head_block, n, v);
            if conditional::is_not_modified_header(n, m.etag.is_some()) {
                line(&mut head_block_304, n, v);
            }
        }
        let etags = rec
            .codings
            .iter()
            .map(|&(c, _)| {
                let e = variant_etag(m.etag.as_deref(), c, m.content_encoding.as_deref());
                (c, e)
            })
            .collect();
        let available = rec.available();
        let slow = available.contains(&Coding::Br) || available.contains(&Coding::Zstd);
        let unasked = !slow && available.contains(&Coding::Identity);
        Prepared {
            codings_unasked: std::sync::atomic::AtomicBool::new(unasked),
            without_dcz: available
                .iter()
                .copied()
                .filter(|&c| c != Coding::Dcz)
                .collect(),
            available,
            dcz: std::sync::OnceLock::new(),
            head_block,
            head_block_304,
            etags,
            timing,
            headers,
            upstream,
            last_modified,
            date,
            rec,
        }
    }
}

/// What the store's record bytes decode to, prepared.
#[derive(Debug, Clone)]
pub enum Cached {
    /// The URL varies on these fields.
    Vary(Arc<VaryFields>),
    /// A response ready to serve.
    Object(Arc<Prepared>),
}

/// Decoded records by content hash. Content-addressed, so never stale: a record
/// rewritten (refill, 304, soft purge) has other bytes and another hash; old ones
/// age out. Lookups take a shard's read lock only; inserts happen on the first hit
/// of each record version.
#[derive(Debug)]
pub struct Records {
    cache: quick_cache::sync::Cache<u64, Cached>,
}

impl Records {
    /// A cache of about `entries` records.
    pub fn new(entries: usize) -> Records {
        Records {
            cache: quick_cache::sync::Cache::new(entries.max(16)),
        }
    }

    /// The record behind `meta` (a store entry's meta bytes), decoded once.
    pub fn get(&self, meta: &[u8]) -> Option<Cached> {
        self.get_identified(meta).map(|(_, c)| c)
    }

    /// [`Records::get`], with the record's identity ([`object::identity`]), which a
    /// later look at the same key compares to know it still holds this record.
    pub fn get_identified(&self, meta: &[u8]) -> Option<(u64, Cached)> {
        let h = object::identity(meta);
        if let Some(c) = self.cache.get(&h) {
            return Some((h, c));
        }
        let c = match object::decode(meta)? {
            Record::Vary(v) => Cached::Vary(Arc::new(v)),
            Record::Object(o) => Cached::Object(Arc::new(Prepared::new(*o))),
        };
        self.cache.insert(h, c.clone());
        Some((h, c))
    }
}

/// Serves `p` to `req` with `status` as quire's `Cache-Status` member.
pub(crate) fn serve(
    req: &HitRequest<'_>,
    p: &Prepared,
    entry: &Arc<Handle>,
    status: CacheStatus,
    now: SystemTime,
) -> Result<Response<Body>, NotServed> {
    let v = p.variant(req.headers, entry, status, now)?;
    let mut h = p.headers.clone();
    if let Some(e) = v.etag.and_then(|e| HeaderValue::from_str(e).ok()) {
        h.insert(header::ETAG, e);
    }
    h.insert(header::AGE, HeaderValue::from(v.age_secs));
    h.insert(CACHE_STATUS, v.cache_status());

    // The validators a 304 is decided on: the variant's ETag, and Last-Modified or
    // (RFC 9111 §4.3.2) the stored Date.
    match p.precondition(req.method, req.headers, &v) {
        Precondition::Forward => return Err(NotServed::Forward),
        Precondition::NotModified => {
            let mut nm = conditional::not_modified_headers(&h);
            for n in [header::AGE, CACHE_STATUS, header::VARY] {
                if let Some(v) = h.get(&n) {
                    nm.insert(n, v.clone());
                }
            }
            return Ok(respond(StatusCode::NOT_MODIFIED, nm, Body::Empty));
        }
        Precondition::Proceed => {}
    }
    if v.coding != Coding::Identity {
        h.insert(
            header::CONTENT_ENCODING,
            HeaderValue::from_static(v.coding.token()),
        );
    } else if let Some(ce) = p
        .rec
        .meta
        .content_encoding
        .as_deref()
        .and_then(|c| HeaderValue::from_str(c).ok())
    {
        // Stored as the origin sent it (a coding quire does not decode).
        h.insert(header::CONTENT_ENCODING, ce);
    }
    // RFC 9110 §14.2: ranges apply to a 200 only; a stored 404 (or any other
    // status) is answered whole, never as a 206 of its error page.
    let range = if p.status() == StatusCode::OK {
        conditional::evaluate_range(
            req.headers,
            req.method,
            v.body_len,
            v.etag,
            p.last_modified,
            Some(p.date),
        )
    } else {
        RangeAnswer::Full
    };
    let out = Ranged {
        p,
        entry,
        v: &v,
        head_only: req.method == Method::HEAD,
    };
    out.answer(range, h)
}

/// A stored representation about to be answered, whole or in ranges.
struct Ranged<'a> {
    p: &'a Prepared,
    entry: &'a Arc<Handle>,
    v: &'a Variant<'a>,
    head_only: bool,
}

impl Ranged<'_> {
    /// The response for `range` (RFC 9110 §14), with the fields `h` so far.
    fn answer(&self, range: RangeAnswer, mut h: HeaderMap) -> Result<Response<Body>, NotServed> {
        let body_len = self.v.body_len;
        match range {
            RangeAnswer::Unsatisfiable => {
                h.insert(
                    header::CONTENT_RANGE,
                    HeaderValue::from_str(&conditional::content_range_unsatisfied(body_len))
                        .unwrap_or(HeaderValue::from_static("bytes */0")),
                );
                h.remove(header::CONTENT_ENCODING);
                h.insert(header::CONTENT_LENGTH, HeaderValue::from(0u64));
                Ok(respond(StatusCode::RANGE_NOT_SATISFIABLE, h, Body::Empty))
            }
            RangeAnswer::Full => {
                h.insert(header::CONTENT_LENGTH, HeaderValue::from(body_len));
                let b = if self.head_only || body_len == 0 {
                    Body::Empty
                } else {
                    Body::Bytes([self.bytes(0, body_len)?].into())
                };
                Ok(respond(self.p.status(), h, b))
            }
            RangeAnswer::Partial(ranges) if ranges.len() == 1 => {
                let (start, end) = ranges[0];
                let range = conditional::content_range(start, end, body_len);
                if let Ok(v) = HeaderValue::from_str(&range) {
                    h.insert(header::CONTENT_RANGE, v);
                }
                h.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start + 1));
                let b = if self.head_only {
                    Body::Empty
                } else {
                    Body::Bytes([self.bytes(start, end + 1)?].into())
                };
                Ok(respond(StatusCode::PARTIAL_CONTENT, h, b))
            }
            RangeAnswer::Partial(ranges) => self.multipart(&ranges, h),
        }
    }

    /// A `multipart/byteranges` answer for several ranges.
    fn multipart(
        &self,
        ranges: &[(u64, u64)],
        mut h: HeaderMap,
    ) -> Result<Response<Body>, NotServed> {
        let ct = h
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let seed = xxhash_rust::xxh3::xxh3_64(&self.p.rec.id.to_le_bytes());
        let plan = conditional::multipart_plan(
            ranges,
            self.v.body_len,
            ct.as_deref(),
            &conditional::boundary_for(seed),
        );
        if let Ok(v) = HeaderValue::from_str(&plan.content_type) {
            h.insert(header::CONTENT_TYPE, v);
        }
        h.insert(
            header::CONTENT_LENGTH,
            HeaderValue::from(plan.content_length),
        );
        let b = if self.head_only {
            Body::Empty
        } else {
            let mut parts = std::collections::VecDeque::with_capacity(plan.parts.len() * 2 + 1);
            for part in plan.parts {
                parts.push_back(Bytes::from(part.head));
                parts.push_back(self.bytes(part.range.0, part.range.1 + 1)?);
            }
            parts.push_back(Bytes::from(plan.trailer));
            Body::Bytes(parts)
        };
        Ok(respond(StatusCode::PARTIAL_CONTENT, h, b))
    }

    /// Bytes `from..to` of the representation's body, from the mapping.
    fn bytes(&self, from: u64, to: u64) -> Result<Bytes, NotServed> {
        self.p.body(self.entry, self.v, from, to)
    }
}

/// The part of a fresh hit's HTTP/1.1 head that does not change with the moment,
/// for the representation in `coding`, and where its body lies.
pub(crate) struct FixedHead {
    /// The status line and the stored fields, `ETag`, `Content-Encoding` and
    /// `Content-Length`; for a 304, the fields RFC 9110 §15.4.5 lists and `ETag`
    /// (as [`serve`] answers a matching precondition). No blank line.
    pub(crate) bytes: Vec<u8>,
    /// Where the body starts in the entry's body section.
    pub(crate) start: u64,
    /// Its length.
    pub(crate) body_len: u64,
    /// The length of the whole body section its record was stored with (an entry
    /// of another length is not this record's).
    pub(crate) bodies_len: u64,
}

/// The [`FixedHead`] of `p` in `coding`, a 304's when `not_modified`.
pub(crate) fn fixed_head(
    p: &Prepared,
    coding: Coding,
    not_modified: bool,
) -> Result<FixedHead, NotServed> {
    let (start, end) = p.rec.coding_range(coding).ok_or(NotServed::BodyGone)?;
    let body_len = end - start;
    let mut out = Vec::with_capacity(p.head_block.len() + 128);
    if not_modified {
        h1::status_line(&mut out, StatusCode::NOT_MODIFIED);
        out.extend_from_slice(p.head_block_304());
    } else {
        h1::status_line(&mut out, p.status());
        out.extend_from_slice(p.head_block());
    }
    if let Some(e) = p.etag_of(coding) {
        h1::field(&mut out, "etag", e.as_bytes());
    }
    if !not_modified {
        if coding != Coding::Identity {
            h1::field(&mut out, "content-encoding", coding.token().as_bytes());
        } else if let Some(ce) = &p.rec.meta.content_encoding {
            h1::field(&mut out, "content-encoding", ce.as_bytes());
        }
        h1::number_field(&mut out, "content-length", body_len);
    }
    Ok(FixedHead {
        bytes: out,
        start,
        body_len,
        bodies_len: p.rec.bodies_len(),
    })
}

/// The fields of a fresh hit's HTTP/1.1 head that change with the moment, appended
/// to `out`: `Age`, and `Cache-Status` (upstream members, then `status` with its
/// `ttl` now).
pub(crate) fn write_moment(
    out: &mut Vec<u8>,
    (timing, upstream): (&StoredTiming, &[HeaderValue]),
    status: &CacheStatus,
    now: SystemTime,
) {
    // (One age for both fields.)
    let age = timing.age(now);
    h1::number_field(out, "age", age.as_secs());
    out.extend_from_slice(b"cache-status: ");
    let status = status.clone();
    let status = if status.hit {
        status.with_ttl(ttl_at_age(timing, age))
    } else {
        status
    };
    status.write_after(upstream, out);
    out.extend_from_slice(b"\r\n");
}

fn respond(status: StatusCode, headers: HeaderMap, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    *r.headers_mut() = headers;
    r
}

/// The `ETag` of the `coding` representation: the origin's for the body it sent,
/// weakened for a coding quire derived from it.
pub(crate) fn variant_etag(
    origin: Option<&str>,
    coding: Coding,
    stored_as: Option<&str>,
) -> Option<String> {
    let e = origin?;
    let as_sent = match stored_as {
        None => coding == Coding::Identity,
        Some(c) => Coding::from_token(c.as_bytes()) == Some(coding),
    };
    if as_sent || e.starts_with("W/") {
        Some(e.to_owned())
    } else {
        Some(format!("W/{e}"))
    }
}

/// Appends `Vary: Accept-Encoding` unless a `Vary` line already names it (or is
/// `*`): the origin's own lines stay as they were sent.
pub(crate) fn add_vary_accept_encoding(h: &mut HeaderMap) {
    let named = h.get_all(header::VARY).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .map(str::trim)
                .any(|n| n == "*" || n.eq_ignore_ascii_case("accept-encoding"))
        })
    });
    if !named {
        h.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// Remaining freshness in whole seconds, negative when stale (RFC 9211 §2.4).
pub(crate) fn ttl_secs(t: &quire_http::freshness::StoredTiming, now: SystemTime) -> i64 {
    ttl_at_age(t, t.age(now))
}

/// [`ttl_secs`] of a response whose current age is `age`.
fn ttl_at_age(t: &quire_http::freshness::StoredTiming, age: Duration) -> i64 {
    let lifetime = t.freshness_lifetime.unwrap_or(Duration::ZERO).as_secs() as i64;
    lifetime.saturating_sub(age.as_secs() as i64)
}

/// An HTTP-date header value.
pub(crate) fn http_date(t: SystemTime) -> HeaderValue {
    HeaderValue::from_str(&httpdate::fmt_http_date(t))
        .unwrap_or(HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vary_accept_encoding_is_appended_once() {
        let mut h = HeaderMap::new();
        add_vary_accept_encoding(&mut h);
        assert_eq!(h.get_all(header::VARY).iter().count(), 1);
        let mut h = HeaderMap::new();
        h.append(header::VARY, HeaderValue::from_static("Foo"));
        add_vary_accept_encoding(&mut h);
        let lines: Vec<_> = h.get_all(header::VARY).iter().collect();
        assert_eq!(
            lines,
            ["Foo", "Accept-Encoding"],
            "the origin's line kept as sent"
        );
        let mut h = HeaderMap::new();
        h.append(
            header::VARY,
            HeaderValue::from_static("foo, ACCEPT-ENCODING"),
        );
        add_vary_accept_encoding(&mut h);
        assert_eq!(h.get_all(header::VARY).iter().count(), 1);
    }

    #[test]
    fn derived_codings_weaken_strong_etags() {
        assert_eq!(
            variant_etag(Some("\"a\""), Coding::Identity, None).as_deref(),
            Some("\"a\"")
        );
        assert_eq!(
            variant_etag(Some("\"a\""), Coding::Gzip, None).as_deref(),
            Some("W/\"a\"")
        );
        assert_eq!(
            variant_etag(Some("W/\"a\""), Coding::Br, None).as_deref(),
            Some("W/\"a\"")
        );
        assert_eq!(
            variant_etag(Some("\"a\""), Coding::Gzip, Some("gzip")).as_deref(),
            Some("\"a\""),
            "the origin's own gzip body keeps its tag"
        );
        assert_eq!(variant_etag(None, Coding::Gzip, None), None);
    }
}
