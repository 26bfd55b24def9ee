//! Tests of `freshness`.

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
    for bad in ["1.5", "-1", "abc", "abc, 2", ", 2", ""] {
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

/// RFC 9111 §5.1: of a list-based Age, the first member counts; of several lines,
/// the largest (conservative: it can only make a response stale sooner).
#[test]
fn list_age_uses_the_first_member() {
    let at = |lines: &[&str]| {
        let mut headers = h(&[("date", date(0))]);
        for l in lines {
            headers.append(AGE, http::HeaderValue::from_str(l).unwrap());
        }
        current_age(&headers, t(0), t(0), t(0)).as_secs()
    };
    assert_eq!(at(&["7200,0"]), 7200);
    assert_eq!(at(&["0, 7200"]), 0);
    assert_eq!(at(&["3600, 3600"]), 3600);
    assert_eq!(at(&["5 , x"]), 5);
    assert_eq!(at(&["0", "7200"]), 7200);
    assert_eq!(at(&["7200", "abc"]), 7200);
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

/// An expired timing (everything held made stale at once) is revalidated on every
/// use: never served stale while revalidating, to `max-stale`, or on an error.
#[test]
fn an_expired_timing_is_never_served_stale() {
    let stored = timing(&[(
        "cache-control",
        "max-age=3600, stale-while-revalidate=600, stale-if-error=600",
    )])
    .expired();
    assert_eq!(decide(&stored, &[], 5), REVALIDATE);
    assert_eq!(
        decide(&stored, &[("cache-control", "max-stale")], 5),
        REVALIDATE
    );
    let grace = ReuseConfig {
        stale_while_revalidate_grace: Duration::from_secs(60),
        stale_if_error_grace: Duration::from_secs(60),
    };
    let none = CacheControl::default();
    assert_eq!(reuse(&stored, &none, &grace, t(5)), REVALIDATE);
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

// ---- refresh-ahead ----

#[test]
fn refresh_is_due_only_in_the_last_share_of_a_fresh_life() {
    let s = timing(&[("date", date(0)), ("cache-control", "max-age=100")]);
    assert!(!refresh_due(&s, 0.1, t(50)));
    assert!(
        !refresh_due(&s, 0.1, t(90)),
        "exactly a tenth left is not less"
    );
    assert!(refresh_due(&s, 0.1, t(91)));
    assert!(refresh_due(&s, 0.1, t(99)));
    assert!(!refresh_due(&s, 0.1, t(100)), "stale: not refresh-ahead's");
    assert!(!refresh_due(&s, 0.0, t(95)), "0 is off");
    let no_cache = timing(&[
        ("date", date(0)),
        ("cache-control", "max-age=100, no-cache"),
    ]);
    assert!(!refresh_due(&no_cache, 0.1, t(95)));
    let none = timing(&[("date", date(0)), ("cache-control", "no-store")]);
    assert!(!refresh_due(&none, 0.1, t(95)));
}

#[test]
fn a_response_that_arrived_inside_its_window_is_never_refreshed_ahead() {
    // Received with 95 of its 100 seconds gone (an upstream cache's `Age`): a
    // refresh would arrive as old, so none is due, ever.
    let old = timing(&[
        ("date", date(0)),
        ("age", "95"),
        ("cache-control", "max-age=100"),
    ]);
    for at in [0, 1, 3, 4] {
        assert!(!refresh_due(&old, 0.1, t(at)), "at {at}");
    }
    // One with a little more than a tenth left on arrival is refreshed once due.
    let young = timing(&[
        ("date", date(0)),
        ("age", "80"),
        ("cache-control", "max-age=100"),
    ]);
    assert!(!refresh_due(&young, 0.1, t(5)));
    assert!(refresh_due(&young, 0.1, t(15)));
}
