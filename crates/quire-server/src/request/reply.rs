//! The small answers quire writes itself rather than serves or forwards: plain-text
//! errors and refusals, each with a `Cache-Status` saying why.
//!
//! Every module that answers on its own (the service, the admin API, pass-through)
//! takes these from here, below all of them, so none has to reach up into another
//! for a 400.

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use quire_http::status::{CacheStatus, Fwd};

use crate::request::body::Body;
use crate::request::refuse::Refusal;
use crate::upstream::origin::OriginError;

/// A plain-text response quire writes itself, with `Cache-Status`.
pub(crate) fn plain(code: StatusCode, text: &str, status: CacheStatus) -> Response<Body> {
    let mut r = Response::new(Body::full(text.to_owned()));
    *r.status_mut() = code;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
    h.insert("cache-status", status.to_header_value());
    r
}

/// `r` with `Connection: close`: after it the connection's framing cannot be trusted.
fn closing(mut r: Response<Body>) -> Response<Body> {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// The answer to a refused request head (see [`crate::request::refuse`]): it closes the
/// connection.
pub(crate) fn refused(r: Refusal) -> Response<Body> {
    let status = CacheStatus::default().with_detail("refused");
    closing(plain(r.status, &format!("{}\n", r.reason), status))
}

/// 429 for a client over its rate (see [`crate::edge::rate_limit`]), with the seconds
/// until it may try again; the connection stays open.
pub(crate) fn too_many_requests(wait: std::time::Duration) -> Response<Body> {
    let status = CacheStatus::default().with_detail("rate-limited");
    let mut r = plain(
        StatusCode::TOO_MANY_REQUESTS,
        "too many requests from this address; try again later\n",
        status,
    );
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
    r
}

/// 503 when the budget of uncached work had no slot for the request in time
/// (`[budget]`, `crate::edge::budget`): try again in `retry_after` seconds.
pub(crate) fn budget_refused(retry_after: u64, status: CacheStatus) -> Response<Body> {
    let mut r = plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server is busy with other requests; try again shortly\n",
        status.with_detail("budget"),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after.max(1)));
    r
}

/// 503 when every upgraded-connection slot is taken (`limits.upgrades`).
pub(crate) fn no_tunnel_slot() -> Response<Body> {
    let status = CacheStatus::default().with_detail("upgrades-full");
    let mut r = plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "too many upgraded connections; try again later\n",
        status,
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// A 400 that closes the connection (the framing may be off).
pub(crate) fn bad_request(why: &str) -> Response<Body> {
    let status = CacheStatus::default().with_detail("bad-request");
    let text = format!("bad request: {why}\n");
    closing(plain(StatusCode::BAD_REQUEST, &text, status))
}

/// 400 for a request whose framing is sound but whose head names no client (a
/// trusted proxy's `X-Forwarded-For`, see [`crate::edge::client`]): the connection
/// stays, since it carries other clients' requests.
pub(crate) fn unnamed_client(why: &str) -> Response<Body> {
    let status = CacheStatus::default().with_detail("bad-request");
    plain(
        StatusCode::BAD_REQUEST,
        &format!("bad request: {why}\n"),
        status,
    )
}

/// The answer when the client's own request body failed while it was forwarded:
/// 400, and the connection closes (its framing is lost).
pub(crate) fn client_body_error(status: CacheStatus) -> Response<Body> {
    closing(plain(
        StatusCode::BAD_REQUEST,
        "bad request: the request body was malformed or cut short\n",
        status.with_detail("bad-request-body"),
    ))
}

/// The answer when the origin failed (502) or timed out (504).
pub(crate) fn origin_error(e: &OriginError, status: CacheStatus) -> Response<Body> {
    if e.kind() == Some(crate::upstream::error::FailureKind::Overloaded) {
        return budget_refused(crate::edge::budget::Refused::Deadline.retry_after(), status);
    }
    let code = e.status();
    let status = status.with_detail(match e {
        OriginError::Timeout => "origin-timeout",
        OriginError::Failed(_) => "origin-error",
    });
    let text = format!("{}\n", code.canonical_reason().unwrap_or("error"));
    plain(code, &text, status)
}

/// RFC 9111 §5.2.1.7: `only-if-cached` with nothing usable stored → 504.
pub(crate) fn only_if_cached() -> Response<Body> {
    plain(
        StatusCode::GATEWAY_TIMEOUT,
        "not cached (only-if-cached)\n",
        CacheStatus::forward(Fwd::Miss).with_detail("only-if-cached"),
    )
}

/// The origin failed and the stale copy `stale-if-error` allowed is gone too.
pub(crate) fn stale_gone() -> Response<Body> {
    plain(
        StatusCode::BAD_GATEWAY,
        "origin failed and the stale copy is gone\n",
        CacheStatus::forward(Fwd::Stale).with_detail("origin-error"),
    )
}
