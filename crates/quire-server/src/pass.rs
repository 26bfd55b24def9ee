//! Requests the cache does not answer: passed to the origin as the client sent them,
//! the answer streamed back untouched but for hop-by-hop fields and `Cache-Status`.
//! After an unsafe method succeeds, the URL and the same-origin `Location` /
//! `Content-Location` targets are invalidated (RFC 9111 §4.4).

use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use quire_http::freshness;
use quire_http::key::{self, NormalizedUrl};
use quire_http::status::CacheStatus;

use crate::body::Body;
use crate::metrics::Outcome;
use crate::origin::{self, OriginError};
use crate::purge;
use crate::state::Ctx;

/// Passes `req` to the origin and streams its answer back. `url` is the request's
/// normalised URL (for invalidation), `status` quire's `Cache-Status` member.
pub async fn pass(
    ctx: &Arc<Ctx>,
    req: Request<Incoming>,
    peer: SocketAddr,
    url: Option<&NormalizedUrl>,
    status: CacheStatus,
    outcome: Outcome,
) -> (Response<Body>, Outcome) {
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    let mut headers = origin::pass_headers(&parts.headers, peer);
    if !headers.contains_key(header::HOST) {
        // HTTP/2 carries the host in :authority.
        if let Some(v) = parts
            .uri
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        {
            headers.insert(header::HOST, v);
        }
    }
    let mut out = Request::new(body.boxed_unsync());
    *out.method_mut() = parts.method;
    *out.uri_mut() = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    *out.version_mut() = http::Version::HTTP_11;
    *out.headers_mut() = headers;
    let t0 = std::time::Instant::now();
    let resp = ctx.origin.send(out).await;
    ctx.metrics.record_origin(t0.elapsed(), resp.is_err());
    let resp = match resp {
        Ok(r) => r,
        Err(e) => return (origin_error(&e, status), Outcome::Error),
    };
    let (mut rparts, rbody) = resp.into_parts();
    origin::strip_hop_by_hop(&mut rparts.headers);
    for n in crate::miss::NOT_SENT {
        rparts.headers.remove(n);
    }
    if let Some(url) = url {
        if freshness::invalidates(&method, rparts.status) {
            invalidate(ctx, url, &rparts.headers);
        }
    }
    let cs = status.append_to_lines(rparts.headers.get_all("cache-status"));
    rparts.headers.insert("cache-status", cs);
    (Response::from_parts(rparts, Body::Origin(rbody)), outcome)
}

/// RFC 9111 §4.4: removes the URL and the same-origin targets of `Location` and
/// `Content-Location`.
fn invalidate(ctx: &Ctx, url: &NormalizedUrl, resp_headers: &http::HeaderMap) {
    let mut targets = vec![url.clone()];
    for loc in freshness::invalidation_locations(resp_headers) {
        if let Some(t) = resolve(url, loc, &ctx.keys) {
            // Same origin only (§4.4: "only ... if the host part is the same").
            if t.host() == url.host() && t.port() == url.port() && t.scheme() == url.scheme() {
                targets.push(t);
            }
        }
    }
    for t in targets {
        purge::hard(ctx, &purge::Target::Url(t));
    }
}

/// Resolves a `Location`-style reference against the request URL (RFC 3986 §5.2,
/// for the forms origins send: absolute, absolute-path, and relative-path).
pub fn resolve(
    base: &NormalizedUrl,
    reference: &str,
    cfg: &key::KeyConfig,
) -> Option<NormalizedUrl> {
    if reference.contains("://") {
        return key::normalize_absolute(reference, cfg).ok();
    }
    let origin = match base.port() {
        Some(p) => format!("{}://{}:{p}", base.scheme(), base.host()),
        None => format!("{}://{}", base.scheme(), base.host()),
    };
    let abs = if reference.starts_with("//") {
        format!("{}:{reference}", base.scheme())
    } else if reference.starts_with('/') {
        format!("{origin}{reference}")
    } else {
        let dir = &base.path()[..base.path().rfind('/').map_or(0, |i| i + 1)];
        format!("{origin}{dir}{reference}")
    };
    key::normalize_absolute(&abs, cfg).ok()
}

/// The answer to a request the origin did not serve.
pub fn origin_error(e: &OriginError, status: CacheStatus) -> Response<Body> {
    let code = e.status();
    let status = status.with_detail(match e {
        OriginError::Timeout => "origin-timeout",
        OriginError::Failed(_) => "origin-error",
    });
    crate::service::plain(
        code,
        &format!("{}\n", code.canonical_reason().unwrap_or("error")),
        status,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_resolve_against_the_request() {
        let cfg = key::KeyConfig::default();
        let base = key::normalize_absolute("http://h/a/b?x=1", &cfg).unwrap();
        let r = |s: &str| resolve(&base, s, &cfg).map(|u| u.as_str().to_owned());
        assert_eq!(r("/c").as_deref(), Some("http://h/c"));
        assert_eq!(r("c").as_deref(), Some("http://h/a/c"));
        assert_eq!(r("../c").as_deref(), Some("http://h/c"));
        assert_eq!(r("http://other/x").as_deref(), Some("http://other/x"));
        assert_eq!(r("//h/z").as_deref(), Some("http://h/z"));
    }
}
