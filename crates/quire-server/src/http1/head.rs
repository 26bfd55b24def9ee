//! The request heads the HTTP/1.1 fast path takes ([`Plain`]): `GET` or `HEAD`,
//! HTTP/1.1, origin-form, no body and no connection-level fields, parsed with
//! `httparse` into slices of the connection's buffer. Anything else is hyper's.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri};

use crate::upstream::origin::OutBody;

/// Most header lines the fast path parses; more goes to hyper.
const HEADERS_MAX: usize = 64;

/// A request head the fast path can take: `GET` or `HEAD`, HTTP/1.1, origin-form,
/// no body and no connection-level fields.
pub(crate) struct Plain {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) headers: HeaderMap,
    /// A range, or a precondition meant for the origin (`If-Match`,
    /// `If-Unmodified-Since`, `If-Range`): the service's to answer.
    pub(crate) ranged_or_conditional: bool,
}

impl Plain {
    /// The target as sent (origin-form: path and query).
    pub(crate) fn path(&self) -> &str {
        self.uri.path_and_query().map_or("/", |p| p.as_str())
    }

    /// Its fields' map, emptied (its memory kept) for the next request.
    pub(crate) fn into_fields(self) -> HeaderMap {
        let mut h = self.headers;
        h.clear();
        h
    }

    /// The request as [`crate::request::service`] takes it.
    pub(crate) fn into_request(self) -> http::Request<OutBody> {
        let mut req = http::Request::new(crate::upstream::origin::empty_body());
        *req.method_mut() = self.method;
        *req.uri_mut() = self.uri;
        *req.version_mut() = http::Version::HTTP_11;
        *req.headers_mut() = self.headers;
        req
    }
}

/// Parses `head`; `None` for anything that needs hyper's protocol handling: a
/// malformed head, another method or version, an absolute or `*` target, a body,
/// framing, upgrade or connection-level fields, `Expect`, a second `Host`. The
/// target and the field values are slices of `head`, not copies; the fields go into
/// `headers` (emptied first), whose memory a connection reuses.
pub(crate) fn parse(head: &Bytes, mut headers: HeaderMap) -> Option<Plain> {
    let mut fields = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut req = httparse::Request::new(&mut fields);
    if !matches!(req.parse(head), Ok(httparse::Status::Complete(_))) {
        return None;
    }
    let method = match req.method? {
        "GET" => Method::GET,
        "HEAD" => Method::HEAD,
        _ => return None,
    };
    if req.version != Some(1) {
        return None;
    }
    let path = req.path?;
    if !path.starts_with('/') {
        return None;
    }
    headers.clear();
    headers.reserve(req.headers.len());
    let mut ranged_or_conditional = false;
    for f in req.headers.iter() {
        let name = HeaderName::from_bytes(f.name.as_bytes()).ok()?;
        if matches!(
            name,
            header::CONTENT_LENGTH
                | header::TRANSFER_ENCODING
                | header::CONNECTION
                | header::UPGRADE
                | header::EXPECT
                | header::TE
        ) {
            return None;
        }
        if name == crate::upstream::PEER_HEADER {
            // A cluster peer's request: the service checks who sent it and stamps
            // the answer with the log position (see `crate::ops::bus`).
            return None;
        }
        if name == header::HOST && headers.contains_key(header::HOST) {
            // Two `Host` fields: the service refuses them (see `crate::request::refuse`).
            return None;
        }
        // (`If-None-Match` and `If-Modified-Since` are answered on the fast path: a
        // browser's reload sends them.)
        ranged_or_conditional |= matches!(
            name,
            header::IF_MATCH | header::IF_UNMODIFIED_SINCE | header::IF_RANGE | header::RANGE
        );
        let value = HeaderValue::from_maybe_shared(head.slice_ref(f.value)).ok()?;
        headers.append(name, value);
    }
    let uri = Uri::from_maybe_shared(head.slice_ref(path.as_bytes())).ok()?;
    Some(Plain {
        method,
        uri,
        headers,
        ranged_or_conditional,
    })
}
