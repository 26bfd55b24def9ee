//! Storage, freshness, age and reuse policy of quire as a **shared** cache (RFC 9111
//! §3, §4), plus RFC 5861's `stale-while-revalidate` and `stale-if-error`.
//!
//! Every function is pure: time comes in as `SystemTime` arguments (`now`,
//! `request_time`, `response_time`), never from a clock read here.
//!
//! The life of a response, as the server drives it:
//!
//! 1. **Fill.** The origin answers. [`storable`] says whether it may be stored, or why
//!    not (a [`NotStorable`] whose [`detail`](NotStorable::detail) goes into
//!    `Cache-Status`). If it may, the server strips hop-by-hop fields
//!    ([`strip_connection_headers`], [`strip_private_fields`]) and records a
//!    [`StoredTiming`] beside the body.
//! 2. **Hit.** [`reuse`] turns the stored timing, the request's directives and `now`
//!    into a [`Decision`]: serve fresh, serve stale (client allowed it, or
//!    `stale-while-revalidate`), or revalidate with the origin first, with a window in
//!    which a failing origin may be answered with the stale copy (`stale-if-error`).
//! 3. **Revalidation.** A 304 updates the stored head with [`merge_304`] and the timing
//!    is recomputed from the merged head with the new request/response times.
//! 4. **Invalidation.** A non-error response to an unsafe method invalidates the target
//!    URI and its `Location`/`Content-Location` ([`invalidates`],
//!    [`invalidation_locations`]).
//!
//! Key design decision: **no freshness and no validator means no storage.** RFC 9111
//! §3 lets a cache store a 200 that carries nothing, but without a lifetime or a
//! validator it could only ever be refetched in full, and reusing it (Varnish's
//! default TTL) breaks every conformance rule that follows. quire stores a response
//! only with explicit freshness, or with a validator plus heuristic eligibility.

use std::time::{Duration, SystemTime};

use http::header::{
    HeaderMap, HeaderName, AGE, AUTHORIZATION, CONNECTION, CONTENT_ENCODING, CONTENT_LENGTH,
    CONTENT_LOCATION, CONTENT_RANGE, CONTENT_TYPE, DATE, ETAG, EXPIRES, LAST_MODIFIED, LOCATION,
    PROXY_AUTHENTICATE, PROXY_AUTHORIZATION, SET_COOKIE, TE, TRANSFER_ENCODING, UPGRADE, VARY,
};
use http::{HeaderValue, Method, StatusCode};

use crate::cache_control::{CacheControl, Delta, MaxStale, Qualified, Source, CDN_CACHE_CONTROL};

/// Field names listed in `Connection` that are honoured; more is hostile input.
const CONNECTION_NAMES_MAX: usize = 64;

/// Targets named in `Location`/`Content-Location` returned for invalidation.
const INVALIDATION_LOCATIONS_MAX: usize = 8;

/// Why a response is not stored. Each maps to a `detail=` token of `Cache-Status`
/// (RFC 9211 §2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotStorable {
    /// The request method is not one quire caches (GET, HEAD).
    Method,
    /// The status is not final, or not one quire stores (206, 304, or unknown with
    /// `must-understand`).
    Status,
    /// `no-store` in the request or the response.
    NoStore,
    /// `private` (whole response) and storing private responses is not configured.
    Private,
    /// The request carried `Authorization` and the response did not allow sharing.
    Authorization,
    /// `Vary: *`.
    VaryStar,
    /// `Set-Cookie` and storing such responses is not configured.
    SetCookie,
    /// Neither explicit freshness nor a validator with heuristic eligibility.
    NoFreshness,
    /// The cache directives were longer than quire reads.
    HeaderTooLarge,
}

impl NotStorable {
    /// The `detail=` token for `Cache-Status`.
    pub fn detail(&self) -> &'static str {
        match self {
            NotStorable::Method => "method",
            NotStorable::Status => "status",
            NotStorable::NoStore => "no-store",
            NotStorable::Private => "private",
            NotStorable::Authorization => "authorization",
            NotStorable::VaryStar => "vary-star",
            NotStorable::SetCookie => "set-cookie",
            NotStorable::NoFreshness => "no-freshness",
            NotStorable::HeaderTooLarge => "header-too-large",
        }
    }
}

impl std::fmt::Display for NotStorable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.detail())
    }
}

/// Heuristic freshness (RFC 9111 §4.2.2) settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HeuristicConfig {
    /// Share of the time since `Last-Modified` a response stays fresh (RFC 9111 §4.2.2
    /// suggests "no more than some fraction", typically 10 %). Clamped to 0..=1.
    pub fraction: f64,
    /// The longest heuristic lifetime for content types not listed below.
    pub max: Duration,
    /// Longest heuristic lifetime by `Content-Type` prefix (lower case), first match
    /// wins; it replaces [`max`](Self::max) for matching responses.
    pub by_content_type: Vec<(String, Duration)>,
}

impl Default for HeuristicConfig {
    fn default() -> Self {
        HeuristicConfig {
            fraction: 0.1,
            max: Duration::from_secs(24 * 3600),
            by_content_type: vec![
                // Pages change and are cheap to revalidate; assets rarely change.
                ("text/html".to_owned(), Duration::from_secs(10 * 60)),
                ("application/json".to_owned(), Duration::from_secs(60)),
                ("text/css".to_owned(), Duration::from_secs(7 * 24 * 3600)),
                ("image/".to_owned(), Duration::from_secs(7 * 24 * 3600)),
                ("font/".to_owned(), Duration::from_secs(7 * 24 * 3600)),
            ],
        }
    }
}

/// What a shared cache may store (RFC 9111 §3).
#[derive(Debug, Clone, PartialEq)]
pub struct StorageConfig {
    /// Store responses marked `private` (RFC 9111 §5.2.2.7 forbids it for a shared
    /// cache; only for deployments where quire is in effect a private cache).
    pub store_private: bool,
    /// Store responses that carry `Set-Cookie`.
    pub store_set_cookie: bool,
    /// Targeted cache-control fields addressed to quire, highest priority first
    /// (RFC 9213 §2.1). Default: `CDN-Cache-Control`.
    pub targeted_fields: Vec<HeaderName>,
    /// Heuristic freshness settings.
    pub heuristic: HeuristicConfig,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            store_private: false,
            store_set_cookie: false,
            targeted_fields: vec![CDN_CACHE_CONTROL],
            heuristic: HeuristicConfig::default(),
        }
    }
}

/// Stale serving that configuration allows beyond what responses say ("grace").
/// RFC 9111 §4.2.4 permits serving stale "by configuration in accordance with an
/// out-of-band contract"; it never overrides `must-revalidate`, `proxy-revalidate`,
/// `s-maxage` or `no-cache`. Zero by default: RFC behaviour exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReuseConfig {
    /// Minimum `stale-while-revalidate` window for every response.
    pub stale_while_revalidate_grace: Duration,
    /// Minimum `stale-if-error` window for every response.
    pub stale_if_error_grace: Duration,
}

/// Decides whether a response may be stored by a shared cache (RFC 9111 §3).
/// `Ok(())` means store it.
pub fn storable(
    req_method: &Method,
    req_headers: &HeaderMap,
    status: StatusCode,
    resp_headers: &HeaderMap,
    cfg: &StorageConfig,
) -> Result<(), NotStorable> {
    // RFC 9111 §3: "the request method is understood by the cache". quire caches GET
    // and HEAD (RFC 9110 §9.2.3); POST's cacheability needs Content-Location handling
    // nobody uses.
    if req_method != Method::GET && req_method != Method::HEAD {
        return Err(NotStorable::Method);
    }
    let code = status.as_u16();
    // RFC 9111 §3: the status is final; 206 and 304 only when understood, and quire
    // neither combines partial content (§3.4) nor stores a 304 (it updates, §4.3.4).
    if !(200..=599).contains(&code) || code == 206 || code == 304 {
        return Err(NotStorable::Status);
    }
    let req_cc = CacheControl::from_headers(req_headers);
    let cc = CacheControl::for_response(resp_headers, &cfg.targeted_fields);
    if cc.truncated {
        return Err(NotStorable::HeaderTooLarge);
    }
    // RFC 9111 §5.2.2.3: with must-understand, store only a status we understand,
    // and then ignore no-store.
    let understood = status_understood(status);
    if cc.must_understand && !understood {
        return Err(NotStorable::Status);
    }
    // RFC 9111 §5.2.1.5 (request) and §5.2.2.5 (response): no-store.
    if req_cc.no_store || (cc.no_store && !(cc.must_understand && understood)) {
        return Err(NotStorable::NoStore);
    }
    // RFC 9111 §5.2.2.7: a shared cache MUST NOT store a private response. The
    // qualified form lets it store the rest (see `strip_private_fields`).
    if cc.private == Some(Qualified::All) && !cfg.store_private {
        return Err(NotStorable::Private);
    }
    // RFC 9111 §3.5: a response to a request with Authorization is stored by a shared
    // cache only with must-revalidate, public or s-maxage.
    if req_headers.contains_key(AUTHORIZATION)
        && !(cc.must_revalidate || cc.public || cc.s_maxage.is_some())
    {
        return Err(NotStorable::Authorization);
    }
    // RFC 9111 §4.1: "A stored response with a Vary header field value containing a
    // member '*' always fails to match"; storing it is pointless.
    if vary_star(resp_headers) {
        return Err(NotStorable::VaryStar);
    }
    if resp_headers.contains_key(SET_COOKIE) && !cfg.store_set_cookie {
        return Err(NotStorable::SetCookie);
    }
    // RFC 9111 §3: the response needs Expires, max-age, s-maxage, public, or a
    // heuristically cacheable status; quire also requires a validator when the
    // lifetime would be heuristic (module doc).
    let explicit = cc.max_age.is_some()
        || cc.s_maxage.is_some()
        || (cc.source == Source::CacheControl && resp_headers.contains_key(EXPIRES));
    let heuristic = heuristic_allowed(status, &cc) && has_validator(resp_headers);
    if !(explicit || heuristic) {
        return Err(NotStorable::NoFreshness);
    }
    Ok(())
}

/// Status codes quire understands well enough to store under `must-understand`
/// (RFC 9111 §5.2.2.3): the heuristically cacheable ones and the common others.
fn status_understood(status: StatusCode) -> bool {
    heuristically_cacheable(status)
        || matches!(
            status.as_u16(),
            302 | 303 | 307 | 400 | 401 | 403 | 500 | 502 | 503 | 504
        )
}

/// RFC 9110 §15.1: status codes "defined as heuristically cacheable".
pub fn heuristically_cacheable(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// RFC 9111 §4.2.2: heuristics only for heuristically cacheable statuses or responses
/// marked `public` (§5.2.2.9).
fn heuristic_allowed(status: StatusCode, cc: &CacheControl) -> bool {
    heuristically_cacheable(status) || cc.public
}

fn has_validator(headers: &HeaderMap) -> bool {
    headers.contains_key(ETAG) || headers.contains_key(LAST_MODIFIED)
}

/// True when any `Vary` line lists `*`, however the list is spelled (`Vary: , *`,
/// `Vary: Accept, *`, or `*` on a line of its own).
pub fn vary_star(headers: &HeaderMap) -> bool {
    headers.get_all(VARY).iter().any(|line| {
        line.as_bytes()
            .split(|&b| b == b',')
            .any(|member| trim_ows(member) == b"*")
    })
}

/// The freshness lifetime of a response for a shared cache (RFC 9111 §4.2.1), or the
/// heuristic one (§4.2.2) when allowed, or `None` when there is neither: such a
/// response is stale from the start. `Some(Duration::ZERO)` means "already stale"
/// (invalid `Expires` or `max-age`). `response_time` stands in for a missing `Date`.
pub fn freshness_lifetime(
    status: StatusCode,
    resp_headers: &HeaderMap,
    cc: &CacheControl,
    response_time: SystemTime,
    cfg: &HeuristicConfig,
) -> Option<Duration> {
    explicit_lifetime(resp_headers, cc, response_time)
        .or_else(|| heuristic_lifetime(status, resp_headers, cc, response_time, cfg))
}

/// RFC 9111 §4.2.1, first match wins: s-maxage, max-age, Expires − Date. When `cc`
/// came from a targeted field, `Expires` is ignored (RFC 9213 §2.1).
fn explicit_lifetime(
    headers: &HeaderMap,
    cc: &CacheControl,
    response_time: SystemTime,
) -> Option<Duration> {
    // RFC 9111 §4.2.1: "If the cache is shared and the s-maxage response directive is
    // present, use its value". An invalid value means stale (§4.2.1 last paragraph).
    if let Some(d) = cc.s_maxage {
        return Some(d.duration().unwrap_or(Duration::ZERO));
    }
    if let Some(d) = cc.max_age {
        return Some(d.duration().unwrap_or(Duration::ZERO));
    }
    if cc.source == Source::Targeted {
        return None;
    }
    match field_date(headers, &EXPIRES) {
        FieldDate::Absent => None,
        // RFC 9111 §5.3: "A cache recipient MUST interpret invalid date formats,
        // especially the value '0', as representing a time in the past".
        FieldDate::Invalid => Some(Duration::ZERO),
        FieldDate::At(expires) => {
            let date = date_or(headers, response_time);
            Some(expires.duration_since(date).unwrap_or(Duration::ZERO))
        }
    }
}

/// RFC 9111 §4.2.2: a fraction of the time since `Last-Modified`, capped per content
/// type. No `Last-Modified`, no heuristic: quire never invents a lifetime.
fn heuristic_lifetime(
    status: StatusCode,
    headers: &HeaderMap,
    cc: &CacheControl,
    response_time: SystemTime,
    cfg: &HeuristicConfig,
) -> Option<Duration> {
    if !heuristic_allowed(status, cc) {
        return None;
    }
    let FieldDate::At(last_modified) = field_date(headers, &LAST_MODIFIED) else {
        return None;
    };
    let date = date_or(headers, response_time);
    let since = date.duration_since(last_modified).unwrap_or(Duration::ZERO);
    // `mul_f64` panics on a negative or NaN factor: keep configuration from doing that.
    let fraction = if cfg.fraction.is_finite() {
        cfg.fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    Some(since.mul_f64(fraction).min(heuristic_cap(headers, cfg)))
}

fn heuristic_cap(headers: &HeaderMap, cfg: &HeuristicConfig) -> Duration {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    cfg.by_content_type
        .iter()
        .find(|(prefix, _)| content_type.starts_with(prefix.as_str()))
        .map_or(cfg.max, |&(_, cap)| cap)
}

enum FieldDate {
    Absent,
    Invalid,
    At(SystemTime),
}

/// An HTTP-date field. Several lines that disagree are invalid (RFC 9111 §4.2.1:
/// "either the first occurrence should be used or the response should be considered
/// stale"; quire considers it stale).
fn field_date(headers: &HeaderMap, name: &HeaderName) -> FieldDate {
    let mut found = FieldDate::Absent;
    for line in headers.get_all(name) {
        let Some(at) = parse_date(line) else {
            return FieldDate::Invalid;
        };
        match found {
            FieldDate::At(prev) if prev != at => return FieldDate::Invalid,
            _ => found = FieldDate::At(at),
        }
    }
    found
}

fn parse_date(value: &HeaderValue) -> Option<SystemTime> {
    httpdate::parse_http_date(value.to_str().ok()?.trim()).ok()
}

/// The `Date` of a response, or the time it was received when `Date` is missing or
/// invalid (RFC 9110 §6.6.1: a recipient with a clock adds one).
fn date_or(headers: &HeaderMap, response_time: SystemTime) -> SystemTime {
    match field_date(headers, &DATE) {
        FieldDate::At(date) => date,
        FieldDate::Absent | FieldDate::Invalid => response_time,
    }
}

/// The current age of a response (RFC 9111 §4.2.3), with saturating arithmetic: a
/// clock that goes backwards gives zero, never a panic.
pub fn current_age(
    resp_headers: &HeaderMap,
    response_time: SystemTime,
    request_time: SystemTime,
    now: SystemTime,
) -> Duration {
    initial_age(resp_headers, response_time, request_time)
        .saturating_add(elapsed(response_time, now))
}

/// `corrected_initial_age` of RFC 9111 §4.2.3: the age when the response arrived.
fn initial_age(
    headers: &HeaderMap,
    response_time: SystemTime,
    request_time: SystemTime,
) -> Duration {
    let date = date_or(headers, response_time);
    let apparent_age = elapsed(date, response_time);
    let response_delay = elapsed(request_time, response_time);
    let corrected_age_value = age_value(headers).saturating_add(response_delay);
    apparent_age.max(corrected_age_value)
}

/// `b - a`, or zero when `b` is before `a`.
fn elapsed(a: SystemTime, b: SystemTime) -> Duration {
    b.duration_since(a).unwrap_or(Duration::ZERO)
}

/// RFC 9111 §5.1: `Age = delta-seconds`. A line that is not a non-negative integer is
/// ignored; of several valid lines the largest counts (the conservative reading).
fn age_value(headers: &HeaderMap) -> Duration {
    let secs = headers
        .get_all(AGE)
        .iter()
        .filter_map(|line| {
            let digits = trim_ows(line.as_bytes());
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            // RFC 9111 §1.2.2: saturate at 2^31.
            Some(digits.iter().fold(0u64, |acc, &b| {
                (acc * 10 + u64::from(b - b'0')).min(crate::cache_control::DELTA_SECONDS_MAX)
            }))
        })
        .max()
        .unwrap_or(0);
    Duration::from_secs(secs)
}

/// Facts about a stored response that reuse decisions need, computed once at fill
/// (and after each 304) so a hit reads no headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredTiming {
    /// When the request that produced the response was sent.
    pub request_time: SystemTime,
    /// When the response was received.
    pub response_time: SystemTime,
    /// The response's `Date` (or `response_time`), kept for serving (it is not
    /// rewritten on hits).
    pub date: SystemTime,
    /// `corrected_initial_age` (RFC 9111 §4.2.3).
    pub age_at_store: Duration,
    /// See [`freshness_lifetime`]; `None` means stale from the start.
    pub freshness_lifetime: Option<Duration>,
    /// Response `stale-while-revalidate` window (RFC 5861 §3), if valid.
    pub stale_while_revalidate: Option<Duration>,
    /// Response `stale-if-error` window (RFC 5861 §4), if valid.
    pub stale_if_error: Option<Duration>,
    /// Flags from the response's directives and head.
    pub flags: TimingFlags,
}

/// Boolean facts of a stored response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimingFlags {
    /// `no-cache` in either form: every reuse needs validation (RFC 9111 §5.2.2.4).
    pub no_cache: bool,
    /// `must-revalidate`, `proxy-revalidate` or `s-maxage`: never served stale
    /// (RFC 9111 §4.2.4, §5.2.2.2, §5.2.2.8, §5.2.2.10).
    pub forbids_stale: bool,
    /// `ETag` or `Last-Modified` is present: revalidation can be conditional.
    pub has_validator: bool,
    /// The lifetime is heuristic (RFC 9111 §4.2.2).
    pub heuristic: bool,
    /// `immutable` (RFC 8246).
    pub immutable: bool,
}

impl StoredTiming {
    /// Timing of a response received at `response_time` for a request sent at
    /// `request_time`. `cc` is the response's effective directives
    /// ([`CacheControl::for_response`]).
    pub fn new(
        status: StatusCode,
        resp_headers: &HeaderMap,
        cc: &CacheControl,
        request_time: SystemTime,
        response_time: SystemTime,
        cfg: &HeuristicConfig,
    ) -> StoredTiming {
        let explicit = explicit_lifetime(resp_headers, cc, response_time);
        let freshness_lifetime =
            explicit.or_else(|| heuristic_lifetime(status, resp_headers, cc, response_time, cfg));
        StoredTiming {
            request_time,
            response_time,
            date: date_or(resp_headers, response_time),
            age_at_store: initial_age(resp_headers, response_time, request_time),
            freshness_lifetime,
            stale_while_revalidate: cc.stale_while_revalidate.and_then(Delta::duration),
            stale_if_error: cc.stale_if_error.and_then(Delta::duration),
            flags: TimingFlags {
                no_cache: cc.no_cache.is_some(),
                forbids_stale: cc.forbids_stale(),
                has_validator: has_validator(resp_headers),
                heuristic: explicit.is_none() && freshness_lifetime.is_some(),
                immutable: cc.immutable,
            },
        }
    }

    /// Current age at `now` (RFC 9111 §4.2.3).
    pub fn age(&self, now: SystemTime) -> Duration {
        self.age_at_store
            .saturating_add(elapsed(self.response_time, now))
    }

    /// RFC 9111 §4.2: `response_is_fresh = (freshness_lifetime > current_age)`.
    pub fn is_fresh(&self, now: SystemTime) -> bool {
        self.freshness_lifetime
            .is_some_and(|lifetime| lifetime > self.age(now))
    }

    /// How long past its lifetime the response is at `now` (zero while fresh).
    pub fn staleness(&self, now: SystemTime) -> Duration {
        self.age(now)
            .saturating_sub(self.freshness_lifetime.unwrap_or(Duration::ZERO))
    }
}

/// What to do with a stored response for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Fresh and acceptable to the client: serve it.
    Fresh,
    /// Stale, but the client's `max-stale` accepts it (RFC 9111 §5.2.1.2): serve it.
    StaleAllowed,
    /// Stale within `stale-while-revalidate` (RFC 5861 §3) or the configured grace:
    /// serve it and revalidate in the background.
    StaleWhileRevalidate,
    /// Forward to the origin (conditionally when the entry has validators) before
    /// serving. If the origin fails (5xx or no answer) within `stale_if_error`, the
    /// stored response may be served instead (RFC 5861 §4); `None` means it may not.
    MustRevalidate {
        /// Time from `now` during which a failing origin may be covered by the stale
        /// response.
        stale_if_error: Option<Duration>,
    },
}

/// Decides how a stored response may be used for a request with directives `req_cc`
/// at `now` (RFC 9111 §4, §4.2.4, §5.2.1; RFC 5861).
pub fn reuse(
    stored: &StoredTiming,
    req_cc: &CacheControl,
    cfg: &ReuseConfig,
    now: SystemTime,
) -> Decision {
    let revalidate = Decision::MustRevalidate {
        stale_if_error: stale_if_error_window(stored, req_cc, cfg, now),
    };
    // RFC 9111 §5.2.2.4: response no-cache → never reused without validation, and a
    // failed validation is not a successful one, so no stale-if-error either.
    if stored.flags.no_cache {
        return Decision::MustRevalidate {
            stale_if_error: None,
        };
    }
    // RFC 9111 §5.2.1.4: request no-cache → validate first.
    if req_cc.no_cache.is_some() {
        return revalidate;
    }
    let age = stored.age(now);
    // RFC 9111 §5.2.1.1: the client does not accept a response older than max-age.
    if let Some(Delta::Secs(max_age)) = req_cc.max_age {
        if age > Duration::from_secs(max_age) {
            return revalidate;
        }
    }
    if stored.is_fresh(now) {
        // RFC 9111 §5.2.1.3: the client wants at least min-fresh of freshness left.
        let left = stored
            .freshness_lifetime
            .unwrap_or(Duration::ZERO)
            .saturating_sub(age);
        return match req_cc.min_fresh {
            Some(Delta::Secs(min)) if left < Duration::from_secs(min) => revalidate,
            _ => Decision::Fresh,
        };
    }
    // RFC 9111 §4.2.4: must-revalidate / proxy-revalidate / s-maxage: a stale response
    // is never served without validation, whatever max-stale or stale-* say.
    if stored.flags.forbids_stale {
        return Decision::MustRevalidate {
            stale_if_error: None,
        };
    }
    // A client asking for min-fresh does not want a stale response either.
    if req_cc.min_fresh.is_some() {
        return revalidate;
    }
    let staleness = stored.staleness(now);
    // RFC 9111 §5.2.1.2: max-stale without a value accepts any staleness.
    match req_cc.max_stale {
        Some(MaxStale::Any) => return Decision::StaleAllowed,
        Some(MaxStale::Secs(s)) if staleness <= Duration::from_secs(s) => {
            return Decision::StaleAllowed
        }
        _ => {}
    }
    // RFC 5861 §3: serve stale while revalidating for up to the window; configured
    // grace extends it (RFC 9111 §4.2.4 "configuration").
    let swr = stored
        .stale_while_revalidate
        .unwrap_or(Duration::ZERO)
        .max(cfg.stale_while_revalidate_grace);
    if !swr.is_zero() && staleness <= swr {
        return Decision::StaleWhileRevalidate;
    }
    revalidate
}

/// RFC 5861 §4: how long from `now` a failing origin may be answered with the stored
/// response: until `stale-if-error` (response or request, or configured grace) past
/// its lifetime. Never for responses that forbid stale serving or demand validation.
fn stale_if_error_window(
    stored: &StoredTiming,
    req_cc: &CacheControl,
    cfg: &ReuseConfig,
    now: SystemTime,
) -> Option<Duration> {
    if stored.flags.forbids_stale || stored.flags.no_cache {
        return None;
    }
    let window = [
        stored.stale_if_error,
        req_cc.stale_if_error.and_then(Delta::duration),
        Some(cfg.stale_if_error_grace).filter(|g| !g.is_zero()),
    ]
    .into_iter()
    .flatten()
    .max()?;
    let limit = stored
        .freshness_lifetime
        .unwrap_or(Duration::ZERO)
        .saturating_add(window);
    limit
        .checked_sub(stored.age(now))
        .filter(|left| !left.is_zero())
}

/// Hop-by-hop fields never stored (RFC 9111 §3.1, RFC 9110 §7.6.1), and the
/// proxy-authentication fields specific to a client's proxy configuration (RFC 9111
/// §3.1 "MUST NOT be stored").
const NOT_STORED: [HeaderName; 8] = [
    CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    TE,
    TRANSFER_ENCODING,
    UPGRADE,
    PROXY_AUTHENTICATE,
    PROXY_AUTHORIZATION,
];

/// Removes the fields a cache must not store: those named in `Connection` and the
/// hop-by-hop ones (RFC 9111 §3.1).
pub fn strip_connection_headers(headers: &mut HeaderMap) {
    let mut named: Vec<HeaderName> = Vec::new();
    'lines: for line in headers.get_all(CONNECTION) {
        for token in line.as_bytes().split(|&b| b == b',') {
            if named.len() >= CONNECTION_NAMES_MAX {
                break 'lines;
            }
            if let Ok(name) = HeaderName::from_bytes(trim_ows(token)) {
                named.push(name);
            }
        }
    }
    for name in named {
        headers.remove(name);
    }
    for name in NOT_STORED {
        headers.remove(name);
    }
    headers.remove("proxy-authentication-info");
}

/// Removes the fields named by a qualified `private` (and `no-cache`) directive before
/// a shared cache stores the rest (RFC 9111 §5.2.2.7, §5.2.2.4, §3.1).
pub fn strip_private_fields(headers: &mut HeaderMap, cc: &CacheControl) {
    for directive in [&cc.private, &cc.no_cache] {
        if let Some(Qualified::Fields(names)) = directive {
            for name in names {
                headers.remove(name.as_str());
            }
        }
    }
}

/// Fields a 304 must not overwrite in the stored response: `Content-Length` (RFC 9111
/// §3.2) and the fields the stored body depends upon (its encoding and range), which
/// quire produced itself.
const NOT_UPDATED: [HeaderName; 3] = [CONTENT_LENGTH, CONTENT_ENCODING, CONTENT_RANGE];

/// The stored head updated from a 304 (RFC 9111 §4.3.4, §3.2): every field of the 304
/// replaces all stored lines of that name, except those in [`NOT_UPDATED`] and those
/// a cache does not store at all (§3.1).
pub fn merge_304(stored_headers: &HeaderMap, not_modified_headers: &HeaderMap) -> HeaderMap {
    let mut update = not_modified_headers.clone();
    strip_connection_headers(&mut update);
    let mut merged = stored_headers.clone();
    for name in update.keys() {
        if NOT_UPDATED.contains(name) {
            continue;
        }
        merged.remove(name);
        for value in update.get_all(name) {
            merged.append(name.clone(), value.clone());
        }
    }
    merged
}

/// RFC 9111 §4.4: a non-error response (2xx, 3xx) to an unsafe method — any method
/// but GET, HEAD, OPTIONS and TRACE (RFC 9110 §9.2.1), including unknown ones such as
/// `M-SEARCH` — invalidates the target URI.
pub fn invalidates(method: &Method, status: StatusCode) -> bool {
    let safe = [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE];
    !safe.contains(method) && (status.is_success() || status.is_redirection())
}

/// RFC 9111 §4.4: the `Location` and `Content-Location` values whose targets a cache
/// invalidates too, as written (the caller resolves them against the request URI and
/// keeps only same-origin ones). At most a few; invalid UTF-8 is skipped.
pub fn invalidation_locations(resp_headers: &HeaderMap) -> Vec<&str> {
    [LOCATION, CONTENT_LOCATION]
        .iter()
        .flat_map(|name| resp_headers.get_all(name).iter())
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .take(INVALIDATION_LOCATIONS_MAX)
        .collect()
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    /// A fixed origin of time, so tests never read a clock.
    fn t(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
    }

    /// An HTTP-date `secs` after the test epoch (leaked: tests only, tiny).
    fn date(secs: u64) -> &'static str {
        Box::leak(httpdate::fmt_http_date(t(secs)).into_boxed_str())
    }

    fn h(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn status(code: u16) -> StatusCode {
        StatusCode::from_u16(code).unwrap()
    }

    fn store_with(
        method: &str,
        req: &[(&str, &str)],
        code: u16,
        resp: &[(&str, &str)],
        cfg: &StorageConfig,
    ) -> Result<(), NotStorable> {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        storable(&method, &h(req), status(code), &h(resp), cfg)
    }

    fn store(req: &[(&str, &str)], code: u16, resp: &[(&str, &str)]) -> Result<(), NotStorable> {
        store_with("GET", req, code, resp, &StorageConfig::default())
    }

    /// Lifetime of a 200 received at t(0).
    fn lifetime(resp: &[(&str, &str)]) -> Option<Duration> {
        lifetime_for(200, resp)
    }

    fn lifetime_for(code: u16, resp: &[(&str, &str)]) -> Option<Duration> {
        let headers = h(resp);
        let cc = CacheControl::for_response(&headers, &[CDN_CACHE_CONTROL]);
        freshness_lifetime(
            status(code),
            &headers,
            &cc,
            t(0),
            &HeuristicConfig::default(),
        )
    }

    /// Timing of a 200 requested at t(0) and received at t(0).
    fn timing(resp: &[(&str, &str)]) -> StoredTiming {
        let headers = h(resp);
        let cc = CacheControl::for_response(&headers, &[CDN_CACHE_CONTROL]);
        StoredTiming::new(
            status(200),
            &headers,
            &cc,
            t(0),
            t(0),
            &HeuristicConfig::default(),
        )
    }

    fn decide(stored: &StoredTiming, req: &[(&str, &str)], at: u64) -> Decision {
        reuse(
            stored,
            &CacheControl::from_headers(&h(req)),
            &ReuseConfig::default(),
            t(at),
        )
    }

    const REVALIDATE: Decision = Decision::MustRevalidate {
        stale_if_error: None,
    };

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    // ---- storable (RFC 9111 §3) ----

    /// RFC 9111 §3: only understood, cacheable methods are stored; POST and unknown
    /// methods such as M-SEARCH are not.
    #[test]
    fn only_get_and_head_are_stored() {
        let cfg = StorageConfig::default();
        let resp = [("cache-control", "max-age=60")];
        assert_eq!(store_with("GET", &[], 200, &resp, &cfg), Ok(()));
        assert_eq!(store_with("HEAD", &[], 200, &resp, &cfg), Ok(()));
        for m in ["POST", "PUT", "DELETE", "M-SEARCH", "OPTIONS"] {
            assert_eq!(
                store_with(m, &[], 200, &resp, &cfg),
                Err(NotStorable::Method),
                "{m}"
            );
        }
    }

    /// RFC 9111 §3: the status must be final; 206 and 304 are not stored as such.
    #[test]
    fn non_final_partial_and_not_modified_are_not_stored() {
        let resp = [("cache-control", "max-age=60")];
        for code in [100, 103, 206, 304] {
            assert_eq!(store(&[], code, &resp), Err(NotStorable::Status), "{code}");
        }
        for code in [200, 301, 404, 410, 500] {
            assert_eq!(store(&[], code, &resp), Ok(()), "{code}");
        }
    }

    /// RFC 9111 §3: an unknown final status with explicit freshness may be stored
    /// (understanding is required only for 206/304 or with must-understand).
    #[test]
    fn unknown_status_with_max_age_is_stored() {
        assert_eq!(store(&[], 599, &[("cache-control", "max-age=60")]), Ok(()));
    }

    /// RFC 9111 §5.2.2.3: must-understand stores only understood statuses and then
    /// overrides no-store.
    #[test]
    fn must_understand_gates_status_and_overrides_no_store() {
        let resp = [("cache-control", "must-understand, no-store, max-age=60")];
        assert_eq!(store(&[], 200, &resp), Ok(()));
        assert_eq!(store(&[], 299, &resp), Err(NotStorable::Status));
    }

    /// RFC 9111 §5.2.2.5 / §5.2.1.5: no-store in the response or the request.
    #[test]
    fn no_store_in_request_or_response_is_not_stored() {
        let resp = [("cache-control", "max-age=60, no-store")];
        assert_eq!(store(&[], 200, &resp), Err(NotStorable::NoStore));
        let req = [("cache-control", "no-store")];
        assert_eq!(
            store(&req, 200, &[("cache-control", "max-age=60")]),
            Err(NotStorable::NoStore)
        );
    }

    /// RFC 9111 §5.2.2.7: a shared cache does not store `private` unless configured;
    /// the qualified form leaves the rest storable.
    #[test]
    fn private_is_not_stored_by_a_shared_cache() {
        let resp = [("cache-control", "private, max-age=60")];
        assert_eq!(store(&[], 200, &resp), Err(NotStorable::Private));
        let cfg = StorageConfig {
            store_private: true,
            ..StorageConfig::default()
        };
        assert_eq!(store_with("GET", &[], 200, &resp, &cfg), Ok(()));
        let qualified = [("cache-control", "private=\"x-user\", max-age=60")];
        assert_eq!(store(&[], 200, &qualified), Ok(()));
    }

    /// RFC 9111 §3.5: with Authorization, only must-revalidate, public or s-maxage
    /// allow a shared cache to store.
    #[test]
    fn authorization_requires_explicit_permission() {
        let req = [("authorization", "Bearer x")];
        assert_eq!(
            store(&req, 200, &[("cache-control", "max-age=60")]),
            Err(NotStorable::Authorization)
        );
        for cc in [
            "max-age=60, public",
            "max-age=60, must-revalidate",
            "s-maxage=60",
        ] {
            assert_eq!(store(&req, 200, &[("cache-control", cc)]), Ok(()), "{cc}");
        }
    }

    /// RFC 9111 §4.1: `Vary: *` never matches, however it is written.
    #[test]
    fn vary_star_is_never_stored_in_any_spelling() {
        let cc = ("cache-control", "max-age=60");
        for resp in [
            vec![cc, ("vary", "*")],
            vec![cc, ("vary", ", *")],
            vec![cc, ("vary", "Accept-Language,*")],
            vec![cc, ("vary", "Accept-Language"), ("vary", " * ")],
        ] {
            assert_eq!(
                store(&[], 200, &resp),
                Err(NotStorable::VaryStar),
                "{resp:?}"
            );
        }
        assert_eq!(store(&[], 200, &[cc, ("vary", "Accept-Encoding")]), Ok(()));
    }

    /// Set-Cookie responses are not stored unless configured (DESIGN.md fill path).
    #[test]
    fn set_cookie_is_not_stored_unless_configured() {
        let resp = [("cache-control", "max-age=60"), ("set-cookie", "s=1")];
        assert_eq!(store(&[], 200, &resp), Err(NotStorable::SetCookie));
        let cfg = StorageConfig {
            store_set_cookie: true,
            ..StorageConfig::default()
        };
        assert_eq!(store_with("GET", &[], 200, &resp, &cfg), Ok(()));
    }

    /// RFC 9111 §3 + quire's rule: neither freshness nor validator is never stored.
    #[test]
    fn response_without_freshness_or_validator_is_not_stored() {
        assert_eq!(store(&[], 200, &[]), Err(NotStorable::NoFreshness));
        assert_eq!(
            store(&[], 200, &[("cache-control", "no-cache")]),
            Err(NotStorable::NoFreshness)
        );
        assert_eq!(store(&[], 200, &[("etag", "\"a\"")]), Ok(()));
        assert_eq!(store(&[], 200, &[("last-modified", date(0))]), Ok(()));
    }

    /// RFC 9111 §3 / §4.2.2: a validator alone does not make a status that is not
    /// heuristically cacheable storable; `public` does.
    #[test]
    fn validator_needs_heuristic_status_or_public() {
        assert_eq!(
            store(&[], 302, &[("etag", "\"a\"")]),
            Err(NotStorable::NoFreshness)
        );
        assert_eq!(
            store(&[], 302, &[("etag", "\"a\""), ("cache-control", "public")]),
            Ok(())
        );
    }

    /// RFC 9111 §3: an Expires field (even an invalid one) is explicit freshness.
    #[test]
    fn expires_makes_storable_even_when_invalid() {
        assert_eq!(store(&[], 200, &[("expires", "0")]), Ok(()));
    }

    /// RFC 9213 §2.1: CDN-Cache-Control replaces Cache-Control for quire, both ways.
    #[test]
    fn cdn_cache_control_decides_storability() {
        let resp = [
            ("cache-control", "max-age=60"),
            ("cdn-cache-control", "no-store"),
        ];
        assert_eq!(store(&[], 200, &resp), Err(NotStorable::NoStore));
        let resp = [
            ("cache-control", "no-store"),
            ("cdn-cache-control", "max-age=60"),
        ];
        assert_eq!(store(&[], 200, &resp), Ok(()));
    }

    /// Cache-Status detail tokens (RFC 9211 §2.8) are distinct and non-empty.
    #[test]
    fn detail_tokens_are_distinct() {
        let all = [
            NotStorable::Method,
            NotStorable::Status,
            NotStorable::NoStore,
            NotStorable::Private,
            NotStorable::Authorization,
            NotStorable::VaryStar,
            NotStorable::SetCookie,
            NotStorable::NoFreshness,
            NotStorable::HeaderTooLarge,
        ];
        let mut tokens: Vec<_> = all.iter().map(NotStorable::detail).collect();
        tokens.sort_unstable();
        tokens.dedup();
        assert_eq!(tokens.len(), all.len());
        assert_eq!(NotStorable::VaryStar.detail(), "vary-star");
        assert_eq!(NotStorable::NoFreshness.to_string(), "no-freshness");
    }

    // ---- freshness lifetime (RFC 9111 §4.2.1, §4.2.2) ----

    /// RFC 9111 §4.2.1: a shared cache prefers s-maxage over max-age, longer or shorter,
    /// in either order and across lines.
    #[test]
    fn s_maxage_wins_over_max_age() {
        assert_eq!(
            lifetime(&[("cache-control", "max-age=3600, s-maxage=1")]),
            secs(1)
        );
        assert_eq!(
            lifetime(&[("cache-control", "s-maxage=3600, max-age=1")]),
            secs(3600)
        );
        assert_eq!(
            lifetime(&[
                ("cache-control", "max-age=3600"),
                ("cache-control", "s-maxage=1")
            ]),
            secs(1)
        );
    }

    /// RFC 9111 §4.2.1: max-age wins over Expires, past or invalid.
    #[test]
    fn max_age_wins_over_expires() {
        let resp = [
            ("cache-control", "max-age=3600"),
            ("expires", "0"),
            ("date", date(0)),
        ];
        assert_eq!(lifetime(&resp), secs(3600));
        let resp = [("cache-control", "max-age=0"), ("expires", date(10_000))];
        assert_eq!(lifetime(&resp), secs(0));
    }

    /// RFC 9111 §4.2.1: Expires − Date.
    #[test]
    fn expires_minus_date_is_the_lifetime() {
        let resp = [("expires", date(700)), ("date", date(100))];
        assert_eq!(lifetime(&resp), secs(600));
    }

    /// RFC 9111 §5.3: an invalid Expires ("0") means already stale.
    #[test]
    fn invalid_expires_is_already_stale() {
        assert_eq!(lifetime(&[("expires", "0")]), secs(0));
        assert_eq!(lifetime(&[("expires", "tomorrow")]), secs(0));
    }

    /// RFC 9111 §4.2.1: Expires before Date gives no freshness (no underflow).
    #[test]
    fn expires_before_date_is_stale() {
        let resp = [("expires", date(300)), ("date", date(400))];
        assert_eq!(lifetime(&resp), secs(0));
    }

    /// RFC 9111 §4.2.1: two different Expires lines → considered stale.
    #[test]
    fn conflicting_expires_lines_are_stale() {
        let resp = [
            ("date", date(0)),
            ("expires", date(100)),
            ("expires", date(900)),
        ];
        assert_eq!(lifetime(&resp), secs(0));
    }

    /// RFC 9110 §6.6.1: without Date, the receive time stands in for it.
    #[test]
    fn missing_date_uses_response_time() {
        assert_eq!(lifetime(&[("expires", date(50))]), secs(50));
    }

    /// RFC 9111 §4.2.1: invalid freshness information (negative or conflicting
    /// max-age) makes the response stale.
    #[test]
    fn invalid_max_age_is_stale() {
        assert_eq!(lifetime(&[("cache-control", "max-age=-1")]), secs(0));
        assert_eq!(
            lifetime(&[("cache-control", "max-age=60, max-age=0")]),
            secs(0)
        );
        assert_eq!(
            lifetime(&[("cache-control", "max-age=3600"), ("expires", date(9000))]),
            secs(3600)
        );
    }

    /// RFC 9111 §4.2.2: 10 % of Date − Last-Modified, capped by the type's cap or max.
    #[test]
    fn heuristic_is_a_fraction_of_last_modified_age_capped() {
        // 1000 s old → 100 s.
        let resp = [
            ("date", date(1000)),
            ("last-modified", date(0)),
            ("etag", "\"x\""),
        ];
        assert_eq!(lifetime(&resp), secs(100));
        // Very old HTML: capped at the text/html cap (10 min).
        let old = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let resp = [
            ("date", date(0)),
            ("last-modified", &httpdate::fmt_http_date(old)),
            ("content-type", "Text/HTML; charset=utf-8"),
        ];
        assert_eq!(lifetime(&resp), secs(600));
        // Unlisted type: the global max (1 day).
        let resp = [
            ("date", date(0)),
            ("last-modified", &httpdate::fmt_http_date(old)),
            ("content-type", "application/pdf"),
        ];
        assert_eq!(lifetime(&resp), secs(24 * 3600));
    }

    /// RFC 9111 §4.2.2: heuristics only for heuristically cacheable statuses (RFC 9110
    /// §15.1) or `public`.
    #[test]
    fn heuristic_needs_cacheable_status_or_public() {
        let resp = [("date", date(1000)), ("last-modified", date(0))];
        assert_eq!(lifetime_for(302, &resp), None);
        assert_eq!(lifetime_for(404, &resp), secs(100));
        let public = [
            ("date", date(1000)),
            ("last-modified", date(0)),
            ("cache-control", "public"),
        ];
        assert_eq!(lifetime_for(302, &public), secs(100));
    }

    /// RFC 9111 §4.2.2: no Last-Modified, no heuristic lifetime.
    #[test]
    fn no_heuristic_without_last_modified() {
        assert_eq!(lifetime(&[("etag", "\"x\"")]), None);
    }

    /// RFC 9213 §2.1: with a targeted field, Expires (like Cache-Control) is ignored.
    #[test]
    fn targeted_field_ignores_expires() {
        let resp = [
            ("cdn-cache-control", "must-revalidate"),
            ("expires", date(3600)),
            ("date", date(0)),
        ];
        assert_eq!(lifetime(&resp), None);
        let resp = [
            ("cdn-cache-control", "max-age=30"),
            ("cache-control", "max-age=3600"),
        ];
        assert_eq!(lifetime(&resp), secs(30));
    }

    /// A hostile heuristic configuration (NaN, negative) never panics.
    #[test]
    fn bad_heuristic_fraction_does_not_panic() {
        let headers = h(&[("date", date(1000)), ("last-modified", date(0))]);
        let cc = CacheControl::from_headers(&headers);
        for fraction in [f64::NAN, -1.0, f64::INFINITY, 7.0] {
            let cfg = HeuristicConfig {
                fraction,
                ..HeuristicConfig::default()
            };
            let got = freshness_lifetime(status(200), &headers, &cc, t(0), &cfg);
            assert!(
                got.is_some_and(|d| d <= Duration::from_secs(1000)),
                "{fraction}"
            );
        }
    }

    // ---- age (RFC 9111 §4.2.3) ----

    /// RFC 9111 §4.2.3: corrected_age_value = Age + response_delay, plus resident time.
    #[test]
    fn age_header_plus_delay_plus_resident_time() {
        let headers = h(&[("age", "10"), ("date", date(2))]);
        // Request at 0, response at 2 (delay 2), now 7 (resident 5): 10 + 2 + 5.
        assert_eq!(
            current_age(&headers, t(2), t(0), t(7)),
            Duration::from_secs(17)
        );
    }

    /// RFC 9111 §4.2.3: apparent_age from Date counts when larger than Age.
    #[test]
    fn apparent_age_from_date_counts() {
        let headers = h(&[("age", "1"), ("date", date(0))]);
        assert_eq!(
            current_age(&headers, t(100), t(100), t(100)),
            Duration::from_secs(100)
        );
    }

    /// RFC 9111 §5.1: an Age that is not a non-negative integer is ignored.
    #[test]
    fn invalid_age_is_ignored() {
        for bad in ["1.5", "-1", "abc", "1, 2", ""] {
            let headers = h(&[("age", bad), ("date", date(0))]);
            assert_eq!(
                current_age(&headers, t(0), t(0), t(0)),
                Duration::ZERO,
                "{bad}"
            );
        }
        let headers = h(&[("age", " 30 "), ("date", date(0))]);
        assert_eq!(
            current_age(&headers, t(0), t(0), t(0)),
            Duration::from_secs(30)
        );
    }

    /// RFC 9111 §1.2.2: a huge Age saturates instead of overflowing.
    #[test]
    fn huge_age_saturates() {
        let headers = h(&[("age", "999999999999999999999999")]);
        assert_eq!(
            current_age(&headers, t(0), t(0), t(0)),
            Duration::from_secs(1 << 31)
        );
    }

    /// RFC 9111 §4.2.3 with a clock that steps backwards: zero, never a panic.
    #[test]
    fn backwards_clock_saturates_to_zero() {
        let headers = h(&[("date", date(500))]);
        assert_eq!(current_age(&headers, t(100), t(200), t(50)), Duration::ZERO);
    }

    // ---- reuse (RFC 9111 §4, RFC 5861) ----

    /// RFC 9111 §4.2: fresh while lifetime > age, then stale → revalidate.
    #[test]
    fn fresh_until_lifetime_then_revalidate() {
        let stored = timing(&[("cache-control", "max-age=60"), ("date", date(0))]);
        assert_eq!(decide(&stored, &[], 59), Decision::Fresh);
        assert_eq!(decide(&stored, &[], 60), REVALIDATE);
    }

    /// RFC 9111 §4.2.3: an Age larger than max-age makes the response stale on arrival.
    #[test]
    fn age_beyond_max_age_is_stale_on_arrival() {
        let stored = timing(&[
            ("cache-control", "max-age=10"),
            ("age", "15"),
            ("date", date(0)),
        ]);
        assert_eq!(decide(&stored, &[], 0), REVALIDATE);
    }

    /// Design rule: without a lifetime the stored response is never served unvalidated.
    #[test]
    fn no_lifetime_always_revalidates() {
        let stored = timing(&[("etag", "\"x\"")]);
        assert_eq!(stored.freshness_lifetime, None);
        assert_eq!(decide(&stored, &[], 0), REVALIDATE);
        assert!(stored.flags.has_validator);
    }

    /// RFC 9111 §5.2.1.4: request no-cache forces validation of a fresh response.
    #[test]
    fn request_no_cache_forces_revalidation() {
        let stored = timing(&[("cache-control", "max-age=600")]);
        assert_eq!(
            decide(&stored, &[("cache-control", "no-cache")], 1),
            REVALIDATE
        );
    }

    /// RFC 9111 §5.2.2.4: response no-cache forces validation, even while "fresh", and
    /// allows no stale-if-error.
    #[test]
    fn response_no_cache_forces_revalidation() {
        let stored = timing(&[("cache-control", "no-cache, max-age=600, stale-if-error=60")]);
        assert!(stored.flags.no_cache);
        assert_eq!(decide(&stored, &[], 1), REVALIDATE);
    }

    /// RFC 9111 §5.2.1.1: request max-age rejects responses older than it.
    #[test]
    fn request_max_age_limits_age() {
        let stored = timing(&[("cache-control", "max-age=600")]);
        assert_eq!(
            decide(&stored, &[("cache-control", "max-age=0")], 5),
            REVALIDATE
        );
        assert_eq!(
            decide(&stored, &[("cache-control", "max-age=10")], 5),
            Decision::Fresh
        );
        // An invalid request max-age is ignored.
        assert_eq!(
            decide(&stored, &[("cache-control", "max-age=x")], 5),
            Decision::Fresh
        );
    }

    /// RFC 9111 §5.2.1.3: min-fresh requires that much freshness left.
    #[test]
    fn request_min_fresh_requires_remaining_freshness() {
        let stored = timing(&[("cache-control", "max-age=100")]);
        assert_eq!(
            decide(&stored, &[("cache-control", "min-fresh=30")], 60),
            Decision::Fresh
        );
        assert_eq!(
            decide(&stored, &[("cache-control", "min-fresh=50")], 60),
            REVALIDATE
        );
    }

    /// RFC 9111 §5.2.1.2: max-stale accepts stale responses, bounded or not.
    #[test]
    fn request_max_stale_accepts_stale() {
        let stored = timing(&[("cache-control", "max-age=10")]);
        assert_eq!(
            decide(&stored, &[("cache-control", "max-stale")], 1000),
            Decision::StaleAllowed
        );
        assert_eq!(
            decide(&stored, &[("cache-control", "max-stale=30")], 35),
            Decision::StaleAllowed
        );
        assert_eq!(
            decide(&stored, &[("cache-control", "max-stale=30")], 45),
            REVALIDATE
        );
    }

    /// RFC 9111 §4.2.4, §5.2.2.2, §5.2.2.8: must-revalidate and proxy-revalidate forbid
    /// stale serving even with max-stale, stale-while-revalidate or stale-if-error.
    #[test]
    fn must_revalidate_forbids_stale_even_with_max_stale() {
        for cc in [
            "max-age=10, must-revalidate, stale-if-error=600, stale-while-revalidate=600",
            "max-age=10, proxy-revalidate, stale-if-error=600, stale-while-revalidate=600",
        ] {
            let stored = timing(&[("cache-control", cc)]);
            assert_eq!(
                decide(&stored, &[("cache-control", "max-stale")], 20),
                REVALIDATE,
                "{cc}"
            );
            assert_eq!(decide(&stored, &[], 20), REVALIDATE, "{cc}");
            assert_eq!(decide(&stored, &[], 5), Decision::Fresh, "{cc}");
        }
    }

    /// RFC 9111 §5.2.2.10: s-maxage carries proxy-revalidate for a shared cache.
    #[test]
    fn s_maxage_forbids_serving_stale() {
        let stored = timing(&[("cache-control", "s-maxage=10, stale-while-revalidate=60")]);
        assert!(stored.flags.forbids_stale);
        assert_eq!(decide(&stored, &[], 20), REVALIDATE);
    }

    /// RFC 5861 §3: stale-while-revalidate serves stale within its window only.
    #[test]
    fn stale_while_revalidate_window() {
        let stored = timing(&[("cache-control", "max-age=10, stale-while-revalidate=30")]);
        assert_eq!(decide(&stored, &[], 5), Decision::Fresh);
        assert_eq!(decide(&stored, &[], 25), Decision::StaleWhileRevalidate);
        assert_eq!(decide(&stored, &[], 40), Decision::StaleWhileRevalidate);
        assert_eq!(decide(&stored, &[], 41), REVALIDATE);
    }

    /// RFC 5861 §4: stale-if-error gives the remaining window in which a failing
    /// origin may be covered by the stale response.
    #[test]
    fn stale_if_error_window_is_reported() {
        let stored = timing(&[("cache-control", "max-age=10, stale-if-error=100")]);
        assert_eq!(
            decide(&stored, &[], 30),
            Decision::MustRevalidate {
                stale_if_error: secs(80)
            }
        );
        assert_eq!(decide(&stored, &[], 110), REVALIDATE);
        // RFC 5861 §4: the request may carry stale-if-error too.
        let plain = timing(&[("cache-control", "max-age=10")]);
        assert_eq!(
            decide(&plain, &[("cache-control", "stale-if-error=50")], 20),
            Decision::MustRevalidate {
                stale_if_error: secs(40)
            }
        );
    }

    /// RFC 9111 §4.2.4 ("configuration"): grace extends stale serving, but never past
    /// must-revalidate.
    #[test]
    fn configured_grace_extends_stale_serving() {
        let cfg = ReuseConfig {
            stale_while_revalidate_grace: Duration::from_secs(60),
            stale_if_error_grace: Duration::from_secs(3600),
        };
        let none = CacheControl::default();
        let stored = timing(&[("cache-control", "max-age=10")]);
        assert_eq!(
            reuse(&stored, &none, &cfg, t(50)),
            Decision::StaleWhileRevalidate
        );
        assert_eq!(
            reuse(&stored, &none, &cfg, t(110)),
            Decision::MustRevalidate {
                stale_if_error: secs(3500)
            }
        );
        let strict = timing(&[("cache-control", "max-age=10, must-revalidate")]);
        assert_eq!(reuse(&strict, &none, &cfg, t(50)), REVALIDATE);
    }

    /// RFC 9111 §4.2.2: the timing records a heuristic lifetime as such.
    #[test]
    fn stored_timing_marks_heuristic_lifetime() {
        let stored = timing(&[("last-modified", date(0)), ("date", date(1000))]);
        // Received at t(0) with a Date of t(1000): no apparent age, 100 s lifetime.
        assert!(stored.flags.heuristic);
        assert_eq!(stored.freshness_lifetime, secs(100));
        assert_eq!(stored.date, t(1000));
        let explicit = timing(&[("cache-control", "max-age=5")]);
        assert!(!explicit.flags.heuristic);
    }

    // ---- storage of fields (RFC 9111 §3.1, §3.2, §4.3.4) ----

    /// RFC 9111 §3.1: fields named in Connection and hop-by-hop fields are not stored.
    #[test]
    fn connection_named_and_hop_by_hop_fields_are_stripped() {
        let mut headers = h(&[
            ("connection", "X-Hop, close"),
            ("connection", "x-other"),
            ("x-hop", "1"),
            ("x-other", "1"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("proxy-authenticate", "Basic"),
            ("etag", "\"e\""),
            ("cache-control", "max-age=1"),
        ]);
        strip_connection_headers(&mut headers);
        let mut left: Vec<_> = headers.keys().map(|k| k.as_str().to_owned()).collect();
        left.sort();
        assert_eq!(left, ["cache-control", "etag"]);
    }

    /// RFC 9111 §5.2.2.7: a qualified private's fields are removed before storing.
    #[test]
    fn qualified_private_fields_are_stripped() {
        let mut headers = h(&[
            ("cache-control", "private=\"X-User\", max-age=60"),
            ("x-user", "alice"),
            ("etag", "\"e\""),
        ]);
        let cc = CacheControl::from_headers(&headers);
        strip_private_fields(&mut headers, &cc);
        assert!(!headers.contains_key("x-user"));
        assert!(headers.contains_key("etag"));
    }

    /// RFC 9111 §4.3.4, §3.2: a 304 replaces stored fields (all lines of a name), but
    /// not Content-Length, and hop-by-hop fields of the 304 are not taken.
    #[test]
    fn merge_304_updates_stored_headers() {
        let stored = h(&[
            ("cache-control", "max-age=10"),
            ("content-length", "5000"),
            ("content-type", "text/html"),
            ("x-tag", "a"),
            ("x-tag", "b"),
            ("date", date(0)),
        ]);
        let not_modified = h(&[
            ("cache-control", "max-age=600"),
            ("content-length", "0"),
            ("x-tag", "c"),
            ("date", date(100)),
            ("connection", "x-secret"),
            ("x-secret", "1"),
        ]);
        let merged = merge_304(&stored, &not_modified);
        assert_eq!(merged["cache-control"], "max-age=600");
        assert_eq!(merged["content-length"], "5000");
        assert_eq!(merged["content-type"], "text/html");
        assert_eq!(merged["date"], date(100));
        let tags: Vec<_> = merged.get_all("x-tag").iter().collect();
        assert_eq!(tags, ["c"]);
        assert!(!merged.contains_key("x-secret"));
        assert!(!merged.contains_key("connection"));
        // The refreshed head gives a fresh timing again.
        let cc = CacheControl::from_headers(&merged);
        let again = StoredTiming::new(
            status(200),
            &merged,
            &cc,
            t(100),
            t(100),
            &HeuristicConfig::default(),
        );
        assert_eq!(
            reuse(
                &again,
                &CacheControl::default(),
                &ReuseConfig::default(),
                t(200)
            ),
            Decision::Fresh
        );
    }

    // ---- invalidation (RFC 9111 §4.4) ----

    /// RFC 9111 §4.4: non-error responses to unsafe methods, including unknown ones,
    /// invalidate; safe methods and error responses do not.
    #[test]
    fn unsafe_methods_invalidate_on_non_error() {
        let m = |s: &str| Method::from_bytes(s.as_bytes()).unwrap();
        for method in ["POST", "PUT", "DELETE", "PATCH", "M-SEARCH", "PURGE"] {
            assert!(invalidates(&m(method), status(200)), "{method}");
            assert!(invalidates(&m(method), status(303)), "{method}");
            assert!(!invalidates(&m(method), status(404)), "{method}");
            assert!(!invalidates(&m(method), status(500)), "{method}");
        }
        for method in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            assert!(!invalidates(&m(method), status(200)), "{method}");
        }
    }

    /// RFC 9111 §4.4: Location and Content-Location name further targets.
    #[test]
    fn invalidation_locations_lists_location_targets() {
        let headers = h(&[
            ("location", "/new"),
            ("content-location", " /other "),
            ("etag", "\"x\""),
        ]);
        assert_eq!(invalidation_locations(&headers), ["/new", "/other"]);
        assert!(invalidation_locations(&HeaderMap::new()).is_empty());
    }

    proptest::proptest! {
        /// Hostile Date/Expires/Age/Last-Modified/Cache-Control bytes never panic
        /// anywhere in the policy.
        #[test]
        fn policy_never_panics_on_hostile_fields(
            values in proptest::collection::vec(proptest::collection::vec(32u8..=255, 0..80), 5),
            at in 0u64..10_000_000,
        ) {
            let names = ["date", "expires", "age", "last-modified", "cache-control"];
            let mut headers = HeaderMap::new();
            for (name, value) in names.iter().zip(&values) {
                if let Ok(v) = HeaderValue::from_bytes(value) {
                    headers.append(*name, v);
                }
            }
            let cc = CacheControl::from_headers(&headers);
            let stored = StoredTiming::new(status(200), &headers, &cc, t(0), t(1), &HeuristicConfig::default());
            let _ = reuse(&stored, &cc, &ReuseConfig::default(), t(at));
            let _ = storable(&Method::GET, &headers, status(200), &headers, &StorageConfig::default());
            let age = current_age(&headers, t(1), t(0), t(at));
            proptest::prop_assert!(age >= Duration::from_secs(at.saturating_sub(1)));
        }
    }
}
