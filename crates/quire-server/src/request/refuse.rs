//! Request heads refused before routing: what RFC 9110/9112 says a server must not
//! act on, checked once on every request that reaches the service (the fast path
//! hands such heads to hyper, see `fastpath::parse`, so they end up here too).
//!
//! Key decisions:
//! - **Two `Host` fields are a 400** (RFC 9112 §3.2). Which one a cache keys on
//!   and which one the origin routes on could differ: the classic poisoning shape.
//! - **`CONNECT` is answered 501**, never forwarded: quire is not a forward proxy,
//!   and a forwarded `CONNECT` left the client waiting for a tunnel that never came.
//! - **A transfer coding other than `chunked` is a 501** (RFC 9112 §6.1): quire
//!   decodes only chunked framing, so `gzip, chunked` would reach the origin as
//!   other bytes than the client sent.
//!
//! Refusals close nothing themselves: hyper keeps or closes the connection as its
//! framing rules say (a request with a body it could not frame is never reused).

use http::header::{self, HeaderMap};
use http::{Method, Request, StatusCode};

/// Why a request is refused: the status and a one-line reason for the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// 400 or 501.
    pub status: StatusCode,
    /// Plain text for the response body.
    pub reason: &'static str,
}

/// The refusal `req` earns, if any.
pub(crate) fn check<B>(req: &Request<B>) -> Option<Refusal> {
    if req.method() == Method::CONNECT {
        return Some(Refusal {
            status: StatusCode::NOT_IMPLEMENTED,
            reason: "CONNECT is not supported: quire is not a forward proxy",
        });
    }
    let h = req.headers();
    if h.get_all(header::HOST).iter().count() > 1 {
        return Some(Refusal {
            status: StatusCode::BAD_REQUEST,
            reason: "more than one Host field",
        });
    }
    if !only_chunked(h) {
        return Some(Refusal {
            status: StatusCode::NOT_IMPLEMENTED,
            reason: "unsupported transfer coding: only chunked is understood",
        });
    }
    None
}

/// Whether every transfer coding named is `chunked` (or none is).
fn only_chunked(h: &HeaderMap) -> bool {
    h.get_all(header::TRANSFER_ENCODING).iter().all(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .all(|c| c.eq_ignore_ascii_case("chunked"))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, fields: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().method(method).uri("/x");
        for (k, v) in fields {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn refusals() {
        let status = |r: &Request<()>| check(r).map(|r| r.status.as_u16());
        assert_eq!(status(&req("GET", &[("host", "a")])), None);
        assert_eq!(
            status(&req("GET", &[("host", "a"), ("host", "a")])),
            Some(400)
        );
        assert_eq!(status(&req("CONNECT", &[("host", "a:443")])), Some(501));
        let te = |v| req("POST", &[("host", "a"), ("transfer-encoding", v)]);
        assert_eq!(status(&te("chunked")), None);
        assert_eq!(status(&te("Chunked")), None);
        assert_eq!(status(&te("gzip, chunked")), Some(501));
        assert_eq!(status(&te("chunked, identity")), Some(501));
    }
}
