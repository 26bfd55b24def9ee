//! Who is served from the anonymous cache at all.
//!
//! quire caches for anonymous readers. Before any lookup, [`bypass`] decides whether a
//! request must go to the origin instead: an unsafe or uncacheable method, a request
//! with credentials (`Authorization`), or a session cookie. Its answer carries the
//! `detail=` token of the `Cache-Status` header (RFC 9211 §2.7), e.g.
//! `quire; fwd=bypass; detail=cookie`.
//!
//! Key decision: **when in doubt, bypass.** A bypass costs one origin request; serving
//! a signed-in reader's page to an anonymous one (or the reverse) is a data leak. So
//! every cookie counts as a session unless it is on the ignore list of analytics
//! cookies, cookie names are compared case-sensitively (RFC 6265 §4.1.1: names are
//! case-sensitive, and a near-miss like `_GA` is not on the list), unparseable or
//! oversized `Cookie` headers count as sessions, and any `Authorization` line counts
//! as credentials, empty or not.
//!
//! Not a bypass: `Cache-Control: no-store` in a request. RFC 9111 §5.2.1.5 forbids
//! *storing* the response to such a request, not *reusing* a stored one, so a hit is
//! served normally and the fill path skips storing on a miss (the storability
//! decision belongs to `freshness`). Likewise `no-cache` / `max-age=0` request
//! revalidation (§5.2.1.4, §5.2.1.1), which is a freshness decision, not a bypass.

use std::fmt;

use crate::syntax::trim_ows;
use http::header::{AUTHORIZATION, COOKIE};
use http::{HeaderMap, Method};

/// At most this many cookie pairs are examined per request; a request with more is
/// treated as carrying a session (fail closed).
const COOKIE_PAIRS_MAX: usize = 256;

/// At most this many bytes of `Cookie` field values are examined per request; a
/// request with more is treated as carrying a session (fail closed). Browsers cap a
/// cookie at 4096 bytes and send well under this in total.
const COOKIE_BYTES_MAX: usize = 16 * 1024;

/// Which requests bypass the anonymous cache.
///
/// Patterns are exact cookie names or `prefix*` (a trailing `*` matches any suffix,
/// including none), compared case-sensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BypassConfig {
    /// Cookies that mark a signed-in session. Empty (the default) means every cookie
    /// not matched by `ignore_cookies` is a session cookie. When non-empty, only
    /// cookies matching these patterns are sessions, and a match here wins over
    /// `ignore_cookies`.
    pub session_cookies: Vec<String>,
    /// Cookies that never mark a session: analytics and bot-challenge cookies whose
    /// value does not change the page.
    pub ignore_cookies: Vec<String>,
    /// Serve requests with `Authorization` from the cache. Off by default: the
    /// DESIGN.md contract is stricter than RFC 9111 §3.5, which would allow reuse for
    /// responses marked `public`, `s-maxage` or `must-revalidate`. When on, the
    /// caller still has to apply §3.5 to what it stores.
    pub allow_authorization: bool,
}

/// The default ignore list: analytics, advertising and bot-challenge cookies set on
/// the site's own domain by third-party scripts or a CDN in front of quire.
///
/// Consent cookies (`cookieconsent_status`, `CookieConsent`, ...) are deliberately
/// absent: a site may render its consent banner server-side from them.
const DEFAULT_IGNORE_COOKIES: &[&str] = &[
    "_ga*",         // Google Analytics: _ga, _ga_<id>, _gat, _gac_*
    "_gid",         // Google Analytics
    "_gat*",        // Google Analytics throttling (also covered by _ga*; listed for clarity)
    "_gcl_*",       // Google Ads conversion linker
    "_fbp",         // Meta pixel
    "_fbc",         // Meta click id
    "__utm*",       // legacy Urchin / Google Analytics
    "_hj*",         // Hotjar
    "_pk_*",        // Matomo
    "_clck",        // Microsoft Clarity
    "_clsk",        // Microsoft Clarity
    "_uetsid",      // Microsoft Advertising
    "_uetvid",      // Microsoft Advertising
    "__hstc",       // HubSpot
    "__hssc",       // HubSpot
    "__hssrc",      // HubSpot
    "hubspotutk",   // HubSpot
    "cf_clearance", // Cloudflare challenge passed; says nothing about the reader
    "__cf_bm",      // Cloudflare bot management
];

impl Default for BypassConfig {
    fn default() -> Self {
        BypassConfig {
            session_cookies: Vec::new(),
            ignore_cookies: DEFAULT_IGNORE_COOKIES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            allow_authorization: false,
        }
    }
}

/// Why a request is not served from the anonymous cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Bypass {
    /// The method is not GET or HEAD. If it is unsafe (see `is_safe_method`), the
    /// caller also invalidates the URL after the origin answers (RFC 9111 §4.4).
    Method,
    /// The request carries `Authorization` (RFC 9111 §3.5) and the config does not
    /// allow serving it from the cache.
    Authorization,
    /// The request carries a session cookie.
    Cookie,
}

impl Bypass {
    /// The `detail=` token for `Cache-Status` (RFC 9211 §2.7).
    pub const fn detail(self) -> &'static str {
        match self {
            Bypass::Method => "method",
            Bypass::Authorization => "authorization",
            Bypass::Cookie => "cookie",
        }
    }
}

impl fmt::Display for Bypass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.detail())
    }
}

/// Decides whether a request bypasses the anonymous cache, and why. `None` means it
/// may be answered from the cache. Checks run in a fixed order — method,
/// authorization, cookie — so the reported detail is deterministic.
pub fn bypass(method: &Method, headers: &HeaderMap, cfg: &BypassConfig) -> Option<Bypass> {
    // Only GET and HEAD are answered from cache (RFC 9111 §2: other methods'
    // responses are rarely reusable; a HEAD is answered from the GET entry, RFC
    // 9110 §9.3.2). OPTIONS and TRACE are safe but not served from cache.
    if method != Method::GET && method != Method::HEAD {
        return Some(Bypass::Method);
    }
    // RFC 9111 §3.5: a shared cache must not reuse a response to a request with
    // Authorization unless the response allows it; quire's default is stricter.
    if !cfg.allow_authorization && headers.contains_key(AUTHORIZATION) {
        return Some(Bypass::Authorization);
    }
    if has_session_cookie(headers, cfg) {
        return Some(Bypass::Cookie);
    }
    None
}

/// RFC 9110 §9.2.1: GET, HEAD, OPTIONS and TRACE are safe. Every other method,
/// including unknown ones such as `M-SEARCH`, is unsafe, and a non-error response to
/// it invalidates the target URL (RFC 9111 §4.4).
pub(crate) fn is_safe_method(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// True when any cookie in the request marks a session under `cfg`.
///
/// Parses the `Cookie` lines leniently as RFC 6265 §4.2.1 `cookie-string`s (several
/// lines, `;`-separated pairs, optional whitespace; an HTTP/2 client sends one line
/// per cookie, RFC 9113 §8.2.3). A pair without `=` is a cookie with an empty name, as
/// browsers read it (RFC 6265bis §5.6); it is not on any list and so counts as a
/// session in the default mode. Oversized input fails closed.
fn has_session_cookie(headers: &HeaderMap, cfg: &BypassConfig) -> bool {
    let mut bytes = 0usize;
    let mut pairs = 0usize;
    for line in headers.get_all(COOKIE) {
        let line = line.as_bytes();
        bytes = bytes.saturating_add(line.len());
        if bytes > COOKIE_BYTES_MAX {
            return true;
        }
        for pair in line.split(|&b| b == b';') {
            let pair = trim_ows(pair);
            if pair.is_empty() {
                continue;
            }
            pairs += 1;
            if pairs > COOKIE_PAIRS_MAX {
                return true;
            }
            let name = match pair.iter().position(|&b| b == b'=') {
                Some(eq) => trim_ows(&pair[..eq]),
                None => &b""[..],
            };
            if is_session_name(name, cfg) {
                return true;
            }
        }
    }
    false
}

fn is_session_name(name: &[u8], cfg: &BypassConfig) -> bool {
    if cfg.session_cookies.is_empty() {
        !matches_any(name, &cfg.ignore_cookies)
    } else {
        matches_any(name, &cfg.session_cookies)
    }
}

/// Exact name or `prefix*`, case-sensitive (RFC 6265 §4.1.1 cookie names).
fn matches_any(name: &[u8], patterns: &[String]) -> bool {
    patterns.iter().any(|p| {
        let p = p.as_bytes();
        match p.strip_suffix(b"*") {
            Some(prefix) => name.starts_with(prefix),
            None => name == p,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

    fn req(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn get(pairs: &[(&str, &str)]) -> Option<Bypass> {
        bypass(&Method::GET, &req(pairs), &BypassConfig::default())
    }

    /// A plain anonymous GET or HEAD is served from cache.
    #[test]
    fn anonymous_get_and_head_are_served_from_cache() {
        assert_eq!(get(&[("accept", "text/html")]), None);
        assert_eq!(
            bypass(&Method::HEAD, &HeaderMap::new(), &BypassConfig::default()),
            None
        );
    }

    /// Only GET/HEAD are answered from cache; every other method, known or not, is
    /// forwarded (RFC 9111 §4.4 lets the caller invalidate afterwards).
    #[test]
    fn other_methods_bypass_with_method_detail() {
        for m in [
            "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "M-SEARCH", "PURGE",
        ] {
            let m = Method::from_bytes(m.as_bytes()).unwrap();
            let b = bypass(&m, &HeaderMap::new(), &BypassConfig::default());
            assert_eq!(b, Some(Bypass::Method), "{m}");
            assert_eq!(b.unwrap().detail(), "method");
        }
    }

    /// RFC 9110 §9.2.1: the four safe methods; unknown methods are unsafe.
    #[test]
    fn safe_methods_are_exactly_the_rfc_four() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            assert!(is_safe_method(&Method::from_bytes(m.as_bytes()).unwrap()));
        }
        for m in ["POST", "PUT", "DELETE", "PATCH", "M-SEARCH", "CONNECT"] {
            assert!(!is_safe_method(&Method::from_bytes(m.as_bytes()).unwrap()));
        }
    }

    /// RFC 9111 §3.5: Authorization bypasses by default, even when empty.
    #[test]
    fn authorization_bypasses_by_default() {
        assert_eq!(
            get(&[("authorization", "Bearer x")]),
            Some(Bypass::Authorization)
        );
        assert_eq!(get(&[("authorization", "")]), Some(Bypass::Authorization));
        assert_eq!(Bypass::Authorization.detail(), "authorization");
    }

    /// `allow_authorization` hands the §3.5 decision to the caller.
    #[test]
    fn allow_authorization_serves_credentialed_requests() {
        let cfg = BypassConfig {
            allow_authorization: true,
            ..BypassConfig::default()
        };
        let h = req(&[("authorization", "Basic eDp5")]);
        assert_eq!(bypass(&Method::GET, &h, &cfg), None);
    }

    /// The method is checked first, then Authorization, then cookies.
    #[test]
    fn detail_order_is_method_authorization_cookie() {
        let h = req(&[("authorization", "x"), ("cookie", "sid=1")]);
        let cfg = BypassConfig::default();
        assert_eq!(bypass(&Method::POST, &h, &cfg), Some(Bypass::Method));
        assert_eq!(bypass(&Method::GET, &h, &cfg), Some(Bypass::Authorization));
        assert_eq!(get(&[("cookie", "sid=1")]), Some(Bypass::Cookie));
    }

    /// Analytics cookies on the default ignore list do not bypass.
    #[test]
    fn analytics_cookies_are_ignored() {
        let c = "_ga=GA1.2.3; _ga_ABC123=GS1; _gid=x; _gat_UA-1=1; _fbp=fb.1; \
                 __utma=1; _hjSessionUser_1=x; _pk_id.1.abc=x; _clck=x; cf_clearance=y";
        assert_eq!(get(&[("cookie", c)]), None);
    }

    /// Default mode: any cookie not on the ignore list is a session.
    #[test]
    fn unknown_cookie_is_a_session_by_default() {
        assert_eq!(
            get(&[("cookie", "_ga=1; wp_logged_in=abc")]),
            Some(Bypass::Cookie)
        );
        assert_eq!(get(&[("cookie", "theme=dark")]), Some(Bypass::Cookie));
    }

    /// RFC 6265 §4.1.1: names are case-sensitive, so `_GA` is not `_ga` (fail closed).
    #[test]
    fn cookie_names_match_case_sensitively() {
        assert_eq!(get(&[("cookie", "_GA=1")]), Some(Bypass::Cookie));
        assert_eq!(get(&[("cookie", "_gid2=1")]), Some(Bypass::Cookie));
    }

    /// RFC 6265 §4.2.1 / RFC 9113 §8.2.3: several Cookie lines are all examined.
    #[test]
    fn multiple_cookie_lines_are_all_checked() {
        assert_eq!(get(&[("cookie", "_ga=1"), ("cookie", "_gid=2")]), None);
        assert_eq!(
            get(&[("cookie", "_ga=1"), ("cookie", "session=2")]),
            Some(Bypass::Cookie)
        );
    }

    /// Whitespace and empty pairs are tolerated; an empty Cookie is no cookie.
    #[test]
    fn cookie_whitespace_and_empty_pairs() {
        assert_eq!(get(&[("cookie", "")]), None);
        assert_eq!(get(&[("cookie", " ; ;; \t")]), None);
        assert_eq!(get(&[("cookie", "  _ga = 1 ;\t_gid=2;")]), None);
    }

    /// A pair without `=` (nameless cookie, RFC 6265bis §5.6) counts as a session.
    #[test]
    fn nameless_cookie_counts_as_session() {
        assert_eq!(get(&[("cookie", "_ga=1; opaque")]), Some(Bypass::Cookie));
        assert_eq!(get(&[("cookie", "=value")]), Some(Bypass::Cookie));
    }

    /// An explicit session list: only matching cookies bypass, and a session match
    /// beats the ignore list.
    #[test]
    fn explicit_session_list_narrows_bypass() {
        let cfg = BypassConfig {
            session_cookies: vec!["quire_session".into(), "wordpress_logged_in_*".into()],
            ..BypassConfig::default()
        };
        let check = |c: &str| bypass(&Method::GET, &req(&[("cookie", c)]), &cfg);
        assert_eq!(check("theme=dark; lang=en"), None);
        assert_eq!(check("quire_session=abc"), Some(Bypass::Cookie));
        assert_eq!(check("wordpress_logged_in_5f2=x"), Some(Bypass::Cookie));
        assert_eq!(check("quire_session_old=abc"), None);
        let both = BypassConfig {
            session_cookies: vec!["_ga".into()],
            ..BypassConfig::default()
        };
        let h = req(&[("cookie", "_ga=1")]);
        assert_eq!(bypass(&Method::GET, &h, &both), Some(Bypass::Cookie));
    }

    /// `prefix*` matches the bare prefix too.
    #[test]
    fn prefix_pattern_matches_empty_suffix() {
        assert!(matches_any(b"_ga", &["_ga*".into()]));
        assert!(matches_any(b"_ga_X", &["_ga*".into()]));
        assert!(!matches_any(b"_g", &["_ga*".into()]));
        assert!(!matches_any(b"x_ga", &["_ga*".into()]));
    }

    /// Oversized cookie input fails closed instead of being scanned without bound.
    #[test]
    fn oversized_cookies_fail_closed() {
        let many = vec!["_ga=1"; COOKIE_PAIRS_MAX + 1].join("; ");
        assert_eq!(get(&[("cookie", &many)]), Some(Bypass::Cookie));
        let few = vec!["_ga=1"; COOKIE_PAIRS_MAX].join("; ");
        assert_eq!(get(&[("cookie", &few)]), None);
        let big = format!("_ga={}", "x".repeat(COOKIE_BYTES_MAX));
        assert_eq!(get(&[("cookie", &big)]), Some(Bypass::Cookie));
    }

    /// Non-UTF-8 bytes in a cookie name are not on any list: session.
    #[test]
    fn obs_text_cookie_name_is_a_session() {
        let mut h = HeaderMap::new();
        h.insert(COOKIE, HeaderValue::from_bytes(b"\xff\xfe=1").unwrap());
        assert_eq!(
            bypass(&Method::GET, &h, &BypassConfig::default()),
            Some(Bypass::Cookie)
        );
    }

    proptest! {
        /// Arbitrary Cookie bytes never panic, and a request that also carries a
        /// known session cookie always bypasses.
        #[test]
        fn hostile_cookie_bytes_never_panic(
            lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..6)
        ) {
            let mut h = HeaderMap::new();
            for l in &lines {
                if let Ok(v) = HeaderValue::from_bytes(l) {
                    h.append(COOKIE, v);
                }
            }
            let cfg = BypassConfig::default();
            let _ = bypass(&Method::GET, &h, &cfg);
            h.append(COOKIE, HeaderValue::from_static("sid=1"));
            prop_assert_eq!(bypass(&Method::GET, &h, &cfg), Some(Bypass::Cookie));
        }

        /// Any mix of ignored analytics cookies alone never bypasses.
        #[test]
        fn only_ignored_cookies_never_bypass(
            idx in proptest::collection::vec(0usize..DEFAULT_IGNORE_COOKIES.len(), 1..10),
            suffix in "[a-zA-Z0-9_.]{0,8}",
            sep in "[ \t]{0,2}",
        ) {
            let cookies: Vec<String> = idx
                .iter()
                .map(|&i| {
                    let p = DEFAULT_IGNORE_COOKIES[i];
                    match p.strip_suffix('*') {
                        Some(pre) => format!("{pre}{suffix}=v"),
                        None => format!("{p}=v"),
                    }
                })
                .collect();
            let line = cookies.join(&format!(";{sep}"));
            prop_assert_eq!(get(&[("cookie", &line)]), None);
        }
    }
}
