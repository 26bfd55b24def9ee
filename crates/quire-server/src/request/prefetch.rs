//! Prefetches: requests a browser makes ahead of a navigation (`Sec-Purpose:
//! prefetch`, from speculation rules or `<link rel="prefetch">`), answered only
//! from the store.
//!
//! A page a reader may never open must not cost a render, a fill or a pass: a site
//! that announces prefetching (`quire serve`'s `Speculation-Rules`) would otherwise
//! let every hovered link make work. So a prefetch is served when the store holds a
//! usable response (fresh, or stale where stale may be served, without starting
//! the revalidation or the refresh-ahead a reader's hit would), and otherwise
//! answered at once with `503` and `Cache-Control: no-store`: the browser drops the
//! prefetch and the navigation, if it comes, is an ordinary request. Counted in
//! `quire_prefetches_refused_total`.

use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use quire_http::status::CacheStatus;

use crate::request::body::Body;

/// Whether the request is a prefetch: a member of its `Sec-Purpose` list (a
/// structured field, e.g. `prefetch`, `prefetch;prerender`) is the token
/// `prefetch`.
pub(crate) fn is_prefetch(headers: &HeaderMap) -> bool {
    headers
        .get_all("sec-purpose")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|member| member.split(';').next().map(str::trim) == Some("prefetch"))
}

/// The answer to a prefetch the store cannot serve as it is.
pub(crate) fn refused() -> Response<Body> {
    let mut r = crate::request::reply::plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "not prefetched: only stored pages are\n",
        CacheStatus::default().with_detail("prefetch"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purpose(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("sec-purpose", v.parse().unwrap());
        h
    }

    #[test]
    fn prefetch_is_a_member_of_sec_purpose() {
        assert!(is_prefetch(&purpose("prefetch")));
        assert!(is_prefetch(&purpose("prefetch;prerender")));
        assert!(is_prefetch(&purpose("prefetch; anonymous-client-ip")));
        assert!(is_prefetch(&purpose("other, prefetch")));
        assert!(!is_prefetch(&purpose("prefetchx")));
        assert!(!is_prefetch(&purpose("\"prefetch\"")));
        assert!(!is_prefetch(&HeaderMap::new()));
    }
}
