//! Requests the cache does not answer: passed to the origin as the client sent them,
//! the answer streamed back untouched but for hop-by-hop fields and `Cache-Status`.
//! After an unsafe method succeeds, the URL and the same-origin `Location` /
//! `Content-Location` targets are invalidated (RFC 9111 §4.4).
//!
//! An upstream that asks for it ([`Upstream::compress_passes`], true for
//! `quire serve`'s renderer) has its passed answers compressed on the way out, as
//! any web server compresses dynamic pages: a signed-in reader of a published site
//! gets the same few kilobytes of gzip or brotli an anonymous one gets from the
//! cache, only computed per request ([`encode_passed`]). An HTTP origin's answers
//! stay untouched: compressing them is the origin's business.
//!
//! [`Upstream::compress_passes`]: crate::upstream::Upstream::compress_passes

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Response};
use http_body_util::BodyExt;
use quire_http::cache_control::CacheControl;
use quire_http::encoding::{self, AcceptEncoding, Coding};
use quire_http::freshness;
use quire_http::key::{self, NormalizedUrl};
use quire_http::status::CacheStatus;

use crate::edge::client::Client;
use crate::fill::compress::Levels;
use crate::fill::miss;
use crate::metrics::Outcome;
use crate::ops::access_log::Upstream;
use crate::ops::purge;
use crate::policy::Policy;
use crate::request::body::Body;
use crate::request::exchange::{Answered, Exchange};
use crate::request::reply;
use crate::state::Ctx;
use crate::upstream::error::{FailureKind, OriginError};
use crate::upstream::origin;
use crate::upstream::origin::OutBody;
use crate::upstream::{self, Ahead};

/// The budget slot a pass holds until the upstream's head is back (the body
/// streams without it): one for a safe method, none for a write, which is the
/// origin's to take (a sign-in has its own queue, a form its own rate limit; see
/// `crate::edge::budget`).
async fn pass_slot(
    ctx: &Ctx,
    method: &http::Method,
    headers: &http::HeaderMap,
    ip: std::net::IpAddr,
    policy: &Policy,
) -> Result<Option<crate::edge::budget::Slot>, crate::edge::budget::Refused> {
    if !method.is_safe() {
        return Ok(None);
    }
    let slot = ctx
        .crawlers
        .acquire(&ctx.budget, ip, headers, false, &policy.cfg.budget);
    let span = crate::trace::child("budget wait", crate::trace::Kind::Internal);
    let got = slot.await;
    crate::trace::end_budget_wait(span, got.is_ok());
    got.map(Some)
}

impl Exchange<'_> {
    /// Passes the request to the origin and streams its answer back, with `status`
    /// as quire's `Cache-Status` member; `outcome` is how it counts when it works.
    /// After an unsafe method succeeds, the URL is invalidated (RFC 9111 §4.4).
    pub(crate) async fn pass(self, status: CacheStatus, outcome: Outcome) -> Answered {
        let Exchange {
            ctx,
            req,
            client,
            url,
            policy,
            ..
        } = self;
        let _slot = match pass_slot(ctx, req.method(), req.headers(), client.ip, &policy).await {
            Ok(slot) => slot,
            Err(why) => {
                return (
                    reply::budget_refused(why.retry_after(), status),
                    Outcome::Error,
                )
            }
        };
        let method = req.method().clone();
        let accept = encoding::parse_accept_encoding(req.headers());
        let (mut out, body_failed) = outbound(req, &client, &url);
        let span = crate::trace::outbound(ctx.origin.span_name(), out.headers_mut());
        let t0 = std::time::Instant::now();
        let resp = crate::trace::within(span.as_ref(), ctx.origin.send(out)).await;
        crate::trace::end_outbound(span, &resp);
        let waited = t0.elapsed();
        ctx.metrics.record_origin(waited, resp.is_err());
        let resp = match resp {
            Ok(r) => r,
            Err(_) if body_failed.load(Ordering::Relaxed) => {
                return (reply::client_body_error(status), Outcome::Error)
            }
            Err(e) => return (reply::origin_error(&e, status), Outcome::Error),
        };
        let (mut rparts, mut rbody) = resp.into_parts();
        rparts.extensions.insert(Upstream {
            status: rparts.status.as_u16(),
            time: waited,
        });
        // What arrives at once is read before answering, so a body that fails at
        // once is a 502 the client can read rather than a status line and a cut
        // connection.
        rbody = match upstream::read_ahead(&mut rbody, miss::HOLD_WAIT, miss::HOLD_BYTES_MAX).await
        {
            Ahead::Failed(e) => {
                tracing::debug!(error = %e, "passed response body failed at once");
                return (reply::origin_error(&e, status), Outcome::Error);
            }
            Ahead::Ended(frames) => upstream::prepend(frames, rbody, true),
            Ahead::More(frames) => upstream::prepend(frames, rbody, false),
        };
        origin::strip_hop_by_hop(&mut rparts.headers);
        for n in miss::NOT_SENT {
            rparts.headers.remove(n);
        }
        if freshness::invalidates(&method, rparts.status) {
            invalidate(ctx, &url, &rparts.headers);
        }
        let cs = status.append_to_lines(rparts.headers.get_all("cache-status"));
        rparts.headers.insert("cache-status", cs);
        let coding = {
            use http_body::Body as _;
            ctx.origin
                .compress_passes()
                .then(|| passed_coding(&method, &accept, &rparts, rbody.size_hint().exact()))
                .flatten()
        };
        let body = match coding {
            Some(coding) => match encode_passed(ctx, coding, &mut rparts, rbody).await {
                Ok(b) => b,
                Err(e) => return (reply::origin_error(&e, status), Outcome::Error),
            },
            None => Body::Origin(rbody),
        };
        (Response::from_parts(rparts, body), outcome)
    }
}

/// The request as it goes to the origin: the client's, origin-form, HTTP/1.1, with
/// the fields [`origin::pass_headers`] forwards, marked with the normalised host
/// and path to route on ([`upstream::RouteBy`]). When the target carried an
/// authority (HTTP/2's `:authority`, an HTTP/1.1 absolute-form target) that
/// authority is the `Host` sent, whatever `Host` field came beside it: it is the
/// one the key was made from (RFC 9112 §3.2.3, RFC 9113 §8.3.1), so the origin
/// answers for the URL quire names. The flag turns true if the client's
/// own body fails while it is forwarded (a bad chunk, a hang-up): that fails the
/// exchange on the origin side too, and it is the client's 400, not the origin's
/// 502.
fn outbound(
    req: Request<OutBody>,
    client: &Client,
    url: &NormalizedUrl,
) -> (Request<OutBody>, Arc<AtomicBool>) {
    let (parts, body) = req.into_parts();
    let mut headers = origin::pass_headers(&parts.headers, client);
    origin::set_forwarded_proto(&mut headers, url.scheme());
    if let Some(v) = parts
        .uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
    {
        headers.insert(header::HOST, v);
    }
    let body_failed = Arc::new(AtomicBool::new(false));
    let flag = body_failed.clone();
    let body = body
        .map_err(move |e| {
            flag.store(true, Ordering::Relaxed);
            e
        })
        .boxed_unsync();
    let mut out = Request::new(body);
    *out.method_mut() = parts.method;
    *out.uri_mut() = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    *out.version_mut() = http::Version::HTTP_11;
    *out.headers_mut() = headers;
    out.extensions_mut().insert(upstream::RouteBy {
        host: url.host().to_owned(),
        path: url.path().to_owned(),
    });
    (out, body_failed)
}

/// Largest passed body compressed on the way out (bytes); larger ones stream as
/// they come. Compressing needs the whole body in memory, and pages are far smaller.
pub(crate) const PASS_COMPRESS_MAX: u64 = 1 << 20;

/// Per-request levels for passed answers: fast ones (libdeflate 6, brotli 4, zstd 3),
/// since the cost is paid on every request, unlike the fill levels paid once.
const PASS_LEVELS: Levels = Levels {
    gzip: 6,
    brotli: 4,
    zstd: 3,
};

/// The coding a passed answer is compressed into (when the upstream asks for that),
/// or `None` to pass it as it is: only for a 200 answer to a GET whose body is known
/// to be between [`crate::fill::compress::MIN_COMPRESS_BYTES`] and [`PASS_COMPRESS_MAX`],
/// not already coded, of a compressible type, without `no-transform` (RFC 9110
/// §7.7), and only into a coding the client accepts.
fn passed_coding(
    method: &http::Method,
    accept: &AcceptEncoding,
    head: &http::response::Parts,
    body_len: Option<u64>,
) -> Option<Coding> {
    if method != http::Method::GET
        || head.status != http::StatusCode::OK
        || head.headers.contains_key(header::CONTENT_ENCODING)
        || head.headers.contains_key(header::CONTENT_RANGE)
        || !crate::fill::compress::compressible(head.headers.get(header::CONTENT_TYPE))
        || CacheControl::from_headers(&head.headers).no_transform
    {
        return None;
    }
    let len = body_len?;
    if len < crate::fill::compress::MIN_COMPRESS_BYTES as u64 || len > PASS_COMPRESS_MAX {
        return None;
    }
    match encoding::choose(
        accept,
        &[Coding::Br, Coding::Zstd, Coding::Gzip, Coding::Identity],
        &encoding::DEFAULT_PREFS,
    )? {
        Coding::Identity => None,
        c => Some(c),
    }
}

/// Reads a body of at most [`PASS_COMPRESS_MAX`] bytes whole; a body that fails or
/// outgrows it is a protocol failure of the origin.
async fn read_all(mut body: crate::upstream::UpBody) -> Result<Vec<u8>, OriginError> {
    let protocol = |why: String| OriginError::failed(FailureKind::Protocol, why);
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| protocol(format!("reading the answer: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if (out.len() + data.len()) as u64 > PASS_COMPRESS_MAX {
                return Err(protocol("the answer outgrew its Content-Length".into()));
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// Reads the whole passed body and compresses it into `coding`, fixing the head:
/// `Content-Encoding`, `Vary: Accept-Encoding`, no `Content-Length` (the new length
/// is the body's), and a strong `ETag` made weak (RFC 9110 §8.8.1: the coded bytes
/// are not the identity's). A body that is not worth compressing goes out as it was.
async fn encode_passed(
    ctx: &Ctx,
    coding: Coding,
    head: &mut http::response::Parts,
    body: crate::upstream::UpBody,
) -> Result<Body, OriginError> {
    let identity = match tokio::time::timeout(ctx.origin.read_timeout(), read_all(body)).await {
        Err(_) => return Err(OriginError::Timeout),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(b)) => b,
    };
    let coded = match crate::fill::compress::encode(coding, &identity, &PASS_LEVELS) {
        Ok(c) if crate::fill::compress::worth_keeping(identity.len(), c.len()) => c,
        _ => return Ok(Body::full(identity)),
    };
    head.headers.remove(header::CONTENT_LENGTH);
    head.headers.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(coding.token()),
    );
    crate::request::hit::add_vary_accept_encoding(&mut head.headers);
    let etag = head.headers.get(header::ETAG).and_then(|v| v.to_str().ok());
    if let Some(weak) = crate::request::hit::variant_etag(etag, coding, None) {
        if let Ok(v) = HeaderValue::from_str(&weak) {
            head.headers.insert(header::ETAG, v);
        }
    }
    Ok(Body::full(coded))
}

/// RFC 9111 §4.4: removes the URL and the same-origin targets of `Location` and
/// `Content-Location`.
fn invalidate(ctx: &Ctx, url: &NormalizedUrl, resp_headers: &http::HeaderMap) {
    let mut targets = vec![url.clone()];
    for loc in freshness::invalidation_locations(resp_headers) {
        if let Some(t) = resolve(url, loc, &ctx.peek().keys) {
            // Same origin only (§4.4: "only ... if the host part is the same").
            if t.host() == url.host() && t.port() == url.port() && t.scheme() == url.scheme() {
                targets.push(t);
            }
        }
    }
    let targets: Vec<_> = targets
        .into_iter()
        .map(|t| purge::Target::Url(t.as_str().to_owned()))
        .collect();
    purge::invalidate(ctx, &targets);
    if let Some(bus) = ctx.bus() {
        bus.publish_later(crate::ops::bus::Invalidation {
            targets,
            soft: false,
            implicit: true,
        });
    }
}

/// Resolves a `Location`-style reference against the request URL (RFC 3986 §5.2,
/// for the forms origins send: absolute, absolute-path, and relative-path).
pub(crate) fn resolve(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sized_compressible_plain_gets_are_compressed_per_request() {
        let head = |fields: &[(&str, &str)]| {
            let mut r = http::Response::builder().status(200);
            for (n, v) in fields {
                r = r.header(*n, *v);
            }
            r.body(()).unwrap().into_parts().0
        };
        let accept = |v: &str| {
            let mut h = http::HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            encoding::parse_accept_encoding(&h)
        };
        let html = [("content-type", "text/html; charset=utf-8")];
        let get = http::Method::GET;
        let ok = |m: &http::Method, a: &str, h: &http::response::Parts, len: Option<u64>| {
            passed_coding(m, &accept(a), h, len)
        };
        assert_eq!(
            ok(&get, "gzip", &head(&html), Some(5000)),
            Some(Coding::Gzip)
        );
        assert_eq!(
            ok(&get, "gzip, br", &head(&html), Some(5000)),
            Some(Coding::Br)
        );
        assert_eq!(ok(&get, "identity", &head(&html), Some(5000)), None);
        assert_eq!(
            ok(&http::Method::HEAD, "gzip", &head(&html), Some(5000)),
            None
        );
        assert_eq!(ok(&get, "gzip", &head(&html), None), None, "length unknown");
        assert_eq!(ok(&get, "gzip", &head(&html), Some(100)), None, "too small");
        let big = Some(PASS_COMPRESS_MAX + 1);
        assert_eq!(ok(&get, "gzip", &head(&html), big), None, "too large");
        let png = [("content-type", "image/png")];
        assert_eq!(ok(&get, "gzip", &head(&png), Some(5000)), None);
        let coded = [html[0], ("content-encoding", "gzip")];
        assert_eq!(ok(&get, "gzip", &head(&coded), Some(5000)), None);
        let nt = [html[0], ("cache-control", "private, No-Transform")];
        assert_eq!(
            ok(&get, "gzip", &head(&nt), Some(5000)),
            None,
            "RFC 9110 §7.7"
        );
        let mut not_ok = head(&html);
        not_ok.status = http::StatusCode::NOT_FOUND;
        assert_eq!(ok(&get, "gzip", &not_ok, Some(5000)), None);
    }

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
