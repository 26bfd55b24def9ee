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
//!    (`strip_connection_headers`, [`strip_private_fields`]) and records a
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

use crate::bypass::is_safe_method;
use crate::cache_control::{
    CacheControl, Delta, MaxStale, Qualified, Source, CDN_CACHE_CONTROL, SURROGATE_CONTROL,
};
use crate::syntax::trim_ows;

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
    /// (RFC 9213 §2.1). Default: `CDN-Cache-Control`, then `Surrogate-Control`.
    pub targeted_fields: Vec<HeaderName>,
    /// Heuristic freshness settings.
    pub heuristic: HeuristicConfig,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            store_private: false,
            store_set_cookie: false,
            targeted_fields: vec![CDN_CACHE_CONTROL, SURROGATE_CONTROL],
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
    if private_forbids(&cc, resp_headers) && !cfg.store_private {
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
fn heuristically_cacheable(status: StatusCode) -> bool {
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
fn vary_star(headers: &HeaderMap) -> bool {
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
#[cfg(test)]
fn freshness_lifetime(
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

/// RFC 9111 §5.1: `Age = delta-seconds`. "A cache encountering a message with a
/// list-based Age field value SHOULD use the first member of the field value,
/// discarding subsequent ones", and ignores the field if that member is not a
/// non-negative integer. Per line: its first member (`7200, 0` is 7200). Of several
/// lines the largest valid one counts: the conservative reading, since a larger age
/// can only make the response stale sooner.
fn age_value(headers: &HeaderMap) -> Duration {
    let secs = headers
        .get_all(AGE)
        .iter()
        .filter_map(|line| {
            let bytes = line.as_bytes();
            let first = bytes.split(|&b| b == b',').next().unwrap_or(bytes);
            let digits = trim_ows(first);
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
    pub(crate) request_time: SystemTime,
    /// When the response was received.
    pub(crate) response_time: SystemTime,
    /// The response's `Date` (or `response_time`), kept for serving (it is not
    /// rewritten on hits).
    pub date: SystemTime,
    /// `corrected_initial_age` (RFC 9111 §4.2.3).
    pub(crate) age_at_store: Duration,
    /// The freshness lifetime (RFC 9111 §4.2.1, or the heuristic one of §4.2.2 when
    /// allowed); `None` means stale from the start.
    pub freshness_lifetime: Option<Duration>,
    /// Response `stale-while-revalidate` window (RFC 5861 §3), if valid.
    pub(crate) stale_while_revalidate: Option<Duration>,
    /// Response `stale-if-error` window (RFC 5861 §4), if valid.
    pub(crate) stale_if_error: Option<Duration>,
    /// Flags from the response's directives and head.
    pub flags: TimingFlags,
}

/// Boolean facts of a stored response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimingFlags {
    /// `no-cache` in either form: every reuse needs validation (RFC 9111 §5.2.2.4).
    pub(crate) no_cache: bool,
    /// `must-revalidate`, `proxy-revalidate` or `s-maxage`: never served stale
    /// (RFC 9111 §4.2.4, §5.2.2.2, §5.2.2.8, §5.2.2.10).
    pub(crate) forbids_stale: bool,
    /// `ETag` or `Last-Modified` is present: revalidation can be conditional.
    pub(crate) has_validator: bool,
    /// The lifetime is heuristic (RFC 9111 §4.2.2).
    pub heuristic: bool,
    /// `immutable` (RFC 8246).
    pub(crate) immutable: bool,
}

impl StoredTiming {
    /// When the response was received.
    pub fn received(&self) -> SystemTime {
        self.response_time
    }

    /// This timing with no freshness left and no stale serving: every reuse then
    /// needs a revalidation, whatever `stale-while-revalidate`, `stale-if-error`,
    /// a configured grace or a request's `max-stale` would allow (a soft purge of
    /// everything received before some instant, used when a cluster node cannot
    /// know which of its copies a purge removed elsewhere: serving one stale would
    /// undo that purge).
    pub fn expired(mut self) -> StoredTiming {
        self.freshness_lifetime = Some(Duration::ZERO);
        self.flags.forbids_stale = true;
        self
    }

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

    /// RFC 9111 §4.2: `response_is_fresh = (freshness_lifetime > current_age)`,
    /// at the current age `age`.
    fn is_fresh_at_age(&self, age: Duration) -> bool {
        self.freshness_lifetime
            .is_some_and(|lifetime| lifetime > age)
    }

    /// How long past its lifetime the response is at the current age `age` (zero
    /// while fresh).
    fn staleness_at_age(&self, age: Duration) -> Duration {
        age.saturating_sub(self.freshness_lifetime.unwrap_or(Duration::ZERO))
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

/// Refresh-ahead: whether a fresh stored response is within the last `share` of its
/// freshness lifetime (so a background revalidation now keeps it from expiring
/// while it is in demand). Never for `share` ≤ 0, a response stale already, one
/// that must be validated on every reuse anyway, or one that arrived already that
/// old (an `Age` or `Date` that put it in the window when it was stored): a
/// refresh of it would arrive just as old, and each hit would ask again. So each
/// stored response is refreshed ahead at most once.
pub fn refresh_due(stored: &StoredTiming, share: f64, now: SystemTime) -> bool {
    if share <= 0.0 || stored.flags.no_cache {
        return false;
    }
    let Some(life) = stored.freshness_lifetime else {
        return false;
    };
    let window = life.as_secs_f64() * share.min(1.0);
    let life_left = |age: Duration| life.saturating_sub(age).as_secs_f64();
    let age = stored.age(now);
    age < life && life_left(age) < window && life_left(stored.age_at_store) >= window
}

/// Decides how a stored response may be used for a request with directives `req_cc`
/// at `now` (RFC 9111 §4, §4.2.4, §5.2.1; RFC 5861).
pub fn reuse(
    stored: &StoredTiming,
    req_cc: &CacheControl,
    cfg: &ReuseConfig,
    now: SystemTime,
) -> Decision {
    // (The age is reckoned once: every rule below reads the same moment.)
    let age = stored.age(now);
    let revalidate = Decision::MustRevalidate {
        stale_if_error: stale_if_error_window(stored, req_cc, cfg, age),
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
    // RFC 9111 §5.2.1.1: the client does not accept a response older than max-age.
    if let Some(Delta::Secs(max_age)) = req_cc.max_age {
        if age > Duration::from_secs(max_age) {
            return revalidate;
        }
    }
    if stored.is_fresh_at_age(age) {
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
    let staleness = stored.staleness_at_age(age);
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
/// `age`: the response's age now.
fn stale_if_error_window(
    stored: &StoredTiming,
    req_cc: &CacheControl,
    cfg: &ReuseConfig,
    age: Duration,
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
    limit.checked_sub(age).filter(|left| !left.is_zero())
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
fn strip_connection_headers(headers: &mut HeaderMap) {
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

/// RFC 9111 §5.2.2.7: a shared cache MUST NOT store a private response. The
/// qualified form forbids storing the fields it names; a response that carries one
/// is not stored at all, so the client it was meant for still gets the field (its
/// answer passes through) and no later client can (quire answers a fill's waiters
/// from the store, so a stored copy without the field would withhold it from its own
/// client). One that names only absent fields is stored as usual.
fn private_forbids(cc: &CacheControl, resp_headers: &HeaderMap) -> bool {
    match &cc.private {
        Some(Qualified::All) => true,
        Some(Qualified::Fields(names)) => {
            names.iter().any(|n| resp_headers.contains_key(n.as_str()))
        }
        None => false,
    }
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
/// replaces all stored lines of that name, except those in `NOT_UPDATED` and those
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
    !is_safe_method(method) && (status.is_success() || status.is_redirection())
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

#[cfg(test)]
mod tests;
